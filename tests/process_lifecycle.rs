//! Real-process tests of `acp_lsp::lsp::process`: environment sanitizing, stderr
//! draining, kill escalation, process-group cleanup and the parent-death signal,
//! using the `acp-lsp-fake-server` binary and plain shell commands.
//!
//! On Windows (run under wine in CI) the fake-server tests run too, with
//! liveness read through `OpenProcess` instead of /proc, and the Job Object
//! stands where the process group does: a grandchild dies with its server's
//! job, and a killed spawner's job takes its child along. The tests that
//! need `sh`, signals or process groups are Unix only (docs/testing.md).
#![cfg(any(target_os = "linux", windows))]

mod support;

use support::procfs::{alive_among, process_alive};

#[cfg(unix)]
use support::procfs::process_group;

#[cfg(unix)]
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
#[cfg(unix)]
use std::sync::Once;
use std::time::{Duration, Instant};

use acp_lsp::lsp::process::{
    ProcessError, ServerIo, ServerProcess, SpawnSpec, Termination, DEFAULT_STDERR_CAPACITY,
    EXIT_GRACE,
};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};

/// Longest wait for one protocol message or for a child's output.
const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for killed processes to disappear from /proc, or for a pid file.
const GONE_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between two looks at /proc while polling.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

fn fake_server() -> PathBuf {
    PathBuf::from(support::fake::fake_server())
}

fn fake_spec(mode: &str, dir: &Path) -> SpawnSpec {
    let mut spec = SpawnSpec::new(fake_server(), dir);
    spec.env_extra.insert("FAKE_LSP_MODE".into(), mode.into());
    spec
}

/// [`fake_spec`] with the environment variable `var` naming `dir/file` (a pid
/// file or log the fake writes); also returns that path.
fn fake_spec_naming(mode: &str, dir: &Path, var: &str, file: &str) -> (SpawnSpec, PathBuf) {
    let path = dir.join(file);
    let mut spec = fake_spec(mode, dir);
    spec.env_extra
        .insert(var.into(), path.display().to_string());
    (spec, path)
}

/// [`fake_spec`] whose fake logs every message it receives to the returned file.
fn logging_spec(mode: &str, dir: &Path) -> (SpawnSpec, PathBuf) {
    fake_spec_naming(mode, dir, "FAKE_LSP_LOG", "received.jsonl")
}

/// [`fake_spec`] for a mode that forks a grandchild: it writes the
/// grandchild's pid to the returned file.
fn grandchild_spec(mode: &str, dir: &Path) -> (SpawnSpec, PathBuf) {
    fake_spec_naming(mode, dir, "FAKE_LSP_GRANDCHILD_PID_FILE", "grandchild.pid")
}

/// The stand-in proxy (`tests/peers/stand-in-proxy.rs`) starting the fake
/// server in its `sleep_forever` mode through `lsp::process`; also returns
/// the file it writes the child's pid to.
fn stand_in_spec(dir: &Path) -> (SpawnSpec, PathBuf) {
    let pid_file = dir.join("child.pid");
    let mut spec = SpawnSpec::new(support::fake::stand_in_proxy(), dir);
    spec.args = vec![
        pid_file.display().to_string(),
        fake_server().display().to_string(),
        "FAKE_LSP_MODE=sleep_forever".into(),
    ];
    (spec, pid_file)
}

#[cfg(unix)]
fn sh_spec(script: &str, dir: &Path) -> SpawnSpec {
    let mut spec = SpawnSpec::new("sh", dir);
    spec.args = vec!["-c".into(), script.into()];
    spec
}

