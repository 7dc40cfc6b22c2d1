//! acp-lsp's MCP tools over the ACP connection itself (the mcp-over-acp
//! RFD): the entry `{"type": "acp", "name": "acp-lsp", "serverId": …}`
//! injected when the agent's `initialize` answer advertises the `acp` MCP
//! transport, and the agent's `mcp/connect`, `mcp/message` and
//! `mcp/disconnect` for that server id, answered here instead of reaching
//! the editor. No socket, no bridge process, no token on a command line.
//!
//! Each connection is one MCP session of [`super::tools::LspTools`] (rmcp)
//! over an in-memory pipe: the agent's `mcp/message` requests go in with ids
//! of our own, the server's answers come back as the `mcp/message` results,
//! and what the server sends by itself (notifications) goes to the agent as
//! `mcp/message` notifications on that connection.
//!
//! Two wire forms are accepted, since the draft has both: the RFD's and the
//! protocol repository's schema (`mcp/connect {serverId}` → `{connectionId}`,
//! then `mcp/message {connectionId, method, params}`, whose result is the
//! MCP result itself), and the connectionless form of the ACP Rust SDK 5.x
//! (`mcp/message {serverId, requestId, method, params}` → `{result}` or
//! `{error}`), for which acp-lsp opens one implicit connection per server id
//! and initializes it itself. The server id is also accepted as `acpId`,
//! `id`, `uuid` or `acpUrl: "acp:<id>"` (the RFD text's spellings).

use super::tokens::{Lease, TokenTable};
use crate::jsonrpc::{self, ErrorObject};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::{mpsc, oneshot};
use tokio_util::task::AbortOnDropHandle;

/// Open MCP-over-ACP connections at once; one more `mcp/connect` is refused.
pub const MAX_CONNECTIONS: usize = 64;
/// MCP requests of one connection awaiting their answer; one more is refused.
pub const MAX_PENDING_PER_CONNECTION: usize = 64;
/// Longest wait for one MCP answer of our server (a tool waits at most
/// [`super::tools::READY_WAIT`] for its language server, then answers).
pub const MCP_ANSWER_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest wait for the implicit connection's own `initialize` (connectionless form).
pub const IMPLICIT_INITIALIZE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of the in-memory pipe to each MCP session.
const PIPE_BYTES: usize = 256 * 1024;
/// Messages queued toward one MCP session.
const INPUT_QUEUE: usize = 256;
/// Messages queued toward the agent from every MCP session.
const OUTBOX_QUEUE: usize = 1024;
/// The MCP version acp-lsp speaks on an implicit connection's `initialize`.
const IMPLICIT_PROTOCOL_VERSION: &str = "2025-06-18";
/// JSON-RPC: method not found (a server→client MCP request we cannot route).
const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: invalid params.
const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: internal error.
const INTERNAL_ERROR: i64 = -32603;

/// Starts one MCP session of the tools for a session's lease on `io`; the
/// future ends when the session does.
pub type ServeMcp = Arc<dyn Fn(Lease, DuplexStream) -> BoxFuture<'static, ()> + Send + Sync>;

/// The `serverId` of the ACP-transport entry for `token`: the token's 32 hex
/// digits in the 8-4-4-4-12 form of a UUID (the RFD's pattern for it).
pub fn server_id_of(token: &str) -> String {
    if token.len() != 32 {
        return token.to_string();
    }
    format!(
        "{}-{}-{}-{}-{}",
        &token[..8],
        &token[8..12],
        &token[12..16],
        &token[16..20],
        &token[20..]
    )
}

fn token_of(server_id: &str) -> String {
    server_id.replace('-', "")
}

/// An MCP answer of our server: the `result` or the `error` object, raw.
type Answer = Result<Box<RawValue>, Box<RawValue>>;

struct Connection {
    /// The ACP-transport server id it was opened for.
    server_id: String,
    input: mpsc::Sender<Vec<u8>>,
    pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Answer>>>>,
    next_id: AtomicU64,
    /// The MCP session and the pumps; aborted when the connection is dropped.
    _tasks: Vec<AbortOnDropHandle<()>>,
}

