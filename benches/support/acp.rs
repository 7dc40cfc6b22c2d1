//! The editor's side of a real `acp-lsp proxy` process for the figures that
//! run one (6, 7): requests on its stdin, answers read from its stdout by a
//! thread, so every wait is bounded.

use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a proxy that lost its input may take to end its agent and exit.
const END_TIMEOUT: Duration = Duration::from_secs(20);

pub struct AcpProxy {
    child: Child,
    input: Option<ChildStdin>,
    output: mpsc::Receiver<String>,
    next_id: u64,
    /// Longest wait for one answer.
    answer_timeout: Duration,
}

impl AcpProxy {
    /// Starts `command` (an `acp-lsp proxy … -- AGENT`) with piped stdio.
    pub fn spawn(mut command: Command, answer_timeout: Duration) -> Result<AcpProxy> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("start acp-lsp proxy")?;
        let input = child.stdin.take().context("stdin")?;
        let stdout = child.stdout.take().context("stdout")?;
        let (tx, output) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Ok(AcpProxy {
            child,
            input: Some(input),
            output,
            next_id: 0,
            answer_timeout,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a request and returns its response (other lines are skipped).
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        let input = self.input.as_mut().context("input closed")?;
        writeln!(
            input,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )?;
        input.flush()?;
        let deadline = Instant::now() + self.answer_timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.output.recv_timeout(left).with_context(|| {
                format!("no answer to {method} within {:?}", self.answer_timeout)
            })?;
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message["id"] == id && message.get("method").is_none() {
                return Ok(message);
            }
        }
    }

    /// `initialize` and `session/new` over `project`; the latter's response.
    pub fn open(&mut self, project: &Path) -> Result<Value> {
        self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )?;
        self.call(
            "session/new",
            json!({"cwd": project.display().to_string(), "mcpServers": []}),
        )
    }

    /// Closes the proxy's input: it ends its agent, then itself (killed
    /// after [`END_TIMEOUT`]).
    pub fn end(mut self) {
        drop(self.input.take());
        let deadline = Instant::now() + END_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
