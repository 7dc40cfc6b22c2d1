//! The MCP tools: language-server requests for one agent session, shaped
//! for a model: symbols named by name or by file, line and column (1-based),
//! compact text out (cut to a byte budget, never silently) plus structured
//! content.
//!
//! Every request goes through the gate ([`SessionFacade`] over the session, which
//! calls [`crate::gate::Gate::call_internal`]): the same confinement,
//! refusals, limits and deadlines as the agent's own `lsp/request`. A server
//! that is not ready is waited for up to [`READY_WAIT`]; after that the tool
//! fails saying the server is still indexing, never answering with an empty
//! result that reads like "no references".

mod address;
mod budget;
mod diagnostics;
mod found;
mod hierarchy;
mod input;
mod listing;
mod names;
mod navigate;
mod partial;
mod rename;
mod render;
mod scan;
mod texts;

pub use self::address::Target;
use self::address::*;
use self::input::*;
pub use self::input::{
    CallHierarchyArgs, CodeActionsArgs, DiagnosticsArgs, Direction, FileArgs, HoverArgs,
    LspRequestArgs, PositionArgs, ReferencesArgs, RenameArgs, Since, WorkspaceSymbolsArgs,
};
use self::render::*;
use self::texts::{Text, TextCache};
use super::editor::EditorFs;
use super::journal::Journal;
use super::tokens::{Lease, SESSION_BIND_WAIT};
use crate::edit::PositionEncoding;
use crate::gate::confine::ConfineError;
use crate::gate::{Gate, GateError, ServerEntry, ServerState};
use crate::lsp::documents::MAX_DOCUMENT_BYTES;
use crate::proxy_host::ProxyHost;
use crate::read::{read_confined, read_confined_blocking, ReadError};
use crate::session_facade::{
    capabilities_of, FacadeError, FileLocation, RenameError, SessionFacade,
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

pub use self::budget::DEFAULT_BUDGET;

/// How long a tool waits for its language server to finish indexing before
/// it answers that the server is still indexing.
pub const READY_WAIT: Duration = Duration::from_secs(60);
/// How long `diagnostics` waits for diagnostics that reflect the files' text.
pub(crate) const DIAGNOSTICS_WAIT: Duration = Duration::from_secs(20);
/// Most bytes of files one tool call reads to show the lines its results
/// point at; past it, results are shown without their line's text.
pub(crate) const MAX_LOADED_BYTES: u64 = 64 * 1024 * 1024;

/// The tools of one MCP connection.
#[derive(Clone)]
pub(crate) struct LspTools {
    gate: Arc<Gate<ProxyHost>>,
    lease: Arc<Lease>,
    editor: Option<Arc<EditorFs>>,
    /// The sessions' writes and known diagnostics: the editor's (shared by
    /// every connection of the proxy), else this connection's own.
    journal: Arc<Journal>,
    /// How long a tool waits for its server to be ready ([`READY_WAIT`]).
    ready_wait: Duration,
    /// Texts of the files this connection's tools read, kept while unchanged.
    texts: Arc<TextCache>,
    tool_router: ToolRouter<LspTools>,
}

/// A tool's failure, shown to the agent as a tool error.
type ToolResult<T> = Result<T, String>;

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
        let journal = editor
            .as_ref()
            .map_or_else(Arc::default, |editor| Arc::clone(editor.journal()));
        LspTools {
            gate,
            lease: Arc::new(lease),
            editor,
            journal,
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
        description = "Go to definition: where a symbol (function, method, type, variable) \
        is defined, as file:line:column with the line's text. Name it with `symbol` (`tally`, \
        `Ledger::tally`; add `file`, or `file` and `line`, to narrow), or point at it with \
        `file`, `line` and `column` (1-based)."
    )]
    async fn definition(
        &self,
        Parameters(args): Parameters<PositionArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(
            self.locations(args, "textDocument/definition", "definitions", None)
                .await,
        )
    }

    #[tool(
        description = "Find references: every use of a symbol across the workspace (callers, \
        call sites, usages), as file:line:column with the line's text. Semantic, from the \
        language server: no false matches of the name. Name it with `symbol` (`tally`, \
        `Ledger::tally`; add `file` or `line` to narrow) or give `file`, `line` and `column` \
        (1-based). A long answer is cut; `offset` shows the rest."
    )]
    async fn references(
        &self,
        Parameters(args): Parameters<ReferencesArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(self.references_inner(args).await)
    }

    #[tool(
        description = "Hover: the type of a symbol, its signature and documentation (type of \
        a variable, expression or function). Name it with `symbol`, or give `file`, `line` \
        and `column` (1-based)."
    )]
    async fn hover(
        &self,
        Parameters(args): Parameters<HoverArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(self.hover_inner(args).await)
    }

    #[tool(
        description = "Implementations: the types and methods that implement an interface, \
        trait or abstract method. Name it with `symbol`, or give `file`, `line` and `column` \
        (1-based)."
    )]
    async fn implementation(
        &self,
        Parameters(args): Parameters<PositionArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(
            self.locations(
                args,
                "textDocument/implementation",
                "implementations",
                Some("implementationProvider"),
            )
            .await,
        )
    }

    #[tool(
        description = "Go to type definition: where the class, struct or interface that a \
        variable, field, parameter or expression has is defined. Name it with `symbol`, or give `file`, `line` and `column` \
        (1-based)."
    )]
    async fn type_definition(
        &self,
        Parameters(args): Parameters<PositionArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(
            self.locations(
                args,
                "textDocument/typeDefinition",
                "type definitions",
                Some("typeDefinitionProvider"),
            )
            .await,
        )
    }

    #[tool(
        description = "Call hierarchy: the callers of a function (`direction` `incoming`, \
        the default) or the functions it calls (`outgoing`), across files, as a tree up to \
        `depth` 3. Name it with `symbol`, or give `file`, `line` and `column` (1-based)."
    )]
    async fn call_hierarchy(
        &self,
        Parameters(args): Parameters<CallHierarchyArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(self.call_hierarchy_inner(args).await)
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
        description = "Workspace symbols: search the whole workspace for symbols whose name \
        contains a fragment (function, class, type, constant) and where they are declared."
    )]
    async fn workspace_symbols(
        &self,
        Parameters(args): Parameters<WorkspaceSymbolsArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(self.workspace_symbols_inner(args).await)
    }

    #[tool(
        description = "Diagnostics: compile errors, type errors and warnings from every \
        language server of a file, each tagged with its server. `files`: check these now. \
        `since: \"last_edit\"`: after an edit, only what it changed: the problems that \
        appeared (new) or went away (fixed) since the session last wrote files."
    )]
    async fn diagnostics(
        &self,
        Parameters(args): Parameters<DiagnosticsArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        reply(self.diagnostics_inner(args).await)
    }

    #[tool(
        description = "Rename symbol: rename a function, variable, type or method everywhere \
        it is used, with the language server's semantic rename (a safe refactoring, not a text \
        replace), and write the files; `dry_run: true` shows the diff and writes nothing. Also \
        lists where the old name still occurs as text (comments, docs, strings). Name it with \
        `symbol`, or give `file`, `line` and `column` (1-based)."
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
                "Language-server tools for this session's workspace (acp-lsp). Name a symbol \
                 with `symbol` (`tally`, `Ledger::tally`), or point at it with `file`, `line` \
                 and `column`: files relative to the session's working directory or absolute, \
                 lines and columns 1-based, columns in characters. Long answers are cut and \
                 say which `offset` shows the rest.",
            )
    }
}

#[cfg(test)]
mod tests;
