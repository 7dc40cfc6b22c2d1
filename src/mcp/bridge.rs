//! `acp-lsp mcp --connect SOCKET`: the process an agent launches for the
//! injected stdio MCP server. A byte bridge: it sends the token (from
//! [`TOKEN_ENV`]) as the first line, then copies stdin to the socket and the
//! socket to stdout. Its stdout carries MCP only; it logs to stderr.

use super::inject::TOKEN_ENV;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::path::Path;
use tokio::net::UnixStream;

/// Bytes read at once in each direction (tokio::io::copy's size).
const PUMP_BUFFER: usize = 8 * 1024;

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
///
/// Each direction is a plain thread doing blocking reads and writes:
/// `tokio::io::stdin()`/`stdout()` run every read and write on the blocking
/// pool, a thread handoff each way per message (figure 8 of the bench: the
/// bridge spent 70–130 µs of CPU a tool call so). The threads are not
/// joined: the first direction to end ends the bridge, and the process exits.
pub async fn run(socket: &Path) -> Result<(), BridgeError> {
    let token = std::env::var(TOKEN_ENV).map_err(|_| BridgeError::NoToken)?;
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|source| BridgeError::Connect {
            path: socket.display().to_string(),
            source,
        })?
        .into_std()?;
    stream.set_nonblocking(false)?;
    let mut to_proxy = stream.try_clone()?;
    let mut from_proxy = stream;
    to_proxy.write_all(format!("{token}\n").as_bytes())?;
    let (done, mut ended) = tokio::sync::mpsc::channel::<std::io::Result<()>>(2);
    let upstream_done = done.clone();
    std::thread::Builder::new()
        .name("mcp-bridge-up".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let copied = pump(&mut stdin, &mut to_proxy)
                // The agent closed our stdin: tell the proxy the connection is over.
                .and_then(|()| to_proxy.shutdown(Shutdown::Write));
            let _ = upstream_done.blocking_send(copied);
        })?;
    std::thread::Builder::new()
        .name("mcp-bridge-down".into())
        .spawn(move || {
            let mut stdout = std::io::stdout().lock();
            let _ = done.blocking_send(pump(&mut from_proxy, &mut stdout));
        })?;
    // Either direction ending ends the bridge: the proxy went away, or the
    // agent is done with us.
    if let Some(result) = ended.recv().await {
        result?;
    }
    Ok(())
}

/// Copies `from` to `to` until end of input, flushing after every read (the
/// agent must see each message as soon as it is complete).
fn pump(from: &mut impl Read, to: &mut impl Write) -> std::io::Result<()> {
    let mut buffer = vec![0u8; PUMP_BUFFER];
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buffer[..n])?;
        to.flush()?;
    }
}