/// Polls for a pid file written (atomically) by the fake server.
async fn read_pid_file(path: &Path) -> u32 {
    let deadline = Instant::now() + GONE_TIMEOUT;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text.trim().parse().expect("pid file holds a pid");
        }
        assert!(
            Instant::now() < deadline,
            "pid file {} never appeared",
            path.display()
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Closes the child's stdin and reads its stdout to the end; `finished` says
/// what its end means.
async fn read_all_output(io: ServerIo, finished: &str) -> String {
    drop(io.stdin);
    let mut stdout = io.stdout;
    let mut out = String::new();
    tokio::time::timeout(IO_TIMEOUT, stdout.read_to_string(&mut out))
        .await
        .expect(finished)
        .expect("read stdout");
    out
}

/// Waits (bounded) for `server` to exit; `what` names that for a timeout.
async fn reaped(server: &mut ServerProcess, what: &str) -> std::process::ExitStatus {
    tokio::time::timeout(IO_TIMEOUT, server.wait())
        .await
        .expect(what)
        .expect("wait")
}

/// Asserts that every process of `pids` ends within [`GONE_TIMEOUT`].
async fn assert_all_gone(pids: &[u32]) {
    let deadline = Instant::now() + GONE_TIMEOUT;
    loop {
        let alive = alive_among(pids);
        if alive.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "still alive: {alive:?}");
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// A minimal LSP client over the server's pipes.
struct Client {
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Client {
    fn new(io: ServerIo) -> Client {
        Client {
            stdin: Some(io.stdin),
            stdout: BufReader::new(io.stdout),
        }
    }

    async fn send(&mut self, message: Value) {
        self.send_raw(&message.to_string()).await;
    }

    async fn send_raw(&mut self, body: &str) {
        let body = body.as_bytes();
        let stdin = self.stdin.as_mut().expect("stdin still open");
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(body);
        stdin.write_all(&frame).await.expect("write to server");
        stdin.flush().await.expect("flush to server");
    }

    async fn recv(&mut self) -> Value {
        serde_json::from_str(&self.recv_raw().await).expect("JSON body")
    }

    async fn recv_raw(&mut self) -> String {
        tokio::time::timeout(IO_TIMEOUT, self.recv_inner())
            .await
            .expect("timed out waiting for a message from the server")
    }

    async fn recv_inner(&mut self) -> String {
        let mut length = None;
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).await.expect("read header");
            assert!(n > 0, "server closed stdout");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = Some(value.trim().parse::<usize>().expect("numeric length"));
                }
            }
        }
        let mut body = vec![0; length.expect("Content-Length header")];
        self.stdout.read_exact(&mut body).await.expect("read body");
        String::from_utf8(body).expect("UTF-8 body")
    }

    async fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let response = self.recv().await;
        assert_eq!(response["id"], json!(id), "unexpected message {response}");
        response
    }

    async fn initialize(&mut self) -> Value {
        let response = self
            .request(
                1,
                "initialize",
                json!({"processId": null, "rootUri": null, "capabilities": {}}),
            )
            .await;
        self.send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
            .await;
        response
    }

    /// Sends `shutdown` and `exit` (without `params`) and closes stdin.
    async fn shut_down(&mut self) {
        let response = self.request(99, "shutdown", Value::Null).await;
        assert_eq!(response["result"], Value::Null);
        self.send(json!({"jsonrpc": "2.0", "method": "exit"})).await;
        self.stdin = None;
    }
}

#[cfg(unix)]
fn set_test_environment() {
    static ONCE: Once = Once::new();
    // Only this test binary's own environment changes; std serialises its
    // environment accesses, and nothing here reads it through libc directly.
    ONCE.call_once(|| {
        std::env::set_var("MY_API_KEY", "leak-1");
        std::env::set_var("GITHUB_TOKEN", "leak-2");
        std::env::set_var("ACP_LSP_TEST_DB_PASSWORD", "leak-3");
        std::env::set_var("ACP_LSP_TEST_NPM_TOKEN", "kept-on-purpose");
        std::env::set_var("ACP_LSP_TEST_PLAIN", "plain-value");
    });
}

#[cfg(unix)]
#[tokio::test]
async fn env_is_sanitized_passthrough_kept_and_extras_applied() {
    set_test_environment();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut spec = sh_spec("env", dir.path());
    spec.env_passthrough = vec!["ACP_LSP_TEST_NPM_TOKEN".into()];
    spec.env_extra
        .insert("ACP_LSP_TEST_EXTRA".into(), "extra-value".into());
    spec.env_extra
        .insert("ACP_LSP_TEST_PLAIN".into(), "overridden".into());
    let (mut server, io) = ServerProcess::spawn("env", &spec).expect("spawn sh");
    let out = read_all_output(io, "env finished").await;
    assert!(server.wait().await.expect("wait").success());

    let vars: Vec<(&str, &str)> = out
        .lines()
        .filter_map(|line| line.split_once('='))
        .collect();
    let get = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    assert_eq!(get("MY_API_KEY"), None, "env was:\n{out}");
    assert_eq!(get("GITHUB_TOKEN"), None, "env was:\n{out}");
    assert_eq!(get("ACP_LSP_TEST_DB_PASSWORD"), None, "env was:\n{out}");
    assert!(!out.contains("leak-"), "a secret leaked:\n{out}");
    assert_eq!(get("ACP_LSP_TEST_NPM_TOKEN"), Some("kept-on-purpose"));
    assert_eq!(get("ACP_LSP_TEST_EXTRA"), Some("extra-value"));
    assert_eq!(get("ACP_LSP_TEST_PLAIN"), Some("overridden"));
    assert!(get("PATH").is_some(), "PATH is inherited");
}

