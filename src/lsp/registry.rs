//! The registry: which servers run for which sessions, keyed by an opaque
//! `serverId` (UUID v5 of server name and root, stable across restarts and
//! runs). Implements [`LspHost`] for the gate.
//!
//! Lazy roots: a session's detected servers are all listed, but only those
//! whose root is a session root start on `session/new` (none with `lazy`).
//! A nested root's server starts when a request names its id or a file
//! under its root, or on `lsp/servers` with `_meta.startAll`; until then it
//! is `idle`. An agent that knows only the RFD (its `lsp/servers` has no
//! `_meta.startAll`) is shown every server as it is being started, within
//! the cap (`LspHost::start_shown`). At most `max_running_servers` run: to
//! start one more, the least recently used server that may make room (a
//! nested one serving nothing, or a session root's own unused for the idle
//! time) is stopped (it goes back to `idle`), or the start is refused
//! (`server_limit`, logged once, shown in the entry). A nested server that
//! served nothing for `nested_idle_stop_ms` goes back to `idle`.

use super::config::{Config, ServerConfig};
use super::detect::{detect, DetectReason};
use super::primary::{self, Role};
use super::program::{find_program, Program};
use super::running::Running;
use super::server::{Server, ServerSpec};
use super::watch::{Delivery, FileChange, RootWatch, WatchBatch, WatchOptions, SETTLE_TIMEOUT};
use crate::gate::{
    GateError, HostCall, HostReply, LspHost, NamedDocument, PublishedDiagnostics, Route,
    ServerEntry, ServerState, Session, StateReason,
};
use crate::jsonrpc::Limits;
use crate::record::Recorder;
use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::{AbortOnDropHandle, TaskTracker};

mod indexes;
mod install;
mod lifecycle;

/// Namespace of acp-lsp's server ids.
const SERVER_ID_NAMESPACE: uuid::Uuid = uuid::Uuid::from_bytes([
    0x6b, 0x1f, 0x3c, 0x52, 0x8e, 0x07, 0x4a, 0x1d, 0x9a, 0x55, 0x2f, 0x10, 0xa4, 0x7e, 0x61, 0x0c,
]);

/// The stable id of the server `name` at `root`.
pub fn server_id(name: &str, root: &Path) -> String {
    // A fixed layout (name, NUL, root) rather than a JSON object whose key
    // order could vary.
    let mut key = Vec::with_capacity(name.len() + root.as_os_str().len() + 1);
    key.extend_from_slice(name.as_bytes());
    key.push(0);
    key.extend_from_slice(root.as_os_str().as_encoded_bytes());
    uuid::Uuid::new_v5(&SERVER_ID_NAMESPACE, &key).to_string()
}

/// How the registry behaves.
#[derive(Clone, Default)]
pub struct RegistryOptions {
    /// Start no server when a session opens, not even the session roots'
    /// own (also the config key `lazy`).
    pub lazy: bool,
    /// With `lazy`: listing a session's servers (`lsp/servers`) starts the
    /// session roots' own servers (not the nested ones). An agent written
    /// to the RFD sends requests only to `running` servers, so it would
    /// never start one otherwise. The CLI and its one-shot session leave it
    /// off: they start only the server they pick.
    pub start_when_listed: bool,
    pub recorder: Option<Recorder>,
    /// Most directory watches per root (tests use it to reach the limit); `None` = the OS's.
    pub max_watches: Option<usize>,
    /// A needed server that is not installed is installed (`--auto-install`;
    /// also the config key `auto_install`).
    pub auto_install: bool,
}

/// A watched session root and the sessions that use it.
struct WatchedRoot {
    watch: RootWatch,
    sessions: HashSet<String>,
    /// The task handing the watch's batches to the servers: it ends when
    /// the root is no longer watched.
    _dispatch: AbortOnDropHandle<()>,
}

