//! A real ACP agent that knows nothing of `lsp/*` uses acp-lsp's language
//! servers through the MCP server acp-lsp injects into `session/new`.
//!
//! editor (official ACP Rust SDK, here) ⇄ `acp-lsp proxy` ⇄
//! `elizacp --deterministic acp` (crates.io), which starts the MCP servers a
//! session lists when a prompt says `Use tool SERVER::TOOL with JSON` and
//! answers with the tool's result. The project is a copy of
//! `tests/projects/rust-three-files`, served by real rust-analyzer.
//!
//! Needs `elizacp` (`cargo install --locked elizacp`) and rust-analyzer on
//! `PATH`; without either the test fails (never skips).
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]

mod support;

use acp_lsp::lsp::detect::find_on_path;
use agent_client_protocol::{AcpAgent, AcpAgentConfig};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::acp_editor::{lock, Seen};

/// Bound on the whole conversation (proxy, agent, rust-analyzer, two tool
/// calls); above the tools' own readiness wait, so they report first.
const SESSION_TIMEOUT: Duration = Duration::from_secs(180);

/// Runs the prompts in one session through `acp-lsp proxy OPTIONS -- elizacp`;
/// returns the agent's reply to each.
async fn converse(
    root: &Path,
    elizacp: &Path,
    options: &[&str],
    prompts: &[String],
    seen: Arc<Mutex<Seen>>,
) -> Vec<String> {
    converse_with_env(root, elizacp, options, &[], prompts, seen).await
}

