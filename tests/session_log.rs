//! What the host logs while serving an `lsp/request` sits in the session's
//! span, so one session's lines can be followed in a JSON log. Alone in its
//! test binary, like `server_log.rs`: `tracing`'s call-site cache would race
//! other tests' threads.

mod support;

use acp_lsp::lsp::registry::RegistryOptions;
use acp_lsp_core::gate::GateMethod;
use serde_json::json;
use support::captured_log::CapturedLog;
use support::fake::{FakeServer, SESSION};

#[tokio::test]
async fn a_requests_log_line_is_in_its_sessions_span() {
    let (log, _guard) = CapturedLog::install(tracing::Level::DEBUG);
    let (fake, _) = FakeServer::start("", RegistryOptions::default(), |_| {}, |_, _| {}).await;
    let mut params = fake.hover_params(&fake.uri("a.fake"));
    params["_meta"] = json!({"waitUntilReady": 30_000});
    let answer = fake.call(GateMethod::Request, params).await;
    assert!(answer.get("result").is_some(), "{answer}");
    fake.registry.shutdown().await;

    let events = log.events();
    let request = events
        .iter()
        .find(|e| e["message"] == "lsp/request")
        .unwrap_or_else(|| panic!("no lsp/request line: {events:#?}"));
    assert_eq!(request["outcome"], "ok", "{request}");
    assert_eq!(request["span"]["name"], "session", "{request}");
    assert_eq!(request["span"]["session"], SESSION, "{request}");
}
