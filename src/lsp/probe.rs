//! The start check of `acp-lsp servers`: each server binary run once with its
//! `probe_args` (`--version` by default), all in parallel, each bounded by
//! [`PROBE_TIMEOUT`], and what its failure means and how to fix it.
//!
//! A binary on `PATH` is not a working server: rustup puts a `rust-analyzer`
//! stub there that fails until the component is added, and a broken npm or
//! pip install fails the same way. The check runs the program the proxy would
//! start, in its own process group, with the allowlisted environment, stdin
//! closed; the whole group is killed once it has answered or timed out.
//! A check in LSP mode (`probe_args` with `--stdio`, pyright's) keeps stdin
//! open instead and ends when the server first speaks LSP: pyright exits 1
//! without a word when its input is already at its end as it starts, and
//! whether it logs its version first was a race.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::config::ServerConfig;
use super::process::is_allowed_env;

/// Longest a start check may take before the binary counts as hanging.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes of each output stream kept for the verdict; the rest is drained.
const MAX_PROBE_OUTPUT: u64 = 64 * 1024;

/// What running a server binary once showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// It ran: exited 0, or answered in LSP framing. `version` is the first
    /// line it printed, when that is not LSP.
    Starts { version: Option<String> },
    /// rustup's proxy for a component that is not installed.
    RustupStub { component: String },
    /// It exited with an error; `output` is its first line.
    Fails { code: Option<i32>, output: String },
    /// No exit within [`PROBE_TIMEOUT`].
    TimedOut,
    /// It could not be started at all.
    CannotRun(String),
}

impl Probe {
    /// Whether the server can be expected to start.
    pub fn starts(&self) -> bool {
        matches!(self, Probe::Starts { .. })
    }

    /// One line for the report.
    pub fn summary(&self) -> String {
        match self {
            Probe::Starts { version: Some(v) } => format!("starts ({v})"),
            Probe::Starts { version: None } => "starts".into(),
            Probe::RustupStub { component } => format!(
                "FAILS: rustup's stub; the {component} component is not installed for the toolchain"
            ),
            Probe::Fails { code, output } => {
                let code = code.map_or_else(|| "a signal".to_string(), |c| format!("exit {c}"));
                if output.is_empty() {
                    format!("FAILS ({code})")
                } else {
                    format!("FAILS ({code}): {output}")
                }
            }
            Probe::TimedOut => format!(
                "did not answer its start check within {} s",
                PROBE_TIMEOUT.as_secs()
            ),
            Probe::CannotRun(e) => format!("FAILS: cannot be run: {e}"),
        }
    }

    /// How to fix it, when known.
    pub fn fix(&self) -> Option<String> {
        match self {
            Probe::RustupStub { component } => Some(format!("rustup component add {component}")),
            _ => None,
        }
    }
}

/// Runs every `(binary, server)` start check at once; the answers in order.
pub fn probe_all(items: &[(PathBuf, &ServerConfig)]) -> Vec<Probe> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .iter()
            .map(|(binary, server)| scope.spawn(move || probe(binary, server)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Probe::CannotRun("the check panicked".into()))
            })
            .collect()
    })
}

/// Runs `binary` with the server's `probe_args` and environment once.
pub fn probe(binary: &Path, server: &ServerConfig) -> Probe {
    let lsp_mode = server.probe_args.iter().any(|a| a == "--stdio");
    let input = if lsp_mode { Input::Open } else { Input::Closed };
    match run(
        binary,
        &server.probe_args,
        &server.env,
        None,
        PROBE_TIMEOUT,
        input,
    ) {
        Ok(Ran::Exited {
            success,
            code,
            stdout,
            stderr,
        }) => verdict(success, code, &stdout, &stderr),
        Ok(Ran::SpokeLsp { stdout, stderr }) => verdict(false, None, &stdout, &stderr),
        Ok(Ran::TimedOut) => Probe::TimedOut,
        Err(e) => Probe::CannotRun(e.to_string()),
    }
}

