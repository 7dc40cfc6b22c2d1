//! The gate: answers `lsp/servers` and `lsp/request` for a session, over any
//! [`LspHost`] (acp-lsp's own servers, or an editor host's).
//!
//! The gate owns what is protocol: parameter checks and limits, the refused
//! categories, URI confinement, deadlines, cancellation and the error mapping.
//! The host owns the servers. An editor that exposes its own language servers
//! implements [`LspHost`] and uses the gate without the relay.

pub mod confine;
pub mod entry;
pub mod error;
pub mod host;
pub mod ids;
pub mod methods;
mod params;
pub mod session;
mod tree;

use crate::jsonrpc::{self, depth, Limits, RequestId};
use futures::FutureExt;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tree::{Json, JsonTree};

pub use entry::{
    AcpLspEntry, Dropped, EntryMeta, Progress, RegistrationEntry, ServerEntry, ServerState,
    ServerSummary, ServersResult, State, StateReason,
};
pub use error::{GateError, NotRunning};
pub use host::{HostCall, HostReply, LspHost, Route};
pub use ids::{ServerId, SessionId};
pub use methods::{GateMethod, Refusal};
pub use session::{Session, SessionTable};

use self::params::*;

/// Longest `waitUntilReady` honoured.
pub(crate) const MAX_WAIT_UNTIL_READY: Duration = Duration::from_secs(300);
/// Default most `lsp/request`s (and MCP tool requests) in flight per session;
/// one more is refused at once with `overloaded` (retryable), never queued.
pub const DEFAULT_MAX_REQUESTS_PER_SESSION: usize = 32;
/// Default most `lsp/request`s in flight over all sessions.
pub const DEFAULT_MAX_REQUESTS_TOTAL: usize = 128;

/// Configuration of the gate itself.
#[derive(Debug, Clone)]
pub struct GateConfig {
    pub limits: Limits,
    /// Extra roots requests may name but that are never written.
    pub read_only_roots: Vec<std::path::PathBuf>,
    /// Non-`file` URI schemes let through (lowercase).
    pub allowed_uri_schemes: Vec<String>,
    /// Most `lsp/request`s in flight per session ([`DEFAULT_MAX_REQUESTS_PER_SESSION`]).
    pub max_requests_per_session: usize,
    /// Most `lsp/request`s in flight in all ([`DEFAULT_MAX_REQUESTS_TOTAL`]).
    pub max_requests_total: usize,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            limits: Limits::default(),
            read_only_roots: Vec::new(),
            allowed_uri_schemes: Vec::new(),
            max_requests_per_session: DEFAULT_MAX_REQUESTS_PER_SESSION,
            max_requests_total: DEFAULT_MAX_REQUESTS_TOTAL,
        }
    }
}

/// `lsp/request`s in flight, per session and in all.
#[derive(Default)]
struct Quota {
    total: usize,
    /// Session id → its requests in flight (no entry at zero).
    per_session: HashMap<String, usize>,
}

/// One admitted request; gives its place back when dropped.
struct Admitted<'a> {
    quota: &'a Mutex<Quota>,
    session: String,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        let mut quota = self.quota.lock();
        quota.total -= 1;
        if let Some(n) = quota.per_session.get_mut(&self.session) {
            *n -= 1;
            if *n == 0 {
                quota.per_session.remove(&self.session);
            }
        }
    }
}

/// One agent request's place in the cancellation table; leaves it when
/// dropped, so no way out of [`Gate::call`]'s future (answer, panic, or the
/// future dropped) leaves the entry behind.
struct InFlightEntry<H: LspHost> {
    gate: Arc<Gate<H>>,
    id: RequestId,
    /// Which registration this is: an agent reusing an id still in flight
    /// replaces the entry, and the older request ending must not remove the
    /// newer one's.
    serial: u64,
}

impl<H: LspHost> InFlightEntry<H> {
    fn enter(gate: &Arc<Gate<H>>, id: &RequestId, token: &CancellationToken) -> Self {
        let serial = gate.next_serial.fetch_add(1, Ordering::Relaxed);
        gate.in_flight
            .lock()
            .insert(id.clone(), (serial, token.clone()));
        InFlightEntry {
            gate: Arc::clone(gate),
            id: id.clone(),
            serial,
        }
    }
}

impl<H: LspHost> Drop for InFlightEntry<H> {
    fn drop(&mut self) {
        // Runs while a panic unwinds too: parking_lot's lock does not
        // poison, so this cannot panic a second time.
        let mut in_flight = self.gate.in_flight.lock();
        if in_flight.get(&self.id).map(|(serial, _)| *serial) == Some(self.serial) {
            in_flight.remove(&self.id);
        }
    }
}

