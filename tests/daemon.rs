//! The shared daemon with real parts: the `acp-lsp` binary as three
//! `proxy --shared`s (each in front of a small scripted ACP agent) on one
//! Rust project, one rust-analyzer among them; the daemon killed with
//! SIGKILL mid-request and coming back; `daemon status`.

mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::fake::{fake_server, read_log, uri_of};
use support::procfs::{all_pids, parent, process_alive, program, wait_until_gone, POLL_INTERVAL};
use support::proxy::{ProxyBuilder, ProxyChild, ASKING_AGENT, BIN};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};

/// Longest wait for a state through a proxy (rust-analyzer loads the
/// project first: seconds on a loaded machine).
const ANSWER_TIMEOUT: Duration = support::proxy::ANSWER_TIMEOUT;
/// Longest wait for a process to appear or go.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(30);
/// `waitUntilReady` of the references requests.
const WAIT_UNTIL_READY_MS: u64 = 120_000;

/// A private runtime dir, config and project copy; kills the daemon it
/// finds at the end (its servers go with it).
struct World {
    _dir: tempfile::TempDir,
    runtime: PathBuf,
    config: PathBuf,
    project: PathBuf,
}

impl World {
    /// The Rust project, with rust-analyzer.
    fn new() -> World {
        support::require("rust-analyzer", "rustup component add rust-analyzer");
        World::with("", |project| {
            support::copy_tree(
                &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/rust-three-files"),
                project,
            )
        })
    }

    /// A project made by `fill`, with `config` added to the config file.
    fn with(config_text: &str, fill: impl FnOnce(&Path)) -> World {
        let dir = tempfile::tempdir().expect("temp dir");
        let runtime = dir.path().join("run");
        std::fs::create_dir(&runtime).expect("runtime dir");
        let project = dir.path().join("project");
        std::fs::create_dir(&project).expect("project dir");
        fill(&project);
        let project = project.canonicalize().expect("canonical project");
        let config = dir.path().join("config.toml");
        // Servers nobody uses stop soon, so the daemon's own exit is seen.
        std::fs::write(&config, format!("idle_grace_ms = 1000\n{config_text}"))
            .expect("write config");
        World {
            _dir: dir,
            runtime,
            config,
            project,
        }
    }

    fn command(&self, program: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(program);
        command
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .current_dir(&self.project);
        command
    }

    /// `acp-lsp proxy --shared` in front of the asking agent (always session
    /// "s": the daemon must keep several proxies' "s" apart), its session
    /// started.
    async fn proxy(&self) -> Proxy {
        let mut proxy = ProxyBuilder::new(&self.project, ASKING_AGENT)
            .arg("--shared")
            .config(&self.config)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .spawn();
        let session = proxy.editor.start_session(&self.project).await;
        assert_eq!(session, "s");
        Proxy(proxy)
    }

    /// `acp-lsp daemon status --json`, or `None` when no daemon answers.
    async fn status(&self) -> Option<Value> {
        let output = self
            .command(BIN)
            .args(["daemon", "status", "--json", "--config"])
            .arg(&self.config)
            .output()
            .await
            .expect("run daemon status");
        output
            .status
            .success()
            .then(|| serde_json::from_slice(&output.stdout).expect("status is JSON"))
    }

    async fn status_until(&self, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        loop {
            if let Some(status) = self.status().await.filter(|s| ok(s)) {
                return status;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    fn daemon_pid(&self) -> Option<u32> {
        let dir = std::fs::read_dir(self.runtime.read_dir().ok()?.next()?.ok()?.path()).ok()?;
        dir.filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "lock"))
            .find_map(|e| std::fs::read_to_string(e.path()).ok()?.trim().parse().ok())
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(pid) = self.daemon_pid().filter(|p| process_alive(*p)) {
            // SAFETY: kill only sends a signal.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
        }
    }
}

/// A shared proxy, its editor's side.
struct Proxy(ProxyChild);

impl Proxy {
    fn pid(&self) -> u32 {
        self.0.pid()
    }

