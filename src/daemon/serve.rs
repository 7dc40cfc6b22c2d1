//! `acp-lsp daemon run`: the daemon itself. One [`Registry`] for every
//! client; a client's sessions are its own (their ids are prefixed with the
//! client's number, so two proxies' session "s" never meet), its servers are
//! shared with every session that names the same root.

use super::paths::Paths;
use super::wire::{
    self, ClientStatus, ForwardedRequest, Op, Reply, Request, Status, Welcome, WireError,
    WireReply, WireRoute,
};
use super::{
    HELLO_TIMEOUT, IDLE_CHECK_INTERVAL, MAX_CLIENTS, MAX_IN_FLIGHT_PER_CLIENT, MAX_LINE_BYTES,
    MAX_SESSIONS_PER_CLIENT, STARTUP_GRACE,
};
use crate::gate::{Forward, GateError, HostCall, LspHost, SessionTable};
use crate::lsp::config::Config;
use crate::lsp::registry::{Registry, RegistryOptions};
use crate::sys::local_socket::{self, Listener, Stream};
use futures::StreamExt;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::value::RawValue;
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::codec::{FramedRead, LinesCodec};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

/// Test hook, never for use: when the daemon's environment names a method in
/// this variable, a forwarded request for that method panics inside its task
/// (as a bug in a server's code would), so `tests/daemon.rs` can show that
/// the panic stays inside that request. Read once, when the daemon starts.
pub const TEST_PANIC_ENV: &str = "ACP_LSP_TEST_PANIC_IN_DAEMON_REQUEST";

/// How long a connection's last queued replies (a refusal at `hello`, a
/// `status`) may take to leave once the connection is done.
pub const LAST_REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// How a daemon run ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It served until it had neither clients nor servers, or a signal.
    Served,
    /// Another daemon holds the lock and answers on the socket.
    AlreadyRunning,
}

/// Runs the daemon for `paths` until it is idle (no clients, no servers) or
/// signalled. Its servers are stopped before it returns; a `kill -9` of the
/// daemon ends them through their parent-death signal and the orphan
/// guardian (`lsp::process`), as for a proxy.
pub async fn run(config: Config, paths: Paths) -> io::Result<Outcome> {
    let Some(lock) = take_lock(&paths).await? else {
        return Ok(Outcome::AlreadyRunning);
    };
    // Under the lock no other daemon serves this socket: a file left there
    // is a dead daemon's.
    let listener = Listener::bind_private(&paths.socket)?;
    tracing::info!(socket = %paths.socket.display(), pid = std::process::id(), "daemon listening");

    let gate_config = config.gate_config();
    let registry = Registry::new(
        config,
        RegistryOptions {
            lazy: false,
            start_when_listed: true,
            recorder: None,
            max_watches: None,
            auto_install: false,
        },
    );
    let daemon = Arc::new(Daemon {
        registry,
        sessions: SessionTable::new(gate_config.read_only_roots, gate_config.allowed_uri_schemes),
        clients: Mutex::new(HashMap::new()),
        next_client: AtomicU64::new(1),
        started: Instant::now(),
        paths: paths.clone(),
        panic_on: std::env::var(TEST_PANIC_ENV).ok().filter(|m| !m.is_empty()),
    });
    let mut signals = crate::sys::signals::Signals::install()?;
    let mut tick = tokio::time::interval(IDLE_CHECK_INTERVAL);
    // Every connection's task: served until the daemon ends, then aborted.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(stream) => {
                    connections.spawn(Arc::clone(&daemon).serve(stream));
                }
                Err(error) => tracing::warn!(%error, "daemon accept failed"),
            },
            Some(ended) = connections.join_next(), if !connections.is_empty() => {
                if let Err(error) = ended {
                    // A client's requests are isolated; this is the loop's own bug.
                    tracing::error!(%error, "a daemon connection's task failed");
                }
            }
            _ = tick.tick() => {
                if daemon.idle() {
                    tracing::info!("daemon idle: no clients and no servers; exiting");
                    break;
                }
            }
            _ = signals.recv() => break,
        }
    }
    // The socket goes first: a proxy connecting from now on starts a new
    // daemon, which waits for this one's lock.
    drop(listener);
    local_socket::remove(&paths.socket);
    daemon.registry.shutdown().await;
    // Clients still connected see the socket close (`daemon_unavailable`).
    connections.shutdown().await;
    drop(lock);
    Ok(Outcome::Served)
}

