//! Language-server tools for agents that speak MCP but not `lsp/*`: acp-lsp
//! adds its own MCP server to every session's `mcpServers`.
//!
//! - [`inject`]: the entry added to `session/new|load|resume|fork`.
//! - [`tokens`]: token → session, bound when the session request succeeds.
//! - [`socket`]: the proxy's private Unix socket; each accepted connection is
//!   one MCP connection served by [`tools::LspTools`] (rmcp).
//! - [`bridge`]: `acp-lsp mcp --connect SOCKET`, the stdio process the agent
//!   starts, a byte bridge to the socket.
//! - [`http`]: the same tools over streamable HTTP on 127.0.0.1 with a bearer
//!   token, for agents that advertise `mcpCapabilities.http`.
//! - [`editor`]: requests acp-lsp itself sends the editor (`fs/*`), so a
//!   rename is written through the editor when it can.

pub mod bridge;
pub mod editor;
pub mod http;
pub mod inject;
pub mod isolated;
pub mod journal;
pub mod socket;
pub mod start;
pub mod tokens;
pub mod tools;

use editor::EditorFs;
use inject::{HttpEntry, StdioEntry};
use std::sync::Arc;
use tokens::TokenTable;

/// Whether and how the MCP server is injected (`acp-lsp proxy --mcp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum McpMode {
    /// Inject nothing.
    Off,
    /// A stdio entry running `acp-lsp mcp --connect …`.
    Stdio,
    /// An `http` entry when the agent's `initialize` answer advertises
    /// `mcpCapabilities.http`, else stdio.
    #[default]
    Auto,
}

/// What the relay needs to inject the entry and route editor responses.
#[derive(Clone)]
pub struct McpRelay {
    pub tokens: Arc<TokenTable>,
    pub entry: StdioEntry,
    /// Offered to agents that advertise `mcpCapabilities.http` (`--mcp auto`).
    pub http: Option<HttpEntry>,
    pub editor: Arc<EditorFs>,
}

/// 64 random bits as hex, for names that must not be guessed or collide.
pub fn random_hex() -> std::io::Result<String> {
    tokens::random_token().map(|t| t[..16].to_string())
}
