//! The session facade: requests through the gate for one session, with the
//! same refusals, confinement and document sync as an agent's. The MCP
//! tools (`crate::mcp`) use it over an agent's session ([`SessionFacade::attach`]);
//! the command line (`acp-lsp request`, `acp-lsp rename`; `session_facade::cli`)
//! over a session of its own.

mod cli;

pub use self::cli::{use_shared_daemon, RenameOutcome, READY_WAIT, SESSION};

use crate::gate::confine::{ConfineError, Confinement};
use crate::gate::{Gate, GateError, GateMethod, LspHost, ServerEntry};
use crate::lsp::documents::MAX_DOCUMENT_BYTES;
use crate::lsp::registry::Registry;
use crate::proxy_host::ProxyHost;
use crate::read::{read_confined, ReadError};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum FacadeError {
    #[error(
        "no language server handles {what} under {root}; `acp-lsp servers {root}` shows what would run"
    )]
    NoServer { what: String, root: String },
    #[error("{}", unknown_server_text(name, known, root))]
    UnknownServerName {
        name: String,
        /// The servers this root has.
        known: Vec<String>,
        root: String,
    },
    /// The gate's answer, typed: callers match variants, never reasons.
    /// Shown to people as the error's message (for a server error, the
    /// server's own), after the server's name when it came from one.
    #[error("{}{error}", server.as_deref().map(|s| format!("{s}: ")).unwrap_or_default())]
    Gate {
        error: GateError,
        /// The LSP method concerned, when known.
        method: Option<String>,
        /// The server's name, when the error came from one.
        server: Option<Box<str>>,
    },
    #[error("unexpected response from the gate: {0}")]
    Protocol(String),
}

fn unknown_server_text(name: &str, known: &[String], root: &str) -> String {
    if known.is_empty() {
        format!("no server named {name:?}: no language server runs under {root} (`acp-lsp servers {root}` shows why)")
    } else {
        format!(
            "no server named {name:?} under {root}; choose one of: {}",
            known.join(", ")
        )
    }
}

impl FacadeError {
    /// Whether the command was called wrongly (a name that is not one of
    /// the choices) rather than something failing.
    pub fn is_usage(&self) -> bool {
        // No server for a file is a failure (exit 1), not a mistake in the
        // call: it is fixed by installing one.
        matches!(self, FacadeError::UnknownServerName { .. })
            || matches!(
                self,
                FacadeError::Gate {
                    error: GateError::Confined(_),
                    ..
                }
            )
    }
}

/// Requests through the gate for one session: the CLI's own session over one
/// root, or (for the MCP server) an agent's session.
pub struct SessionFacade {
    /// The session's roots; the first is where relative paths start.
    roots: Vec<PathBuf>,
    session: String,
    gate: Arc<Gate<ProxyHost>>,
    /// How long a request waits for its server to be ready.
    ready_wait: Duration,
    /// Cancels the requests in flight (the MCP client cancelled the tool call).
    cancel: CancellationToken,
}

impl SessionFacade {
    /// The helpers over an open session of `gate` (`None` when the gate does
    /// not know it). Requests wait up to `ready_wait` for their server.
    pub(crate) fn attach(
        gate: &Arc<Gate<ProxyHost>>,
        session_id: &str,
        ready_wait: Duration,
        cancel: CancellationToken,
    ) -> Option<SessionFacade> {
        let session = gate.sessions().get(session_id)?;
        Some(SessionFacade {
            roots: session.roots().to_vec(),
            session: session_id.to_string(),
            gate: Arc::clone(gate),
            ready_wait,
            cancel,
        })
    }

