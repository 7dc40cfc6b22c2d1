//! One supervised language server: spawn, handshake, readiness, restart with
//! backoff, graceful shutdown, and forwarding requests with the documents they
//! name synced from disk first.
//!
//! This file holds the server's state (`Server`, `Live`, `Status`), the
//! caps on what a server can grow and the `lsp/servers` entry; the rest is
//! split by concern: [`supervisor`] (lifecycle), [`sync`] (requests and
//! document sync), [`diagnostics`], and [`handler`] (server→client).

mod diagnostics;
mod handler;
mod install;
mod supervisor;
mod sync;

use diagnostics::Published;
use handler::Handler;

use super::config::ServerConfig;
use super::connection::Connection;
use super::documents::{DocumentTable, DEFAULT_MAX_OPEN_DOCUMENTS};
use super::ratelimit::WarnBudget;
use super::registration::{raw_json, Registration};
use crate::gate::{
    AcpLspEntry, Dropped, EntryMeta, Progress, RegistrationEntry, ServerEntry, ServerState,
    Session, State, StateReason,
};
use crate::jsonrpc::Limits;
use crate::record::Recorder;
use parking_lot::{Mutex, MutexGuard};
use serde_json::json;
use serde_json::value::RawValue;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Longest wait for the server's `initialize` answer.
pub const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(60);

/// Longest wait for the `shutdown` answer before `exit` is sent anyway.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);

/// After a connection's first didOpen, how long a request with `waitUntilReady`
/// waits for the server to start reporting work (clangd's background index
/// begins within tens of milliseconds).
pub const FIRST_OPEN_SETTLE: Duration = Duration::from_millis(500);

/// How long clangd is given, after the handshake and its first open
/// document, to begin its background index before acp-lsp stops waiting for
/// one (a clangd that indexes nothing, or reports no progress, would
/// otherwise never be `running`). clangd 14 begins within milliseconds.
pub const INDEX_START_WAIT: Duration = Duration::from_secs(15);

/// Default of a server's `first_load_wait_ms`: how long its first load may
/// report work (work-done progress, rust-analyzer's quiescence, clangd's
/// first index) before it is taken as `running` anyway, with
/// `_meta["acp-lsp"].stateReason` saying so. Real servers leak progress
/// tokens (a cancelled flycheck, a crashed indexing thread); without a bound
/// an agent written to the RFD would wait for ever. Below the 90 s an agent
/// typically gives `waitUntilReady`.
pub const FIRST_LOAD_WAIT: Duration =
    Duration::from_millis(crate::lsp::config::DEFAULT_FIRST_LOAD_WAIT_MS);

/// How long `_acp-lsp/diagnostics` waits for a server to be `running`
/// before syncing the documents it asks about.
pub const DIAGNOSTICS_READY_WAIT: Duration = Duration::from_secs(20);
/// After the first publish that reflects a document's text, how long
/// `_acp-lsp/diagnostics` (push mode) waits for another publish of the same
/// document before answering: servers publish one version in stages
/// (typescript-language-server sends tsserver's syntactic diagnostics, then
/// the semantic ones, each as a full set), and the first stage alone would
/// say "no type errors". Re-armed by each publish of the document, bounded
/// by the caller's wait.
pub const PUSH_SETTLE: Duration = Duration::from_millis(300);
/// Least time `_acp-lsp/diagnostics` gives a pull (`textDocument/diagnostic`)
/// to be answered, whatever `waitMs` says: a pull is a request, not a wait.
pub const DIAGNOSTIC_PULL_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause before asking again a request the server cancelled because the
/// workspace changed under it (ContentModified): its re-analysis is under way.
pub const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// Retries of a read-only request the server cancelled with ContentModified
/// (rust-analyzer does so for every request in flight when the workspace
/// changes; the issue measured 5 of 6 first answers after a disk edit).
pub const CONTENT_MODIFIED_RETRIES: u32 = 5;
/// Most time spent retrying one request on ContentModified, and never more
/// than half the server's request deadline.
pub const CONTENT_MODIFIED_RETRY_BUDGET: Duration = Duration::from_secs(10);