/// A session's servers, once detected.
#[derive(Debug, Default)]
struct Attached {
    /// Every server of the session (ids).
    ids: Vec<String>,
    /// Those whose root is one of the session's roots: they start with it.
    top_level: Vec<String>,
    /// Each session root, resolved (what servers run on) and as the agent
    /// spelled it (what `workspacePath` says), longest resolved path first.
    roots: Vec<(PathBuf, PathBuf)>,
}

impl Attached {
    /// `root` (a resolved server root) as the session spells it: under the
    /// session root that holds it, so that an agent finds a file's server
    /// by its own paths (the RFD's FAQ) even through a symlinked cwd.
    /// Confinement still checks real paths; only the listing says this.
    fn spelled(&self, root: &Path) -> PathBuf {
        self.roots
            .iter()
            .find_map(|(resolved, spelled)| {
                root.strip_prefix(resolved).ok().map(|rest| {
                    if rest.as_os_str().is_empty() {
                        spelled.clone()
                    } else {
                        spelled.join(rest)
                    }
                })
            })
            .unwrap_or_else(|| root.to_path_buf())
    }
}

/// Why a server is being started, which decides what may stop to make room
/// under `max_running_servers` ([`Running::victim`], [`Running::idle_victim`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// A request (or `startAll`) uses it: noted as used.
    Used,
    /// A session root's own server, as the session opens or is listed.
    SessionRoot,
    /// A server shown to an agent that knows only the RFD
    /// ([`LspHost::start_shown`]): only a server unused for the idle time
    /// makes room, so servers started for one listing never stop each other.
    Shown,
}

type Detection = watch::Receiver<Option<Arc<Attached>>>;

struct Tables {
    servers: HashMap<String, Arc<Server>>,
    /// Session id → the detection of its servers (ids), filled in the background.
    sessions: HashMap<String, Detection>,
    /// Session id → the session (a server stopped and made anew serves the same ones).
    handles: HashMap<String, Arc<Session>>,
    /// Server id → sessions using it.
    users: HashMap<String, HashSet<String>>,
}

/// Whether a server in this state has (or is getting) a process.
fn is_live(state: ServerState) -> bool {
    matches!(
        state,
        ServerState::Starting
            | ServerState::Indexing
            | ServerState::Ready
            | ServerState::Restarting
    )
}

/// All servers of this proxy.
pub struct Registry {
    /// This registry, for the timers it spawns.
    me: Weak<Registry>,
    config: Config,
    options: RegistryOptions,
    limits: Limits,
    tables: RwLock<Tables>,
    /// Idle-stop timers by server id, replaced when a session comes back.
    idle: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    /// Watched roots by canonical path, shared by the sessions that name them.
    watches: Mutex<HashMap<PathBuf, WatchedRoot>>,
    /// Each server's use, for `max_running_servers` and the idle stop.
    running: Mutex<Running>,
    /// Held while a start is decided (count, make room, start): two starts
    /// cannot both pass the cap. Taken before `tables` and `running`.
    starting: Mutex<()>,
    /// Idle-stop timers of nested servers, by id.
    nested_timers: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    /// Servers being stopped to make room or after idling (awaited by `shutdown`).
    retiring: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Servers refused for `max_running_servers` since their last start
    /// (said once in the log; their entries say why).
    refused: Mutex<HashSet<String>>,
    /// The sessions' SCIP indexes, servers of their own (`crate::scip`).
    indexes: crate::scip::Indexes,
    /// Installs under way (`auto_install`), by server id: aborted by `shutdown`.
    installs: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    /// Servers found missing (by id) whose install or warning is still to
    /// be decided when their `Server` is made (`install.rs`).
    missing: Mutex<HashMap<String, install::Missing>>,
    /// The registry's root cancellation: cancelled once shutdown has begun
    /// ([`Registry::begin_shutdown`], [`Registry::shutdown`], a drop). No
    /// server starts or restarts after it, and [`Registry::tasks`] end.
    closing: CancellationToken,
    /// The registry's background tasks (a session's detection), each ending
    /// at `closing`; awaited by `shutdown`.
    tasks: TaskTracker,
}

