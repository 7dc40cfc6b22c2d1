//! Fault tests of the server supervisor, the registry and the gate against the
//! scriptable `acp-lsp-fake-server`: crashes, crash loops, hangs, shutdown
//! that is ignored, forked helpers, stderr floods, garbage and huge output,
//! server-initiated requests and cancellation, plus one test that `kill -9`s
//! the real `acp-lsp proxy` binary and checks that its servers go with it.
//!
//! Every test ends with `Registry::shutdown` and checks that no process it saw
//! is left alive.
//!
//! On Windows (under wine in CI) the fake-server tests run too: liveness and
//! the process tree come from `OpenProcess` and a ToolHelp snapshot instead
//! of /proc, and the Job Object stands where the process group does. The
//! tests of the `acp-lsp proxy` binary (`kill -9`, SIGTERM to the tree) and
//! the rustup stub (a shell script) are Unix only; the Job Object's kill on
//! close is `tests/process_lifecycle.rs`'s. docs/testing.md lists them.
#![cfg(any(target_os = "linux", windows))]

mod support;

#[cfg(unix)]
use support::fake::FakeProject;
use support::fake::{assert_echo, read_log, FakeServer, CALL_TIMEOUT, HOVER};
#[cfg(target_os = "linux")]
use support::procfs::{descendants, group_members, process_group, processes_with_env, program};
use support::procfs::{process_alive, wait_until_gone};
#[cfg(target_os = "linux")]
use support::proxy::{ProxyBuilder, ANSWERING_AGENT};
#[cfg(windows)]
use support::windows_processes::in_a_job;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use acp_lsp::lsp::config::ServerConfig;
use acp_lsp::lsp::connection::{Connection, Reply, ServerMessages};
use acp_lsp::lsp::registry::RegistryOptions;
use acp_lsp::lsp::server::MAX_CRASHES;
use acp_lsp_core::gate::{GateMethod, ServerState};
use acp_lsp_core::jsonrpc::{ErrorObject, Limits};
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// Longest wait for a server to reach a lifecycle state (a crash loop takes
/// 0 + 0.5 + 1 + 2 s of backoff before it fails).
const STATE_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for killed processes to disappear from /proc, or for a file to appear.
const GONE_TIMEOUT: Duration = Duration::from_secs(10);
/// "Promptly": far below any request deadline used here.
const PROMPT: Duration = Duration::from_secs(5);
/// JSON-RPC internal error, used for every server-side failure.
const INTERNAL_ERROR: i64 = -32603;
/// ACP/LSP request cancelled.
const REQUEST_CANCELLED: i64 = -32800;
/// JSON-RPC invalid params (not ready, still starting).
const INVALID_PARAMS: i64 = -32602;
/// The proxy's frame limit (32 MiB).
const FRAME_LIMIT: usize = acp_lsp_core::jsonrpc::limits::DEFAULT_MAX_LSP_FRAME;

// ---------------------------------------------------------------- /proc

/// Polls until `read` yields something, or panics after [`GONE_TIMEOUT`].
async fn poll_for<T>(what: &str, read: impl FnMut() -> Option<T>) -> T {
    support::wait::until(what, GONE_TIMEOUT, read).await
}

