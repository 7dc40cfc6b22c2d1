//! The registry's side of the SCIP indexes (`crate::scip`): a session's
//! indexes found with the configuration of each of its roots, and the live
//! servers an index works beside (the one whose answers it merges, or that
//! answers what it declines).

use super::Registry;
use crate::gate::{GateError, HostCall, HostReply, LspHost, ServerState, Session};
use crate::scip::{Live, LiveServer};
use futures::future::BoxFuture;
use std::path::Path;
use std::sync::Arc;

impl Registry {
    /// Starts finding and loading `session`'s indexes; a trusted project
    /// file's `[indexes]` counts for its root.
    pub(super) fn open_indexes(&self, session: &Arc<Session>) {
        let config = self.config.clone();
        self.indexes.session_opened(session, move |root| {
            let mut config = config.clone();
            if let Err(e) = config.load_project(root) {
                tracing::warn!(error = %e, "ignoring the project's config file for its indexes");
            }
            Some(config.indexes)
        });
    }
}

impl Live for Registry {
    fn live_server(
        &self,
        session: &Session,
        root: &Path,
        extension: Option<&str>,
    ) -> Option<LiveServer> {
        let attached = self.attached_now(session.id())?;
        // The servers of the session for files under `root`: those whose
        // root holds it (a session root's server covering a nested project)
        // or lies inside it; the deepest first, then ready ones.
        let mut candidates: Vec<_> = attached
            .ids
            .iter()
            .filter_map(|id| self.server(id))
            .filter(|s| {
                let spec = s.spec();
                (root.starts_with(&spec.root) || spec.root.starts_with(root))
                    && extension.is_none_or(|e| spec.config.handles_extension(e))
            })
            .collect();
        candidates.sort_by_key(|s| {
            let depth = s.spec().root.components().count();
            (std::cmp::Reverse(depth), s.state() != ServerState::Ready)
        });
        let server = candidates.into_iter().next()?;
        Some(LiveServer {
            server_id: server.id().into(),
            name: server.spec().config.name.clone(),
            ready: server.state() == ServerState::Ready,
        })
    }

    fn ask(&self, call: HostCall) -> BoxFuture<'_, Result<HostReply, GateError>> {
        Box::pin(LspHost::request(self, call))
    }
}
