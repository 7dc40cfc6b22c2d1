//! The MCP tools: language-server requests for one agent session, with file
//! paths and 1-based line/column as agents use them, compact text out plus
//! structured content.
//!
//! Every request goes through the gate ([`SessionFacade`] over the session, which
//! calls [`crate::gate::Gate::call_internal`]): the same confinement,
//! refusals, limits and deadlines as the agent's own `lsp/request`. A server
//! that is not ready is waited for up to [`READY_WAIT`]; after that the tool
//! fails saying the server is still indexing, never answering with an empty
//! result that reads like "no references".

mod input;
mod render;
mod texts;

use self::input::*;
pub use self::input::{
    CodeActionsArgs, DiagnosticsArgs, FileArgs, LspRequestArgs, PositionArgs, ReferencesArgs,
    RenameArgs, WorkspaceSymbolsArgs,
};
use self::render::*;
use self::texts::{Text, TextCache};
use super::editor::EditorFs;
use super::tokens::{Lease, SESSION_BIND_WAIT};
use crate::edit::{
    apply_to_disk, apply_with_agent_fs, plan_on_disk, AgentApplyError, ApplyReport, Decisions,
    PositionEncoding,
};
use crate::gate::confine::ConfineError;
use crate::gate::{Gate, GateError, GateMethod, ServerEntry, ServerState};
use crate::lsp::documents::MAX_DOCUMENT_BYTES;
use crate::proxy_host::ProxyHost;
use crate::read::{read_confined, read_confined_blocking, ReadError};
use crate::session_facade::{
    capabilities_of, FacadeError, FileLocation, RenameEdit, RenameError, SessionFacade,
};
use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long a tool waits for its language server to finish indexing before
/// it answers that the server is still indexing.
pub const READY_WAIT: Duration = Duration::from_secs(60);
/// How long `diagnostics` waits for diagnostics that reflect the files' text.
pub(crate) const DIAGNOSTICS_WAIT: Duration = Duration::from_secs(20);
/// Most items listed in a tool's text (the structured content has them all).
pub(crate) const MAX_LISTED: usize = 200;
/// Most bytes of files one tool call reads to show the lines its results
/// point at; past it, results are shown without their line's text.
pub(crate) const MAX_LOADED_BYTES: u64 = 64 * 1024 * 1024;

/// The tools of one MCP connection.
#[derive(Clone)]
pub(crate) struct LspTools {
    gate: Arc<Gate<ProxyHost>>,
    lease: Arc<Lease>,
    editor: Option<Arc<EditorFs>>,
    /// How long a tool waits for its server to be ready ([`READY_WAIT`]).
    ready_wait: Duration,
    /// Texts of the files this connection's tools read, kept while unchanged.
    texts: Arc<TextCache>,
    tool_router: ToolRouter<LspTools>,
}

/// A tool's failure, shown to the agent as a tool error.
type ToolResult<T> = Result<T, String>;

/// What a position tool resolved before asking its server.
struct At {
    tool: SessionFacade,
    encoding: PositionEncoding,
    server_id: String,
    server: String,
    /// The server's `capabilities`, verbatim (parsed only by the tool that reads them).
    capabilities: Box<serde_json::value::RawValue>,
    text_document: Value,
    position: Value,
    /// Said before the answer: it came from a SCIP index standing in.
    note: Option<String>,
}

/// `result` with `note` before its text (and its summary).
fn noted(mut result: CallToolResult, note: Option<&str>) -> CallToolResult {
    let Some(note) = note else {
        return result;
    };
    for block in &mut result.content {
        if let Some(text) = block.as_text() {
            *block = ContentBlock::text(format!("{note}\n{}", text.text));
        }
    }
    if let Some(Value::Object(fields)) = &mut result.structured_content {
        if let Some(Value::String(summary)) = fields.get_mut("summary") {
            *summary = format!("{note}\n{summary}");
        }
        fields.insert("source".into(), Value::String(note.into()));
    }
    result
}

