//! The gate: answers `lsp/servers` and `lsp/request` for a session, over any
//! [`LspHost`] (acp-lsp's own servers, or an editor host's).
//!
//! The gate owns what is protocol: parameter checks and limits, the refused
//! categories, URI confinement, deadlines, cancellation and the error mapping.
//! The host owns the servers. An editor that exposes its own language servers
//! implements [`LspHost`] and uses the gate without the relay.

pub mod confine;
pub mod error;
pub mod methods;
pub mod session;

use crate::jsonrpc::{self, depth, Limits, RequestId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub use error::GateError;
pub use methods::{GateMethod, Refusal};
pub use session::{Session, SessionTable};

/// Deadline of an `lsp/request` when the host sets none.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest `waitUntilReady` honoured.
pub const MAX_WAIT_UNTIL_READY: Duration = Duration::from_secs(300);

/// A server's lifecycle state as `lsp/servers` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    Starting,
    Indexing,
    Ready,
    Restarting,
    Failed,
    Stopped,
}

impl ServerState {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Starting => "starting",
            ServerState::Indexing => "indexing",
            ServerState::Ready => "ready",
            ServerState::Restarting => "restarting",
            ServerState::Failed => "failed",
            ServerState::Stopped => "stopped",
        }
    }

    /// Whether requests are forwarded in this state (an indexing server answers,
    /// possibly incompletely).
    pub fn accepts_requests(self) -> bool {
        matches!(self, ServerState::Indexing | ServerState::Ready)
    }
}

/// Progress of an indexing server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage: Option<u32>,
}

/// One entry of `lsp/servers`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerEntry {
    pub server_id: String,
    pub name: String,
    /// Absolute path of the server's workspace root.
    pub root: String,
    /// The primary language id.
    pub language_id: String,
    pub language_ids: Vec<String>,
    /// Without the dot.
    pub file_extensions: Vec<String>,
    pub state: ServerState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The position encoding the server speaks (`utf-16` unless configured).
    pub position_encoding: String,
    /// The server's initialize result `capabilities`, merged with its dynamic registrations.
    pub capabilities: Box<RawValue>,
    /// `workspace/executeCommand` commands this server's allowlist lets through.
    pub execute_commands: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub restarts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Roots whose file watching is degraded (watch limit hit).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub degraded_roots: Vec<String>,
}

/// What the gate needs to know to route a request to one server.
#[derive(Debug, Clone)]
pub struct Route {
    pub execute_commands: Vec<String>,
    pub request_timeout: Duration,
}

/// One forwarded request, as the host receives it.
#[derive(Debug)]
pub struct HostCall {
    pub session: Arc<Session>,
    pub server_id: String,
    pub method: String,
    pub params: Option<Box<RawValue>>,
    /// The document URIs the params name (see [`named_documents`]), found while
    /// the gate had the params parsed, so the host need not parse them again.
    pub documents: Vec<String>,
    /// Cancelled when the agent cancels: send the server `$/cancelRequest` and
    /// return its answer, or [`GateError::Cancelled`] if none comes soon.
    pub cancel: CancellationToken,
    /// Wait this long for the server to be ready instead of failing at once.
    pub wait_until_ready: Option<Duration>,
}

/// A host's answer to a forwarded request.
#[derive(Debug)]
pub struct HostReply {
    /// The server's `result`, verbatim.
    pub result: Box<RawValue>,
    /// Goes to the response's `_meta` (e.g. `documents`, what the server saw).
    pub meta: Option<Box<RawValue>>,
}

/// The servers behind the gate. acp-lsp's registry implements it; so can an
/// editor host over its own servers.
///
/// A host's `request` future may be dropped (deadline): it must then tell the
/// server (`$/cancelRequest`) and forget the request.
pub trait LspHost: Send + Sync + 'static {
    /// The servers serving a session's roots.
    fn servers(&self, session: &Session) -> impl Future<Output = Vec<ServerEntry>> + Send;

    /// Checks that `server_id` serves `session` and says how to route to it.
    fn route(
        &self,
        session: &Session,
        server_id: &str,
    ) -> impl Future<Output = Result<Route, GateError>> + Send;

    /// Forwards one request and returns the server's result.
    fn request(&self, call: HostCall) -> impl Future<Output = Result<HostReply, GateError>> + Send;

    /// A session's roots were committed (servers may start indexing now).
    fn session_opened(self: &Arc<Self>, _session: &Arc<Session>) {}

    /// A session ended.
    fn session_closed(self: &Arc<Self>, _session: &Arc<Session>) {}

    /// The editor confirmed an `fs/write_text_file` of the session's agent.
    /// Called before the confirmation is forwarded to the agent, so the host
    /// must take the text in synchronously: the agent's next `lsp/request`
    /// has to see it.
    fn text_written(&self, _session: &Arc<Session>, _path: &std::path::Path, _text: &str) {}

    /// `_acp-lsp/diagnostics`: the latest published diagnostics of the session's
    /// servers, as `textDocument/publishDiagnostics` params with `serverId` and
    /// `fresh` added. With `documents`, only those, each first synced from disk
    /// and waited for (up to `wait`) until a publish reflects its text.
    fn diagnostics(
        &self,
        _session: &Session,
        _documents: Vec<(String, std::path::PathBuf)>,
        _wait: Duration,
    ) -> impl Future<Output = Result<Vec<Box<RawValue>>, GateError>> + Send {
        async { Ok(Vec::new()) }
    }
}