/// Takes the daemon lock (an exclusive `flock` held for the daemon's life)
/// and writes our pid in it. `None`: another daemon is serving. A daemon
/// still shutting down holds the lock too; then this waits for it, up to
/// [`STARTUP_GRACE`].
async fn take_lock(paths: &Paths) -> io::Result<Option<std::fs::File>> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&paths.lock)?;
    let deadline = Instant::now() + STARTUP_GRACE;
    loop {
        if crate::sys::try_lock_exclusive(&file) {
            file.set_len(0)?;
            writeln!(file, "{}", std::process::id())?;
            return Ok(Some(file));
        }
        if local_socket::connect(&paths.socket).await.is_ok() || Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(IDLE_CHECK_INTERVAL).await;
    }
}

struct Daemon {
    registry: Arc<Registry>,
    /// Every client's sessions, by "<client>/<session id>".
    sessions: SessionTable,
    clients: Mutex<HashMap<u64, ClientInfo>>,
    next_client: AtomicU64,
    started: Instant,
    paths: Paths,
    /// [`TEST_PANIC_ENV`]: the method whose requests panic (tests only).
    panic_on: Option<String>,
}

struct ClientInfo {
    pid: u32,
    sessions: HashSet<String>,
    connected: Instant,
    in_flight: Arc<Mutex<HashMap<u64, CancellationToken>>>,
}

/// One client's connection, as its reader loop sees it. Dropped however
/// the loop ends (the client gone, a panic, the daemon ending): then the
/// client's sessions are closed.
struct Client {
    daemon: Arc<Daemon>,
    number: u64,
    pid: u32,
    tx: mpsc::UnboundedSender<String>,
    in_flight: Arc<Mutex<HashMap<u64, CancellationToken>>>,
}

impl Client {
    fn session_key(&self, session: &str) -> String {
        format!("{}/{session}", self.number)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.daemon.client_gone(self.number, self.pid);
    }
}

/// A request's place in its client's in-flight table, left when dropped:
/// answered, panicked or aborted, no request keeps a slot.
struct InFlightSlot {
    table: Arc<Mutex<HashMap<u64, CancellationToken>>>,
    id: u64,
}

impl Drop for InFlightSlot {
    fn drop(&mut self) {
        self.table.lock().remove(&self.id);
    }
}

/// Runs one answered op, turning a panic inside it (a bug in the registry,
/// a server's handling) into a -32603 `internal` error, as the gate does:
/// every request gets its one reply, and the panic stays inside it.
async fn caught<F>(op: &'static str, work: F) -> Result<Box<RawValue>, GateError>
where
    F: std::future::Future<Output = Result<Box<RawValue>, GateError>>,
{
    use futures::FutureExt;
    // Unwind safety: what the work touches is the registry (its tables
    // behind locks that do not poison) and the client's in-flight table
    // (left by a drop guard); nothing half-updated is read afterwards.
    match std::panic::AssertUnwindSafe(work).catch_unwind().await {
        Ok(answer) => answer,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            tracing::error!(op, panic = %what, "a daemon request panicked");
            Err(GateError::Internal(format!(
                "the daemon's {op} handler panicked: {what}"
            )))
        }
    }
}

impl Daemon {
    fn idle(&self) -> bool {
        self.started.elapsed() >= STARTUP_GRACE
            && self.clients.lock().is_empty()
            && self.registry.all_servers().is_empty()
    }

    fn status(&self) -> Status {
        let clients = self
            .clients
            .lock()
            .iter()
            .map(|(number, info)| ClientStatus {
                client: *number,
                pid: info.pid,
                sessions: info.sessions.len(),
                connected_ms: info.connected.elapsed().as_millis() as u64,
                in_flight: info.in_flight.lock().len(),
            })
            .collect::<Vec<_>>();
        let mut servers: Vec<_> = self
            .registry
            .all_servers()
            .iter()
            .map(|s| s.entry())
            .collect();
        servers.sort_by(|a, b| (&a.name, &a.workspace_path).cmp(&(&b.name, &b.workspace_path)));
        let mut clients = clients;
        clients.sort_by_key(|c| c.client);
        Status {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            uptime_ms: self.started.elapsed().as_millis() as u64,
            memory_bytes: crate::lsp::process::resident_memory_of(std::process::id()),
            socket: self.paths.socket.clone(),
            clients,
            servers,
        }
    }

