//! The proxy's private Unix socket: the `acp-lsp mcp` bridge an agent
//! launches connects here and presents its token on the first line. When
//! the line carries the bridge's stdin and stdout (pipes or sockets the
//! agent holds the other ends of), those are served as one MCP connection
//! ([`LspTools`]) and the stream only tells that the bridge is alive;
//! otherwise the rest of the stream is the MCP connection.
//!
//! The socket lives in a fresh directory of mode 0700 under the temporary
//! directory, so only the proxy's user can reach it; the token decides which
//! session a connection serves. The directory is removed when the listener
//! is dropped (the proxy drops it on editor EOF and on SIGTERM, SIGINT and
//! SIGHUP). A proxy killed with SIGKILL cannot: the directory's name holds
//! its pid, and the next bind removes the directories of dead proxies that
//! belong to this user ([`remove_stale_dirs`]).

use super::bridge::{COPY, TAKEN};
use super::editor::EditorFs;
use super::isolated::Isolated;
use super::tokens::TokenTable;
use super::tools::LspTools;
use crate::gate::Gate;
use crate::proxy_host::ProxyHost;
use crate::sys::FdKind;
use rmcp::ServiceExt;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, Interest};
use tokio::net::unix::pipe;
use tokio::net::{UnixListener, UnixStream};

/// How long a new connection may take to send its token line.
pub const TOKEN_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest token line read (a token is 32 hex digits).
const MAX_TOKEN_LINE: u64 = 256;

/// Socket directories are `<tmp>/acp-lsp-<pid>-<16 hex digits>`.
const DIR_PREFIX: &str = "acp-lsp-";

/// Removes, in `tmp`, the socket directories left by proxies that are no
/// longer running: directories (not symlinks) named `acp-lsp-<pid>-<hex>`,
/// owned by this user, whose pid is not a live process. A reused pid only
/// keeps a stale directory; it never removes a live one. Returns how many
/// were removed.
pub fn remove_stale_dirs(tmp: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return 0;
    };
    let me = crate::sys::effective_uid();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(stale_dir_pid) else {
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != me || process_exists(pid) {
            continue;
        }
        match std::fs::remove_dir_all(entry.path()) {
            Ok(()) => removed += 1,
            Err(error) => {
                tracing::debug!(dir = %entry.path().display(), %error, "cannot remove a stale MCP socket directory")
            }
        }
    }
    removed
}

/// The pid in a socket directory's name, if the name is one of ours.
fn stale_dir_pid(name: &str) -> Option<crate::sys::Pid> {
    let (pid, random) = name.strip_prefix(DIR_PREFIX)?.split_once('-')?;
    if random.len() != 16 || !random.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok().filter(|pid: &crate::sys::Pid| *pid > 0)
}

/// Whether a process with this pid exists (of any user: `EPERM` means it does).
fn process_exists(pid: crate::sys::Pid) -> bool {
    crate::sys::process_exists(pid)
}

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
        gate: Arc<Gate<ProxyHost>>,
        tokens: Arc<TokenTable>,
        editor: Option<Arc<EditorFs>>,
        random: &str,
        ready_wait: Duration,
    ) -> std::io::Result<McpSocket> {
        let removed = remove_stale_dirs(&std::env::temp_dir());
        if removed > 0 {
            tracing::info!(
                removed,
                "removed the MCP socket directories of dead proxies"
            );
        }
        let dir = std::env::temp_dir().join(format!("{DIR_PREFIX}{}-{random}", std::process::id()));
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
    gate: Arc<Gate<ProxyHost>>,
    tokens: Arc<TokenTable>,
    editor: Option<Arc<EditorFs>>,
    ready_wait: Duration,
) {
    // Every connection's task, ended with this loop (the socket dropped).
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "MCP socket accept failed");
                continue;
            }
        };
        let gate = Arc::clone(&gate);
        let tokens = Arc::clone(&tokens);
        let editor = editor.clone();
        connections.spawn(serve_connection(stream, gate, tokens, editor, ready_wait));
    }
}