/// Runs one gate method's answer, turning a panic inside it (a host's bug)
/// into a -32603 `internal` error: every request gets its one response, and
/// the panic stays inside this request.
async fn caught<F>(method: GateMethod, answer: F) -> Result<HostReply, (GateError, Option<String>)>
where
    F: Future<Output = Result<HostReply, (GateError, Option<String>)>>,
{
    // Unwind safety: what the future touches is the gate's tables (each
    // behind a lock, left consistent by drop guards) and the host, whose
    // own state is its business; nothing half-updated is read afterwards.
    match AssertUnwindSafe(answer).catch_unwind().await {
        Ok(outcome) => outcome,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            tracing::error!(method = method.as_acp(), panic = %what, "a gate request panicked");
            Err((
                GateError::Internal(format!("the {} handler panicked: {what}", method.as_acp())),
                None,
            ))
        }
    }
}

/// Answers the gate's ACP methods over a host.
pub struct Gate<H> {
    host: Arc<H>,
    config: GateConfig,
    sessions: SessionTable,
    /// Agent request id → cancellation of the matching in-flight
    /// `lsp/request` (with the serial of its [`InFlightEntry`]).
    in_flight: Mutex<HashMap<RequestId, (u64, CancellationToken)>>,
    /// Serials of [`InFlightEntry`]s.
    next_serial: AtomicU64,
    quota: Mutex<Quota>,
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
            next_serial: AtomicU64::new(0),
            quota: Mutex::new(Quota::default()),
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
        tracing::info!(
            session = session_id,
            roots = %session
                .roots()
                .iter()
                .map(|root| root.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            "session opened"
        );
        self.host.session_opened(&session);
    }

    /// Forgets a session.
    pub fn close_session(&self, session_id: &str) {
        if let Some(session) = self.sessions.remove(session_id) {
            tracing::info!(session = session_id, "session closed");
            self.host.session_closed(&session);
        }
    }

    pub fn sessions(&self) -> &SessionTable {
        &self.sessions
    }

