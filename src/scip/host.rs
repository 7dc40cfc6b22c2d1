//! The indexes as servers of a session: found when a session opens (its
//! roots' conventional places and the configured paths), loaded off the
//! async threads, listed in `lsp/servers` as servers of their own
//! (`name: "scip"`, `running` once loaded, capabilities limited to what
//! an index answers), and asked through the same `lsp/request`.
//!
//! A loaded index is shared by every session that finds the same file (and
//! reloaded when the file changes); each session sees it under the same
//! `serverId`. An answer says where it came from in
//! `_meta["acp-lsp"].source`: `scip@<commit>` from the index alone, the
//! live server's name when the index declined and the live server answered,
//! `scip@<commit>+<name>` when index results for unchanged files were
//! merged with the live server's for the others.

use super::answer::{self, Answer, Answering, Decline, Method};
use super::config::IndexesConfig;
use super::index::Index;
use super::load::{self, IndexMeta, Loaded};
use super::sidecar::{self, Sidecar};
use super::verify::{Truth, Verdict};
use crate::gate::{
    AcpLspEntry, EntryMeta, Forward, GateError, HostCall, HostReply, NotRunning, Route,
    ServerEntry, ServerId, ServerState, Session,
};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;

/// The `name` of an index's entry.
pub const SERVER_NAME: &str = "scip";
/// How long `lsp/servers` waits for a session's indexes to load before
/// listing the ones still loading as `starting`.
pub const LOAD_WAIT: Duration = Duration::from_secs(2);
/// The deadline the gate gives a request to an index (one forwarded to the
/// live server takes the live server's time).
pub const INDEX_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Documents sampled at load to tell an index of another project.
pub const SAMPLED_DOCUMENTS: usize = 8;
/// LSP's RequestFailed: what an index that cannot answer says.
const REQUEST_FAILED: i64 = -32803;
/// LSP's MethodNotFound.
const METHOD_NOT_FOUND: i64 = -32601;

/// Namespace of index server ids (UUID v5 of the index file and project root).
const INDEX_ID_NAMESPACE: uuid::Uuid = uuid::Uuid::from_bytes([
    0x2c, 0x9e, 0x51, 0x0a, 0x7d, 0x33, 0x4f, 0x86, 0xb1, 0x4e, 0x05, 0xd2, 0x6a, 0x19, 0xc8, 0x73,
]);

/// The server id of the index `file` serving `root`.
pub fn index_server_id(file: &Path, root: &Path) -> String {
    let mut key = Vec::new();
    key.extend_from_slice(file.as_os_str().as_encoded_bytes());
    key.push(0);
    key.extend_from_slice(root.as_os_str().as_encoded_bytes());
    uuid::Uuid::new_v5(&INDEX_ID_NAMESPACE, &key).to_string()
}

/// The live server an index works beside.
#[derive(Debug, Clone)]
pub struct LiveServer {
    pub server_id: ServerId,
    pub name: String,
    /// Its answers are complete (`ready`).
    pub ready: bool,
}

/// What the indexes need of the live servers (the registry implements it).
pub trait Live: Send + Sync {
    /// The session's live server for files under `root` with `extension`
    /// (any of the session's servers under `root` when `None`).
    fn live_server(
        &self,
        session: &Session,
        root: &Path,
        extension: Option<&str>,
    ) -> Option<LiveServer>;

    /// Sends `call` to a live server.
    fn ask(&self, call: HostCall) -> BoxFuture<'_, Result<HostReply, GateError>>;
}

/// An index loaded and ready to answer.
pub struct Ready {
    pub meta: IndexMeta,
    pub index: Index,
    pub truth: Truth,
    pub sidecar: Sidecar,
    /// `scip@<commit>`.
    pub source: String,
    pub language_ids: Vec<String>,
    pub extensions: Vec<String>,
    pub dropped: load::Dropped,
    pub load_time: Duration,
}

/// One index file as a server.
pub struct Served {
    pub id: ServerId,
    pub file: PathBuf,
    /// The project's directory on this machine.
    pub root: PathBuf,
    /// The directory `root` is relative to (it must stay inside it).
    base: PathBuf,
    /// `None` while loading.
    state: OnceLock<Result<Arc<Ready>, String>>,
}

impl Served {
    /// The loaded index, or why not (`None`: still loading).
    pub fn state(&self) -> Option<&Result<Arc<Ready>, String>> {
        self.state.get()
    }