/// The child's stdin during a bounded run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    /// `/dev/null`: a command that reads nothing.
    Closed,
    /// A pipe held open (and never written) until the run ends; the run
    /// also ends when stdout begins with LSP framing.
    Open,
}

/// What ends a bounded run.
enum Event {
    Exited(std::io::Result<std::process::ExitStatus>),
    SpokeLsp,
}

/// How a bounded run ended.
#[derive(Debug)]
pub enum Ran {
    Exited {
        success: bool,
        code: Option<i32>,
        stdout: String,
        stderr: String,
    },
    /// With stdin open: it wrote LSP framing to stdout (and was then killed).
    SpokeLsp {
        stdout: String,
        stderr: String,
    },
    TimedOut,
}

/// Runs `binary args` once in its own process group, with the allowlisted
/// environment plus `env`, stdin closed, for at most `timeout`; the group is
/// killed afterwards either way (this also closes pipes a leftover
/// descendant would hold open).
pub fn run_bounded(
    binary: &Path,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
    cwd: Option<&Path>,
    timeout: Duration,
) -> std::io::Result<Ran> {
    run(binary, args, env, cwd, timeout, Input::Closed)
}

fn run(
    binary: &Path,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
    cwd: Option<&Path>,
    timeout: Duration,
    input: Input,
) -> std::io::Result<Ran> {
    let mut command = Command::new(binary);
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    command
        .args(args)
        .env_clear()
        .envs(std::env::vars_os().filter(|(name, _)| is_allowed_env(name)))
        .envs(env)
        .stdin(match input {
            Input::Closed => Stdio::null(),
            Input::Open => Stdio::piped(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    #[cfg(windows)]
    std::os::windows::process::CommandExt::creation_flags(&mut command, crate::sys::NO_WINDOW);
    let mut child = command.spawn()?;
    let pid = child.id();
    // Held (never written) until the run ends.
    let held_stdin = child.stdin.take();
    let (tx, rx) = std::sync::mpsc::channel();
    let spoke = (input == Input::Open).then(|| tx.clone());
    let stdout = child.stdout.take().map(|s| read_capped(s, spoke));
    let stderr = child.stderr.take().map(|s| read_capped(s, None));
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(Event::Exited(child.wait()));
    });
    let event = rx.recv_timeout(timeout);
    kill_group(pid);
    drop(held_stdin);
    let _ = waiter.join();
    let stdout = stdout.and_then(|h| h.join().ok()).unwrap_or_default();
    let stderr = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    match event {
        Ok(Event::Exited(Ok(status))) => Ok(Ran::Exited {
            success: status.success(),
            code: status.code(),
            stdout,
            stderr,
        }),
        Ok(Event::Exited(Err(e))) => Err(e),
        Ok(Event::SpokeLsp) => Ok(Ran::SpokeLsp { stdout, stderr }),
        Err(_) => Ok(Ran::TimedOut),
    }
}

/// The verdict from what a run showed (pure, for tests).
pub fn verdict(success: bool, code: Option<i32>, stdout: &str, stderr: &str) -> Probe {
    if let Some(component) = rustup_stub(stderr).or_else(|| rustup_stub(stdout)) {
        return Probe::RustupStub { component };
    }
    let speaks_lsp = stdout.trim_start().starts_with("Content-Length:");
    if success || speaks_lsp {
        let version = (!speaks_lsp)
            .then(|| first_line(stdout))
            .filter(|l| !l.is_empty());
        return Probe::Starts { version };
    }
    let output = Some(first_line(stderr))
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| first_line(stdout));
    Probe::Fails { code, output }
}

/// The component rustup says is missing: `error: Unknown binary
/// 'rust-analyzer' in official toolchain …` (older rustup) or `error:
/// 'rust-analyzer' is not installed for the toolchain …` (newer).
pub(crate) fn rustup_stub(output: &str) -> Option<String> {
    let quoted = |text: &str| -> Option<String> {
        let start = text.find('\'')? + 1;
        let end = start + text[start..].find('\'')?;
        Some(text[start..end].to_string()).filter(|c| !c.is_empty())
    };
    output.lines().find_map(|line| {
        if let Some(at) = line.find("Unknown binary '") {
            return quoted(&line[at..]);
        }
        if line.contains("is not installed for the toolchain") {
            return quoted(line);
        }
        None
    })
}