/// Configuration of the gate itself.
#[derive(Debug, Clone, Default)]
pub struct GateConfig {
    pub limits: Limits,
    /// Extra roots requests may name but that are never written.
    pub read_only_roots: Vec<std::path::PathBuf>,
    /// Non-`file` URI schemes let through (lowercase).
    pub allowed_uri_schemes: Vec<String>,
}

/// Answers the gate's ACP methods over a host.
pub struct Gate<H> {
    host: Arc<H>,
    config: GateConfig,
    sessions: SessionTable,
    /// Agent request id → cancellation of the matching in-flight `lsp/request`.
    in_flight: Mutex<HashMap<RequestId, CancellationToken>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServersParams<'a> {
    #[serde(borrow)]
    session_id: Cow<'a, str>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestParams<'a> {
    #[serde(borrow)]
    session_id: Cow<'a, str>,
    #[serde(borrow)]
    server_id: Cow<'a, str>,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(default)]
    wait_until_ready: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DiagnosticsParams<'a> {
    #[serde(borrow)]
    session_id: Cow<'a, str>,
    #[serde(default)]
    uris: Option<Vec<String>>,
    #[serde(default)]
    wait_ms: Option<u64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ServersResult<'a> {
    servers: &'a [ServerEntry],
    available_methods: &'static [&'static str],
}

impl<H: LspHost> Gate<H> {
    pub fn new(host: Arc<H>, config: GateConfig) -> Arc<Gate<H>> {
        let sessions = SessionTable::new(
            config.read_only_roots.clone(),
            config.allowed_uri_schemes.clone(),
        );
        Arc::new(Gate {
            host,
            config,
            sessions,
            in_flight: Mutex::new(HashMap::new()),
        })
    }

    pub fn host(&self) -> &Arc<H> {
        &self.host
    }

    pub fn limits(&self) -> &Limits {
        &self.config.limits
    }

    /// Commits a session's roots (`[cwd, …additionalDirectories]`).
    pub fn open_session(&self, session_id: &str, roots: Vec<std::path::PathBuf>) {
        let session = self.sessions.insert(session_id, roots);
        self.host.session_opened(&session);
    }

    /// Forgets a session.
    pub fn close_session(&self, session_id: &str) {
        if let Some(session) = self.sessions.remove(session_id) {
            self.host.session_closed(&session);
        }
    }

    pub fn sessions(&self) -> &SessionTable {
        &self.sessions
    }