/// Credential carriers that a denylist by name (KEY/TOKEN/SECRET/PASSWORD)
/// let through (the first 21; issue 13 counted 25 of 26 in its own set), and
/// five that hide inside allowed toolchain families.
#[cfg(unix)]
const CREDENTIAL_CARRIERS: [(&str, &str); 26] = [
    ("DATABASE_URL", "postgres://app:carrier-1@db/app"),
    ("REDIS_URL", "redis://:carrier-2@cache:6379"),
    ("MONGODB_URI", "mongodb://app:carrier-3@mongo/app"),
    ("MYSQL_PWD", "carrier-4"),
    ("SMTP_PASS", "carrier-5"),
    ("FTP_PASSWD", "carrier-6"),
    ("TWINE_PASSWD", "carrier-7"),
    ("GITLAB_PAT", "carrier-8"),
    ("CI_JOB_JWT", "carrier-9"),
    ("BW_SESSION", "carrier-10"),
    ("OP_SESSION_myaccount", "carrier-11"),
    ("NPM_CONFIG__AUTH", "carrier-12"),
    ("DOCKER_AUTH_CONFIG", "{\"auths\":\"carrier-13\"}"),
    ("SENTRY_DSN", "https://carrier-14@sentry.example/1"),
    (
        "SLACK_WEBHOOK_URL",
        "https://hooks.slack.example/carrier-15",
    ),
    ("COOKIE", "session=carrier-16"),
    ("AUTH_HEADER", "Bearer carrier-17"),
    ("CREDENTIALS_JSON", "{\"secret\":\"carrier-18\"}"),
    ("AMQP_URL", "amqp://u:carrier-19@mq"),
    ("AZURE_STORAGE_CONNECTION_STRING", "AccountKey=carrier-20"),
    ("GOOGLE_APPLICATION_CREDENTIALS", "/secrets/carrier-21.json"),
    ("PRIVATE_KEY_PEM", "carrier-22"),
    ("CARGO_REGISTRY_TOKEN", "carrier-23"),
    ("CARGO_REGISTRIES_CORP_TOKEN", "carrier-24"),
    ("npm_config__authToken", "carrier-25"),
    ("NODE_AUTH_TOKEN", "carrier-26"),
];

/// Allowlisted variables (or members of allowed families) that must reach a
/// server; inert for everything else this test binary runs.
#[cfg(unix)]
const ALLOWED_PROBES: [(&str, &str); 12] = [
    ("CARGO_ACP_LSP_PROBE", "cargo-family"),
    ("RUSTUP_ACP_LSP_PROBE", "rustup-family"),
    ("XDG_ACP_LSP_PROBE", "xdg-family"),
    ("LC_ACP_LSP_PROBE", "locale-family"),
    ("PYTHONACPLSPPROBE", "python-family"),
    ("NODE_ACP_LSP_PROBE", "node-family"),
    ("npm_config_acp_lsp_probe", "npm-family"),
    ("ACP_LSP_PROBE_HTTPS_PROXY", "http://proxy.example:3128"),
    ("GOFLAGS", "-mod=mod"),
    ("VIRTUAL_ENV", "/nonexistent/venv"),
    ("NETRC", "/nonexistent/netrc"),
    ("GIT_ASKPASS", "/nonexistent/askpass"),
];

#[cfg(unix)]
fn set_carrier_environment() {
    static ONCE: Once = Once::new();
    // Only this test binary's own environment changes (see set_test_environment).
    ONCE.call_once(|| {
        for (name, value) in CREDENTIAL_CARRIERS.iter().chain(&ALLOWED_PROBES) {
            std::env::set_var(name, value);
        }
    });
}

