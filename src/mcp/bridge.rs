//! `acp-lsp mcp --connect SOCKET`: the process an agent launches for the
//! injected stdio MCP server. A byte bridge: it sends the token (from
//! [`TOKEN_ENV`]) as the first line, then copies stdin to the socket and the
//! socket to stdout. Its stdout carries MCP only; it logs to stderr.

use super::inject::TOKEN_ENV;
use std::path::Path;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("{TOKEN_ENV} is not set: this command is started by the agent from the entry acp-lsp adds to mcpServers")]
    NoToken,
    #[error("cannot connect to {path}: {source} (is the acp-lsp proxy still running?)")]
    Connect {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Runs the bridge until either side closes.
pub async fn run(socket: &Path) -> Result<(), BridgeError> {
    let token = std::env::var(TOKEN_ENV).map_err(|_| BridgeError::NoToken)?;
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|source| BridgeError::Connect {
            path: socket.display().to_string(),
            source,
        })?;
    let (mut from_proxy, mut to_proxy) = stream.into_split();
    to_proxy.write_all(format!("{token}\n").as_bytes()).await?;
    let upstream = async {
        let mut stdin = tokio::io::stdin();
        tokio::io::copy(&mut stdin, &mut to_proxy).await?;
        // The agent closed our stdin: tell the proxy the connection is over.
        to_proxy.shutdown().await
    };
    let downstream = async {
        let mut stdout = tokio::io::stdout();
        tokio::io::copy(&mut from_proxy, &mut stdout).await?;
        stdout.flush().await
    };
    // Either direction ending ends the bridge: the proxy went away, or the
    // agent is done with us.
    tokio::select! {
        r = upstream => r?,
        r = downstream => r?,
    }
    Ok(())
}
