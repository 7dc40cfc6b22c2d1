//! The proxy's side of the daemon: [`RemoteHost`], an [`LspHost`] that
//! forwards the gate's calls to the shared daemon, starting it on first use
//! (as `gopls -remote=auto` does) and again whenever it has gone away.
//!
//! If the daemon dies, requests in flight fail with `daemon_unavailable`
//! (retryable); the host then starts a new daemon and re-opens every
//! session it knows, so the same roots give the same serverIds.

use super::paths::Paths;
use super::wire::{self, ForwardedRequest, Op, Reply, Request, Welcome, WireReply, WireRoute};
use super::{
    CONNECT_RETRY_MAX_PAUSE, CONNECT_RETRY_PAUSE, DAEMON_START_TIMEOUT, HELLO_TIMEOUT,
    MAX_LINE_BYTES, MAX_LOG_BYTES,
};
use crate::gate::{
    GateError, HostCall, HostReply, LspHost, PublishedDiagnostics, Route, ServerEntry, Session,
};
use crate::sys::local_socket::{self, Stream};
use futures::StreamExt;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::codec::{FramedRead, LinesCodec};
use tokio_util::task::AbortOnDropHandle;

/// How the proxy starts a daemon: this program with `daemon run`.
#[derive(Debug, Clone)]
pub struct Launcher {
    pub program: PathBuf,
    /// Log filter for the daemon's log file.
    pub log_level: String,
}

/// Why the daemon could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot start the daemon {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("the daemon did not accept a connection on {socket} within {ms} ms (its log: {log})")]
    Timeout {
        socket: String,
        log: String,
        ms: u64,
    },
    #[error("the daemon refused this proxy: {0}")]
    Refused(String),
    #[error("the daemon connection failed: {0}")]
    Io(#[from] io::Error),
}

/// One live connection to the daemon.
struct Conn {
    tx: mpsc::UnboundedSender<String>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    closed: AtomicBool,
    /// Its writer and reader tasks: they end with it.
    tasks: std::sync::OnceLock<[AbortOnDropHandle<()>; 2]>,
}

impl Conn {
    fn alive(&self) -> bool {
        !self.closed.load(Ordering::Acquire)
    }

    /// Queues a message; false when the connection is gone.
    fn send(&self, request: &Request) -> bool {
        match wire::line(request) {
            Ok(line) => self.alive() && self.tx.send(line).is_ok(),
            Err(error) => {
                tracing::error!(%error, "cannot encode a daemon request");
                false
            }
        }
    }
}

struct Shared {
    conn: Option<Arc<Conn>>,
    /// The sessions of this proxy, re-opened on every new connection.
    sessions: HashMap<String, Arc<Session>>,
}

/// The gate's host in `proxy --shared`.
pub struct RemoteHost {
    paths: Paths,
    launcher: Launcher,
    shared: Mutex<Shared>,
    /// One connection attempt at a time.
    connecting: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
    me: Weak<RemoteHost>,
    /// Connections made in the background (re-attaching, a session opened
    /// while unconnected): they end with the host.
    background: Mutex<JoinSet<()>>,
}

impl RemoteHost {
    pub fn new(paths: Paths, launcher: Launcher) -> Arc<RemoteHost> {
        Arc::new_cyclic(|me| RemoteHost {
            paths,
            launcher,
            shared: Mutex::new(Shared {
                conn: None,
                sessions: HashMap::new(),
            }),
            connecting: tokio::sync::Mutex::new(()),
            next_id: AtomicU64::new(1),
            me: me.clone(),
            background: Mutex::new(JoinSet::new()),
        })
    }

    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    fn live_conn(&self) -> Option<Arc<Conn>> {
        self.shared.lock().conn.clone().filter(|c| c.alive())
    }

    /// The live connection, connecting (and starting the daemon) first if
    /// there is none.
    async fn connect(&self) -> Result<Arc<Conn>, ConnectError> {
        if let Some(conn) = self.live_conn() {
            return Ok(conn);
        }
        let _one = self.connecting.lock().await;
        if let Some(conn) = self.live_conn() {
            return Ok(conn);
        }
        // A daemon deciding it is idle may close a connection it had not
        // yet accepted; then once more, which starts a new daemon.
        let stream = connect_or_start(&self.paths, &self.launcher).await?;
        match self.attach(stream).await {
            Ok(conn) => Ok(conn),
            Err(ConnectError::Refused(why)) => {
                tracing::info!(%why, "the daemon closed the connection at hello; once more");
                let stream = connect_or_start(&self.paths, &self.launcher).await?;
                self.attach(stream).await
            }
            Err(other) => Err(other),
        }
    }