    fn entry(&self) -> ServerEntry {
        let (status, last_error, ready) = match self.state() {
            None => (ServerState::Starting, None, None),
            Some(Ok(ready)) => (ServerState::Ready, None, Some(ready)),
            Some(Err(e)) => (ServerState::Failed, Some(e.clone()), None),
        };
        let capabilities = match ready {
            Some(ready) => capabilities(ready),
            None => json!({}),
        };
        let language_ids = ready.map(|r| r.language_ids.clone()).unwrap_or_default();
        ServerEntry {
            server_id: self.id.clone(),
            name: SERVER_NAME.to_string(),
            workspace_path: self.root.display().to_string(),
            language_id: language_ids.first().cloned().unwrap_or_default(),
            file_extensions: ready.map(|r| r.extensions.clone()).unwrap_or_default(),
            state: status.wire(),
            capabilities: serde_json::value::to_raw_value(&capabilities)
                .expect("BUG: a JSON value serializes"),
            meta: EntryMeta {
                acp_lsp: AcpLspEntry {
                    status,
                    progress: None,
                    last_error,
                    language_ids,
                    version: ready.map(|r| r.source.clone()),
                    position_encoding: "utf-16".to_string(),
                    execute_commands: Vec::new(),
                    extension_methods: Vec::new(),
                    registrations: Vec::new(),
                    pid: None,
                    restarts: 0,
                    memory_bytes: ready.map(|r| r.index.heap_bytes() as u64),
                    degraded_roots: Vec::new(),
                    dropped: None,
                    companion: false,
                    install_command: None,
                    state_reason: None,
                },
            },
        }
    }

    fn not_running(&self, waited: Option<Duration>) -> GateError {
        let entry = self.entry();
        GateError::ServerNotRunning {
            server: Box::new(NotRunning {
                server_id: self.id.clone(),
                name: SERVER_NAME.to_string(),
                workspace_path: entry.workspace_path,
                status: entry.meta.acp_lsp.status,
                waited_ms: waited.map(|w| w.as_millis() as u64),
                last_error: entry.meta.acp_lsp.last_error,
            }),
            servers: Vec::new(),
        }
    }
}

/// What an index can answer, as LSP server capabilities.
fn capabilities(ready: &Ready) -> Value {
    let mut caps = json!({
        "positionEncoding": "utf-16",
        "definitionProvider": true,
        "referencesProvider": true,
        "documentSymbolProvider": true,
        "workspaceSymbolProvider": true,
    });
    if ready.index.has_documentation() {
        caps["hoverProvider"] = json!(true);
    }
    if ready.index.has_implementations() {
        caps["implementationProvider"] = json!(true);
    }
    caps
}

/// One session's indexes: found and loading, then loaded.
struct SessionIndexes {
    served: watch::Receiver<Arc<Vec<Arc<Served>>>>,
    /// Whether every index of the session has settled (loaded or failed).
    settled: watch::Receiver<bool>,
    _task: AbortOnDropHandle<()>,
}

