//! Forwarding one request, and the document sync around it: the documents
//! a request names are read from disk (confined) and sent before it; file
//! changes, rescans and confirmed editor writes update open documents.

use super::diagnostics::content_modified;
use super::{
    Server, CANCEL_GRACE, CONTENT_MODIFIED_RETRIES, CONTENT_MODIFIED_RETRY_BUDGET,
    FIRST_OPEN_SETTLE, RETRY_PAUSE,
};
use crate::gate::{Forward, GateError, HostReply, NamedDocument, ServerState};
use crate::lsp::connection::{Connection, PendingRequest, Reply};
use crate::lsp::documents::{
    content_hash, DocumentNotification, DocumentState, Stamp, MAX_DOCUMENT_BYTES,
};
use crate::lsp::registration::raw_json;
use crate::lsp::watch::FileChange;
use crate::lsp::watchers::FileWatchers;
use crate::read::{read_confined, read_confined_blocking, ReadError};
use serde_json::json;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};
use tokio_util::sync::CancellationToken;

/// Which attempt of a request [`Server::request_once`] makes.
#[derive(Clone, Copy)]
struct Attempt {
    /// The method only reads: an answer given while a change reached the
    /// server is asked again.
    read_only: bool,
    /// The first, right after the gate's checks.
    first: bool,
}