/// Issue 13, item 7: a real process printing its environment gets the
/// allowlisted variables and none of 26 credential carriers.
#[cfg(unix)]
#[tokio::test]
async fn env_is_an_allowlist_credential_carriers_never_reach_a_server() {
    set_carrier_environment();
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = sh_spec("env", dir.path());
    let (mut server, io) = ServerProcess::spawn("env", &spec).expect("spawn sh");
    let out = read_all_output(io, "env finished").await;
    assert!(server.wait().await.expect("wait").success());
    let vars: std::collections::BTreeMap<&str, &str> = out
        .lines()
        .filter_map(|line| line.split_once('='))
        .collect();
    let leaked: Vec<&str> = CREDENTIAL_CARRIERS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| vars.contains_key(name))
        .collect();
    assert_eq!(leaked, Vec::<&str>::new(), "env was:\n{out}");
    assert!(!out.contains("carrier-"), "a credential leaked:\n{out}");
    for (name, value) in ALLOWED_PROBES {
        assert_eq!(vars.get(name), Some(&value), "{name}; env was:\n{out}");
    }
    for name in ["PATH", "HOME"] {
        assert_eq!(
            vars.get(name).copied(),
            std::env::var(name).ok().as_deref(),
            "{name}"
        );
    }
}

#[cfg(unix)]
#[tokio::test]
async fn stderr_flood_does_not_block_the_child() {
    const FLOOD: usize = 20_000_000;
    const MARKER: &str = "TAIL-MARKER";
    let dir = tempfile::tempdir().expect("tempdir");
    let script =
        format!("head -c {FLOOD} /dev/zero | tr '\\000' e >&2; printf %s {MARKER} >&2; echo done");
    let (mut server, io) =
        ServerProcess::spawn("flood", &sh_spec(&script, dir.path())).expect("spawn sh");
    let out = read_all_output(
        io,
        "the child finished writing 20 MB to stderr and was not blocked",
    )
    .await;
    assert_eq!(out, "done\n");
    assert!(server.wait().await.expect("wait").success());

    let tail = server.stderr_tail();
    assert!(
        tail.len() <= DEFAULT_STDERR_CAPACITY,
        "tail is {} bytes",
        tail.len()
    );
    assert!(
        tail.ends_with(&format!("eee{MARKER}")),
        "tail ends with {:?}",
        &tail[tail.len().saturating_sub(40)..]
    );
    assert_eq!(server.stderr_total_bytes(), (FLOOD + MARKER.len()) as u64);
}

#[tokio::test]
async fn fake_server_answers_while_flooding_stderr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut server, io) =
        ServerProcess::spawn("fake", &fake_spec("stderr_flood", dir.path())).expect("spawn");
    let mut client = Client::new(io);
    client.initialize().await;
    // Keep talking until the flood has wrapped the ring a few times.
    let wrapped = (4 * DEFAULT_STDERR_CAPACITY) as u64;
    let deadline = Instant::now() + IO_TIMEOUT;
    let mut id = 2;
    while server.stderr_total_bytes() < wrapped {
        assert!(Instant::now() < deadline, "the stderr flood never arrived");
        let response = client
            .request(id, "textDocument/hover", json!({"n": id}))
            .await;
        assert_eq!(response["result"]["echo"]["params"], json!({"n": id}));
        id += 1;
    }
    client.shut_down().await;
    let ended = server.terminate(EXIT_GRACE).await;
    assert!(
        matches!(ended, Termination::Exited(status) if status.success()),
        "{ended:?}"
    );
    let tail = server.stderr_tail();
    assert!(
        tail.len() <= DEFAULT_STDERR_CAPACITY,
        "tail is {} bytes",
        tail.len()
    );
    assert!(
        tail.len() > DEFAULT_STDERR_CAPACITY / 2,
        "tail is {} bytes",
        tail.len()
    );
    assert!(tail.contains("fake-lsp flood line"));
}

