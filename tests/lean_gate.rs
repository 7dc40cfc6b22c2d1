//! The embeddable core stays lean: the `acp-lsp-core` crate compiles alone
//! and its dependency tree holds no MCP stack (rmcp, hyper, schemars), no
//! process or CLI crates, no tokio `full` and not the proxy itself. An editor
//! host that implements `LspHost` pays for the gate, not for the proxy.
//!
//! Cargo runs here as a child with its own target directory under
//! `target/`, so it never waits on the lock of the build running the tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Crates the lean build must not pull in (the proxy's, by name).
const FORBIDDEN: &[&str] = &[
    "rmcp",
    "hyper",
    "hyper-util",
    "schemars",
    "clap",
    "indicatif",
    "notify",
    "ignore",
    "tracing-subscriber",
    "toml_edit",
];

/// The tokio features the gate may turn on: timers for its deadlines,
/// async reads for `jsonrpc::ndjson`, and what those imply.
const TOKIO_ALLOWED: &[&str] = &["default", "bytes", "io-util", "sync", "time"];

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn cargo() -> Command {
    // `cargo test` tells its children which cargo it is.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.current_dir(manifest_dir());
    command
}

/// Runs cargo with `args` on the core crate alone and returns its stdout.
fn lean(args: &[&str]) -> String {
    let out = cargo()
        .args(args)
        .args(["--package", "acp-lsp-core", "--offline"])
        .env("CARGO_TARGET_DIR", lean_target_dir())
        .output()
        .expect("running cargo");
    assert!(
        out.status.success(),
        "cargo {args:?} --package acp-lsp-core failed ({})\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("cargo's output is UTF-8")
}

fn lean_target_dir() -> PathBuf {
    manifest_dir().join("target").join("lean-gate")
}

/// The first word of each line of `cargo tree --prefix none`: a crate name.
fn crate_names(tree: &str) -> Vec<String> {
    tree.lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
fn lean_tree_has_no_proxy_crates() {
    let tree = lean(&["tree", "-e", "normal", "--prefix", "none"]);
    let names = crate_names(&tree);
    assert!(
        names.iter().any(|n| n == "acp-lsp-core"),
        "the tree names the package itself:\n{tree}"
    );
    let found: Vec<&str> = FORBIDDEN
        .iter()
        .copied()
        .filter(|f| names.iter().any(|n| n == f))
        .collect();
    assert!(
        found.is_empty(),
        "the lean gate build pulls in {found:?}:\n{tree}"
    );
}

#[test]
fn lean_tokio_has_only_the_features_the_gate_needs() {
    let tree = lean(&[
        "tree",
        "-e",
        "normal,features",
        "-i",
        "tokio",
        "--prefix",
        "none",
    ]);
    let mut features: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.strip_prefix("tokio feature \""))
        .filter_map(|l| l.split('"').next())
        .collect();
    features.sort_unstable();
    features.dedup();
    assert!(
        features.contains(&"time"),
        "the gate's deadlines need tokio's timers; features seen: {features:?}\n{tree}"
    );
    let extra: Vec<&&str> = features
        .iter()
        .filter(|f| !TOKIO_ALLOWED.contains(f))
        .collect();
    assert!(
        extra.is_empty(),
        "the lean gate build turns on tokio features {extra:?}:\n{tree}"
    );
}

/// The library, and `examples/editor-host.rs` on it, compile with the
/// features the core's package alone selects: what an editor host that
/// depends on the crate gets. (`tests/editor_host.rs` runs the example from
/// the workspace's build, whose features are unified with the proxy's.)
#[test]
fn lean_library_compiles() {
    lean(&["check", "--lib", "--example", "editor-host", "--quiet"]);
}

/// The core's public surface is the embedder's API: every public item has
/// its documentation (`missing_docs`, denied in the crate too) and every
/// intra-doc link resolves, so `cargo doc -p acp-lsp-core` is a manual an
/// editor host can read, and an undocumented addition fails here.
#[test]
fn lean_public_api_is_documented() {
    let out = cargo()
        .args([
            "rustdoc",
            "--lib",
            "--quiet",
            "--package",
            "acp-lsp-core",
            "--offline",
        ])
        .env("CARGO_TARGET_DIR", lean_target_dir())
        .args([
            "--",
            "-D",
            "missing_docs",
            "-D",
            "rustdoc::broken_intra_doc_links",
        ])
        .output()
        .expect("running cargo");
    assert!(
        out.status.success(),
        "cargo rustdoc --package acp-lsp-core failed ({})\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Nothing the core builds with, its tests and examples included, is the
/// proxy: `examples/editor-host.rs` (an example of the core crate) can only
/// name the core's API, and [`lean_library_compiles`] builds it that way.
#[test]
fn the_core_never_depends_on_the_proxy() {
    let tree = lean(&["tree", "-e", "normal,dev", "--prefix", "none"]);
    let names = crate_names(&tree);
    for proxy in ["acp-lsp", "acp-lsp-fake-server"] {
        assert!(
            !names.iter().any(|n| n == proxy),
            "acp-lsp-core depends on {proxy}:\n{tree}"
        );
    }
}