fn read_pid_file(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

// ---------------------------------------------------------------- harness

/// The fake harness, with every process this test saw: all must be gone
/// after shutdown.
struct Fake {
    fake: FakeServer,
    pids: Mutex<Vec<u32>>,
    /// Windows: one fault test at a time in this binary, since a test tells
    /// its fake servers from another test's by being this process's only
    /// ones (Linux tells them apart by their `FAKE_LSP_LOG`).
    #[cfg(windows)]
    _alone: tokio::sync::MutexGuard<'static, ()>,
}

/// Held by the one [`Fake`] alive on Windows.
#[cfg(windows)]
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What `lastError` says of a server that exited with `code` (std's
/// `ExitStatus` display).
fn exit_text(code: i32) -> String {
    if cfg!(windows) {
        format!("exit code: {code}")
    } else {
        format!("exit status: {code}")
    }
}

/// Ends `pid` at once: clean-up of what a failing test left running.
fn kill_now(pid: u32) {
    #[cfg(unix)]
    {
        // SAFETY: kill only sends a signal.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
        }
    }
    #[cfg(windows)]
    support::windows_processes::kill(pid);
}

impl std::ops::Deref for Fake {
    type Target = FakeServer;

    fn deref(&self) -> &FakeServer {
        &self.fake
    }
}

impl Fake {
    /// Starts a session over a fresh workspace whose one server is the fake in
    /// `mode`; `tweak` adjusts the server's configuration.
    async fn start(mode: &str, tweak: impl FnOnce(&mut ServerConfig, &Path)) -> Fake {
        #[cfg(windows)]
        let alone = ONE_AT_A_TIME.lock().await;
        let (fake, entry) =
            FakeServer::start(mode, RegistryOptions::default(), |_| {}, tweak).await;
        assert_eq!(entry["name"], "fake");
        assert_eq!(entry["workspacePath"], fake.root.display().to_string());
        Fake {
            fake,
            pids: Mutex::new(Vec::new()),
            #[cfg(windows)]
            _alone: alone,
        }
    }

    /// Our server's `lsp/servers` entry; notes its pid.
    async fn entry(&self) -> Value {
        let entry = self
            .servers()
            .await
            .into_iter()
            .find(|s| s["serverId"] == self.server_id.as_str())
            .expect("our server is listed");
        if let Some(pid) = entry["_meta"]["acp-lsp"]["pid"].as_u64() {
            self.note_pid(u32::try_from(pid).expect("pid fits u32"));
        }
        entry
    }

    fn note_pid(&self, pid: u32) {
        let mut pids = self.pids.lock().expect("pid list lock");
        if !pids.contains(&pid) {
            pids.push(pid);
        }
    }

    /// The params of [`Fake::request`].
    fn request_params(&self, wait_until_ready: Option<u64>) -> Value {
        let mut params = self.hover_params(&self.uri("a.fake"));
        if let Some(ms) = wait_until_ready {
            params["waitUntilReady"] = json!(ms);
        }
        params
    }

    /// One `lsp/request` (hover on `a.fake`).
    async fn request(&self, wait_until_ready: Option<u64>) -> Value {
        self.call(GateMethod::Request, self.request_params(wait_until_ready))
            .await
    }

    async fn wait_state(&self, what: &str, f: impl Fn(ServerState) -> bool) -> ServerState {
        tokio::time::timeout(STATE_TIMEOUT, self.server().wait_for_state(f))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "server never became {what}; it is {:?}",
                    self.server().status()
                )
            })
    }

    async fn wait_ready(&self) {
        self.wait_state("ready", |s| s == ServerState::Ready).await;
        self.entry().await;
    }

    /// Waits until the server has restarted at least `restarts` times and is ready again.
    async fn wait_restarted(&self, restarts: u64) -> Value {
        loop {
            let state = self
                .wait_state("ready or failed", |s| {
                    matches!(s, ServerState::Ready | ServerState::Failed)
                })
                .await;
            assert_eq!(state, ServerState::Ready, "{:?}", self.server().status());
            let entry = self.entry().await;
            if entry["_meta"]["acp-lsp"]["restarts"]
                .as_u64()
                .expect("restarts is a number")
                >= restarts
            {
                return entry;
            }
            // Still the old instance's `ready`: the supervisor has not noticed
            // the exit yet (it bumps `restarts` before starting the next
            // instance, so no restart can have completed in between).
            let state = self
                .wait_state("not ready", |s| s != ServerState::Ready)
                .await;
            assert_eq!(
                state,
                ServerState::Restarting,
                "{:?}",
                self.server().status()
            );
        }
    }

    /// Running instances of this test's fake server.
    fn instances(&self) -> Vec<u32> {
        #[cfg(target_os = "linux")]
        return processes_with_env("FAKE_LSP_LOG", &self.log.display().to_string());
        #[cfg(windows)]
        return support::windows_processes::descendants_named(
            std::process::id(),
            "acp-lsp-fake-server.exe",
        );
    }

    /// Stops everything and checks that no process this test saw survives.
    /// Returns the temporary directory (with the fake's log) to look at.
    async fn finish(self) -> tempfile::TempDir {
        for pid in self.instances() {
            self.note_pid(pid);
        }
        let started = Instant::now();
        self.fake.shut_down().await;
        let took = started.elapsed();
        let pids = self.pids.lock().expect("pid list lock").clone();
        let survivors = wait_until_gone(&pids, GONE_TIMEOUT).await;
        for pid in &survivors {
            // Do not leak them into the next test run.
            kill_now(*pid);
        }
        assert!(
            survivors.is_empty(),
            "processes left after shutdown (took {took:?}): {survivors:?} of {pids:?}"
        );
        assert_eq!(
            self.instances(),
            Vec::<u32>::new(),
            "fake servers left running"
        );
        self.fake.dir
    }
}

/// The error object of a response, checked to be an error.
fn error_of(response: &Value) -> &Value {
    let error = &response["error"];
    assert!(error.is_object(), "expected an error, got {response}");
    error
}

fn assert_error(response: &Value, code: i64, reason: &str) {
    let error = error_of(response);
    assert_eq!(error["code"], code, "{response}");
    assert_eq!(error["data"]["reason"], reason, "{response}");
}

// ---------------------------------------------------------------- tests

/// 1. A crash with a request in flight fails that request at once with a
///    retryable `server_exited`, and the same server id comes back.
#[tokio::test]
async fn crash_mid_request_fails_it_promptly_and_the_server_restarts() {
    let fake = Fake::start("crash_on_request", |_, _| {}).await;
    fake.wait_ready().await;
    let first_pid = fake.entry().await["_meta"]["acp-lsp"]["pid"]
        .as_u64()
        .expect("a pid when ready");

    let started = Instant::now();
    let response = fake.request(None).await;
    let took = started.elapsed();
    assert_error(&response, INTERNAL_ERROR, "server_exited");
    let data = &error_of(&response)["data"];
    assert_eq!(data["retryable"], true, "{response}");
    assert_eq!(data["serverId"], fake.server_id.as_str(), "{response}");
    assert_eq!(data["method"], HOVER, "{response}");
    assert!(took < PROMPT, "the crash was reported after {took:?}");

    let entry = fake.wait_restarted(1).await;
    assert_eq!(entry["serverId"], fake.server_id.as_str());
    assert_eq!(entry["state"], "running");
    assert_ne!(
        entry["_meta"]["acp-lsp"]["pid"].as_u64(),
        Some(first_pid),
        "a new process"
    );
    let last_error = entry["_meta"]["acp-lsp"]["lastError"]
        .as_str()
        .unwrap_or_default();
    assert!(
        last_error.contains(&exit_text(3)),
        "lastError should say how it exited: {entry}"
    );
    fake.finish().await;
}

