//! An editor host that embeds only acp-lsp's core (the `acp-lsp-core` crate) and
//! exposes a language server it owns to its ACP agent: the agent's
//! `lsp/servers` and `lsp/request` are answered by [`Gate`] over this host's
//! own [`LspHost`], which talks to the server with a small Content-Length
//! client of its own.
//!
//! ```text
//! cargo run -p acp-lsp-core --example editor-host -- \
//!     WORKSPACE [-- AGENT COMMAND…]
//! ```
//!
//! The host starts `pyright-langserver --stdio` (or the command in
//! `EDITOR_HOST_SERVER`, split on spaces) in WORKSPACE, then acts as the
//! agent's ACP client: `initialize` with the `lsp` capability, `session/new`
//! on WORKSPACE, and from then on answers the agent's gate requests (and
//! `-32601` to anything else it asks). With an agent command it starts the
//! agent and speaks to it over the agent's stdio; without one, its own
//! stdin/stdout are the agent connection (tests/editor_host.rs plays the
//! agent that way). Logs go to stderr.
//!
//! A real editor would hand its own language-server connections to the gate
//! the same way, and sync its open buffers to the server as it does for its
//! own features; this host opens, from disk, each document a request names.

use acp_lsp_core::gate::{
    AcpLspEntry, EntryMeta, Gate, GateConfig, GateError, GateMethod, HostCall, HostReply, LspHost,
    NamedDocument, Route, ServerEntry, ServerState, Session,
};
use acp_lsp_core::jsonrpc::{Envelope, Kind, RequestId};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, Command};
use tokio::sync::{mpsc, oneshot};

/// The one server this host owns.
const SERVER_ID: &str = "editor-host-python";
/// How long a forwarded request may take (the gate's deadline).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the server's `initialize` may take.
const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the agent may take to answer `initialize` and `session/new`.
const AGENT_ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest LSP frame this host reads.
const MAX_FRAME: usize = 64 << 20;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A language server process and the client side of its connection.
struct LspClient {
    stdin: tokio::sync::Mutex<ChildStdin>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Value>>>,
    next_id: AtomicU64,
}

impl LspClient {
    /// Starts `command` in `root` and reads its output on a task of its own.
    fn spawn(command: &[String], root: &Path) -> Result<Arc<LspClient>, BoxError> {
        let (program, args) = command.split_first().ok_or("empty server command")?;
        let mut child = Command::new(program)
            .args(args)
            .current_dir(root)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting {program}: {e}"))?;
        let stdin = child.stdin.take().ok_or("the server's stdin")?;
        let stdout = child.stdout.take().ok_or("the server's stdout")?;
        let client = Arc::new(LspClient {
            stdin: tokio::sync::Mutex::new(stdin),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        });
        let reader = Arc::clone(&client);
        tokio::spawn(async move {
            let _child = child; // killed when the reader ends
            if let Err(e) = reader.read_loop(BufReader::new(stdout)).await {
                eprintln!("editor-host: server connection: {e}");
            }
            // Fail whatever still waits.
            reader.pending.lock().expect("BUG: poisoned").clear();
        });
        Ok(client)
    }

    async fn send(&self, message: &Value) -> std::io::Result<()> {
        let body = message.to_string();
        let mut stdin = self.stdin.lock().await;
        stdin
            .write_all(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes())
            .await?;
        stdin.write_all(body.as_bytes()).await?;
        stdin.flush().await
    }