/// The agent's own MCP pipes, handed over with the token line by a bridge
/// whose stdin and stdout are pipes or sockets.
struct AgentPipes {
    input: Box<dyn AsyncRead + Send + Unpin>,
    output: Box<dyn AsyncWrite + Send + Unpin>,
}

/// One accepted connection: the token line, then MCP on the agent's pipes
/// when the bridge handed them over, else on this stream.
async fn serve_connection(
    stream: UnixStream,
    gate: Arc<Gate<ProxyHost>>,
    tokens: Arc<TokenTable>,
    editor: Option<Arc<EditorFs>>,
    ready_wait: Duration,
) {
    let (line, rest, fds) =
        match tokio::time::timeout(TOKEN_READ_TIMEOUT, read_token_line(&stream)).await {
            Ok(Ok(Some(read))) => read,
            _ => {
                tracing::warn!("MCP connection closed: no token line");
                return;
            }
        };
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
    // A tool that panics is answered, not left waiting (`isolated`).
    let tools = Isolated(LspTools::new(gate, lease, editor, ready_wait));
    let handed = !fds.is_empty();
    let pipes = if handed { agent_pipes(fds) } else { None };
    if handed {
        // The bridge waits for this byte to know whether to copy.
        let reply = if pipes.is_some() { TAKEN } else { COPY };
        if let Err(e) = (&stream).write_all_now(reply).await {
            tracing::warn!(error = %e, "MCP connection lost before it started");
            return;
        }
    }
    match pipes {
        Some(AgentPipes { input, output }) => {
            // The bridge's connection stays open while the agent talks to us
            // on its pipes: the bridge ending (killed by the agent) ends the
            // MCP connection, and this stream dropped lets the bridge exit.
            tracing::debug!("serving MCP on the agent's pipes the bridge handed over");
            let served = tokio::select! {
                served = tools.serve((input, output)) => served,
                // Gone before the MCP handshake ended: nothing to serve.
                _ = bridge_gone(&stream) => return,
            };
            let running = match served {
                Ok(running) => running,
                Err(e) => {
                    tracing::warn!(error = %e, "MCP connection failed to initialize");
                    return;
                }
            };
            let cancel = running.cancellation_token();
            tokio::select! {
                _ = running.waiting() => {}
                _ = bridge_gone(&stream) => cancel.cancel(),
            }
        }
        None => {
            let (read, write) = stream.into_split();
            // Bytes after the token line are MCP.
            let reader = std::io::Cursor::new(rest).chain(read);
            match tools.serve((reader, write)).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => tracing::warn!(error = %e, "MCP connection failed to initialize"),
            }
        }
    }
}