/// The MCP-over-ACP side of one proxy.
pub struct AcpTransport {
    tokens: Arc<TokenTable>,
    serve: ServeMcp,
    connections: Mutex<HashMap<String, Arc<Connection>>>,
    /// Connectionless form: server id → its implicit connection's id.
    implicit: Mutex<HashMap<String, String>>,
    next_connection: AtomicU64,
    /// Whether an entry was injected: only then may an agent line carry our
    /// `mcp/*` (the relay inspects such lines only after that).
    live: AtomicBool,
    outbox_tx: mpsc::Sender<Vec<u8>>,
    outbox: Mutex<Option<mpsc::Receiver<Vec<u8>>>>,
}

/// Where an `mcp/*` request or notification of the agent is addressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Server(String),
    Connection(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Address {
    #[serde(default)]
    connection_id: Option<String>,
    #[serde(default)]
    server_id: Option<String>,
    #[serde(default)]
    acp_id: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default)]
    acp_url: Option<String>,
}

/// Whom `mcp/*` params address: a connection (`connectionId`) or a server
/// (`serverId`, or one of the RFD text's spellings).
pub fn target_of(params: Option<&RawValue>) -> Option<Target> {
    let address: Address = serde_json::from_str(params?.get()).ok()?;
    if let Some(connection) = address.connection_id {
        return Some(Target::Connection(connection));
    }
    address
        .server_id
        .or(address.acp_id)
        .or(address.id)
        .or(address.uuid)
        .or_else(|| {
            address
                .acp_url
                .and_then(|url| url.strip_prefix("acp:").map(str::to_string))
        })
        .map(Target::Server)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Message<'a> {
    method: String,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    /// The connectionless form's caller-chosen id of the inner request.
    #[serde(borrow, default)]
    request_id: Option<&'a RawValue>,
}

fn error_object(code: i64, message: impl Into<String>, reason: &str) -> ErrorObject {
    ErrorObject::with_reason(code, message, reason)
}

fn raw(value: &Value) -> Box<RawValue> {
    RawValue::from_string(value.to_string()).expect("BUG: a Value is valid JSON")
}

impl AcpTransport {
    pub fn new(tokens: Arc<TokenTable>, serve: ServeMcp) -> Arc<AcpTransport> {
        let (outbox_tx, outbox) = mpsc::channel(OUTBOX_QUEUE);
        Arc::new(AcpTransport {
            tokens,
            serve,
            connections: Mutex::new(HashMap::new()),
            implicit: Mutex::new(HashMap::new()),
            next_connection: AtomicU64::new(1),
            live: AtomicBool::new(false),
            outbox_tx,
            outbox: Mutex::new(Some(outbox)),
        })
    }

    /// The entry for the session request `token` was created for; marks the
    /// transport live.
    pub fn entry_json(&self, token: &str) -> String {
        self.live.store(true, Ordering::Relaxed);
        super::inject::acp_entry_json(&server_id_of(token))
    }

