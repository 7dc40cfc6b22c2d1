//! Supervising one server: starting it, the handshake, readiness, restarts
//! with backoff, graceful shutdown, and waiting for a state.

use super::{
    Handler, Server, Status, CRASH_WINDOW, INDEX_START_WAIT, INITIALIZE_TIMEOUT, MAX_CRASHES,
    RESTART_BACKOFF, SHUTDOWN_TIMEOUT,
};
use crate::gate::{GateError, NotRunning, ServerState, State};
use crate::lsp::caches;
use crate::lsp::connection::{Connection, Reply, ServerMessages};
use crate::lsp::handshake;
use crate::lsp::launch::Launch;
use crate::lsp::process::{SpawnSpec, EXIT_GRACE};
use crate::lsp::registration::raw_json;
use crate::lsp::transport::{Link, LinkIo, LinkStatus};
use crate::record::Direction;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::task::AbortOnDropHandle;

impl Server {
    /// Starts the supervisor once; later calls do nothing.
    pub fn ensure_started(self: &Arc<Self>) {
        // No program yet: it starts once installed, if it is being installed.
        if self.start_when_installed() || self.state() == ServerState::NotInstalled {
            return;
        }
        let mut started = self.started.lock();
        if started.is_some() || self.stop.is_cancelled() || self.spec.closing.is_cancelled() {
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
        let handle = self.started.lock().take();
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
                RunEnd::Stopped => return,
                RunEnd::Reload => {
                    // Planned: not a crash, no backoff.
                    tracing::info!(
                        server = %self.spec.config.name,
                        root = %self.spec.root.display(),
                        "server restarted: its compilation database changed"
                    );
                    continue;
                }
                RunEnd::Crashed(crash) => {
                    if self.ended_by_shutdown(&crash).await {
                        tracing::info!(
                            server = %self.spec.config.name,
                            root = %self.spec.root.display(),
                            error = %crash.error,
                            "language server ended while acp-lsp shuts down; not restarting"
                        );
                        self.set_status(ServerState::Stopped, None);
                        return;
                    }
                    crash.error
                }
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
            // A refused token (a remote server) fails the same way each time.
            if crate::lsp::transport::not_retried(&error) {
                tracing::error!(server = %self.spec.config.name, %error, "server failed; not restarting");
                self.set_status(ServerState::Failed, Some(error));
                return;
            }
            // rustup's stub without the component fails the same way until
            // someone runs `rustup component add`: restarting only delays
            // the answer that says so.
            if crate::lsp::probe::rustup_stub(&error).is_some() {
                tracing::error!(
                    server = %self.spec.config.name,
                    %error,
                    "server failed; not restarting: the component is not installed"
                );
                self.set_status(ServerState::Failed, Some(error));
                return;
            }
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
                _ = self.spec.closing.cancelled() => {
                    self.set_status(ServerState::Stopped, None);
                    return;
                }
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

    /// Whether a process that ended by itself did so because acp-lsp is
    /// shutting down: shutdown has begun, or the process was ended by a
    /// termination signal acp-lsp did not send and acp-lsp's own shutdown
    /// begins within [`SIGNALLED_EXIT_WAIT`] (a client ending the whole
    /// process tree signals the proxy and its servers at the same moment,
    /// and the server's exit may be seen first).
    async fn ended_by_shutdown(&self, crash: &Crash) -> bool {
        if self.spec.closing.is_cancelled() {
            return true;
        }
        if !crash.signalled {
            return false;
        }
        tokio::time::timeout(SIGNALLED_EXIT_WAIT, self.spec.closing.cancelled())
            .await
            .is_ok()
    }

    /// Runs the server once; how it ended.
    async fn run_once(self: &Arc<Self>) -> RunEnd {
        match self.run_process().await {
            Some(Ok(())) => RunEnd::Reload,
            Some(Err(crash)) => RunEnd::Crashed(crash),
            None => RunEnd::Stopped,
        }
    }

    /// One process: `None` when it was stopped on purpose, `Some(Ok(()))`
    /// when it was ended for a reload, else why it ended.
    async fn run_process(self: &Arc<Self>) -> Option<Result<(), Crash>> {
        let (launch, spawn) = self.prepare_spawn().await;
        // A child process, or a connection to a remote server (`connect`).
        let config = &self.spec.config;
        let opened = tokio::select! {
            opened = Link::open(&config.name, config.remote.as_ref(), &spawn, self.spec.limits) => opened,
            _ = self.stop.cancelled() => return None,
        };
        let (mut process, io) = match opened {
            Ok(opened) => opened,
            Err(error) => {
                return Some(Err(Crash {
                    error,
                    signalled: false,
                }))
            }
        };
        let connection = self.connect(&process, io, &launch);
        match self.initialize(&connection, &mut process).await {
            Handshake::Done => {}
            Handshake::Stopped => return None,
            Handshake::Failed(failure) => return Some(Err(failure)),
        }
        // Owned by this process's run: it ends with it.
        let _index_timer = self.go_live(&connection, &launch).await;
        self.run_until_end(&connection, &mut process).await
    }

    /// What this start adds to the configured command (prepared off the
    /// async threads: caches outside the user's tree, and clangd's
    /// compilation database, written again at each start after a walk of
    /// the root), and the command.
    async fn prepare_spawn(&self) -> (Launch, SpawnSpec) {
        let config = &self.spec.config;
        let launch = {
            let (config, program, root) = (
                Arc::clone(config),
                self.spec.program.clone(),
                self.spec.root.clone(),
            );
            tokio::task::spawn_blocking(move || caches::prepare_launch(&config, &program, &root))
                .await
                .unwrap_or_default()
        };
        let mut args = config.args.clone();
        args.extend(launch.extra_args.iter().cloned());
        let spawn = SpawnSpec {
            command: self.spec.program.clone(),
            args,
            cwd: self.spec.root.clone(),
            env_extra: config.env.clone(),
            env_passthrough: config.env_passthrough.clone(),
        };
        (launch, spawn)
    }

    /// The process is up: logged, recorded, its connection started and
    /// this process's part of the live state reset.
    fn connect(self: &Arc<Self>, process: &Link, io: LinkIo, launch: &Launch) -> Arc<Connection> {
        let config = &self.spec.config;
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
        let mut live = self.live();
        live.pid = process.pid();
        live.spawned_at = Some(Instant::now());
        live.progress.clear();
        live.quiescent = None;
        live.awaiting_index = launch.awaits_background_index;
        live.awaiting_log = self.spec.config.ready_log_matcher().map(Arc::new);
        live.database_sources = launch
            .generated_database
            .as_ref()
            .map(|_| Arc::new(launch.sources.iter().cloned().collect()));
        live.index_began = false;
        live.registrations.clear();
        live.registration_bytes = 0;
        connection
    }

    /// `initialize`, within [`INITIALIZE_TIMEOUT`]; a process that fails it
    /// is killed and reaped here.
    async fn initialize(&self, connection: &Arc<Connection>, process: &mut Link) -> Handshake {
        let init_params = handshake::initialize_params(&self.spec.config, &self.spec.root);
        let initialize = connection.request("initialize", Some(&init_params));
        let outcome = tokio::select! {
            reply = tokio::time::timeout(INITIALIZE_TIMEOUT, initialize) => reply,
            _ = self.stop.cancelled() => {
                self.shutdown(connection, process, false).await;
                return Handshake::Stopped;
            }
        };
        let failure: String = match outcome {
            Ok(Reply::Result(result)) => match handshake::read_initialize_result(&result) {
                Ok(info) => {
                    let mut live = self.live();
                    live.capabilities = Some(info.capabilities);
                    live.version = info.version;
                    live.position_encoding = info.position_encoding;
                    return Handshake::Done;
                }
                Err(e) => format!("invalid initialize result: {e}"),
            },
            Ok(Reply::Error(e)) => format!("initialize failed: {}", e.get()),
            Ok(Reply::TooLarge { .. }) => "initialize result over the frame limit".into(),
            Ok(Reply::Closed) => "exited during initialize".into(),
            Err(_) => format!(
                "no initialize answer within {} s",
                INITIALIZE_TIMEOUT.as_secs()
            ),
        };
        process.kill_group_now();
        // A server that exited by itself keeps its own status; one that
        // hung reports the kill.
        let exited = process.wait().await;
        let signalled = by_termination_signal(&exited);
        let status = exited.map_or_else(|e| e.to_string(), |s| s.to_string());
        self.record_exit(&status);
        Handshake::Failed(Crash {
            error: with_stderr(format!("{failure} ({status})"), &process.stderr_tail()),
            signalled,
        })
    }

    /// After the handshake: `initialized`, the settings, the documents open
    /// before a restart, clangd's first source; then requests are taken.
    /// Returns the timer that stops waiting for clangd's index, if one runs.
    async fn go_live(
        self: &Arc<Self>,
        connection: &Arc<Connection>,
        launch: &Launch,
    ) -> Option<AbortOnDropHandle<()>> {
        let config = &self.spec.config;
        connection.notify("initialized", Some(&raw_json(&json!({}))));
        if !is_empty_settings(&config.settings) {
            let params = json!({ "settings": config.settings });
            connection.notify("workspace/didChangeConfiguration", Some(&raw_json(&params)));
        }
        self.live().connection = Some(Arc::clone(connection));
        self.reopen_documents(connection).await;
        let index_timer = if launch.awaits_background_index {
            Some(
                self.start_background_index(connection, launch.first_source.as_deref())
                    .await,
            )
        } else {
            None
        };
        self.update_readiness();
        self.arm_first_load_wait(connection);
        index_timer
    }

    /// Serves until the process exits, a stop, or a reload; how it ended.
    async fn run_until_end(
        &self,
        connection: &Arc<Connection>,
        process: &mut Link,
    ) -> Option<Result<(), Crash>> {
        let ended = tokio::select! {
            status = process.wait() => Ended::Exited(status),
            _ = self.stop.cancelled() => Ended::Stop,
            _ = self.reload.notified() => Ended::Reload,
        };
        self.live().connection = None;
        match ended {
            Ended::Exited(exited) => {
                let signalled = by_termination_signal(&exited);
                let status = exited.map_or_else(|e| e.to_string(), |s| s.to_string());
                self.record_exit(&status);
                Some(Err(Crash {
                    error: with_stderr(format!("exited ({status})"), &process.stderr_tail()),
                    signalled,
                }))
            }
            Ended::Stop => {
                self.shutdown(connection, process, true).await;
                None
            }
            Ended::Reload => {
                self.shutdown(connection, process, true).await;
                Some(Ok(()))
            }
        }
    }

    /// clangd's generated compilation database no longer lists the root's
    /// sources: write it again and restart clangd on it. clangd 14 does not
    /// reread a `--compile-commands-dir` database by itself (only at a later
    /// lookup, after its freshness window), so a restart is what makes a new
    /// file part of its index. Until the new process has indexed, the server
    /// is not `running` (set here, before the watcher's batch is done, so a
    /// request settled after the change waits for the new process).
    ///
    /// A change seen while a process is coming up (its database may have
    /// been written before the change) restarts that process once it is up:
    /// the permit waits in `reload` for its `select!`.
    pub(super) fn reload(&self) {
        let running = {
            let mut live = self.live();
            // Cleared: further changes before the next start ask nothing more.
            live.database_sources = None;
            live.connection.take().is_some()
        };
        if running {
            self.set_status(ServerState::Starting, None);
        } else if !matches!(
            self.status().state,
            ServerState::Starting | ServerState::Indexing | ServerState::Restarting
        ) {
            return;
        }
        self.reload.notify_one();
    }

    /// shutdown → exit → bounded wait → SIGTERM → SIGKILL (the process group).
    async fn shutdown(&self, connection: &Arc<Connection>, process: &mut Link, polite: bool) {
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
            self.sync_document(connection, &uri, &path, None).await;
        }
    }

    /// clangd loads its compilation database, and begins its background
    /// index, only once a first file is open: with nothing open (a fresh
    /// start, not a restart), open one source of the root. If no index has
    /// begun after [`INDEX_START_WAIT`], stop waiting for one.
    async fn start_background_index(
        self: &Arc<Self>,
        connection: &Arc<Connection>,
        first_source: Option<&std::path::Path>,
    ) -> AbortOnDropHandle<()> {
        if self.docs().is_empty() {
            if let Some(path) = first_source {
                if let Ok(uri) = url::Url::from_file_path(path) {
                    if let Some(reason) = self
                        .sync_document(connection, uri.as_str(), path, None)
                        .await
                    {
                        tracing::debug!(server = %self.spec.config.name, path = %path.display(), reason, "first source not opened");
                    }
                }
            }
        }
        let server = Arc::downgrade(self);
        let connection = Arc::downgrade(connection);
        AbortOnDropHandle::new(tokio::spawn(async move {
            tokio::time::sleep(INDEX_START_WAIT).await;
            if let Some(server) = server.upgrade() {
                server.index_start_timed_out(&connection);
            }
        }))
    }

    /// [`INDEX_START_WAIT`] has passed on `connection`: without a begun
    /// index, the server is no longer held in `indexing` for one.
    fn index_start_timed_out(&self, connection: &std::sync::Weak<Connection>) {
        {
            let mut live = self.live();
            let same = match (&live.connection, connection.upgrade()) {
                (Some(live), Some(ours)) => Arc::ptr_eq(live, &ours),
                _ => false,
            };
            if !same || !live.awaiting_index || live.index_began {
                return;
            }
            live.awaiting_index = false;
        }
        tracing::warn!(
            server = %self.spec.config.name,
            root = %self.spec.root.display(),
            waited_s = INDEX_START_WAIT.as_secs(),
            "no background index began; answers may cover open files only"
        );
        self.update_readiness();
    }

    /// A `window/logMessage` while the first load waits for one
    /// (`ready_after_log`): the matching message ends the wait.
    pub(super) fn note_log(&self, params: Option<&RawValue>) {
        #[derive(serde::Deserialize)]
        struct LogMessage {
            message: String,
        }
        let Some(LogMessage { message }) = params.and_then(|p| serde_json::from_str(p.get()).ok())
        else {
            return;
        };
        {
            let mut live = self.live();
            match &live.awaiting_log {
                Some(matcher) if matcher.is_match(message.as_str()) => live.awaiting_log = None,
                _ => return,
            }
        }
        tracing::debug!(server = %self.spec.config.name, %message, "first load ended (ready_after_log)");
        self.update_readiness();
    }

    /// Recomputes `indexing`/`ready` from progress and server status.
    pub(super) fn update_readiness(&self) {
        let (busy, connected) = {
            let live = self.live();
            let waiting_for_quiescence =
                self.spec.config.ready_when_quiescent && live.quiescent != Some(true);
            (
                !live.progress.is_empty()
                    || live.awaiting_index
                    || live.awaiting_log.is_some()
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

    /// The error for a request this server cannot take now.
    fn not_running(&self, status: &Status, waited: Option<Duration>) -> GateError {
        GateError::ServerNotRunning {
            server: Box::new(NotRunning {
                server_id: self.spec.server_id.clone().into(),
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
    pub(super) async fn await_accepting(
        &self,
        wait_until_ready: Option<Duration>,
    ) -> Result<Arc<Connection>, GateError> {
        match wait_until_ready {
            Some(wait) => self.await_status(wait, Status::accepts_waiting).await,
            None => self.await_status(Duration::ZERO, |_| false).await,
        }
    }

    /// Waits up to `wait` for `until` (or a server that will not run), then
    /// returns the connection if the server is `running`.
    pub(super) async fn await_status(
        &self,
        wait: Duration,
        until: impl Fn(&Status) -> bool,
    ) -> Result<Arc<Connection>, GateError> {
        let started = tokio::time::Instant::now();
        if !wait.is_zero() {
            let mut rx = self.status.subscribe();
            let settled = |s: &Status| {
                until(s)
                    || matches!(
                        s.state,
                        ServerState::Failed | ServerState::Stopped | ServerState::NotInstalled
                    )
            };
            let _ = tokio::time::timeout(wait, rx.wait_for(settled)).await;
        }
        let status = self.status();
        if status.wire() != State::Running {
            // How long it really waited: a server that failed early ends the wait.
            let waited = (!wait.is_zero()).then(|| started.elapsed().min(wait));
            return Err(self.not_running(&status, waited));
        }
        self.live().connection.clone().ok_or_else(|| self.exited())
    }
}

/// How [`Server::run_once`] ended.
enum RunEnd {
    /// Stopped on purpose.
    Stopped,
    /// Ended for a reload ([`Server::reload`]); start again at once.
    Reload,
    /// Ended by itself or failed to start: why.
    Crashed(Crash),
}

/// Why a server's process ended without being asked to.
struct Crash {
    error: String,
    /// It was ended by SIGTERM, SIGINT or SIGHUP, which acp-lsp never sends
    /// a server of its own accord before its stop (someone else is ending
    /// processes: maybe this proxy's whole tree).
    signalled: bool,
}

/// How long a server ended by a termination signal acp-lsp did not send
/// waits for acp-lsp's own shutdown to begin before it counts as a crash
/// (see [`Server::ended_by_shutdown`]).
pub const SIGNALLED_EXIT_WAIT: Duration = Duration::from_secs(2);

/// Whether a process ended by SIGTERM, SIGINT or SIGHUP. Never on Windows:
/// a server runs with a console of its own (`CREATE_NO_WINDOW`), so the
/// Ctrl-C or console close that ends the proxy's tree does not reach it.
#[cfg(unix)]
fn by_termination_signal(exited: &std::io::Result<LinkStatus>) -> bool {
    use std::os::unix::process::ExitStatusExt;
    match exited {
        // SIGHUP, SIGINT, SIGTERM: the same numbers on every Unix.
        Ok(LinkStatus::Exited(status)) => matches!(status.signal(), Some(1 | 2 | 15)),
        _ => false,
    }
}

#[cfg(windows)]
fn by_termination_signal(_exited: &std::io::Result<LinkStatus>) -> bool {
    false
}

/// How the `initialize` handshake ended.
enum Handshake {
    Done,
    /// Stopped on purpose meanwhile (the process is shut down).
    Stopped,
    /// Why it failed (the process is killed and reaped).
    Failed(Crash),
}

/// What ended a running process.
enum Ended {
    Exited(std::io::Result<crate::lsp::transport::LinkStatus>),
    Stop,
    Reload,
}

fn with_stderr(message: String, tail: &str) -> String {
    let tail = tail.trim();
    if tail.is_empty() {
        return message;
    }
    // rustup's stub on PATH without the component: say so, and the fix,
    // on the first line (the one error messages show).
    if let Some(component) = crate::lsp::probe::rustup_stub(tail) {
        return format!(
            "{message}: rustup's stub, the {component} component is not installed \
             (run `rustup component add {component}`); stderr: {}",
            tail.lines().next().unwrap_or_default()
        );
    }
    let start = tail.char_indices().rev().nth(1999).map_or(0, |(i, _)| i);
    format!("{message}; stderr: {}", &tail[start..])
}

fn is_empty_settings(settings: &Value) -> bool {
    settings.is_null() || settings.as_object().is_some_and(|o| o.is_empty())
}
