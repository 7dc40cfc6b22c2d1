//! The gate: answers `lsp/servers` and `lsp/request` for a session, over any
//! [`LspHost`] (acp-lsp's own servers, or an editor host's).
//!
//! The gate owns what is protocol: parameter checks and limits, the refused
//! categories, URI confinement, deadlines, cancellation and the error mapping.
//! The host owns the servers. An editor that exposes its own language servers
//! implements [`LspHost`] and uses the gate without the relay.

pub mod confine;
mod diagnostics;
mod document;
mod entry;
pub mod error;
mod host;
mod ids;
pub mod methods;
mod params;
mod request;
mod session;
mod tree;

use crate::jsonrpc::{self, depth, Limits, RequestId};
use futures::FutureExt;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tree::JsonTree;

pub use diagnostics::{DiagnosticsMode, Fetched, PublishedDiagnostics};
pub use document::NamedDocument;
pub use entry::{
    AcpLspEntry, Dropped, EntryMeta, Progress, RegistrationEntry, ServerEntry, ServerState,
    ServerSummary, ServersResult, State, StateReason, META_KEY,
};
pub use error::{GateError, NotRunning};
pub use host::{Forward, HostCall, HostReply, LspHost};
pub use ids::{ServerId, SessionId};
pub use methods::{GateMethod, Refusal};
pub use request::{Caller, LspRequest, Route};
pub use session::{Session, SessionTable};

use self::params::*;
use self::request::{Admission, Checks, Params, Slot};

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
    /// Size and depth limits on what the gate reads.
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

/// An error answer, with the LSP method concerned when it was known.
type Failure = (GateError, Option<String>);

/// Runs one gate method's answer, turning a panic inside it (a host's bug)
/// into a -32603 `internal` error: every request gets its one response, and
/// the panic stays inside this request.
async fn caught<T, F>(method: GateMethod, answer: F) -> Result<T, Failure>
where
    F: Future<Output = Result<T, Failure>>,
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

/// Answers the gate's ACP methods over a host: an editor host makes one
/// (`Gate::new`), opens its sessions on it, and hands it every `lsp/*`
/// request of its agent ([`Gate::call`]).
pub struct Gate<H> {
    host: Arc<H>,
    config: GateConfig,
    sessions: SessionTable,
    /// Agent request id → cancellation of the matching in-flight
    /// `lsp/request` (with the serial of its [`InFlightEntry`]).
    in_flight: Mutex<HashMap<RequestId, (u64, CancellationToken)>>,
    /// Serials of [`InFlightEntry`]s.
    next_serial: AtomicU64,
    admission: Arc<Admission>,
}

impl<H: LspHost> Gate<H> {
    /// A gate over `host`, configured by `config`.
    pub fn new(host: Arc<H>, config: GateConfig) -> Arc<Gate<H>> {
        let sessions = SessionTable::new(
            config.read_only_roots.clone(),
            config.allowed_uri_schemes.clone(),
        );
        let admission = Arc::new(Admission::new(
            config.max_requests_per_session,
            config.max_requests_total,
        ));
        Arc::new(Gate {
            host,
            config,
            sessions,
            in_flight: Mutex::new(HashMap::new()),
            next_serial: AtomicU64::new(0),
            admission,
        })
    }

    /// The host behind the gate.
    pub fn host(&self) -> &Arc<H> {
        &self.host
    }

    /// The limits in force (a relay in front of the gate applies the same
    /// to the lines it reads).
    pub fn limits(&self) -> &Limits {
        &self.config.limits
    }

    /// Commits a session's roots (`[cwd, …additionalDirectories]`) and tells
    /// the host ([`LspHost::session_opened`]). Opening an open session again
    /// (`session/load`, `session/resume`) replaces its roots.
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

    /// Forgets a session and tells the host ([`LspHost::session_closed`]).
    pub fn close_session(&self, session_id: &str) {
        if let Some(session) = self.sessions.remove(session_id) {
            tracing::info!(session = session_id, "session closed");
            self.host.session_closed(&session);
        }
    }

    /// The open sessions.
    pub fn sessions(&self) -> &SessionTable {
        &self.sessions
    }

    /// Cancels the in-flight `lsp/request` the agent sent with `id` (its
    /// `$/cancel_request`). Returns false when no such request is in flight
    /// (the cancel is not ours).
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

