//! Log lines as an operator reads them, captured from a subscriber of the
//! test's own. Alone in its test binary: `tracing` caches whether a call site
//! is enabled, and another test's thread without a subscriber racing this one
//! could have the cache say "off" (a missed line, a flaky test).

mod support;

use acp_lsp::lsp::registry::RegistryOptions;
use acp_lsp::lsp::server::MAX_CRASHES;
use acp_lsp_core::gate::ServerState;
use serde_json::Value;
use std::time::Duration;
use support::captured_log::CapturedLog;
use support::fake::FakeServer;

/// Longest wait for the crash loop to end in `failed` (five crashes with backoff).
const STATE_TIMEOUT: Duration = Duration::from_secs(60);

/// The crash loop's story at `info`: each spawn, each restart with why,
///     and the failure (a current-thread runtime: the supervisor's lines are
///     written on this thread, to this test's subscriber).
#[tokio::test]
async fn a_crash_loop_logs_each_restart_with_why_and_the_failure() {
    let (log, _guard) = CapturedLog::install(tracing::Level::INFO);
    let (fake, _) = FakeServer::start(
        "crash_on_start",
        RegistryOptions::default(),
        |_| {},
        |_, _| {},
    )
    .await;
    tokio::time::timeout(
        STATE_TIMEOUT,
        fake.server().wait_for_state(|s| s == ServerState::Failed),
    )
    .await
    .expect("the crash loop ends in failed");
    fake.registry.shutdown().await;

    let events = log.events();
    let named = |message: &str| -> Vec<&Value> {
        events.iter().filter(|e| e["message"] == message).collect()
    };
    assert_eq!(named("server spawned").len(), MAX_CRASHES, "{events:#?}");
    let restarts = named("server restarted");
    assert_eq!(restarts.len(), MAX_CRASHES - 1, "{events:#?}");
    for (n, restart) in restarts.iter().enumerate() {
        assert_eq!(restart["restarts"], n as u64 + 1, "{restart}");
        assert!(
            restart["why"]
                .as_str()
                .is_some_and(|why| why.contains("exit status: 4")),
            "{restart}"
        );
    }
    let failed = named("server failed; not restarting");
    assert_eq!(failed.len(), 1, "{events:#?}");
    assert_eq!(failed[0]["level"], "ERROR", "{}", failed[0]);
    assert!(
        named("server ready").is_empty(),
        "it never got ready: {events:#?}"
    );
}
