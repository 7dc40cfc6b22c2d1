//! The proxy's private Unix socket: the `acp-lsp mcp` bridge an agent
//! launches connects here, presents its token on the first line, and the
//! rest of the stream is served as one MCP connection ([`LspTools`]).
//!
//! The socket lives in a fresh directory of mode 0700 under the temporary
//! directory, so only the proxy's user can reach it; the token decides which
//! session a connection serves. The directory is removed when the listener
//! is dropped.

use super::editor::EditorFs;
use super::tokens::TokenTable;
use super::tools::LspTools;
use crate::gate::Gate;
use crate::lsp::registry::Registry;
use rmcp::ServiceExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::net::UnixListener;

/// How long a new connection may take to send its token line.
pub const TOKEN_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest token line read (a token is 32 hex digits).
const MAX_TOKEN_LINE: u64 = 256;

/// The listening socket; removes its directory on drop.
pub struct McpSocket {
    dir: PathBuf,
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl McpSocket {
    /// Binds the socket in a new private directory and serves connections
    /// until dropped. `random` names the directory; `ready_wait` is how long
    /// a tool waits for its server (the proxy uses [`super::tools::READY_WAIT`]).
    pub fn bind(
        gate: Arc<Gate<Registry>>,
        tokens: Arc<TokenTable>,
        editor: Option<Arc<EditorFs>>,
        random: &str,
        ready_wait: Duration,
    ) -> std::io::Result<McpSocket> {
        let dir = std::env::temp_dir().join(format!("acp-lsp-{}-{random}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let path = dir.join("mcp.sock");
        let listener = match UnixListener::bind(&path) {
            Ok(listener) => listener,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let task = tokio::spawn(accept_loop(listener, gate, tokens, editor, ready_wait));
        Ok(McpSocket { dir, path, task })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for McpSocket {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn accept_loop(
    listener: UnixListener,
    gate: Arc<Gate<Registry>>,
    tokens: Arc<TokenTable>,
    editor: Option<Arc<EditorFs>>,
    ready_wait: Duration,
) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "MCP socket accept failed");
                continue;
            }
        };
        let gate = Arc::clone(&gate);
        let tokens = Arc::clone(&tokens);
        let editor = editor.clone();
        tokio::spawn(async move {
            let (read, write) = stream.into_split();
            let mut reader = BufReader::new(read);
            let mut line = String::new();
            let mut limited = (&mut reader).take(MAX_TOKEN_LINE);
            let read_token = limited.read_line(&mut line);
            match tokio::time::timeout(TOKEN_READ_TIMEOUT, read_token).await {
                Ok(Ok(n)) if n > 0 && line.ends_with('\n') => {}
                _ => {
                    tracing::warn!("MCP connection closed: no token line");
                    return;
                }
            }
            let lease = match tokens.admit(line.trim()).await {
                Ok(lease) => lease,
                Err(e) => {
                    tracing::warn!(error = %e, "MCP connection refused");
                    return;
                }
            };
            // Bound already unless the agent connects before answering session/new.
            let session = lease.session(std::time::Duration::ZERO).await;
            tracing::info!(
                transport = "stdio",
                session = session.as_deref().unwrap_or("(pending)"),
                "MCP connection admitted"
            );
            let tools = LspTools::new(gate, lease, editor, ready_wait);
            // The buffered reader goes on: bytes after the token line are MCP.
            match tools.serve((reader, write)).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => tracing::warn!(error = %e, "MCP connection failed to initialize"),
            }
        });
    }
}
