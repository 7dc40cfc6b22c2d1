//! A server whose first load never reports its end (issue 27, 8): work-done
//! progress begun before the first load and never ended (real servers leak
//! tokens: a cancelled flycheck, a crashed indexing thread) does not keep it
//! `starting` for ever. After its first-load wait it is `running`, with
//! `_meta["acp-lsp"].stateReason` saying why; past the progress table's cap
//! at once. The fake server scripts the fault.
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]

mod support;

use acp_lsp::lsp::registry::RegistryOptions;
use acp_lsp::lsp::server::{FIRST_LOAD_WAIT, MAX_PROGRESS_TOKENS};
use acp_lsp_core::gate::GateMethod;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::fake::{FakeServer, SESSION};

/// `waitUntilReady` the requests give: the 90 s the probe gave.
const WAIT_UNTIL_READY_MS: u64 = 90_000;
/// The first-load wait these tests configure (far below the default).
const TEST_FIRST_LOAD_WAIT_MS: u64 = 1_500;

async fn hover(fake: &FakeServer, wait_ms: u64) -> Value {
    fake.call(
        GateMethod::Request,
        json!({
            "sessionId": SESSION,
            "serverId": fake.server_id,
            "method": "textDocument/hover",
            "params": {"textDocument": {"uri": fake.uri("a.fake")},
                       "position": {"line": 0, "character": 1}},
            "_meta": {"waitUntilReady": wait_ms},
        }),
    )
    .await
}

#[test]
fn the_default_first_load_wait_is_below_a_typical_ready_wait() {
    assert!(FIRST_LOAD_WAIT < Duration::from_millis(WAIT_UNTIL_READY_MS));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_that_never_ends_holds_the_server_only_for_the_first_load_wait() {
    // Three progress begins after `initialized`, none ever ended.
    let (fake, _) = FakeServer::start(
        "flood_progress=3",
        RegistryOptions::default(),
        |_| {},
        |server, _| server.first_load_wait_ms = TEST_FIRST_LOAD_WAIT_MS,
    )
    .await;
    let asked = Instant::now();
    let answer = hover(&fake, WAIT_UNTIL_READY_MS).await;
    let waited = asked.elapsed();
    assert!(answer["result"].is_object(), "{answer}");
    // It waited for the first-load wait, not for the request's 90 s.
    assert!(
        waited < Duration::from_millis(WAIT_UNTIL_READY_MS / 3),
        "answered after {waited:?}"
    );
    let entry = fake.servers().await.remove(0);
    assert_eq!(entry["state"], json!("running"), "{entry}");
    // Still loading as far as the server says: the finer status keeps it.
    assert_eq!(
        entry["_meta"]["acp-lsp"]["status"],
        json!("indexing"),
        "{entry}"
    );
    assert_eq!(
        entry["_meta"]["acp-lsp"]["stateReason"],
        json!({"reason": "first_load_timeout", "waitedMs": TEST_FIRST_LOAD_WAIT_MS, "openProgress": 3}),
        "{entry}"
    );
    // An agent that knows only the RFD sees `running` and may ask at once.
    let at_once = hover(&fake, 0).await;
    assert!(at_once["result"].is_object(), "{at_once}");
    fake.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_beyond_the_tables_cap_does_not_hold_the_server() {
    // More begins than the table keeps: the end of the load cannot be known.
    let flood = MAX_PROGRESS_TOKENS + 72;
    let (fake, _) = FakeServer::start(
        &format!("flood_progress={flood}"),
        RegistryOptions::default(),
        |_| {},
        // The default wait: the cap, not the wait, must let it run.
        |_, _| {},
    )
    .await;
    let asked = Instant::now();
    let answer = hover(&fake, WAIT_UNTIL_READY_MS).await;
    assert!(answer["result"].is_object(), "{answer}");
    assert!(
        asked.elapsed() < FIRST_LOAD_WAIT / 2,
        "held for {:?}",
        asked.elapsed()
    );
    let entry = fake.servers().await.remove(0);
    assert_eq!(entry["state"], json!("running"), "{entry}");
    assert_eq!(
        entry["_meta"]["acp-lsp"]["stateReason"],
        json!({"reason": "progress_over_cap", "limit": MAX_PROGRESS_TOKENS}),
        "{entry}"
    );
    fake.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ends_its_load_says_no_reason() {
    // No progress at all: ready at once. Once the first-load wait has
    // passed, nothing was assumed about it.
    let (fake, _) = FakeServer::start(
        "",
        RegistryOptions::default(),
        |_| {},
        |server, _| server.first_load_wait_ms = TEST_FIRST_LOAD_WAIT_MS,
    )
    .await;
    let answer = hover(&fake, WAIT_UNTIL_READY_MS).await;
    assert!(answer["result"].is_object(), "{answer}");
    tokio::time::sleep(Duration::from_millis(TEST_FIRST_LOAD_WAIT_MS * 2)).await;
    let entry = fake.servers().await.remove(0);
    assert_eq!(entry["state"], json!("running"), "{entry}");
    assert!(
        entry["_meta"]["acp-lsp"].get("stateReason").is_none(),
        "{entry}"
    );
    fake.registry.shutdown().await;
}
