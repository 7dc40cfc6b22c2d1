//! The shared daemon with real parts: the `acp-lsp` binary as three
//! `proxy --shared`s (each in front of a small scripted ACP agent) on one
//! Rust project, one rust-analyzer among them; the daemon killed with
//! SIGKILL mid-request and coming back; `daemon status`.
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]

mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::fake::{fake_server, read_log, uri_of};
use support::procfs::{all_pids, process_alive, wait_until_gone, POLL_INTERVAL};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// Longest wait for an answer through a proxy (rust-analyzer loads the
/// project first: seconds on a loaded machine).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(180);
/// Longest wait for a process to appear or go.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(30);
/// `waitUntilReady` of the references requests.
const WAIT_UNTIL_READY_MS: u64 = 120_000;

/// An ACP agent that answers `initialize` and `session/new` (always session
/// "s": the daemon must keep three proxies' "s" apart) and, for the
/// editor's `_test/ask {method, params}`, sends that request to its client
/// (the proxy answers `lsp/*`) and answers with `{response}`; for
/// `_test/notify {method, params}`, sends that notification.
const AGENT: &str = include_str!("shared-bench/agent.py");

/// A private runtime dir, config and project copy; kills the daemon it
/// finds at the end (its servers go with it).
struct World {
    dir: tempfile::TempDir,
    runtime: PathBuf,
    config: PathBuf,
    project: PathBuf,
    agent: PathBuf,
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
        let agent = dir.path().join("agent.py");
        std::fs::write(&agent, AGENT).expect("write agent");
        World {
            dir,
            runtime,
            config,
            project,
            agent,
        }
    }

    fn command(&self, program: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(program);
        command
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .current_dir(&self.project);
        command
    }

    async fn proxy(&self, name: &str) -> Proxy {
        let stderr =
            std::fs::File::create(self.dir.path().join(format!("{name}.log"))).expect("proxy log");
        let mut child = self
            .command(env!("CARGO_BIN_EXE_acp-lsp"))
            .arg("proxy")
            .arg("--shared")
            .arg("--config")
            .arg(&self.config)
            .arg("--log-level")
            .arg("info")
            .arg("--")
            .arg("python3")
            .arg(&self.agent)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("start acp-lsp proxy --shared");
        let input = child.stdin.take().expect("piped stdin");
        let output = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let mut proxy = Proxy {
            child,
            input,
            output,
            next_id: 0,
        };
        let init = proxy
            .call(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": {}}),
            )
            .await;
        assert!(init.get("result").is_some(), "{init}");
        let session = proxy
            .call(
                "session/new",
                json!({"cwd": self.project.display().to_string(), "mcpServers": []}),
            )
            .await;
        assert_eq!(session["result"]["sessionId"], "s", "{session}");
        proxy
    }

    /// `acp-lsp daemon status --json`, or `None` when no daemon answers.
    async fn status(&self) -> Option<Value> {
        let output = self
            .command(env!("CARGO_BIN_EXE_acp-lsp"))
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

struct Proxy {
    child: Child,
    input: ChildStdin,
    output: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl Proxy {
    async fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let line =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        self.input
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write to proxy");
        self.input.flush().await.expect("flush");
        self.next_id
    }

    async fn answer(&mut self, id: u64) -> Value {
        tokio::time::timeout(ANSWER_TIMEOUT, async {
            loop {
                let line = self
                    .output
                    .next_line()
                    .await
                    .expect("read from proxy")
                    .expect("proxy stdout open");
                let message: Value = serde_json::from_str(&line).expect("JSON line");
                if message["id"] == id && message.get("method").is_none() {
                    return message;
                }
                // The agent's fs/write_text_file reaches this editor: it
                // confirms without writing, so only the confirmed text
                // (not the disk) can show the change.
                if message["method"] == "fs/write_text_file" {
                    let ok = json!({"jsonrpc": "2.0", "id": message["id"], "result": null});
                    self.input
                        .write_all(format!("{ok}\n").as_bytes())
                        .await
                        .expect("write to proxy");
                    self.input.flush().await.expect("flush");
                }
            }
        })
        .await
        .expect("answered in time")
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        self.answer(id).await
    }

    /// The agent's request `method` answered by the proxy: its response.
    async fn ask(&mut self, method: &str, params: Value) -> Value {
        let answer = self
            .call("_test/ask", json!({"method": method, "params": params}))
            .await;
        answer["result"]["response"].clone()
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
    format!(
        "[servers.fake]\ncommand = {}\nlanguage_ids = [\"fake\"]\nfile_extensions = [\"fake\"]\n\
         root_markers = [\"fake.toml\"]\nenv = {{ FAKE_LSP_MODE = \"hang\", FAKE_LSP_LOG = {} }}\n",
        serde_json::to_string(fake_server()).expect("string"),
        serde_json::to_string(&log.display().to_string()).expect("string"),
    )
}

/// The `lsp/servers` entry named `name` in a status or servers list.
fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .and_then(|l| l.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}

/// The parent of `pid`.
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// Live children of `parent_pid` whose program is rust-analyzer.
fn rust_analyzers_under(parent_pid: u32) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|pid| parent(*pid) == Some(parent_pid) && process_alive(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .ok()
                .and_then(|c| {
                    let first = c.split(|b| *b == 0).next()?.to_vec();
                    Some(String::from_utf8_lossy(&first).ends_with("rust-analyzer"))
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Three proxies on one project: one daemon, one rust-analyzer (under the
/// daemon, none under a proxy), one serverId, a correct references answer
/// through each, and `daemon status` listing all of it.
#[tokio::test]
async fn three_proxies_share_one_rust_analyzer() {
    let world = World::new();
    // Started together: the lock lets one daemon serve.
    let (a, b, c) = tokio::join!(world.proxy("a"), world.proxy("b"), world.proxy("c"));
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
        let pid = proxy.child.id().expect("proxy pid");
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
        .command(env!("CARGO_BIN_EXE_acp-lsp"))
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
        .position(|p| p.child.id() == Some(starter))
        .expect("a proxy started the daemon");
    let mut proxies: Vec<Proxy> = proxies.into_iter().collect();
    let mut gone = proxies.remove(first);
    gone.child.start_kill().expect("kill proxy");
    gone.child.wait().await.expect("reap proxy");
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
        proxy.child.start_kill().expect("kill proxy");
        proxy.child.wait().await.expect("reap proxy");
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
    let mut proxy = world.proxy("a").await;
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
    let mut proxy = world.proxy("a").await;
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