impl Registry {
    pub fn new(config: Config, mut options: RegistryOptions) -> Arc<Registry> {
        options.lazy |= config.lazy;
        let indexes = crate::scip::Indexes::new(config.indexes.clone());
        options.auto_install |= config.auto_install;
        Arc::new_cyclic(|me| Registry {
            me: me.clone(),
            config,
            options,
            limits: Limits::default(),
            tables: RwLock::new(Tables {
                servers: HashMap::new(),
                sessions: HashMap::new(),
                handles: HashMap::new(),
                users: HashMap::new(),
            }),
            idle: Mutex::new(HashMap::new()),
            watches: Mutex::new(HashMap::new()),
            running: Mutex::new(Running::default()),
            starting: Mutex::new(()),
            nested_timers: Mutex::new(HashMap::new()),
            retiring: Mutex::new(Vec::new()),
            refused: Mutex::new(HashSet::new()),
            indexes,
            installs: Mutex::new(HashMap::new()),
            missing: Mutex::new(HashMap::new()),
            closing: CancellationToken::new(),
            tasks: TaskTracker::new(),
        })
    }

    fn read(&self) -> RwLockReadGuard<'_, Tables> {
        self.tables.read()
    }

    fn write(&self) -> RwLockWriteGuard<'_, Tables> {
        self.tables.write()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A server by id.
    pub fn server(&self, server_id: &str) -> Option<Arc<Server>> {
        self.read().servers.get(server_id).cloned()
    }

    /// Every server, in no particular order.
    pub fn all_servers(&self) -> Vec<Arc<Server>> {
        self.read().servers.values().cloned().collect()
    }

    /// A session's servers, once detection has finished.
    async fn session_servers(&self, session_id: &str) -> Option<Arc<Attached>> {
        let mut detection = self.read().sessions.get(session_id).cloned()?;
        let attached = detection.wait_for(Option::is_some).await.ok()?;
        attached.clone()
    }

    /// A session's servers if detection has finished.
    fn attached_now(&self, session_id: &str) -> Option<Arc<Attached>> {
        self.read()
            .sessions
            .get(session_id)
            .and_then(|d| d.borrow().clone())
    }

    /// The servers of `attached` for a file: for each server name, the one
    /// with the innermost root holding `path` that handles its extension;
    /// for a file under no root of theirs (a read-only root), the session
    /// roots' own servers for the extension.
    fn servers_for_file(&self, attached: &Attached, path: &Path) -> Vec<Arc<Server>> {
        let extension = path
            .extension()
            .map(|e| e.to_string_lossy().into_owned())
            .unwrap_or_default();
        let handling: Vec<Arc<Server>> = attached
            .ids
            .iter()
            .filter_map(|id| self.server(id))
            .filter(|s| s.spec().config.handles_extension(&extension))
            .collect();
        let mut best: HashMap<String, Arc<Server>> = HashMap::new();
        for server in handling.iter().filter(|s| path.starts_with(&s.spec().root)) {
            let name = server.spec().config.name.clone();
            let deeper = best.get(&name).is_none_or(|b| {
                server.spec().root.as_os_str().len() > b.spec().root.as_os_str().len()
            });
            if deeper {
                best.insert(name, Arc::clone(server));
            }
        }
        if best.is_empty() {
            return handling
                .into_iter()
                .filter(|s| attached.top_level.iter().any(|id| id == s.id()))
                .collect();
        }
        let mut servers: Vec<Arc<Server>> = best.into_values().collect();
        servers.sort_by(|a, b| a.id().cmp(b.id()));
        servers
    }

    /// Starts the idle servers of the files a request names (each file's
    /// innermost root), so that the nested root a request first touches
    /// gets its server.
    fn start_for_documents(&self, session: &Session, documents: &[NamedDocument]) {
        let Some(attached) = self.attached_now(session.id()) else {
            return;
        };
        // Only idle servers are started: with none (the common case once a
        // session's servers run), the URIs need not be parsed and resolved.
        let any_idle = attached
            .ids
            .iter()
            .filter_map(|id| self.server(id))
            .any(|server| server.state() == ServerState::Idle);
        if !any_idle {
            return;
        }
        for document in documents {
            let Some(path) = document.file_path() else {
                continue;
            };
            let path = path.canonicalize().unwrap_or(path);
            for server in self.servers_for_file(&attached, &path) {
                if server.status().state == ServerState::Idle {
                    if let Err(e) = self.start_server(server.id()) {
                        tracing::info!(error = %e, "not started for a named document");
                    }
                }
            }
        }
    }

    /// Finds (or creates) the server `config` at `root`.
    fn server_for(&self, config: &ServerConfig, root: &Path, program: PathBuf) -> Arc<Server> {
        let id = server_id(&config.name, root);
        let mut tables = self.write();
        Arc::clone(tables.servers.entry(id.clone()).or_insert_with(|| {
            Server::new(ServerSpec {
                server_id: id,
                config: Arc::new(config.clone()),
                root: root.to_path_buf(),
                program,
                limits: self.limits,
                recorder: self.options.recorder.clone(),
                closing: self.closing.clone(),
            })
        }))
    }

    /// Detects and attaches a session's servers (runs off the async threads).
    fn attach(self: &Arc<Self>, session: &Arc<Session>) -> Attached {
        let mut ids = Vec::new();
        let mut top_level = Vec::new();
        let mut roots = Vec::new();
        let mut config = self.config.clone();
        for spelled in session.roots() {
            let root = spelled.canonicalize().unwrap_or_else(|_| spelled.clone());
            roots.push((root.clone(), spelled.clone()));
            self.watch_root(&root, session.id());
            if let Err(e) = config.load_project(&root) {
                tracing::warn!(error = %e, "ignoring the project's config file");
            }
            // One primary per language, and its companions (lsp::primary);
            // where each program comes from (lsp::program).
            let programs: HashMap<String, Program> = config
                .enabled_servers()
                .filter_map(|s| find_program(&config, s).map(|p| (s.name.clone(), p)))
                .collect();
            let roles = primary::roles(&config, |s| programs.contains_key(&s.name));
            for found in detect(&root, &config) {
                let Some(server_config) = config.server(&found.server) else {
                    continue;
                };
                let role = roles.get(&found.server);
                let program = match (programs.get(&found.server), role) {
                    (Some(program), Some(role)) if role.runs() => program.path.clone(),
                    // Needed where a marker of its says so; files of its
                    // extensions alone (a Cargo.toml for taplo) do not.
                    (None, Some(Role::NotInstalled { .. }))
                        if matches!(found.reason, DetectReason::Marker(_)) =>
                    {
                        self.missing_server(&config, server_config, &found.root)
                    }
                    (_, role) => {
                        tracing::debug!(server = %found.server, role = ?role, "skipped");
                        continue;
                    }
                };
                // project_code: the switches of the server at this root.
                let effective = config.effective_server(server_config, &found.root, &program);
                let server = self.server_for(&effective, &found.root, program);
                if let Some(fresh) = self.take_missing(&server, &config, server_config) {
                    self.begin_install(fresh);
                }
                let id = server.id().to_string();
                let is_top = found.root == root;
                self.running.lock().attached(&id, is_top);
                if is_top && !top_level.contains(&id) {
                    top_level.push(id.clone());
                }
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
        {
            let mut tables = self.write();
            tables
                .handles
                .insert(session.id().to_string(), Arc::clone(session));
            for id in &ids {
                tables
                    .users
                    .entry(id.clone())
                    .or_default()
                    .insert(session.id().to_string());
            }
            // What each server may read follows the sessions it serves (a
            // reload may have moved the roots away from some).
            for (id, server) in &tables.servers {
                if ids.contains(id) {
                    server.attach_session(session);
                } else {
                    server.detach_session(session.id());
                }
            }
        }
        let mut idle = self.idle.lock();
        for id in &ids {
            if let Some(timer) = idle.remove(id) {
                timer.abort();
            }
        }
        roots.sort_by_key(|(resolved, _)| std::cmp::Reverse(resolved.as_os_str().len()));
        Attached {
            ids,
            top_level,
            roots,
        }
    }

    /// Starts the session roots' own servers of a session (a refusal for
    /// the cap is logged once by the start and shown in the entry).
    fn start_top_level(&self, attached: &Attached) {
        for id in &attached.top_level {
            if let Err(e) = self.start_unasked(id, Start::SessionRoot) {
                tracing::debug!(error = %e, "session root's server not started");
            }
        }
    }

    /// [`LspHost::start_shown`]: every server the session's listing shows,
    /// the session roots' own first, then the others, most recently used
    /// first, each only while there is room (or a server unused for the
    /// idle time to stop): what is shown `starting` is being started, and
    /// what cannot start for the cap is shown `not_running` with why.
    async fn start_shown_servers(&self, session: &Session) {
        let Some(attached) = self.session_servers(session.id()).await else {
            return;
        };
        self.start_top_level(&attached);
        let nested: Vec<String> = attached
            .ids
            .iter()
            .filter(|id| !attached.top_level.contains(id))
            .cloned()
            .collect();
        let ordered = self.running.lock().most_recent_first(&nested);
        for id in ordered {
            if let Err(e) = self.start_unasked(&id, Start::Shown) {
                tracing::debug!(error = %e, "shown server not started");
            }
        }
    }

    /// Watches `root` for `session` (one watch per root, shared).
    fn watch_root(self: &Arc<Self>, root: &Path, session: &str) {
        let mut watches = self.watches.lock();
        if let Some(watched) = watches.get_mut(root) {
            watched.sessions.insert(session.to_string());
            return;
        }
        let options = WatchOptions {
            skip_dirs: self.config.skip_dirs.clone(),
            max_watches: self.options.max_watches,
            ..WatchOptions::default()
        };
        let (tx, rx) = mpsc::unbounded_channel();
        match RootWatch::start(root, options, tx) {
            Ok(watch) => {
                let dispatch = tokio::spawn(dispatch(Arc::downgrade(self), root.to_path_buf(), rx));
                watches.insert(
                    root.to_path_buf(),
                    WatchedRoot {
                        watch,
                        sessions: HashSet::from([session.to_string()]),
                        _dispatch: AbortOnDropHandle::new(dispatch),
                    },
                );
            }
            // Without a watch, the check before each request still keeps
            // answers fresh.
            Err(e) => tracing::warn!(root = %root.display(), error = %e, "not watching"),
        }
    }

    fn unwatch_session(&self, session: &str) {
        let mut watches = self.watches.lock();
        watches.retain(|_, watched| {
            watched.sessions.remove(session);
            !watched.sessions.is_empty()
        });
    }

    /// Watched roots whose watching is degraded, that contain `root`.
    fn degraded_roots_over(&self, root: &Path) -> Vec<String> {
        let watches = self.watches.lock();
        watches
            .iter()
            .filter(|(watched, w)| w.watch.degraded() && root.starts_with(watched))
            .map(|(watched, _)| watched.display().to_string())
            .collect()
    }
}

impl Registry {
    /// [`LspHost::servers`] without `memoryBytes` and `degradedRoots`.
    pub async fn servers_brief(&self, session: &Session) -> Vec<ServerEntry> {
        let (mut entries, indexes) =
            tokio::join!(self.entries(session, false), self.indexes.entries(session));
        entries.extend(indexes);
        entries
    }

    /// The session's entries; `full`: with `memoryBytes` and `degradedRoots`.
    async fn entries(&self, session: &Session, full: bool) -> Vec<ServerEntry> {
        let Some(attached) = self.session_servers(session.id()).await else {
            return Vec::new();
        };
        if self.options.start_when_listed {
            self.start_top_level(&attached);
        }
        let servers: Vec<Arc<Server>> = {
            let tables = self.read();
            attached
                .ids
                .iter()
                .filter_map(|id| tables.servers.get(id).cloned())
                .collect()
        };
        let limit = self.config.max_running_servers;
        let mut entries: Vec<ServerEntry> = servers
            .iter()
            .map(|s| {
                let mut entry = s.entry_with(full);
                if full {
                    entry.meta.acp_lsp.degraded_roots = self.degraded_roots_over(&s.spec().root);
                }
                entry.workspace_path = attached.spelled(&s.spec().root).display().to_string();
                if s.state() == ServerState::Idle && self.refused_for_cap(s.id()) {
                    entry.meta.acp_lsp.state_reason = Some(StateReason::ServerLimit { limit });
                }
                entry
            })
            .collect();
        entries.sort_by(|a, b| (&a.name, &a.workspace_path).cmp(&(&b.name, &b.workspace_path)));
        entries
    }
}

impl LspHost for Registry {
    async fn servers(&self, session: &Session) -> Vec<ServerEntry> {
        let (mut entries, indexes) =
            tokio::join!(self.entries(session, true), self.indexes.entries(session));
        entries.extend(indexes);
        entries
    }

    async fn request(&self, call: HostCall) -> Result<HostReply, GateError> {
        let route = self.route(call.session(), call.server_id()).await?;
        // The gate's checks against this server; then the request to send.
        let call = call.route(&route)?;
        if self.indexes.is_index(&call.server_id) {
            return self.indexes.request(call, self).await;
        }
        // In flight from here: not stopped for idleness or to make room.
        let _use = InUse::begin(self, &call.server_id);
        // The server it names starts if idle (first: it must not lose its
        // place under the cap to the others); then the nested roots of the
        // files it names get their servers.
        self.start_server(&call.server_id)?;
        self.start_for_documents(&call.session, &call.documents);
        let server = self
            .server(&call.server_id)
            .ok_or_else(|| GateError::UnknownServer {
                server_id: call.server_id.clone(),
                servers: Vec::new(),
            })?;
        // Changes already seen on disk reach the servers first, even for files
        // the request does not name.
        let settlers: Vec<_> = {
            let watches = self.watches.lock();
            watches
                .values()
                .filter(|w| w.sessions.contains(call.session.id().as_str()))
                .map(|w| w.watch.settler())
                .collect()
        };
        for settler in settlers {
            settler.settle(SETTLE_TIMEOUT).await;
        }
        // Built only when its line will be written: three strings and a
        // clock read a request otherwise.
        let mut log = tracing::enabled!(tracing::Level::DEBUG).then(|| RequestLog {
            method: call.method.clone(),
            server: server.spec().config.name.clone(),
            session: call.session.id().to_string(),
            started: std::time::Instant::now(),
            outcome: "abandoned",
        });
        let reply = server.request(call).await;
        if let Some(log) = &mut log {
            log.outcome = match &reply {
                Ok(_) => "ok",
                Err(error) => error.reason(),
            };
        }
        reply
    }

    async fn start_shown(&self, session: &Session) {
        self.start_shown_servers(session).await;
    }

    async fn start_all(&self, session: &Session) {
        let Some(attached) = self.session_servers(session.id()).await else {
            return;
        };
        // Session roots' servers first: they are never stopped to make room.
        self.start_top_level(&attached);
        for id in &attached.ids {
            if let Err(e) = self.start_server(id) {
                tracing::info!(error = %e, "startAll: not started");
            }
        }
    }

    fn session_opened(self: &Arc<Self>, session: &Arc<Session>) {
        self.open_indexes(session);
        let (tx, rx) = watch::channel(None);
        self.write().sessions.insert(session.id().to_string(), rx);
        let registry = Arc::clone(self);
        let session = Arc::clone(session);
        self.spawn_tracked(async move {
            let worker = Arc::clone(&registry);
            let detected = tokio::task::spawn_blocking(move || worker.attach(&session)).await;
            let attached = detected.unwrap_or_default();
            if !registry.options.lazy {
                registry.start_top_level(&attached);
            }
            let _ = tx.send(Some(Arc::new(attached)));
        });
    }

    fn session_closed(self: &Arc<Self>, session: &Arc<Session>) {
        self.indexes.session_closed(session);
        self.unwatch_session(session.id());
        let orphaned: Vec<String> = {
            let mut tables = self.write();
            tables.sessions.remove(session.id().as_str());
            tables.handles.remove(session.id().as_str());
            for server in tables.servers.values() {
                server.detach_session(session.id());
            }
            let mut orphaned = Vec::new();
            for (id, users) in tables.users.iter_mut() {
                if users.remove(session.id().as_str()) && users.is_empty() {
                    orphaned.push(id.clone());
                }
            }
            orphaned
        };
        let grace = Duration::from_millis(self.config.idle_grace_ms);
        let mut idle = self.idle.lock();
        for id in orphaned {
            let registry = Arc::clone(self);
            let server_id = id.clone();
            let timer = tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                let still_unused = registry
                    .read()
                    .users
                    .get(&server_id)
                    .is_none_or(HashSet::is_empty);
                if still_unused {
                    let server = registry.write().servers.remove(&server_id);
                    registry.running.lock().forget(&server_id);
                    if let Some(timer) = registry.nested_timers.lock().remove(&server_id) {
                        timer.abort();
                    }
                    if let Some(server) = server {
                        tracing::info!(server = %server.spec().config.name, "stopping idle server");
                        server.stop().await;
                    }
                }
            });
            if let Some(old) = idle.insert(id, timer) {
                old.abort();
            }
        }
    }

    async fn ensure_ready(&self, session: &Session, server_id: &str, wait: Duration) {
        // Only a server of this session (`Registry::route` refuses others).
        if self.route(session, server_id).await.is_err() {
            return;
        }
        let Some(server) = self.server(server_id) else {
            return;
        };
        // Within max_running_servers: a refusal is reported by the request
        // that follows.
        let _ = self.start_server(server_id);
        let _ = tokio::time::timeout(
            wait,
            server.wait_for_status(|s| {
                s.accepts_waiting()
                    || matches!(
                        s.state,
                        crate::gate::ServerState::Failed
                            | crate::gate::ServerState::Stopped
                            | crate::gate::ServerState::NotInstalled
                    )
            }),
        )
        .await;
    }

    async fn diagnostics(
        &self,
        session: &Session,
        documents: Vec<(String, PathBuf)>,
        wait: Duration,
    ) -> Result<Vec<PublishedDiagnostics>, GateError> {
        let attached = self.session_servers(session.id()).await.unwrap_or_default();
        if documents.is_empty() {
            let servers: Vec<Arc<Server>> = attached
                .ids
                .iter()
                .filter_map(|id| self.server(id))
                .collect();
            return Ok(servers.iter().flat_map(|s| s.diagnostics()).collect());
        }
        // Every (document, server of its innermost root that handles its
        // extension), started if idle, waited for together.
        let mut pairs = Vec::new();
        for (uri, path) in &documents {
            let real = path.canonicalize().unwrap_or_else(|_| path.clone());
            for server in self.servers_for_file(&attached, &real) {
                self.start_server(server.id())?;
                // The live one (a start may have replaced nothing, but a
                // retired server is replaced by a fresh one).
                let server = self.server(server.id()).unwrap_or(server);
                pairs.push((uri, path, server));
            }
        }
        let waits = pairs
            .iter()
            .map(|(uri, path, server)| server.fresh_diagnostics(uri, path, wait));
        let mut entries = Vec::new();
        for outcome in futures::future::join_all(waits).await {
            entries.push(outcome?);
        }
        Ok(entries)
    }

    fn text_written(&self, session: &Arc<Session>, path: &Path, text: &str) {
        let attached = self.attached_now(session.id());
        for id in attached.iter().flat_map(|a| a.ids.iter()) {
            if let Some(server) = self.server(id) {
                server.text_written(path, text);
            }
        }
    }
}