    async fn send(&mut self, method: &str, params: Value) -> u64 {
        self.0.editor.send(method, params).await
    }

    async fn answer(&mut self, id: u64) -> Value {
        self.0.editor.answer(id).await
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.0.editor.call(method, params).await
    }

    async fn ask(&mut self, method: &str, params: Value) -> Value {
        self.0.editor.ask(method, params).await
    }

    /// SIGKILL, and reaped.
    async fn kill(&mut self) {
        self.0.child.start_kill().expect("kill proxy");
        self.0.child.wait().await.expect("reap proxy");
    }

    async fn rust_analyzer(&mut self) -> Value {
        let servers = self.ask("lsp/servers", json!({"sessionId": "s"})).await;
        servers["result"]["servers"]
            .as_array()
            .and_then(|list| list.iter().find(|s| s["name"] == "rust-analyzer"))
            .cloned()
            .unwrap_or_else(|| panic!("no rust-analyzer listed: {servers}"))
    }

    fn references_params(server_id: &str, project: &Path) -> Value {
        json!({
            "sessionId": "s",
            "serverId": server_id,
            "method": "textDocument/references",
            "params": {
                "textDocument": {"uri": format!("file://{}/src/report.rs", project.display())},
                "position": {"line": 4, "character": 4},
                "context": {"includeDeclaration": true}
            },
            "_meta": {"waitUntilReady": WAIT_UNTIL_READY_MS}
        })
    }

    /// References of `area` through this proxy, asked again while the
    /// server drops them because the workspace moved (ContentModified).
    async fn references(&mut self, server_id: &str, project: &Path) -> Vec<(String, u64)> {
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        loop {
            let response = self
                .ask("lsp/request", Proxy::references_params(server_id, project))
                .await;
            if let Some(locations) = response["result"]["lspResult"].as_array() {
                let mut found: Vec<(String, u64)> = locations
                    .iter()
                    .map(|l| {
                        let uri = l["uri"].as_str().expect("uri");
                        let file = uri.rsplit('/').next().expect("file name").to_string();
                        (file, l["range"]["start"]["line"].as_u64().expect("line"))
                    })
                    .collect();
                found.sort();
                return found;
            }
            let retryable = response["error"]["data"]["retryable"] == true;
            assert!(
                retryable && Instant::now() < deadline,
                "references failed: {response}"
            );
        }
    }
}

fn expected_references() -> Vec<(String, u64)> {
    [
        ("geometry.rs", 1),
        ("report.rs", 0),
        ("report.rs", 4),
        ("stats.rs", 4),
        ("stats.rs", 5),
    ]
    .iter()
    .map(|(f, l)| (f.to_string(), *l))
    .collect()
}

/// A config entry for the fake server, which never answers (`hang`) and
/// logs what it receives to `log`.
fn hanging_fake(log: &Path) -> String {
    fake_entry(log, "hang")
}

/// A config entry for the fake server in `mode`, logging to `log`.
fn fake_entry(log: &Path, mode: &str) -> String {
    format!(
        "[servers.fake]\ncommand = {}\nlanguage_ids = [\"fake\"]\nfile_extensions = [\"fake\"]\n\
         root_markers = [\"fake.toml\"]\nenv = {{ FAKE_LSP_MODE = {}, FAKE_LSP_LOG = {} }}\n",
        serde_json::to_string(fake_server()).expect("string"),
        serde_json::to_string(mode).expect("string"),
        serde_json::to_string(&log.display().to_string()).expect("string"),
    )
}

/// The `lsp/servers` entry named `name` in a status or servers list.
fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    support::gate::named(list.as_array().expect("a list of servers"), name)
}

/// Live children of `parent_pid` whose program is rust-analyzer.
fn rust_analyzers_under(parent_pid: u32) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|pid| parent(*pid) == Some(parent_pid) && process_alive(*pid))
        .filter(|pid| program(*pid).is_some_and(|p| p.ends_with("rust-analyzer")))
        .collect()
}

