//! Language-server child processes: own process group, sanitized env, stderr drained, bounded shutdown.
//!
//! A [`ServerProcess`] owns one language-server child. The child runs in its own
//! process group (it is the group leader, so the group id equals its pid), which
//! lets the proxy signal the server *and everything it forked* at once:
//! typescript-language-server runs four processes, pyenv shims add a parent.
//!
//! * **Environment.** The child gets only the variables of the proxy's
//!   environment that language servers and the tools they run need: the
//!   allowlist `env::ENV_ALLOWED` (exact names) and `env::ENV_ALLOWED_PREFIXES` /
//!   `env::ENV_ALLOWED_SUFFIXES` (toolchain families, proxies), where a
//!   prefix/suffix match is still refused when the name looks like a
//!   credential (`env::looks_like_credential`: `npm_config__auth`,
//!   `CARGO_REGISTRY_TOKEN`). Variables named in
//!   [`SpawnSpec::env_passthrough`] (exact names, or `PREFIX*`) are let
//!   through as well; then [`SpawnSpec::env_extra`] is applied on top.
//!   Anything else (database URLs, webhooks, CI job tokens, session cookies,
//!   …) never reaches a server: a denylist by name let 25 of 26 such
//!   carriers through.
//! * **stderr** is drained continuously by a task into a bounded [`StderrRing`]
//!   (the last [`DEFAULT_STDERR_CAPACITY`] bytes) and forwarded line by line to
//!   `tracing` under the target [`STDERR_TARGET`], truncated to
//!   [`MAX_STDERR_LINE`] bytes and rate-limited to [`MAX_STDERR_LINES_PER_SEC`],
//!   so a server flooding stderr (jedi-language-server does ~7 MB/s) never
//!   blocks on a full pipe nor floods the logs.
//! * **Parent death.** On Linux the child is spawned with
//!   `PR_SET_PDEATHSIG = SIGKILL`, so a `kill -9` of the proxy still ends the
//!   server. The signal fires when the *thread* that spawned the child exits:
//!   call [`ServerProcess::spawn`] from an async task (tokio worker threads live
//!   as long as the runtime) or from another long-lived thread, never from
//!   `spawn_blocking`, whose threads are retired when idle. What a server
//!   forked into its group is then ended by the orphan guardian (see
//!   `mod guardian`), a `sh` child that `SIGKILL`s the groups still listed
//!   when this process's end closes its stdin.
//! * **Shutdown.** After the caller has sent LSP `shutdown`/`exit` and closed
//!   stdin, [`ServerProcess::terminate`] waits, then sends `SIGTERM` to the
//!   group, waits again, then `SIGKILL`s the group. Whenever the leader is found
//!   dead (by [`ServerProcess::wait`], [`ServerProcess::try_exit_status`] or
//!   `terminate`) any process left in its group is `SIGKILL`ed, and dropping a
//!   `ServerProcess` whose leader still runs `SIGKILL`s the whole group.
//!
//! Everything here needs a tokio runtime (the child is reaped by tokio and the
//! stderr drain is a task).

mod env;
mod stderr;

pub(crate) use self::env::{is_allowed_env, sanitized_env};
use self::stderr::drain_stderr;
pub use self::stderr::{
    StderrRing, DEFAULT_STDERR_CAPACITY, MAX_STDERR_LINE, MAX_STDERR_LINES_PER_SEC, STDERR_TARGET,
};

use crate::sys::{Pid, Signal};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;

/// How long [`ServerProcess::terminate`] callers should let a server exit on its
/// own after `exit` and closing stdin.
pub const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How long the group gets between `SIGTERM` and `SIGKILL`.
pub(crate) const TERM_GRACE: Duration = Duration::from_secs(2);
/// How long to wait for the kernel to report the leader dead after `SIGKILL`
/// (a process stuck in uninterruptible sleep cannot be reaped sooner).
pub(crate) const KILL_REAP_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`ServerProcess::wait`] lets the stderr drain reach end-of-file
/// after the leader exited, so that [`ServerProcess::stderr_tail`] holds the
/// server's last words.
pub(crate) const STDERR_SETTLE: Duration = Duration::from_millis(250);
/// What to run, where, and with which environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpawnSpec {
    /// Program to run; a bare name is looked up in the (sanitized) `PATH`.
    pub command: PathBuf,
    pub args: Vec<String>,
    /// Working directory; must exist.
    pub cwd: PathBuf,
    /// Variables set in the child after sanitizing (they win over inherited ones).
    pub env_extra: BTreeMap<String, String>,
    /// Variables inherited beyond the allowlist: exact names, or `PREFIX*`.
    pub env_passthrough: Vec<String>,
}