    /// Whether an entry was ever injected.
    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::Relaxed)
    }

    /// Messages for the agent (`mcp/message` notifications), taken once by the relay.
    pub fn take_outbox(&self) -> Option<mpsc::Receiver<Vec<u8>>> {
        self.outbox.lock().take()
    }

    /// Whether `target` is ours: a live token's server id, or an open connection.
    pub fn owns(&self, target: &Target) -> bool {
        match target {
            Target::Server(id) => self.tokens.ever_connected(&token_of(id)).is_some(),
            Target::Connection(id) => self.connections.lock().contains_key(id),
        }
    }

    /// `mcp/connect`: opens a connection to the server `server_id`.
    pub async fn connect(self: &Arc<Self>, server_id: &str) -> Result<Box<RawValue>, ErrorObject> {
        let connection_id = self.open(server_id)?;
        Ok(raw(&serde_json::json!({ "connectionId": connection_id })))
    }

    /// `mcp/disconnect`: the connection ends (its MCP session with it).
    pub fn disconnect(&self, connection_id: &str) -> Box<RawValue> {
        if let Some(connection) = self.connections.lock().remove(connection_id) {
            self.implicit
                .lock()
                .retain(|_, id| id.as_str() != connection_id);
            tracing::info!(
                server = %connection.server_id,
                connection = connection_id,
                "MCP-over-ACP connection closed"
            );
        }
        raw(&serde_json::json!({}))
    }

    /// An `mcp/message` request: the MCP answer, in the form of the request
    /// (the result itself for a connection; `{result}`/`{error}` for the
    /// connectionless form).
    pub async fn request(
        self: &Arc<Self>,
        target: Target,
        params: Option<&RawValue>,
    ) -> Result<Box<RawValue>, ErrorObject> {
        let message: Message = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .ok_or_else(|| {
                error_object(
                    INVALID_PARAMS,
                    "mcp/message needs a `method`",
                    "invalid_params",
                )
            })?;
        match target {
            Target::Connection(id) => {
                let connection = self.connection(&id)?;
                match ask(&connection, &message.method, message.params).await? {
                    Ok(result) => Ok(result),
                    // The MCP error becomes the outer error: its code, message and data.
                    Err(error) => Err(mcp_error(&error)),
                }
            }
            Target::Server(server_id) => {
                let connection = self.implicit_connection(&server_id).await?;
                let answer = ask(&connection, &message.method, message.params).await?;
                let carrier = match answer {
                    Ok(result) => format!("{{\"result\":{}}}", result.get()),
                    Err(error) => format!("{{\"error\":{}}}", error.get()),
                };
                let _ = message.request_id;
                RawValue::from_string(carrier)
                    .map_err(|e| error_object(INTERNAL_ERROR, e.to_string(), "internal"))
            }
        }
    }

    /// An `mcp/message` notification: delivered to the connection's MCP
    /// session (`notifications/initialized`, `notifications/cancelled`).
    pub fn notify(self: &Arc<Self>, target: Target, params: Option<&RawValue>) {
        let Some(message) = params.and_then(|p| serde_json::from_str::<Message>(p.get()).ok())
        else {
            return;
        };
        let connection = match &target {
            Target::Connection(id) => self.connections.lock().get(id).cloned(),
            Target::Server(server) => {
                let id = self.implicit.lock().get(server).cloned();
                id.and_then(|id| self.connections.lock().get(&id).cloned())
            }
        };
        let Some(connection) = connection else {
            return;
        };
        let line = jsonrpc::encode_request(None, &message.method, message.params);
        if connection.input.try_send(line).is_err() {
            tracing::warn!(
                method = %message.method,
                "MCP-over-ACP notification dropped: the connection's queue is full"
            );
        }
    }

    fn connection(&self, id: &str) -> Result<Arc<Connection>, ErrorObject> {
        self.connections.lock().get(id).cloned().ok_or_else(|| {
            error_object(
                INVALID_PARAMS,
                format!("no MCP-over-ACP connection {id:?}"),
                "unknown_connection",
            )
        })
    }

    /// Opens a connection for `server_id`; returns its id.
    fn open(self: &Arc<Self>, server_id: &str) -> Result<String, ErrorObject> {
        let lease = self.tokens.watch(&token_of(server_id)).map_err(|_| {
            error_object(
                INVALID_PARAMS,
                format!("no MCP server {server_id:?} over this ACP connection"),
                "unknown_server",
            )
        })?;
        let mut connections = self.connections.lock();
        if connections.len() >= MAX_CONNECTIONS {
            tracing::warn!(
                limit = "mcp_over_acp_connections",
                value = MAX_CONNECTIONS,
                "limit hit: MCP-over-ACP connection refused"
            );
            return Err(ErrorObject {
                code: INTERNAL_ERROR,
                message: format!("at most {MAX_CONNECTIONS} MCP-over-ACP connections are open"),
                data: RawValue::from_string(format!(
                    "{{\"reason\":\"overloaded\",\"limit\":{MAX_CONNECTIONS},\"retryable\":true}}"
                ))
                .ok(),
            });
        }
        let number = self.next_connection.fetch_add(1, Ordering::Relaxed);
        let connection_id = format!("acp-lsp-mcp-{number}");
        let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
        let (input, input_rx) = mpsc::channel(INPUT_QUEUE);
        let pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Answer>>>> = Arc::default();
        let (read, write) = tokio::io::split(ours);
        let session = AbortOnDropHandle::new(tokio::spawn((self.serve)(lease, theirs)));
        let writer = AbortOnDropHandle::new(tokio::spawn(write_lines(write, input_rx)));
        let reader = AbortOnDropHandle::new(tokio::spawn(read_answers(
            read,
            Arc::clone(&pending),
            input.clone(),
            self.outbox_tx.clone(),
            connection_id.clone(),
        )));
        connections.insert(
            connection_id.clone(),
            Arc::new(Connection {
                server_id: server_id.to_string(),
                input,
                pending,
                next_id: AtomicU64::new(1),
                _tasks: vec![session, writer, reader],
            }),
        );
        tracing::info!(
            transport = "acp",
            connection = %connection_id,
            "MCP connection admitted"
        );
        Ok(connection_id)
    }

    /// The connectionless form's connection for `server_id`, opened and
    /// initialized by acp-lsp on first use.
    async fn implicit_connection(
        self: &Arc<Self>,
        server_id: &str,
    ) -> Result<Arc<Connection>, ErrorObject> {
        let existing = self.implicit.lock().get(server_id).cloned();
        if let Some(id) = existing {
            if let Ok(connection) = self.connection(&id) {
                return Ok(connection);
            }
        }
        let id = self.open(server_id)?;
        let connection = self.connection(&id)?;
        let initialize = serde_json::json!({
            "protocolVersion": IMPLICIT_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": { "name": "acp-lsp (mcp-over-acp)", "version": env!("CARGO_PKG_VERSION") },
        });
        let answer = tokio::time::timeout(
            IMPLICIT_INITIALIZE_TIMEOUT,
            ask(&connection, "initialize", Some(&raw(&initialize))),
        )
        .await;
        if !matches!(answer, Ok(Ok(Ok(_)))) {
            self.disconnect(&id);
            return Err(error_object(
                INTERNAL_ERROR,
                "the MCP server did not initialize",
                "internal",
            ));
        }
        let initialized = jsonrpc::encode_request(None, "notifications/initialized", None);
        let _ = connection.input.send(initialized).await;
        self.implicit.lock().insert(server_id.to_string(), id);
        Ok(connection)
    }
}