    /// Serves one connection: a `status` query, or a client from `hello` to
    /// its end, after which its sessions are closed (their servers then
    /// stop after the idle grace unless another client uses them). What is
    /// queued when it ends still leaves, within [`LAST_REPLY_TIMEOUT`].
    async fn serve(self: Arc<Self>, stream: Stream) {
        let (read, write) = stream.into_split();
        let lines = FramedRead::new(read, LinesCodec::new_with_max_length(MAX_LINE_BYTES));
        let (tx, rx) = mpsc::unbounded_channel::<String>();
        let writer = AbortOnDropHandle::new(tokio::spawn(write_lines(write, rx)));
        // Every sender (this one, the requests' tasks) is gone once it returns.
        self.converse(lines, tx).await;
        let _ = tokio::time::timeout(LAST_REPLY_TIMEOUT, writer).await;
    }

    async fn converse(
        self: &Arc<Self>,
        mut lines: FramedRead<local_socket::ReadHalf, LinesCodec>,
        tx: mpsc::UnboundedSender<String>,
    ) {
        let first = match tokio::time::timeout(HELLO_TIMEOUT, lines.next()).await {
            Ok(Some(Ok(line))) => serde_json::from_str::<Request>(&line).ok(),
            _ => None,
        };
        let Some(Request { id, op }) = first else {
            return;
        };
        let (pid, version) = match op {
            Op::Status => {
                send(&tx, id, to_raw(&self.status()));
                return;
            }
            Op::Hello { pid, version } => (pid, version),
            _ => return,
        };
        if version != env!("CARGO_PKG_VERSION") {
            let error = GateError::Internal(format!(
                "the daemon is acp-lsp {}, the proxy {version}",
                env!("CARGO_PKG_VERSION")
            ));
            send(&tx, id, Err(error));
            return;
        }
        let Some(client) = self.admit(pid, &tx) else {
            send(
                &tx,
                id,
                Err(GateError::Overloaded {
                    scope: "total",
                    limit: MAX_CLIENTS,
                }),
            );
            return;
        };
        tracing::info!(client = client.number, pid, "daemon client connected");
        send(
            &tx,
            id,
            to_raw(&Welcome {
                client: client.number,
                pid: std::process::id(),
            }),
        );
        let mut tasks = JoinSet::new();
        loop {
            tokio::select! {
                line = lines.next() => match line {
                    Some(Ok(line)) => match serde_json::from_str::<Request>(&line) {
                        Ok(request) => self.handle(&client, request, &mut tasks),
                        Err(error) => {
                            tracing::warn!(client = client.number, %error, "bad line from a daemon client; dropping it");
                            break;
                        }
                    },
                    Some(Err(error)) => {
                        tracing::warn!(client = client.number, %error, "daemon client stream failed");
                        break;
                    }
                    None => break,
                },
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        // Its requests end with it: dropped futures cancel at their servers.
        // (Its sessions close when `client` is dropped, however this ends.)
        tasks.abort_all();
    }

    /// Registers a client (`None`: [`MAX_CLIENTS`] reached). Dropping what
    /// it returns unregisters the client and closes its sessions.
    fn admit(self: &Arc<Self>, pid: u32, tx: &mpsc::UnboundedSender<String>) -> Option<Client> {
        let mut clients = self.clients.lock();
        if clients.len() >= MAX_CLIENTS {
            tracing::warn!(limit = MAX_CLIENTS, "limit hit: daemon client refused");
            return None;
        }
        let number = self.next_client.fetch_add(1, Ordering::Relaxed);
        let in_flight = Arc::new(Mutex::new(HashMap::new()));
        clients.insert(
            number,
            ClientInfo {
                pid,
                sessions: HashSet::new(),
                connected: Instant::now(),
                in_flight: Arc::clone(&in_flight),
            },
        );
        Some(Client {
            daemon: Arc::clone(self),
            number,
            pid,
            tx: tx.clone(),
            in_flight,
        })
    }

    /// `client` is gone: its sessions are closed.
    fn client_gone(&self, number: u64, pid: u32) {
        let info = self.clients.lock().remove(&number);
        for key in info.map(|i| i.sessions).unwrap_or_default() {
            if let Some(session) = self.sessions.remove(&key) {
                self.registry.session_closed(&session);
            }
        }
        tracing::info!(client = number, pid, "daemon client gone");
    }

    /// One request of `client`. Session changes, writes and cancels are
    /// done here, in arrival order; the answered ops run on their own tasks.
    fn handle(self: &Arc<Self>, client: &Client, request: Request, tasks: &mut JoinSet<()>) {
        let Request { id, op } = request;
        match op {
            Op::Open { session, roots } => {
                let key = client.session_key(&session);
                {
                    let mut clients = self.clients.lock();
                    let Some(info) = clients.get_mut(&client.number) else {
                        return;
                    };
                    if info.sessions.len() >= MAX_SESSIONS_PER_CLIENT
                        && !info.sessions.contains(&key)
                    {
                        tracing::warn!(
                            limit = MAX_SESSIONS_PER_CLIENT,
                            "limit hit: daemon session refused"
                        );
                        return;
                    }
                    info.sessions.insert(key.clone());
                }
                let session = self.sessions.insert(&key, roots);
                self.registry.session_opened(&session);
            }
            Op::Close { session } => {
                let key = client.session_key(&session);
                if let Some(info) = self.clients.lock().get_mut(&client.number) {
                    info.sessions.remove(&key);
                }
                if let Some(session) = self.sessions.remove(&key) {
                    self.registry.session_closed(&session);
                }
            }
            Op::Written {
                session,
                path,
                text,
            } => {
                if let Some(session) = self.sessions.get(&client.session_key(&session)) {
                    self.registry.text_written(&session, &path, &text);
                }
            }
            Op::Cancel { target } => {
                if let Some(token) = client.in_flight.lock().get(&target) {
                    token.cancel();
                }
            }
            Op::Servers { session: name } => {
                self.answer_in_session(
                    client,
                    ("servers", id),
                    name,
                    tasks,
                    move |daemon, session| async move {
                        to_raw(&daemon.registry.servers(&session).await)
                    },
                );
            }
            Op::Route {
                session: name,
                server_id,
            } => {
                self.answer_in_session(
                    client,
                    ("route", id),
                    name,
                    tasks,
                    move |daemon, session| async move {
                        let route = daemon.registry.route(&session, &server_id).await?;
                        to_raw(&WireRoute {
                            execute_commands: route.execute_commands,
                            extension_methods: route.extension_methods,
                            request_timeout_ms: route.request_timeout.as_millis() as u64,
                        })
                    },
                );
            }
            Op::Request(call) => self.request(client, id, call, tasks),
            Op::Diagnostics {
                session: name,
                documents,
                wait_ms,
            } => {
                self.answer_in_session(
                    client,
                    ("diagnostics", id),
                    name,
                    tasks,
                    move |daemon, session| async move {
                        let wait = Duration::from_millis(wait_ms);
                        let entries = daemon
                            .registry
                            .diagnostics(&session, documents, wait)
                            .await?;
                        to_raw(&entries)
                    },
                );
            }
            Op::StartAll { session: name } => {
                self.answer_in_session(
                    client,
                    ("startAll", id),
                    name,
                    tasks,
                    move |daemon, session| async move {
                        to_raw(&daemon.registry.start_all(&session).await)
                    },
                );
            }
            Op::StartShown { session: name } => {
                self.answer_in_session(
                    client,
                    ("startShown", id),
                    name,
                    tasks,
                    move |daemon, session| async move {
                        to_raw(&daemon.registry.start_shown(&session).await)
                    },
                );
            }
            Op::EnsureReady {
                session: name,
                server_id,
                wait_ms,
            } => {
                self.answer_in_session(
                    client,
                    ("ensureReady", id),
                    name,
                    tasks,
                    move |daemon, session| async move {
                        let wait = Duration::from_millis(wait_ms);
                        daemon
                            .registry
                            .ensure_ready(&session, &server_id, wait)
                            .await;
                        to_raw(&())
                    },
                );
            }
            Op::Hello { .. } | Op::Status => send(
                &client.tx,
                id,
                Err(GateError::InvalidParams(
                    "hello and status come first, once".into(),
                )),
            ),
        }
    }

    /// Answers request `id` of `client` from a task of its own, with the
    /// client's session `name` (`unknown_session` if it has none such).
    fn answer_in_session<F, Fut>(
        self: &Arc<Self>,
        client: &Client,
        (op, id): (&'static str, u64),
        name: String,
        tasks: &mut JoinSet<()>,
        work: F,
    ) where
        F: FnOnce(Arc<Daemon>, Arc<crate::gate::Session>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<Box<RawValue>, GateError>> + Send + 'static,
    {
        let daemon = Arc::clone(self);
        let session = self.sessions.get(&client.session_key(&name));
        let tx = client.tx.clone();
        tasks.spawn(async move {
            let answer = match session {
                Some(session) => caught(op, work(daemon, session)).await,
                None => Err(GateError::UnknownSession(name)),
            };
            send(&tx, id, answer);
        });
    }

    fn request(
        self: &Arc<Self>,
        client: &Client,
        id: u64,
        call: Box<ForwardedRequest>,
        tasks: &mut JoinSet<()>,
    ) {
        let token = CancellationToken::new();
        {
            let mut in_flight = client.in_flight.lock();
            if in_flight.len() >= MAX_IN_FLIGHT_PER_CLIENT {
                drop(in_flight);
                tracing::warn!(
                    limit = MAX_IN_FLIGHT_PER_CLIENT,
                    "limit hit: daemon request refused"
                );
                send(
                    &client.tx,
                    id,
                    Err(GateError::Overloaded {
                        scope: "total",
                        limit: MAX_IN_FLIGHT_PER_CLIENT,
                    }),
                );
                return;
            }
            in_flight.insert(id, token.clone());
        }
        let slot = InFlightSlot {
            table: Arc::clone(&client.in_flight),
            id,
        };
        let session = self.sessions.get(&client.session_key(&call.session));
        let daemon = Arc::clone(self);
        let tx = client.tx.clone();
        tasks.spawn(async move {
            let answer = match session {
                Some(session) => caught("request", daemon.forward(session, *call, token)).await,
                None => Err(GateError::UnknownSession(call.session)),
            };
            // The slot is free before the client can see the answer.
            drop(slot);
            send(&tx, id, answer);
        });
    }

    /// A client's `lsp/request`, forwarded to its server.
    async fn forward(
        &self,
        session: Arc<crate::gate::Session>,
        call: ForwardedRequest,
        cancel: CancellationToken,
    ) -> Result<Box<RawValue>, GateError> {
        if self.panic_on.as_deref() == Some(call.method.as_str()) {
            panic!("{TEST_PANIC_ENV} names {}", call.method);
        }
        // The client's gate checked it against the route the daemon gave.
        let host_call = HostCall::checked(Forward {
            session,
            server_id: call.server_id,
            method: call.method,
            params: call.params,
            documents: call
                .documents
                .into_iter()
                .map(crate::gate::NamedDocument::from_uri)
                .collect(),
            cancel,
            wait_until_ready: call.wait_ms.map(Duration::from_millis),
        });
        let reply = self.registry.request(host_call).await?;
        to_raw(&WireReply {
            result: reply.result,
            meta: reply.meta,
        })
    }
}

fn to_raw<T: Serialize>(value: &T) -> Result<Box<RawValue>, GateError> {
    serde_json::value::to_raw_value(value).map_err(|e| GateError::Internal(e.to_string()))
}

/// Queues the reply to request `id` (nothing if the client is gone).
fn send(tx: &mpsc::UnboundedSender<String>, id: u64, answer: Result<Box<RawValue>, GateError>) {
    let reply = match answer {
        Ok(ok) => Reply {
            id,
            ok: Some(ok),
            err: None,
        },
        Err(error) => Reply {
            id,
            ok: None,
            err: Some(WireError::from(error)),
        },
    };
    match wire::line(&reply) {
        Ok(line) => {
            let _ = tx.send(line);
        }
        Err(error) => tracing::error!(%error, "cannot encode a daemon reply"),
    }
}

/// The one writer of a connection.
async fn write_lines(mut write: local_socket::WriteHalf, mut rx: mpsc::UnboundedReceiver<String>) {
    while let Some(line) = rx.recv().await {
        if write.write_all(line.as_bytes()).await.is_err() {
            return;
        }
    }
    let _ = write.shutdown().await;
}
