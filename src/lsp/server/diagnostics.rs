//! The latest published diagnostics per document, and waiting for ones that
//! reflect the text the server has: typed entries ([`PublishedDiagnostics`]),
//! the server's payload raw, rendered only at the wire (by the gate) or by
//! the MCP tools.

use super::{
    Live, Server, DIAGNOSTICS_READY_WAIT, DIAGNOSTIC_PULL_TIMEOUT, PUSH_SETTLE, RETRY_PAUSE,
};
use crate::gate::{DiagnosticsMode, Fetched, GateError, PublishedDiagnostics, State};
use crate::jsonrpc::object::RawObject;
use crate::lsp::connection::{Connection, Reply};
use crate::lsp::documents::DocumentTable;
use crate::lsp::registration::raw_json;
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
    pub fn diagnostics(&self) -> Vec<PublishedDiagnostics> {
        let docs = self.docs();
        let live = self.live();
        live.diagnostics
            .iter()
            .map(|(uri, published)| {
                self.published_entry(
                    uri,
                    published.params.clone(),
                    is_fresh(&docs, &live, uri),
                    None,
                )
            })
            .collect()
    }

    /// Diagnostics of one document that reflect its current text: opens or
    /// syncs it from disk, then asks for them (pull, `textDocument/diagnostic`,
    /// when the server offers it) or waits up to `wait` for a publish made
    /// after that (push). Always one entry: a server that published nothing
    /// in time gives an empty, stale entry marked `timedOut`.
    pub async fn fresh_diagnostics(
        self: &Arc<Self>,
        uri: &str,
        path: &Path,
        wait: Duration,
    ) -> Result<PublishedDiagnostics, GateError> {
        self.ensure_started();
        let connection = self
            .await_status(DIAGNOSTICS_READY_WAIT.max(wait), |s| {
                s.wire() == State::Running
            })
            .await?;
        self.sync_document(&connection, uri, path, None).await;
        if self.pulls_diagnostics() {
            return self.pull_diagnostics(&connection, uri, wait).await;
        }
        let mut published = self.published.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        // Once fresh: until when more stages of the same version may come,
        // and the publish that set it.
        let mut settle: Option<(tokio::time::Instant, u64)> = None;
        loop {
            {
                let docs = self.docs();
                let live = self.live();
                let fresh = is_fresh(&docs, &live, uri);
                let now = tokio::time::Instant::now();
                let sequence = live.diagnostics.get(uri).map_or(0, |p| p.sequence);
                if fresh {
                    match settle {
                        Some((_, seen)) if seen == sequence => {}
                        // A first or a further stage: wait a little more.
                        _ => settle = Some(((now + PUSH_SETTLE).min(deadline), sequence)),
                    }
                }
                let settled = settle.is_some_and(|(until, _)| now >= until);
                if (fresh && settled) || now >= deadline {
                    let fetched = Fetched {
                        mode: DiagnosticsMode::Push,
                        timed_out: !fresh,
                    };
                    return Ok(match live.diagnostics.get(uri) {
                        Some(p) => {
                            self.published_entry(uri, p.params.clone(), fresh, Some(fetched))
                        }
                        None => self.empty_entry(uri, fresh, fetched),
                    });
                }
            }
            let until = settle.map_or(deadline, |(until, _)| until);
            // A timeout is the deadline or the end of the settle window: the
            // loop answers with what there is.
            let _ = tokio::time::timeout_at(until, published.changed()).await;
        }
    }

    /// Whether the server answers `textDocument/diagnostic` (statically, or
    /// registered). rust-analyzer, offered pull, pushes only what `cargo
    /// check` finds and gives its own diagnostics only on request, so waiting
    /// for a push from it would run out the clock and report nothing.
    fn pulls_diagnostics(&self) -> bool {
        let live = self.live();
        let advertised = live.capabilities.as_ref().is_some_and(|caps| {
            RawObject::parse(caps).is_ok_and(|c| {
                c.has_non_null("diagnosticProvider")
                    && c.get("diagnosticProvider").map(str::trim) != Some("false")
            })
        });
        advertised
            || live
                .registrations
                .iter()
                .any(|r| r.method == "textDocument/diagnostic")
    }

    /// One `textDocument/diagnostic` for `uri`, asked again while the server
    /// cancels it because the workspace moved under it (ContentModified,
    /// ServerCancelled), within `wait` but at least [`DIAGNOSTIC_PULL_TIMEOUT`].
    async fn pull_diagnostics(
        &self,
        connection: &Arc<Connection>,
        uri: &str,
        wait: Duration,
    ) -> Result<PublishedDiagnostics, GateError> {
        let deadline = tokio::time::Instant::now() + DIAGNOSTIC_PULL_TIMEOUT.max(wait);
        let params = raw_json(&json!({ "textDocument": { "uri": uri } }));
        let timed_out = Fetched {
            mode: DiagnosticsMode::Pull,
            timed_out: true,
        };
        loop {
            let version = self.docs().state(uri).version;
            let mut pending = connection.request("textDocument/diagnostic", Some(&params));
            let reply = match tokio::time::timeout_at(deadline, &mut pending).await {
                Ok(reply) => reply,
                Err(_) => {
                    pending.cancel();
                    return Ok(self.empty_entry(uri, false, timed_out));
                }
            };
            match reply {
                // The text moved on while the server computed: ask again.
                Reply::Result(_) if self.docs().state(uri).version != version => {}
                Reply::Result(result) => {
                    #[derive(serde::Deserialize)]
                    struct Full<'a> {
                        #[serde(borrow)]
                        items: Option<&'a RawValue>,
                    }
                    let items = serde_json::from_str::<Full>(result.get())
                        .ok()
                        .and_then(|f| f.items)
                        .map_or("[]", RawValue::get);
                    self.mark_loaded();
                    let fetched = Fetched {
                        mode: DiagnosticsMode::Pull,
                        timed_out: false,
                    };
                    let params = built_params(uri, version, items);
                    return Ok(self.published_entry(uri, params, true, Some(fetched)));
                }
                Reply::Error(error) if retryable_error(&error) => {}
                Reply::Error(lsp_error) => return Err(GateError::ServerError { lsp_error }),
                Reply::TooLarge { declared } => {
                    return Err(GateError::ResponseTooLarge { declared })
                }
                Reply::Closed => return Err(self.exited()),
            }
            if tokio::time::Instant::now() + RETRY_PAUSE >= deadline {
                return Ok(self.empty_entry(uri, false, timed_out));
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// An entry for a document the server said nothing about.
    fn empty_entry(&self, uri: &str, fresh: bool, fetched: Fetched) -> PublishedDiagnostics {
        self.published_entry(uri, built_params(uri, None, "[]"), fresh, Some(fetched))
    }

    fn published_entry(
        &self,
        uri: &str,
        params: Box<RawValue>,
        fresh: bool,
        fetched: Option<Fetched>,
    ) -> PublishedDiagnostics {
        PublishedDiagnostics {
            server_id: self.spec.server_id.as_str().into(),
            uri: uri.to_string(),
            params,
            fresh,
            fetched,
        }
    }
}

/// `{uri, version?, diagnostics}`: publish params for what a pull answered,
/// or for nothing published.
fn built_params(uri: &str, version: Option<i32>, diagnostics: &str) -> Box<RawValue> {
    let mut text = format!("{{\"uri\":{}", json!(uri));
    if let Some(version) = version {
        text.push_str(&format!(",\"version\":{version}"));
    }
    text.push_str(&format!(",\"diagnostics\":{diagnostics}}}"));
    RawValue::from_string(text).expect("BUG: an entry built from JSON parts")
}

/// Whether a server's error says the request was dropped because the
/// workspace changed under it, so the same request asked again will be
/// answered: ContentModified (-32801) and ServerCancelled (-32802).
pub(crate) fn retryable_error(error: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    serde_json::from_str::<Code>(error.get()).is_ok_and(|e| {
        e.code == crate::gate::error::CONTENT_MODIFIED
            || e.code == crate::gate::error::SERVER_CANCELLED
    })
}

/// Whether a server's error is ContentModified (-32801).
pub(crate) fn content_modified(error: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    serde_json::from_str::<Code>(error.get())
        .is_ok_and(|e| e.code == crate::gate::error::CONTENT_MODIFIED)
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