    /// Cancels the in-flight `lsp/request` the agent sent with `id`. Returns
    /// false when no such request is in flight (the cancel is not ours).
    pub fn cancel(&self, id: &RequestId) -> bool {
        let in_flight = self.in_flight.lock().expect("BUG: in_flight lock poisoned");
        match in_flight.get(id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Starts answering one request of ours. The request is registered for
    /// cancellation before this returns; the future yields the encoded response.
    pub fn call(
        self: &Arc<Self>,
        id: RequestId,
        method: GateMethod,
        params: Option<Box<RawValue>>,
    ) -> impl Future<Output = Vec<u8>> + Send + 'static {
        let token = CancellationToken::new();
        if method == GateMethod::Request {
            self.in_flight
                .lock()
                .expect("BUG: in_flight lock poisoned")
                .insert(id.clone(), token.clone());
        }
        let gate = Arc::clone(self);
        async move {
            let outcome = match method {
                GateMethod::Servers => gate
                    .servers(params.as_deref())
                    .await
                    .map(|result| HostReply { result, meta: None }),
                GateMethod::Request => gate.request(params.as_deref(), token).await,
                GateMethod::Diagnostics => gate
                    .diagnostics(params.as_deref())
                    .await
                    .map(|result| HostReply { result, meta: None }),
            };
            if method == GateMethod::Request {
                gate.in_flight
                    .lock()
                    .expect("BUG: in_flight lock poisoned")
                    .remove(&id);
            }
            match outcome {
                Ok(reply) if method == GateMethod::Request => encode_request_response(&id, &reply),
                Ok(reply) => jsonrpc::encode_result(&id, &reply.result),
                Err((error, lsp_method)) => {
                    jsonrpc::encode_error(Some(&id), &error.to_error_object(lsp_method.as_deref()))
                }
            }
        }
    }

    /// Answers one gate method for a caller inside acp-lsp (the CLI tools, the
    /// MCP server): the same checks, limits, confinement and deadlines as
    /// [`Gate::call`], but nothing is entered in the cancellation table, so it
    /// takes no request id and cannot collide with an id of the agent's.
    /// `cancel` cancels an `lsp/request` (e.g. when the MCP client cancels).
    /// On error, also returns the LSP method when it was known.
    pub async fn call_internal(
        &self,
        method: GateMethod,
        params: Option<&RawValue>,
        cancel: CancellationToken,
    ) -> Result<HostReply, (GateError, Option<String>)> {
        match method {
            GateMethod::Servers => self
                .servers(params)
                .await
                .map(|result| HostReply { result, meta: None }),
            GateMethod::Request => self.request(params, cancel).await,
            GateMethod::Diagnostics => self
                .diagnostics(params)
                .await
                .map(|result| HostReply { result, meta: None }),
        }
    }

    fn check_shape(&self, params: Option<&RawValue>) -> Result<(), GateError> {
        let Some(params) = params else {
            return Err(GateError::InvalidParams("params are missing".into()));
        };
        let limits = &self.config.limits;
        if params.get().len() > limits.max_intercepted_params {
            return Err(GateError::ParamsTooLarge {
                limit: limits.max_intercepted_params,
            });
        }
        if depth::max_depth(params.get().as_bytes(), limits.max_depth) > limits.max_depth {
            return Err(GateError::TooDeep {
                limit: limits.max_depth,
            });
        }
        // Before anything is parsed, checked or forwarded: what the gate
        // checks must be the only reading of the bytes a server gets.
        if let Some(key) = depth::duplicate_key(params.get()) {
            return Err(GateError::DuplicateKeys { key });
        }
        Ok(())
    }

    /// `lsp/servers`.
    pub async fn servers(
        &self,
        params: Option<&RawValue>,
    ) -> Result<Box<RawValue>, (GateError, Option<String>)> {
        self.check_shape(params).map_err(|e| (e, None))?;
        let params = params.expect("BUG: check_shape rejects missing params");
        let parsed: ServersParams = serde_json::from_str(params.get())
            .map_err(|e| (GateError::InvalidParams(e.to_string()), None))?;
        let session = self.sessions.get(&parsed.session_id).ok_or_else(|| {
            (
                GateError::UnknownSession(parsed.session_id.to_string()),
                None,
            )
        })?;
        let servers = self.host.servers(&session).await;
        let result = ServersResult {
            servers: &servers,
            available_methods: methods::FORWARDED,
        };
        to_raw(&result).map_err(|e| (e, None))
    }

    /// `_acp-lsp/diagnostics {sessionId, uris?, waitMs?}` → `{diagnostics: [...]}`.
    pub async fn diagnostics(
        &self,
        params: Option<&RawValue>,
    ) -> Result<Box<RawValue>, (GateError, Option<String>)> {
        let fail = |e: GateError| (e, None);
        self.check_shape(params).map_err(fail)?;
        let params = params.expect("BUG: check_shape rejects missing params");
        let parsed: DiagnosticsParams = serde_json::from_str(params.get())
            .map_err(|e| fail(GateError::InvalidParams(e.to_string())))?;
        let session = self
            .sessions
            .get(&parsed.session_id)
            .ok_or_else(|| fail(GateError::UnknownSession(parsed.session_id.to_string())))?;
        let mut documents = Vec::new();
        for uri in parsed.uris.unwrap_or_default() {
            let path = session
                .confinement()
                .check_uri(&uri)
                .map_err(|e| fail(e.into()))?
                .ok_or_else(|| {
                    fail(GateError::InvalidParams(format!("{uri} is not a file URI")))
                })?;
            documents.push((uri, path));
        }
        let wait = Duration::from_millis(parsed.wait_ms.unwrap_or(0)).min(MAX_WAIT_UNTIL_READY);
        let entries = self
            .host
            .diagnostics(&session, documents, wait)
            .await
            .map_err(fail)?;
        let mut text = String::from("{\"diagnostics\":[");
        for (i, entry) in entries.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(entry.get());
        }
        text.push_str("]}");
        RawValue::from_string(text).map_err(|e| fail(GateError::Internal(e.to_string())))
    }