#[tokio::test]
async fn cooperative_server_exits_within_grace_and_gets_what_was_sent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (spec, log) = logging_spec("", dir.path());
    let (mut server, io) = ServerProcess::spawn("fake", &spec).expect("spawn");
    assert!(server.resident_memory_bytes().is_some_and(|rss| rss > 0));
    let mut client = Client::new(io);
    let init = client.initialize().await;
    assert_eq!(init["result"]["serverInfo"]["name"], "fake");
    assert_eq!(init["result"]["capabilities"]["positionEncoding"], "utf-16");
    let params =
        json!({"textDocument": {"uri": "file:///a.rs"}, "position": {"line": 1, "character": 2}});
    let echo = client
        .request(2, "textDocument/hover", params.clone())
        .await;
    assert_eq!(
        echo["result"],
        json!({"echo": {"method": "textDocument/hover", "params": params}})
    );
    client.shut_down().await;

    let ended = server.terminate(EXIT_GRACE).await;
    assert!(
        matches!(ended, Termination::Exited(status) if status.code() == Some(0)),
        "{ended:?}"
    );
    assert_eq!(server.pid(), None);
    assert_eq!(server.resident_memory_bytes(), None);

    let received: Vec<Value> = std::fs::read_to_string(&log)
        .expect("log file")
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON message per line"))
        .collect();
    let methods: Vec<&str> = received
        .iter()
        .filter_map(|m| m["method"].as_str())
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "initialized",
            "textDocument/hover",
            "shutdown",
            "exit"
        ]
    );
    assert!(received[4].get("params").is_none());
}

#[tokio::test]
async fn fake_server_echoes_ids_and_params_byte_for_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (spec, log) = logging_spec("", dir.path());
    let (mut server, io) = ServerProcess::spawn("fake", &spec).expect("spawn");
    let mut client = Client::new(io);
    client.initialize().await;
    let params = r#"{ "big": 18446744073709551617, "f": 1.50, "s": "\u00e9" }"#;
    client
        .send_raw(&format!(
            "{{\"jsonrpc\":\"2.0\",\n\"id\":18446744073709551616,\"method\":\"x/y\",\"params\":{params}}}"
        ))
        .await;
    let answer = client.recv_raw().await;
    assert_eq!(
        answer,
        format!(
            r#"{{"jsonrpc":"2.0","id":18446744073709551616,"result":{{"echo":{{"method":"x/y","params":{params}}}}}}}"#
        )
    );
    client.shut_down().await;
    server.terminate(EXIT_GRACE).await;
    let logged = std::fs::read_to_string(&log).expect("log");
    assert!(
        logged.contains(&format!(
            "{{\"jsonrpc\":\"2.0\", \"id\":18446744073709551616,\"method\":\"x/y\",\"params\":{params}}}\n"
        )),
        "log was:\n{logged}"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn terminate_sends_sigterm_when_the_server_does_not_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut spec = SpawnSpec::new("sleep", dir.path());
    spec.args = vec!["1000".into()];
    let (mut server, io) = ServerProcess::spawn("sleeper", &spec).expect("spawn sleep");
    drop(io);
    let ended = server.terminate(Duration::from_millis(50)).await;
    assert!(
        matches!(ended, Termination::Terminated(status) if status.signal() == Some(libc::SIGTERM)),
        "{ended:?}"
    );
}

#[tokio::test]
async fn terminate_escalates_to_sigkill_and_clears_the_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (spec, pid_file) = grandchild_spec("ignore_shutdown,fork_grandchild", dir.path());
    let (mut server, io) = ServerProcess::spawn("stubborn", &spec).expect("spawn");
    let leader = server.pid().expect("running");
    let mut client = Client::new(io);
    client.initialize().await;
    let grandchild = read_pid_file(&pid_file).await;
    assert_eq!(alive_among(&[leader, grandchild]), [leader, grandchild]);
    #[cfg(unix)]
    assert_eq!(
        process_group(grandchild),
        Some(leader),
        "the grandchild shares the server's group"
    );

    client.shut_down().await;
    let ended = server.terminate(Duration::from_millis(100)).await;
    // Unix: SIGTERM is ignored, SIGKILL ends it. Windows has no signal to
    // ignore: the step after the grace ends the job.
    #[cfg(unix)]
    assert!(
        matches!(ended, Termination::Killed(Some(status)) if status.signal() == Some(libc::SIGKILL)),
        "{ended:?}"
    );
    #[cfg(windows)]
    assert!(
        matches!(ended, Termination::Terminated(status) if status.code() == Some(KILLED_EXIT_CODE)),
        "{ended:?}"
    );
    assert_all_gone(&[leader, grandchild]).await;
}