/// The outer error for an MCP error object: its code, message and data.
fn mcp_error(error: &RawValue) -> ErrorObject {
    #[derive(Deserialize)]
    struct Inner {
        #[serde(default)]
        code: Option<i64>,
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        data: Option<Box<RawValue>>,
    }
    let inner: Inner = serde_json::from_str(error.get()).unwrap_or(Inner {
        code: None,
        message: None,
        data: None,
    });
    ErrorObject {
        code: inner.code.unwrap_or(INTERNAL_ERROR),
        message: inner
            .message
            .unwrap_or_else(|| "the MCP server answered with an error".into()),
        data: inner.data,
    }
}

/// Sends one MCP request on `connection` and waits for its answer.
async fn ask(
    connection: &Connection,
    method: &str,
    params: Option<&RawValue>,
) -> Result<Answer, ErrorObject> {
    let id = connection.next_id.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = oneshot::channel();
    {
        let mut pending = connection.pending.lock();
        if pending.len() >= MAX_PENDING_PER_CONNECTION {
            return Err(error_object(
                INTERNAL_ERROR,
                format!(
                    "at most {MAX_PENDING_PER_CONNECTION} MCP requests in flight on one connection"
                ),
                "overloaded",
            ));
        }
        pending.insert(id, tx);
    }
    /// Drops the pending entry however the wait ends.
    struct Forget<'a>(&'a Connection, u64);
    impl Drop for Forget<'_> {
        fn drop(&mut self) {
            self.0.pending.lock().remove(&self.1);
        }
    }
    let _forget = Forget(connection, id);
    let line = jsonrpc::encode_request(Some(&jsonrpc::RequestId::from_u64(id)), method, params);
    let closed = || error_object(INTERNAL_ERROR, "the MCP session ended", "internal");
    connection.input.send(line).await.map_err(|_| closed())?;
    match tokio::time::timeout(MCP_ANSWER_TIMEOUT, rx).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(_)) => Err(closed()),
        Err(_) => Err(error_object(
            INTERNAL_ERROR,
            format!("no MCP answer within {} s", MCP_ANSWER_TIMEOUT.as_secs()),
            "deadline_exceeded",
        )),
    }
}