fn first_line(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty());
    let mut line = line.unwrap_or_default().to_string();
    if let Some((at, _)) = line.char_indices().nth(200) {
        line.truncate(at);
    }
    line
}

/// Reads a stream to its end, keeping [`MAX_PROBE_OUTPUT`] bytes; with
/// `spoke`, says so as soon as what was kept begins with LSP framing.
fn read_capped(
    mut stream: impl Read + Send + 'static,
    spoke: Option<std::sync::mpsc::Sender<Event>>,
) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut chunk = [0u8; 4096];
        let mut told = spoke.is_none();
        loop {
            let n = match stream.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let room = (MAX_PROBE_OUTPUT as usize).saturating_sub(kept.len());
            kept.extend_from_slice(&chunk[..n.min(room)]);
            if !told && kept.trim_ascii_start().starts_with(b"Content-Length:") {
                told = true;
                if let Some(spoke) = &spoke {
                    let _ = spoke.send(Event::SpokeLsp);
                }
            }
        }
        String::from_utf8_lossy(&kept).into_owned()
    })
}

fn kill_group(pid: u32) {
    let Some(pgid) = crate::sys::pid(pid) else {
        return;
    };
    #[cfg(unix)]
    let _ = crate::sys::kill_group(pgid, crate::sys::Signal::Kill);
    // No group: the check's own process (what it started may live on).
    #[cfg(windows)]
    let _ = crate::sys::kill(pgid, crate::sys::Signal::Kill);
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn rustup_stubs_of_old_and_new_rustup_are_recognised() {
        let old = "error: Unknown binary 'rust-analyzer' in official toolchain 'stable-x86_64-unknown-linux-gnu'.\n";
        assert_eq!(
            verdict(false, Some(1), "", old),
            Probe::RustupStub {
                component: "rust-analyzer".into()
            }
        );
        let new = "error: 'rust-analyzer' is not installed for the toolchain 'stable-x86_64-unknown-linux-gnu'.\nTo install, run `rustup component add rust-analyzer`\n";
        let probe = verdict(false, Some(1), "", new);
        assert_eq!(
            probe.fix().as_deref(),
            Some("rustup component add rust-analyzer")
        );
    }

    #[test]
    fn versions_lsp_answers_and_failures() {
        assert_eq!(
            verdict(true, Some(0), "clangd version 14\nFeatures: x\n", ""),
            Probe::Starts {
                version: Some("clangd version 14".into())
            }
        );
        assert!(verdict(false, Some(1), "Content-Length: 12\r\n\r\n{}", "").starts());
        assert_eq!(
            verdict(
                false,
                Some(127),
                "",
                "env: 'node': No such file or directory\n"
            ),
            Probe::Fails {
                code: Some(127),
                output: "env: 'node': No such file or directory".into()
            }
        );
    }

    /// Like pyright: with its input already at its end as it starts, it
    /// exits 1 without a word; with its input open it speaks LSP (after a
    /// pause, so the old check, stdin closed, saw the silent exit). The LSP
    /// mode check (`--stdio`) keeps stdin open and ends when it speaks.
    #[test]
    fn an_lsp_mode_check_keeps_stdin_open_until_the_server_speaks() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let binary = dir.path().join("silent-at-eof");
        std::fs::write(
            &binary,
            "#!/bin/sh\n( sleep 1; printf 'Content-Length: 2\\r\\n\\r\\n{}' ) &\nread -r line\nexit 1\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&binary, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut server = ServerConfig::new("x", "silent-at-eof", &[], &["x"], &["x"], &[]);
        server.probe_args = vec!["--stdio".to_string()];
        assert_eq!(probe(&binary, &server), Probe::Starts { version: None });
        // A version check still gets its input closed: the same binary
        // exits 1 at once.
        server.probe_args = vec!["--version".to_string()];
        assert!(matches!(
            probe(&binary, &server),
            Probe::Fails { code: Some(1), .. }
        ));
    }
}
