//! The `LspHost` trait: what the gate asks of the servers behind it (their
//! entries, one request routed and forwarded, diagnostics), and the calls
//! and replies that cross it.
//!
//! One host call per request: the gate hands the host a [`HostCall`]; the
//! host finds the server (its routing), gives the gate the server's
//! [`Route`] through [`HostCall::route`], which finishes the gate's checks
//! against that server and starts the deadline, and forwards the
//! [`Forward`] it gets back.

use super::diagnostics::PublishedDiagnostics;
use super::document::NamedDocument;
use super::request::{Checks, Params, Route};
use super::{GateError, ServerEntry, ServerId, Session};
use serde_json::value::RawValue;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// One `lsp/request` on its way to a server, as the host receives it, before
/// the host has routed it. The host reads the server id, finds the server,
/// and passes its [`Route`] to [`HostCall::route`]: only then does it get
/// the params to forward ([`Forward`]).
#[derive(Debug)]
pub struct HostCall {
    pub(crate) session: Arc<Session>,
    pub(crate) server_id: ServerId,
    pub(crate) method: String,
    pub(crate) params: Params,
    pub(crate) documents: Vec<NamedDocument>,
    pub(crate) cancel: CancellationToken,
    pub(crate) wait_until_ready: Option<Duration>,
    /// The gate's checks still to make once the route is known; `None` for
    /// a call checked elsewhere ([`HostCall::checked`]).
    pub(crate) checks: Option<Checks>,
}

impl HostCall {
    /// A call whose gate checks were made elsewhere: for a host that hands
    /// requests the gate already checked to another host (acp-lsp's shared
    /// daemon, whose clients' gates check every request before it crosses
    /// the socket). [`HostCall::route`] on it checks nothing more.
    pub fn checked(forward: Forward) -> HostCall {
        let Forward {
            session,
            server_id,
            method,
            params,
            documents,
            cancel,
            wait_until_ready,
        } = forward;
        HostCall {
            session,
            server_id,
            method,
            params: params.map_or(Params::Null, Params::Value),
            documents,
            cancel,
            wait_until_ready,
            checks: None,
        }
    }

    /// The session asking.
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// The server the request names: route it ([`HostCall::route`]), or
    /// answer [`GateError::UnknownServer`] when it does not serve the
    /// session (a server of another session is unknown too).
    pub fn server_id(&self) -> &ServerId {
        &self.server_id
    }

    /// The LSP method.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The agent's `waitUntilReady`: how long the host should wait for the
    /// server to be ready instead of failing at once.
    pub fn wait_until_ready(&self) -> Option<Duration> {
        self.wait_until_ready
    }

    /// Cancelled when the agent cancels the request.
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Hands the gate the route of the server this call names. The gate
    /// finishes its checks against that server (the method is one it
    /// forwards to it, the session's quota, the params, their URIs'
    /// confinement, an `executeCommand`'s command) and starts the request's
    /// deadline; an error is the request's answer. On success, the request
    /// to send.
    pub fn route(self, route: &Route) -> Result<Forward, GateError> {
        let documents = match &self.checks {
            Some(checks) => checks.finish(
                &self.session,
                &self.method,
                &self.params,
                self.wait_until_ready,
                route,
            )?,
            None => self.documents,
        };
        Ok(Forward {
            session: self.session,
            server_id: self.server_id,
            method: self.method,
            params: match self.params {
                Params::Value(params) => Some(params),
                Params::Null | Params::Missing => None,
            },
            documents,
            cancel: self.cancel,
            wait_until_ready: self.wait_until_ready,
        })
    }
}

/// A routed and checked request: what the host sends its server.
#[derive(Debug)]
pub struct Forward {
    /// The session asking.
    pub session: Arc<Session>,
    /// The server to send it to.
    pub server_id: ServerId,
    /// The LSP method.
    pub method: String,
    /// The LSP params, the agent's bytes; `None` for a method sent without
    /// params (`null`).
    pub params: Option<Box<RawValue>>,
    /// The documents the params name (`textDocument.uri`, `item.uri`),
    /// found while the gate had the params parsed, so the host need not
    /// parse them again: documents to bring up to date on the server first.
    pub documents: Vec<NamedDocument>,
    /// Cancelled when the agent cancels: send the server `$/cancelRequest`
    /// and return its answer, or [`GateError::Cancelled`] if none comes soon.
    pub cancel: CancellationToken,
    /// Wait this long for the server to be ready instead of failing at once.
    pub wait_until_ready: Option<Duration>,
}

