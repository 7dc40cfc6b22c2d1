//! The agent behind `acp-lsp proxy`: its process group, the signals the proxy
//! answers, and how the agent is ended (graceful → bounded → forced).
//!
//! The agent is the leader of its own process group, so what it forks (Gemini
//! CLI's launcher relaunches itself as a second node process that holds the
//! agent's stdout) is signalled with it. The proxy handles `SIGTERM`,
//! `SIGINT` and `SIGHUP` alike from before the agent starts to the very end,
//! so it never dies half-way with the agent still running, and each further
//! signal skips the wait in progress.
//!
//! Ending the agent ([`supervise`]): its stdin is closed, it gets
//! [`AGENT_EXIT_GRACE`] to exit, then `SIGTERM` goes to its group and it gets
//! [`AGENT_TERM_GRACE`], then `SIGKILL` goes to the group and the leader is
//! reaped (at most [`AGENT_KILL_REAP_TIMEOUT`]). Once the leader is reaped,
//! whatever is left in its group is `SIGKILL`ed, and the relay gets
//! [`AGENT_OUTPUT_DRAIN`] to forward the agent's last output: a process that
//! left the group but still holds the agent's stdout cannot keep the proxy
//! alive. If the proxy itself is killed, the parent-death signal `SIGTERM`s
//! the leader (Linux) and the orphan guardian of [`crate::lsp::process`]
//! `SIGKILL`s the group.
//!
//! On Windows the agent's tree is a Job Object (`lsp::process::tree`),
//! killed when acp-lsp closes it, however acp-lsp ends; the proxy answers
//! Ctrl-C, Ctrl-Break and the console's closing as it answers signals on
//! Unix; and since there is no signal to ask a process without a console
//! of ours to end, the step after the closed stdin ends the job.

use crate::acp::writer::Output;
use crate::lsp::process::tree::ProcessTree;
use crate::sys;
use std::future::Future;
use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::process::{Child, ChildStdout, Command};

#[cfg(unix)]
use self::unix_stdin::{pipe_of, AgentPipe};
#[cfg(windows)]
use self::windows_stdin::{pipe_of, AgentPipe};

/// How long the agent may take to exit after its input is closed.
pub const AGENT_EXIT_GRACE: Duration = Duration::from_secs(5);
/// How long the agent's group gets between `SIGTERM` and `SIGKILL`.
pub(crate) const AGENT_TERM_GRACE: Duration = Duration::from_secs(3);
/// How long to wait for the kernel to report the leader dead after `SIGKILL`.
pub(crate) const AGENT_KILL_REAP_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the relay may take, once the agent is gone, to forward what the
/// agent wrote last; after that the proxy stops waiting for end-of-file on
/// the agent's stdout.
pub(crate) const AGENT_OUTPUT_DRAIN: Duration = Duration::from_secs(2);

pub use crate::sys::signals::Signals;

/// The agent's stdin for the relay's writer ([`AgentStdin::output`]);
/// [`AgentProcess`] can close it under the writer's feet (writes then fail
/// with `BrokenPipe`).
pub struct AgentStdin {
    pipe: Arc<Mutex<Option<AgentPipe>>>,
}

impl AgentStdin {
    /// The relay's output to the agent. On Unix a non-blocking pipe the
    /// relay's tasks may write directly (`Output::shared`); on Windows
    /// (anonymous pipes do no overlapped I/O) tokio's child stdin, written
    /// by the writer task.
    pub fn output(self) -> Output {
        #[cfg(unix)]
        {
            Output::shared(Arc::new(self))
        }
        #[cfg(windows)]
        {
            Output::new(self)
        }
    }
}

/// Unix: the agent's stdin as a non-blocking pipe on the reactor.
#[cfg(unix)]
mod unix_stdin {
    use super::AgentStdin;
    use crate::acp::writer::SharedWrite;
    use std::io::{self, IoSlice};
    use std::sync::PoisonError;
    use std::task::{Context, Poll};

    pub(super) type AgentPipe = tokio::net::unix::pipe::Sender;

    /// The pipe made from the child's stdin.
    pub(super) fn pipe_of(stdin: tokio::process::ChildStdin) -> io::Result<AgentPipe> {
        AgentPipe::from_owned_fd(stdin.into_owned_fd()?)
    }

    impl AgentStdin {
        /// `f` on the pipe, or `closed` once [`super::AgentProcess`] has closed it.
        fn with<T>(&self, f: impl FnOnce(&AgentPipe) -> T, closed: T) -> T {
            match self
                .pipe
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
            {
                Some(stdin) => f(stdin),
                None => closed,
            }
        }
    }

    impl SharedWrite for AgentStdin {
        fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.with(
                |stdin| stdin.poll_write_ready(cx),
                Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            )
        }

        fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            self.with(
                |stdin| stdin.try_write_vectored(bufs),
                Err(io::ErrorKind::BrokenPipe.into()),
            )
        }

        fn close(&self) {
            // Closing is dropping the pipe; a second close is not an error.
            drop(
                self.pipe
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take(),
            );
        }
    }
}

/// Windows: tokio's child stdin, behind the same closable slot.
#[cfg(windows)]
mod windows_stdin {
    use super::AgentStdin;
    use std::io;
    use std::pin::Pin;
    use std::sync::PoisonError;
    use std::task::{Context, Poll};
    use tokio::io::AsyncWrite;

    pub(super) type AgentPipe = tokio::process::ChildStdin;

    pub(super) fn pipe_of(stdin: tokio::process::ChildStdin) -> io::Result<AgentPipe> {
        Ok(stdin)
    }

    impl AgentStdin {
        fn poll_with<T>(
            &self,
            f: impl FnOnce(Pin<&mut AgentPipe>) -> Poll<io::Result<T>>,
        ) -> Poll<io::Result<T>> {
            let mut slot = self.pipe.lock().unwrap_or_else(PoisonError::into_inner);
            match slot.as_mut() {
                Some(stdin) => f(Pin::new(stdin)),
                None => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            }
        }
    }

    impl AsyncWrite for AgentStdin {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.poll_with(|stdin| stdin.poll_write(cx, buf))
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.poll_with(|stdin| stdin.poll_flush(cx))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            // Closing is dropping the pipe; a second close is not an error.
            drop(
                self.pipe
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take(),
            );
            Poll::Ready(Ok(()))
        }
    }
}

/// The running agent.
pub struct AgentProcess {
    child: Child,
    /// The leader's pid.
    pid: u32,
    /// Its tree: its process group (id = pid), or its job.
    tree: ProcessTree,
    /// Set once the leader has been reaped (its group id is then no longer ours).
    status: Option<ExitStatus>,
    stdin: Arc<Mutex<Option<AgentPipe>>>,
}

impl AgentProcess {
    /// Starts `program` with `args` in its own process group, stdin and
    /// stdout piped, stderr inherited (the agent's logs reach the editor's log).
    pub fn spawn(
        program: &str,
        args: &[String],
    ) -> io::Result<(AgentProcess, AgentStdin, ChildStdout)> {
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        // Linux SIGTERMs the agent if the proxy dies, even by `kill -9`.
        ProcessTree::prepare(&mut command, sys::Signal::Term);
        let mut child = command.spawn()?;
        let pid = child
            .id()
            .expect("BUG: a child that was just spawned has a pid");
        let tree = ProcessTree::adopt(&child)?;
        let stdin = child.stdin.take().expect("BUG: agent stdin is piped");
        let stdin = pipe_of(stdin)?;
        let stdout = child.stdout.take().expect("BUG: agent stdout is piped");
        tracing::debug!(
            pid,
            program,
            "started the agent in a process tree of its own"
        );
        let pipe = Arc::new(Mutex::new(Some(stdin)));
        Ok((
            AgentProcess {
                child,
                pid,
                tree,
                status: None,
                stdin: Arc::clone(&pipe),
            },
            AgentStdin { pipe },
            stdout,
        ))
    }

