//! The `acp-lsp` binary as a child of the test: `acp-lsp proxy` in front of
//! a scripted agent, its stderr captured in a file, and the editor's side as
//! an ACP line client ([`AcpClient`]). For tests of what only the real
//! process shows: signals, exit, its log, what it leaves running.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The `acp-lsp` binary cargo built for this package's tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_acp-lsp");
/// Longest wait for one answer through the proxy (a real server may load a
/// project first: seconds on a loaded machine).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(180);
/// Longest wait for the proxy to exit once it was told to.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(60);

/// An ACP agent that answers `initialize` and `session/new` (session "s")
/// and every other request with `null`.
pub const ANSWERING_AGENT: &str = r#"
import json, sys
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if "id" not in msg or "method" not in msg:
        continue
    method = msg["method"]
    if method == "initialize":
        result = {"protocolVersion": 1, "agentCapabilities": {}}
    elif method == "session/new":
        result = {"sessionId": "s"}
    else:
        result = None
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
"#;

/// An ACP agent that also, for the editor's `_test/ask {method, params}`,
/// sends that request to its client (the proxy answers `lsp/*`) and answers
/// with `{response}`, and for `_test/notify {method, params}` sends that
/// notification (tests/shared-bench/agent.py).
pub const ASKING_AGENT: &str = include_str!("../shared-bench/agent.py");

/// How to start a proxy.
pub struct ProxyBuilder {
    args: Vec<OsString>,
    cwd: PathBuf,
    env: Vec<(OsString, OsString)>,
    agent: String,
    log_level: String,
}

impl ProxyBuilder {
    /// `acp-lsp proxy` in `cwd` in front of the Python `agent` script.
    pub fn new(cwd: &Path, agent: &str) -> ProxyBuilder {
        ProxyBuilder {
            args: Vec::new(),
            cwd: cwd.to_path_buf(),
            env: Vec::new(),
            agent: agent.to_string(),
            log_level: "info".into(),
        }
    }

    /// One more argument of `proxy` (before `--`).
    pub fn arg(mut self, arg: impl Into<OsString>) -> ProxyBuilder {
        self.args.push(arg.into());
        self
    }

    /// `--config FILE`.
    pub fn config(self, file: &Path) -> ProxyBuilder {
        self.arg("--config").arg(file)
    }

    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> ProxyBuilder {
        self.env.push((name.into(), value.into()));
        self
    }

    /// `--log-level` (default `info`: the story of a session).
    pub fn log_level(mut self, level: &str) -> ProxyBuilder {
        self.log_level = level.to_string();
        self
    }

    /// Starts it; stderr goes to a file of its own.
    pub fn spawn(self) -> ProxyChild {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let agent = dir.path().join("agent.py");
        std::fs::write(&agent, &self.agent).expect("write the agent");
        let stderr = dir.path().join("proxy.log");
        let file = std::fs::File::create(&stderr).expect("create the proxy's log");
        let mut child = tokio::process::Command::new(BIN)
            .arg("proxy")
            .args(&self.args)
            .arg("--log-level")
            .arg(&self.log_level)
            .arg("--")
            .arg("python3")
            .arg(&agent)
            .current_dir(&self.cwd)
            .envs(self.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .expect("start acp-lsp proxy");
        let editor = AcpClient::new(
            child.stdin.take().expect("piped stdin"),
            child.stdout.take().expect("piped stdout"),
        );
        ProxyChild {
            child,
            editor,
            stderr,
            _dir: dir,
        }
    }
}

/// A running `acp-lsp proxy`.
pub struct ProxyChild {
    pub child: Child,
    /// The editor's side of the proxy's stdio.
    pub editor: AcpClient,
    stderr: PathBuf,
    _dir: tempfile::TempDir,
}

impl ProxyChild {
    pub fn pid(&self) -> u32 {
        self.child.id().expect("the proxy runs")
    }

    /// What the proxy logged so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Its log lines that contain `text`.
    pub fn logged(&self, text: &str) -> Vec<String> {
        self.stderr()
            .lines()
            .filter(|l| l.contains(text))
            .map(str::to_string)
            .collect()
    }

    /// Waits for the proxy to exit, within [`EXIT_TIMEOUT`].
    pub async fn exited(&mut self) -> ExitStatus {
        tokio::time::timeout(EXIT_TIMEOUT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the proxy did not exit; it logged:\n{}", self.stderr()))
            .expect("reap the proxy")
    }
}

/// The editor's side of an ACP connection: newline-delimited JSON-RPC.
/// While it waits for an answer it confirms the agent's
/// `fs/write_text_file` without writing (so only the confirmed text, not
/// the disk, can show a change) and leaves other requests unanswered.
pub struct AcpClient {
    input: ChildStdin,
    output: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl AcpClient {
    pub fn new(input: ChildStdin, output: ChildStdout) -> AcpClient {
        AcpClient {
            input,
            output: BufReader::new(output).lines(),
            next_id: 0,
        }
    }

    /// Writes one line.
    pub async fn write(&mut self, message: &Value) {
        self.input
            .write_all(format!("{message}\n").as_bytes())
            .await
            .expect("write to the proxy");
        self.input.flush().await.expect("flush to the proxy");
    }

    /// Sends a request; its id.
    pub async fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// The next message, or `None` at the end of the proxy's output.
    pub async fn next(&mut self) -> Option<Value> {
        let line = self
            .output
            .next_line()
            .await
            .expect("read from the proxy")?;
        Some(serde_json::from_str(&line).expect("a JSON line"))
    }

    /// The answer to request `id`, within [`ANSWER_TIMEOUT`].
    pub async fn answer(&mut self, id: u64) -> Value {
        tokio::time::timeout(ANSWER_TIMEOUT, async {
            loop {
                let message = self.next().await.expect("the proxy's stdout open");
                if message["id"] == id && message.get("method").is_none() {
                    return message;
                }
                if message["method"] == "fs/write_text_file" {
                    let ok = json!({"jsonrpc": "2.0", "id": message["id"], "result": null});
                    self.write(&ok).await;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no answer to {id} within {ANSWER_TIMEOUT:?}"))
    }

    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        self.answer(id).await
    }

    /// `initialize` and `session/new` in `cwd`; the session's id.
    pub async fn start_session(&mut self, cwd: &Path) -> String {
        let init = self
            .call(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": {}}),
            )
            .await;
        assert!(init.get("result").is_some(), "{init}");
        let session = self
            .call(
                "session/new",
                json!({"cwd": cwd.display().to_string(), "mcpServers": []}),
            )
            .await;
        session["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {session}"))
            .to_string()
    }

    /// With [`ASKING_AGENT`]: the agent's request `method` answered by the
    /// proxy, as the agent got it.
    pub async fn ask(&mut self, method: &str, params: Value) -> Value {
        let answer = self
            .call("_test/ask", json!({"method": method, "params": params}))
            .await;
        answer["result"]["response"].clone()
    }
}