#[tokio::test]
async fn drop_kills_the_group_including_a_grandchild() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (spec, pid_file) = grandchild_spec("fork_grandchild", dir.path());
    let (server, io) = ServerProcess::spawn("dropped", &spec).expect("spawn");
    let leader = server.pid().expect("running");
    let mut client = Client::new(io);
    client.initialize().await;
    let grandchild = read_pid_file(&pid_file).await;
    assert_eq!(alive_among(&[leader, grandchild]), [leader, grandchild]);

    drop(server);
    assert_all_gone(&[leader, grandchild]).await;
    drop(client);
}

#[tokio::test]
async fn kill_group_now_kills_leader_and_grandchild() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (spec, pid_file) = grandchild_spec("fork_grandchild,hang", dir.path());
    let (mut server, io) = ServerProcess::spawn("killed", &spec).expect("spawn");
    let leader = server.pid().expect("running");
    let _client = Client::new(io);
    let grandchild = read_pid_file(&pid_file).await;

    server.kill_group_now();
    let status = reaped(&mut server, "killed server is reaped").await;
    #[cfg(unix)]
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    #[cfg(windows)]
    assert_eq!(status.code(), Some(KILLED_EXIT_CODE));
    assert_eq!(server.try_exit_status(), Some(status));
    assert_all_gone(&[leader, grandchild]).await;
}

/// The exit code of a process whose job acp-lsp ended (`STATUS_CONTROL_C_EXIT`).
#[cfg(windows)]
const KILLED_EXIT_CODE: i32 = 0xC000_013A_u32 as i32;

/// Windows: the spawner (a stand-in proxy that started its child through
/// `lsp::process`) ended with `TerminateProcess`, as Task Manager or a
/// crash would: nothing of it runs any more, yet the child dies, because
/// the kernel closed the spawner's handle to the child's job
/// (`JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`).
#[cfg(windows)]
#[tokio::test]
async fn terminating_the_spawning_process_kills_the_server_through_its_job() {
    use windows_sys::Win32::Foundation::CloseHandle;
    use windows_sys::Win32::System::Threading::{OpenProcess, TerminateProcess, PROCESS_TERMINATE};
    let dir = tempfile::tempdir().expect("tempdir");
    let (spec, pid_file) = stand_in_spec(dir.path());
    let (mut proxy, _io) = ServerProcess::spawn("stand-in proxy", &spec).expect("spawn");
    let proxy_pid = proxy.pid().expect("running");
    let child = read_pid_file(&pid_file).await;
    assert!(process_alive(child));
    // SAFETY: plain values; the handle is checked, used once and closed.
    let terminated = unsafe {
        let handle = OpenProcess(PROCESS_TERMINATE, 0, proxy_pid);
        assert!(!handle.is_null(), "open the stand-in proxy");
        let ok = TerminateProcess(handle, 9) != 0;
        CloseHandle(handle);
        ok
    };
    assert!(terminated);
    let status = reaped(&mut proxy, "stand-in proxy reaped").await;
    assert_eq!(
        status.code(),
        Some(9),
        "ended by TerminateProcess, not its job"
    );
    assert_all_gone(&[child]).await;
}

#[cfg(unix)]
#[tokio::test]
async fn sigkill_of_the_spawning_process_kills_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (spec, pid_file) = stand_in_spec(dir.path());
    let (mut proxy, _io) = ServerProcess::spawn("stand-in proxy", &spec).expect("spawn");
    let proxy_pid = proxy.pid().expect("running");
    let child = read_pid_file(&pid_file).await;
    assert!(process_alive(child));
    assert_eq!(
        process_group(child),
        Some(child),
        "the child leads its own group, so only the death signal can reach it"
    );

    // SAFETY: kill only sends a signal, to a process this test owns.
    let rc = unsafe {
        libc::kill(
            libc::pid_t::try_from(proxy_pid).expect("pid fits"),
            libc::SIGKILL,
        )
    };
    assert_eq!(rc, 0);
    let status = reaped(&mut proxy, "stand-in proxy reaped").await;
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    assert_all_gone(&[child]).await;
}

