//! The shared test harness: each integration test crate uses a subset.
//!
//! - A fake-server workspace: [`fake::FakeServer`] (a registry and a gate
//!   in the test, over the scriptable fake) and [`fake::FakeProject`] (the
//!   same on disk, with a config file, for the binary).
//! - A real-server workspace: [`recorded::Recorded`] (a fresh copy of a
//!   fixture under `tests/projects`, every message recorded).
//! - The binary: [`proxy::ProxyBuilder`] starts `acp-lsp proxy` in front
//!   of a scripted agent, its stderr captured ([`proxy::ProxyChild`]), with
//!   [`proxy::AcpClient`] as the editor; [`cli::run`] runs one command.
//! - Calls and waits: [`gate::call`] (one gate call, decoded), [`wait::until`]
//!   (a bounded poll), [`procfs`] (what is left running; on Windows
//!   `windows_processes`), [`captured_log`]
//!   (log lines as JSON, alone in a binary).
//! - An editor on the official ACP SDK: [`acp_editor::converse`] (one
//!   session, prompts, the agent's replies; `fs/*` answered from disk).
#![allow(dead_code)]

pub mod acp_editor;
pub mod captured_log;
#[path = "../../examples/support/cargo_build.rs"]
pub mod cargo_build;
pub mod cli;
pub mod fake;
pub mod gate;
pub mod procfs;
pub mod proxy;
pub mod recorded;
pub mod registry;
pub mod wait;
#[cfg(windows)]
pub mod windows_processes;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Fails the test, with the command that installs it, when `command` is not on
/// PATH nor installed by `acp-lsp install` (where a session finds it too):
/// these tests never skip.
pub fn require(command: &str, install: &str) {
    assert!(
        acp_lsp::lsp::program::find_command(command).is_some(),
        "`{command}` is not on PATH; install it with `{install}`"
    );
}

/// Every file below `root` with its bytes, by path relative to `root`; no
/// directory named in `skip_dirs` is entered (servers' caches and build output).
pub fn snapshot_tree(root: &Path, skip_dirs: &[&str]) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    snapshot_into(root, root, skip_dirs, &mut files);
    files
}

fn snapshot_into(
    root: &Path,
    dir: &Path,
    skip_dirs: &[&str],
    files: &mut BTreeMap<PathBuf, Vec<u8>>,
) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let entry = entry.expect("read a directory entry");
        let path = entry.path();
        if entry.file_type().expect("file type").is_dir() {
            if !skip_dirs.iter().any(|skip| entry.file_name() == *skip) {
                snapshot_into(root, &path, skip_dirs, files);
            }
        } else {
            let bytes =
                std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            files.insert(
                path.strip_prefix(root)
                    .expect("below the root")
                    .to_path_buf(),
                bytes,
            );
        }
    }
}

/// Copies a fixture tree (servers write into projects: never into `tests/projects`).
pub fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display()))
    {
        let entry = entry.expect("read a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            std::fs::create_dir_all(&target).expect("create a directory");
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a fixture file");
        }
    }
}

/// The C fixture's sources (tests/projects/c-project).
pub const C_SOURCES: &[&str] = &["src/geometry.c", "src/main.c"];

/// The C fixture's compiler flags, from its `compile_flags.txt`.
pub fn c_flags(root: &Path) -> Vec<String> {
    std::fs::read_to_string(root.join("compile_flags.txt"))
        .expect("the C fixture has compile_flags.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// clangd answers across files only with a compilation database (with just
/// `compile_flags.txt` it sees open files only): write one for the copy.
pub fn write_compile_commands(root: &Path) {
    let flags = c_flags(root);
    let commands: Vec<serde_json::Value> = C_SOURCES
        .iter()
        .map(|file| {
            let mut arguments = vec!["cc".to_string()];
            arguments.extend(flags.iter().cloned());
            arguments.extend(["-c".to_string(), file.to_string()]);
            serde_json::json!({
                "directory": root.display().to_string(),
                "file": file,
                "arguments": arguments,
            })
        })
        .collect();
    std::fs::write(
        root.join("compile_commands.json"),
        serde_json::to_string_pretty(&commands).expect("a Value serializes"),
    )
    .expect("write compile_commands.json");
}

/// Writes, as `dir/rust-analyzer`, what rustup puts on PATH for a toolchain
/// without the rust-analyzer component: a program that says so and exits 1.
#[cfg(unix)]
pub fn write_rustup_stub(dir: &Path) -> PathBuf {
    let stub = dir.join("rust-analyzer");
    std::fs::write(
        &stub,
        "#!/bin/sh\necho \"error: Unknown binary 'rust-analyzer' in official toolchain \
         'stable-x86_64-unknown-linux-gnu'.\" >&2\nexit 1\n",
    )
    .expect("write the stub");
    std::fs::set_permissions(&stub, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("make the stub executable");
    stub
}