/// [`converse`], the proxy started with `env` added to its environment.
async fn converse_with_env(
    root: &Path,
    elizacp: &Path,
    options: &[&str],
    env: &[(&str, &Path)],
    prompts: &[String],
    seen: Arc<Mutex<Seen>>,
) -> Vec<String> {
    let mut args: Vec<String> = env
        .iter()
        .map(|(name, value)| format!("{name}={}", value.display()))
        .collect();
    args.push(env!("CARGO_BIN_EXE_acp-lsp").to_string());
    args.push("proxy".to_string());
    args.extend(options.iter().map(|o| o.to_string()));
    args.extend([
        "--".to_string(),
        elizacp.display().to_string(),
        "--deterministic".to_string(),
        "acp".to_string(),
    ]);
    // Through env(1): the variables reach the proxy alone, not this process.
    let proxy = AcpAgent::new(AcpAgentConfig::new("env").args(args));
    support::acp_editor::converse(proxy, "mcp-elizacp-test", root, prompts, seen).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elizacp_calls_references_and_rename_through_acp_lsp() {
    let elizacp =
        find_on_path("elizacp").expect("elizacp is not installed: cargo install --locked elizacp");
    assert!(
        find_on_path("rust-analyzer").is_some(),
        "rust-analyzer is not installed"
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("project");
    std::fs::create_dir_all(&root).expect("create project dir");
    support::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/rust-three-files"),
        &root,
    );
    let root = root.canonicalize().expect("canonical root");

    let prompts = [
        "List tools from acp-lsp".to_string(),
        r#"Use tool acp-lsp::references with {"file": "src/geometry.rs", "line": 2, "column": 8}"#.to_string(),
        r#"Use tool acp-lsp::rename with {"file": "src/geometry.rs", "line": 2, "column": 8, "new_name": "surface"}"#
            .to_string(),
    ];
    let seen = Arc::new(Mutex::new(Seen::default()));
    let replies = tokio::time::timeout(
        SESSION_TIMEOUT,
        converse(&root, &elizacp, &[], &prompts, seen.clone()),
    )
    .await
    .unwrap_or_else(|_| panic!("no end of the conversation within {SESSION_TIMEOUT:?}"));

    let tools = &replies[0];
    for tool in ["references", "rename", "definition", "hover", "diagnostics"] {
        assert!(
            tools.contains(&format!("- {tool}:")),
            "{tool} not listed:\n{tools}"
        );
    }

    // elizacp prints the CallToolResult with `{:?}`: the text is escaped once.
    let references = &replies[1];
    assert!(references.starts_with("OK: "), "{references}");
    for needle in [
        "5 references:",
        "src/geometry.rs:2:8: pub fn area(width: u32, height: u32) -> u32 {",
        "src/report.rs:5:5: area(side, side)",
        "src/stats.rs:5:27: let first = geometry::area(a.0, a.1);",
        "src/stats.rs:6:28: let second = geometry::area(b.0, b.1);",
    ] {
        assert!(
            references.contains(needle),
            "{needle:?} not in\n{references}"
        );
    }

    let rename = &replies[2];
    assert!(rename.starts_with("OK: "), "{rename}");
    assert!(
        rename
            .contains("renamed `area` to `surface` with rust-analyzer, written through the editor"),
        "{rename}"
    );
    let stats = std::fs::read_to_string(root.join("src/stats.rs")).expect("read stats.rs");
    assert!(
        stats.contains("let first = geometry::surface(a.0, a.1);"),
        "{stats}"
    );
    let report = std::fs::read_to_string(root.join("src/report.rs")).expect("read report.rs");
    assert!(report.contains("use crate::geometry::surface;"), "{report}");
    let mut writes: Vec<String> = lock(&seen)
        .writes
        .iter()
        .map(|p| {
            p.strip_prefix(&root)
                .expect("inside the project")
                .display()
                .to_string()
        })
        .collect();
    writes.sort();
    assert_eq!(writes, ["src/geometry.rs", "src/report.rs", "src/stats.rs"]);
}

/// With `--shared` the servers are the daemon's, and the MCP tools still
/// work: they go through the same gate, whose host forwards to the daemon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_shared_servers_the_mcp_tools_answer_from_the_daemon() {
    let elizacp =
        find_on_path("elizacp").expect("elizacp is not installed: cargo install --locked elizacp");
    support::require("rust-analyzer", "rustup component add rust-analyzer");
    let tmp = tempfile::tempdir().expect("tempdir");
    let runtime = tmp.path().join("run");
    std::fs::create_dir(&runtime).expect("runtime dir");
    let root = tmp.path().join("project");
    std::fs::create_dir_all(&root).expect("create project dir");
    support::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/rust-three-files"),
        &root,
    );
    let root = root.canonicalize().expect("canonical root");
    let prompts = [
        r#"Use tool acp-lsp::references with {"file": "src/geometry.rs", "line": 2, "column": 8}"#
            .to_string(),
    ];
    let env = [("XDG_RUNTIME_DIR", runtime.as_path())];
    let replies = tokio::time::timeout(
        SESSION_TIMEOUT,
        converse_with_env(
            &root,
            &elizacp,
            &["--shared"],
            &env,
            &prompts,
            Arc::new(Mutex::new(Seen::default())),
        ),
    )
    .await
    .unwrap_or_else(|_| panic!("no end of the conversation within {SESSION_TIMEOUT:?}"));
    let references = &replies[0];
    assert!(references.starts_with("OK: "), "{references}");
    assert!(references.contains("5 references:"), "{references}");
    assert!(
        references.contains("src/stats.rs:6:28: let second = geometry::area(b.0, b.1);"),
        "{references}"
    );

    // The answer came from the daemon's rust-analyzer, not one of the proxy's.
    let status = tokio::process::Command::new(env!("CARGO_BIN_EXE_acp-lsp"))
        .args(["daemon", "status", "--json"])
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .await
        .expect("run daemon status");
    assert!(status.status.success(), "no daemon answered");
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).expect("status JSON");
    let servers = status["servers"].as_array().expect("servers");
    assert!(
        servers.iter().any(|s| s["name"] == "rust-analyzer"),
        "{status}"
    );
    // The daemon ends with its servers (it would after its idle grace).
    let daemon = status["pid"].as_u64().expect("daemon pid") as i32;
    // SAFETY: kill only sends a signal.
    unsafe {
        libc::kill(daemon, libc::SIGTERM);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_mcp_off_the_agent_gets_no_server_of_ours() {
    let elizacp =
        find_on_path("elizacp").expect("elizacp is not installed: cargo install --locked elizacp");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().canonicalize().expect("canonical root");
    let prompts = ["List tools from acp-lsp".to_string()];
    let seen = Arc::new(Mutex::new(Seen::default()));
    let replies = tokio::time::timeout(
        SESSION_TIMEOUT,
        converse(&root, &elizacp, &["--mcp", "off"], &prompts, seen),
    )
    .await
    .unwrap_or_else(|_| panic!("no end of the conversation within {SESSION_TIMEOUT:?}"));
    assert!(
        replies[0].contains("MCP server 'acp-lsp' not found"),
        "{}",
        replies[0]
    );
}

/// Longest wait for one line from the proxy, or for it to exit once its
/// input is closed (it gives the agent `AGENT_EXIT_GRACE`, 5 s, to exit).
const LINE_TIMEOUT: Duration = Duration::from_secs(60);

/// The editor's side, written by hand: one JSON-RPC line each way.
struct Editor {
    stdin: Option<tokio::process::ChildStdin>,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Editor {
    async fn send(&mut self, message: serde_json::Value) {
        use tokio::io::AsyncWriteExt;
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .expect("write to the proxy");
    }

    /// The response to request `id` (notifications and requests before it are skipped).
    async fn response(&mut self, id: u64) -> serde_json::Value {
        loop {
            let line = tokio::time::timeout(LINE_TIMEOUT, self.stdout.next_line())
                .await
                .unwrap_or_else(|_| panic!("no response {id} within {LINE_TIMEOUT:?}"))
                .expect("read from the proxy")
                .unwrap_or_else(|| panic!("the proxy closed its output before response {id}"));
            let message: serde_json::Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    }
}

/// Where `wanted` occur in `events`, in that order; fails naming the first missing.
fn assert_in_order(events: &[serde_json::Value], wanted: &[&str], log: &str) {
    let mut from = 0;
    for message in wanted {
        let at = events[from..]
            .iter()
            .position(|e| e["message"] == *message)
            .unwrap_or_else(|| panic!("no {message:?} after {:?} in the log:\n{log}", wanted));
        from += at + 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_tells_its_story_in_the_json_log() {
    let elizacp =
        find_on_path("elizacp").expect("elizacp is not installed: cargo install --locked elizacp");
    support::require("clangd", "apt-get install -y clangd");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("project");
    std::fs::create_dir_all(&root).expect("create project dir");
    support::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/c-project"),
        &root,
    );
    let root = root.canonicalize().expect("canonical root");
    support::write_compile_commands(&root);
    std::fs::create_dir_all(tmp.path().join("config")).expect("config home");
    let log_path = tmp.path().join("acp-lsp.log");

    let mut proxy = tokio::process::Command::new(env!("CARGO_BIN_EXE_acp-lsp"))
        .args([
            "proxy",
            "--log-level",
            "info",
            "--log-format",
            "json",
            "--log-file",
        ])
        .arg(&log_path)
        .arg("--")
        .arg(&elizacp)
        .args(["--deterministic", "acp"])
        .env("XDG_CONFIG_HOME", tmp.path().join("config"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start acp-lsp proxy");
    let mut editor = Editor {
        stdin: proxy.stdin.take(),
        stdout: tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(
            proxy.stdout.take().expect("stdout is piped"),
        )),
    };
    editor
        .send(
            serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        )
        .await;
    editor.response(0).await;
    editor
        .send(
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
            "params": {"cwd": root, "mcpServers": []}}),
        )
        .await;
    let session = editor.response(1).await["result"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string();
    // A tool call: the agent starts the injected MCP server, which asks clangd.
    let prompt =
        r#"Use tool acp-lsp::references with {"file": "src/geometry.c", "line": 3, "column": 5}"#;
    editor
        .send(
            serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": prompt}]}}),
        )
        .await;
    editor.response(2).await;
    // The editor hangs up: the proxy ends the session, its servers and the agent.
    drop(editor.stdin.take());
    tokio::time::timeout(LINE_TIMEOUT, proxy.wait())
        .await
        .unwrap_or_else(|_| panic!("the proxy did not exit within {LINE_TIMEOUT:?}"))
        .expect("wait for the proxy");

    let log = std::fs::read_to_string(&log_path).expect("read the log");
    // One JSON object per line, one line per event.
    let events: Vec<serde_json::Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let event = |message: &str| {
        events
            .iter()
            .find(|e| e["message"] == message)
            .unwrap_or_else(|| panic!("no {message:?} in the log:\n{log}"))
    };
    assert_in_order(
        &events,
        &[
            "agent spawned",
            "session opened",
            "MCP server injected",
            "MCP connection admitted",
            "session closed",
            "server stopped",
            "agent exited",
        ],
        &log,
    );
    assert_in_order(
        &events,
        &[
            "session opened",
            "server spawned",
            "server ready",
            "server stopped",
        ],
        &log,
    );

    let spawned = event("agent spawned");
    assert!(
        spawned["command"]
            .as_str()
            .is_some_and(|c| c.contains("elizacp")),
        "{spawned}"
    );
    assert!(
        spawned["pid"].as_u64().is_some_and(|pid| pid > 0),
        "{spawned}"
    );
    let opened = event("session opened");
    assert_eq!(opened["session"], session.as_str(), "{opened}");
    assert_eq!(opened["roots"], root.display().to_string(), "{opened}");
    assert_eq!(event("MCP server injected")["session"], session.as_str());
    assert_eq!(event("session closed")["session"], session.as_str());
    let server = event("server spawned");
    assert_eq!(server["server"], "clangd", "{server}");
    assert_eq!(server["root"], root.display().to_string(), "{server}");
    assert!(
        server["pid"].as_u64().is_some_and(|pid| pid > 0),
        "{server}"
    );
    // Its lines carry the server's span.
    assert_eq!(server["span"]["server"], "clangd", "{server}");
    let ready = event("server ready");
    assert!(ready["after_ms"].is_u64(), "{ready}");
    assert_eq!(event("server stopped")["server"], "clangd");
    assert!(event("agent exited")["status"].is_string());
    // `info` is acp-lsp's story: the libraries' info lines are left out.
    for e in events.iter().filter(|e| e["level"] == "INFO") {
        assert!(
            e["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("acp_lsp")),
            "an info line not of acp-lsp's: {e}"
        );
    }
}
