//! What the host logs while serving an `lsp/request` sits in the session's
//! span, so one session's lines can be followed in a JSON log. Alone in its
//! test binary, like `server_log.rs`: `tracing`'s call-site cache would race
//! other tests' threads.

mod support;

use acp_lsp::gate::GateMethod;
use acp_lsp::lsp::registry::RegistryOptions;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use support::fake::{FakeServer, SESSION};

/// Log lines written while it is alive, as JSON objects (one per event).
#[derive(Clone, Default)]
struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_requests_log_line_is_in_its_sessions_span() {
    let log = CapturedLog::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let (fake, _) = FakeServer::start("", RegistryOptions::default(), |_| {}, |_, _| {}).await;
    let mut params = fake.hover_params(&fake.uri("a.fake"));
    params["_meta"] = json!({"waitUntilReady": 30_000});
    let answer = fake.call(GateMethod::Request, params).await;
    assert!(answer.get("result").is_some(), "{answer}");
    fake.registry.shutdown().await;

    let bytes = log.0.lock().expect("log").clone();
    let events: Vec<Value> = String::from_utf8_lossy(&bytes)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    let request = events
        .iter()
        .find(|e| e["message"] == "lsp/request")
        .unwrap_or_else(|| panic!("no lsp/request line: {events:#?}"));
    assert_eq!(request["outcome"], "ok", "{request}");
    assert_eq!(request["span"]["name"], "session", "{request}");
    assert_eq!(request["span"]["session"], SESSION, "{request}");
}