/// 1b. An agent retrying at once after `server_exited` (it is retryable) gets
///     a prompt answer, not a request lost on the dead connection: a
///     retryable refusal while the server restarts, and with
///     `waitUntilReady`, the new instance's answer.
#[tokio::test]
async fn an_immediate_retry_after_a_crash_is_answered_promptly() {
    const RETRIES: usize = 3;
    let fake = Fake::start("crash_on_request", |_, _| {}).await;
    fake.wait_ready().await;
    assert_error(&fake.request(None).await, INTERNAL_ERROR, "server_exited");
    for _ in 0..RETRIES {
        let started = Instant::now();
        let response = fake.request(None).await;
        let took = started.elapsed();
        let data = &error_of(&response)["data"];
        // The old connection's end, or the restart in progress: both say retry.
        assert!(
            ["server_exited", "server_not_running"]
                .contains(&data["reason"].as_str().unwrap_or("")),
            "{response}"
        );
        assert_eq!(data["retryable"], true, "{response}");
        assert!(
            took < PROMPT,
            "the retry was answered after {took:?}: {response}"
        );
        // Waiting for the restart reaches the next instance, which crashes
        // on its first request too.
        let response = fake.request(Some(10_000)).await;
        assert_error(&response, INTERNAL_ERROR, "server_exited");
    }
    fake.finish().await;
}

/// 1c. The deterministic core of 1b: once a connection's reader has ended, a
///     new request resolves at once as `Closed` instead of waiting forever.
#[tokio::test]
async fn a_request_on_a_closed_connection_resolves_at_once() {
    struct Ignore;
    impl ServerMessages for Ignore {
        fn on_request(
            &self,
            _method: &str,
            _params: Option<&RawValue>,
        ) -> Result<Box<RawValue>, ErrorObject> {
            Err(ErrorObject {
                code: -32601,
                message: "unexpected".into(),
                data: None,
            })
        }
        fn on_notification(&self, _method: &str, _params: Option<&RawValue>) {}
    }
    let (to_server, _server_in) = tokio::io::duplex(1 << 16);
    let (server_out, from_server) = tokio::io::duplex(1 << 16);
    let connection = Connection::start(
        "s",
        from_server,
        to_server,
        Limits::default(),
        Arc::new(Ignore),
        None,
    );
    drop(server_out);
    tokio::time::timeout(PROMPT, connection.closed())
        .await
        .expect("end of output closes the connection");
    let reply = tokio::time::timeout(PROMPT, connection.request("late", None))
        .await
        .expect("a request after the end is answered at once");
    assert!(matches!(reply, Reply::Closed), "{reply:?}");
    assert_eq!(connection.in_flight(), 0);
}

/// 1d. A server that exits between requests is restarted and answers again.
#[tokio::test]
async fn a_restarted_server_answers_later_requests() {
    // initialize is answer 1, the hover answer 2: then it exits.
    let fake = Fake::start("exit_after=2", |_, _| {}).await;
    fake.wait_ready().await;
    assert_echo(&fake.request(None).await, &fake.uri("a.fake"));

    let entry = fake.wait_restarted(1).await;
    assert_eq!(entry["serverId"], fake.server_id.as_str());
    // The restarted instance got the document again and answers.
    assert_echo(&fake.request(None).await, &fake.uri("a.fake"));
    let opens = read_log(&fake.log)
        .iter()
        .filter(|m| m["method"] == "textDocument/didOpen")
        .count();
    assert!(opens >= 2, "each instance is sent the document: {opens}");
    fake.finish().await;
}

/// 2. A server that cannot start is given up on after MAX_CRASHES crashes,
///    and then requests fail at once with `server_not_running` (status `failed`).
#[tokio::test]
async fn crash_loop_ends_in_failed_and_requests_fail_fast() {
    let fake = Fake::start("crash_on_start", |_, _| {}).await;
    fake.wait_state("failed", |s| s == ServerState::Failed)
        .await;
    let entry = fake.entry().await;
    assert_eq!(entry["state"], "not_running", "{entry}");
    assert_eq!(entry["_meta"]["acp-lsp"]["status"], "failed", "{entry}");
    assert_eq!(
        entry["_meta"]["acp-lsp"]["restarts"],
        (MAX_CRASHES - 1) as u64,
        "{entry}"
    );
    let last_error = entry["_meta"]["acp-lsp"]["lastError"]
        .as_str()
        .unwrap_or_default();
    assert!(last_error.contains(&exit_text(4)), "{entry}");

    let started = Instant::now();
    let response = fake.request(None).await;
    assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
    assert_error(&response, INVALID_PARAMS, "server_not_running");
    let data = &error_of(&response)["data"];
    assert_eq!(data["serverId"], fake.server_id.as_str());
    assert_eq!(data["state"], "not_running", "{response}");
    assert_eq!(data["status"], "failed", "{response}");
    assert!(
        data["lastError"]
            .as_str()
            .is_some_and(|e| e.contains(&exit_text(4))),
        "{response}"
    );
    assert!(data.get("retryable").is_none(), "{response}");
    // Waiting for readiness does not help a failed server either.
    let response = fake.request(Some(10_000)).await;
    assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
    assert_error(&response, INVALID_PARAMS, "server_not_running");
    fake.finish().await;
}

