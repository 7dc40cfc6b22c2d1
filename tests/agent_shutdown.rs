//! How `acp-lsp proxy` ends its agent, with real processes: the agent is a
//! shell script that forks a grandchild which ignores termination signals
//! and holds the agent's stdout (as Gemini CLI's relaunched node process
//! does). Each test checks in /proc that no process of the agent's group
//! survives the proxy, and that the MCP socket directory is gone.
//! Unix only: Windows has no signals, and its Job Objects are tested in the
//! proxy's unit tests and tests/process_lifecycle.rs (docs/testing.md).
#![cfg(unix)]

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use support::procfs::{group_members, process_group, wait_until_gone};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::time::timeout;

/// Longest wait for one line from the proxy.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for the proxy to exit: above the proxy's whole escalation
/// (exit grace + SIGTERM grace + reap), so a proxy that hangs fails here.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long SIGKILLed processes may take to be gone from /proc.
const GONE_TIMEOUT: Duration = Duration::from_secs(5);

/// The grandchild: in the agent's group, ignoring SIGTERM/SIGINT/SIGHUP and
/// stdin, holding the agent's stdout open.
const GRANDCHILD: &str = r#"sh -c 'trap "" TERM INT HUP; exec sleep 1000' </dev/null &"#;
/// The agent's ready line: a JSON-RPC notification the proxy relays to the editor.
const READY: &str = r#"printf '{"jsonrpc":"2.0","method":"test/ready","params":{"agent":%d,"grandchild":%d}}\n' $$ $!"#;

struct Proxy {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: Lines<BufReader<ChildStderr>>,
    agent: u32,
    grandchild: u32,
    tmp: tempfile::TempDir,
}

impl Proxy {
    /// `acp-lsp proxy` (MCP socket on, logs at info) in front of `sh -c AGENT`;
    /// returns once the agent has said it is ready.
    async fn start(agent: &str) -> Proxy {
        Proxy::start_in(agent, tempfile::tempdir().expect("tempdir")).await
    }

    /// [`Proxy::start`] with `tmp` as its TMPDIR.
    async fn start_in(agent: &str, tmp: tempfile::TempDir) -> Proxy {
        let mut child = Command::new(env!("CARGO_BIN_EXE_acp-lsp"))
            .args([
                "proxy",
                "--mcp",
                "stdio",
                "--log-level",
                "info",
                "--",
                "sh",
                "-c",
                agent,
            ])
            // The socket directory goes here, where the test can look.
            .env("TMPDIR", tmp.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start acp-lsp proxy");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let line = timeout(IO_TIMEOUT, stdout.next_line())
            .await
            .expect("the agent's ready line")
            .expect("read stdout")
            .expect("a line before EOF");
        let ready: Value = serde_json::from_str(&line).expect("JSON");
        let pid = |key: &str| -> u32 {
            u32::try_from(ready["params"][key].as_u64().expect("a pid")).expect("pid")
        };
        let (agent, grandchild) = (pid("agent"), pid("grandchild"));
        assert_eq!(
            process_group(agent),
            Some(agent),
            "the agent leads its own process group"
        );
        assert_eq!(process_group(grandchild), Some(agent));
        assert_eq!(socket_dirs(tmp.path()).len(), 1, "the MCP socket directory");
        Proxy {
            child,
            stdin,
            stdout,
            stderr,
            agent,
            grandchild,
            tmp,
        }
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id().expect("running")).expect("pid");
        // SAFETY: kill only sends a signal, to a process this test started.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }

    /// Reads the proxy's log until a line containing `needle`.
    async fn log_line(&mut self, needle: &str) -> String {
        loop {
            let line = timeout(IO_TIMEOUT, self.stderr.next_line())
                .await
                .unwrap_or_else(|_| panic!("no log line with {needle:?}"))
                .expect("read stderr")
                .unwrap_or_else(|| panic!("log ended before {needle:?}"));
            if line.contains(needle) {
                return line;
            }
        }
    }

    /// Waits for the proxy to exit; then checks that the agent's group is
    /// empty and the socket directory removed.
    async fn exits(mut self) -> ExitStatus {
        let status = timeout(EXIT_TIMEOUT, self.child.wait())
            .await
            .expect("the proxy did not exit")
            .expect("wait for the proxy");
        // The proxy's stdout ends with it.
        let rest = timeout(IO_TIMEOUT, self.stdout.next_line())
            .await
            .expect("stdout ends");
        assert!(matches!(rest, Ok(None)), "{rest:?}");
        let left = wait_until_gone(&[self.agent, self.grandchild], GONE_TIMEOUT).await;
        assert!(left.is_empty(), "processes left behind: {left:?}");
        assert!(
            group_members(self.agent).is_empty(),
            "the agent's group survived"
        );
        assert!(
            socket_dirs(self.tmp.path()).is_empty(),
            "the MCP socket directory was left"
        );
        status
    }
}

fn socket_dirs(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .expect("read tmp")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("acp-lsp-"))
        .collect()
}