impl Registry {
    /// Routing: `server_id` serves `session` (a server of another session is
    /// unknown here too: sessions do not learn of each other's servers), and
    /// what the gate checks a request to it against. The shared daemon
    /// answers its clients' `route` with it.
    pub async fn route(&self, session: &Session, server_id: &str) -> Result<Route, GateError> {
        let unknown = || GateError::UnknownServer {
            server_id: server_id.into(),
            servers: Vec::new(),
        };
        if self.indexes.is_index(server_id) {
            return self
                .indexes
                .route(session, server_id)
                .await
                .ok_or_else(unknown);
        }
        // A server of another session is unknown here too: sessions do not
        // learn of each other's servers.
        let attached = self.session_servers(session.id()).await.unwrap_or_default();
        if !attached.ids.iter().any(|id| id == server_id) {
            return Err(unknown());
        }
        let server = self.server(server_id).ok_or_else(unknown)?;
        let config = &server.spec().config;
        Ok(Route {
            execute_commands: config.execute_commands.clone(),
            extension_methods: config.extension_methods.clone(),
            request_timeout: config.request_timeout(),
        })
    }
}

/// Hands a root's change batches to the servers below it, in order.
async fn dispatch(
    registry: Weak<Registry>,
    root: PathBuf,
    mut batches: mpsc::UnboundedReceiver<Delivery>,
) {
    // `_done` is dropped when the batch has been handled, which releases
    // requests waiting in `Settler::settle`.
    while let Some(Delivery { batch, done: _done }) = batches.recv().await {
        let Some(registry) = registry.upgrade() else {
            return;
        };
        let servers = registry.all_servers();
        match batch {
            WatchBatch::Changes(changes) => {
                for server in servers {
                    let server_root = &server.spec().root;
                    let theirs: Vec<(PathBuf, FileChange)> = changes
                        .iter()
                        .filter(|(path, _)| path.starts_with(server_root))
                        .cloned()
                        .collect();
                    if !theirs.is_empty() {
                        server.on_file_changes(&theirs).await;
                    }
                }
            }
            WatchBatch::Rescan => {
                for server in servers.iter().filter(|s| s.spec().root.starts_with(&root)) {
                    server.rescan().await;
                }
            }
        }
    }
}