/// 2a. rustup's stub without the component (every rustup user has a
///     `rust-analyzer` on PATH that fails until `rustup component add`): no
///     restarts, `failed` at once, and the error says what to run.
#[cfg(unix)]
#[tokio::test]
async fn a_rustup_stub_fails_at_once_with_the_fix() {
    let fake = Fake::start("", |server, outside| {
        let stub = support::write_rustup_stub(outside);
        server.command = stub.display().to_string();
    })
    .await;
    fake.wait_state("failed", |s| s == ServerState::Failed)
        .await;
    let entry = fake.entry().await;
    assert_eq!(entry["_meta"]["acp-lsp"]["restarts"], 0, "{entry}");
    let response = fake.request(None).await;
    assert_error(&response, INVALID_PARAMS, "server_not_running");
    let message = error_of(&response)["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.starts_with(&format!("fake at {}", fake.root.display()))
            && message.contains("run `rustup component add rust-analyzer`"),
        "{response}"
    );
    // Waiting for a failed server ends at once, and says how long it waited
    // (not the whole wait it was given).
    const WAIT_MS: u64 = 60_000;
    let response = fake.request(Some(WAIT_MS)).await;
    let waited = error_of(&response)["data"]["waitedMs"].as_u64();
    assert!(waited.is_some_and(|ms| ms < WAIT_MS), "{response}");
    fake.finish().await;
}

/// 3. A hung request ends at its deadline, and the server is told to cancel it.
#[tokio::test]
async fn hung_request_hits_its_deadline_and_is_cancelled_on_the_server() {
    const TIMEOUT_MS: u64 = 300;
    let fake = Fake::start("hang", |server, _| {
        server.request_timeout_ms = TIMEOUT_MS;
    })
    .await;
    fake.wait_ready().await;

    let started = Instant::now();
    let response = fake.request(None).await;
    let took = started.elapsed();
    assert_error(&response, INTERNAL_ERROR, "deadline_exceeded");
    assert_eq!(error_of(&response)["data"]["retryable"], true);
    assert!(
        took >= Duration::from_millis(TIMEOUT_MS) && took < PROMPT,
        "deadline of {TIMEOUT_MS} ms hit after {took:?}"
    );

    let (request_id, cancelled) = fake
        .wait_log("$/cancelRequest for the hung request", |log| {
            let id = log.iter().find(|m| m["method"] == HOVER)?["id"].clone();
            let cancel = log
                .iter()
                .find(|m| m["method"] == "$/cancelRequest" && m["params"]["id"] == id)?;
            Some((id, cancel["params"]["id"].clone()))
        })
        .await;
    assert!(request_id.is_u64(), "the proxy's own id: {request_id}");
    assert_eq!(cancelled, request_id);
    // The server is still up and nothing restarted.
    let entry = fake.entry().await;
    assert_eq!(entry["state"], "running");
    assert_eq!(entry["_meta"]["acp-lsp"]["restarts"], 0);
    fake.finish().await;
}

/// 4a. A server that never answers `initialize`: `waitUntilReady` bounds the wait.
#[tokio::test]
async fn hung_initialize_with_wait_until_ready_reports_not_running() {
    const WAIT_MS: u64 = 500;
    let fake = Fake::start("hang_initialize", |_, _| {}).await;
    let started = Instant::now();
    let response = fake.request(Some(WAIT_MS)).await;
    let took = started.elapsed();
    assert_error(&response, INVALID_PARAMS, "server_not_running");
    let data = &error_of(&response)["data"];
    assert_eq!(data["state"], "starting", "{response}");
    assert_eq!(data["waitedMs"], WAIT_MS, "{response}");
    assert_eq!(data["retryable"], true, "{response}");
    // The RFD: the error carries the session's server list.
    assert_eq!(
        data["servers"][0]["serverId"],
        fake.server_id.as_str(),
        "{response}"
    );
    assert!(
        took >= Duration::from_millis(WAIT_MS) && took < PROMPT,
        "waited {took:?} for {WAIT_MS} ms"
    );
    let entry = fake.entry().await;
    assert_eq!(entry["state"], "starting", "{entry}");
    // The process runs and got `initialize` (its pid is listed only once connected).
    fake.wait_log("initialize", |log| {
        log.iter()
            .any(|m| m["method"] == "initialize")
            .then_some(())
    })
    .await;
    fake.finish().await;
}

/// 4b. Without `waitUntilReady`, a request to a server that is not
///     `running` fails at once with `server_not_running` (the RFD).
#[tokio::test]
async fn hung_initialize_without_wait_fails_at_once() {
    let fake = Fake::start("hang_initialize", |_, _| {}).await;
    let started = Instant::now();
    let response = fake.request(None).await;
    let took = started.elapsed();
    assert_error(&response, INVALID_PARAMS, "server_not_running");
    assert_eq!(error_of(&response)["data"]["state"], "starting");
    assert!(
        error_of(&response)["data"].get("waitedMs").is_none(),
        "{response}"
    );
    assert!(took < PROMPT, "answered after {took:?}");
    fake.finish().await;
}

#[tokio::test]
async fn shutdown_kills_a_server_that_ignores_it() {
    let fake = Fake::start("ignore_shutdown", |_, _| {}).await;
    fake.wait_ready().await;
    let pid = u32::try_from(
        fake.entry().await["_meta"]["acp-lsp"]["pid"]
            .as_u64()
            .expect("pid"),
    )
    .expect("u32");
    assert!(process_alive(pid));
    // What `finish` checks is gone is found while it runs.
    assert_eq!(fake.instances(), [pid], "the running instance is listed");
    #[cfg(unix)]
    assert_eq!(process_group(pid), Some(pid), "the server leads its group");
    #[cfg(windows)]
    assert!(in_a_job(pid), "the server runs in a job");
    let log = fake.log.clone();
    let _dir = fake.finish().await;
    #[cfg(unix)]
    assert!(group_members(pid).is_empty(), "its group is empty");
    // The polite path was tried first.
    let log = read_log(&log);
    for method in ["shutdown", "exit"] {
        assert!(
            log.iter().any(|m| m["method"] == method),
            "no {method} sent"
        );
    }
}