    /// Sends a request; the answer is the whole response (`result` or `error`).
    /// Dropped before the answer (the agent cancelled, the deadline passed),
    /// the server is told with `$/cancelRequest` and the request forgotten.
    async fn request(self: &Arc<Self>, method: &str, params: Value) -> Result<Value, BoxError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().expect("BUG: poisoned").insert(id, tx);
        let guard = Unanswered {
            client: Arc::clone(self),
            id,
        };
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&message).await?;
        let answer = rx.await.map_err(|_| "the server went away")?;
        // Answered: the reader took it out of `pending`, so the guard has
        // nothing to cancel.
        drop(guard);
        Ok(answer)
    }

    async fn notify(&self, method: &str, params: Value) -> std::io::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    async fn read_loop(
        &self,
        mut stdout: BufReader<tokio::process::ChildStdout>,
    ) -> Result<(), BoxError> {
        loop {
            let mut length = None;
            loop {
                let mut line = String::new();
                if stdout.read_line(&mut line).await? == 0 {
                    return Ok(());
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = Some(value.trim().parse::<usize>()?);
                    }
                }
            }
            let length = length.ok_or("a frame without Content-Length")?;
            if length > MAX_FRAME {
                return Err(format!("a frame of {length} bytes").into());
            }
            let mut body = vec![0; length];
            stdout.read_exact(&mut body).await?;
            let message: Value = serde_json::from_slice(&body)?;
            self.dispatch(message).await?;
        }
    }

    /// Routes one message from the server: responses to their waiters,
    /// requests answered (a server waiting on them would stall).
    async fn dispatch(&self, message: Value) -> std::io::Result<()> {
        match (
            message.get("id"),
            message.get("method").and_then(Value::as_str),
        ) {
            (Some(id), None) => {
                let waiter = id
                    .as_u64()
                    .and_then(|id| self.pending.lock().expect("BUG: poisoned").remove(&id));
                if let Some(waiter) = waiter {
                    let _ = waiter.send(message);
                }
            }
            (Some(id), Some(method)) => {
                let result = match method {
                    // One `null` per item: the server's defaults.
                    "workspace/configuration" => {
                        let items = message["params"]["items"].as_array().map_or(0, Vec::len);
                        Value::Array(vec![Value::Null; items])
                    }
                    _ => Value::Null,
                };
                self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
                    .await?;
            }
            _ => {} // notifications: diagnostics, logs, progress
        }
        Ok(())
    }
}

/// A request of ours the server has not answered yet.
struct Unanswered {
    client: Arc<LspClient>,
    id: u64,
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        let removed = self
            .client
            .pending
            .lock()
            .expect("BUG: poisoned")
            .remove(&self.id);
        if removed.is_some() {
            let client = Arc::clone(&self.client);
            let id = self.id;
            tokio::spawn(async move {
                let _ = client.notify("$/cancelRequest", json!({"id": id})).await;
            });
        }
    }
}

/// This host's side of the gate: one server, its documents, its entry.
struct Host {
    client: Arc<LspClient>,
    root: PathBuf,
    capabilities: Box<RawValue>,
    version: Option<String>,
    opened: tokio::sync::Mutex<HashSet<String>>,
}

impl Host {
    /// Opens, with its text on disk, each named document the server has not
    /// seen yet (an editor would send its buffer).
    async fn open_documents(&self, documents: &[NamedDocument]) -> Result<(), GateError> {
        let mut opened = self.opened.lock().await;
        for document in documents {
            let uri = &document.uri;
            if opened.contains(uri) {
                continue;
            }
            // The path the gate confined (a `file:` URI inside the roots).
            let Some(path) = &document.path else {
                continue;
            };
            let Ok(text) = tokio::fs::read_to_string(path).await else {
                continue;
            };
            let language = if path.extension().is_some_and(|e| e == "py") {
                "python"
            } else {
                "plaintext"
            };
            let params = json!({"textDocument": {
                "uri": uri, "languageId": language, "version": 1, "text": text,
            }});
            self.client
                .notify("textDocument/didOpen", params)
                .await
                .map_err(|e| GateError::Internal(format!("writing to the server: {e}")))?;
            opened.insert(uri.clone());
        }
        Ok(())
    }
}

impl LspHost for Host {
    async fn servers(&self, _session: &Session) -> Vec<ServerEntry> {
        vec![ServerEntry {
            server_id: SERVER_ID.into(),
            name: "pyright".into(),
            workspace_path: self.root.display().to_string(),
            language_id: "python".into(),
            file_extensions: vec!["py".into(), "pyi".into()],
            state: ServerState::Ready.wire(),
            capabilities: self.capabilities.clone(),
            meta: EntryMeta {
                acp_lsp: AcpLspEntry {
                    status: ServerState::Ready,
                    progress: None,
                    last_error: None,
                    language_ids: vec!["python".into()],
                    version: self.version.clone(),
                    position_encoding: "utf-16".into(),
                    execute_commands: Vec::new(),
                    extension_methods: Vec::new(),
                    registrations: Vec::new(),
                    pid: None,
                    restarts: 0,
                    memory_bytes: None,
                    degraded_roots: Vec::new(),
                    dropped: None,
                    state_reason: None,
                    companion: false,
                    install_command: None,
                },
            },
        }]
    }

