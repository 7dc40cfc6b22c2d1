//! What the agent gives a tool, made into what a server takes: the tools'
//! arguments (their JSON schemas), files resolved and confined in the
//! session, 1-based columns to LSP positions, the server waited for until
//! it is ready.

use super::*;

/// Definition, type definition, implementation: a symbol, and the page of a long answer.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct PositionArgs {
    #[serde(flatten)]
    pub target: Target,
    /// Skip this many results (a cut answer says which offset shows the rest).
    #[serde(default)]
    pub offset: Option<usize>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct HoverArgs {
    #[serde(flatten)]
    pub target: Target,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ReferencesArgs {
    #[serde(flatten)]
    pub target: Target,
    /// Also list the declaration itself (default true).
    #[serde(default)]
    pub include_declaration: Option<bool>,
    /// Skip this many references (a cut answer says which offset shows the rest).
    #[serde(default)]
    pub offset: Option<usize>,
}

/// Which way a call hierarchy goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Direction {
    /// Who calls it.
    #[default]
    Incoming,
    /// What it calls.
    Outgoing,
}

impl Direction {
    /// The argument's value (a plain string in the schema: `$ref`s and
    /// `oneOf` are what agents' schema converters handle worst).
    pub(super) fn parse(value: Option<&str>) -> ToolResult<Direction> {
        match value {
            None | Some("incoming") => Ok(Direction::Incoming),
            Some("outgoing") => Ok(Direction::Outgoing),
            Some(other) => Err(format!(
                "direction is `incoming` or `outgoing`, not {other:?}"
            )),
        }
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CallHierarchyArgs {
    #[serde(flatten)]
    pub target: Target,
    /// `incoming` (its callers, default) or `outgoing` (what it calls).
    #[serde(default)]
    pub direction: Option<String>,
    /// Levels to follow, 1 to 3 (default 1).
    #[serde(default)]
    pub depth: Option<u32>,
    /// Skip this many calls (a cut answer says which offset shows the rest).
    #[serde(default)]
    pub offset: Option<usize>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct FileArgs {
    /// The file: relative to the session's working directory, or absolute.
    pub file: String,
    /// Skip this many symbols (a cut answer says which offset shows the rest).
    #[serde(default)]
    pub offset: Option<usize>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WorkspaceSymbolsArgs {
    /// Symbol name or fragment to search for.
    pub query: String,
    /// Only ask this server (by name, e.g. `rust-analyzer`); default: every server of the session.
    #[serde(default)]
    pub server: Option<String>,
    /// Skip this many symbols (a cut answer says which offset shows the rest).
    #[serde(default)]
    pub offset: Option<usize>,
}

/// What `diagnostics` compares with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// The session's last write (the agent's fs/write_text_file, acp-lsp's rename).
    LastEdit,
}

impl Since {
    pub(super) fn parse(value: Option<&str>) -> ToolResult<Option<Since>> {
        match value {
            None => Ok(None),
            Some("last_edit") => Ok(Some(Since::LastEdit)),
            Some(other) => Err(format!("since is `last_edit`, not {other:?}")),
        }
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct DiagnosticsArgs {
    /// Files to check (relative or absolute); waits until their diagnostics
    /// reflect the files' current text. Default: what the servers published.
    #[serde(default)]
    pub files: Vec<String>,
    /// `last_edit`: only the problems that appeared (new) or went away
    /// (fixed) since the session last wrote files, in those files and the
    /// files that may depend on them.
    #[serde(default)]
    pub since: Option<String>,
    /// Skip this many entries (a cut answer says which offset shows the rest).
    #[serde(default)]
    pub offset: Option<usize>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RenameArgs {
    #[serde(flatten)]
    pub target: Target,
    /// The new name.
    pub new_name: String,
    /// Show the edit as a diff and write nothing (default false).
    #[serde(default)]
    pub dry_run: Option<bool>,
    /// With `dry_run`: skip this many diff lines (a cut diff says which offset shows the rest).
    #[serde(default)]
    pub offset: Option<usize>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CodeActionsArgs {
    /// The file: relative to the session's working directory, or absolute.
    pub file: String,
    /// 1-based line where the range starts.
    pub line: u32,
    /// 1-based column where the range starts.
    pub column: u32,
    /// 1-based line where the range ends (default: the start).
    #[serde(default)]
    pub end_line: Option<u32>,
    /// 1-based column where the range ends (default: the start).
    #[serde(default)]
    pub end_column: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct LspRequestArgs {
    /// An LSP client-to-server request method, e.g. `textDocument/hover`.
    pub method: String,
    /// The LSP params as they are on the wire: `file://` URIs, 0-based
    /// positions in the server's position encoding (see `lsp_servers`).
    #[serde(default)]
    pub params: Option<Value>,
    /// The server, by name or serverId; default: the one for the file the
    /// params name (`textDocument.uri`), else the only one.
    #[serde(default)]
    pub server: Option<String>,
}

/// A file argument as an absolute, symlink-free path inside the session:
/// relative paths start at the session's working directory (its first
/// root). Confined before the file is touched, with the gate's check, so
/// that the answer for a file outside the roots is the same whether it
/// exists or not.
pub(super) fn resolve(tool: &SessionFacade, file: &str) -> ToolResult<PathBuf> {
    match tool.confine(Path::new(file)) {
        Ok(path) => Ok(path),
        Err(ConfineError::OutsideRoots { .. }) => Err(outside_roots(file)),
        Err(e) => Err(format!("{file} cannot be used: {e} ({})", e.reason())),
    }
}

pub(super) fn outside_roots(file: &str) -> String {
    format!(
        "{file} is outside the session's roots (uri_outside_roots): acp-lsp reads and sends \
         language servers only files inside them"
    )
}

/// A resolved file's text: kept from an earlier call while unchanged
/// ([`TextCache`]), else confined again at the moment of the read, a regular
/// file under the document size limit, read off the runtime threads.
pub(super) async fn read_text(
    tool: &SessionFacade,
    cache: &TextCache,
    path: &Path,
    file: &str,
) -> ToolResult<Arc<Text>> {
    let failed = |e: ReadError| match e {
        ReadError::OutsideRoots => outside_roots(file),
        e => format!("cannot read {file}: {e} ({})", e.reason()),
    };
    let confinement = tool
        .confinement()
        .ok_or_else(|| failed(ReadError::OutsideRoots))?;
    if let Some(text) = cache.get(path, &confinement) {
        return Ok(text);
    }
    let read = read_confined(
        path.to_path_buf(),
        move |real| confinement.contains(real),
        MAX_DOCUMENT_BYTES,
    )
    .await
    .map_err(failed)?;
    let text = Arc::new(Text::new(read.text));
    cache.put(
        path.to_path_buf(),
        read.stamp,
        Arc::clone(&text),
        std::time::SystemTime::now(),
    );
    Ok(text)
}

/// Every URI a result names (`uri`, `targetUri` members at any depth).
pub(super) fn collect_uris(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match value {
                    Value::String(uri) if key == "uri" || key == "targetUri" => {
                        out.push(uri.clone());
                    }
                    _ => collect_uris(value, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_uris(item, out)),
        _ => {}
    }
}

pub(super) fn file_uri(path: &Path) -> ToolResult<String> {
    url::Url::from_file_path(path)
        .map(String::from)
        .map_err(|()| format!("{} is not an absolute path", path.display()))
}

pub(super) fn parse(text: &str) -> ToolResult<Value> {
    serde_json::from_str(text).map_err(|e| format!("the server's answer is not JSON: {e}"))
}

pub(super) fn encoding_of(entry: &ServerEntry) -> PositionEncoding {
    PositionEncoding::from_lsp(&entry.ours().position_encoding).unwrap_or(PositionEncoding::Utf16)
}

/// The LSP `character` of a 1-based line and column (in characters).
pub(super) fn lsp_position(
    text: &Text,
    path: &Path,
    line: u32,
    column: u32,
    encoding: PositionEncoding,
) -> ToolResult<u64> {
    if line == 0 || column == 0 {
        return Err("line and column are 1-based".into());
    }
    let index = &text.index;
    if line as usize > index.line_count() {
        return Err(format!(
            "{} has {} lines; line {line} does not exist",
            path.display(),
            index.line_count()
        ));
    }
    index
        .character_of_column(
            &text.text,
            u64::from(line - 1),
            column as usize - 1,
            encoding,
        )
        .map_err(|e| e.to_string())
}

/// The server for `file` (or named `name`), once ready. While the live
/// server is not ready, a ready SCIP index of the file stands in (it answers
/// from the files unchanged since it was built; `crate::scip::host`).
pub(super) async fn ready_server(
    tool: &SessionFacade,
    name: Option<&str>,
    file: Option<&Path>,
) -> ToolResult<ServerEntry> {
    let entry = tool.pick_server_brief(name, file).await.map_err(describe)?;
    let index = crate::scip::SERVER_NAME;
    if entry.status() != ServerState::Ready && name.is_none() && entry.name != index {
        if let Ok(standing_in) = tool.pick_server_brief(Some(index), file).await {
            if standing_in.status() == ServerState::Ready {
                return Ok(standing_in);
            }
        }
    }
    wait_ready(tool, entry).await
}

/// Waits up to the tool's ready wait ([`READY_WAIT`]) for `entry`'s server
/// to be ready; a server still loading after that is reported as still indexing.
pub(super) async fn wait_ready(
    tool: &SessionFacade,
    entry: ServerEntry,
) -> ToolResult<ServerEntry> {
    // Ready already (the common case): started, with its capabilities; no
    // second listing.
    if entry.status() == ServerState::Ready {
        return Ok(entry);
    }
    let entry = tool.started(entry).await.map_err(describe)?;
    let name = &entry.name;
    match entry.status() {
        ServerState::Ready => Ok(entry),
        ServerState::Failed => Err(format!(
            "{name} has failed: {}",
            entry.ours().last_error.as_deref().unwrap_or("no detail")
        )),
        ServerState::Stopped => Err(format!("{name} is stopped")),
        ServerState::Idle => Err(format!("{name} is idle (not started)")),
        ServerState::NotInstalled => Err(format!(
            "{name} is not installed: run `{}` (or start acp-lsp with --auto-install)",
            entry
                .ours()
                .install_command
                .clone()
                .unwrap_or_else(|| format!("acp-lsp install {name}"))
        )),
        status => {
            let progress = entry
                .ours()
                .progress
                .as_ref()
                .map(|p| format!(", {}", p.title))
                .unwrap_or_default();
            Err(format!(
                "{name} is still indexing (it is {}{progress}, waited {} s); no answer yet, \
                 ask again shortly",
                status.as_str(),
                tool.ready_wait().as_secs_f64()
            ))
        }
    }
}