/// 6. Helpers a server forked die with it.
#[tokio::test]
async fn shutdown_kills_a_forked_grandchild() {
    let fake = Fake::start("fork_grandchild", |server, dir| {
        server.env.insert(
            "FAKE_LSP_GRANDCHILD_PID_FILE".into(),
            dir.join("grandchild.pid").display().to_string(),
        );
    })
    .await;
    fake.wait_ready().await;
    let server_pid = u32::try_from(
        fake.entry().await["_meta"]["acp-lsp"]["pid"]
            .as_u64()
            .expect("pid"),
    )
    .expect("u32");
    let pid_file = fake.dir.path().join("grandchild.pid");
    let grandchild = poll_for("the grandchild pid file", || read_pid_file(&pid_file)).await;
    fake.note_pid(grandchild);
    assert!(process_alive(grandchild));
    #[cfg(unix)]
    assert_eq!(process_group(grandchild), Some(server_pid));
    // Windows: the grandchild's parent is the server, and it is in a job
    // (its server's, inherited: no breakaway is allowed).
    #[cfg(windows)]
    {
        let below =
            support::windows_processes::descendants_named(server_pid, "acp-lsp-fake-server.exe");
        assert_eq!(below, [grandchild], "the server started it");
        assert!(in_a_job(grandchild), "the grandchild runs in a job");
    }
    fake.finish().await;
    assert!(!process_alive(grandchild));
}

/// 7. A server flooding stderr keeps answering.
#[tokio::test]
async fn requests_succeed_while_the_server_floods_stderr() {
    const REQUESTS: usize = 10;
    let fake = Fake::start("stderr_flood", |_, _| {}).await;
    fake.wait_ready().await;
    for _ in 0..REQUESTS {
        let started = Instant::now();
        assert_echo(&fake.request(None).await, &fake.uri("a.fake"));
        assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
    }
    let entry = fake.entry().await;
    assert_eq!(entry["state"], "running");
    assert_eq!(entry["_meta"]["acp-lsp"]["restarts"], 0);
    fake.finish().await;
}

/// 8. Non-protocol bytes on stdout are skipped; the stream resynchronises.
#[tokio::test]
async fn requests_succeed_despite_garbage_on_stdout() {
    const REQUESTS: usize = 5;
    let fake = Fake::start("garbage_stdout", |_, _| {}).await;
    fake.wait_ready().await;
    for _ in 0..REQUESTS {
        assert_echo(&fake.request(None).await, &fake.uri("a.fake"));
    }
    assert_eq!(fake.entry().await["_meta"]["acp-lsp"]["restarts"], 0);
    fake.finish().await;
}

/// 9a. A response over the frame limit fails only its request; the stream
///     stays aligned (the fake answers every request hugely, so the next one
///     is again refused with its own id, not hung).
///
/// "Not hung" is the reason: a request whose answer the reader lost waits
/// for its deadline and ends in `deadline_exceeded`. The time bound is half
/// that deadline, not [`PROMPT`]: the fake writes 33 MiB a request, which
/// took 5.1 s through wine's pipes in CI (stop 35; 0.1 s on Linux).
#[tokio::test]
async fn an_oversized_response_fails_its_request_and_the_stream_stays_aligned() {
    let huge = FRAME_LIMIT + 1024 * 1024;
    let fake = Fake::start("huge_response", |server, _| {
        server
            .env
            .insert("FAKE_LSP_HUGE_BYTES".into(), huge.to_string());
    })
    .await;
    fake.wait_ready().await;
    let pid = fake.entry().await["_meta"]["acp-lsp"]["pid"].clone();
    for _ in 0..2 {
        let started = Instant::now();
        let response = fake.request(None).await;
        assert_error(&response, INTERNAL_ERROR, "response_too_large");
        let half_the_deadline = Duration::from_millis(support::fake::LONG_REQUEST_TIMEOUT_MS / 2);
        assert!(
            started.elapsed() < half_the_deadline,
            "took {:?}",
            started.elapsed()
        );
    }
    let entry = fake.entry().await;
    assert_eq!(entry["state"], "running");
    assert_eq!(
        entry["_meta"]["acp-lsp"]["pid"], pid,
        "same process: {entry}"
    );
    assert_eq!(entry["_meta"]["acp-lsp"]["restarts"], 0);
    fake.finish().await;
}

/// 9b. A big response under the limit arrives intact.
#[tokio::test]
async fn a_large_response_under_the_limit_arrives_intact() {
    const SIZE: usize = 10 * 1024 * 1024;
    let fake = Fake::start("huge_response", |server, _| {
        server
            .env
            .insert("FAKE_LSP_HUGE_BYTES".into(), SIZE.to_string());
    })
    .await;
    fake.wait_ready().await;
    let response = fake.request(None).await;
    let text = response["result"]["lspResult"]
        .as_str()
        .unwrap_or_else(|| panic!("no string result: {:?}", response.get("error")));
    assert_eq!(text.len(), SIZE);
    assert!(text.bytes().all(|b| b == b'x'));
    fake.finish().await;
}