/// A tool's answer: the compact text, and the structured content with the
/// same text as its `summary`. Agents differ in what they show the model:
/// Gemini CLI passes the text, claude-code-acp passes the structured content
/// as JSON; either way the model reads the same lines first-hand.
fn ok(text: String, structured: Value) -> CallToolResult {
    let structured = match structured {
        Value::Object(mut fields) => {
            fields.insert("summary".to_string(), Value::String(text.clone()));
            Value::Object(fields)
        }
        other => other,
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result
}

fn failure(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

fn reply(outcome: ToolResult<CallToolResult>) -> Result<CallToolResult, rmcp::ErrorData> {
    Ok(outcome.unwrap_or_else(failure))
}

/// Says what went wrong in the agent's terms; a server still loading is
/// "still indexing", so that no one reads the failure as an empty answer.
fn describe(error: FacadeError) -> String {
    match &error {
        FacadeError::Gate {
            error: GateError::ServerNotRunning { server, .. },
            ..
        } if server.status.will_run() => format!(
            "{} is still indexing (it is {}); no answer yet, ask again shortly",
            server.name,
            server.status.as_str(),
        ),
        FacadeError::Gate { error, .. } => format!("{error} ({})", error.reason()),
        _ => error.to_string(),
    }
}

fn describe_rename(error: RenameError) -> String {
    match error {
        RenameError::Gate(e) => describe(e),
        other => other.to_string(),
    }
}

impl LspTools {
    /// `ready_wait`: how long a tool waits for its server ([`READY_WAIT`]
    /// in the proxy).
    pub fn new(
        gate: Arc<Gate<ProxyHost>>,
        lease: Lease,
        editor: Option<Arc<EditorFs>>,
        ready_wait: Duration,
    ) -> LspTools {
        LspTools {
            gate,
            lease: Arc::new(lease),
            editor,
            ready_wait,
            texts: Arc::default(),
            tool_router: LspTools::tool_router(),
        }
    }

    /// The helpers over this connection's session.
    async fn session(&self) -> ToolResult<SessionFacade> {
        let Some(session) = self.lease.session(SESSION_BIND_WAIT).await else {
            return Err(
                "this MCP connection's ACP session is not open (it was never \
                        committed, or it was closed)"
                    .into(),
            );
        };
        SessionFacade::attach(
            &self.gate,
            &session,
            self.ready_wait,
            CancellationToken::new(),
        )
        .ok_or_else(|| format!("the ACP session {session} is closed"))
    }

    /// Picks the server for `file`, waits for it to be ready and says how to
    /// address the position.
    async fn at(&self, file: &str, line: u32, column: u32) -> ToolResult<At> {
        let tool = self.session().await?;
        let path = resolve(&tool, file)?;
        // Read before waiting for the server: a file that cannot be used
        // fails at once.
        let text = read_text(&tool, &self.texts, &path, file).await?;
        let entry = ready_server(&tool, None, Some(&path)).await?;
        let encoding = encoding_of(&entry);
        let character = lsp_position(&text, &path, line, column, encoding)?;
        let uri = file_uri(&path)?;
        let note = (entry.name == crate::scip::SERVER_NAME).then(|| {
            format!(
                "(answered from the SCIP index {} while the language server starts: \
                 files changed since it was built are left out)",
                entry.ours().version.as_deref().unwrap_or("scip")
            )
        });
        Ok(At {
            note,
            capabilities: entry.capabilities,
            server_id: entry.server_id.into(),
            server: entry.name,
            text_document: json!({ "uri": uri }),
            position: json!({ "line": line - 1, "character": character }),
            encoding,
            tool,
        })
    }

    async fn locations(
        &self,
        args: PositionArgs,
        method: &str,
        what: &str,
    ) -> ToolResult<CallToolResult> {
        let at = self.at(&args.file, args.line, args.column).await?;
        let result = at
            .tool
            .request(
                &at.server_id,
                method,
                json!({ "textDocument": at.text_document, "position": at.position }),
            )
            .await
            .map_err(describe)?;
        let result: Value = parse(result.get())?;
        let rendered = render_locations(&at.tool, &self.texts, at.encoding, &result, what).await;
        Ok(noted(rendered, at.note.as_deref()))
    }
}

#[tool_router]
impl LspTools {
    #[tool(
        description = "Language servers of this session (code intelligence: definitions, \
        references, types, renames): name, state (starting, indexing, ready, failed), root, \
        languages, position encoding."
    )]
    async fn lsp_servers(&self) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(self.lsp_servers_inner().await)
    }

    #[tool(
        description = "Send any LSP (Language Server Protocol) request to a language server \
        of this session and get its raw JSON result. Params are LSP's own: file:// URIs and \
        0-based positions in the server's position encoding. Prefer the dedicated tools \
        (definition, references, hover, rename, …)."
    )]
    async fn lsp_request(
        &self,
        Parameters(args): Parameters<LspRequestArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(self.lsp_request_inner(args).await)
    }

    #[tool(
        description = "Go to definition: find where the symbol (function, method, type, \
        variable) at FILE:LINE:COLUMN (1-based) is defined, as file:line:column with the \
        line's text. From the language server, not a text search."
    )]
    async fn definition(
        &self,
        Parameters(args): Parameters<PositionArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(
            self.locations(args, "textDocument/definition", "definitions")
                .await,
        )
    }

    #[tool(
        description = "Find references: every use (usages, callers, call sites) of the \
        symbol at FILE:LINE:COLUMN (1-based) across the workspace, as file:line:column with \
        the line's text. Semantic, from the language server: no false matches of the name."
    )]
    async fn references(
        &self,
        Parameters(args): Parameters<ReferencesArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(self.references_inner(args).await)
    }

    #[tool(
        description = "Hover: the type of the symbol at FILE:LINE:COLUMN (1-based), its \
        signature and documentation, from the language server (type of a variable, \
        expression or function)."
    )]
    async fn hover(
        &self,
        Parameters(args): Parameters<PositionArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(self.hover_inner(args).await)
    }

    #[tool(
        description = "Document symbols: the outline of a file, its symbols (functions, \
        classes, types, fields, …) with kinds and 1-based positions, nested."
    )]
    async fn document_symbols(
        &self,
        Parameters(args): Parameters<FileArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(self.document_symbols_inner(args).await)
    }

    #[tool(
        description = "Workspace symbols: search the whole workspace for a symbol by name \
        (function, class, type, constant) and find where it is declared."
    )]
    async fn workspace_symbols(
        &self,
        Parameters(args): Parameters<WorkspaceSymbolsArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(self.workspace_symbols_inner(args).await)
    }

    #[tool(
        description = "Diagnostics: compile errors, type errors and warnings from the \
        language servers. With files, waits until the diagnostics reflect the files' current \
        text on disk."
    )]
    async fn diagnostics(
        &self,
        Parameters(args): Parameters<DiagnosticsArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(self.diagnostics_inner(args).await)
    }

    #[tool(
        description = "Rename symbol: rename the symbol (function, variable, type, method) \
        at FILE:LINE:COLUMN (1-based) to NEW_NAME in every file that uses it, with the \
        language server's semantic rename (a safe refactoring, not a text replace), and apply \
        the edit. Reports the files changed."
    )]
    async fn rename(
        &self,
        Parameters(args): Parameters<RenameArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(self.rename_inner(args).await)
    }

    #[tool(
        description = "Code actions: the quick fixes and refactorings the language server \
        offers at FILE:LINE:COLUMN or over a range; lists them, applies none."
    )]
    async fn code_actions(
        &self,
        Parameters(args): Parameters<CodeActionsArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(self.code_actions_inner(args).await)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for LspTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("acp-lsp", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Language-server tools for this session's workspace (acp-lsp). Files are \
                 relative to the session's working directory or absolute; lines and columns \
                 are 1-based, columns in characters.",
            )
    }
}