    /// The first root: where relative paths start.
    pub fn root(&self) -> &Path {
        &self.roots[0]
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    pub fn session_id(&self) -> &str {
        &self.session
    }

    /// The session's confinement (its roots and the read-only roots), as
    /// the gate checks it; `None` once the session is closed.
    pub fn confinement(&self) -> Option<Confinement> {
        self.gate
            .sessions()
            .get(&self.session)
            .map(|session| session.confinement().clone())
    }

    /// `file` (absolute, or relative to the first root) as a symlink-free
    /// path, if the session's confinement lets it through: the same check
    /// as the gate's for a URI, made before the file is touched, so that a
    /// refusal says nothing of whether the file exists.
    pub fn confine(&self, file: &Path) -> Result<PathBuf, ConfineError> {
        let path = if file.is_absolute() {
            file.to_path_buf()
        } else {
            self.root().join(file)
        };
        let outside = || ConfineError::OutsideRoots {
            uri: path.display().to_string(),
        };
        let uri = url::Url::from_file_path(&path).map_err(|()| outside())?;
        match self
            .confinement()
            .ok_or_else(outside)?
            .check_uri(uri.as_str())
        {
            Ok(Some(resolved)) => Ok(resolved),
            Ok(None) => Err(outside()),
            Err(ConfineError::OutsideRoots { .. }) => Err(outside()),
            Err(e) => Err(e),
        }
    }

    /// Reads a confined file ([`SessionFacade::confine`]'s answer) off the runtime
    /// threads: a regular file of at most [`MAX_DOCUMENT_BYTES`], whose real
    /// path at the moment of the read is still inside the session.
    pub(crate) async fn read_text(&self, path: &Path) -> Result<String, ReadError> {
        let confinement = self.confinement().ok_or(ReadError::OutsideRoots)?;
        read_confined(
            path.to_path_buf(),
            move |real| confinement.contains(real),
            MAX_DOCUMENT_BYTES,
        )
        .await
        .map(|read| read.text)
    }

    /// How long a request waits for its server to be ready.
    pub fn ready_wait(&self) -> Duration {
        self.ready_wait
    }

    pub fn gate(&self) -> &Arc<Gate<ProxyHost>> {
        &self.gate
    }

    /// The registry, when the servers are this process's own (the command
    /// line's session; an agent's without `--shared`).
    pub fn registry(&self) -> Option<&Arc<Registry>> {
        self.gate.host().registry()
    }

    /// Calls the gate and returns the raw result (for `lsp/request`, the
    /// server's result: what the agent gets as `lspResult`).
    pub async fn call(
        &self,
        method: GateMethod,
        params: Value,
    ) -> Result<Box<RawValue>, FacadeError> {
        let params = serde_json::value::to_raw_value(&params)
            .map_err(|e| FacadeError::Protocol(e.to_string()))?;
        match self
            .gate
            .call_internal(method, Some(&params), self.cancel.clone())
            .await
        {
            Ok(reply) => Ok(reply.result),
            Err((error, method)) => {
                let server = if matches!(error, GateError::ServerError { .. }) {
                    self.server_name(&params).await
                } else {
                    None
                };
                Err(FacadeError::Gate {
                    error,
                    method,
                    server,
                })
            }
        }
    }

    /// The name of the server an `lsp/request`'s params address.
    async fn server_name(&self, params: &RawValue) -> Option<Box<str>> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Addressed {
            server_id: String,
        }
        let addressed: Addressed = serde_json::from_str(params.get()).ok()?;
        let servers = self.servers().await.ok()?;
        let entry = servers
            .into_iter()
            .find(|s| s.server_id == addressed.server_id)?;
        Some(entry.name.into())
    }

    /// The `lsp/servers` entries.
    pub async fn servers(&self) -> Result<Vec<ServerEntry>, FacadeError> {
        self.gate
            .servers_of(&self.session)
            .await
            .map(|result| result.servers)
            .map_err(|error| FacadeError::Gate {
                error,
                method: None,
                server: None,
            })
    }

    /// Picks a server: by name, else the first serving `file`'s extension whose
    /// root holds the file (the nearest root wins), else the only one.
    pub async fn pick_server(
        &self,
        name: Option<&str>,
        file: Option<&Path>,
    ) -> Result<ServerEntry, FacadeError> {
        let servers = self.servers().await?;
        self.pick_from(servers, name, file)
    }

    /// [`SessionFacade::pick_server`] over [`SessionFacade::servers_brief`]: for callers
    /// that use the entry to address a request (the MCP tools, per call).
    pub async fn pick_server_brief(
        &self,
        name: Option<&str>,
        file: Option<&Path>,
    ) -> Result<ServerEntry, FacadeError> {
        let servers = self.servers_brief().await?;
        self.pick_from(servers, name, file)
    }

    /// The `lsp/servers` entries without what only a listing shows
    /// (`memoryBytes`, `degradedRoots`): no `/proc` read per server.
    pub async fn servers_brief(&self) -> Result<Vec<ServerEntry>, FacadeError> {
        let session = self
            .gate
            .sessions()
            .get(&self.session)
            .ok_or_else(|| FacadeError::Gate {
                error: GateError::UnknownSession(self.session.clone()),
                method: None,
                server: None,
            })?;
        Ok(self.gate.host().servers_brief(&session).await)
    }

