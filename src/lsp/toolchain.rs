//! Read-only roots discovered from the toolchains in use: the places a
//! server's own answers point to outside the project (a definition in the
//! Rust standard library, a cargo registry crate, the active virtualenv's
//! `site-packages`), so that an agent can follow them with a hover or
//! references request. Discovered, never hard-coded: only what exists.
//!
//! A root's own `node_modules` needs nothing here: it is inside the session
//! root already.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::probe::{run_bounded, Ran};

/// Longest wait for `rustc --print sysroot`.
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(5);

pub use super::config::DiscoveredRoot;

/// Adds the read-only roots the toolchains in use point to (the Rust
/// sysroot's sources, the cargo registry, the active virtualenv's
/// site-packages) to `config`, unless its `discover_read_only_roots` is off.
/// Runs `rustc --print sysroot` in `cwd`. (Here rather than in `config`,
/// which runs nothing and knows no toolchain.)
pub fn add_discovered_roots(config: &mut super::config::Config, cwd: &Path) {
    if !config.discover_read_only_roots {
        return;
    }
    for root in discover(cwd) {
        if !config.read_only_roots.contains(&root.path) {
            config.read_only_roots.push(root.path.clone());
            config.discovered_read_only_roots.push(root);
        }
    }
}

/// Every read-only root found in the current environment (run from `cwd`,
/// so rustup's directory overrides choose the toolchain).
pub fn discover(cwd: &Path) -> Vec<DiscoveredRoot> {
    let mut found = Vec::new();
    if let Some(sysroot) = rust_sysroot(cwd) {
        push_dir(
            &mut found,
            sysroot.join("lib/rustlib/src/rust"),
            "Rust standard library sources (rustc --print sysroot)",
        );
    }
    if let Some(cargo_home) = cargo_home() {
        push_dir(
            &mut found,
            cargo_home.join("registry/src"),
            "cargo registry sources ($CARGO_HOME/registry/src)",
        );
        push_dir(
            &mut found,
            cargo_home.join("git/checkouts"),
            "cargo git dependencies ($CARGO_HOME/git/checkouts)",
        );
    }
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV").map(PathBuf::from) {
        for site in site_packages(&venv) {
            push_dir(
                &mut found,
                site,
                "the active virtualenv's site-packages ($VIRTUAL_ENV)",
            );
        }
    }
    found
}

fn push_dir(found: &mut Vec<DiscoveredRoot>, path: PathBuf, why: &str) {
    if path.is_dir() && !found.iter().any(|f| f.path == path) {
        found.push(DiscoveredRoot {
            path,
            why: why.to_string(),
        });
    }
}

/// `rustc --print sysroot`, when rustc runs.
fn rust_sysroot(cwd: &Path) -> Option<PathBuf> {
    let rustc = super::detect::find_on_path("rustc")?;
    let args = ["--print".to_string(), "sysroot".to_string()];
    // Run in `cwd`: rustup picks the toolchain of the directory it runs in
    // (rust-toolchain.toml, overrides).
    match run_bounded(
        &rustc,
        &args,
        &Default::default(),
        Some(cwd),
        DISCOVERY_TIMEOUT,
    ) {
        Ok(Ran::Exited {
            success: true,
            stdout,
            ..
        }) => {
            let line = stdout.lines().next()?.trim().to_string();
            Some(PathBuf::from(line)).filter(|p| p.is_absolute())
        }
        _ => None,
    }
}

/// `$CARGO_HOME`, else `~/.cargo`.
fn cargo_home() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
}

/// `<venv>/lib/python3.*/site-packages` (POSIX layout).
fn site_packages(venv: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(venv.join("lib")) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("python"))
        .map(|e| e.path().join("site-packages"))
        .filter(|p| p.is_dir())
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_virtualenv_s_site_packages_are_found() {
        let dir = tempfile::tempdir().expect("temp dir");
        let site = dir.path().join("lib/python3.12/site-packages");
        std::fs::create_dir_all(&site).expect("create");
        std::fs::create_dir_all(dir.path().join("lib/other")).expect("create");
        assert_eq!(site_packages(dir.path()), vec![site]);
        assert!(site_packages(&dir.path().join("missing")).is_empty());
    }

    #[test]
    fn discovery_can_be_turned_off() {
        let origin = Path::new("/etc/acp-lsp/config.toml");
        let base = crate::lsp::config::Config::builtin();
        let mut off = crate::lsp::config::Config::from_toml_str(
            "discover_read_only_roots = false\n",
            origin,
            base,
        )
        .expect("valid config");
        assert!(!off.discover_read_only_roots);
        add_discovered_roots(&mut off, Path::new("/"));
        assert!(off.read_only_roots.is_empty());
        assert!(off.discovered_read_only_roots.is_empty());
    }
}