    /// Starts answering one request of the agent's: `method` (recognised by
    /// [`GateMethod::from_acp`]) with its `params` as they came. The request
    /// is registered for cancellation ([`Gate::cancel`]) before this
    /// returns; the future yields the encoded JSON-RPC response, one line's
    /// worth without the newline.
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
            let params = params.as_deref();
            match method {
                GateMethod::Servers => {
                    let answer = caught(method, gate.servers_wire(params)).await;
                    encode(
                        &id,
                        answer.map(|result| jsonrpc::encode_result(&id, &result)),
                    )
                }
                GateMethod::Request => {
                    let answer = caught(method, gate.request_wire(params, token)).await;
                    encode(
                        &id,
                        answer.map(|reply| encode_request_response(&id, &reply)),
                    )
                }
                GateMethod::Diagnostics => {
                    let answer = caught(method, gate.diagnostics_wire(params)).await;
                    encode(&id, answer.map(|result| encode_raw_result(&id, &result)))
                }
            }
        }
    }

    /// One `lsp/request` from a caller inside the host's process (acp-lsp's
    /// MCP tools and command line): the same checks, limits, confinement,
    /// quota and deadline as an agent's [`Gate::call`], typed in and out.
    /// Nothing is entered in the cancellation table (no request id can
    /// collide with the agent's); `cancel` cancels it. A host that panics
    /// gives [`GateError::Internal`].
    pub async fn request(
        &self,
        request: LspRequest,
        cancel: CancellationToken,
    ) -> Result<HostReply, GateError> {
        let answer = async {
            if let Some(params) = &request.params {
                // The params sit one level down in the wire's request.
                self.check_shape(params, 1).map_err(|e| (e, None))?;
            }
            let params = match request.params {
                Some(params) if !jsonrpc::is_null(&params) => Params::Value(params),
                _ => Params::Null,
            };
            let wait = request
                .wait_until_ready
                .map(|wait| wait.min(MAX_WAIT_UNTIL_READY));
            self.forward(
                request.session_id.as_str(),
                request.server_id,
                &request.method,
                params,
                wait,
                cancel,
                request.caller,
            )
            .await
            .map_err(|e| (e, None))
        };
        caught(GateMethod::Request, answer)
            .await
            .map_err(|(e, _)| e)
    }

    /// The `lsp/servers` result of a session, typed.
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

    /// **[acp-lsp]** `_acp-lsp/diagnostics`, typed: the session's latest
    /// diagnostics, or with `uris`, those documents' fresh ones (each URI
    /// confined first), waiting up to `wait` for pushed ones.
    pub async fn diagnostics_of(
        &self,
        session_id: &str,
        uris: Vec<String>,
        wait: Duration,
    ) -> Result<Vec<PublishedDiagnostics>, GateError> {
        let session = self
            .sessions
            .get(session_id)
            .ok_or_else(|| GateError::UnknownSession(session_id.to_string()))?;
        let mut documents = Vec::with_capacity(uris.len());
        for uri in uris {
            let path = session
                .confinement()
                .check_uri(&uri)?
                .ok_or_else(|| GateError::InvalidParams(format!("{uri} is not a file URI")))?;
            documents.push((uri, path));
        }
        let answer = self
            .host
            .diagnostics(&session, documents, wait.min(MAX_WAIT_UNTIL_READY));
        caught(
            GateMethod::Diagnostics,
            answer.map(|r| r.map_err(|e| (e, None))),
        )
        .await
        .map_err(|(e, _)| e)
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

    /// The shape scans, before anything parses `params`: size, nesting depth
    /// (`nested` levels above them in the wire's request count too), and
    /// duplicate keys.
    fn check_shape(&self, params: &RawValue, nested: usize) -> Result<(), GateError> {
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
        let allowed = limits.max_depth.saturating_sub(nested);
        if depth::max_depth(params.get().as_bytes(), allowed) > allowed {
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

    /// The wire's params, shape-checked and parsed.
    fn read_params<'a, T: Deserialize<'a>>(
        &self,
        params: Option<&'a RawValue>,
    ) -> Result<T, Failure> {
        let Some(params) = params else {
            return Err((GateError::InvalidParams("params are missing".into()), None));
        };
        self.check_shape(params, 0).map_err(|e| (e, None))?;
        serde_json::from_str(params.get())
            .map_err(|e| (GateError::InvalidParams(e.to_string()), None))
    }

    /// `lsp/servers`.
    async fn servers_wire(&self, params: Option<&RawValue>) -> Result<Box<RawValue>, Failure> {
        let parsed: ServersParams = self.read_params(params)?;
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
        serde_json::value::to_raw_value(&result)
            .map_err(|e| (GateError::Internal(e.to_string()), None))
    }

    /// `_acp-lsp/diagnostics {sessionId, uris?, waitMs?}` → `{diagnostics: [...]}`.
    async fn diagnostics_wire(&self, params: Option<&RawValue>) -> Result<String, Failure> {
        let parsed: DiagnosticsParams = self.read_params(params)?;
        let wait = Duration::from_millis(parsed.wait_ms.unwrap_or(0));
        let entries = self
            .diagnostics_of(&parsed.session_id, parsed.uris.unwrap_or_default(), wait)
            .await
            .map_err(|e| (e, None))?;
        Ok(diagnostics::render(&entries))
    }

    /// `lsp/request` from the wire.
    async fn request_wire(
        &self,
        params: Option<&RawValue>,
        cancel: CancellationToken,
    ) -> Result<HostReply, Failure> {
        let parsed: RequestParams = self.read_params(params)?;
        let inner = match parsed.params {
            None => Params::Missing,
            Some(params) if jsonrpc::is_null(params) => Params::Null,
            Some(params) => Params::Value(params.to_owned()),
        };
        let wait = parsed
            .meta
            .and_then(|m| m.wait_until_ready)
            .or(parsed.wait_until_ready)
            .map(|ms| Duration::from_millis(ms).min(MAX_WAIT_UNTIL_READY));
        self.forward(
            &parsed.session_id,
            ServerId::from(parsed.server_id.into_owned()),
            &parsed.method,
            inner,
            wait,
            cancel,
            Caller::Agent,
        )
        .await
        .map_err(|e| (e, Some(parsed.method.into_owned())))
    }

    /// One `lsp/request`, read: the checks that need no server, then the one
    /// host call (which routes, and finishes the checks through
    /// [`HostCall::route`]) within the deadline.
    #[allow(clippy::too_many_arguments)]
    async fn forward(
        &self,
        session_id: &str,
        server_id: ServerId,
        method: &str,
        params: Params,
        wait: Option<Duration>,
        cancel: CancellationToken,
        caller: Caller,
    ) -> Result<HostReply, GateError> {
        let session = self
            .sessions
            .get(session_id)
            .ok_or_else(|| GateError::UnknownSession(session_id.to_string()))?;
        // The RFD's refused categories go first: they hold for every server.
        let refusal = methods::refusal(method)
            .filter(|r| !(caller == Caller::FileLifecycle && *r == Refusal::FileLifecycle));
        if let Some(refusal) = refusal {
            let refused = GateError::MethodNotForwarded {
                method: method.to_string(),
                refusal,
                available: Vec::new(),
            };
            return Err(self.enrich(&session, refused).await);
        }
        let slot = Arc::new(Slot::default());
        let call = HostCall {
            session: Arc::clone(&session),
            server_id,
            method: method.to_string(),
            params,
            documents: Vec::new(),
            cancel,
            wait_until_ready: wait,
            checks: Some(Checks {
                caller,
                admission: Arc::clone(&self.admission),
                slot: Arc::clone(&slot),
            }),
        };
        // What the host logs while it serves the request (document sync, the
        // request's own line) is inside the session's span.
        let span = tracing::info_span!("session", session = %session.id());
        // Boxed: the host's future is large (about 10 KB for acp-lsp's
        // registry), and each wrapper above it would otherwise copy it.
        let forwarded = tracing::Instrument::instrument(Box::pin(self.host.request(call)), span);
        match within_deadline(forwarded, &slot, method).await {
            Ok(reply) => Ok(reply),
            Err(e) => Err(self.enrich(&session, e).await),
        }
    }

    /// Adds the session's server list to the errors that carry one, and
    /// its `availableMethods` to `method_not_forwarded`.
    async fn enrich(&self, session: &Session, error: GateError) -> GateError {
        match error {
            error if error.wants_servers() => {
                let summaries = self.summaries(session).await;
                error.with_servers(summaries)
            }
            GateError::MethodNotForwarded {
                method, refusal, ..
            } => {
                let servers = self.host.servers(session).await;
                GateError::MethodNotForwarded {
                    method,
                    refusal,
                    available: available_methods(&servers),
                }
            }
            error => error,
        }
    }
}

/// Runs the host's future for one request; once the host has routed it
/// ([`HostCall::route`] sets the deadline in `slot`), no longer than the
/// route's deadline.
async fn within_deadline<F>(forwarded: F, slot: &Slot, method: &str) -> Result<HostReply, GateError>
where
    F: Future<Output = Result<HostReply, GateError>>,
{
    let mut forwarded = pin!(forwarded);
    // Armed (reset to the deadline) when the route is known; never polled before.
    let mut timer = pin!(tokio::time::sleep(Duration::ZERO));
    let mut deadline: Option<Duration> = None;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(outcome) = forwarded.as_mut().poll(cx) {
            return Poll::Ready(outcome);
        }
        let deadline = match deadline {
            Some(deadline) => deadline,
            None => match slot.deadline.get() {
                Some(&routed) => {
                    timer.as_mut().reset(tokio::time::Instant::now() + routed);
                    deadline = Some(routed);
                    routed
                }
                None => return Poll::Pending,
            },
        };
        match timer.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                let ms = deadline.as_millis() as u64;
                tracing::warn!(
                    limit = "request deadline",
                    ms,
                    %method,
                    "limit hit: no answer in time"
                );
                Poll::Ready(Err(GateError::DeadlineExceeded { ms }))
            }
        }
    })
    .await
}

/// The encoded response of one answer.
fn encode(id: &RequestId, answer: Result<Vec<u8>, Failure>) -> Vec<u8> {
    match answer {
        Ok(response) => response,
        Err((error, lsp_method)) => {
            jsonrpc::encode_error(Some(id), &error.to_error_object(lsp_method.as_deref()))
        }
    }
}

/// A success response around a result that is valid JSON text.
fn encode_raw_result(id: &RequestId, result: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(result.len() + id.as_json().len() + 40);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_json().as_bytes());
    out.extend_from_slice(b",\"result\":");
    out.extend_from_slice(result.as_bytes());
    out.push(b'}');
    out
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

#[cfg(test)]
mod tests {
    use super::tree::Json;
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