impl LspTools {
    async fn lsp_servers_inner(&self) -> ToolResult<CallToolResult> {
        let tool = self.session().await?;
        let servers = tool.servers().await.map_err(describe)?;
        let mut text = String::new();
        for s in &servers {
            text.push_str(&format!(
                "{} [{}] root={} languages={} encoding={} serverId={}\n",
                s.name,
                s.status().as_str(),
                s.workspace_path,
                s.ours().language_ids.join(","),
                s.ours().position_encoding,
                s.server_id,
            ));
        }
        if servers.is_empty() {
            text.push_str("no language server serves this session's roots\n");
        }
        let structured: Vec<Value> = servers
            .iter()
            .map(|s| {
                json!({
                    "serverId": s.server_id, "name": s.name, "state": s.state,
                    "status": s.status(), "workspacePath": s.workspace_path,
                    "languageIds": s.ours().language_ids,
                    "fileExtensions": s.file_extensions,
                    "positionEncoding": s.ours().position_encoding,
                })
            })
            .collect();
        Ok(ok(text, json!({ "servers": structured })))
    }

    async fn lsp_request_inner(&self, args: LspRequestArgs) -> ToolResult<CallToolResult> {
        let tool = self.session().await?;
        let params = args.params.unwrap_or(Value::Null);
        let file = crate::session_facade::params_file(&params);
        let by_id = match &args.server {
            Some(server) => tool
                .servers()
                .await
                .map_err(describe)?
                .into_iter()
                .find(|s| s.server_id == *server),
            None => None,
        };
        let entry = match by_id {
            Some(entry) => wait_ready(&tool, entry).await?,
            None => ready_server(&tool, args.server.as_deref(), file.as_deref()).await?,
        };
        let server_id = entry.server_id.as_str();
        let result = tool
            .request(server_id, &args.method, params)
            .await
            .map_err(describe)?;
        let value: Value = parse(result.get())?;
        Ok(ok(
            result.get().to_string(),
            json!({ "serverId": server_id, "lspResult": value }),
        ))
    }

