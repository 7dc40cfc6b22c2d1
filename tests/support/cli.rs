//! One command of the `acp-lsp` binary run to its end (`request`, `rename`,
//! `servers`, …), as a person runs it, for the tests of the command line.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

pub use super::proxy::BIN;

/// Upper bound on one run of the binary (the tools wait up to `READY_WAIT`,
/// 120 s, for a server).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(150);

/// `acp-lsp ARGS` in `cwd` with `env` added, stdin closed, bounded by
/// [`RUN_TIMEOUT`]: errors without a backtrace appended, and no progress
/// lines (a test of them asks for them in `env`).
pub async fn run<S: AsRef<OsStr>>(args: &[S], cwd: &Path, env: &[(&str, &OsStr)]) -> Output {
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    let mut command = tokio::process::Command::new(BIN);
    command
        .args(args)
        .current_dir(cwd)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .env(acp_lsp::cli::progress::SHOW_AFTER_ENV, "3600000")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let started = Instant::now();
    let output = tokio::time::timeout(RUN_TIMEOUT, command.output())
        .await
        .unwrap_or_else(|_| panic!("`acp-lsp {}` ran over {RUN_TIMEOUT:?}", shown.join(" ")))
        .unwrap_or_else(|e| panic!("cannot run {BIN}: {e}"));
    eprintln!(
        "`acp-lsp {}`: {} in {:?}",
        shown.join(" "),
        output.status,
        started.elapsed()
    );
    output
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Fails, with both outputs, unless the run succeeded.
pub fn assert_success(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what}: {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        stdout(output),
        stderr(output)
    );
}