#[tokio::test]
async fn missing_command_or_directory_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = SpawnSpec::new("/nonexistent/acp-lsp-no-such-server", dir.path());
    match ServerProcess::spawn("missing", &spec) {
        Err(ProcessError::NotFound { command }) => assert!(command.contains("no-such-server")),
        other => panic!("expected NotFound, got {:?}", other.map(|_| ())),
    }
    let spec = SpawnSpec::new(fake_server(), dir.path().join("no-such-dir"));
    assert!(matches!(
        ServerProcess::spawn("no-cwd", &spec),
        Err(ProcessError::Spawn { .. })
    ));
}

#[tokio::test]
async fn crash_exit_codes_are_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut server, _io) =
        ServerProcess::spawn("crash", &fake_spec("crash_on_start", dir.path())).expect("spawn");
    let status = reaped(&mut server, "exits").await;
    assert_eq!(status.code(), Some(4));

    let (mut server, io) =
        ServerProcess::spawn("crash", &fake_spec("crash_on_request", dir.path())).expect("spawn");
    let mut client = Client::new(io);
    client.initialize().await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": {}}))
        .await;
    let status = reaped(&mut server, "exits").await;
    assert_eq!(status.code(), Some(3));
    assert_eq!(server.try_exit_status(), Some(status));
}

#[tokio::test]
async fn server_requests_must_be_answered_before_other_requests() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (spec, log) = logging_spec("server_requests", dir.path());
    let (mut server, io) = ServerProcess::spawn("stalling", &spec).expect("spawn");
    let mut client = Client::new(io);
    client.initialize().await;
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": {"x": 1}}),
        )
        .await;
    let mut methods = Vec::new();
    for _ in 0..3 {
        let request = client.recv().await;
        let method = request["method"]
            .as_str()
            .expect("a server request")
            .to_string();
        if method == "workspace/configuration" {
            assert_eq!(request["params"], json!({"items": [{"section": "fake"}]}));
        }
        client
            .send(json!({"jsonrpc": "2.0", "id": request["id"], "result": null}))
            .await;
        methods.push(method);
    }
    assert_eq!(
        methods,
        [
            "workspace/configuration",
            "client/registerCapability",
            "window/workDoneProgress/create"
        ]
    );
    let hover = client.recv().await;
    assert_eq!(hover["id"], 2);
    assert_eq!(hover["result"]["echo"]["params"], json!({"x": 1}));
    client.shut_down().await;
    assert!(matches!(
        server.terminate(EXIT_GRACE).await,
        Termination::Exited(_)
    ));

    let answers = std::fs::read_to_string(&log)
        .expect("log")
        .lines()
        .filter(|line| line.contains("\"fake-"))
        .count();
    assert_eq!(answers, 3, "the three answers were logged");
}

/// Windows: a language server installed by npm is a `.cmd` shim. It starts
/// (through `cmd.exe`, which Rust's `Command` runs for a `.cmd`), and an
/// argument holding `cmd.exe`'s own syntax reaches it as one argument
/// instead of running a command of its own (the BatBadBut injection).
#[cfg(windows)]
#[tokio::test]
async fn a_cmd_shim_starts_and_its_arguments_cannot_inject_commands() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shim = dir.path().join("echo-args.cmd");
    std::fs::write(&shim, "@echo off\r\necho ARGS %*\r\n").expect("write the shim");
    let found =
        acp_lsp::lsp::detect::find_on_path(&dir.path().join("echo-args").display().to_string())
            .expect("PATHEXT finds the .cmd");
    assert_eq!(found, shim);
    let mut spec = SpawnSpec::new(&found, dir.path());
    spec.args = vec![
        "plain".into(),
        "with space".into(),
        "a&echo INJECTED".into(),
    ];
    let (mut server, io) = ServerProcess::spawn("shim", &spec).expect("spawn the .cmd");
    let out = read_all_output(io, "the shim's output ends").await;
    reaped(&mut server, "the shim exits").await;
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    assert_eq!(lines.len(), 1, "one line, no injected command: {out:?}");
    assert!(lines[0].starts_with("ARGS plain"), "{out:?}");
    assert!(
        lines[0].contains("INJECTED"),
        "the argument arrived: {out:?}"
    );
}