impl SpawnSpec {
    /// A spec with no arguments and no environment changes.
    pub fn new(command: impl Into<PathBuf>, cwd: impl Into<PathBuf>) -> Self {
        SpawnSpec {
            command: command.into(),
            cwd: cwd.into(),
            ..SpawnSpec::default()
        }
    }
}

/// The server's protocol pipes.
#[derive(Debug)]
pub struct ServerIo {
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
}

/// Why a server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The program (or the interpreter named in its `#!` line) does not exist.
    #[error("language server command not found: {command} (or its interpreter)")]
    NotFound { command: String },
    #[error("failed to spawn language server {command}")]
    Spawn {
        command: String,
        #[source]
        source: io::Error,
    },
}

/// How [`ServerProcess::terminate`] ended the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// The server exited on its own within the grace period (or had already exited).
    Exited(ExitStatus),
    /// The server exited after `SIGTERM` to its process group.
    Terminated(ExitStatus),
    /// The group was sent `SIGKILL`; the status is `None` if the leader could
    /// not be reaped within [`KILL_REAP_TIMEOUT`].
    Killed(Option<ExitStatus>),
}

impl Termination {
    /// The leader's exit status, if it was reaped.
    pub(crate) fn exit_status(&self) -> Option<ExitStatus> {
        match self {
            Termination::Exited(status) | Termination::Terminated(status) => Some(*status),
            Termination::Killed(status) => *status,
        }
    }
}

/// One running (or exited but not yet dropped) language server.
#[derive(Debug)]
pub struct ServerProcess {
    name: Arc<str>,
    child: Child,
    /// Process group id, equal to the leader's pid.
    pgid: Pid,
    /// Set once the leader has been reaped; from then on its pid may be reused,
    /// so the group is no longer signalled except by the one sweep in `on_reaped`.
    status: Option<ExitStatus>,
    ring: Arc<Mutex<StderrRing>>,
    drain: Option<JoinHandle<()>>,
}

impl ServerProcess {
    /// Starts `spec` as the server called `name` (used in logs), keeping the
    /// last [`DEFAULT_STDERR_CAPACITY`] bytes of its stderr.
    pub fn spawn(name: &str, spec: &SpawnSpec) -> Result<(ServerProcess, ServerIo), ProcessError> {
        Self::spawn_with_stderr_capacity(name, spec, DEFAULT_STDERR_CAPACITY)
    }