    /// The server [`SessionFacade::pick_server`] picks among `servers`.
    fn pick_from(
        &self,
        servers: Vec<ServerEntry>,
        name: Option<&str>,
        file: Option<&Path>,
    ) -> Result<ServerEntry, FacadeError> {
        if let Some(name) = name.filter(|n| !servers.iter().any(|s| s.name == *n)) {
            let mut known: Vec<String> = servers.iter().map(|s| s.name.clone()).collect();
            known.dedup();
            return Err(FacadeError::UnknownServerName {
                name: name.to_string(),
                known,
                root: self.root().display().to_string(),
            });
        }
        let extension = file
            .and_then(Path::extension)
            .map(|e| e.to_string_lossy().into_owned());
        let mut candidates: Vec<&ServerEntry> = servers
            .iter()
            .filter(|s| name.is_none_or(|n| s.name == n))
            .filter(|s| {
                extension
                    .as_ref()
                    .is_none_or(|ext| s.file_extensions.iter().any(|e| e == ext))
            })
            // A file outside the session goes to any server: the gate then
            // refuses it with a clear reason.
            .filter(|s| {
                file.filter(|f| self.roots.iter().any(|root| f.starts_with(root)))
                    .is_none_or(|f| f.starts_with(&s.workspace_path))
            })
            .collect();
        // The deepest root is the nearest project; there, the language's
        // primary before its companions (navigation is the primary's).
        candidates.sort_by_key(|s| {
            (
                std::cmp::Reverse(s.workspace_path.len()),
                s.ours().companion,
            )
        });
        candidates
            .first()
            .map(|s| (*s).clone())
            .ok_or_else(|| FacadeError::NoServer {
                what: match (name, file) {
                    (Some(name), _) => format!("server {name}"),
                    (None, Some(file)) => file.display().to_string(),
                    (None, None) => "this folder".into(),
                },
                root: self.root().display().to_string(),
            })
    }

    /// One `lsp/request`, waiting for the server to be ready; returns `lspResult` verbatim.
    /// A server still not ready after the wait is an error (`server_not_running`),
    /// never an early, possibly empty, answer.
    pub async fn request(
        &self,
        server_id: &str,
        method: &str,
        params: Value,
    ) -> Result<Box<RawValue>, FacadeError> {
        // The gate's result for an internal call is `lspResult` itself.
        self.call(
            GateMethod::Request,
            self.request_params(server_id, method, params),
        )
        .await
    }

    fn request_params(&self, server_id: &str, method: &str, params: Value) -> Value {
        json!({
            "sessionId": self.session,
            "serverId": server_id,
            "method": method,
            "params": params,
            "_meta": { "waitUntilReady": self.ready_wait.as_millis() as u64 },
        })
    }

    /// `workspace/willRenameFiles`, which only acp-lsp's own rename may send
    /// (agents are refused file lifecycle requests).
    async fn will_rename_files(
        &self,
        server_id: &str,
        files: Vec<Value>,
    ) -> Result<Box<RawValue>, FacadeError> {
        let params = self.request_params(
            server_id,
            "workspace/willRenameFiles",
            json!({ "files": files }),
        );
        let params = serde_json::value::to_raw_value(&params)
            .map_err(|e| FacadeError::Protocol(e.to_string()))?;
        self.gate
            .call_internal_file_lifecycle(&params, self.cancel.clone())
            .await
            .map(|reply| reply.result)
            .map_err(|(error, method)| FacadeError::Gate {
                error,
                method,
                server: None,
            })
    }

    /// `entry` once its server has answered `initialize`. Servers start
    /// lazily, so before the first request an entry has no capabilities and
    /// the default position encoding; `rename` reads both (whether to send
    /// `prepareRename`, how to count the column, whether the server wants
    /// `workspace/willRenameFiles`). Waits as long as a request would
    /// (`ready_wait`); a server that fails or times out is reported by the
    /// request that follows.
    pub async fn started(&self, entry: ServerEntry) -> Result<ServerEntry, FacadeError> {
        if let Some(session) = self.gate.sessions().get(&self.session) {
            self.gate
                .host()
                .ensure_ready(&session, &entry.server_id, self.ready_wait)
                .await;
        }
        let servers = self.servers().await?;
        Ok(servers
            .into_iter()
            .find(|s| s.server_id == entry.server_id)
            .unwrap_or(entry))
    }

    /// Stops the servers.
    pub async fn shutdown(&self) {
        self.gate.host().shutdown().await;
    }
}