    async fn request(&self, call: HostCall) -> Result<HostReply, GateError> {
        // Routing: this host has one server. The gate then finishes its
        // checks against the route and gives back what to send.
        if call.server_id() != SERVER_ID {
            return Err(GateError::UnknownServer {
                server_id: call.server_id().clone(),
                servers: Vec::new(), // filled in by the gate
            });
        }
        let forward = call.route(&Route {
            execute_commands: Vec::new(),
            extension_methods: Vec::new(),
            request_timeout: REQUEST_TIMEOUT,
        })?;
        self.open_documents(&forward.documents).await?;
        let params = match &forward.params {
            Some(raw) => serde_json::from_str(raw.get())
                .map_err(|e| GateError::InvalidParams(e.to_string()))?,
            None => Value::Null,
        };
        let reply = self.client.request(&forward.method, params);
        // Cancelled: `reply` is dropped, which tells the server.
        let response = tokio::select! {
            response = reply => response,
            () = forward.cancel.cancelled() => return Err(GateError::Cancelled),
        }
        .map_err(|e| GateError::Internal(e.to_string()))?;
        if let Some(error) = response.get("error") {
            let lsp_error = RawValue::from_string(error.to_string())
                .map_err(|e| GateError::Internal(e.to_string()))?;
            return Err(GateError::ServerError { lsp_error });
        }
        let result = RawValue::from_string(response["result"].to_string())
            .map_err(|e| GateError::Internal(e.to_string()))?;
        Ok(HostReply { result, meta: None })
    }
}

/// The server's `initialize` and `initialized`: its capabilities and version.
async fn handshake(
    client: &Arc<LspClient>,
    root: &Path,
) -> Result<(Box<RawValue>, Option<String>), BoxError> {
    let uri = format!("file://{}", root.display());
    let params = json!({
        "processId": std::process::id(),
        "rootUri": uri,
        "workspaceFolders": [{"uri": uri, "name": "workspace"}],
        "capabilities": {
            "workspace": {"configuration": true, "workspaceFolders": true},
            "textDocument": {
                "hover": {"contentFormat": ["markdown", "plaintext"]},
                "definition": {}, "references": {}, "documentSymbol": {},
            },
        },
    });
    let answer = tokio::time::timeout(INITIALIZE_TIMEOUT, client.request("initialize", params))
        .await
        .map_err(|_| "the server did not answer initialize")??;
    let result = answer.get("result").ok_or("initialize failed")?;
    client.notify("initialized", json!({})).await?;
    let capabilities = RawValue::from_string(result["capabilities"].to_string())?;
    let version = result["serverInfo"]["version"].as_str().map(str::to_string);
    Ok((capabilities, version))
}

/// One line to the agent.
type Outbox = mpsc::UnboundedSender<Vec<u8>>;

async fn write_lines(
    mut out: impl AsyncWrite + Unpin,
    mut lines: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    while let Some(mut line) = lines.recv().await {
        line.push(b'\n');
        if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
            break;
        }
    }
}

