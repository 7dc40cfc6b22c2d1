//! Starting the injected MCP server for one proxy: the private socket (and,
//! with `--mcp auto`, the loopback HTTP endpoint) over the proxy's gate, and
//! what the relay needs to inject their entries into session requests.

use super::acp_transport::{AcpTransport, ServeMcp};
use super::editor::EditorFs;
use super::http::McpHttp;
use super::inject::{HttpEntry, StdioEntry};
use super::socket::McpSocket;
use super::tokens::TokenTable;
use super::tools::{LspTools, READY_WAIT};
use super::McpRelay;
use crate::gate::Gate;
use crate::lsp::config::McpHttpLimits;
use crate::proxy_host::ProxyHost;
use futures::FutureExt;
use rmcp::ServiceExt;
use std::sync::Arc;

/// Why the MCP server could not start.
#[derive(Debug, thiserror::Error)]
pub enum McpStartError {
    #[error("cannot draw random bytes for the MCP socket's name: {0}")]
    Random(#[source] std::io::Error),
    #[error("cannot bind the MCP socket: {0}")]
    Socket(#[source] std::io::Error),
    #[error("cannot find the acp-lsp executable (the agent starts it as the MCP server): {0}")]
    Executable(#[source] std::io::Error),
    #[error("cannot bind the MCP HTTP endpoint on 127.0.0.1: {0}")]
    Http(#[source] std::io::Error),
}

/// The listeners the injected entries connect to. Dropping them stops them
/// and removes the socket and its directory: keep them for the proxy's life.
pub struct McpListeners {
    pub socket: McpSocket,
    pub http: Option<McpHttp>,
}

/// Binds the socket (and, with `http`, the HTTP endpoint with `http_limits`,
/// and the MCP-over-ACP transport) over `gate`; the tools wait up to
/// [`READY_WAIT`] for a server.
pub async fn start(
    gate: &Arc<Gate<ProxyHost>>,
    http: bool,
    http_limits: McpHttpLimits,
) -> Result<(McpRelay, McpListeners), McpStartError> {
    let random = super::random_hex().map_err(McpStartError::Random)?;
    let tokens = Arc::new(TokenTable::new());
    let editor = Arc::new(EditorFs::new(&random));
    let socket = McpSocket::bind(
        Arc::clone(gate),
        Arc::clone(&tokens),
        Some(Arc::clone(&editor)),
        &random,
        READY_WAIT,
    )
    .map_err(McpStartError::Socket)?;
    let entry = StdioEntry {
        command: std::env::current_exe().map_err(McpStartError::Executable)?,
        socket: socket.path().to_path_buf(),
    };
    let http_server = if http {
        Some(
            McpHttp::bind_with_limits(
                Arc::clone(gate),
                Arc::clone(&tokens),
                Some(Arc::clone(&editor)),
                READY_WAIT,
                http_limits,
            )
            .await
            .map_err(McpStartError::Http)?,
        )
    } else {
        None
    };
    let http = http_server
        .as_ref()
        .map(|server| HttpEntry { url: server.url() });
    // MCP over the ACP connection needs no listener: offered with `auto`
    // when the agent advertises it.
    let acp = http_server
        .is_some()
        .then(|| AcpTransport::new(Arc::clone(&tokens), serve_tools(gate, &editor)));
    Ok((
        McpRelay {
            tokens,
            entry,
            http,
            editor,
            acp,
        },
        McpListeners {
            socket,
            http: http_server,
        },
    ))
}

/// One MCP session of the tools on an in-memory pipe (MCP over ACP).
fn serve_tools(gate: &Arc<Gate<ProxyHost>>, editor: &Arc<EditorFs>) -> ServeMcp {
    let gate = Arc::clone(gate);
    let editor = Arc::clone(editor);
    Arc::new(move |lease, io| {
        let tools = LspTools::new(
            Arc::clone(&gate),
            lease,
            Some(Arc::clone(&editor)),
            READY_WAIT,
        );
        async move {
            match tools.serve(tokio::io::split(io)).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "MCP-over-ACP connection failed to initialize")
                }
            }
        }
        .boxed()
    })
}