    /// Says hello on a new stream, re-opens our sessions on it, installs it.
    async fn attach(&self, stream: Stream) -> Result<Arc<Conn>, ConnectError> {
        let (read, mut write) = stream.into_split();
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let conn = Arc::new(Conn {
            tx,
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            tasks: std::sync::OnceLock::new(),
        });
        let writer = tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                if write.write_all(line.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
        let reader = tokio::spawn(read_replies(
            self.me.clone(),
            Arc::downgrade(&conn),
            FramedRead::new(read, LinesCodec::new_with_max_length(MAX_LINE_BYTES)),
        ));
        let _ = conn.tasks.set([
            AbortOnDropHandle::new(writer),
            AbortOnDropHandle::new(reader),
        ]);
        let hello = Op::Hello {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        };
        let welcome = tokio::time::timeout(HELLO_TIMEOUT, self.exchange(&conn, hello))
            .await
            .map_err(|_| ConnectError::Refused("no answer to hello".into()))?
            .map_err(|e| ConnectError::Refused(e.to_string()))?;
        let welcome: Welcome = serde_json::from_str(welcome.get())
            .map_err(|e| ConnectError::Refused(e.to_string()))?;
        // Sessions are re-opened and the connection installed under one
        // lock, so a session opened meanwhile is sent exactly once or
        // re-opened here, never missed.
        let mut shared = self.shared.lock();
        for session in shared.sessions.values() {
            conn.send(&self.open(session));
        }
        shared.conn = Some(Arc::clone(&conn));
        tracing::info!(
            client = welcome.client,
            daemon = welcome.pid,
            sessions = shared.sessions.len(),
            "attached to the shared daemon"
        );
        Ok(conn)
    }

    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn open(&self, session: &Session) -> Request {
        Request {
            id: self.id(),
            op: Op::Open {
                session: session.id().to_string(),
                roots: session.roots().to_vec(),
            },
        }
    }

    /// Sends `op` on `conn` and waits for its reply.
    async fn exchange(&self, conn: &Arc<Conn>, op: Op) -> Result<Box<RawValue>, GateError> {
        let id = self.id();
        let (tx, rx) = oneshot::channel();
        conn.pending.lock().insert(id, tx);
        if !conn.send(&Request { id, op }) {
            conn.pending.lock().remove(&id);
            return Err(gone());
        }
        let mut pending = Pending {
            conn: Arc::clone(conn),
            id,
            armed: false,
        };
        let reply = rx.await.map_err(|_| gone())?;
        pending.armed = false;
        answer(reply)
    }

    /// One answered op that only reads (servers, route, diagnostics):
    /// connects first if needed, and if the daemon goes away under it, asks
    /// once more of the daemon that replaces it.
    async fn call(&self, op: impl Fn() -> Op) -> Result<Box<RawValue>, GateError> {
        let mut retried = false;
        loop {
            let conn = self
                .connect()
                .await
                .map_err(|e| GateError::DaemonUnavailable(e.to_string()))?;
            match self.exchange(&conn, op()).await {
                Err(GateError::DaemonUnavailable(_)) if !retried => retried = true,
                other => return other,
            }
        }
    }

    async fn call_typed<T: DeserializeOwned>(&self, op: impl Fn() -> Op) -> Result<T, GateError> {
        let raw = self.call(op).await?;
        serde_json::from_str(raw.get()).map_err(|e| GateError::Internal(e.to_string()))
    }

    /// Sends a message that gets no reply, if connected; otherwise it is
    /// dropped (the sessions are re-opened on the next connection).
    fn notify(&self, op: Op) -> bool {
        match self.live_conn() {
            Some(conn) => conn.send(&Request { id: self.id(), op }),
            None => false,
        }
    }

    /// A new connection in the background (the daemon went away and we
    /// have sessions to re-attach).
    fn reattach_soon(&self) {
        let Some(host) = self.me.upgrade() else {
            return;
        };
        if host.shared.lock().sessions.is_empty() {
            return;
        }
        self.connect_in_background(async move {
            if let Err(error) = host.connect().await {
                tracing::warn!(%error, "cannot re-attach to the shared daemon; retrying on the next request");
            }
        });
    }

    /// Runs a background connection attempt, owned by the host.
    fn connect_in_background(
        &self,
        attempt: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let mut background = self.background.lock();
        while background.try_join_next().is_some() {}
        background.spawn(attempt);
    }
}

impl RemoteHost {
    /// The daemon's routing of `server_id` for `session`.
    async fn route(&self, session: &Session, server_id: &str) -> Result<Route, GateError> {
        let id = session.id().to_string();
        let route: WireRoute = self
            .call_typed(|| Op::Route {
                session: id.clone(),
                server_id: server_id.to_string(),
            })
            .await?;
        Ok(Route {
            execute_commands: route.execute_commands,
            extension_methods: route.extension_methods,
            request_timeout: Duration::from_millis(route.request_timeout_ms),
        })
    }
}

/// A request on the wire whose future may be dropped (deadline, relay
/// ending): then the daemon is told to cancel it.
struct Pending {
    conn: Arc<Conn>,
    id: u64,
    armed: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.conn.pending.lock().remove(&self.id);
        if self.armed {
            self.conn.send(&Request {
                id: 0,
                op: Op::Cancel { target: self.id },
            });
        }
    }
}

