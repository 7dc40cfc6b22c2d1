//! Building the workspace's binaries and examples with cargo and finding their executables.
//!
//! Shared by `examples/try-rename.rs` (which needs `acp-lsp` and the
//! example agent, neither of which `cargo run --example try-rename` builds)
//! and `tests/example_rename.rs` (which needs the examples, which
//! `cargo test --test …` does not build). Cargo's JSON messages name each
//! executable, so no target directory layout is guessed.

use anyhow::{bail, Context as _};
use std::collections::HashMap;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Builds the binaries `bins` and the examples `examples` of the `acp-lsp`
/// package (see [`build_in`]).
#[allow(dead_code)]
pub fn build(
    bins: &[&str],
    examples: &[&str],
    show_progress: bool,
) -> anyhow::Result<HashMap<String, PathBuf>> {
    build_in("acp-lsp", bins, examples, show_progress)
}

/// Builds the binaries `bins` and the examples `examples` of the workspace's
/// package `package` with the profile the running executable was built
/// with, and returns each one's executable by target name. With
/// `show_progress` cargo's progress goes to stderr as usual; without, it is
/// kept and shown only if the build fails.
pub fn build_in(
    package: &str,
    bins: &[&str],
    examples: &[&str],
    show_progress: bool,
) -> anyhow::Result<HashMap<String, PathBuf>> {
    build_selected(&["--package", package], bins, examples, show_progress)
}

/// [`build_in`] with the whole workspace selected, as a plain `cargo test`
/// selects it: the dependencies' features are the ones that build already
/// unified, so nothing is compiled again. (Cargo unifies features over the
/// selected packages: `--package acp-lsp-core` alone gives 45 of its
/// dependencies other features, and rebuilt them, 28 s, for one example.)
#[allow(dead_code)]
pub fn build_in_workspace(
    bins: &[&str],
    examples: &[&str],
    show_progress: bool,
) -> anyhow::Result<HashMap<String, PathBuf>> {
    build_selected(&["--workspace"], bins, examples, show_progress)
}

fn build_selected(
    selection: &[&str],
    bins: &[&str],
    examples: &[&str],
    show_progress: bool,
) -> anyhow::Result<HashMap<String, PathBuf>> {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    // `cargo run` and `cargo test` tell their children which cargo they are.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    // What cargo sets for the running test or example (`CARGO_PKG_NAME`,
    // `CARGO_MANIFEST_DIR`, `OUT_DIR`…) is not this cargo's to see: build
    // scripts that declare `rerun-if-env-changed` on those names (ring does)
    // would rerun, and everything above them rebuild, on every call, and then
    // again in the next plain `cargo test`.
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_for_the_running_crate) {
            command.env_remove(name);
        }
    }
    command
        .current_dir(manifest_dir)
        .arg("build")
        .arg("--manifest-path")
        .arg(manifest_dir.join("Cargo.toml"))
        .args(selection)
        .arg("--message-format=json-render-diagnostics");
    if let Some(profile) = current_profile() {
        command.args(["--profile", &profile]);
    }
    for name in bins {
        command.args(["--bin", name]);
    }
    for name in examples {
        command.args(["--example", name]);
    }
    command.stdout(Stdio::piped()).stderr(if show_progress {
        Stdio::inherit()
    } else {
        Stdio::piped()
    });
    let mut child = command.spawn().context("running cargo")?;
    let stdout = child.stdout.take().context("cargo's stdout")?;
    // Drained on its own thread so a chatty build cannot fill the pipe
    // while stdout is being read.
    let stderr = child.stderr.take().map(|mut stderr| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        })
    });
    let mut executables = HashMap::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo's output")?;
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        if let (Some(name), Some(executable)) = (
            message["target"]["name"].as_str(),
            message["executable"].as_str(),
        ) {
            executables.insert(name.to_string(), PathBuf::from(executable));
        }
    }
    let status = child.wait().context("waiting for cargo")?;
    let stderr = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    if !status.success() {
        bail!("cargo build failed ({status})\n{stderr}");
    }
    for name in bins.iter().chain(examples) {
        if !executables.contains_key(*name) {
            bail!("cargo built no executable named {name}");
        }
    }
    Ok(executables)
}

/// Whether cargo sets the variable `name` for the crate it runs (a test, an
/// example, a build script), rather than taking it from the user.
fn set_for_the_running_crate(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "CARGO_PKG_",
        "CARGO_MANIFEST_",
        "CARGO_CRATE_",
        "CARGO_BIN_",
        "CARGO_CFG_",
    ];
    const NAMES: &[&str] = &[
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
    ];
    PREFIXES.iter().any(|prefix| name.starts_with(prefix)) || NAMES.contains(&name)
}

/// The cargo profile of the running executable, from where cargo put it:
/// `<target dir>/<profile dir>/{examples,deps}/<file>`, where the `dev`
/// profile's directory is `debug`. `None` when it is somewhere else (then
/// cargo's default profile is used).
fn current_profile() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let kind = exe.parent()?;
    if !matches!(kind.file_name()?.to_str()?, "examples" | "deps") {
        return None;
    }
    let profile_dir = kind.parent()?.file_name()?.to_str()?;
    Some(match profile_dir {
        "debug" => "dev".to_string(),
        other => other.to_string(),
    })
}