/// Reads the token line, with the descriptors sent along with it. Returns
/// the line, the bytes read past it, and the descriptors; `None` on end of
/// input or a line longer than [`MAX_TOKEN_LINE`].
async fn read_token_line(
    stream: &UnixStream,
) -> std::io::Result<Option<(String, Vec<u8>, Vec<OwnedFd>)>> {
    let mut buffer = vec![0u8; MAX_TOKEN_LINE as usize];
    let mut filled = 0;
    let mut fds = Vec::new();
    loop {
        stream.readable().await?;
        let received = stream.try_io(Interest::READABLE, || {
            crate::sys::recv_with_fds(stream.as_fd(), &mut buffer[filled..])
        });
        let (n, more) = match received {
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        fds.extend(more);
        if n == 0 {
            return Ok(None);
        }
        filled += n;
        if let Some(end) = buffer[..filled].iter().position(|b| *b == b'\n') {
            let line = String::from_utf8_lossy(&buffer[..end]).into_owned();
            return Ok(Some((line, buffer[end + 1..filled].to_vec(), fds)));
        }
        if filled == buffer.len() {
            return Ok(None);
        }
    }
}

/// The agent's stdin and stdout as the bridge handed them over, if both
/// are pipes or sockets tokio can wait on; `None`: serve the stream instead.
fn agent_pipes(fds: Vec<OwnedFd>) -> Option<AgentPipes> {
    let [input, output]: [OwnedFd; 2] = fds.try_into().ok()?;
    let input: Box<dyn AsyncRead + Send + Unpin> = match crate::sys::fd_kind(input.as_fd()).ok()? {
        FdKind::Pipe => Box::new(pipe::Receiver::from_owned_fd(input).ok()?),
        FdKind::Socket => Box::new(socket_of(input)?),
        FdKind::Other => return None,
    };
    let output: Box<dyn AsyncWrite + Send + Unpin> =
        match crate::sys::fd_kind(output.as_fd()).ok()? {
            FdKind::Pipe => Box::new(pipe::Sender::from_owned_fd(output).ok()?),
            FdKind::Socket => Box::new(socket_of(output)?),
            FdKind::Other => return None,
        };
    Some(AgentPipes { input, output })
}

fn socket_of(fd: OwnedFd) -> Option<UnixStream> {
    let socket = std::os::unix::net::UnixStream::from(fd);
    socket.set_nonblocking(true).ok()?;
    UnixStream::from_std(socket).ok()
}

/// Resolves when the bridge closes its connection (it ended, or was killed).
async fn bridge_gone(stream: &UnixStream) {
    let mut byte = [0u8; 1];
    loop {
        let _ = stream.readable().await;
        match stream.try_read(&mut byte) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            // End of input, an error, or a byte it should not have sent.
            _ => return,
        }
    }
}

/// Writes one byte on a shared stream reference.
trait WriteNow {
    async fn write_all_now(self, byte: u8) -> std::io::Result<()>;
}

impl WriteNow for &UnixStream {
    async fn write_all_now(self, byte: u8) -> std::io::Result<()> {
        loop {
            self.writable().await?;
            match self.try_write(&[byte]) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_names_are_ours() {
        assert_eq!(stale_dir_pid("acp-lsp-42-0123456789abcdef"), Some(42));
        assert_eq!(stale_dir_pid("acp-lsp-42-0123456789abcde"), None);
        assert_eq!(stale_dir_pid("acp-lsp--0123456789abcdef"), None);
        assert_eq!(stale_dir_pid("acp-lsp-4x-0123456789abcdef"), None);
        assert_eq!(stale_dir_pid("acp-lsp-0-0123456789abcdef"), None);
        assert_eq!(stale_dir_pid("other-42-0123456789abcdef"), None);
    }

    #[test]
    fn removes_directories_of_dead_proxies_only() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // A pid that is certainly dead: a child that was reaped.
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let dead = child.id();
        child.wait().expect("reap true");
        let alive = std::process::id();
        let dead_dir = tmp.path().join(format!("acp-lsp-{dead}-0123456789abcdef"));
        let live_dir = tmp.path().join(format!("acp-lsp-{alive}-0123456789abcdef"));
        let not_ours = tmp.path().join(format!("acp-lsp-{dead}-notours"));
        let dead_file = tmp.path().join(format!("acp-lsp-{dead}-fedcba9876543210"));
        let target = tmp.path().join("target");
        let dead_link = tmp.path().join(format!("acp-lsp-{dead}-00000000000000aa"));
        for dir in [&dead_dir, &live_dir, &not_ours, &target] {
            std::fs::create_dir(dir).expect("mkdir");
        }
        std::fs::write(dead_dir.join("mcp.sock"), "").expect("write");
        std::fs::write(&dead_file, "").expect("write");
        std::os::unix::fs::symlink(&target, &dead_link).expect("symlink");

        assert_eq!(remove_stale_dirs(tmp.path()), 1);
        assert!(!dead_dir.exists(), "the dead proxy's directory stayed");
        for kept in [&live_dir, &not_ours, &dead_file, &dead_link, &target] {
            assert!(
                kept.symlink_metadata().is_ok(),
                "{} was removed",
                kept.display()
            );
        }
    }
}