/// After `$/cancelRequest`, how long the server's own answer is awaited.
pub const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// Pause before each restart, by number of recent crashes.
pub const RESTART_BACKOFF: [Duration; 5] = [
    Duration::from_millis(0),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
];

/// This many crashes within [`CRASH_WINDOW`] mark the server failed.
pub const MAX_CRASHES: usize = 5;

pub const CRASH_WINDOW: Duration = Duration::from_secs(180);

/// Documents whose latest diagnostics are kept; the oldest are evicted.
pub const MAX_DIAGNOSTIC_DOCUMENTS: usize = 10_000;

/// Bytes of diagnostics kept over all documents; the oldest are evicted.
pub const MAX_DIAGNOSTIC_BYTES: usize = 64 * 1024 * 1024;

/// Live work-done progress tokens tracked; further `begin`s are dropped
/// (rust-analyzer, the busiest server seen, has about 15 at start).
pub const MAX_PROGRESS_TOKENS: usize = 128;

/// Longest progress token kept (as JSON text); longer ones are dropped.
pub const MAX_PROGRESS_TOKEN_BYTES: usize = 1024;

/// Longest progress `title`/`message` kept, in characters; the rest is cut.
pub const MAX_PROGRESS_TEXT: usize = 512;

/// Live dynamic registrations kept; further ones are refused with an error
/// to the server (real servers hold a handful).
pub const MAX_REGISTRATIONS: usize = 256;

/// Bytes of registrations (ids, methods, `registerOptions`) kept in all.
pub const MAX_REGISTRATION_BYTES: usize = 1024 * 1024;

/// What the registry knows about a server before it starts.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    pub server_id: String,
    pub config: Arc<ServerConfig>,
    pub root: PathBuf,
    /// The program, resolved on PATH.
    pub program: PathBuf,
    pub limits: Limits,
    pub recorder: Option<Recorder>,
    /// The registry's root cancellation: once cancelled (shutdown has
    /// begun), the server is not started, nor restarted when it exits.
    pub closing: CancellationToken,
}

/// The lifecycle snapshot watched by waiters.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub state: ServerState,
    pub progress: Option<Progress>,
    pub last_error: Option<String>,
    /// This process has finished loading once (it was `indexing`, then
    /// `ready`, or it answered a request while `ready`): work it reports
    /// later (re-indexing after an edit, `cargo check`) does not take it out
    /// of `running`.
    pub loaded: bool,
    /// Set when `loaded` was not earned: the first load never reported its
    /// end (within the first-load wait, or past the progress table's cap).
    /// Cleared when the server does become `ready`, and with `loaded`.
    pub load_reason: Option<StateReason>,
}

impl Status {
    /// Whether a request waiting for the server (`waitUntilReady`) may go:
    /// `ready`, or taken as loaded without having said so.
    pub fn accepts_waiting(&self) -> bool {
        self.state == ServerState::Ready
            || (self.load_reason.is_some() && self.wire() == State::Running)
    }
}

impl Status {
    /// The RFD's `state`.
    pub fn wire(&self) -> State {
        if self.loaded && self.state == ServerState::Indexing {
            State::Running
        } else {
            self.state.wire()
        }
    }
}

/// Sizes of a server's peer-grown tables ([`Server::table_sizes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSizes {
    pub progress_tokens: usize,
    pub registrations: usize,
    pub registration_bytes: usize,
    pub diagnostic_documents: usize,
    pub diagnostic_bytes: usize,
}

/// What one registration costs against [`MAX_REGISTRATION_BYTES`].
fn registration_size(r: &Registration) -> usize {
    r.id.len() + r.method.len() + r.register_options.as_ref().map_or(0, |o| o.get().len())
}