/// The agent's answer to one of the host's requests.
async fn agent_answer(
    lines: &mut tokio::io::Lines<BufReader<Box<dyn tokio::io::AsyncRead + Unpin + Send>>>,
    id: u64,
) -> Result<Value, BoxError> {
    let wait = async {
        while let Some(line) = lines.next_line().await? {
            let message: Value = serde_json::from_str(&line)?;
            if message["id"] == id && message.get("method").is_none() {
                return match message.get("result") {
                    Some(result) => Ok(result.clone()),
                    None => Err(format!("the agent refused: {}", message["error"]).into()),
                };
            }
        }
        Err::<Value, BoxError>("the agent went away".into())
    };
    tokio::time::timeout(AGENT_ANSWER_TIMEOUT, wait)
        .await
        .map_err(|_| "the agent did not answer")?
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let root = args
        .next()
        .ok_or("usage: editor-host WORKSPACE [-- AGENT…]")?;
    let root = std::fs::canonicalize(&root).map_err(|e| format!("{root}: {e}"))?;
    let agent: Vec<String> = args.skip_while(|a| a != "--").skip(1).collect();
    let server: Vec<String> = std::env::var("EDITOR_HOST_SERVER")
        .unwrap_or_else(|_| "pyright-langserver --stdio".into())
        .split_whitespace()
        .map(str::to_string)
        .collect();

    let client = LspClient::spawn(&server, &root)?;
    let (capabilities, version) = handshake(&client, &root).await?;
    let host = Arc::new(Host {
        client,
        root: root.clone(),
        capabilities,
        version,
        opened: tokio::sync::Mutex::new(HashSet::new()),
    });
    let gate = Gate::new(Arc::clone(&host), GateConfig::default());

    // The agent connection: the agent's stdio, or ours.
    let (input, output, _agent): (
        Box<dyn tokio::io::AsyncRead + Unpin + Send>,
        Box<dyn AsyncWrite + Unpin + Send>,
        _,
    ) = match agent.split_first() {
        Some((program, args)) => {
            let mut child = Command::new(program)
                .args(args)
                .current_dir(&root)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("starting {program}: {e}"))?;
            let stdin = child.stdin.take().ok_or("the agent's stdin")?;
            let stdout = child.stdout.take().ok_or("the agent's stdout")?;
            (Box::new(stdout), Box::new(stdin), Some(child))
        }
        None => (
            Box::new(tokio::io::stdin()),
            Box::new(tokio::io::stdout()),
            None,
        ),
    };
    let (outbox, outgoing): (Outbox, _) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_lines(output, outgoing));
    let mut lines = BufReader::new(input).lines();

    // The ACP client's side: initialize (with `lsp`), then one session.
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": 1,
        "clientCapabilities": {"lsp": {}, "_meta": {"lsp": {}}},
        "clientInfo": {"name": "editor-host", "version": "0"},
    }});
    outbox.send(initialize.to_string().into_bytes())?;
    agent_answer(&mut lines, 1).await?;
    let new = json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {
        "cwd": root, "mcpServers": [],
    }});
    outbox.send(new.to_string().into_bytes())?;
    let session = agent_answer(&mut lines, 2).await?;
    let session_id = session["sessionId"]
        .as_str()
        .ok_or("session/new gave no sessionId")?;
    gate.open_session(session_id, vec![root.clone()]);
    eprintln!("editor-host: session {session_id} on {}", root.display());

    // The agent's messages: gate methods answered by the gate, each on a
    // task of its own; `$/cancel_request` to the gate; others refused.
    while let Some(line) = lines.next_line().await? {
        let Ok(envelope) = Envelope::parse(line.as_bytes()) else {
            continue;
        };
        match envelope.kind() {
            Some(Kind::Request { id, method, params }) => match GateMethod::from_acp(&method) {
                Some(method) => {
                    let params = params.map(|p| p.to_owned());
                    let answer = gate.call(id, method, params);
                    let outbox = outbox.clone();
                    tokio::spawn(async move {
                        let _ = outbox.send(answer.await);
                    });
                }
                None => {
                    let _ = outbox.send(not_found(&id, &method));
                }
            },
            Some(Kind::Notification { method, params }) if method == "$/cancel_request" => {
                let id = params
                    .and_then(|p| serde_json::from_str::<HashMap<&str, &RawValue>>(p.get()).ok())
                    .and_then(|p| p.get("requestId").copied().map(RequestId::from_raw));
                if let Some(id) = id {
                    gate.cancel(&id);
                }
            }
            _ => {}
        }
    }
    drop(outbox);
    let _ = writer.await;
    Ok(())
}

/// `-32601` for a request this host does not serve.
fn not_found(id: &RequestId, method: &str) -> Vec<u8> {
    let error = acp_lsp_core::jsonrpc::ErrorObject {
        code: -32601,
        message: format!("{method} is not served by this host"),
        data: None,
    };
    acp_lsp_core::jsonrpc::encode_error(Some(id), &error)
}
