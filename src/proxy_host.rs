//! The proxy's servers: a registry of its own, or the shared daemon's
//! (`--shared`). One concrete [`LspHost`] for everything above the gate (the
//! relay, the MCP tools, the command line), so none of it is generic over the
//! host and each works the same in both modes.

use crate::daemon::client::RemoteHost;
use crate::gate::{
    GateError, HostCall, HostReply, LspHost, PublishedDiagnostics, ServerEntry, Session,
};
use crate::lsp::registry::Registry;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where the proxy's language servers live.
pub enum ProxyHost {
    /// Servers this process starts and owns.
    Local(Arc<Registry>),
    /// Servers of the per-user daemon, shared with other proxies.
    Shared(Arc<RemoteHost>),
}

impl ProxyHost {
    /// The registry, when the servers are this process's own.
    pub fn registry(&self) -> Option<&Arc<Registry>> {
        match self {
            ProxyHost::Local(registry) => Some(registry),
            ProxyHost::Shared(_) => None,
        }
    }

    /// The session's server entries without `memoryBytes` and
    /// `degradedRoots` (no `/proc` read): what picking a server needs. The
    /// shared daemon's entries come whole.
    pub async fn servers_brief(&self, session: &Session) -> Vec<ServerEntry> {
        match self {
            ProxyHost::Local(registry) => registry.servers_brief(session).await,
            ProxyHost::Shared(host) => host.servers(session).await,
        }
    }

    /// Stops this process's own servers; shared ones stay with the daemon
    /// (for the other proxies, then its idle grace).
    pub async fn shutdown(&self) {
        if let ProxyHost::Local(registry) = self {
            registry.shutdown().await;
        }
    }
}

impl LspHost for ProxyHost {
    async fn servers(&self, session: &Session) -> Vec<ServerEntry> {
        match self {
            ProxyHost::Local(host) => host.servers(session).await,
            ProxyHost::Shared(host) => host.servers(session).await,
        }
    }

    async fn request(&self, call: HostCall) -> Result<HostReply, GateError> {
        match self {
            ProxyHost::Local(host) => host.request(call).await,
            ProxyHost::Shared(host) => host.request(call).await,
        }
    }

    async fn start_shown(&self, session: &Session) {
        match self {
            ProxyHost::Local(host) => host.start_shown(session).await,
            ProxyHost::Shared(host) => host.start_shown(session).await,
        }
    }

    async fn start_all(&self, session: &Session) {
        match self {
            ProxyHost::Local(host) => host.start_all(session).await,
            ProxyHost::Shared(host) => host.start_all(session).await,
        }
    }

    async fn ensure_ready(&self, session: &Session, server_id: &str, wait: Duration) {
        match self {
            ProxyHost::Local(host) => host.ensure_ready(session, server_id, wait).await,
            ProxyHost::Shared(host) => host.ensure_ready(session, server_id, wait).await,
        }
    }

    fn session_opened(self: &Arc<Self>, session: &Arc<Session>) {
        match &**self {
            ProxyHost::Local(host) => host.session_opened(session),
            ProxyHost::Shared(host) => host.session_opened(session),
        }
    }

    fn session_closed(self: &Arc<Self>, session: &Arc<Session>) {
        match &**self {
            ProxyHost::Local(host) => host.session_closed(session),
            ProxyHost::Shared(host) => host.session_closed(session),
        }
    }

    fn text_written(&self, session: &Arc<Session>, path: &Path, text: &str) {
        match self {
            ProxyHost::Local(host) => host.text_written(session, path, text),
            ProxyHost::Shared(host) => host.text_written(session, path, text),
        }
    }

    async fn diagnostics(
        &self,
        session: &Session,
        documents: Vec<(String, PathBuf)>,
        wait: Duration,
    ) -> Result<Vec<PublishedDiagnostics>, GateError> {
        match self {
            ProxyHost::Local(host) => host.diagnostics(session, documents, wait).await,
            ProxyHost::Shared(host) => host.diagnostics(session, documents, wait).await,
        }
    }
}