#[derive(Default)]
struct Live {
    connection: Option<Arc<Connection>>,
    capabilities: Option<Box<RawValue>>,
    version: Option<String>,
    position_encoding: Option<String>,
    registrations: Vec<Registration>,
    /// Active work-done progress by token.
    progress: HashMap<String, Progress>,
    /// rust-analyzer's `experimental/serverStatus`: `Some(true)` once quiescent.
    quiescent: Option<bool>,
    /// clangd: this process's first background index has not ended yet
    /// (`indexing` until it does; see [`super::clangd`]).
    awaiting_index: bool,
    /// `ready_after_log`: this process has not yet logged the message that
    /// ends its first load (pyright's `Found N source files`); the matcher.
    awaiting_log: Option<Arc<globset::GlobSet>>,
    /// clangd: its background index reported a `begin` in this process.
    index_began: bool,
    /// clangd: the sources of the compilation database acp-lsp generated
    /// for this process, if it did (a created or deleted source reloads it).
    database_sources: Option<Arc<BTreeSet<PathBuf>>>,
    diagnostics: HashMap<String, Published>,
    diagnostics_order: VecDeque<String>,
    /// Bytes of the params held in `diagnostics`.
    diagnostics_bytes: usize,
    /// Bytes of `registrations` (see [`registration_size`]).
    registration_bytes: usize,
    /// What the caps dropped (the reader's counts are added from the connection).
    dropped: Dropped,
    /// Rate limit of the warnings about drops.
    drop_warnings: WarnBudget,
    /// Orders document sends and diagnostic publishes: a publish with a higher
    /// sequence number than a document's last send was made after the server saw it.
    sequence: u64,
    /// Document URI → sequence number of its last didOpen/didChange.
    sent: HashMap<String, u64>,
    pid: Option<u32>,
    restarts: u32,
    /// When the running process was spawned, until its readiness is logged.
    spawned_at: Option<Instant>,
    /// The running process's first-load wait ([`Server::arm_first_load_wait`]).
    first_load_timer: Option<tokio_util::task::AbortOnDropHandle<()>>,
    /// The command that installs the program, while it is not installed
    /// or being installed (`install.rs`).
    install_command: Option<String>,
    /// Someone asked for the server while it was being installed: it
    /// starts when the install is done.
    start_when_installed: bool,
}

/// One language server and its supervisor.
pub struct Server {
    spec: ServerSpec,
    status: watch::Sender<Status>,
    live: Mutex<Live>,
    /// Documents as this server sees them. Locked only for decisions and the
    /// sends that follow them, never across an await.
    documents: Mutex<DocumentTable>,
    /// Held by `sync_document` from its stat to its send: syncs that read
    /// the disk concurrently (a request's and the watcher's) could otherwise
    /// reach the table in the other order and send an older text last.
    disk_sync: tokio::sync::Mutex<()>,
    stop: CancellationToken,
    /// Ends the running process for a planned restart ([`Server::reload`]).
    reload: tokio::sync::Notify,
    started: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Bumped on every diagnostics publish, for waiters.
    published: watch::Sender<u64>,
    /// Bumped after every notification that changes what the server knows
    /// is queued to it (`didChange`, a `didChangeWatchedFiles` naming a file
    /// that is not an open document, an open with written text): a
    /// read-only answer that raced one is asked again (`Server::request`).
    changes_sent: AtomicU64,
    /// The sessions this server serves, by id: every read of a file for the
    /// server must land in one of their confinements (`crate::read`).
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

impl Server {
    pub fn new(mut spec: ServerSpec) -> Arc<Server> {
        // Caches and build output outside the user's tree (rust-analyzer's
        // `cargo.targetDir`); clangd's part happens at each spawn.
        if let Some(config) = super::caches::configure(&spec.config, &spec.program, &spec.root) {
            spec.config = Arc::new(config);
        }
        let (status, _) = watch::channel(Status {
            // Not started until the registry starts it (lazy roots).
            state: ServerState::Idle,
            progress: None,
            last_error: None,
            loaded: false,
            load_reason: None,
        });
        Arc::new(Server {
            spec,
            status,
            live: Mutex::new(Live::default()),
            documents: Mutex::new(DocumentTable::new(DEFAULT_MAX_OPEN_DOCUMENTS)),
            disk_sync: tokio::sync::Mutex::new(()),
            stop: CancellationToken::new(),
            reload: tokio::sync::Notify::new(),
            started: Mutex::new(None),
            published: watch::channel(0).0,
            changes_sent: AtomicU64::new(0),
            sessions: Mutex::new(HashMap::new()),
        })
    }

    /// The server now serves `session` (or its new roots, after a reload).
    pub fn attach_session(&self, session: &Arc<Session>) {
        self.sessions
            .lock()
            .insert(session.id().to_string(), Arc::clone(session));
    }