    /// Cancels the in-flight `lsp/request` the agent sent with `id`. Returns
    /// false when no such request is in flight (the cancel is not ours).
    pub fn cancel(&self, id: &RequestId) -> bool {
        let in_flight = self.in_flight.lock();
        match in_flight.get(id) {
            Some((_, token)) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Starts answering one request of ours. The request is registered for
    /// cancellation before this returns; the future yields the encoded response.
    ///
    /// The future always answers: a host that panics gets the agent a
    /// -32603 `internal` error instead of no response. Its cancellation
    /// entry goes when the future ends, however it ends (answered, panicked,
    /// or dropped unfinished, as the relay does when its peers go away).
    pub fn call(
        self: &Arc<Self>,
        id: RequestId,
        method: GateMethod,
        params: Option<Box<RawValue>>,
    ) -> impl Future<Output = Vec<u8>> + Send + 'static {
        let token = CancellationToken::new();
        let entry =
            (method == GateMethod::Request).then(|| InFlightEntry::enter(self, &id, &token));
        let gate = Arc::clone(self);
        async move {
            // Dropped with the future: the entry never outlives the request.
            let _entry = entry;
            let answer = async {
                match method {
                    GateMethod::Servers => gate
                        .servers(params.as_deref())
                        .await
                        .map(|result| HostReply { result, meta: None }),
                    GateMethod::Request => {
                        gate.request(params.as_deref(), token, Caller::Agent).await
                    }
                    GateMethod::Diagnostics => gate
                        .diagnostics(params.as_deref())
                        .await
                        .map(|result| HostReply { result, meta: None }),
                }
            };
            let outcome = caught(method, answer).await;
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
        let answer = async {
            match method {
                GateMethod::Servers => self
                    .servers(params)
                    .await
                    .map(|result| HostReply { result, meta: None }),
                GateMethod::Request => self.request(params, cancel, Caller::Agent).await,
                GateMethod::Diagnostics => self
                    .diagnostics(params)
                    .await
                    .map(|result| HostReply { result, meta: None }),
            }
        };
        caught(method, answer).await
    }

    /// [`Gate::call_internal`] for an `lsp/request` that may also carry a
    /// file lifecycle method (`workspace/willRenameFiles`): acp-lsp's own
    /// rename applies file renames, and LSP has the applying client ask the
    /// server first. Agents never get this: the RFD refuses those methods.
    pub async fn call_internal_file_lifecycle(
        &self,
        params: &RawValue,
        cancel: CancellationToken,
    ) -> Result<HostReply, (GateError, Option<String>)> {
        let answer = self.request(Some(params), cancel, Caller::FileLifecycle);
        caught(GateMethod::Request, answer).await
    }

    /// The `lsp/servers` result of a session, typed (the MCP tools and the CLI).
    pub async fn servers_of(&self, session_id: &str) -> Result<ServersResult, GateError> {
        let session = self
            .sessions
            .get(session_id)
            .ok_or_else(|| GateError::UnknownSession(session_id.to_string()))?;
        let servers = self.host.servers(&session).await;
        let available_methods = available_methods(&servers);
        Ok(ServersResult {
            servers,
            available_methods,
        })
    }

    /// The session's servers, short, for error data.
    async fn summaries(&self, session: &Session) -> Vec<ServerSummary> {
        self.host
            .servers(session)
            .await
            .iter()
            .map(ServerEntry::summary)
            .collect()
    }

    /// Admits one more `lsp/request` of `session`, or refuses it at once.
    fn admit(&self, session: &str) -> Result<Admitted<'_>, GateError> {
        let mut quota = self.quota.lock();
        let mine = quota.per_session.get(session).copied().unwrap_or(0);
        if mine >= self.config.max_requests_per_session {
            return Err(GateError::Overloaded {
                scope: "session",
                limit: self.config.max_requests_per_session,
            });
        }
        if quota.total >= self.config.max_requests_total {
            return Err(GateError::Overloaded {
                scope: "total",
                limit: self.config.max_requests_total,
            });
        }
        quota.total += 1;
        *quota.per_session.entry(session.to_string()).or_insert(0) += 1;
        Ok(Admitted {
            quota: &self.quota,
            session: session.to_string(),
        })
    }

    fn check_shape(&self, params: Option<&RawValue>) -> Result<(), GateError> {
        let Some(params) = params else {
            return Err(GateError::InvalidParams("params are missing".into()));
        };
        let limits = &self.config.limits;
        if params.get().len() > limits.max_intercepted_params {
            tracing::warn!(
                limit = "max_intercepted_params",
                value = limits.max_intercepted_params,
                bytes = params.get().len(),
                "limit hit: params refused"
            );
            return Err(GateError::ParamsTooLarge {
                limit: limits.max_intercepted_params,
            });
        }
        if depth::max_depth(params.get().as_bytes(), limits.max_depth) > limits.max_depth {
            tracing::warn!(
                limit = "max_depth",
                value = limits.max_depth,
                "limit hit: params refused"
            );
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
        if let Some(session) = self.sessions.get(&parsed.session_id) {
            match parsed.meta.and_then(|m| m.start_all) {
                Some(true) => self.host.start_all(&session).await,
                // An agent that knows the extension chose the lazy start.
                Some(false) => {}
                // An agent written to the RFD alone: it will only ever use
                // what it sees `running`.
                None => self.host.start_shown(&session).await,
            }
        }
        let result = self
            .servers_of(&parsed.session_id)
            .await
            .map_err(|e| (e, None))?;
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
        caller: Caller,
    ) -> Result<HostReply, (GateError, Option<String>)> {
        self.check_shape(params).map_err(|e| (e, None))?;
        let params = params.expect("BUG: check_shape rejects missing params");
        let parsed: RequestParams = serde_json::from_str(params.get())
            .map_err(|e| (GateError::InvalidParams(e.to_string()), None))?;
        let method = parsed.method.to_string();
        let fail = |e: GateError| (e, Some(method.clone()));

        let session = self
            .sessions
            .get(&parsed.session_id)
            .ok_or_else(|| fail(GateError::UnknownSession(parsed.session_id.to_string())))?;
        // The RFD's refused categories go first: they hold for every server.
        let refusal = methods::refusal(&method)
            .filter(|r| !(caller == Caller::FileLifecycle && *r == Refusal::FileLifecycle));
        if let Some(refusal) = refusal {
            return Err(fail(self.not_forwarded(&session, &method, refusal).await));
        }
        let route = match self.host.route(&session, &parsed.server_id).await {
            Ok(route) => route,
            Err(e) => return Err(fail(self.enrich(&session, e).await)),
        };
        let listed = methods::FORWARDED.contains(&method.as_str())
            || methods::FILE_LIFECYCLE.contains(&method.as_str())
            || (method == methods::EXECUTE_COMMAND && !route.execute_commands.is_empty())
            || route.extension_methods.contains(&method);
        if !listed {
            return Err(fail(
                self.not_forwarded(&session, &method, Refusal::NotListed)
                    .await,
            ));
        }
        // Counted from here to the answer: waiting for readiness or document
        // sync holds a place too.
        let _admitted = self.admit(session.id()).map_err(fail)?;

        let Some(params) = parsed.params else {
            return Err(fail(GateError::InvalidParams(
                "params is required (null for a method that takes none)".into(),
            )));
        };
        let inner = Some(params).filter(|p| !jsonrpc::is_null(p));
        let mut documents = Vec::new();
        if let Some(inner) = inner {
            let value: Json = serde_json::from_str(inner.get())
                .map_err(|e| fail(GateError::InvalidParams(e.to_string())))?;
            session
                .confinement()
                .check_params(&value)
                .map_err(|e| fail(e.into()))?;
            if method == methods::EXECUTE_COMMAND {
                check_command(&value, &route).map_err(fail)?;
            }
            documents = named_documents(&value);
        } else if method == methods::EXECUTE_COMMAND {
            return Err(fail(GateError::InvalidParams(
                "workspace/executeCommand needs params with a command".into(),
            )));
        }

        let wait = parsed
            .meta
            .and_then(|m| m.wait_until_ready)
            .or(parsed.wait_until_ready)
            .map(|ms| Duration::from_millis(ms).min(MAX_WAIT_UNTIL_READY));
        let deadline = route.request_timeout + wait.unwrap_or_default();
        let call = HostCall {
            session: Arc::clone(&session),
            server_id: parsed.server_id.as_ref().into(),
            method: method.clone(),
            params: inner.map(ToOwned::to_owned),
            documents,
            cancel,
            wait_until_ready: wait,
        };
        // What the host logs while it serves the request (document sync, the
        // request's own line) is inside the session's span.
        let span = tracing::info_span!("session", session = %session.id());
        let forwarded = tracing::Instrument::instrument(self.host.request(call), span);
        let outcome = match tokio::time::timeout(deadline, forwarded).await {
            Ok(reply) => reply,
            Err(_elapsed) => {
                tracing::warn!(
                    limit = "request deadline",
                    ms = deadline.as_millis() as u64,
                    %method,
                    "limit hit: no answer in time"
                );
                Err(GateError::DeadlineExceeded {
                    ms: deadline.as_millis() as u64,
                })
            }
        };
        match outcome {
            Ok(reply) => Ok(reply),
            Err(e) => Err(fail(self.enrich(&session, e).await)),
        }
    }

    /// Adds the session's server list to the errors that carry one.
    async fn enrich(&self, session: &Session, error: GateError) -> GateError {
        if error.wants_servers() {
            let summaries = self.summaries(session).await;
            error.with_servers(summaries)
        } else {
            error
        }
    }

    /// `method_not_forwarded`, with the session's `availableMethods`.
    async fn not_forwarded(&self, session: &Session, method: &str, refusal: Refusal) -> GateError {
        let servers = self.host.servers(session).await;
        GateError::MethodNotForwarded {
            method: method.to_string(),
            refusal,
            available: available_methods(&servers),
        }
    }
}

/// `availableMethods` for a session with these servers: the RFD's forwarded
/// requests, `workspace/executeCommand` where some server allows a command,
/// and the extension methods the servers' configurations name. Sorted.
pub fn available_methods(servers: &[ServerEntry]) -> Vec<String> {
    let mut methods: Vec<String> = methods::FORWARDED.iter().map(|m| m.to_string()).collect();
    if servers
        .iter()
        .any(|s| !s.ours().execute_commands.is_empty())
    {
        methods.push(methods::EXECUTE_COMMAND.to_string());
    }
    for server in servers {
        methods.extend(server.ours().extension_methods.iter().cloned());
    }
    methods.sort();
    methods.dedup();
    methods
}

/// The document URIs a request's params name (rfd section 5): `textDocument.uri`, and the
/// `uri` of hierarchy items (`item.uri`). Other URIs (locations in results,
/// workspace edits) are not documents the request reads.
pub(crate) fn named_documents<T: JsonTree>(params: &T) -> Vec<String> {
    let mut out = Vec::new();
    for key in ["textDocument", "item"] {
        if let Some(uri) = params
            .get(key)
            .and_then(|v| v.get("uri"))
            .and_then(JsonTree::as_str)
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

fn check_command<T: JsonTree>(params: &T, route: &Route) -> Result<(), GateError> {
    let command = params
        .get("command")
        .and_then(JsonTree::as_str)
        .ok_or_else(|| {
            GateError::InvalidParams("workspace/executeCommand needs a command".into())
        })?;
    if route.execute_commands.iter().any(|c| c == command) {
        Ok(())
    } else {
        Err(GateError::CommandNotAllowed {
            command: command.to_string(),
            allowed: route.execute_commands.clone(),
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
        // The gate's own reading of the params finds the same.
        let text = params.to_string();
        let json: Json = serde_json::from_str(&text).unwrap();
        assert_eq!(named_documents(&json), vec!["file:///a", "file:///b"]);
        let same: Json = serde_json::from_str(
            r#"{"textDocument": {"uri": "file:\/\/\/a"}, "item": {"uri": "file:///a"}}"#,
        )
        .unwrap();
        assert_eq!(named_documents(&same), vec!["file:///a"]);
    }
}
