//! The start check of `acp-lsp servers`: each server binary run once with its
//! `probe_args` (`--version` by default), all in parallel, each bounded by
//! [`PROBE_TIMEOUT`], and what its failure means and how to fix it.
//!
//! A binary on `PATH` is not a working server: rustup puts a `rust-analyzer`
//! stub there that fails until the component is added, and a broken npm or
//! pip install fails the same way. The check runs the program the proxy would
//! start, in its own process group, with the allowlisted environment, stdin
//! closed; the whole group is killed once it has answered or timed out.

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
    match run_bounded(binary, &server.probe_args, &server.env, None, PROBE_TIMEOUT) {
        Ok(Ran::Exited {
            success,
            code,
            stdout,
            stderr,
        }) => verdict(success, code, &stdout, &stderr),
        Ok(Ran::TimedOut) => Probe::TimedOut,
        Err(e) => Probe::CannotRun(e.to_string()),
    }
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
    let mut command = Command::new(binary);
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    command
        .args(args)
        .env_clear()
        .envs(std::env::vars_os().filter(|(name, _)| is_allowed_env(name)))
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command.spawn()?;
    let pid = child.id();
    let stdout = child.stdout.take().map(read_capped);
    let stderr = child.stderr.take().map(read_capped);
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = rx.recv_timeout(timeout);
    kill_group(pid);
    let _ = waiter.join();
    let stdout = stdout.and_then(|h| h.join().ok()).unwrap_or_default();
    let stderr = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    match status {
        Ok(Ok(status)) => Ok(Ran::Exited {
            success: status.success(),
            code: status.code(),
            stdout,
            stderr,
        }),
        Ok(Err(e)) => Err(e),
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

fn read_capped(mut stream: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let _ = (&mut stream).take(MAX_PROBE_OUTPUT).read_to_end(&mut kept);
        // Drain the rest so the binary never blocks on a full pipe.
        let _ = std::io::copy(&mut stream, &mut std::io::sink());
        String::from_utf8_lossy(&kept).into_owned()
    })
}

fn kill_group(pid: u32) {
    let Some(pgid) = crate::sys::pid(pid) else {
        return;
    };
    let _ = crate::sys::kill_group(pgid, crate::sys::Signal::Kill);
}

#[cfg(test)]
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
}
