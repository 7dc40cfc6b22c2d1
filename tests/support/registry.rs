//! Real projects nobody here wrote, fetched from their package registries
//! into a cache kept across runs (never committed): a crate (`cargo
//! fetch`), a Python sdist (`pip download`), a TypeScript package that
//! ships its sources (`npm pack`). Shared by the integration tests and the
//! benchmark suite (through `#[path]`), so both measure the same trees.
//!
//! Each fetch unpacks into a temporary directory beside its place in the
//! cache and renames it into place: two test binaries fetching the same
//! project at once both end with a whole tree, never half of one.
#![allow(dead_code)]

use anyhow::{ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A TypeScript package from npm, with what makes it a project of its own.
pub struct NpmProject {
    pub name: &'static str,
    pub version: &'static str,
    /// The directory the written `tsconfig.json` includes (the package
    /// ships none: without one tsserver sees only the files open in it).
    pub sources: &'static str,
    /// Directories of the package removed after unpacking (built output
    /// whose declarations would stand beside the sources).
    pub remove: &'static [&'static str],
}

/// immer 10.1.1: 16 TypeScript sources (59 KB) under `src/`, its built
/// `dist/` removed.
pub const IMMER: NpmProject = NpmProject {
    name: "immer",
    version: "10.1.1",
    sources: "src",
    remove: &["dist"],
};

/// zod 4.1.12: it ships its `src/` (large: hundreds of files).
pub const ZOD: NpmProject = NpmProject {
    name: "zod",
    version: "4.1.12",
    sources: "src",
    remove: &[],
};

/// The user's cache directory: `$XDG_CACHE_HOME`, or `~/.cache`.
pub fn user_cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
}

/// Where fetched projects are kept: `acp-lsp-registry-projects` in the
/// user's cache directory.
pub fn cache_dir() -> PathBuf {
    user_cache_dir().join("acp-lsp-registry-projects")
}

fn run_quiet(command: &mut Command, what: &str) -> Result<()> {
    let output = command
        .output()
        .with_context(|| format!("cannot run {what}"))?;
    ensure!(
        output.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&output.stderr)
            .lines()
            .last()
            .unwrap_or_default()
    );
    Ok(())
}

/// `dir` in the cache, made by `fill` (given an empty directory beside it)
/// unless it is there already, `complete` telling a whole tree.
fn cached(
    dir: &str,
    complete: impl Fn(&Path) -> bool,
    fill: impl FnOnce(&Path) -> Result<()>,
) -> Result<PathBuf> {
    let cache = cache_dir();
    let place = cache.join(dir);
    if complete(&place) {
        return Ok(place);
    }
    std::fs::create_dir_all(&cache)?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{dir}-"))
        .tempdir_in(&cache)?;
    fill(staging.path())?;
    ensure!(
        complete(staging.path()),
        "{dir}: the fetch left an incomplete tree"
    );
    let staged = staging.keep();
    if let Err(e) = std::fs::rename(&staged, &place) {
        // Another fetch got there first: keep its tree, drop ours.
        let _ = std::fs::remove_dir_all(&staged);
        ensure!(complete(&place), "{}: {e}", place.display());
    }
    Ok(place)
}

/// A tarball's single top directory, unpacked into `into` (its contents
/// moved up one level).
fn untar_stripped(archive: &Path, into: &Path) -> Result<()> {
    run_quiet(
        Command::new("tar")
            .arg("xzf")
            .arg(archive)
            .arg("-C")
            .arg(into)
            .arg("--strip-components=1"),
        "tar",
    )
}

/// A crate from the Rust package registry: `cargo fetch` of a manifest
/// that depends on it, then its `.crate` unpacked.
pub fn fetch_crate(name: &str, version: &str) -> Result<PathBuf> {
    cached(
        &format!("{name}-{version}"),
        |dir| dir.join("Cargo.toml").is_file(),
        |into| {
            let tmp = tempfile::tempdir()?;
            std::fs::create_dir_all(tmp.path().join("src"))?;
            std::fs::write(tmp.path().join("src/lib.rs"), "")?;
            std::fs::write(
                tmp.path().join("Cargo.toml"),
                format!(
                    "[package]\nname = \"fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
                     [dependencies]\n{name} = \"={version}\"\n[workspace]\n"
                ),
            )?;
            run_quiet(
                Command::new("cargo")
                    .arg("fetch")
                    .arg("--manifest-path")
                    .arg(tmp.path().join("Cargo.toml")),
                "cargo fetch",
            )?;
            let home = std::env::var_os("CARGO_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
                .context("no CARGO_HOME or HOME")?;
            let crate_file = std::fs::read_dir(home.join("registry/cache"))?
                .flatten()
                .map(|index| index.path().join(format!("{name}-{version}.crate")))
                .find(|p| p.is_file())
                .context("cargo fetch left no .crate file")?;
            untar_stripped(&crate_file, into)
        },
    )
}

/// A Python sdist from PyPI (`pip download --no-binary :all:`), unpacked.
pub fn fetch_sdist(name: &str, version: &str) -> Result<PathBuf> {
    cached(
        &format!("{name}-{version}"),
        |dir| dir.join("pyproject.toml").is_file() || dir.join("setup.py").is_file(),
        |into| {
            let tmp = tempfile::tempdir()?;
            run_quiet(
                Command::new("python3")
                    .args([
                        "-m",
                        "pip",
                        "download",
                        "--quiet",
                        "--no-deps",
                        "--no-binary",
                        ":all:",
                    ])
                    .arg(format!("{name}=={version}"))
                    .arg("-d")
                    .arg(tmp.path()),
                "pip download (python3 -m pip)",
            )?;
            untar_stripped(&tmp.path().join(format!("{name}-{version}.tar.gz")), into)
        },
    )
}

/// A TypeScript package from npm (`npm pack`), unpacked, with a
/// `tsconfig.json` over its sources.
pub fn fetch_npm(project: &NpmProject) -> Result<PathBuf> {
    let NpmProject {
        name,
        version,
        sources,
        remove,
    } = project;
    cached(
        &format!("{name}-{version}"),
        |dir| dir.join("tsconfig.json").is_file(),
        |into| {
            let tmp = tempfile::tempdir()?;
            run_quiet(
                Command::new("npm")
                    .args([
                        "pack",
                        "--silent",
                        &format!("{name}@{version}"),
                        "--pack-destination",
                    ])
                    .arg(tmp.path()),
                "npm pack",
            )?;
            untar_stripped(&tmp.path().join(format!("{name}-{version}.tgz")), into)?;
            for dir in *remove {
                let path = into.join(dir);
                if path.exists() {
                    std::fs::remove_dir_all(&path)?;
                }
            }
            std::fs::write(
                into.join("tsconfig.json"),
                format!(
                    r#"{{"compilerOptions": {{"strict": true, "target": "es2022", "module": "esnext",
  "moduleResolution": "bundler", "noEmit": true, "skipLibCheck": true}},
 "include": ["{sources}"]}}
"#
                ),
            )?;
            Ok(())
        },
    )
}