    async fn references_inner(&self, args: ReferencesArgs) -> ToolResult<CallToolResult> {
        let at = self.at(&args.file, args.line, args.column).await?;
        let result = at
            .tool
            .request(
                &at.server_id,
                "textDocument/references",
                json!({
                    "textDocument": at.text_document,
                    "position": at.position,
                    "context": { "includeDeclaration": args.include_declaration.unwrap_or(true) },
                }),
            )
            .await
            .map_err(describe)?;
        let result: Value = parse(result.get())?;
        let rendered =
            render_locations(&at.tool, &self.texts, at.encoding, &result, "references").await;
        Ok(noted(rendered, at.note.as_deref()))
    }

    async fn hover_inner(&self, args: PositionArgs) -> ToolResult<CallToolResult> {
        let at = self.at(&args.file, args.line, args.column).await?;
        let result = at
            .tool
            .request(
                &at.server_id,
                "textDocument/hover",
                json!({ "textDocument": at.text_document, "position": at.position }),
            )
            .await
            .map_err(describe)?;
        let result: Value = parse(result.get())?;
        let text = hover_text(&result["contents"]);
        let text = if text.trim().is_empty() {
            format!("{} has no hover information here", at.server)
        } else {
            text
        };
        Ok(ok(text.clone(), json!({ "contents": text })))
    }

    async fn document_symbols_inner(&self, args: FileArgs) -> ToolResult<CallToolResult> {
        let tool = self.session().await?;
        let path = resolve(&tool, &args.file)?;
        let entry = ready_server(&tool, None, Some(&path)).await?;
        let uri = file_uri(&path)?;
        let result = tool
            .request(
                &entry.server_id,
                "textDocument/documentSymbol",
                json!({ "textDocument": { "uri": uri } }),
            )
            .await
            .map_err(describe)?;
        let result: Value = parse(result.get())?;
        let mut files = Files::new(&tool, &self.texts, encoding_of(&entry));
        files.load(&result, std::slice::from_ref(&uri)).await;
        let mut symbols = Vec::new();
        for item in result.as_array().into_iter().flatten() {
            collect_symbols(&mut files, item, Some(&path), 0, &mut symbols);
        }
        Ok(render_symbols(
            &symbols,
            &format!("{} has no symbols", args.file),
        ))
    }

