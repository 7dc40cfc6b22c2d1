//! A stand-in proxy for `tests/process_lifecycle.rs`: starts one child
//! through `acp_lsp::lsp::process`, the way acp-lsp starts its servers,
//! writes the child's pid to a file and waits for it. The test then kills
//! this process the hard way (`SIGKILL`, `TerminateProcess`) and checks that
//! the child died with it (the parent-death signal, the Job Object).
//!
//! `stand-in-proxy PID_FILE PROGRAM [NAME=VALUE…]`: the `NAME=VALUE`s go to
//! the child's environment (acp-lsp passes servers an allowlisted one).
//!
//! It is its own small program, not a mode of the fake server, so that the
//! fake server depends on nothing of acp-lsp's: built as a package of its
//! own, whose features differ from the test build's, a dependency on
//! acp-lsp rebuilt the library and tokio a second time for it.

use acp_lsp::lsp::process::{ServerProcess, SpawnSpec};
use anyhow::{bail, Context as _};
use std::path::{Path, PathBuf};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let (Some(pid_file), Some(program)) = (args.next(), args.next()) else {
        bail!("usage: stand-in-proxy PID_FILE PROGRAM [NAME=VALUE…]");
    };
    let mut spec = SpawnSpec::new(PathBuf::from(program), std::env::current_dir()?);
    for pair in args {
        let pair = pair.into_string().ok().context("NAME=VALUE is not UTF-8")?;
        let (name, value) = pair.split_once('=').context("not NAME=VALUE")?;
        spec.env_extra.insert(name.into(), value.into());
    }
    // A current-thread runtime: the child's parent-death signal is tied to
    // the thread that spawned it, which must be this long-lived main thread.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let code = runtime.block_on(async move {
        let (mut child, _io) = ServerProcess::spawn("stand-in child", &spec)?;
        let pid = child
            .pid()
            .context("the child exited before its pid was read")?;
        write_pid_file(Path::new(&pid_file), pid)?;
        let status = child.wait().await?;
        anyhow::Ok(status.code().unwrap_or(1))
    })?;
    std::process::exit(code)
}

/// Written whole, then renamed: a reader never sees half a pid.
fn write_pid_file(path: &Path, pid: u32) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, format!("{pid}\n"))?;
    std::fs::rename(&tmp, path)
}