/// A server entry's verbatim `capabilities`, parsed (`null` if unreadable):
/// what a tool reads to decide what to ask.
pub(crate) fn capabilities_of(entry: &ServerEntry) -> Value {
    serde_json::from_str(entry.capabilities.get()).unwrap_or(Value::Null)
}

/// The file a request's params name (`textDocument.uri`), as a path.
pub fn params_file(params: &Value) -> Option<PathBuf> {
    let uri = params.get("textDocument")?.get("uri")?.as_str()?;
    url::Url::parse(uri).ok()?.to_file_path().ok()
}

/// Where to rename: a file and a 1-based line and column (in characters), as
/// editors show them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileLocation {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
}

impl std::str::FromStr for FileLocation {
    type Err = String;

    /// `FILE:LINE:COL` (the file name may itself contain colons).
    fn from_str(text: &str) -> Result<FileLocation, String> {
        let mut parts = text.rsplitn(3, ':');
        let (Some(column), Some(line), Some(file)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("{text:?} is not FILE:LINE:COL"));
        };
        let number = |what: &str, value: &str| {
            value
                .parse::<usize>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("{what} {value:?} is not a number ≥ 1 (they are 1-based)"))
        };
        Ok(FileLocation {
            file: PathBuf::from(file),
            line: number("line", line)?,
            column: number("column", column)?,
        })
    }
}