/// 10. The server's own requests are answered (it answers ours only after),
///     and its dynamic registration is listed.
#[tokio::test]
async fn server_requests_are_answered_and_registrations_listed() {
    let fake = Fake::start("server_requests", |server, _| {
        server.settings = json!({"fake": {"answer": 42}});
    })
    .await;
    fake.wait_ready().await;
    assert_echo(&fake.request(None).await, &fake.uri("a.fake"));

    let log = read_log(&fake.log);
    let answer = |id: &str| {
        log.iter()
            .find(|m| m["id"] == id && m.get("method").is_none())
            .unwrap_or_else(|| panic!("no answer to {id} in {log:?}"))
            .clone()
    };
    assert_eq!(answer("fake-1")["result"], json!([{"answer": 42}]));
    assert_eq!(answer("fake-2")["result"], Value::Null);
    assert!(answer("fake-2").get("error").is_none());
    assert_eq!(answer("fake-3")["result"], Value::Null);
    assert!(answer("fake-3").get("error").is_none());

    let entry = fake.entry().await;
    let registrations = &entry["_meta"]["acp-lsp"]["registrations"];
    let listed = registrations
        .as_array()
        .unwrap_or_else(|| panic!("no registrations listed: {entry}"));
    assert_eq!(listed.len(), 1, "{registrations}");
    assert_eq!(listed[0]["id"], "fake-watch");
    assert_eq!(listed[0]["method"], "workspace/didChangeWatchedFiles");
    assert_eq!(
        listed[0]["registerOptions"]["watchers"][0]["globPattern"],
        "**/*.fake"
    );
    // The initialize result's own capabilities are still there.
    assert_eq!(entry["capabilities"]["hoverProvider"], true);
    fake.finish().await;
}

/// 10b. Work-done progress drives `indexing` (with title and percentage) and
///      its end drives `ready`. A server still loading is not `running`
///      (the RFD's state is `starting`), and requests are refused, not
///      answered from a half-loaded index; once loaded it is `running`.
#[tokio::test]
async fn work_done_progress_drives_indexing_then_ready() {
    let fake = Fake::start("progress", |server, _| {
        server.watch_globs = vec!["**/*.fake".into()];
    })
    .await;
    fake.wait_state("indexing", |s| s == ServerState::Indexing)
        .await;
    let entry = fake.entry().await;
    assert_eq!(entry["state"], "starting", "{entry}");
    assert_eq!(entry["_meta"]["acp-lsp"]["status"], "indexing", "{entry}");
    assert_eq!(entry["_meta"]["acp-lsp"]["progress"]["title"], "Indexing");
    // The server sent 12.5; LSP's uinteger is honoured by rounding down.
    assert_eq!(entry["_meta"]["acp-lsp"]["progress"]["percentage"], 12);

    let response = fake.request(None).await;
    assert_error(&response, INVALID_PARAMS, "server_not_running");
    assert_eq!(
        error_of(&response)["data"]["status"],
        "indexing",
        "{response}"
    );

    // A change on disk makes the fake finish loading.
    std::fs::write(fake.root.join("new.fake"), "new\n").expect("write a file");
    fake.wait_ready().await;
    let entry = fake.entry().await;
    assert_eq!(entry["state"], "running");
    assert!(
        entry["_meta"]["acp-lsp"].get("progress").is_none(),
        "{entry}"
    );
    assert_echo(&fake.request(None).await, &fake.uri("a.fake"));
    fake.finish().await;
}

/// 11. Cancelling an in-flight request tells the server and answers the agent.
#[tokio::test]
async fn cancelling_a_request_cancels_it_on_the_server() {
    // Longer than the proxy's grace for the server's own answer after a
    // cancel, so the outcome is the proxy's -32800.
    const DELAY_MS: u64 = 5_000;
    let fake = Fake::start("slow", |server, _| {
        server
            .env
            .insert("FAKE_LSP_DELAY_MS".into(), DELAY_MS.to_string());
    })
    .await;
    fake.wait_ready().await;

    let id = fake.next_request_id();
    let call = {
        let raw = serde_json::value::to_raw_value(&fake.request_params(None)).expect("params");
        tokio::spawn(fake.gate.call(id.clone(), GateMethod::Request, Some(raw)))
    };
    let server_id = fake
        .wait_log("the request reaching the server", |log| {
            Some(log.iter().find(|m| m["method"] == HOVER)?["id"].clone())
        })
        .await;
    let started = Instant::now();
    assert!(fake.gate.cancel(&id), "the request is in flight");
    let bytes = tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .expect("the cancelled call ends")
        .expect("the call task does not panic");
    let took = started.elapsed();
    let response: Value = serde_json::from_slice(&bytes).expect("JSON");
    assert_eq!(response["id"], json!(id.as_u64()));
    assert_error(&response, REQUEST_CANCELLED, "cancelled");
    assert!(
        took < Duration::from_millis(DELAY_MS),
        "answered after {took:?}, not before the server would have"
    );
    assert!(!fake.gate.cancel(&id), "no longer in flight");

    fake.wait_log("$/cancelRequest", |log| {
        log.iter()
            .any(|m| m["method"] == "$/cancelRequest" && m["params"]["id"] == server_id)
            .then_some(())
    })
    .await;
    fake.finish().await;
}

// ---------------------------------------------------------------- the binary