    /// `lsp/request`. On error, also returns the LSP method when it was known.
    async fn request(
        &self,
        params: Option<&RawValue>,
        cancel: CancellationToken,
    ) -> Result<HostReply, (GateError, Option<String>)> {
        self.check_shape(params).map_err(|e| (e, None))?;
        let params = params.expect("BUG: check_shape rejects missing params");
        let parsed: RequestParams = serde_json::from_str(params.get())
            .map_err(|e| (GateError::InvalidParams(e.to_string()), None))?;
        let method = parsed.method.to_string();
        let fail = |e: GateError| (e, Some(method.clone()));

        if let Some(refusal) = methods::refusal(&method) {
            return Err(fail(GateError::Refused {
                method: method.clone(),
                refusal,
            }));
        }
        let session = self
            .sessions
            .get(&parsed.session_id)
            .ok_or_else(|| fail(GateError::UnknownSession(parsed.session_id.to_string())))?;
        let route = self
            .host
            .route(&session, &parsed.server_id)
            .await
            .map_err(fail)?;

        let inner = parsed.params.filter(|p| !jsonrpc::is_null(p));
        let mut documents = Vec::new();
        if let Some(inner) = inner {
            let value: serde_json::Value = serde_json::from_str(inner.get())
                .map_err(|e| fail(GateError::InvalidParams(e.to_string())))?;
            session
                .confinement()
                .check_params(&value)
                .map_err(|e| fail(e.into()))?;
            if method == "workspace/executeCommand" {
                check_command(&value, &route).map_err(fail)?;
            }
            documents = named_documents(&value);
        } else if method == "workspace/executeCommand" {
            return Err(fail(GateError::InvalidParams(
                "workspace/executeCommand needs params with a command".into(),
            )));
        }

        let wait = parsed
            .wait_until_ready
            .map(|ms| Duration::from_millis(ms).min(MAX_WAIT_UNTIL_READY));
        let deadline = route.request_timeout + wait.unwrap_or_default();
        let call = HostCall {
            session,
            server_id: parsed.server_id.to_string(),
            method: method.clone(),
            params: inner.map(ToOwned::to_owned),
            documents,
            cancel,
            wait_until_ready: wait,
        };
        match tokio::time::timeout(deadline, self.host.request(call)).await {
            Ok(reply) => reply.map_err(fail),
            Err(_elapsed) => Err(fail(GateError::DeadlineExceeded {
                ms: deadline.as_millis() as u64,
            })),
        }
    }
}

/// The document URIs a request's params name (rfd section 5): `textDocument.uri`, and the
/// `uri` of hierarchy items (`item.uri`). Other URIs (locations in results,
/// workspace edits) are not documents the request reads.
pub fn named_documents(params: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for key in ["textDocument", "item"] {
        if let Some(uri) = params
            .get(key)
            .and_then(|v| v.get("uri"))
            .and_then(serde_json::Value::as_str)
        {
            if !out.iter().any(|u| u == uri) {
                out.push(uri.to_string());
            }
        }
    }
    out
}

/// The response to `lsp/request`: `{"lspResult": <raw>, "_meta": <raw>?}`, written
/// around the server's result without parsing or re-encoding it.
fn encode_request_response(id: &RequestId, reply: &HostReply) -> Vec<u8> {
    let result = reply.result.get().as_bytes();
    let meta = reply.meta.as_ref().map(|m| m.get().as_bytes());
    let mut out = Vec::with_capacity(result.len() + meta.map_or(0, <[u8]>::len) + 80);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_json().as_bytes());
    out.extend_from_slice(b",\"result\":{\"lspResult\":");
    out.extend_from_slice(result);
    if let Some(meta) = meta {
        out.extend_from_slice(b",\"_meta\":");
        out.extend_from_slice(meta);
    }
    out.extend_from_slice(b"}}");
    out
}

fn to_raw<T: Serialize>(value: &T) -> Result<Box<RawValue>, GateError> {
    serde_json::value::to_raw_value(value).map_err(|e| GateError::Internal(e.to_string()))
}

fn check_command(params: &serde_json::Value, route: &Route) -> Result<(), GateError> {
    let command = params
        .get("command")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| {
            GateError::InvalidParams("workspace/executeCommand needs a command".into())
        })?;
    if route.execute_commands.iter().any(|c| c == command) {
        Ok(())
    } else {
        Err(GateError::CommandNotAllowed {
            command: command.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_named_documents() {
        let params = serde_json::json!({
            "textDocument": {"uri": "file:///a"},
            "position": {"line": 0, "character": 0},
            "item": {"uri": "file:///b", "name": "f"}
        });
        assert_eq!(named_documents(&params), vec!["file:///a", "file:///b"]);
    }
}