    async fn workspace_symbols_inner(
        &self,
        args: WorkspaceSymbolsArgs,
    ) -> ToolResult<CallToolResult> {
        let tool = self.session().await?;
        let servers = tool.servers().await.map_err(describe)?;
        let chosen: Vec<ServerEntry> = servers
            .into_iter()
            .filter(|s| args.server.as_deref().is_none_or(|n| s.name == n))
            .collect();
        if chosen.is_empty() {
            return Err("no language server of this session matches".into());
        }
        let mut symbols = Vec::new();
        let mut failures = Vec::new();
        for entry in chosen {
            let name = entry.name.clone();
            let entry = match wait_ready(&tool, entry).await {
                Ok(entry) => entry,
                Err(e) => {
                    failures.push(format!("{name}: {e}"));
                    continue;
                }
            };
            if capabilities_of(&entry)["workspaceSymbolProvider"].is_null() {
                continue;
            }
            match tool
                .request(
                    &entry.server_id,
                    "workspace/symbol",
                    json!({ "query": args.query }),
                )
                .await
            {
                Ok(result) => {
                    let result: Value = parse(result.get())?;
                    let mut files = Files::new(&tool, &self.texts, encoding_of(&entry));
                    files.load(&result, &[]).await;
                    for item in result.as_array().into_iter().flatten() {
                        collect_symbols(&mut files, item, None, 0, &mut symbols);
                    }
                }
                Err(e) => failures.push(format!("{name}: {}", describe(e))),
            }
        }
        if symbols.is_empty() && !failures.is_empty() {
            return Err(failures.join("\n"));
        }
        let mut result = render_symbols(&symbols, &format!("no symbol matches {:?}", args.query));
        if !failures.is_empty() {
            result.content.push(ContentBlock::text(failures.join("\n")));
        }
        Ok(result)
    }