/// A host's answer to a forwarded request.
#[derive(Debug)]
pub struct HostReply {
    /// The server's `result`, verbatim: the response's `lspResult`.
    pub result: Box<RawValue>,
    /// Goes to the response's `_meta` (acp-lsp: `documents`, what the
    /// server saw of each named document).
    pub meta: Option<Box<RawValue>>,
}

/// The servers behind the gate: what an editor host implements over the
/// language servers it owns (acp-lsp's registry and its shared daemon's
/// client implement it too).
///
/// The gate owns the protocol (params, limits, refusals, confinement,
/// deadlines, cancellation, the error mapping); the host owns the servers:
/// which serve a session, their state, sending them requests.
///
/// A host's `request` future may be dropped (deadline, or the relay ending
/// because the agent or the editor went away): it must then tell the server
/// (`$/cancelRequest`) and forget the request. A host that panics fails only
/// that request: the gate answers it with -32603 `internal`.
pub trait LspHost: Send + Sync + 'static {
    /// The servers serving a session's roots: the `lsp/servers` entries.
    fn servers(&self, session: &Session) -> impl Future<Output = Vec<ServerEntry>> + Send;

    /// Routes and forwards one `lsp/request`: finds the server
    /// [`HostCall::server_id`] names among the session's (else
    /// [`GateError::UnknownServer`]), passes its [`Route`] to
    /// [`HostCall::route`] and sends the [`Forward`] it returns, and answers
    /// the server's result (or, e.g., [`GateError::ServerNotRunning`],
    /// [`GateError::ServerError`]). The gate adds the session's server list
    /// to the errors that carry one.
    fn request(&self, call: HostCall) -> impl Future<Output = Result<HostReply, GateError>> + Send;

    /// **[acp-lsp]** `lsp/servers` with `_meta.startAll: true`: start every
    /// server of the session now (within the host's own limits), before the
    /// listing. Hosts that start everything anyway need not implement it.
    fn start_all(&self, _session: &Session) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// `lsp/servers` without `_meta.startAll`, from an agent that may know
    /// only the RFD, which sends requests only to servers it sees `running`:
    /// start, within the host's limits, the servers the listing will show,
    /// so that one shown `starting` is being started (and one that cannot
    /// start says so). `_meta.startAll: false` is the lazy start of an agent
    /// that knows the extension. Hosts that start everything anyway need not
    /// implement it.
    fn start_shown(&self, _session: &Session) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// **[acp-lsp]** Starts `server_id` (one of `session`'s) if it is not
    /// running and waits up to `wait` for it to settle: running, failed or
    /// stopped. The MCP tools and the command line call it before reading an
    /// entry's capabilities (a server not yet started has none). Hosts whose
    /// servers are always started need not implement it.
    fn ensure_ready(
        &self,
        _session: &Session,
        _server_id: &str,
        _wait: Duration,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// A session's roots were committed (servers may start indexing now).
    fn session_opened(self: &Arc<Self>, _session: &Arc<Session>) {}

    /// A session ended.
    fn session_closed(self: &Arc<Self>, _session: &Arc<Session>) {}

    /// The editor confirmed an `fs/write_text_file` of the session's agent.
    /// Called before the confirmation is forwarded to the agent, so the host
    /// must take the text in synchronously: the agent's next `lsp/request`
    /// has to see it.
    fn text_written(&self, _session: &Arc<Session>, _path: &std::path::Path, _text: &str) {}

    /// **[acp-lsp]** `_acp-lsp/diagnostics`: the latest published
    /// diagnostics of the session's servers, one [`PublishedDiagnostics`]
    /// per (document, server). With `documents` (URI and confined path),
    /// only those, each first synced from disk, then pulled (servers with
    /// `diagnosticProvider`) or waited for (up to `wait`) until a publish
    /// reflects its text, with [`PublishedDiagnostics::fetched`] saying how.
    /// Hosts without diagnostics need not implement it (none are listed).
    fn diagnostics(
        &self,
        _session: &Session,
        _documents: Vec<(String, std::path::PathBuf)>,
        _wait: Duration,
    ) -> impl Future<Output = Result<Vec<PublishedDiagnostics>, GateError>> + Send {
        async { Ok(Vec::new()) }
    }
}