/// 12. `kill -9` of the proxy takes its language servers with it.
#[cfg(unix)]
#[tokio::test]
async fn killing_the_proxy_ends_its_servers() {
    let pid_dir = tempfile::tempdir().expect("temp dir");
    let pid_file = pid_dir.path().join("grandchild.pid");
    let project = FakeProject::new(
        "fork_grandchild",
        &[(
            "FAKE_LSP_GRANDCHILD_PID_FILE",
            &pid_file.display().to_string(),
        )],
    );
    let mut proxy = ProxyBuilder::new(&project.root, ANSWERING_AGENT)
        .config(&project.config)
        .log_level("warn")
        .spawn();
    let session = proxy.editor.start_session(&project.root).await;
    assert_eq!(session, "s");

    // The server is up once it logged `initialized`; its pid files exist by then.
    poll_for("the fake server to be initialized", || {
        project
            .received()
            .iter()
            .any(|m| m["method"] == "initialized")
            .then_some(())
    })
    .await;
    let grandchild = read_pid_file(&pid_file).expect("grandchild pid file");
    let server = process_group(grandchild).expect("grandchild alive");
    assert_ne!(server, grandchild);
    assert!(process_alive(server) && process_alive(grandchild));

    proxy.child.start_kill().expect("SIGKILL the proxy");
    proxy.child.wait().await.expect("reap the proxy");

    let survivors = wait_until_gone(&[server, grandchild], GONE_TIMEOUT).await;
    for pid in &survivors {
        // SAFETY: kill only sends a signal.
        unsafe {
            libc::kill(*pid as libc::pid_t, libc::SIGKILL);
        }
    }
    assert!(
        survivors.is_empty(),
        "still alive after the proxy was killed: {survivors:?} (server {server}, grandchild {grandchild})"
    );
}

/// 13. A client that ends by SIGTERMing the whole process tree (acpx does):
/// the proxy, its agent, its server and the orphan guardian get the signal
/// at once. The proxy, shutting down, does not restart the server the
/// signal ended, warns about nothing, and leaves nothing running.
#[cfg(unix)]
#[tokio::test]
async fn a_sigterm_to_the_whole_process_tree_ends_all_without_a_restart() {
    let project = FakeProject::new("", &[]);
    let mut proxy = ProxyBuilder::new(&project.root, ANSWERING_AGENT)
        .config(&project.config)
        .spawn();
    proxy.editor.start_session(&project.root).await;
    project
        .wait_log("the fake server to be initialized", |log| {
            log.iter()
                .any(|m| m["method"] == "initialized")
                .then_some(())
        })
        .await;
    let tree = descendants(proxy.pid());
    let programs: Vec<String> = tree.iter().filter_map(|pid| program(*pid)).collect();
    assert!(
        programs.iter().any(|p| p.ends_with("acp-lsp-fake-server")),
        "the server runs: {programs:?}"
    );
    assert!(
        programs.iter().any(|p| p == "/bin/sh"),
        "the orphan guardian runs: {programs:?}"
    );

    // The proxy first, then what runs below it, as fast as signals go.
    for pid in std::iter::once(proxy.pid()).chain(tree.iter().copied()) {
        // SAFETY: kill only sends a signal.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGTERM);
        }
    }
    proxy.exited().await;
    let survivors = wait_until_gone(&tree, GONE_TIMEOUT).await;
    for pid in &survivors {
        // SAFETY: kill only sends a signal.
        unsafe {
            libc::kill(*pid as libc::pid_t, libc::SIGKILL);
        }
    }
    let log = proxy.stderr();
    assert!(
        survivors.is_empty(),
        "left running: {survivors:?} of {tree:?}; the proxy logged:\n{log}"
    );
    assert_eq!(proxy.logged("server spawned").len(), 1, "{log}");
    for said in [
        "server restarted",
        "stopped unexpectedly",
        "orphan guardian stopped listening",
    ] {
        assert!(proxy.logged(said).is_empty(), "{said:?} in:\n{log}");
    }
}

// ------------------------------------------------- floods (issue 13, item 5)

/// `_meta["acp-lsp"].dropped` of an entry (all zero when absent).
fn dropped(entry: &Value) -> Value {
    let dropped = &entry["_meta"]["acp-lsp"]["dropped"];
    if dropped.is_null() {
        json!({"progressTokens": 0, "registrations": 0, "diagnostics": 0,
               "garbageBytes": 0, "invalidMessages": 0, "suppressedWarnings": 0})
    } else {
        dropped.clone()
    }
}

/// Starts the fake in a flood `mode` and returns once a request made after
/// the flood has been answered: the fake writes the flood before it reads
/// that request, and the reader handles messages in order.
async fn flooded(mode: &str) -> Fake {
    let fake = Fake::start(mode, |_, _| {}).await;
    // The fake asks this after its flood; answered means the flood was read.
    fake.wait_log("the answer to flood-done", |log| {
        log.iter()
            .any(|m| m["id"] == "flood-done" && m.get("method").is_none())
            .then_some(())
    })
    .await;
    fake
}

/// 13a. A flood of work-done progress begins with unique tokens (none ever
///      ended) keeps at most `MAX_PROGRESS_TOKENS`; the rest are counted,
///      and the server is `running` with `progress_over_cap`.
#[tokio::test]
async fn a_progress_flood_is_capped_and_counted() {
    use acp_lsp::lsp::server::MAX_PROGRESS_TOKENS;
    const FLOOD: usize = 20_000;
    let fake = flooded(&format!("flood_progress={FLOOD}")).await;
    let sizes = fake.server().table_sizes();
    assert_eq!(sizes.progress_tokens, MAX_PROGRESS_TOKENS, "{sizes:?}");
    let entry = fake.entry().await;
    assert_eq!(
        dropped(&entry)["progressTokens"],
        (FLOOD - MAX_PROGRESS_TOKENS) as u64,
        "{entry}"
    );
    // More progress than is tracked: the end of its load cannot be known,
    // so it is running at once and says why (rfd/ section 7).
    assert_eq!(entry["state"], "running", "{entry}");
    assert_eq!(
        entry["_meta"]["acp-lsp"]["stateReason"],
        json!({"reason": "progress_over_cap", "limit": MAX_PROGRESS_TOKENS}),
        "{entry}"
    );
    fake.finish().await;
}