impl std::fmt::Display for FileLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RenameError {
    #[error(transparent)]
    Gate(#[from] FacadeError),
    #[error("{0}")]
    Confined(#[from] ConfineError),
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: ReadError },
    #[error("{0}")]
    Position(String),
    #[error(
        "{} is outside the root {root}; only files under it can be renamed (pass --root to choose another)",
        path.display()
    )]
    OutsideRoot { path: PathBuf, root: String },
    #[error("{server} cannot rename at {location}")]
    NotRenamable { server: String, location: String },
    #[error("the server's edit cannot be applied: {0}")]
    Plan(#[from] crate::edit::PlanError),
    #[error("the edit asks for confirmation of: {0}; run again with --yes to accept")]
    NeedsConfirmation(String),
    #[error(transparent)]
    Apply(#[from] crate::edit::ApplyError),
}

impl RenameError {
    /// Whether the command was called wrongly (a file that is not there or
    /// not under the root, a position past the end, a wrong server name)
    /// rather than something failing.
    pub fn is_usage(&self) -> bool {
        match self {
            RenameError::Read { .. }
            | RenameError::Position(_)
            | RenameError::OutsideRoot { .. } => true,
            RenameError::Gate(e) => e.is_usage(),
            _ => false,
        }
    }
}

/// A rename's `WorkspaceEdit`, with what is needed to apply it.
#[derive(Debug)]
pub(crate) struct RenameEdit {
    /// The server's edit, with the `workspace/willRenameFiles` edits ahead of it.
    pub edit: Value,
    pub encoding: crate::edit::PositionEncoding,
    /// The server's name.
    pub server: String,
}

impl SessionFacade {
    /// Whether an edit may write `path`: the session's confinement (its
    /// roots, less the read-only roots).
    pub fn is_writable(&self, path: &Path) -> bool {
        self.gate
            .sessions()
            .get(&self.session)
            .is_some_and(|session| session.confinement().is_writable(path))
    }

    /// Asks the file's server for the edit renaming the symbol at `at` to
    /// `new_name` (`prepareRename` first when the server supports it, and
    /// `workspace/willRenameFiles` for the files the edit renames). Writes nothing.
    pub(crate) async fn rename_edit(
        &self,
        at: &FileLocation,
        new_name: &str,
        server_name: Option<&str>,
    ) -> Result<RenameEdit, RenameError> {
        use crate::edit::{LineIndex, PositionEncoding};
        // A relative path is the command line's: from the current directory.
        // Before any server starts, a file outside the session is refused at
        // once, saying so (and nothing of whether it exists).
        let file = std::path::absolute(&at.file).unwrap_or_else(|_| at.file.clone());
        let file = self.confine(&file).map_err(|e| match e {
            ConfineError::OutsideRoots { .. } => RenameError::OutsideRoot {
                path: at.file.clone(),
                root: self.root().display().to_string(),
            },
            other => RenameError::Confined(other),
        })?;
        let text = self
            .read_text(&file)
            .await
            .map_err(|source| RenameError::Read {
                path: at.file.clone(),
                source,
            })?;
        let entry = self.pick_server(server_name, Some(&file)).await?;
        let entry = self.started(entry).await?;
        let server_id = entry.server_id.clone();
        let server = entry.name.clone();
        let encoding = PositionEncoding::from_lsp(&entry.ours().position_encoding)
            .unwrap_or(PositionEncoding::Utf16);
        let capabilities = capabilities_of(&entry);
        let index = LineIndex::new(&text);
        let line = (at.line - 1) as u64;
        if at.line > index.line_count() {
            return Err(RenameError::Position(format!(
                "{} has {} lines; line {} does not exist",
                file.display(),
                index.line_count(),
                at.line
            )));
        }
        let character = index
            .character_of_column(&text, line, at.column - 1, encoding)
            .map_err(|e| RenameError::Position(e.to_string()))?;
        let uri = url::Url::from_file_path(&file)
            .map_err(|()| RenameError::Position(format!("{} is not absolute", file.display())))?;
        let position = json!({ "line": line, "character": character });
        let text_document = json!({ "uri": uri.as_str() });
        let location = format!("{}:{}:{}", file.display(), at.line, at.column);

        let prepare = capabilities["renameProvider"]["prepareProvider"] == true;
        if prepare {
            let prepared = self
                .request(
                    &server_id,
                    "textDocument/prepareRename",
                    json!({ "textDocument": text_document, "position": position }),
                )
                .await?;
            if prepared.get().trim() == "null" {
                return Err(RenameError::NotRenamable { server, location });
            }
        }
        let edit = self
            .request(
                &server_id,
                "textDocument/rename",
                json!({ "textDocument": text_document, "position": position, "newName": new_name }),
            )
            .await?;
        let edit: Value =
            serde_json::from_str(edit.get()).map_err(|e| FacadeError::Protocol(e.to_string()))?;
        if edit.is_null() {
            return Err(RenameError::NotRenamable { server, location });
        }
        let edit = self
            .with_will_rename(&server_id, &capabilities, edit)
            .await?;
        Ok(RenameEdit {
            edit,
            encoding,
            server,
        })
    }

    /// Adds to `edit` what the server wants done before the files `edit`
    /// renames are renamed. The handshake advertises
    /// `workspace.fileOperations.willRename`, and LSP has the client send
    /// `workspace/willRenameFiles` when it applies a workspace edit that
    /// renames files; servers rely on it: rust-analyzer's answer to renaming
    /// a module holds only the file rename, and the `mod` and `use` edits come
    /// from `workspace/willRenameFiles` (without them the crate no longer
    /// builds). Every renamed file is sent, without matching the server's
    /// filters: a server ignores files it has no edits for.
    async fn with_will_rename(
        &self,
        server_id: &str,
        capabilities: &Value,
        edit: Value,
    ) -> Result<Value, FacadeError> {
        let wanted = capabilities["workspace"]["fileOperations"]["willRename"].is_object();
        let files: Vec<Value> = edit["documentChanges"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|change| change["kind"] == "rename")
            .map(|change| json!({ "oldUri": change["oldUri"], "newUri": change["newUri"] }))
            .collect();
        if !wanted || files.is_empty() {
            return Ok(edit);
        }
        let before = self.will_rename_files(server_id, files).await?;
        let before: Value =
            serde_json::from_str(before.get()).map_err(|e| FacadeError::Protocol(e.to_string()))?;
        Ok(edit_before(before, edit))
    }
}

/// One workspace edit doing `first`, then `then`: `first`'s changes (as
/// `documentChanges`) ahead of `then`'s, the change annotations of both.
fn edit_before(first: Value, mut then: Value) -> Value {
    let mut changes: Vec<Value> = match (first.get("documentChanges"), first.get("changes")) {
        (Some(Value::Array(changes)), _) => changes.clone(),
        (_, Some(Value::Object(map))) => map
            .iter()
            .map(|(uri, edits)| {
                json!({ "textDocument": { "uri": uri, "version": null }, "edits": edits })
            })
            .collect(),
        _ => return then,
    };
    let Some(edit) = then.as_object_mut() else {
        return then;
    };
    if let Some(Value::Array(later)) = edit.get("documentChanges") {
        changes.extend(later.iter().cloned());
    }
    edit.insert("documentChanges".into(), Value::Array(changes));
    if let Some(Value::Object(annotations)) = first.get("changeAnnotations") {
        let merged = edit.entry("changeAnnotations").or_insert_with(|| json!({}));
        if let Value::Object(merged) = merged {
            for (id, annotation) in annotations {
                merged
                    .entry(id.clone())
                    .or_insert_with(|| annotation.clone());
            }
        }
    }
    then
}
