//! The `LspHost` trait: what the gate asks of the servers behind it (their
//! entries, routing, forwarding one request), and the calls and replies
//! that cross it.

use super::{GateError, ServerEntry, ServerId, Session};
use serde_json::value::RawValue;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What the gate needs to know to route a request to one server.
#[derive(Debug, Clone)]
pub struct Route {
    pub execute_commands: Vec<String>,
    /// Server extension methods forwarded to this server.
    pub extension_methods: Vec<String>,
    pub request_timeout: Duration,
}

/// One forwarded request, as the host receives it.
#[derive(Debug)]
pub struct HostCall {
    pub session: Arc<Session>,
    pub server_id: ServerId,
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
/// A host's `request` future may be dropped (deadline, or the relay ending
/// because the agent or the editor went away): it must then tell the server
/// (`$/cancelRequest`) and forget the request. A host that panics fails only
/// that request: the gate answers it with -32603 `internal`.
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

    /// `_acp-lsp/diagnostics`: the latest published diagnostics of the session's
    /// servers, as `textDocument/publishDiagnostics` params with `serverId` and
    /// `fresh` added. With `documents`, only those, each first synced from disk,
    /// then pulled (servers with `diagnosticProvider`) or waited for (up to
    /// `wait`) until a publish reflects its text: one entry per (document,
    /// server), with `mode` and `timedOut` added.
    fn diagnostics(
        &self,
        _session: &Session,
        _documents: Vec<(String, std::path::PathBuf)>,
        _wait: Duration,
    ) -> impl Future<Output = Result<Vec<Box<RawValue>>, GateError>> + Send {
        async { Ok(Vec::new()) }
    }
}