    /// [`ServerProcess::spawn`] with a chosen stderr ring size.
    pub(crate) fn spawn_with_stderr_capacity(
        name: &str,
        spec: &SpawnSpec,
        stderr_capacity: usize,
    ) -> Result<(ServerProcess, ServerIo), ProcessError> {
        let command = spec.command.display().to_string();
        let spawn_error = |source: io::Error| ProcessError::Spawn {
            command: command.clone(),
            source,
        };
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|e| spawn_error(io::Error::other(e)))?;
        if !spec.cwd.is_dir() {
            return Err(spawn_error(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "working directory {} is not a directory",
                    spec.cwd.display()
                ),
            )));
        }

        let mut cmd = Command::new(&spec.command);
        cmd.args(&spec.args)
            .current_dir(&spec.cwd)
            .env_clear()
            .envs(sanitized_env(std::env::vars_os(), spec))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        crate::sys::set_parent_death_signal(&mut cmd, Signal::Kill);

        let mut child = cmd.spawn().map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound {
                ProcessError::NotFound {
                    command: command.clone(),
                }
            } else {
                spawn_error(source)
            }
        })?;
        let pid = child
            .id()
            .expect("BUG: a child that was just spawned has a pid");
        let pgid = crate::sys::pid(pid).expect("BUG: a pid fits in pid_t");
        let stdin = child
            .stdin
            .take()
            .expect("BUG: stdin is configured as piped");
        let stdout = child
            .stdout
            .take()
            .expect("BUG: stdout is configured as piped");
        let stderr = child
            .stderr
            .take()
            .expect("BUG: stderr is configured as piped");

        let name: Arc<str> = Arc::from(name);
        let ring = Arc::new(Mutex::new(StderrRing::new(stderr_capacity)));
        let drain = runtime.spawn(drain_stderr(Arc::clone(&name), stderr, Arc::clone(&ring)));
        tracing::debug!(server = %name, pid, command = %command, "spawned language server");
        guardian::watch(pgid);

        let process = ServerProcess {
            name,
            child,
            pgid,
            status: None,
            ring,
            drain: Some(drain),
        };
        Ok((process, ServerIo { stdin, stdout }))
    }

    /// The name given at spawn.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The leader's pid (also the process group id), until it has been reaped.
    pub fn pid(&self) -> Option<u32> {
        if self.status.is_some() {
            return None;
        }
        self.child.id()
    }

    /// The last bytes the server wrote to stderr, as lossy UTF-8.
    pub fn stderr_tail(&self) -> String {
        self.ring
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .snapshot()
    }

    /// Total bytes the server has written to stderr so far.
    pub fn stderr_total_bytes(&self) -> u64 {
        self.ring
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .total_bytes()
    }

    /// Resolves when the leader exits (cancel-safe; returns the same status
    /// again once exited). Kills what is left of its process group and gives
    /// the stderr drain up to [`STDERR_SETTLE`] to catch up.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.wait_reaped().await?;
        self.settle_stderr().await;
        Ok(status)
    }

    /// The exit status if the leader has exited, without waiting.
    pub fn try_exit_status(&mut self) -> Option<ExitStatus> {
        if let Some(status) = self.status {
            return Some(status);
        }
        match self.child.try_wait() {
            Ok(Some(status)) => {
                self.on_reaped(status);
                Some(status)
            }
            Ok(None) => None,
            Err(error) => {
                tracing::debug!(server = %self.name, %error, "try_wait failed");
                None
            }
        }
    }

    /// Ends the server, after the caller has sent `shutdown`/`exit` and closed
    /// stdin: waits up to `grace` (normally [`EXIT_GRACE`]) for it to exit,
    /// then `SIGTERM`s its process group and waits [`TERM_GRACE`], then
    /// `SIGKILL`s the group and reaps the leader.
    pub async fn terminate(&mut self, grace: Duration) -> Termination {
        self.terminate_with(grace, TERM_GRACE).await
    }

    /// [`ServerProcess::terminate`] with a chosen `SIGTERM` grace.
    pub(crate) async fn terminate_with(
        &mut self,
        grace: Duration,
        term_grace: Duration,
    ) -> Termination {
        let outcome = self.escalate(grace, term_grace).await;
        self.settle_stderr().await;
        tracing::debug!(server = %self.name, ?outcome, "language server ended");
        outcome
    }

    async fn escalate(&mut self, grace: Duration, term_grace: Duration) -> Termination {
        if let Ok(Ok(status)) = tokio::time::timeout(grace, self.wait_reaped()).await {
            return Termination::Exited(status);
        }
        self.signal_group(Signal::Term);
        if let Ok(Ok(status)) = tokio::time::timeout(term_grace, self.wait_reaped()).await {
            return Termination::Terminated(status);
        }
        self.signal_group(Signal::Kill);
        match tokio::time::timeout(KILL_REAP_TIMEOUT, self.wait_reaped()).await {
            Ok(Ok(status)) => Termination::Killed(Some(status)),
            Ok(Err(error)) => {
                tracing::warn!(server = %self.name, %error, "could not reap killed language server");
                Termination::Killed(None)
            }
            Err(_) => {
                tracing::warn!(server = %self.name, "killed language server did not die in time");
                Termination::Killed(None)
            }
        }
    }

    /// `SIGKILL`s the whole process group now (no-op once the leader was reaped;
    /// its group was swept then).
    pub fn kill_group_now(&mut self) {
        self.signal_group(Signal::Kill);
    }

    /// The leader's resident memory in bytes, from `/proc/<pid>/statm` (Linux only).
    pub fn resident_memory_bytes(&self) -> Option<u64> {
        resident_memory_of(self.pid()?)
    }

    async fn wait_reaped(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = self.child.wait().await?;
        self.on_reaped(status);
        Ok(status)
    }

    /// The leader is gone: kill whatever it left in its group, once.
    ///
    /// The leader's pid can in principle be reused once it is reaped, but a
    /// process group id stays reserved while any member lives: if stragglers
    /// exist the signal reaches exactly them; if none do, hitting a stranger
    /// would need the pid to be recycled *and* made a group leader in the
    /// microseconds since the reap.
    fn on_reaped(&mut self, status: ExitStatus) {
        self.status = Some(status);
        tracing::debug!(server = %self.name, %status, "language server exited");
        send_group_signal(self.pgid, Signal::Kill);
        guardian::unwatch(self.pgid);
    }

    /// Signals the group while its leader is unreaped (so the id is still ours).
    fn signal_group(&mut self, signal: Signal) {
        if self.status.is_none() {
            send_group_signal(self.pgid, signal);
        }
    }

    async fn settle_stderr(&mut self) {
        if let Some(drain) = self.drain.as_mut() {
            if tokio::time::timeout(STDERR_SETTLE, drain).await.is_ok() {
                self.drain = None;
            }
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Kills grandchildren too; tokio's kill_on_drop then reaps the leader.
        self.signal_group(Signal::Kill);
        if self.status.is_none() {
            guardian::unwatch(self.pgid);
        }
        if let Some(drain) = self.drain.take() {
            drain.abort();
        }
    }
}