fn gone() -> GateError {
    GateError::DaemonUnavailable("the daemon went away before answering".into())
}

fn answer(reply: Reply) -> Result<Box<RawValue>, GateError> {
    match (reply.ok, reply.err) {
        (_, Some(error)) => Err(error.into()),
        (Some(ok), None) => Ok(ok),
        (None, None) => Err(GateError::Internal("an empty daemon reply".into())),
    }
}

/// Routes the daemon's replies to their waiters; when the connection ends,
/// fails every waiter (`daemon_unavailable`) and starts re-attaching.
async fn read_replies(
    host: Weak<RemoteHost>,
    conn: Weak<Conn>,
    mut lines: FramedRead<local_socket::ReadHalf, LinesCodec>,
) {
    while let Some(Ok(line)) = lines.next().await {
        let Some(conn) = conn.upgrade() else {
            return;
        };
        match serde_json::from_str::<Reply>(&line) {
            Ok(reply) => {
                if let Some(waiter) = conn.pending.lock().remove(&reply.id) {
                    let _ = waiter.send(reply);
                }
            }
            Err(error) => tracing::warn!(%error, "bad line from the daemon; ignored"),
        }
    }
    let Some(conn) = conn.upgrade() else {
        return;
    };
    conn.closed.store(true, Ordering::Release);
    // Dropping the senders fails the waiters.
    let waiting = std::mem::take(&mut *conn.pending.lock());
    tracing::warn!(
        in_flight = waiting.len(),
        "the shared daemon went away; re-attaching"
    );
    drop(waiting);
    if let Some(host) = host.upgrade() {
        {
            let mut shared = host.shared.lock();
            if shared.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, &conn)) {
                shared.conn = None;
            }
        }
        host.reattach_soon();
    }
}

/// Connects to the daemon's socket, starting a daemon if nobody answers,
/// and retrying (with backoff) until [`DAEMON_START_TIMEOUT`]. Several
/// proxies may start one at once: the daemon lock lets one serve.
pub async fn connect_or_start(paths: &Paths, launcher: &Launcher) -> Result<Stream, ConnectError> {
    if let Ok(stream) = local_socket::connect(&paths.socket).await {
        return Ok(stream);
    }
    start_daemon(paths, launcher)?;
    let deadline = Instant::now() + DAEMON_START_TIMEOUT;
    let mut pause = CONNECT_RETRY_PAUSE;
    loop {
        tokio::time::sleep(pause).await;
        if let Ok(stream) = local_socket::connect(&paths.socket).await {
            return Ok(stream);
        }
        if Instant::now() >= deadline {
            return Err(ConnectError::Timeout {
                socket: paths.socket.display().to_string(),
                log: paths.log.display().to_string(),
                ms: DAEMON_START_TIMEOUT.as_millis() as u64,
            });
        }
        pause = (pause * 2).min(CONNECT_RETRY_MAX_PAUSE);
    }
}

/// Starts `acp-lsp daemon run` detached: its own session (so neither the
/// terminal's signals nor the proxy's process group reach it), stdin and
/// stdout on /dev/null, stderr appended to its log. A thread reaps it if it
/// exits while this proxy still runs.
fn start_daemon(paths: &Paths, launcher: &Launcher) -> Result<(), ConnectError> {
    let spawn_error = |source| ConnectError::Spawn {
        program: launcher.program.display().to_string(),
        source,
    };
    // The log of earlier daemons is kept up to a size, then started anew.
    let keep = std::fs::metadata(&paths.log).is_ok_and(|m| m.len() < MAX_LOG_BYTES);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(keep)
        .write(true)
        .truncate(!keep)
        .open(&paths.log)
        .map_err(spawn_error)?;
    let mut command = std::process::Command::new(&launcher.program);
    command
        .arg("daemon")
        .arg("run")
        .arg("--log-level")
        .arg(&launcher.log_level);
    if let Some(config) = &paths.config {
        command.arg("--config").arg(config);
    }
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    crate::sys::start_new_session(&mut command);
    let mut child = command.spawn().map_err(spawn_error)?;
    tracing::info!(pid = child.id(), socket = %paths.socket.display(), "started the shared daemon");
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(())
}

