//! One supervised language server: spawn, handshake, readiness, restart with
//! backoff, graceful shutdown, and forwarding requests with the documents they
//! name synced from disk first.

use super::config::ServerConfig;
use super::connection::{Connection, PendingRequest, Reply, ServerMessages};
use super::documents::{
    content_hash, DocumentNotification, DocumentState, DocumentTable, Stamp,
    DEFAULT_MAX_OPEN_DOCUMENTS, MAX_DOCUMENT_BYTES,
};
use super::handshake;
use super::process::{ServerProcess, SpawnSpec, EXIT_GRACE};
use super::ratelimit::{Verdict, WarnBudget};
use super::registration::{raw_json, Registration};
use super::watch::FileChange;
use super::watchers::FileWatchers;
use crate::gate::{
    AcpLspEntry, Dropped, EntryMeta, GateError, HostCall, HostReply, NotRunning, Progress,
    RegistrationEntry, ServerEntry, ServerState, Session, State,
};
use crate::jsonrpc::object::RawObject;
use crate::jsonrpc::{ErrorObject, Limits};
use crate::read::{read_confined, read_confined_blocking, ReadError};
use crate::record::{Direction, Recorder};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};
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
/// How long `_acp-lsp/diagnostics` waits for a server to be `running`
/// before syncing the documents it asks about.
pub const DIAGNOSTICS_READY_WAIT: Duration = Duration::from_secs(20);
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

/// The latest `textDocument/publishDiagnostics` for one document.
#[derive(Debug, Clone)]
struct Published {
    /// The notification's params, verbatim.
    params: Box<RawValue>,
    version: Option<i32>,
    sequence: u64,
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

/// Counts one drop and logs it within the rate limit.
fn note_drop(live: &mut Live, server: &str, what: &str) {
    match live.drop_warnings.check() {
        Verdict::Log { suppressed_before } => tracing::warn!(
            server,
            progress_tokens = live.dropped.progress_tokens,
            registrations = live.dropped.registrations,
            diagnostics = live.dropped.diagnostics,
            suppressed = suppressed_before,
            "{what} (counted in lsp/servers _meta[\"acp-lsp\"].dropped)"
        ),
        Verdict::Suppress => live.dropped.suppressed_warnings += 1,
    }
}

/// `text` cut to [`MAX_PROGRESS_TEXT`] characters.
fn cut_progress_text(mut text: String) -> String {
    if let Some((at, _)) = text.char_indices().nth(MAX_PROGRESS_TEXT) {
        text.truncate(at);
    }
    text
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
    started: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Bumped on every diagnostics publish, for waiters.
    published: watch::Sender<u64>,
    /// The sessions this server serves, by id: every read of a file for the
    /// server must land in one of their confinements (`crate::read`).
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

impl Server {
    pub fn new(spec: ServerSpec) -> Arc<Server> {
        let (status, _) = watch::channel(Status {
            state: ServerState::Stopped,
            progress: None,
            last_error: None,
            loaded: false,
        });
        Arc::new(Server {
            spec,
            status,
            live: Mutex::new(Live::default()),
            documents: Mutex::new(DocumentTable::new(DEFAULT_MAX_OPEN_DOCUMENTS)),
            disk_sync: tokio::sync::Mutex::new(()),
            stop: CancellationToken::new(),
            started: Mutex::new(None),
            published: watch::channel(0).0,
            sessions: Mutex::new(HashMap::new()),
        })
    }

    /// The server now serves `session` (or its new roots, after a reload).
    pub fn attach_session(&self, session: &Arc<Session>) {
        self.sessions
            .lock()
            .expect("BUG: server sessions lock poisoned")
            .insert(session.id().to_string(), Arc::clone(session));
    }

    /// The server no longer serves the session `id`.
    pub fn detach_session(&self, id: &str) {
        self.sessions
            .lock()
            .expect("BUG: server sessions lock poisoned")
            .remove(id);
    }

    /// Whether a real path may be read for this server, as of now: inside
    /// the roots (or read-only roots) of a session it serves.
    fn read_allowed(&self) -> impl Fn(&Path) -> bool + Send + 'static {
        let sessions: Vec<Arc<Session>> = self
            .sessions
            .lock()
            .expect("BUG: server sessions lock poisoned")
            .values()
            .cloned()
            .collect();
        move |real: &Path| sessions.iter().any(|s| s.confinement().contains(real))
    }

    pub fn id(&self) -> &str {
        &self.spec.server_id
    }

    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().expect("BUG: server state lock poisoned")
    }

