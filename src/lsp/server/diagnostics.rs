//! The latest published diagnostics per document, and waiting for ones that
//! reflect the text the server has.

use super::{Live, Server, DIAGNOSTICS_READY_WAIT};
use crate::gate::{GateError, State};
use crate::jsonrpc::object::RawObject;
use crate::lsp::documents::DocumentTable;
use serde_json::json;
use serde_json::value::RawValue;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The latest `textDocument/publishDiagnostics` for one document.
#[derive(Debug, Clone)]
pub(super) struct Published {
    /// The notification's params, verbatim.
    pub(super) params: Box<RawValue>,
    pub(super) version: Option<i32>,
    pub(super) sequence: u64,
}

impl Server {
    /// The latest diagnostics of every document, each marked `fresh` when the
    /// server published them after it last got the document's text.
    pub fn diagnostics(&self) -> Vec<Box<RawValue>> {
        let docs = self.docs();
        let live = self.live();
        live.diagnostics
            .iter()
            .map(|(uri, published)| self.render(published, is_fresh(&docs, &live, uri)))
            .collect()
    }

    /// Diagnostics of one document that reflect its current text: opens or
    /// syncs it from disk, then waits up to `wait` for a publish made after
    /// that. `None` when the server published nothing for it.
    pub async fn fresh_diagnostics(
        self: &Arc<Self>,
        uri: &str,
        path: &Path,
        wait: Duration,
    ) -> Result<Option<Box<RawValue>>, GateError> {
        self.ensure_started();
        let connection = self
            .await_status(DIAGNOSTICS_READY_WAIT.max(wait), |s| {
                s.wire() == State::Running
            })
            .await?;
        self.sync_document(&connection, uri, path).await;
        let mut published = self.published.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            {
                let docs = self.docs();
                let live = self.live();
                let fresh = is_fresh(&docs, &live, uri);
                if fresh || tokio::time::Instant::now() >= deadline {
                    return Ok(live.diagnostics.get(uri).map(|p| self.render(p, fresh)));
                }
            }
            if tokio::time::timeout_at(deadline, published.changed())
                .await
                .is_err()
            {
                // Deadline: the loop answers with what there is, marked stale.
                continue;
            }
        }
    }

    /// A publish's params with `serverId` and `fresh` added.
    fn render(&self, published: &Published, fresh: bool) -> Box<RawValue> {
        let Ok(mut object) = RawObject::parse(&published.params) else {
            return published.params.clone();
        };
        object.set("serverId", json!(self.spec.server_id).to_string());
        object.set("fresh", fresh.to_string());
        RawValue::from_string(object.to_json()).unwrap_or_else(|_| published.params.clone())
    }
}

/// Whether the latest publish for `uri` reflects the text the server last got:
/// it names that version, or (servers that send no version) came after it.
/// Locks: documents, then live state (the order every caller uses).
fn is_fresh(docs: &DocumentTable, live: &Live, uri: &str) -> bool {
    let Some(published) = live.diagnostics.get(uri) else {
        return false;
    };
    match (published.version, docs.state(uri).version) {
        (Some(published), Some(current)) => published == current,
        _ => live
            .sent
            .get(uri)
            .is_none_or(|sent| published.sequence > *sent),
    }
}