/// Three proxies on one project: one daemon, one rust-analyzer (under the
/// daemon, none under a proxy), one serverId, a correct references answer
/// through each, and `daemon status` listing all of it.
#[tokio::test]
async fn three_proxies_share_one_rust_analyzer() {
    let world = World::new();
    // Started together: the lock lets one daemon serve.
    let (a, b, c) = tokio::join!(world.proxy(), world.proxy(), world.proxy());
    let mut proxies = [a, b, c];
    let mut ids = Vec::new();
    for proxy in proxies.iter_mut() {
        ids.push(proxy.rust_analyzer().await["serverId"].clone());
    }
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    let id = ids[0].as_str().expect("serverId").to_string();
    for proxy in proxies.iter_mut() {
        assert_eq!(
            proxy.references(&id, &world.project).await,
            expected_references()
        );
    }

    let status = world
        .status_until("three clients", |s| {
            s["clients"].as_array().map(Vec::len) == Some(3)
        })
        .await;
    let servers = status["servers"].as_array().expect("servers");
    assert_eq!(servers.len(), 1, "{status}");
    assert_eq!(servers[0]["serverId"], id);
    assert_eq!(servers[0]["state"], "running");
    assert!(status["memoryBytes"].as_u64().is_some(), "{status}");
    assert!(status["uptimeMs"].as_u64().is_some(), "{status}");
    let daemon = status["pid"].as_u64().expect("daemon pid") as u32;
    for proxy in &proxies {
        let pid = proxy.pid();
        assert!(
            rust_analyzers_under(pid).is_empty(),
            "a proxy runs its own rust-analyzer"
        );
        assert!(status["clients"]
            .as_array()
            .expect("clients")
            .iter()
            .any(|c| c["pid"] == pid && c["sessions"] == 1));
    }
    assert_eq!(rust_analyzers_under(daemon).len(), 1, "{status}");

    // The text form, as people read it.
    let text = world
        .command(BIN)
        .args(["daemon", "status", "--config"])
        .arg(&world.config)
        .output()
        .await
        .expect("daemon status");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("clients: 3"), "{text}");
    assert!(text.contains("servers: 1"), "{text}");
    assert!(
        text.contains(&format!(
            "rust-analyzer running (ready) {}",
            world.project.display()
        )),
        "{text}"
    );

    // A write one proxy's editor confirmed is what the shared server sees
    // for the others too, while the disk still has the old text.
    let report = world.project.join("src/report.rs");
    let on_disk = std::fs::read_to_string(&report).expect("read report.rs");
    let written = format!("{on_disk}\npub fn twice() -> u32 {{\n    area(2, 2)\n}}\n");
    let confirmed = proxies[0]
        .ask(
            "fs/write_text_file",
            json!({"sessionId": "s", "path": report.display().to_string(), "content": written}),
        )
        .await;
    assert!(confirmed.get("result").is_some(), "{confirmed}");
    assert_eq!(std::fs::read_to_string(&report).expect("read"), on_disk);
    let mut expected = expected_references();
    expected.push(("report.rs".into(), 8));
    expected.sort();
    assert_eq!(proxies[1].references(&id, &world.project).await, expected);
    assert_eq!(proxies[2].references(&id, &world.project).await, expected);

    // The proxy that started the daemon goes (SIGKILL): the daemon, in its
    // own session, and the server stay for the other two.
    let server = servers[0]["_meta"]["acp-lsp"]["pid"]
        .as_u64()
        .expect("server pid") as u32;
    let starter = parent(daemon).expect("the daemon's parent");
    let first = proxies
        .iter()
        .position(|p| p.pid() == starter)
        .expect("a proxy started the daemon");
    let mut proxies: Vec<Proxy> = proxies.into_iter().collect();
    let mut gone = proxies.remove(first);
    gone.kill().await;
    world
        .status_until("two clients", |s| {
            s["clients"].as_array().map(Vec::len) == Some(2)
        })
        .await;
    assert!(process_alive(daemon) && process_alive(server));
    for proxy in proxies.iter_mut() {
        assert_eq!(proxy.rust_analyzer().await["serverId"], id.as_str());
        assert_eq!(proxy.references(&id, &world.project).await, expected);
    }

    // Every proxy gone: the server stops after the idle grace, then the
    // daemon, which has neither clients nor servers, exits.
    for proxy in proxies.iter_mut() {
        proxy.kill().await;
    }
    let survivors = wait_until_gone(&[server, daemon], PROCESS_TIMEOUT).await;
    assert!(
        survivors.is_empty(),
        "still running with no clients: {survivors:?} (server {server}, daemon {daemon})"
    );
}