    /// The leader's pid (the group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Resolves when the leader exits (cancel-safe); what is left of its
    /// group is then `SIGKILL`ed.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = self.child.wait().await?;
        self.on_reaped(status);
        Ok(status)
    }

    /// Closes the agent's stdin (the relay's writes then fail).
    pub(crate) fn close_stdin(&self) {
        drop(
            self.stdin
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
    }

    /// Ends the agent: closes its stdin (unless `close_stdin` is false: the
    /// relay closes it after forwarding the editor's last lines), waits [`AGENT_EXIT_GRACE`],
    /// `SIGTERM`s its group, waits [`AGENT_TERM_GRACE`], `SIGKILL`s the group
    /// and reaps the leader. A signal received meanwhile ends the wait in
    /// progress. Returns the leader's status if it was reaped.
    pub async fn end(&mut self, close_stdin: bool, signals: &mut Signals) -> Option<ExitStatus> {
        if close_stdin {
            self.close_stdin();
        }
        if let Some(status) = self.wait_or_signal(AGENT_EXIT_GRACE, signals).await {
            return Some(status);
        }
        tracing::warn!(
            pid = self.pid(),
            "the agent did not exit after its input closed; sending SIGTERM to its process group"
        );
        self.signal_group(sys::Signal::Term);
        if let Some(status) = self.wait_or_signal(AGENT_TERM_GRACE, signals).await {
            return Some(status);
        }
        tracing::warn!(
            pid = self.pid(),
            "the agent did not exit after SIGTERM; sending SIGKILL to its process group"
        );
        self.signal_group(sys::Signal::Kill);
        match tokio::time::timeout(AGENT_KILL_REAP_TIMEOUT, self.wait()).await {
            Ok(Ok(status)) => Some(status),
            Ok(Err(error)) => {
                tracing::warn!(%error, "cannot reap the killed agent");
                None
            }
            Err(_) => {
                tracing::warn!("the killed agent did not die in time");
                None
            }
        }
    }

    /// Waits up to `limit` for the leader, or until a signal arrives.
    async fn wait_or_signal(
        &mut self,
        limit: Duration,
        signals: &mut Signals,
    ) -> Option<ExitStatus> {
        tokio::select! {
            waited = tokio::time::timeout(limit, self.wait()) => match waited {
                Ok(Ok(status)) => Some(status),
                Ok(Err(error)) => {
                    tracing::warn!(%error, "cannot wait for the agent");
                    None
                }
                Err(_) => None,
            },
            name = signals.recv() => {
                tracing::info!(signal = name, "signal received while ending the agent; not waiting longer");
                // It may have exited at the same moment.
                let status = self.child.try_wait().ok().flatten();
                if let Some(status) = status {
                    self.on_reaped(status);
                }
                status
            }
        }
    }

    /// The leader is gone: kill whatever it left in its group, once (the
    /// group id stays reserved while any member lives, so the signal reaches
    /// exactly the stragglers).
    fn on_reaped(&mut self, status: ExitStatus) {
        if self.status.is_some() {
            return;
        }
        self.status = Some(status);
        tracing::debug!(%status, "the agent exited");
        self.tree.leader_reaped();
    }

    /// Signals the group while its leader is unreaped (the id is still ours).
    fn signal_group(&self, signal: sys::Signal) {
        if self.status.is_none() {
            self.tree.signal(signal);
        }
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if self.status.is_none() {
            self.tree.kill_and_forget();
        }
    }
}

/// Why the proxy stopped relaying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The relay ended by itself (the agent closed its output, or the editor
    /// stopped reading).
    RelayEnded,
    /// The editor closed our stdin; the relay closes the agent's after
    /// forwarding what was queued.
    EditorClosed,
    /// The agent's process exited.
    AgentExited,
    /// A termination signal.
    Signal(&'static str),
}

/// What [`supervise`] saw.
pub struct Supervised<R> {
    pub stop: Stop,
    /// The relay's own end, if it ended (it is dropped otherwise).
    pub relay_end: Option<R>,
    /// The agent's exit status, if it was reaped.
    pub status: Option<ExitStatus>,
}

/// Runs `relay` until it ends, the editor closes our stdin (`editor_eof`),
/// the agent exits or a signal arrives; then ends the agent (see
/// [`AgentProcess::end`]) while the relay goes on forwarding, and gives the
/// relay [`AGENT_OUTPUT_DRAIN`] after the agent is gone.
pub async fn supervise<R>(
    agent: &mut AgentProcess,
    signals: &mut Signals,
    relay: impl Future<Output = R>,
    editor_eof: tokio::sync::oneshot::Receiver<()>,
) -> Supervised<R> {
    tokio::pin!(relay);
    let mut relay_end = None;
    let stop = tokio::select! {
        end = &mut relay => {
            relay_end = Some(end);
            Stop::RelayEnded
        }
        Ok(()) = editor_eof => Stop::EditorClosed,
        _ = agent.wait() => Stop::AgentExited,
        name = signals.recv() => {
            tracing::info!(signal = name, "ending the agent on signal");
            Stop::Signal(name)
        }
    };
    if stop == Stop::AgentExited {
        tracing::info!("the agent exited");
    }
    let close_stdin = stop != Stop::EditorClosed;
    let status = if relay_end.is_some() {
        agent.end(close_stdin, signals).await
    } else {
        let ending = agent.end(close_stdin, signals);
        tokio::pin!(ending);
        tokio::select! {
            status = &mut ending => status,
            end = &mut relay => {
                relay_end = Some(end);
                ending.await
            }
        }
    };
    if relay_end.is_none() {
        tokio::select! {
            end = &mut relay => relay_end = Some(end),
            _ = tokio::time::sleep(AGENT_OUTPUT_DRAIN) => {
                tracing::info!("the agent is gone but its stdout is still open (held by a process outside its group); not waiting for it");
            }
            name = signals.recv() => {
                tracing::info!(signal = name, "signal received; not waiting for the agent's last output");
            }
        }
    }
    Supervised {
        stop,
        relay_end,
        status,
    }
}