/// 13b. Endless `client/registerCapability` with unique ids: at most
///      `MAX_REGISTRATIONS` are kept, the rest refused to the server and
///      counted, and `lsp/servers` stays small.
#[tokio::test]
async fn a_registration_flood_is_capped_and_lsp_servers_stays_small() {
    use acp_lsp::lsp::server::{MAX_REGISTRATIONS, MAX_REGISTRATION_BYTES};
    const FLOOD: usize = 5_000;
    let fake = flooded(&format!("flood_registrations={FLOOD}")).await;
    let sizes = fake.server().table_sizes();
    let response = fake
        .call(
            GateMethod::Servers,
            json!({"sessionId": support::fake::SESSION}),
        )
        .await;
    let listing = response.to_string().len();
    eprintln!("{FLOOD} registrations: lsp/servers is {listing} bytes, {sizes:?}");
    assert_eq!(sizes.registrations, MAX_REGISTRATIONS, "{sizes:?}");
    assert!(
        sizes.registration_bytes <= MAX_REGISTRATION_BYTES,
        "{sizes:?}"
    );
    assert!(
        listing < 2 * MAX_REGISTRATION_BYTES,
        "lsp/servers is {listing} bytes"
    );
    let entry = fake.entry().await;
    assert_eq!(
        dropped(&entry)["registrations"],
        (FLOOD - MAX_REGISTRATIONS) as u64,
        "{entry}"
    );
    // The refused ones were answered with an error, the kept ones with null.
    let answers = fake
        .wait_log("the answers to every registration", |log| {
            let answers: Vec<&Value> = log
                .iter()
                .filter(|m| {
                    m["id"]
                        .as_str()
                        .is_some_and(|id| id.starts_with("flood-") && id != "flood-done")
                        && m.get("method").is_none()
                })
                .collect();
            (answers.len() == FLOOD)
                .then(|| answers.iter().filter(|m| m.get("error").is_some()).count())
        })
        .await;
    assert_eq!(answers, FLOOD - MAX_REGISTRATIONS);
    fake.finish().await;
}

/// 13c. Diagnostics for ever new documents keep at most
///      `MAX_DIAGNOSTIC_DOCUMENTS` documents, the oldest evicted and counted.
#[tokio::test]
async fn a_diagnostics_flood_is_capped_by_documents() {
    use acp_lsp::lsp::server::MAX_DIAGNOSTIC_DOCUMENTS;
    const FLOOD: usize = MAX_DIAGNOSTIC_DOCUMENTS + 500;
    let fake = flooded(&format!("flood_diagnostics={FLOOD}")).await;
    let sizes = fake.server().table_sizes();
    assert_eq!(sizes.diagnostic_documents, MAX_DIAGNOSTIC_DOCUMENTS);
    let entry = fake.entry().await;
    assert_eq!(dropped(&entry)["diagnostics"], 500, "{entry}");
    fake.finish().await;
}

/// 13d. Large diagnostics for new documents keep at most
///      `MAX_DIAGNOSTIC_BYTES` in all.
#[tokio::test]
async fn a_diagnostics_flood_is_capped_by_bytes() {
    use acp_lsp::lsp::server::MAX_DIAGNOSTIC_BYTES;
    const EACH: usize = 1024 * 1024;
    let flood = MAX_DIAGNOSTIC_BYTES / EACH + 8;
    let fake = flooded(&format!(
        "flood_diagnostics={flood},diagnostic_bytes={EACH}"
    ))
    .await;
    let sizes = fake.server().table_sizes();
    assert!(sizes.diagnostic_bytes <= MAX_DIAGNOSTIC_BYTES, "{sizes:?}");
    assert!(sizes.diagnostic_documents < flood, "{sizes:?}");
    let entry = fake.entry().await;
    assert_eq!(
        dropped(&entry)["diagnostics"],
        (flood - sizes.diagnostic_documents) as u64,
        "{entry}"
    );
    fake.finish().await;
}

/// 13e. Megabytes of garbage on the server's stdout are counted, and logged
///      a few times per window instead of once per 8 KiB chunk (the count of
///      lines logged is taken where they are logged: a `tracing` capture is
///      not reliable with tests running on several threads).
#[tokio::test]
async fn stdout_garbage_is_counted_and_its_warnings_rate_limited() {
    use acp_lsp::lsp::ratelimit::MAX_WARNINGS_PER_WINDOW;
    const GARBAGE: usize = 16 * 1024 * 1024;
    let fake = flooded(&format!("flood_garbage={GARBAGE}")).await;
    let entry = fake.entry().await;
    let dropped = dropped(&entry);
    assert_eq!(dropped["garbageBytes"], GARBAGE as u64, "{entry}");
    let logged = fake.server().output_warnings_logged();
    assert!(
        (1..=u64::from(MAX_WARNINGS_PER_WINDOW)).contains(&logged),
        "{logged} warnings logged"
    );
    let suppressed = dropped["suppressedWarnings"].as_u64().unwrap_or(0);
    eprintln!("{GARBAGE} bytes of garbage: {logged} warnings logged, {suppressed} counted");
    // One warning per chunk skipped: 16 MiB in chunks of at most the
    // buffer FramedRead grows to.
    assert!(suppressed > 100, "{entry}");
    fake.finish().await;
}