/// Writes each queued message to the MCP session, one per line.
async fn write_lines(
    mut write: tokio::io::WriteHalf<DuplexStream>,
    mut input: mpsc::Receiver<Vec<u8>>,
) {
    while let Some(mut line) = input.recv().await {
        line.push(b'\n');
        if write.write_all(&line).await.is_err() {
            return;
        }
    }
}

/// Reads the MCP session's messages: answers go to their waiters,
/// notifications to the agent, requests of its own are refused (acp-lsp's
/// tools send none).
async fn read_answers(
    read: tokio::io::ReadHalf<DuplexStream>,
    pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Answer>>>>,
    input: mpsc::Sender<Vec<u8>>,
    outbox: mpsc::Sender<Vec<u8>>,
    connection_id: String,
) {
    #[derive(Deserialize)]
    struct Incoming<'a> {
        #[serde(borrow, default)]
        id: Option<&'a RawValue>,
        #[serde(default)]
        method: Option<String>,
        #[serde(borrow, default)]
        params: Option<&'a RawValue>,
        #[serde(borrow, default)]
        result: Option<&'a RawValue>,
        #[serde(borrow, default)]
        error: Option<&'a RawValue>,
    }
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(message) = serde_json::from_str::<Incoming>(&line) else {
            continue;
        };
        match (message.id, message.method) {
            (Some(id), None) => {
                let Ok(id) = id.get().parse::<u64>() else {
                    continue;
                };
                let waiter = pending.lock().remove(&id);
                if let Some(waiter) = waiter {
                    let answer = match (message.result, message.error) {
                        (_, Some(error)) => Err(error.to_owned()),
                        (Some(result), None) => Ok(result.to_owned()),
                        (None, None) => Ok(raw(&Value::Null)),
                    };
                    let _ = waiter.send(answer);
                }
            }
            (Some(id), Some(method)) => {
                let error = error_object(
                    METHOD_NOT_FOUND,
                    format!("{method} is not routed over MCP-over-ACP by acp-lsp"),
                    "method_not_found",
                );
                let reply = jsonrpc::encode_error(Some(&jsonrpc::RequestId::from_raw(id)), &error);
                let _ = input.send(reply).await;
            }
            (None, Some(method)) => {
                let mut params = serde_json::json!({
                    "connectionId": connection_id,
                    "method": method,
                });
                if let Some(inner) = message.params {
                    params["params"] = serde_json::from_str(inner.get()).unwrap_or(Value::Null);
                }
                let line = jsonrpc::encode_request(None, "mcp/message", Some(&raw(&params)));
                if outbox.try_send(line).is_err() {
                    tracing::debug!("MCP-over-ACP notification to the agent dropped: queue full");
                }
            }
            (None, None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw_text(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    #[test]
    fn the_server_id_is_the_token_in_uuid_form_and_back() {
        let token = "0123456789abcdef0123456789abcdef";
        let id = server_id_of(token);
        assert_eq!(id, "01234567-89ab-cdef-0123-456789abcdef");
        assert_eq!(token_of(&id), token);
    }

    #[test]
    fn every_spelling_of_the_server_id_is_read() {
        for params in [
            r#"{"serverId":"x"}"#,
            r#"{"acpId":"x"}"#,
            r#"{"id":"x"}"#,
            r#"{"uuid":"x"}"#,
            r#"{"acpUrl":"acp:x"}"#,
            r#"{"serverId":"x","requestId":"r","method":"tools/list"}"#,
        ] {
            assert_eq!(
                target_of(Some(&raw_text(params))),
                Some(Target::Server("x".into())),
                "{params}"
            );
        }
        assert_eq!(
            target_of(Some(&raw_text(r#"{"connectionId":"c","method":"m"}"#))),
            Some(Target::Connection("c".into()))
        );
        assert_eq!(target_of(Some(&raw_text(r#"{"method":"m"}"#))), None);
        assert_eq!(target_of(None), None);
    }
}