    fn docs(&self) -> std::sync::MutexGuard<'_, DocumentTable> {
        self.documents
            .lock()
            .expect("BUG: document table lock poisoned")
    }

    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    fn set_status(&self, state: ServerState, last_error: Option<String>) {
        let progress = self.current_progress();
        self.status.send_modify(|s| {
            // Loaded once a round of loading has ended (indexing, then
            // ready): a `ready` seen before the server reported any work
            // proves nothing, since servers begin their progress just after
            // `initialized`.
            s.loaded = match state {
                ServerState::Ready => s.loaded || s.state == ServerState::Indexing,
                ServerState::Indexing => s.loaded,
                _ => false,
            };
            s.state = state;
            s.progress = progress;
            if last_error.is_some() {
                s.last_error = last_error;
            }
        });
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

    /// Starts the supervisor once; later calls do nothing.
    pub fn ensure_started(self: &Arc<Self>) {
        let mut started = self.started.lock().expect("BUG: start lock poisoned");
        if started.is_some() || self.stop.is_cancelled() {
            return;
        }
        self.set_status(ServerState::Starting, None);
        let server = Arc::clone(self);
        // Every line of this server's story carries its name and root.
        let span = tracing::info_span!(
            "server",
            server = %self.spec.config.name,
            root = %self.spec.root.display()
        );
        *started = Some(tokio::spawn(tracing::Instrument::instrument(
            async move { server.supervise().await },
            span,
        )));
    }

    /// Stops the server gracefully and waits for its supervisor to finish.
    pub async fn stop(&self) {
        self.stop.cancel();
        let handle = self
            .started
            .lock()
            .expect("BUG: start lock poisoned")
            .take();
        if let Some(handle) = handle {
            let _ = handle.await;
            tracing::info!(
                server = %self.spec.config.name,
                root = %self.spec.root.display(),
                "server stopped"
            );
        }
        self.set_status(ServerState::Stopped, None);
    }

    async fn supervise(self: Arc<Self>) {
        let mut crashes: VecDeque<Instant> = VecDeque::new();
        loop {
            let error = match self.run_once().await {
                None => return,
                Some(error) => error,
            };
            let now = Instant::now();
            crashes.push_back(now);
            while crashes
                .front()
                .is_some_and(|t| now.duration_since(*t) > CRASH_WINDOW)
            {
                crashes.pop_front();
            }
            tracing::warn!(server = %self.spec.config.name, root = %self.spec.root.display(), %error, "language server stopped unexpectedly");
            if crashes.len() >= MAX_CRASHES {
                tracing::error!(
                    server = %self.spec.config.name,
                    crashes = crashes.len(),
                    within_s = CRASH_WINDOW.as_secs(),
                    %error,
                    "server failed; not restarting"
                );
                self.set_status(ServerState::Failed, Some(error));
                return;
            }
            let why = error.lines().next().unwrap_or_default().to_string();
            self.set_status(ServerState::Restarting, Some(error));
            let backoff = RESTART_BACKOFF[(crashes.len() - 1).min(RESTART_BACKOFF.len() - 1)];
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = self.stop.cancelled() => return,
            }
            let restarts = {
                let mut live = self.live();
                live.restarts += 1;
                live.restarts
            };
            tracing::info!(
                server = %self.spec.config.name,
                restarts,
                backoff_ms = backoff.as_millis() as u64,
                %why,
                "server restarted"
            );
        }
    }

    /// Runs the server once. `None` when it was stopped on purpose, else why it ended.
    async fn run_once(self: &Arc<Self>) -> Option<String> {
        let config = &self.spec.config;
        let spawn = SpawnSpec {
            command: self.spec.program.clone(),
            args: config.args.clone(),
            cwd: self.spec.root.clone(),
            env_extra: config.env.clone(),
            env_passthrough: config.env_passthrough.clone(),
        };
        let (mut process, io) = match ServerProcess::spawn(&config.name, &spawn) {
            Ok(spawned) => spawned,
            Err(e) => return Some(e.to_string()),
        };
        tracing::info!(
            server = %config.name,
            root = %self.spec.root.display(),
            pid = process.pid().unwrap_or_default(),
            command = %self.spec.program.display(),
            "server spawned"
        );
        if let Some(recorder) = &self.spec.recorder {
            recorder.event(
                &Direction::ProxyToServer(self.spec.server_id.clone()),
                "spawn",
                &[
                    ("name", &config.name),
                    ("root", &self.spec.root.to_string_lossy()),
                ],
            );
        }
        let handler: Arc<dyn ServerMessages> = Arc::new(Handler {
            server: Arc::downgrade(self),
        });
        let connection = Connection::start(
            &self.spec.server_id,
            io.stdout,
            io.stdin,
            self.spec.limits,
            handler,
            self.spec.recorder.clone(),
        );
        {
            let mut live = self.live();
            live.pid = process.pid();
            live.spawned_at = Some(Instant::now());
            live.progress.clear();
            live.quiescent = None;
            live.registrations.clear();
            live.registration_bytes = 0;
        }

        let init_params = handshake::initialize_params(config, &self.spec.root);
        let initialize = connection.request("initialize", Some(&init_params));
        let outcome = tokio::select! {
            reply = tokio::time::timeout(INITIALIZE_TIMEOUT, initialize) => reply,
            _ = self.stop.cancelled() => {
                self.shutdown(&connection, &mut process, false).await;
                return None;
            }
        };
        let failure = match outcome {
            Ok(Reply::Result(result)) => match handshake::read_initialize_result(&result) {
                Ok(info) => {
                    let mut live = self.live();
                    live.capabilities = Some(info.capabilities);
                    live.version = info.version;
                    live.position_encoding = info.position_encoding;
                    None
                }
                Err(e) => Some(format!("invalid initialize result: {e}")),
            },
            Ok(Reply::Error(e)) => Some(format!("initialize failed: {}", e.get())),
            Ok(Reply::TooLarge { .. }) => Some("initialize result over the frame limit".into()),
            Ok(Reply::Closed) => Some("exited during initialize".into()),
            Err(_) => Some(format!(
                "no initialize answer within {} s",
                INITIALIZE_TIMEOUT.as_secs()
            )),
        };
        if let Some(failure) = failure {
            drop(connection);
            process.kill_group_now();
            // A server that exited by itself keeps its own status; one that
            // hung reports the kill.
            let status = process
                .wait()
                .await
                .map_or_else(|e| e.to_string(), |s| s.to_string());
            self.record_exit(&status);
            return Some(with_stderr(
                format!("{failure} ({status})"),
                &process.stderr_tail(),
            ));
        }
        connection.notify("initialized", Some(&raw_json(&json!({}))));
        if !is_empty_settings(&config.settings) {
            let params = json!({ "settings": config.settings });
            connection.notify("workspace/didChangeConfiguration", Some(&raw_json(&params)));
        }
        self.live().connection = Some(Arc::clone(&connection));
        self.reopen_documents(&connection).await;
        self.update_readiness();

        let ended = tokio::select! {
            status = process.wait() => Some(status),
            _ = self.stop.cancelled() => None,
        };
        self.live().connection = None;
        match ended {
            Some(status) => {
                let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
                self.record_exit(&status);
                Some(with_stderr(
                    format!("exited ({status})"),
                    &process.stderr_tail(),
                ))
            }
            None => {
                self.shutdown(&connection, &mut process, true).await;
                None
            }
        }
    }

    /// shutdown → exit → bounded wait → SIGTERM → SIGKILL (the process group).
    async fn shutdown(
        &self,
        connection: &Arc<Connection>,
        process: &mut ServerProcess,
        polite: bool,
    ) {
        if polite {
            let reply =
                tokio::time::timeout(SHUTDOWN_TIMEOUT, connection.request("shutdown", None)).await;
            if !matches!(reply, Ok(Reply::Result(_))) {
                tracing::debug!(server = %self.spec.config.name, "no shutdown answer");
            }
            // No params member at all: some servers ignore `"params": null`.
            connection.notify("exit", None);
        }
        connection.close_input();
        let ended = process.terminate(EXIT_GRACE).await;
        tracing::debug!(server = %self.spec.config.name, ?ended, "language server stopped");
        self.record_exit(
            &ended
                .exit_status()
                .map_or_else(|| "killed".to_string(), |s| s.to_string()),
        );
    }

    /// `--record`: the process ended (the conformance stand-in replays this).
    fn record_exit(&self, status: &str) {
        if let Some(recorder) = &self.spec.recorder {
            recorder.event(
                &Direction::ServerToProxy(self.spec.server_id.clone()),
                "exit",
                &[("status", status)],
            );
        }
    }

    async fn reopen_documents(&self, connection: &Arc<Connection>) {
        let reopen = self.docs().reset();
        for (uri, path, _) in reopen {
            self.sync_document(connection, &uri, &path).await;
        }
    }

    fn current_progress(&self) -> Option<Progress> {
        let live = self.live();
        live.progress.values().next().cloned()
    }

    /// Recomputes `indexing`/`ready` from progress and server status.
    fn update_readiness(&self) {
        let (busy, connected) = {
            let live = self.live();
            let waiting_for_quiescence =
                self.spec.config.ready_when_quiescent && live.quiescent != Some(true);
            (
                !live.progress.is_empty()
                    || waiting_for_quiescence
                    || live.quiescent == Some(false),
                live.connection.is_some(),
            )
        };
        if !connected {
            return;
        }
        let state = if busy {
            ServerState::Indexing
        } else {
            ServerState::Ready
        };
        if state == ServerState::Ready {
            if let Some(spawned_at) = self.live().spawned_at.take() {
                tracing::info!(
                    server = %self.spec.config.name,
                    root = %self.spec.root.display(),
                    after_ms = spawned_at.elapsed().as_millis() as u64,
                    "server ready"
                );
            }
        }
        self.set_status(state, None);
    }

    /// The `lsp/servers` entry.
    pub fn entry(&self) -> ServerEntry {
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
            server_id: self.spec.server_id.clone(),
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
                        .and_then(super::process::resident_memory_of),
                    degraded_roots: Vec::new(),
                    dropped: self.dropped_with(&live).any(),
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

    /// The error for a request this server cannot take now.
    fn not_running(&self, status: &Status, waited: Option<Duration>) -> GateError {
        GateError::ServerNotRunning {
            server: Box::new(NotRunning {
                server_id: self.spec.server_id.clone(),
                name: self.spec.config.name.clone(),
                workspace_path: self.spec.root.display().to_string(),
                status: status.state,
                waited_ms: waited.map(|w| w.as_millis() as u64),
                last_error: status.last_error.clone(),
            }),
            servers: Vec::new(),
        }
    }

    /// The connection to forward a request on. Without `wait_until_ready`,
    /// only a `running` server takes requests, at once (the RFD); with it,
    /// the request waits up to that long for `ready`.
    async fn await_accepting(
        &self,
        wait_until_ready: Option<Duration>,
    ) -> Result<Arc<Connection>, GateError> {
        match wait_until_ready {
            Some(wait) => {
                self.await_status(wait, |s| s.state == ServerState::Ready)
                    .await
            }
            None => self.await_status(Duration::ZERO, |_| false).await,
        }
    }

    /// Waits up to `wait` for `until` (or a server that will not run), then
    /// returns the connection if the server is `running`.
    async fn await_status(
        &self,
        wait: Duration,
        until: impl Fn(&Status) -> bool,
    ) -> Result<Arc<Connection>, GateError> {
        if !wait.is_zero() {
            let mut rx = self.status.subscribe();
            let settled = |s: &Status| {
                until(s) || matches!(s.state, ServerState::Failed | ServerState::Stopped)
            };
            let _ = tokio::time::timeout(wait, rx.wait_for(settled)).await;
        }
        let status = self.status();
        if status.wire() != State::Running {
            return Err(self.not_running(&status, (!wait.is_zero()).then_some(wait)));
        }
        self.live()
            .connection
            .clone()
            .ok_or(GateError::ServerExited {
                server_id: self.spec.server_id.clone(),
            })
    }

    /// Forwards one request, syncing the documents it names first.
    pub async fn request(self: &Arc<Self>, call: HostCall) -> Result<HostReply, GateError> {
        let HostCall {
            method,
            params,
            documents: named,
            cancel,
            wait_until_ready,
            ..
        } = call;
        self.ensure_started();
        // Waiting for readiness and syncing documents can take long; a
        // cancel meanwhile ends the request before it reaches the server.
        // (Dropping the preparation is safe: document decisions are made and
        // sent under a lock, never across an await.)
        let prepare = async {
            let connection = self.await_accepting(wait_until_ready).await?;
            let first_open = self.docs().is_empty();
            let mut skipped = HashMap::new();
            for uri in &named {
                if let Some(path) = file_path(uri) {
                    if let Some(reason) = self.sync_document(&connection, uri, &path).await {
                        skipped.insert(uri.clone(), reason);
                    }
                }
            }
            if let Some(wait) = wait_until_ready.filter(|_| first_open && !self.docs().is_empty()) {
                self.settle_after_first_open(wait).await;
            }
            let documents: Vec<DocumentState> = {
                let docs = self.docs();
                named
                    .iter()
                    .map(|uri| DocumentState {
                        skipped: skipped.get(uri).copied(),
                        ..docs.state(uri)
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
        let mut pending = connection.request(&method, params.as_deref());
        let reply = tokio::select! {
            reply = &mut pending => reply,
            _ = cancel.cancelled() => cancelled(&mut pending).await,
        };
        let id = self.spec.server_id.clone();
        match reply {
            // The answer is about text that no longer exists.
            Reply::Result(_) if self.changed_since(&documents) => Err(GateError::ContentModified),
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
            Reply::Closed => Err(GateError::ServerExited { server_id: id }),
        }
    }

    /// Whether any of `documents` is at another version (or closed) on the
    /// server now than when the request was sent.
    fn changed_since(&self, documents: &[DocumentState]) -> bool {
        let docs = self.docs();
        documents
            .iter()
            .filter(|d| d.version.is_some())
            .any(|d| docs.state(&d.uri).version != d.version)
    }

    /// Disk changes below the server's root: open documents are synced again
    /// (or closed when gone), and changes that match the server's file
    /// watchers are sent as one `workspace/didChangeWatchedFiles`.
    pub async fn on_file_changes(&self, changes: &[(PathBuf, FileChange)]) {
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
            self.sync_document(&connection, &uri, &path).await;
        }
        let watchers = FileWatchers::new(&self.live().registrations, &self.spec.config.watch_globs);
        if watchers.is_empty() {
            return;
        }
        let events = watchers.events(&self.spec.root, changes);
        if !events.is_empty() {
            let params = json!({ "changes": events });
            connection.notify("workspace/didChangeWatchedFiles", Some(&raw_json(&params)));
        }
    }

    /// Events were lost: check every open document against the disk.
    pub async fn rescan(&self) {
        let Some(connection) = self.live().connection.clone() else {
            return;
        };
        let open = self.docs().open_documents();
        for (uri, path) in open {
            self.sync_document(&connection, &uri, &path).await;
        }
    }

    /// clangd starts its background index only once a first document is open,
    /// and answers meanwhile from the open files alone (a definition in another
    /// file lands on the header's declaration). So after a connection's first
    /// didOpen, a caller that waits for readiness gives the server
    /// [`FIRST_OPEN_SETTLE`] to report work, then waits for it to finish.
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
            let _ = tokio::time::timeout(
                wait,
                rx.wait_for(|s| !matches!(s.state, ServerState::Indexing)),
            )
            .await;
        }
    }

    /// Brings one document on the server in line with the disk. Returns why
    /// it was skipped, if it was.
    async fn sync_document(
        &self,
        connection: &Arc<Connection>,
        uri: &str,
        path: &Path,
    ) -> Option<&'static str> {
        // The common case, nothing changed, is one stat and sends nothing: no
        // lock and no trip through the blocking pool (a stat takes microseconds).
        if let Ok(metadata) = std::fs::metadata(path) {
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
        self.send_all(&connection, notes);
    }

    /// Sends document notifications in order. Called with the document lock
    /// held by the caller when order matters (it does for every caller).
    fn send_all(&self, connection: &Arc<Connection>, notes: Vec<DocumentNotification>) {
        for note in notes {
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
        }
    }

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

    pub fn registrations(&self) -> Vec<Registration> {
        self.live().registrations.clone()
    }

    /// Waits for the state to satisfy `f` (for tests and `--wait` callers).
    pub async fn wait_for_state(&self, f: impl Fn(ServerState) -> bool) -> ServerState {
        let mut rx = self.status.subscribe();
        let reached = rx.wait_for(|s| f(s.state)).await.map(|s| s.state);
        reached.unwrap_or_else(|_| self.status().state)
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
    serde_json::value::to_raw_value(&Meta { documents }).ok()
}

fn file_path(uri: &str) -> Option<PathBuf> {
    url::Url::parse(uri)
        .ok()
        .filter(|u| u.scheme() == "file")
        .and_then(|u| u.to_file_path().ok())
}

fn with_stderr(message: String, tail: &str) -> String {
    let tail = tail.trim();
    if tail.is_empty() {
        return message;
    }
    let start = tail.char_indices().rev().nth(1999).map_or(0, |(i, _)| i);
    format!("{message}; stderr: {}", &tail[start..])
}

fn is_empty_settings(settings: &Value) -> bool {
    settings.is_null() || settings.as_object().is_some_and(|o| o.is_empty())
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

/// LSP says a uinteger; some servers send fractions.
fn whole_percent(p: f64) -> u32 {
    p.clamp(0.0, 100.0) as u32
}

/// `$/progress` params of work-done progress.
#[derive(serde::Deserialize)]
struct ProgressParams {
    token: Value,
    value: WorkDone,
}

#[derive(serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum WorkDone {
    Begin {
        #[serde(default)]
        title: String,
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        percentage: Option<f64>,
    },
    Report {
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        percentage: Option<f64>,
    },
    End {},
}

/// Answers the server's requests and takes its notifications.
struct Handler {
    server: Weak<Server>,
}

impl ServerMessages for Handler {
    fn on_request(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Box<RawValue>, ErrorObject> {
        let Some(server) = self.server.upgrade() else {
            return Ok(raw_json(&Value::Null));
        };
        let params: Value = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let config = &server.spec.config;
        let result = match method {
            "workspace/configuration" => {
                let items = params
                    .get("items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                Value::Array(
                    items
                        .iter()
                        .map(|item| {
                            config.settings_section(item.get("section").and_then(Value::as_str))
                        })
                        .collect(),
                )
            }
            "workspace/workspaceFolders" => handshake::workspace_folders(&server.spec.root),
            "client/registerCapability" => {
                let regs = params
                    .get("registrations")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut live = server.live();
                let mut refused = 0u64;
                for reg in regs {
                    let (Some(id), Some(method)) = (
                        reg.get("id").and_then(Value::as_str),
                        reg.get("method").and_then(Value::as_str),
                    ) else {
                        continue;
                    };
                    // Same id again replaces (rust-analyzer re-registers its watchers).
                    live.registrations.retain(|r| r.id != id);
                    let registration = Registration {
                        id: id.to_string(),
                        method: method.to_string(),
                        register_options: reg.get("registerOptions").map(raw_json),
                    };
                    let bytes = live
                        .registrations
                        .iter()
                        .map(registration_size)
                        .sum::<usize>();
                    let size = registration_size(&registration);
                    if live.registrations.len() >= MAX_REGISTRATIONS
                        || bytes + size > MAX_REGISTRATION_BYTES
                    {
                        refused += 1;
                        live.registration_bytes = bytes;
                        continue;
                    }
                    live.registrations.push(registration);
                    live.registration_bytes = bytes + size;
                }
                if refused > 0 {
                    live.dropped.registrations += refused;
                    note_drop(
                        &mut live,
                        &config.name,
                        "refused dynamic registrations over the cap",
                    );
                    return Err(ErrorObject {
                        code: crate::gate::error::INTERNAL_ERROR,
                        message: format!(
                            "acp-lsp keeps at most {MAX_REGISTRATIONS} registrations \
                             ({MAX_REGISTRATION_BYTES} bytes); {refused} refused"
                        ),
                        data: None,
                    });
                }
                Value::Null
            }
            "client/unregisterCapability" => {
                // The spec's field is misspelled `unregisterations`; accept both.
                let regs = params
                    .get("unregisterations")
                    .or_else(|| params.get("unregistrations"))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut live = server.live();
                for reg in regs {
                    if let Some(id) = reg.get("id").and_then(Value::as_str) {
                        live.registrations.retain(|r| r.id != id);
                    }
                }
                live.registration_bytes = live.registrations.iter().map(registration_size).sum();
                Value::Null
            }
            "window/workDoneProgress/create" | "window/showMessageRequest" => Value::Null,
            "window/showDocument" => json!({ "success": false }),
            "workspace/applyEdit" => json!({
                "applied": false,
                "failureReason": "acp-lsp does not apply server-initiated edits; the agent applies edits it asked for"
            }),
            m if m.ends_with("/refresh") => Value::Null,
            _ => {
                return Err(ErrorObject {
                    code: crate::gate::error::METHOD_NOT_FOUND,
                    message: format!("acp-lsp does not handle {method}"),
                    data: None,
                })
            }
        };
        Ok(raw_json(&result))
    }

    fn on_notification(&self, method: &str, params: Option<&RawValue>) {
        let Some(server) = self.server.upgrade() else {
            return;
        };
        match method {
            "$/progress" => {
                // Partial results also travel as $/progress, without a `kind`;
                // they say nothing of readiness and do not parse here.
                let Some(ProgressParams { token, value }) =
                    params.and_then(|p| serde_json::from_str(p.get()).ok())
                else {
                    return;
                };
                let token = token.to_string();
                {
                    let mut live = server.live();
                    match value {
                        WorkDone::Begin {
                            title,
                            message,
                            percentage,
                        } => {
                            let full = !live.progress.contains_key(&token)
                                && live.progress.len() >= MAX_PROGRESS_TOKENS;
                            if full || token.len() > MAX_PROGRESS_TOKEN_BYTES {
                                live.dropped.progress_tokens += 1;
                                let name = &server.spec.config.name;
                                note_drop(
                                    &mut live,
                                    name,
                                    "dropped work-done progress over the cap",
                                );
                                return;
                            }
                            live.progress.insert(
                                token,
                                Progress {
                                    title: cut_progress_text(title),
                                    message: message.map(cut_progress_text),
                                    percentage: percentage.map(whole_percent),
                                },
                            );
                        }
                        WorkDone::Report {
                            message,
                            percentage,
                        } => {
                            if let Some(progress) = live.progress.get_mut(&token) {
                                progress.message =
                                    message.map(cut_progress_text).or(progress.message.take());
                                progress.percentage =
                                    percentage.map(whole_percent).or(progress.percentage);
                            }
                        }
                        WorkDone::End {} => {
                            live.progress.remove(&token);
                        }
                    }
                }
                server.update_readiness();
            }
            "experimental/serverStatus" => {
                let quiescent = params
                    .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                    .and_then(|v| v.get("quiescent").and_then(Value::as_bool));
                server.live().quiescent = quiescent;
                server.update_readiness();
            }
            "textDocument/publishDiagnostics" => {
                let Some(params) = params else { return };
                #[derive(serde::Deserialize)]
                struct Target {
                    uri: String,
                    #[serde(default)]
                    version: Option<i32>,
                }
                let Ok(Target { uri, version }) = serde_json::from_str(params.get()) else {
                    return;
                };
                {
                    let mut live = server.live();
                    live.sequence += 1;
                    let published = Published {
                        params: params.to_owned(),
                        version,
                        sequence: live.sequence,
                    };
                    live.diagnostics_bytes += params.get().len();
                    match live.diagnostics.insert(uri.clone(), published) {
                        Some(old) => live.diagnostics_bytes -= old.params.get().len(),
                        None => live.diagnostics_order.push_back(uri),
                    }
                    let mut evicted = 0u64;
                    while live.diagnostics_order.len() > MAX_DIAGNOSTIC_DOCUMENTS
                        || live.diagnostics_bytes > MAX_DIAGNOSTIC_BYTES
                    {
                        let Some(old) = live.diagnostics_order.pop_front() else {
                            break;
                        };
                        if let Some(old) = live.diagnostics.remove(&old) {
                            live.diagnostics_bytes -= old.params.get().len();
                        }
                        evicted += 1;
                    }
                    if evicted > 0 {
                        live.dropped.diagnostics += evicted;
                        let name = &server.spec.config.name;
                        note_drop(&mut live, name, "evicted diagnostics over the cap");
                    }
                }
                server.published.send_modify(|n| *n += 1);
            }
            "window/logMessage" | "window/showMessage" => {
                tracing::debug!(server = %server.spec.config.name, message = params.map(RawValue::get).unwrap_or(""), "{method}");
            }
            _ => {}
        }
    }
}