/// SIGKILL of the daemon while a request waits in it (at the fake server,
/// which never answers, so it is in flight for sure): that request fails
/// `daemon_unavailable` (retryable); the proxy starts a new daemon and
/// re-attaches; the same serverIds come back and rust-analyzer answers; no
/// server of the dead daemon is left running.
#[tokio::test]
async fn a_killed_daemon_comes_back_with_the_same_server_ids() {
    support::require("rust-analyzer", "rustup component add rust-analyzer");
    let log_dir = tempfile::tempdir().expect("temp dir");
    let log = log_dir.path().join("fake.log");
    let world = World::with(&hanging_fake(&log), |project| {
        support::copy_tree(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/rust-three-files"),
            project,
        );
        std::fs::write(project.join("fake.toml"), "").expect("marker");
        std::fs::write(project.join("a.fake"), "hello\n").expect("document");
    });
    let mut proxy = world.proxy().await;
    let servers = proxy.ask("lsp/servers", json!({"sessionId": "s"})).await;
    let ra = named(&servers["result"]["servers"], "rust-analyzer")["serverId"].clone();
    let fake = named(&servers["result"]["servers"], "fake")["serverId"].clone();
    let asked = proxy
        .send(
            "_test/ask",
            json!({"method": "lsp/request", "params": {
                "sessionId": "s", "serverId": fake, "method": "textDocument/hover",
                "params": {"textDocument": {"uri": uri_of(&world.project.join("a.fake"))},
                           "position": {"line": 0, "character": 0}},
                "_meta": {"waitUntilReady": WAIT_UNTIL_READY_MS}}}),
        )
        .await;
    let status = world
        .status_until("the request in flight and both servers' pids", |s| {
            s["clients"][0]["inFlight"] == 1
                && s["servers"].as_array().is_some_and(|l| {
                    l.len() == 2 && l.iter().all(|e| e["_meta"]["acp-lsp"]["pid"].is_u64())
                })
        })
        .await;
    let daemon = status["pid"].as_u64().expect("pid") as u32;
    let old_servers: Vec<u32> = status["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .map(|e| e["_meta"]["acp-lsp"]["pid"].as_u64().expect("pid") as u32)
        .collect();
    // SAFETY: kill only sends a signal.
    unsafe {
        libc::kill(daemon as libc::pid_t, libc::SIGKILL);
    }
    let answer = proxy.answer(asked).await;
    let error = &answer["result"]["response"]["error"];
    assert_eq!(error["data"]["reason"], "daemon_unavailable", "{answer}");
    assert_eq!(error["data"]["retryable"], true, "{answer}");

    // No orphan: the servers died with their daemon.
    let survivors = wait_until_gone(&old_servers, PROCESS_TIMEOUT).await;
    assert!(survivors.is_empty(), "outlived their daemon: {survivors:?}");
    // The same serverIds, now served by a new daemon; rust-analyzer answers.
    let servers = proxy.ask("lsp/servers", json!({"sessionId": "s"})).await;
    assert_eq!(
        named(&servers["result"]["servers"], "rust-analyzer")["serverId"],
        ra
    );
    assert_eq!(
        named(&servers["result"]["servers"], "fake")["serverId"],
        fake
    );
    let ra = ra.as_str().expect("serverId");
    assert_eq!(
        proxy.references(ra, &world.project).await,
        expected_references()
    );
    let status = world
        .status_until("the new daemon", |s| {
            s["pid"].as_u64() != Some(daemon as u64)
        })
        .await;
    assert_eq!(
        status["clients"].as_array().map(Vec::len),
        Some(1),
        "{status}"
    );
    assert_eq!(named(&status["servers"], "rust-analyzer")["serverId"], ra);
    let new_daemon = status["pid"].as_u64().expect("pid") as u32;
    assert_eq!(rust_analyzers_under(new_daemon).len(), 1, "{status}");
}

/// An agent's `$/cancel_request` crosses the daemon: the shared server gets
/// `$/cancelRequest` for the request, and the agent -32800 `cancelled`
/// (not the deadline's answer). The fake server, which never answers, is
/// the only way to hold a request in the server for sure.
#[tokio::test]
async fn a_cancel_reaches_the_shared_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("fake.log");
    let world = World::with(&hanging_fake(&log), |project| {
        std::fs::write(project.join("fake.toml"), "").expect("marker");
        std::fs::write(project.join("a.fake"), "hello\n").expect("document");
    });
    let mut proxy = world.proxy().await;
    let servers = proxy.ask("lsp/servers", json!({"sessionId": "s"})).await;
    let id = servers["result"]["servers"][0]["serverId"]
        .as_str()
        .unwrap_or_else(|| panic!("no server: {servers}"))
        .to_string();
    let uri = uri_of(&world.project.join("a.fake"));
    // The agent's second request of its own: id "agent-2".
    let asked = proxy
        .send(
            "_test/ask",
            json!({"method": "lsp/request", "params": {
                "sessionId": "s", "serverId": id, "method": "textDocument/hover",
                "params": {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}},
                "_meta": {"waitUntilReady": WAIT_UNTIL_READY_MS}}}),
        )
        .await;
    let deadline = Instant::now() + PROCESS_TIMEOUT;
    let server_side = loop {
        if let Some(hover) = read_log(&log)
            .into_iter()
            .find(|m| m["method"] == "textDocument/hover")
        {
            break hover["id"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "the hover never reached the server"
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    };
    proxy
        .call(
            "_test/notify",
            json!({"method": "$/cancel_request", "params": {"requestId": "agent-2"}}),
        )
        .await;
    let answer = proxy.answer(asked).await;
    let error = &answer["result"]["response"]["error"];
    assert_eq!(error["code"], -32800, "{answer}");
    assert_eq!(error["data"]["reason"], "cancelled", "{answer}");
    assert!(
        read_log(&log)
            .iter()
            .any(|m| m["method"] == "$/cancelRequest" && m["params"]["id"] == server_side),
        "no $/cancelRequest for {server_side}"
    );
}

/// Longest wait for one reply on the daemon socket (the fake answers at
/// once; a request that got no reply waits this long and fails).
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// A client speaking the daemon socket's protocol (`daemon::wire`) itself.
struct WireClient {
    lines: Lines<BufReader<tokio::net::unix::OwnedReadHalf>>,
    write: tokio::net::unix::OwnedWriteHalf,
    /// Every reply read so far (id, reply).
    replies: Vec<(u64, Value)>,
}

impl WireClient {
    async fn connect(socket: &Path) -> WireClient {
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        let stream = loop {
            match tokio::net::UnixStream::connect(socket).await {
                Ok(stream) => break stream,
                Err(e) => assert!(
                    Instant::now() < deadline,
                    "no daemon on {}: {e}",
                    socket.display()
                ),
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        };
        let (read, write) = stream.into_split();
        WireClient {
            lines: BufReader::new(read).lines(),
            write,
            replies: Vec::new(),
        }
    }

    async fn send(&mut self, id: u64, op: Value) {
        let line = json!({"id": id, "op": op});
        self.write
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write to the daemon");
    }

    /// The reply to `id` (every reply read on the way is kept).
    async fn reply(&mut self, id: u64) -> Value {
        tokio::time::timeout(REPLY_TIMEOUT, async {
            loop {
                let line = self
                    .lines
                    .next_line()
                    .await
                    .expect("read from the daemon")
                    .expect("the daemon's connection open");
                let reply: Value = serde_json::from_str(&line).expect("a JSON reply");
                let of = reply["id"].as_u64().expect("a reply id");
                self.replies.push((of, reply.clone()));
                if of == id {
                    return reply;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no reply to {id} within {REPLY_TIMEOUT:?}"))
    }

    async fn call(&mut self, id: u64, op: Value) -> Value {
        self.send(id, op).await;
        self.reply(id).await
    }
}

/// A panic in the daemon's request path (the test hook
/// `ACP_LSP_TEST_PANIC_IN_DAEMON_REQUEST`, here for `textDocument/hover`)
/// stays in that request: exactly one reply, an error whose `data.reason`
/// is `internal`; its in-flight slot is freed; the daemon lives on and a
/// later request on the same connection is answered.
#[tokio::test]
async fn a_panic_in_the_daemons_request_path_answers_once_and_frees_its_slot() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("fake.log");
    let world = World::with(&fake_entry(&log, ""), |project| {
        std::fs::write(project.join("fake.toml"), "").expect("marker");
        std::fs::write(project.join("a.fake"), "hello\n").expect("document");
    });
    let daemon_log = std::fs::File::create(dir.path().join("daemon.log")).expect("daemon log");
    let mut daemon = world
        .command(BIN)
        .args(["daemon", "run", "--config"])
        .arg(&world.config)
        .env(acp_lsp::daemon::serve::TEST_PANIC_ENV, "textDocument/hover")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(daemon_log)
        .kill_on_drop(true)
        .spawn()
        .expect("start acp-lsp daemon run");
    let paths = acp_lsp::daemon::paths::Paths::under(&world.runtime, Some(&world.config))
        .expect("the daemon's paths");
    let mut client = WireClient::connect(&paths.socket).await;
    let welcome = client
        .call(
            1,
            json!({"hello": {"pid": std::process::id(), "version": env!("CARGO_PKG_VERSION")}}),
        )
        .await;
    assert!(welcome["ok"]["client"].is_u64(), "{welcome}");
    let root = world.project.display().to_string();
    client
        .send(2, json!({"open": {"session": "s", "roots": [root]}}))
        .await;
    let servers = client.call(3, json!({"servers": {"session": "s"}})).await;
    let server_id = servers["ok"][0]["serverId"]
        .as_str()
        .unwrap_or_else(|| panic!("no server: {servers}"))
        .to_string();
    let uri = uri_of(&world.project.join("a.fake"));
    let request = |method: &str| {
        json!({"request": {
            "session": "s",
            "server_id": server_id,
            "method": method,
            "params": {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}},
            "documents": [uri],
            "wait_ms": WAIT_UNTIL_READY_MS,
        }})
    };

    let panicked = client.call(4, request("textDocument/hover")).await;
    let error: acp_lsp::daemon::wire::WireError =
        serde_json::from_value(panicked["err"].clone()).expect("an error reply");
    let error = acp_lsp_core::gate::GateError::from(error);
    assert_eq!(error.reason(), "internal", "{panicked}");
    assert!(error.to_string().contains("panicked"), "{error}");

    // The slot is free and the daemon serves on: a later request succeeds.
    let later = client.call(5, request("textDocument/definition")).await;
    assert!(
        later["ok"]["result"]["echo"]["method"] == "textDocument/definition",
        "{later}"
    );
    let status = world.status().await.expect("the daemon answers status");
    assert_eq!(status["clients"][0]["inFlight"], 0, "{status}");
    assert_eq!(
        client.replies.iter().filter(|(id, _)| *id == 4).count(),
        1,
        "one reply to the request that panicked: {:?}",
        client.replies
    );
    assert!(
        daemon.try_wait().expect("the daemon's state").is_none(),
        "the daemon survived the panic"
    );
}