/// Every session's indexes.
pub struct Indexes {
    config: IndexesConfig,
    /// Loaded indexes by (file, project root, file stamp), shared by sessions.
    loaded: Arc<Mutex<HashMap<LoadKey, Arc<Served>>>>,
    sessions: Mutex<HashMap<String, SessionIndexes>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LoadKey {
    file: PathBuf,
    root: PathBuf,
    size: u64,
    modified: Option<SystemTime>,
}

impl Indexes {
    pub fn new(config: IndexesConfig) -> Indexes {
        Indexes {
            config,
            loaded: Arc::new(Mutex::new(HashMap::new())),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Finds and loads the indexes of a session's roots, in the background
    /// (must be called inside a tokio runtime). `for_root` gives a root's
    /// configuration (a trusted project file may add to the user's); the
    /// configuration given to [`Indexes::new`] when it gives `None`.
    pub fn session_opened(
        &self,
        session: &Arc<Session>,
        for_root: impl Fn(&Path) -> Option<IndexesConfig> + Send + 'static,
    ) {
        let (served_tx, served_rx) = watch::channel(Arc::new(Vec::new()));
        let (settled_tx, settled_rx) = watch::channel(false);
        let config = self.config.clone();
        let loaded = Arc::clone(&self.loaded);
        let roots: Vec<PathBuf> = session.roots().to_vec();
        let task = tokio::spawn(async move {
            let found = tokio::task::spawn_blocking(move || {
                discover(&roots, &loaded, |root| {
                    for_root(root).unwrap_or_else(|| config.clone())
                })
            })
            .await
            .unwrap_or_default();
            served_tx.send_replace(Arc::new(found.iter().map(|(s, _)| Arc::clone(s)).collect()));
            let loads = found.into_iter().map(|(served, limits)| {
                tokio::task::spawn_blocking(move || {
                    served.state.get_or_init(|| load_served(&served, limits));
                })
            });
            futures::future::join_all(loads).await;
            settled_tx.send_replace(true);
        });
        self.sessions.lock().insert(
            session.id().to_string(),
            SessionIndexes {
                served: served_rx,
                settled: settled_rx,
                _task: AbortOnDropHandle::new(task),
            },
        );
    }

    /// Forgets a session (its load stops if unfinished) and the loaded
    /// indexes no session uses any more.
    pub fn session_closed(&self, session: &Session) {
        self.sessions.lock().remove(session.id().as_str());
        let mut loaded = self.loaded.lock();
        loaded.retain(|_, served| Arc::strong_count(served) > 1);
    }

    /// The session's indexes, after waiting up to `wait` for them to settle.
    async fn served(&self, session: &Session, wait: Duration) -> Vec<Arc<Served>> {
        let (mut served, mut settled) = {
            let sessions = self.sessions.lock();
            let Some(s) = sessions.get(session.id().as_str()) else {
                return Vec::new();
            };
            (s.served.clone(), s.settled.clone())
        };
        let _ = tokio::time::timeout(wait, settled.wait_for(|s| *s)).await;
        let list = served.borrow_and_update().clone();
        list.to_vec()
    }

    /// The session's index entries for `lsp/servers`.
    pub async fn entries(&self, session: &Session) -> Vec<ServerEntry> {
        self.served(session, LOAD_WAIT)
            .await
            .iter()
            .map(|s| s.entry())
            .collect()
    }

    /// Whether `server_id` is one of this session's indexes (waiting for
    /// discovery, not for loads).
    pub async fn route(&self, session: &Session, server_id: &str) -> Option<Route> {
        let served = self.served(session, LOAD_WAIT).await;
        served.iter().any(|s| *s.id == *server_id).then(|| Route {
            execute_commands: Vec::new(),
            extension_methods: Vec::new(),
            request_timeout: INDEX_REQUEST_TIMEOUT,
        })
    }

    /// Whether `server_id` names an index (of any session): the registry
    /// sends such requests here.
    pub fn is_index(&self, server_id: &str) -> bool {
        self.loaded.lock().values().any(|s| *s.id == *server_id)
            || self.sessions.lock().values().any(|s| {
                s.served
                    .borrow()
                    .iter()
                    .any(|served| *served.id == *server_id)
            })
    }

    /// The ready index of `session` that covers a document (for the MCP
    /// tools while a live server loads): its server id.
    pub async fn covering(&self, session: &Session, path: &Path) -> Option<ServerId> {
        let served = self.served(session, LOAD_WAIT).await;
        served
            .iter()
            .filter(|s| path.starts_with(&s.root))
            .find(|s| {
                let Some(Ok(ready)) = s.state() else {
                    return false;
                };
                let relative = path.strip_prefix(&s.root).ok().and_then(|r| r.to_str());
                relative.is_some_and(|r| ready.index.document(r).is_some())
            })
            .map(|s| s.id.clone())
    }

    /// Answers one request to an index.
    pub async fn request<L: Live + ?Sized>(
        &self,
        call: Forward,
        live: &L,
    ) -> Result<HostReply, GateError> {
        let wait = call.wait_until_ready.unwrap_or_default();
        let started = Instant::now();
        let served = self
            .served(&call.session, wait.max(LOAD_WAIT))
            .await
            .into_iter()
            .find(|s| *s.id == *call.server_id)
            .ok_or_else(|| GateError::UnknownServer {
                server_id: call.server_id.clone(),
                servers: Vec::new(),
            })?;
        let ready = match served.state() {
            Some(Ok(ready)) => Arc::clone(ready),
            _ => return Err(served.not_running(call.wait_until_ready.map(|_| started.elapsed()))),
        };
        let params: Value = match &call.params {
            Some(p) => serde_json::from_str(p.get())
                .map_err(|e| GateError::InvalidParams(e.to_string()))?,
            None => Value::Null,
        };
        let Some(method) = Method::parse(&call.method, &params) else {
            return Err(server_error(
                METHOD_NOT_FOUND,
                &format!(
                    "an index answers only {}, {}, {}, {}, {} and {}",
                    answer::DEFINITION,
                    answer::REFERENCES,
                    answer::HOVER,
                    answer::IMPLEMENTATION,
                    answer::DOCUMENT_SYMBOL,
                    answer::WORKSPACE_SYMBOL
                ),
                json!({"reason": "not_answered_by_index", "method": call.method}),
            ));
        };
        let answered = {
            let ready = Arc::clone(&ready);
            let session = Arc::clone(&call.session);
            let method = method.clone();
            let params = params.clone();
            tokio::task::spawn_blocking(move || {
                let allowed = |p: &Path| session.confinement().contains(p);
                Answering::new(&ready.index, &ready.truth, &allowed).answer(&method, &params)
            })
            .await
            .map_err(|e| GateError::Internal(format!("the index's answer failed: {e}")))?
        };
        let extension = params
            .pointer("/textDocument/uri")
            .and_then(Value::as_str)
            .and_then(|uri| uri.rsplit_once('.').map(|(_, e)| e.to_string()))
            .filter(|e| !e.contains('/'));
        let live_server = live.live_server(&call.session, &served.root, extension.as_deref());
        let ready_live = live_server.clone().filter(|l| l.ready);
        match answered {
            Ok(answer) if answer.uncovered.is_empty() || ready_live.is_none() => Ok(reply(
                &answer.result,
                Meta::index(&ready, &served, &answer, live_server),
            )),
            Ok(answer) => {
                let live_server = ready_live.expect("BUG: checked just above");
                let live_reply = live.ask(forwarded(&call, &live_server, None)).await?;
                let merged = merge(&answer, &live_reply.result);
                let meta = Meta::merged(&ready, &served, &live_server);
                Ok(reply(&merged, meta))
            }
            Err(decline) => match ready_live {
                Some(live_server) => {
                    let live_reply = live.ask(forwarded(&call, &live_server, None)).await?;
                    let meta = Meta::forwarded(&served, &decline, &live_server);
                    Ok(HostReply {
                        result: live_reply.result,
                        meta: Some(to_raw(&meta)),
                    })
                }
                // A caller that waits for an answer (`waitUntilReady`) waits
                // for the live server instead of hearing the index decline.
                None => match (live_server, call.wait_until_ready) {
                    (Some(live_server), Some(wait)) => {
                        let left = Some(wait.saturating_sub(started.elapsed()));
                        let live_reply = live.ask(forwarded(&call, &live_server, left)).await?;
                        let meta = Meta::forwarded(&served, &decline, &live_server);
                        Ok(HostReply {
                            result: live_reply.result,
                            meta: Some(to_raw(&meta)),
                        })
                    }
                    (live_server, _) => Err(declined(&decline, live_server.as_ref())),
                },
            },
        }
    }
}

/// The indexes of `roots` with the limits of their load: already loaded
/// ones reused, new ones made (not loaded yet).
fn discover(
    roots: &[PathBuf],
    loaded: &Mutex<HashMap<LoadKey, Arc<Served>>>,
    config_for: impl Fn(&Path) -> IndexesConfig,
) -> Vec<(Arc<Served>, load::LoadLimits)> {
    let mut found: Vec<(Arc<Served>, load::LoadLimits)> = Vec::new();
    for root in roots {
        let base = root.canonicalize().unwrap_or_else(|_| root.clone());
        let config = config_for(&base);
        for (file, base) in config.files_for(&base) {
            let file = file.canonicalize().unwrap_or(file);
            let project = project_root(&file, &base);
            let Ok(metadata) = std::fs::metadata(&file) else {
                continue;
            };
            let key = LoadKey {
                file: file.clone(),
                root: project.clone(),
                size: metadata.len(),
                modified: metadata.modified().ok(),
            };
            let served = Arc::clone(loaded.lock().entry(key).or_insert_with(|| {
                Arc::new(Served {
                    id: index_server_id(&file, &project).into(),
                    file: file.clone(),
                    root: project.clone(),
                    base: base.clone(),
                    state: OnceLock::new(),
                })
            }));
            if !found.iter().any(|(s, _)| s.id == served.id) {
                found.push((served, config.limits));
            }
        }
    }
    found
}

/// The project directory of an index found for `base`: `base` joined with
/// the sidecar's `root` (`base` when there is no usable sidecar).
fn project_root(file: &Path, base: &Path) -> PathBuf {
    match sidecar::read(file) {
        Ok(checked) if checked.sidecar.root != "." => base.join(&checked.sidecar.root),
        _ => base.to_path_buf(),
    }
}

/// Loads one index (blocking): the tables, the sidecar, the sampled check.
fn load_served(served: &Served, limits: load::LoadLimits) -> Result<Arc<Ready>, String> {
    let started = Instant::now();
    let root = served
        .root
        .canonicalize()
        .map_err(|e| format!("the project directory {}: {e}", served.root.display()))?;
    // The sidecar's root is inside the base by its checks; a symlink could
    // still lead out of it.
    if !root.starts_with(&served.base) {
        return Err(format!(
            "the project directory {} leads outside its base",
            served.root.display()
        ));
    }
    let checked = sidecar::read(&served.file).map_err(|e| e.to_string())?;
    let expected = load::Expected {
        bytes: checked.sidecar.index_bytes,
        sha256: checked.index_hash,
    };
    let Loaded {
        meta,
        index,
        dropped,
        duplicate,
    } = load::load(&served.file, limits, Some(expected)).map_err(|e| e.to_string())?;
    let (sidecar, hashes) = (checked.sidecar, checked.documents);
    let truth = Truth::new(root.clone(), &index, &hashes, &duplicate);
    if !truth.any_hash() {
        return Err(format!(
            "{}: the sidecar has a hash for none of the index's {} documents",
            served.file.display(),
            index.documents.len()
        ));
    }
    // An index of another project (or far from this checkout) matches
    // nothing: say so instead of declining every request.
    let inside_project = |p: &Path| p.starts_with(&root);
    let sampled: Vec<Verdict> = (0..index.documents.len() as u32)
        .filter(|&d| hashes.contains_key(&*index.documents[d as usize].path))
        .take(SAMPLED_DOCUMENTS)
        .map(|d| truth.check(&index, d, &inside_project).verdict.clone())
        .collect();
    if !sampled.is_empty() && !sampled.iter().any(Verdict::is_unchanged) {
        return Err(format!(
            "{} does not match {}: none of {} sampled documents has the indexed bytes \
             (an index of another project, or of an old commit; rebuild it with `acp-lsp index`)",
            served.file.display(),
            root.display(),
            sampled.len()
        ));
    }
    let mut languages: BTreeMap<String, usize> = BTreeMap::new();
    let mut extensions: BTreeSet<String> = BTreeSet::new();
    for document in &index.documents {
        let extension = document
            .path
            .rsplit_once('.')
            .map(|(_, e)| e.to_string())
            .filter(|e| !e.contains('/'));
        let language = if document.language.is_empty() {
            extension
                .as_deref()
                .map(language_of_extension)
                .unwrap_or("")
        } else {
            &document.language
        };
        if !language.is_empty() {
            *languages.entry(language.to_lowercase()).or_default() += 1;
        }
        extensions.extend(extension);
    }
    let mut language_ids: Vec<(String, usize)> = languages.into_iter().collect();
    language_ids.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let commit = sidecar
        .commit
        .as_deref()
        .map(|c| c.chars().take(12).collect::<String>())
        .unwrap_or_else(|| "uncommitted".to_string());
    let load_time = started.elapsed();
    tracing::info!(
        index = %served.file.display(),
        root = %root.display(),
        documents = index.documents.len(),
        occurrences = index.occurrence_count(),
        symbols = index.symbol_count(),
        ms = load_time.as_millis() as u64,
        "SCIP index loaded"
    );
    Ok(Arc::new(Ready {
        meta,
        source: format!("scip@{commit}"),
        language_ids: language_ids.into_iter().map(|(l, _)| l).collect(),
        extensions: extensions.into_iter().collect(),
        index,
        truth,
        sidecar,
        dropped,
        load_time,
    }))
}

/// The languageId of a file extension, for indexes that leave it out.
fn language_of_extension(extension: &str) -> &'static str {
    match extension {
        "rs" => "rust",
        "py" | "pyi" => "python",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "typescriptreact",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "javascriptreact",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" => "cpp",
        "go" => "go",
        "java" => "java",
        _ => "",
    }
}

/// The call to a live server that stands in for the index.
/// Checked already: the gate checked the call to the index against the
/// same session and roots.
fn forwarded(call: &Forward, live: &LiveServer, wait: Option<Duration>) -> HostCall {
    HostCall::checked(Forward {
        session: Arc::clone(&call.session),
        server_id: live.server_id.clone(),
        method: call.method.clone(),
        params: call.params.clone(),
        documents: call.documents.clone(),
        cancel: call.cancel.clone(),
        wait_until_ready: wait,
    })
}

/// The index's result, with the live server's entries for every document
/// the index did not answer.
fn merge(answer: &Answer, live: &RawValue) -> Value {
    let mut merged = match &answer.result {
        Value::Array(items) => items.clone(),
        _ => Vec::new(),
    };
    let answered: BTreeSet<&str> = answer.answered.iter().map(String::as_str).collect();
    if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(live.get()) {
        for item in items {
            let uri = item
                .get("uri")
                .or_else(|| item.get("targetUri"))
                .or_else(|| item.pointer("/location/uri"))
                .and_then(Value::as_str);
            if uri.is_some_and(|u| !answered.contains(u)) {
                merged.push(item);
            }
        }
    }
    Value::Array(merged)
}

/// `_meta` of an answer: where it came from.
#[derive(Serialize)]
struct Meta {
    #[serde(rename = "acp-lsp")]
    acp_lsp: MetaBody,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MetaBody {
    source: String,
    index: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    not_covered: Vec<NotCovered>,
    /// The live server whose answers were merged in, or that answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    live: Option<LiveMeta>,
    #[serde(skip_serializing_if = "Option::is_none")]
    declined: Option<DeclinedMeta>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NotCovered {
    uri: String,
    reason: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LiveMeta {
    server_id: String,
    name: String,
    state: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeclinedMeta {
    reason: &'static str,
    message: String,
}

fn live_meta(live: &LiveServer) -> LiveMeta {
    LiveMeta {
        server_id: live.server_id.to_string(),
        name: live.name.clone(),
        state: if live.ready { "running" } else { "starting" },
    }
}

impl Meta {
    fn body(served: &Served, source: String) -> MetaBody {
        MetaBody {
            source,
            index: served.file.display().to_string(),
            not_covered: Vec::new(),
            live: None,
            declined: None,
        }
    }

    fn index(ready: &Ready, served: &Served, answer: &Answer, live: Option<LiveServer>) -> Meta {
        let mut body = Meta::body(served, ready.source.clone());
        body.not_covered = not_covered(answer);
        if !body.not_covered.is_empty() {
            body.live = live.as_ref().map(live_meta);
        }
        Meta { acp_lsp: body }
    }

    /// What the index left uncovered came from the live server.
    fn merged(ready: &Ready, served: &Served, live: &LiveServer) -> Meta {
        let mut body = Meta::body(served, format!("{}+{}", ready.source, live.name));
        body.live = Some(live_meta(live));
        Meta { acp_lsp: body }
    }

    fn forwarded(served: &Served, decline: &Decline, live: &LiveServer) -> Meta {
        let mut body = Meta::body(served, live.name.clone());
        body.live = Some(live_meta(live));
        body.declined = Some(DeclinedMeta {
            reason: decline.reason,
            message: decline.message.clone(),
        });
        Meta { acp_lsp: body }
    }
}

fn not_covered(answer: &Answer) -> Vec<NotCovered> {
    answer
        .uncovered
        .iter()
        .map(|(uri, reason)| NotCovered {
            uri: uri.clone(),
            reason,
        })
        .collect()
}

fn reply(result: &Value, meta: Meta) -> HostReply {
    HostReply {
        result: to_raw(result),
        meta: Some(to_raw(&meta)),
    }
}

fn to_raw<T: Serialize>(value: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("BUG: a JSON value serializes")
}

/// An LSP error object as a server would send it.
fn server_error(code: i64, message: &str, data: Value) -> GateError {
    GateError::ServerError {
        lsp_error: to_raw(&json!({"code": code, "message": message, "data": data})),
    }
}

/// The index cannot answer and no live server is ready to.
fn declined(decline: &Decline, live: Option<&LiveServer>) -> GateError {
    let mut data = json!({"reason": decline.reason});
    if let Some(uri) = &decline.uri {
        data["uri"] = json!(uri);
    }
    let mut message = decline.message.clone();
    if let Some(live) = live {
        data["live"] = serde_json::to_value(live_meta(live)).unwrap_or_default();
        message.push_str(&format!(
            "; ask {} (serverId {}) once it is running",
            live.name, live.server_id
        ));
    }
    server_error(REQUEST_FAILED, &message, data)
}