/// The last line of defence against orphans when this process dies without
/// cleaning up (`kill -9`, a crash): the parent-death signal ends each server
/// leader, but nothing would end the helpers a server forked into its group
/// (a grandchild with no pipe to its dead parent lives on forever).
///
/// One `sh` child per process, in its own process group so that our signals
/// never reach it, reads `+PGID` / `-PGID` lines on its stdin. When its stdin
/// ends (this process is gone, however it ended: the write end is ours alone,
/// opened close-on-exec) it `SIGKILL`s every group still listed. A group leaves
/// the list as soon as its leader is reaped (after the sweep in `on_reaped`) or
/// its `ServerProcess` is dropped, so a group id is only ever signalled while it
/// is still ours. Without `/bin/sh` the guardian is skipped (logged). It
/// ignores SIGTERM as well as SIGHUP and SIGINT: a client that ends the
/// whole process tree (acpx) signals it with the proxy, which is still
/// stopping its servers and needs it until it exits.
pub(crate) mod guardian {
    use crate::sys::Pid;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    use std::process::{ChildStdin, Command, Stdio};
    use std::sync::{Mutex, OnceLock, PoisonError};

    const SCRIPT: &str = r#"trap '' HUP INT TERM
groups=' '
while IFS= read -r line; do
  case "$line" in
    +*) groups="$groups${line#+} " ;;
    -*) kept=' '
        for g in $groups; do [ "$g" = "${line#-}" ] || kept="$kept$g "; done
        groups=$kept ;;
  esac
done
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
"#;

    static GUARDIAN: OnceLock<Mutex<Option<ChildStdin>>> = OnceLock::new();

    pub(crate) fn watch(pgid: Pid) {
        send(&format!("+{pgid}\n"));
    }

    pub(crate) fn unwatch(pgid: Pid) {
        send(&format!("-{pgid}\n"));
    }

    fn send(line: &str) {
        let guardian = GUARDIAN.get_or_init(|| Mutex::new(spawn()));
        let mut stdin = guardian.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(pipe) = stdin.as_mut() else { return };
        // Non-blocking (set at spawn): a stuck guardian must not stall us.
        if let Err(error) = pipe.write_all(line.as_bytes()) {
            tracing::warn!(%error, "the orphan guardian stopped listening; helpers of servers may outlive a killed proxy");
            *stdin = None;
        }
    }

    fn spawn() -> Option<ChildStdin> {
        let spawned = Command::new("/bin/sh")
            .arg("-c")
            .arg(SCRIPT)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .current_dir("/")
            .stdin(Stdio::piped())
            // Never the protocol pipes: the editor must see our stdout close.
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
        // The child is never waited for: it ends only when we do. Dropping
        // the handle neither kills nor waits.
        let stdin = match spawned {
            Ok(mut child) => child.stdin.take(),
            Err(error) => {
                tracing::warn!(%error, "cannot start the orphan guardian (/bin/sh); helpers of servers may outlive a killed proxy");
                None
            }
        }?;
        if !crate::sys::set_nonblocking(stdin.as_raw_fd()) {
            tracing::warn!("cannot make the orphan guardian's pipe non-blocking; not using it");
            return None;
        }
        Some(stdin)
    }
}

/// Resident memory of process `pid`, from `/proc/<pid>/statm` (Linux only).
pub(crate) fn resident_memory_of(pid: u32) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
        let pages: u64 = statm.split_ascii_whitespace().nth(1)?.parse().ok()?;
        let page_size = crate::sys::page_size()?;
        Some(pages.saturating_mul(page_size))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// Signals a process group; a group already gone is not an error.
pub(crate) fn send_group_signal(pgid: Pid, signal: Signal) {
    if let Err(error) = crate::sys::kill_group(pgid, signal) {
        if !crate::sys::is_no_such_process(&error) {
            tracing::debug!(pgid, ?signal, %error, "killpg failed");
        }
    }
}

#[cfg(test)]
mod tests;
