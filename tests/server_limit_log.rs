//! A server that cannot start for `max_running_servers` says so once
//! (issue 27, 9), however often its session's agent lists the servers:
//! the log has one warning; each listing shows the reason and the cap in
//! the entry. Alone in its test binary, like `server_log.rs`: `tracing`
//! caches whether a call site is enabled across threads.
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]

mod support;

use acp_lsp::lsp::config::{Config, ServerConfig};
use acp_lsp::lsp::registry::{Registry, RegistryOptions};
use acp_lsp_core::gate::{Gate, GateConfig, GateMethod};
use acp_lsp_core::jsonrpc::RequestId;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use support::captured_log::CapturedLog;
use support::fake::fake_server;

const POLLS: u64 = 20;
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

fn workspace(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    let root = dir.path().canonicalize().expect("canonical").join(name);
    std::fs::create_dir(&root).expect("mkdir");
    std::fs::write(root.join("fake.toml"), "").expect("marker");
    std::fs::write(root.join("a.fake"), "a\n").expect("file");
    root
}

#[tokio::test]
async fn a_server_refused_for_the_cap_is_logged_once_and_shown_each_time() {
    let (log, _guard) = CapturedLog::install(tracing::Level::INFO);
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second) = (workspace(&dir, "a"), workspace(&dir, "b"));
    let server = ServerConfig::new(
        "fake",
        fake_server(),
        &[],
        &["fake"],
        &["fake"],
        &["fake.toml"],
    );
    let config = Config {
        servers: vec![server],
        max_running_servers: 1,
        ..Config::builtin()
    };
    let registry = Registry::new(
        config,
        RegistryOptions {
            start_when_listed: true,
            ..RegistryOptions::default()
        },
    );
    let gate = Gate::new(Arc::clone(&registry), GateConfig::default());
    let call = |id: u64, session: &str| {
        let raw =
            serde_json::value::to_raw_value(&json!({ "sessionId": session })).expect("params");
        let call = gate.call(RequestId::from_u64(id), GateMethod::Servers, Some(raw));
        async move {
            let bytes = tokio::time::timeout(CALL_TIMEOUT, call)
                .await
                .expect("an answer");
            serde_json::from_slice::<Value>(&bytes).expect("JSON")
        }
    };
    // Session a's server holds the one place: b opens only once a's server
    // has started (opened together, either session's start may come first).
    gate.open_session("a", vec![first]);
    let listed = call(0, "a").await;
    assert_ne!(
        listed["result"]["servers"][0]["state"],
        json!("not_running"),
        "{listed}"
    );
    gate.open_session("b", vec![second]);
    // Session b's agent polls, as an agent written to the RFD does.
    for id in 1..=POLLS {
        let listed = call(id, "b").await;
        let entry = &listed["result"]["servers"][0];
        assert_eq!(entry["state"], json!("not_running"), "{listed}");
        assert_eq!(
            entry["_meta"]["acp-lsp"]["stateReason"],
            json!({"reason": "server_limit", "limit": 1}),
            "{listed}"
        );
    }
    registry.shutdown().await;
    let events = log.events();
    let warnings: Vec<&Value> = events
        .iter()
        .filter(|e| e["level"] == "WARN" && e["limit"] == "max_running_servers")
        .collect();
    assert_eq!(
        warnings.len(),
        1,
        "one warning for {POLLS} listings: {warnings:#?}"
    );
    assert_eq!(warnings[0]["value"], 1, "{}", warnings[0]);
}