/// Gemini CLI's shape: the agent exits when its input closes, but a process
/// it forked still holds its stdout. The proxy must not wait for that
/// stdout's end-of-file forever.
#[tokio::test]
async fn editor_eof_ends_the_proxy_when_a_grandchild_holds_the_agents_stdout() {
    let mut proxy = Proxy::start(&format!("{GRANDCHILD}\n{READY}\ncat >/dev/null\nexit 7")).await;
    drop(proxy.stdin.take());
    let status = proxy.exits().await;
    assert_eq!(status.code(), Some(7), "the agent's exit code");
}

/// SIGTERM, then SIGINT, then SIGHUP to the proxy in front of an agent that
/// ignores all three and its input closing: each further signal moves to
/// the next step (stdin closed → SIGTERM to the group → SIGKILL to the group).
#[tokio::test]
async fn each_further_signal_escalates_until_the_agents_group_is_killed() {
    let mut proxy = Proxy::start(&format!(
        "trap '' TERM INT HUP\n{GRANDCHILD}\n{READY}\ncat >/dev/null\nexec sleep 1000"
    ))
    .await;
    proxy.signal(libc::SIGTERM);
    proxy.log_line("ending the agent on signal").await;
    proxy.signal(libc::SIGINT);
    proxy.log_line("sending SIGTERM to its process group").await;
    proxy.signal(libc::SIGHUP);
    proxy.log_line("sending SIGKILL to its process group").await;
    proxy.exits().await;
}

/// SIGHUP alone (the terminal went away) ends the proxy like SIGTERM: the
/// agent's input is closed, it exits, and the socket directory is removed.
#[tokio::test]
async fn sighup_closes_the_agents_input_and_removes_the_socket_directory() {
    let mut proxy = Proxy::start(&format!("{GRANDCHILD}\n{READY}\ncat >/dev/null\nexit 0")).await;
    proxy.signal(libc::SIGHUP);
    let line = proxy.log_line("ending the agent on signal").await;
    assert!(line.contains("SIGHUP"), "{line}");
    let status = proxy.exits().await;
    assert_eq!(status.code(), Some(0), "the agent exited by itself");
}

/// A `kill -9` of the proxy cannot be handled; the parent-death signal and
/// the orphan guardian still end the agent's whole group. The socket
/// directory it leaves is removed by the next proxy.
#[tokio::test]
async fn sigkill_of_the_proxy_leaves_no_process_of_the_agents_group() {
    let mut proxy = Proxy::start(&format!(
        "trap '' TERM INT HUP\n{GRANDCHILD}\n{READY}\nexec sleep 1000"
    ))
    .await;
    proxy.signal(libc::SIGKILL);
    let status = timeout(EXIT_TIMEOUT, proxy.child.wait())
        .await
        .expect("killed")
        .expect("wait");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    let left = wait_until_gone(&[proxy.agent, proxy.grandchild], GONE_TIMEOUT).await;
    assert!(left.is_empty(), "processes left behind: {left:?}");
    let stale = socket_dirs(proxy.tmp.path());
    assert_eq!(stale.len(), 1, "the killed proxy's socket directory");

    // The next proxy, with the same TMPDIR, removes it (and keeps its own).
    let mut next =
        Proxy::start_in(&format!("{GRANDCHILD}\n{READY}\ncat >/dev/null"), proxy.tmp).await;
    let dirs = socket_dirs(next.tmp.path());
    assert!(!dirs.contains(&stale[0]), "{dirs:?}");
    drop(next.stdin.take());
    next.exits().await;
}

/// The orphan guardian (a `sh` child of the proxy) is reaped by the proxy
/// before it exits: left to exit after the proxy, it would be a zombie of
/// whoever inherits it, for ever where that one does not reap (a
/// container's first process). This test process makes itself the
/// subreaper of its descendants, so an orphaned guardian would come here
/// and stay a zombie (tokio reaps only the children it spawned).
#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_orphan_guardian_is_reaped_before_the_proxy_exits() {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only sets a flag of this process.
    assert_eq!(
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) },
        0
    );
    let mut proxy = Proxy::start(&format!("{GRANDCHILD}\n{READY}\ncat >/dev/null")).await;
    let proxy_pid = proxy.child.id().expect("running");
    let guardian = children_of(proxy_pid)
        .into_iter()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains("groups="))
        })
        .expect("the proxy's orphan guardian (a sh child reading +PGID lines)");
    drop(proxy.stdin.take());
    proxy.exits().await;
    let state = std::fs::read_to_string(format!("/proc/{guardian}/stat")).ok();
    assert!(
        state.is_none(),
        "the guardian {guardian} outlived the proxy: {state:?}"
    );
}

/// The pids whose parent is `parent`, from /proc.
#[cfg(target_os = "linux")]
fn children_of(parent: u32) -> Vec<u32> {
    support::procfs::all_pids()
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let (_, rest) = stat.rsplit_once(')')?;
                    rest.split_ascii_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}