impl Server {
    /// Forwards one request, syncing the documents it names first.
    pub async fn request(self: &Arc<Self>, call: Forward) -> Result<HostReply, GateError> {
        let Forward {
            method,
            params,
            documents: named,
            cancel,
            wait_until_ready,
            ..
        } = call;
        self.ensure_started();
        let retried = crate::gate::methods::retried_on_content_modified(&method);
        // The retries end well inside the gate's deadline, so what still
        // surfaces is the server's ContentModified, not a deadline error.
        let retry_until = Instant::now()
            + CONTENT_MODIFIED_RETRY_BUDGET.min(self.spec.config.request_timeout() / 2);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let outcome = self
                .request_once(
                    &method,
                    params.as_deref(),
                    &named,
                    &cancel,
                    wait_until_ready,
                    Attempt {
                        read_only: retried,
                        // A retry comes after a pause: the gate's metadata
                        // is older than the server's last change.
                        first: attempt == 1,
                    },
                )
                .await;
            let modified = match &outcome {
                Err(GateError::ContentModified) => true,
                Err(GateError::ServerError { lsp_error }) => content_modified(lsp_error),
                _ => false,
            };
            if !(retried && modified)
                || attempt > CONTENT_MODIFIED_RETRIES
                || Instant::now() + RETRY_PAUSE >= retry_until
                || cancel.is_cancelled()
            {
                if retried && modified {
                    tracing::debug!(
                        server = %self.spec.config.name,
                        %method,
                        attempts = attempt,
                        "content modified after every retry"
                    );
                }
                return outcome;
            }
            // The server is re-analysing; give it a moment, then ask again.
            tokio::select! {
                _ = cancel.cancelled() => return Err(GateError::Cancelled),
                _ = tokio::time::sleep(RETRY_PAUSE) => {}
            }
        }
    }

    /// One attempt of [`Server::request`]: readiness, document sync, send,
    /// answer. With `read_only`, an answer the server gave while any change
    /// reached it is ContentModified too.
    async fn request_once(
        self: &Arc<Self>,
        method: &str,
        params: Option<&RawValue>,
        named: &[NamedDocument],
        cancel: &CancellationToken,
        wait_until_ready: Option<Duration>,
        attempt: Attempt,
    ) -> Result<HostReply, GateError> {
        let Attempt { read_only, first } = attempt;
        // Waiting for readiness and syncing documents can take long; a
        // cancel meanwhile ends the request before it reaches the server.
        // (Dropping the preparation is safe: document decisions are made and
        // sent under a lock, never across an await.)
        let prepare = async {
            let mut accepting = std::pin::pin!(self.await_accepting(wait_until_ready));
            let (connection, waited) = match futures::poll!(accepting.as_mut()) {
                Poll::Ready(connection) => (connection?, false),
                Poll::Pending => (accepting.await?, true),
            };
            let first_open = self.docs().is_empty();
            let mut skipped = HashMap::new();
            for document in named {
                let uri = &document.uri;
                let Some(path) = document.file_path() else {
                    continue;
                };
                // The gate read the metadata after the request arrived; it
                // stands for a stat now only if nothing was waited for since
                // (a write during a wait for readiness must be seen).
                let known = document.metadata.as_ref().filter(|_| first && !waited);
                if let Some(reason) = self.sync_document(&connection, uri, &path, known).await {
                    skipped.insert(uri.clone(), reason);
                }
            }
            if let Some(wait) = wait_until_ready.filter(|_| first_open && !self.docs().is_empty()) {
                self.settle_after_first_open(wait).await;
            }
            let documents: Vec<DocumentState> = {
                let docs = self.docs();
                named
                    .iter()
                    .map(|document| DocumentState {
                        skipped: skipped.get(&document.uri).copied(),
                        ..docs.state(&document.uri)
                    })
                    .collect()
            };
            Ok::<_, GateError>((connection, documents))
        };
        let (connection, documents) = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(GateError::Cancelled),
            prepared = prepare => prepared?,
        };
        // Read before the request is queued, so that a change queued after
        // it is always seen (the count is bumped after each change is queued).
        let changes_before = self.changes_sent.load(Ordering::SeqCst);
        let mut pending = connection.request(method, params);
        let reply = tokio::select! {
            reply = &mut pending => reply,
            _ = cancel.cancelled() => cancelled(&mut pending).await,
        };
        match reply {
            // The answer is about text that no longer exists.
            Reply::Result(_) if self.changed_since(&documents) => Err(GateError::ContentModified),
            // A change to another file reached the server while it worked:
            // rust-analyzer then answers references from part of the
            // workspace (589 of 1,005) rather than ContentModified.
            Reply::Result(_)
                if read_only && self.changes_sent.load(Ordering::SeqCst) != changes_before =>
            {
                Err(GateError::ContentModified)
            }
            Reply::Result(result) => {
                self.mark_loaded();
                Ok(HostReply {
                    result,
                    meta: meta_documents(&documents),
                })
            }
            Reply::Error(lsp_error) => Err(GateError::ServerError { lsp_error }),
            Reply::TooLarge { declared } => Err(GateError::ResponseTooLarge { declared }),
            Reply::Closed if cancel.is_cancelled() => Err(GateError::Cancelled),
            Reply::Closed => Err(self.exited()),
        }
    }

    /// The server exited before answering; named by name and root.
    pub(super) fn exited(&self) -> GateError {
        GateError::ServerExited {
            server_id: self.spec.server_id.clone().into(),
            server: format!("{} at {}", self.spec.config.name, self.spec.root.display()),
        }
    }

    /// Whether any of `documents` is at another version (or closed) on the
    /// server now than when the request was sent.
    fn changed_since(&self, documents: &[DocumentState]) -> bool {
        let docs = self.docs();
        documents
            .iter()
            .filter(|d| d.version.is_some())
            .any(|d| docs.version(&d.uri) != d.version)
    }

    /// Disk changes below the server's root: open documents are synced again
    /// (or closed when gone), and changes that match the server's file
    /// watchers are sent as one `workspace/didChangeWatchedFiles`.
    pub async fn on_file_changes(&self, changes: &[(PathBuf, FileChange)]) {
        // clangd on a database acp-lsp generated: a source created or deleted
        // restarts it on a new one (the restart reopens every document).
        if self.database_outdated(changes) {
            self.reload();
            return;
        }
        let Some(connection) = self.live().connection.clone() else {
            // Not running: a (re)start reads everything from disk anyway.
            return;
        };
        let affected: Vec<(String, PathBuf)> = {
            let docs = self.docs();
            changes
                .iter()
                .flat_map(|(path, _)| docs.open_under(path))
                .collect()
        };
        for (uri, path) in affected {
            self.sync_document(&connection, &uri, &path, None).await;
        }
        let watchers = FileWatchers::new(&self.live().registrations, &self.spec.config.watch_globs);
        if watchers.is_empty() {
            return;
        }
        let events = watchers.events(&self.spec.root, changes);
        if !events.is_empty() {
            // Open documents were synced just above: an event that names
            // only them tells the server nothing it does not have.
            let news = {
                let docs = self.docs();
                events
                    .iter()
                    .any(|e| e["uri"].as_str().is_none_or(|uri| !docs.is_open(uri)))
            };
            let params = json!({ "changes": events });
            connection.notify("workspace/didChangeWatchedFiles", Some(&raw_json(&params)));
            if news {
                self.change_sent();
            }
        }
    }

    /// Counts a change notification just queued ([`Server::request_once`]).
    fn change_sent(&self) {
        self.changes_sent.fetch_add(1, Ordering::SeqCst);
    }

    /// Whether `changes` create a source a generated compilation database
    /// lacks, or delete one (or a directory holding one) it lists.
    fn database_outdated(&self, changes: &[(PathBuf, FileChange)]) -> bool {
        let Some(sources) = self.live().database_sources.clone() else {
            return false;
        };
        let root = &self.spec.root;
        changes.iter().any(|(path, change)| match change {
            // The walk skips hidden directories; so does this.
            FileChange::Created => {
                crate::lsp::clangd::is_source(path)
                    && !sources.contains(path)
                    && path.strip_prefix(root).is_ok_and(|rel| {
                        !rel.components()
                            .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
                    })
            }
            FileChange::Deleted => sources.iter().any(|s| s.starts_with(path)),
            FileChange::Changed => false,
        })
    }

    /// Events were lost: check every open document against the disk.
    pub async fn rescan(&self) {
        let sources = self.live().database_sources.clone();
        if let Some(sources) = sources {
            let root = self.spec.root.clone();
            let fresh = tokio::task::spawn_blocking(move || {
                crate::lsp::clangd::sources(&root, crate::lsp::clangd::MAX_COMPILE_COMMANDS)
            })
            .await
            .unwrap_or_default();
            if fresh.len() != sources.len() || fresh.iter().any(|s| !sources.contains(s)) {
                self.reload();
                return;
            }
        }
        let Some(connection) = self.live().connection.clone() else {
            return;
        };
        let open = self.docs().open_documents();
        for (uri, path) in open {
            self.sync_document(&connection, &uri, &path, None).await;
        }
    }

    /// clangd starts its background index only once a first document is open,
    /// and answers meanwhile from the open files alone (a definition in another
    /// file lands on the header's declaration). acp-lsp opens a source itself
    /// after the handshake (`start_background_index`); for a server it could
    /// not do that for, after a connection's first didOpen, a caller that
    /// waits for readiness gives the server [`FIRST_OPEN_SETTLE`] to report
    /// work, then waits for it to finish.
    async fn settle_after_first_open(&self, wait: Duration) {
        let mut rx = self.status.subscribe();
        let busy = tokio::time::timeout(
            FIRST_OPEN_SETTLE,
            rx.wait_for(|s| s.state != ServerState::Ready),
        )
        .await
        .is_ok();
        if busy {
            // Whatever state it ends in, the request goes on and reports it.
            // A load taken as ended (`load_reason`) ends the wait too.
            let _ = tokio::time::timeout(
                wait,
                rx.wait_for(|s| {
                    !matches!(s.state, ServerState::Indexing) || s.load_reason.is_some()
                }),
            )
            .await;
        }
    }

    /// Brings one document on the server in line with the disk. Returns why
    /// it was skipped, if it was.
    pub(super) async fn sync_document(
        &self,
        connection: &Arc<Connection>,
        uri: &str,
        path: &Path,
        known: Option<&std::fs::Metadata>,
    ) -> Option<&'static str> {
        // The common case, nothing changed, is one stat and sends nothing: no
        // lock and no trip through the blocking pool (a stat takes
        // microseconds). `known`, the metadata the gate's check read just
        // before, stands for it.
        let stat = match known {
            Some(metadata) => Ok(metadata.clone()),
            None => std::fs::metadata(path),
        };
        if let Ok(metadata) = stat {
            let stamp = Stamp {
                size: metadata.len(),
                modified: metadata.modified().ok(),
            };
            if metadata.is_file()
                && metadata.len() <= MAX_DOCUMENT_BYTES
                && !self.docs().needs_read(uri, stamp, SystemTime::now())
            {
                return None;
            }
        }
        // Anything else may send: one disk sync at a time per server, so two
        // reads of different revisions cannot reach the server out of order.
        let _serialized = self.disk_sync.lock().await;
        // Confined at the moment of the read: a directory swapped for a
        // symlink since the request was checked (or since the document was
        // opened) makes the read land outside, and it is refused.
        let read = read_confined(path.to_path_buf(), self.read_allowed(), MAX_DOCUMENT_BYTES).await;
        let read = match read {
            Ok(read) => read,
            Err(error) => {
                if matches!(error, ReadError::OutsideRoots) {
                    tracing::warn!(server = %self.spec.config.name, path = %path.display(), "not read: the file now resolves outside the session roots");
                }
                // A document that can no longer be read (gone, no longer a
                // file, grown past the limit, now outside the roots) is
                // closed rather than left at text the disk no longer has.
                self.send_all(connection, self.docs().deleted(uri));
                return Some(error.reason());
            }
        };
        let stamp = read.stamp;
        if !self.docs().needs_read(uri, stamp, SystemTime::now()) {
            return None;
        }
        let text = read.text;
        let language_id = self.spec.config.language_id_for(path).to_string();
        // A server may hold an older disk text of a file it has not been
        // given (pyright reads every import), and on didOpen it takes the new
        // text without re-checking the files derived from the old one; disk
        // events for an open file it ignores. The watcher's event can arrive
        // after this didOpen, so the server is told first that the file
        // changed (when it watches such files): at worst a redundant event.
        let before_open = if self.docs().is_open(uri) {
            Vec::new()
        } else {
            FileWatchers::new(&self.live().registrations, &self.spec.config.watch_globs).events(
                &self.spec.root,
                &[(path.to_path_buf(), FileChange::Changed)],
            )
        };
        let mut docs = self.docs();
        let notes = docs.sync(uri, path.to_path_buf(), &language_id, text, Some(stamp));
        let opens = notes
            .iter()
            .any(|n| matches!(n, DocumentNotification::Open { .. }));
        if opens && !before_open.is_empty() {
            let params = json!({ "changes": before_open });
            connection.notify("workspace/didChangeWatchedFiles", Some(&raw_json(&params)));
            self.change_sent();
        }
        self.send_all(connection, notes);
        None
    }

    /// Text the editor confirmed writing: update open documents at once.
    pub fn text_written(&self, path: &Path, text: &str) {
        let Ok(uri) = url::Url::from_file_path(path) else {
            return;
        };
        let Some(connection) = self.live().connection.clone() else {
            return;
        };
        let config = &self.spec.config;
        let handled = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|ext| config.handles_extension(ext));
        let mut docs = self.docs();
        let notes = if docs.is_open(uri.as_str()) {
            docs.written(uri.as_str(), text.to_string())
        } else if handled && path.starts_with(&self.spec.root) {
            // Not open yet: the next request would open it from the disk,
            // which may not have the write. Open it with the written text,
            // noting the disk as it is now. A small synchronous read (a
            // regular file under the cap, confined, never a FIFO): the
            // agent's next request must see the write (LspHost::text_written).
            let Ok(disk) = read_confined_blocking(path, &self.read_allowed(), MAX_DOCUMENT_BYTES)
            else {
                return;
            };
            let stamp = disk.stamp;
            docs.written_unopened(
                uri.as_str(),
                path.to_path_buf(),
                config.language_id_for(path),
                text.to_string(),
                stamp,
                content_hash(&disk.text),
            )
        } else {
            Vec::new()
        };
        // Opened with the written text, which the disk may not have yet.
        let opened = notes
            .iter()
            .any(|n| matches!(n, DocumentNotification::Open { .. }));
        self.send_all(&connection, notes);
        if opened {
            self.change_sent();
        }
    }

    /// Sends document notifications in order. Called with the document lock
    /// held by the caller when order matters (it does for every caller).
    fn send_all(&self, connection: &Arc<Connection>, notes: Vec<DocumentNotification>) {
        for note in notes {
            // Only a change changes what the server knows: an open from disk
            // gives it the text it could read anyway (`text_written` counts
            // its own opens), and a close (an eviction past the open-document
            // cap, say) returns it to the disk's text it was opened with.
            let changes = matches!(note, DocumentNotification::Change { .. });
            let (method, params) = match note {
                DocumentNotification::Open {
                    uri,
                    language_id,
                    version,
                    text,
                } => (
                    "textDocument/didOpen",
                    json!({"textDocument": {"uri": uri, "languageId": language_id, "version": version, "text": text}}),
                ),
                DocumentNotification::Change { uri, version, text } => (
                    "textDocument/didChange",
                    json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}),
                ),
                DocumentNotification::Close { uri } => (
                    "textDocument/didClose",
                    json!({"textDocument": {"uri": uri}}),
                ),
            };
            if let Some(uri) = params["textDocument"]["uri"].as_str() {
                let mut live = self.live();
                live.sequence += 1;
                let sequence = live.sequence;
                live.sent.insert(uri.to_string(), sequence);
            }
            connection.notify(method, Some(&raw_json(&params)));
            if changes {
                self.change_sent();
            }
        }
    }
}

async fn cancelled(pending: &mut PendingRequest) -> Reply {
    pending.cancel();
    match tokio::time::timeout(CANCEL_GRACE, &mut *pending).await {
        Ok(reply) => reply,
        Err(_) => Reply::Closed,
    }
}

fn meta_documents(documents: &[DocumentState]) -> Option<Box<RawValue>> {
    if documents.is_empty() {
        return None;
    }
    // A struct, not `json!`: its bytes must not depend on whether a
    // dependency turned on serde_json's `preserve_order`.
    #[derive(serde::Serialize)]
    struct Meta<'a> {
        documents: &'a [DocumentState],
    }
    // Written into a buffer sized for a document or two, not grown from 128 bytes.
    let mut out = Vec::with_capacity(256 * documents.len());
    serde_json::to_writer(&mut out, &Meta { documents }).ok()?;
    RawValue::from_string(String::from_utf8(out).ok()?).ok()
}