    /// The server no longer serves the session `id`.
    pub fn detach_session(&self, id: &str) {
        self.sessions.lock().remove(id);
    }

    /// Whether a real path may be read for this server, as of now: inside
    /// the roots (or read-only roots) of a session it serves.
    fn read_allowed(&self) -> impl Fn(&Path) -> bool + Send + 'static {
        let sessions: Vec<Arc<Session>> = self.sessions.lock().values().cloned().collect();
        move |real: &Path| sessions.iter().any(|s| s.confinement().contains(real))
    }

    pub fn id(&self) -> &str {
        &self.spec.server_id
    }

    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    fn live(&self) -> MutexGuard<'_, Live> {
        self.live.lock()
    }

    fn docs(&self) -> MutexGuard<'_, DocumentTable> {
        self.documents.lock()
    }

    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// The lifecycle state alone, without copying the rest of the status.
    pub fn state(&self) -> ServerState {
        self.status.borrow().state
    }

    fn set_status(&self, state: ServerState, last_error: Option<String>) {
        let progress = self.current_progress();
        // Only a change wakes the waiters: a server reporting progress many
        // times a second must not re-run every waiting request's check each time.
        self.status.send_if_modified(|s| {
            let before = s.clone();
            // Loaded once a round of loading has ended (indexing, then
            // ready): a `ready` seen before the server reported any work
            // proves nothing, since servers begin their progress just after
            // `initialized`.
            s.loaded = match state {
                ServerState::Ready => s.loaded || s.state == ServerState::Indexing,
                ServerState::Indexing => s.loaded,
                _ => false,
            };
            if !s.loaded || state == ServerState::Ready {
                s.load_reason = None;
            }
            s.state = state;
            s.progress = progress;
            if last_error.is_some() {
                s.last_error = last_error;
            }
            *s != before
        });
    }

    /// Arms the first-load wait of the process on `connection`: if its
    /// first load has not ended after the server's `first_load_wait_ms`, it
    /// is taken as loaded ([`StateReason::FirstLoadTimeout`]). Replaced by
    /// the next process's; ends with the server's `Live`.
    pub(super) fn arm_first_load_wait(self: &Arc<Self>, connection: &Arc<Connection>) {
        let wait = self.spec.config.first_load_wait();
        let server = Arc::downgrade(self);
        let connection = Arc::downgrade(connection);
        let timer = tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let Some(server) = server.upgrade() else {
                return;
            };
            let open_progress = {
                let live = server.live();
                let same = match (&live.connection, connection.upgrade()) {
                    (Some(live), Some(ours)) => Arc::ptr_eq(live, &ours),
                    _ => false,
                };
                if !same {
                    return;
                }
                live.progress.len()
            };
            server.assume_loaded(StateReason::FirstLoadTimeout {
                waited_ms: wait.as_millis() as u64,
                open_progress,
            });
        });
        self.live().first_load_timer = Some(tokio_util::task::AbortOnDropHandle::new(timer));
    }

    /// Takes the server as loaded although its first load never said it
    /// ended (`reason`): `running` from now on, the reason in its entry.
    /// Only while it is still loading for the first time.
    fn assume_loaded(&self, reason: StateReason) {
        let assumed = self.status.send_if_modified(|s| {
            let first_load = s.state == ServerState::Indexing && !s.loaded;
            if first_load {
                s.loaded = true;
                s.load_reason = Some(reason.clone());
            }
            first_load
        });
        if assumed {
            tracing::warn!(
                server = %self.spec.config.name,
                root = %self.spec.root.display(),
                ?reason,
                "first load never ended: taken as running (answers may be incomplete)"
            );
        }
    }

    /// A `ready` server answered a request: it has loaded, and work it
    /// reports from now on (re-checking after an edit) does not take it out
    /// of `running`. (A `ready` that no answer followed proves nothing:
    /// servers begin their progress just after `initialized`.)
    fn mark_loaded(&self) {
        self.status.send_if_modified(|s| {
            let newly = s.state == ServerState::Ready && !s.loaded;
            s.loaded |= newly;
            newly
        });
    }

    fn current_progress(&self) -> Option<Progress> {
        let live = self.live();
        live.progress.values().next().cloned()
    }

    /// The `lsp/servers` entry.
    pub fn entry(&self) -> ServerEntry {
        self.entry_with(true)
    }

    /// [`Server::entry`]; without `memory`, no `memoryBytes` (no `/proc` read).
    pub fn entry_with(&self, memory: bool) -> ServerEntry {
        let status = self.status();
        let live = self.live();
        let config = &self.spec.config;
        let capabilities = live
            .capabilities
            .clone()
            .unwrap_or_else(|| raw_json(&json!({})));
        let registrations = live
            .registrations
            .iter()
            .map(|r| RegistrationEntry {
                id: r.id.clone(),
                method: r.method.clone(),
                register_options: r.register_options.clone(),
            })
            .collect();
        ServerEntry {
            server_id: self.spec.server_id.clone().into(),
            name: config.name.clone(),
            workspace_path: self.spec.root.display().to_string(),
            language_id: config.language_ids.first().cloned().unwrap_or_default(),
            file_extensions: config.file_extensions.clone(),
            state: status.wire(),
            capabilities,
            meta: EntryMeta {
                acp_lsp: AcpLspEntry {
                    status: status.state,
                    progress: status.progress,
                    last_error: status.last_error,
                    language_ids: config.language_ids.clone(),
                    version: live.version.clone(),
                    position_encoding: live
                        .position_encoding
                        .clone()
                        .unwrap_or_else(|| "utf-16".into()),
                    execute_commands: config.execute_commands.clone(),
                    extension_methods: config.extension_methods.clone(),
                    registrations,
                    pid: live.connection.as_ref().and(live.pid),
                    restarts: live.restarts,
                    memory_bytes: live
                        .connection
                        .as_ref()
                        .and(live.pid)
                        .filter(|_| memory)
                        .and_then(super::process::resident_memory_of),
                    degraded_roots: Vec::new(),
                    dropped: self.dropped_with(&live).any(),
                    state_reason: status.load_reason.clone(),
                    companion: config.secondary,
                    install_command: live.install_command.clone(),
                },
            },
        }
    }

    /// What was dropped from this server's output so far.
    pub fn dropped(&self) -> Dropped {
        self.dropped_with(&self.live())
    }

    fn dropped_with(&self, live: &Live) -> Dropped {
        let mut dropped = live.dropped;
        if let Some(connection) = &live.connection {
            let stats = connection.read_stats();
            dropped.garbage_bytes += stats.garbage_bytes();
            dropped.invalid_messages += stats.invalid_messages();
            dropped.suppressed_warnings += stats.suppressed_warnings();
        }
        dropped
    }

    /// Warnings about the current connection's output that were logged (the
    /// rest were counted in [`Dropped::suppressed_warnings`]).
    pub fn output_warnings_logged(&self) -> u64 {
        let live = self.live();
        live.connection
            .as_ref()
            .map_or(0, |c| c.read_stats().logged_warnings())
    }

    /// Sizes of the tables the server can grow (for tests and the operator).
    pub fn table_sizes(&self) -> TableSizes {
        let live = self.live();
        TableSizes {
            progress_tokens: live.progress.len(),
            registrations: live.registrations.len(),
            registration_bytes: live.registration_bytes,
            diagnostic_documents: live.diagnostics.len(),
            diagnostic_bytes: live.diagnostics_bytes,
        }
    }

    pub fn registrations(&self) -> Vec<Registration> {
        self.live().registrations.clone()
    }

    /// Waits for the status to satisfy `f`.
    pub async fn wait_for_status(&self, f: impl Fn(&Status) -> bool) -> Status {
        let mut rx = self.status.subscribe();
        let reached = rx.wait_for(|s| f(s)).await.map(|s| s.clone());
        reached.unwrap_or_else(|_| self.status())
    }

    /// Waits for the state to satisfy `f` (for tests and `--wait` callers).
    pub async fn wait_for_state(&self, f: impl Fn(ServerState) -> bool) -> ServerState {
        let mut rx = self.status.subscribe();
        let reached = rx.wait_for(|s| f(s.state)).await.map(|s| s.state);
        reached.unwrap_or_else(|_| self.status().state)
    }
}