impl LspHost for RemoteHost {
    async fn servers(&self, session: &Session) -> Vec<ServerEntry> {
        let id = session.id().to_string();
        match self
            .call_typed(|| Op::Servers {
                session: id.clone(),
            })
            .await
        {
            Ok(entries) => entries,
            Err(error) => {
                tracing::warn!(%error, "lsp/servers: the shared daemon did not answer");
                Vec::new()
            }
        }
    }

    async fn request(&self, call: HostCall) -> Result<HostReply, GateError> {
        // The route comes from the daemon, the checks against it are this
        // proxy's gate's; then the checked request crosses the socket.
        let route = self.route(call.session(), call.server_id()).await?;
        let call = call.route(&route)?;
        let conn = self
            .connect()
            .await
            .map_err(|e| GateError::DaemonUnavailable(e.to_string()))?;
        let id = self.id();
        let (tx, rx) = oneshot::channel();
        conn.pending.lock().insert(id, tx);
        let op = Op::Request(Box::new(ForwardedRequest {
            session: call.session.id().to_string(),
            server_id: call.server_id,
            method: call.method,
            params: call.params,
            documents: call.documents.into_iter().map(|d| d.uri).collect(),
            wait_ms: call.wait_until_ready.map(|w| w.as_millis() as u64),
        }));
        if !conn.send(&Request { id, op }) {
            conn.pending.lock().remove(&id);
            return Err(gone());
        }
        let mut pending = Pending {
            conn: Arc::clone(&conn),
            id,
            armed: true,
        };
        let mut rx = rx;
        let reply = tokio::select! {
            reply = &mut rx => reply,
            _ = call.cancel.cancelled() => {
                conn.send(&Request { id: self.id(), op: Op::Cancel { target: id } });
                (&mut rx).await
            }
        };
        pending.armed = false;
        let raw = answer(reply.map_err(|_| gone())?)?;
        let reply: WireReply =
            serde_json::from_str(raw.get()).map_err(|e| GateError::Internal(e.to_string()))?;
        Ok(HostReply {
            result: reply.result,
            meta: reply.meta,
        })
    }

    fn session_opened(self: &Arc<Self>, session: &Arc<Session>) {
        let open = self.open(session);
        let sent = {
            let mut shared = self.shared.lock();
            shared
                .sessions
                .insert(session.id().to_string(), Arc::clone(session));
            shared
                .conn
                .as_ref()
                .filter(|c| c.alive())
                .is_some_and(|c| c.send(&open))
        };
        if !sent {
            // Connecting re-opens every session we know, this one included.
            let host = Arc::clone(self);
            self.connect_in_background(async move {
                if let Err(error) = host.connect().await {
                    tracing::warn!(%error, "cannot reach the shared daemon");
                }
            });
        }
    }

    fn session_closed(self: &Arc<Self>, session: &Arc<Session>) {
        self.shared.lock().sessions.remove(session.id().as_str());
        self.notify(Op::Close {
            session: session.id().to_string(),
        });
    }

    fn text_written(&self, session: &Arc<Session>, path: &Path, text: &str) {
        // Not connected: the daemon's servers read the disk, which the
        // editor has written by now.
        self.notify(Op::Written {
            session: session.id().to_string(),
            path: path.to_path_buf(),
            text: text.to_string(),
        });
    }

    async fn start_all(&self, session: &Session) {
        let id = session.id().to_string();
        let answer: Result<(), GateError> = self
            .call_typed(|| Op::StartAll {
                session: id.clone(),
            })
            .await;
        if let Err(error) = answer {
            tracing::debug!(%error, "startAll: the shared daemon did not answer");
        }
    }

    async fn start_shown(&self, session: &Session) {
        let id = session.id().to_string();
        let answer: Result<(), GateError> = self
            .call_typed(|| Op::StartShown {
                session: id.clone(),
            })
            .await;
        if let Err(error) = answer {
            tracing::debug!(%error, "start_shown: the shared daemon did not answer");
        }
    }

    async fn ensure_ready(&self, session: &Session, server_id: &str, wait: Duration) {
        let id = session.id().to_string();
        let answer: Result<(), GateError> = self
            .call_typed(|| Op::EnsureReady {
                session: id.clone(),
                server_id: server_id.to_string(),
                wait_ms: wait.as_millis() as u64,
            })
            .await;
        if let Err(error) = answer {
            // What follows (the listing, the request) reports the server's state.
            tracing::debug!(%error, "ensure_ready: the shared daemon did not answer");
        }
    }

    async fn diagnostics(
        &self,
        session: &Session,
        documents: Vec<(String, PathBuf)>,
        wait: Duration,
    ) -> Result<Vec<PublishedDiagnostics>, GateError> {
        let id = session.id().to_string();
        self.call_typed(|| Op::Diagnostics {
            session: id.clone(),
            documents: documents.clone(),
            wait_ms: wait.as_millis() as u64,
        })
        .await
    }
}