    async fn diagnostics_inner(&self, args: DiagnosticsArgs) -> ToolResult<CallToolResult> {
        let tool = self.session().await?;
        let mut uris = Vec::new();
        for file in &args.files {
            let path = resolve(&tool, file)?;
            // Diagnostics of a server still loading would be as misleading
            // as an empty reference list.
            ready_server(&tool, None, Some(&path)).await?;
            uris.push(file_uri(&path)?);
        }
        // The gate pulls from servers that answer `textDocument/diagnostic`
        // (rust-analyzer) and waits for a fresh push from the others.
        let mut params = json!({ "sessionId": tool.session_id() });
        if !args.files.is_empty() {
            params["uris"] = json!(uris);
            params["waitMs"] = json!(DIAGNOSTICS_WAIT.as_millis() as u64);
        }
        let result = tool
            .call(GateMethod::Diagnostics, params)
            .await
            .map_err(describe)?;
        let result: Value = parse(result.get())?;
        let published = result["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        // Published positions are in each server's encoding: look it up by serverId.
        let encodings: HashMap<String, PositionEncoding> = tool
            .servers()
            .await
            .map_err(describe)?
            .iter()
            .map(|s| (s.server_id.to_string(), encoding_of(s)))
            .collect();
        // (uri, encoding, diagnostics) from both sources.
        let mut found: Vec<(String, PositionEncoding, Vec<Value>)> = Vec::new();
        let mut stale = Vec::new();
        for published in &published {
            let uri = published["uri"].as_str().unwrap_or_default().to_string();
            let encoding = published["serverId"]
                .as_str()
                .and_then(|id| encodings.get(id).copied())
                .unwrap_or(PositionEncoding::Utf16);
            if published["fresh"] == false {
                stale.push(Files::new(&tool, &self.texts, encoding).display_uri(&uri));
            }
            let list = published["diagnostics"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            found.push((uri, encoding, list));
        }
        let mut lines = Vec::new();
        let mut items = Vec::new();
        for (uri, encoding, list) in &found {
            let mut files = Files::new(&tool, &self.texts, *encoding);
            files.load(&Value::Null, std::slice::from_ref(uri)).await;
            for d in list {
                let start = files.point(uri, &d["range"]["start"]);
                let severity = match d["severity"].as_u64() {
                    Some(1) => "error",
                    Some(2) => "warning",
                    Some(3) => "info",
                    _ => "hint",
                };
                let message = d["message"].as_str().unwrap_or_default();
                let line = format!("{}: {severity}: {}", start.label(), first_line(message));
                // The same diagnostic may come pushed and pulled.
                if lines.contains(&line) {
                    continue;
                }
                lines.push(line);
                items.push(json!({
                    "file": start.file, "line": start.line, "column": start.column,
                    "severity": severity, "message": message, "source": d["source"], "code": d["code"],
                }));
            }
        }
        let mut text = list(&lines, "no diagnostics");
        if !stale.is_empty() {
            text.push_str(&format!(
                "not yet re-checked after the last change: {}\n",
                stale.join(", ")
            ));
        }
        Ok(ok(text, json!({ "diagnostics": items, "notFresh": stale })))
    }

    async fn rename_inner(&self, args: RenameArgs) -> ToolResult<CallToolResult> {
        let tool = self.session().await?;
        let path = resolve(&tool, &args.file)?;
        // Wait here, so that a server still indexing is reported as such.
        ready_server(&tool, None, Some(&path)).await?;
        let location = FileLocation {
            file: path,
            line: args.line.max(1) as usize,
            column: args.column.max(1) as usize,
        };
        let RenameEdit {
            edit,
            encoding,
            server,
        } = tool
            .rename_edit(&location, &args.new_name, None)
            .await
            .map_err(describe_rename)?;
        let editor = self.editor.as_ref().filter(|e| e.enabled());
        let through_editor = match editor {
            Some(editor) => {
                let fs = editor.for_session(&self.gate, tool.session_id());
                match apply_with_agent_fs(
                    &edit,
                    &fs,
                    encoding,
                    |p: &Path| tool.is_writable(p),
                    &Decisions::default(),
                )
                .await
                {
                    Ok(report) => Some(report),
                    // ACP's fs methods cannot rename or delete a file (renaming
                    // a module renames its file); nothing was written, so the
                    // whole edit goes to disk instead.
                    Err(AgentApplyError::Unsupported { .. }) => None,
                    Err(e) => {
                        return Err(format!(
                            "the edit could not be applied through the editor: {e}"
                        ))
                    }
                }
            }
            None => None,
        };
        let (report, through) = match through_editor {
            Some(report) => (report, "the editor (fs/write_text_file)"),
            None => {
                // Reading and writing the files is blocking work: off the
                // runtime threads.
                let confinement = tool
                    .confinement()
                    .ok_or_else(|| format!("the ACP session {} is closed", tool.session_id()))?;
                let applied = tokio::task::spawn_blocking(move || {
                    let writable = |p: &Path| confinement.is_writable(p);
                    let plan = plan_on_disk(&edit, encoding, &writable, &Decisions::default())
                        .map_err(|e| format!("the server's edit cannot be applied: {e}"))?;
                    apply_to_disk(&plan).map_err(|e| e.to_string())
                })
                .await
                .map_err(|e| format!("the edit could not be applied: {e}"))??;
                (applied, "the disk")
            }
        };
        Ok(render_report(
            &tool,
            &self.texts,
            &report,
            &server,
            &args.new_name,
            through,
        ))
    }

    async fn code_actions_inner(&self, args: CodeActionsArgs) -> ToolResult<CallToolResult> {
        let at = self.at(&args.file, args.line, args.column).await?;
        let end = match (args.end_line, args.end_column) {
            (None, None) => at.position.clone(),
            (end_line, end_column) => {
                let path = resolve(&at.tool, &args.file)?;
                let text = read_text(&at.tool, &self.texts, &path, &args.file).await?;
                let end_line = end_line.unwrap_or(args.line);
                let end_column = end_column.unwrap_or(args.column);
                let entry = at
                    .tool
                    .pick_server(Some(&at.server), Some(&path))
                    .await
                    .map_err(describe)?;
                let character =
                    lsp_position(&text, &path, end_line, end_column, encoding_of(&entry))?;
                json!({ "line": end_line - 1, "character": character })
            }
        };
        let capabilities: Value =
            serde_json::from_str(at.capabilities.get()).unwrap_or(Value::Null);
        if capabilities["codeActionProvider"].is_null() {
            return Err(format!("{} offers no code actions", at.server));
        }
        let result = at
            .tool
            .request(
                &at.server_id,
                "textDocument/codeAction",
                json!({
                    "textDocument": at.text_document,
                    "range": { "start": at.position, "end": end },
                    "context": { "diagnostics": [] },
                }),
            )
            .await
            .map_err(describe)?;
        let result: Value = parse(result.get())?;
        let mut lines = Vec::new();
        let mut items = Vec::new();
        for action in result.as_array().into_iter().flatten() {
            let title = action["title"].as_str().unwrap_or("?");
            let kind = action["kind"].as_str().unwrap_or("");
            lines.push(if kind.is_empty() {
                title.to_string()
            } else {
                format!("{title} ({kind})")
            });
            items.push(json!({ "title": title, "kind": action["kind"], "isPreferred": action["isPreferred"] }));
        }
        Ok(ok(
            list(&lines, "no code actions here"),
            json!({ "actions": items }),
        ))
    }
}

#[cfg(test)]
mod tests;