/// A request to one server in flight: counted in [`Running`] until dropped.
struct InUse<'a> {
    registry: &'a Registry,
    id: String,
}

impl<'a> InUse<'a> {
    fn begin(registry: &'a Registry, id: &str) -> InUse<'a> {
        registry.running.lock().begin(id);
        InUse {
            registry,
            id: id.to_string(),
        }
    }
}

impl Drop for InUse<'_> {
    fn drop(&mut self) {
        self.registry.running.lock().end(&self.id);
    }
}

/// The `debug` line of one `lsp/request`, written when the request ends,
/// however it ends (a deadline or a cancel drops it: "abandoned").
struct RequestLog {
    method: String,
    server: String,
    session: String,
    started: std::time::Instant,
    outcome: &'static str,
}

impl Drop for RequestLog {
    fn drop(&mut self) {
        tracing::debug!(
            session = %self.session,
            server = %self.server,
            method = %self.method,
            outcome = self.outcome,
            ms = self.started.elapsed().as_millis() as u64,
            "lsp/request"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_ids_are_stable_and_distinct() {
        let a = server_id("rust-analyzer", Path::new("/ws/a"));
        assert_eq!(a, server_id("rust-analyzer", Path::new("/ws/a")));
        assert_ne!(a, server_id("rust-analyzer", Path::new("/ws/b")));
        assert_ne!(a, server_id("clangd", Path::new("/ws/a")));
        // Fixed across runs and builds: a recorded fixture depends on it.
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "5");
    }
}
