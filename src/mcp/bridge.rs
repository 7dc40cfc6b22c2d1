//! `acp-lsp mcp --connect SOCKET`: the process an agent launches for the
//! injected stdio MCP server. It sends the token (from [`TOKEN_ENV`]) as the
//! first line. When its stdin and stdout are pipes or sockets (as agents
//! start MCP servers), the token line carries them (`SCM_RIGHTS`) and the
//! proxy reads and writes the agent's pipes itself: no copy through this
//! process, which then only waits for the proxy to end the connection.
//! Otherwise (or if the proxy answers that it copies) it is a byte bridge:
//! stdin to the socket, the socket to stdout. Its stdout carries MCP only;
//! it logs to stderr. On Windows (a named pipe, no descriptor passing) it
//! is always the byte bridge.

use super::inject::TOKEN_ENV;
#[cfg(unix)]
use super::tokens::TOKEN_BUSY_WAIT;
#[cfg(unix)]
use crate::sys::FdKind;
#[cfg(unix)]
use std::io::{Read, Write};
#[cfg(unix)]
use std::net::Shutdown;
#[cfg(unix)]
use std::os::fd::AsFd;
use std::path::Path;

/// Bytes read at once in each direction (tokio::io::copy's size).
#[cfg(unix)]
const PUMP_BUFFER: usize = 8 * 1024;
/// How long the proxy may take to say whether it took our stdin and stdout:
/// it answers once the token is admitted, which may wait for the token's
/// previous connection to end ([`TOKEN_BUSY_WAIT`]).
#[cfg(unix)]
const HANDOVER_REPLY_TIMEOUT: std::time::Duration =
    std::time::Duration::from_secs(TOKEN_BUSY_WAIT.as_secs() + 10);
/// The proxy's one-byte answer to a token line carrying stdin and stdout:
/// it serves them itself.
#[cfg(unix)]
pub(crate) const TAKEN: u8 = b'T';
/// The same answer when it will not: the bridge copies, as without them.
#[cfg(unix)]
pub(crate) const COPY: u8 = b'C';

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
#[cfg(unix)]
pub async fn run(socket: &Path) -> Result<(), BridgeError> {
    let token = std::env::var(TOKEN_ENV).map_err(|_| BridgeError::NoToken)?;
    let stream = crate::sys::local_socket::connect(socket)
        .await
        .map_err(|source| BridgeError::Connect {
            path: socket.display().to_string(),
            source,
        })?
        .into_std()?;
    stream.set_nonblocking(false)?;
    let line = format!("{token}\n");
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    let servable = |fd: std::os::fd::BorrowedFd<'_>| {
        matches!(crate::sys::fd_kind(fd), Ok(FdKind::Pipe | FdKind::Socket))
    };
    if servable(stdin.as_fd()) && servable(stdout.as_fd()) {
        let sent = crate::sys::send_with_fds(
            stream.as_fd(),
            line.as_bytes(),
            &[stdin.as_fd(), stdout.as_fd()],
        )?;
        (&stream).write_all(&line.as_bytes()[sent..])?;
        stream.set_read_timeout(Some(HANDOVER_REPLY_TIMEOUT))?;
        let mut reply = [0u8; 1];
        // A read with a timeout is not restarted after the process is
        // stopped and continued (SIGSTOP, SIGCONT): EINTR, read again.
        let n = loop {
            match (&stream).read(&mut reply) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                read => break read?,
            }
        };
        if n == 0 {
            // Refused (a wrong or revoked token): the proxy closed the connection.
            return Ok(());
        }
        if reply[0] == TAKEN {
            // The proxy serves our stdin and stdout now; it closes the
            // connection when the agent is done (or the proxy ends).
            stream.set_read_timeout(None)?;
            // read_to_end reads again after EINTR.
            let mut rest = Vec::new();
            let _ = (&stream).read_to_end(&mut rest);
            return Ok(());
        }
    } else {
        (&stream).write_all(line.as_bytes())?;
    }
    stream.set_read_timeout(None)?;
    let mut to_proxy = stream.try_clone()?;
    let mut from_proxy = stream;
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

/// Runs the bridge until either side closes (Windows): the token line, then
/// stdin to the pipe and the pipe to stdout, on tokio's standard streams
/// (its copy flushes whenever the source has nothing more for now, so the
/// agent sees each message once it is complete).
#[cfg(windows)]
pub async fn run(socket: &Path) -> Result<(), BridgeError> {
    use tokio::io::AsyncWriteExt;
    let token = std::env::var(TOKEN_ENV).map_err(|_| BridgeError::NoToken)?;
    let stream = crate::sys::local_socket::connect(socket)
        .await
        .map_err(|source| BridgeError::Connect {
            path: socket.display().to_string(),
            source,
        })?;
    let (mut from_proxy, mut to_proxy) = stream.into_split();
    to_proxy.write_all(format!("{token}\n").as_bytes()).await?;
    let up = async {
        tokio::io::copy(&mut tokio::io::stdin(), &mut to_proxy).await?;
        to_proxy.flush().await
    };
    let down = async {
        let mut stdout = tokio::io::stdout();
        tokio::io::copy(&mut from_proxy, &mut stdout).await?;
        stdout.flush().await
    };
    // Either direction ending ends the bridge: the proxy went away, or the
    // agent is done with us (a named pipe has no half close: we leave).
    tokio::select! {
        done = up => done?,
        done = down => done?,
    }
    Ok(())
}

/// Copies `from` to `to` until end of input, flushing after every read (the
/// agent must see each message as soon as it is complete).
#[cfg(unix)]
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
