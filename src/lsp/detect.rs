//! Which servers run for a folder: root markers and file extensions, nearest marker wins.
//!
//! # The rule
//!
//! [`detect`] walks a session root once, honouring `.gitignore`, `.ignore` and git excludes
//! (also outside a git checkout), showing hidden files but skipping every directory named in
//! `Config::skip_dirs` (and `.git` always). The walk is bounded — [`MAX_DEPTH`] levels and
//! [`MAX_ENTRIES`] entries, visited in file-name order — so a huge tree (a home directory, a
//! checkout with a vendored world) cannot stall a session start; what lies beyond the bound is
//! not looked at.
//!
//! For each enabled server:
//!
//! 1. **Candidates** are the directories holding one of its `root_markers` (a file or
//!    directory of that name). Ignored or skipped entries do not count, except directly in the
//!    session root, where every marker is checked on disk (a gitignored
//!    `compile_commands.json` there still counts).
//! 2. **Evidence**: a candidate counts only when at least one file with one of the server's
//!    extensions was seen under it, so a `Makefile` in a Rust project does not start clangd and
//!    a tooling-only `package.json` does not start the TypeScript server. When the walk hit its
//!    bound this check is skipped (the evidence may lie beyond it). A server with no
//!    extensions needs no evidence.
//! 3. **Nesting**: a candidate inside another candidate of the same server is dropped when the
//!    outer one *claims* its subtree. Every marker claims, except `Cargo.toml`, which claims
//!    only when it has a `[workspace]` table: the outermost workspace wins over its members,
//!    while a plain package nested in another package (a fixture, an excluded crate) is its own
//!    cargo workspace and stays a separate root. Candidates in sibling folders are all kept:
//!    `monorepo/a/Cargo.toml` and `monorepo/b/Cargo.toml` give two roots.
//! 4. **Fallback**: a server with no root left but with files of its extensions in the walk runs
//!    with the session root ([`DetectReason::Extension`]).
//!
//! [`server_root_for_file`] applies the same nesting rule to a single file's ancestors.
//! [`detect`] does not look at `PATH`: callers filter with [`find_on_path`];
//! `lsp::health::health_report` shows both.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::lsp::config::{Config, ServerConfig, ALWAYS_SKIPPED_DIRS};

/// Deepest directory level looked at below a session root.
pub const MAX_DEPTH: usize = 8;

/// Entries (files and directories) looked at before the walk stops.
pub const MAX_ENTRIES: usize = 20_000;

/// Largest `Cargo.toml` read to look for `[workspace]`.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// Why a server was chosen for a root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DetectReason {
    /// The root holds this marker (`Cargo.toml`).
    Marker(String),
    /// No marker; files with this extension (`py`, no dot) exist in the session root.
    Extension(String),
}

impl fmt::Display for DetectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DetectReason::Marker(m) => write!(f, "marker {m}"),
            DetectReason::Extension(e) => write!(f, "*.{e} files"),
        }
    }
}

/// One server to run, and where.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Detected {
    /// Server name as in [`Config::servers`].
    pub server: String,
    /// Workspace root: the session root or a directory below it.
    pub root: PathBuf,
    pub reason: DetectReason,
}

/// What one walk of a session root saw.
#[derive(Debug, Default)]
struct Scan {
    /// Directory → marker names present in it.
    markers: BTreeMap<PathBuf, BTreeSet<String>>,
    /// Extension → directories holding files with it.
    extensions: BTreeMap<String, BTreeSet<PathBuf>>,
    /// The walk stopped at [`MAX_ENTRIES`].
    truncated: bool,
}

impl Scan {
    fn run(session_root: &Path, config: &Config) -> Scan {
        let servers: Vec<&ServerConfig> = config.enabled_servers().collect();
        let marker_names: BTreeSet<String> = servers
            .iter()
            .flat_map(|s| s.root_markers.iter().cloned())
            .collect();
        let wanted_exts: BTreeSet<String> = servers
            .iter()
            .flat_map(|s| s.file_extensions.iter().cloned())
            .collect();
        let skipped: BTreeSet<String> = config
            .skip_dirs
            .iter()
            .cloned()
            .chain(ALWAYS_SKIPPED_DIRS.iter().map(|s| (*s).to_string()))
            .collect();
        // Markers the walk can never yield (they are skipped directory names): stat them in
        // every visited directory instead.
        let stat_markers: Vec<String> = marker_names
            .iter()
            .filter(|m| skipped.contains(*m))
            .cloned()
            .collect();

        let mut scan = Scan::default();
        // Every marker directly in the session root counts, ignored or not.
        for m in &marker_names {
            if session_root.join(m).symlink_metadata().is_ok() {
                scan.add_marker(session_root, m);
            }
        }

        let skip_filter = skipped.clone();
        let mut builder = ignore::WalkBuilder::new(session_root);
        builder
            .hidden(false)
            .parents(true)
            .ignore(true)
            .git_ignore(true)
            .git_global(true)
            .git_exclude(true)
            .require_git(false)
            .follow_links(false)
            .max_depth(Some(MAX_DEPTH))
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(move |entry| {
                let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
                entry.depth() == 0
                    || !is_dir
                    || !entry
                        .file_name()
                        .to_str()
                        .is_some_and(|n| skip_filter.contains(n))
            });

        let mut seen = 0usize;
        for result in builder.build() {
            let entry = match result {
                Ok(e) => e,
                Err(err) => {
                    tracing::debug!(%err, "detect: skipping unreadable entry");
                    continue;
                }
            };
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            if entry.depth() == 0 {
                continue;
            }
            seen += 1;
            if seen > MAX_ENTRIES {
                scan.truncated = true;
                tracing::debug!(root = %session_root.display(), "detect: walk bound reached");
                break;
            }
            let path = entry.path();
            if is_dir {
                for m in &stat_markers {
                    if path.join(m).symlink_metadata().is_ok() {
                        scan.add_marker(path, m);
                    }
                }
            }
            let Some(parent) = path.parent() else {
                continue;
            };
            if let Some(name) = entry.file_name().to_str() {
                if marker_names.contains(name) {
                    scan.add_marker(parent, name);
                }
            }
            if !is_dir {
                if let Some(ext) = path.extension().and_then(|e| e.to_str()) {
                    let ext = if wanted_exts.contains(ext) {
                        Some(ext.to_string())
                    } else {
                        let lower = ext.to_ascii_lowercase();
                        wanted_exts.contains(&lower).then_some(lower)
                    };
                    if let Some(ext) = ext {
                        scan.extensions
                            .entry(ext)
                            .or_default()
                            .insert(parent.to_path_buf());
                    }
                }
            }
        }
        scan
    }

    fn add_marker(&mut self, dir: &Path, name: &str) {
        self.markers
            .entry(dir.to_path_buf())
            .or_default()
            .insert(name.to_string());
    }

    /// Whether a file with one of the server's extensions was seen under `dir`.
    fn has_files_under(&self, server: &ServerConfig, dir: &Path) -> bool {
        server.file_extensions.iter().any(|ext| {
            self.extensions
                .get(ext.as_str())
                .is_some_and(|dirs| dirs.iter().any(|d| d.starts_with(dir)))
        })
    }

    /// The first of the server's extensions seen anywhere.
    fn first_extension_seen<'a>(&self, server: &'a ServerConfig) -> Option<&'a str> {
        server
            .file_extensions
            .iter()
            .find(|ext| self.extensions.contains_key(ext.as_str()))
            .map(String::as_str)
    }
}

/// Whether `dir`, a candidate root of `server` holding `present` markers, claims the roots
/// nested below it (see the module doc).
fn claims_subtree(dir: &Path, present: &BTreeSet<String>) -> bool {
    present.iter().any(|m| m != "Cargo.toml") || cargo_workspace(&dir.join("Cargo.toml"))
}

/// Whether a `Cargo.toml` has a `[workspace]` table.
fn cargo_workspace(manifest: &Path) -> bool {
    let small = manifest
        .metadata()
        .is_ok_and(|m| m.is_file() && m.len() <= MAX_MANIFEST_BYTES);
    if !small {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(manifest) else {
        return false;
    };
    match text.parse::<toml::Table>() {
        Ok(table) => table.get("workspace").is_some_and(|w| w.is_table()),
        // A manifest cargo itself would reject: fall back to spotting the header.
        Err(_) => text.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with("[workspace]") || l.starts_with("[workspace.")
        }),
    }
}

/// The first of `server`'s markers present.
fn first_marker<'a>(server: &'a ServerConfig, present: &BTreeSet<String>) -> Option<&'a str> {
    server
        .root_markers
        .iter()
        .find(|m| present.contains(m.as_str()))
        .map(String::as_str)
}

/// The servers to run for `session_root` and their roots, sorted by (server, root). Does not
/// look at `PATH`. See the module doc for the rule.
pub fn detect(session_root: &Path, config: &Config) -> Vec<Detected> {
    detect_scan(session_root, config).0
}

/// [`detect`], and whether the walk stopped at [`MAX_ENTRIES`].
pub(crate) fn detect_scan(session_root: &Path, config: &Config) -> (Vec<Detected>, bool) {
    let scan = Scan::run(session_root, config);
    let mut out = Vec::new();
    for server in config.enabled_servers() {
        // 1 + 2: candidates with evidence.
        let mut candidates: Vec<(&Path, &BTreeSet<String>, &str)> = Vec::new();
        for (dir, names) in &scan.markers {
            let Some(marker) = first_marker(server, names) else {
                continue;
            };
            if !scan.truncated
                && !server.file_extensions.is_empty()
                && !scan.has_files_under(server, dir)
            {
                continue;
            }
            let present: &BTreeSet<String> = names;
            candidates.push((dir.as_path(), present, marker));
        }
        // 3: nesting. Only this server's own markers decide whether a root claims its subtree.
        let claims: Vec<bool> = candidates
            .iter()
            .map(|(dir, names, _)| {
                let own: BTreeSet<String> = names
                    .iter()
                    .filter(|n| server.root_markers.iter().any(|m| m == *n))
                    .cloned()
                    .collect();
                claims_subtree(dir, &own)
            })
            .collect();
        let mut found = false;
        for (i, (dir, _, marker)) in candidates.iter().enumerate() {
            let claimed = candidates
                .iter()
                .enumerate()
                .any(|(j, (outer, _, _))| j != i && claims[j] && dir.starts_with(outer));
            if claimed {
                continue;
            }
            found = true;
            out.push(Detected {
                server: server.name.clone(),
                root: dir.to_path_buf(),
                reason: DetectReason::Marker((*marker).to_string()),
            });
        }
        // 4: extension fallback.
        if !found {
            if let Some(ext) = scan.first_extension_seen(server) {
                out.push(Detected {
                    server: server.name.clone(),
                    root: session_root.to_path_buf(),
                    reason: DetectReason::Extension(ext.to_string()),
                });
            }
        }
    }
    out.sort();
    (out, scan.truncated)
}

/// Like `which`: the first executable `command` on `PATH`. A command containing a slash (or,
/// on Windows, a backslash) is checked as given (relative to the current directory). Empty
/// `PATH` entries are ignored.
///
/// On Windows a name is also tried with each extension of `PATHEXT` (`.COM;.EXE;.BAT;.CMD`
/// when unset), in that order, after the name as given when it has an extension already:
/// npm installs language servers as `.cmd` shims (`pyright-langserver.cmd`,
/// `typescript-language-server.cmd`), which the returned path then names. Rust's `Command`
/// runs a `.cmd` or `.bat` through `cmd.exe` with its arguments escaped for it, and refuses
/// an argument it cannot pass safely (the BatBadBut class of injections).
pub fn find_on_path(command: &str) -> Option<PathBuf> {
    if command.is_empty() {
        return None;
    }
    if command.contains('/') || (cfg!(windows) && command.contains('\\')) {
        let p = PathBuf::from(command);
        return candidates(&p).find(|c| is_executable(c));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .flat_map(|dir| candidates(&dir.join(command)).collect::<Vec<_>>())
        .find(|candidate| is_executable(candidate))
}

/// The files `path` may name as a program: itself (Unix); on Windows itself
/// when it has an extension, then with each of `PATHEXT`'s.
fn candidates(path: &Path) -> impl Iterator<Item = PathBuf> {
    #[cfg(unix)]
    {
        std::iter::once(path.to_path_buf())
    }
    #[cfg(windows)]
    {
        let exts = std::env::var("PATHEXT").unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".into());
        let mut out = Vec::new();
        if path.extension().is_some() {
            out.push(path.to_path_buf());
        }
        for ext in exts
            .split(';')
            .filter(|e| e.starts_with('.') && e.len() > 1)
        {
            let mut name = path.as_os_str().to_owned();
            name.push(ext.to_ascii_lowercase());
            out.push(PathBuf::from(name));
        }
        out.into_iter()
    }
}

/// A program's name without the directory and, on Windows, without an
/// executable's extension (`.exe`, `.cmd`, `.bat`, `.com`): `clangd` for
/// `C:\LLVM\bin\clangd.exe`, as for `/usr/bin/clangd`.
pub(crate) fn program_name(program: &Path) -> Option<&str> {
    let name = program.file_name()?.to_str()?;
    if cfg!(windows) {
        let lower = name.to_ascii_lowercase();
        for ext in [".exe", ".cmd", ".bat", ".com"] {
            if lower.ends_with(ext) {
                return Some(&name[..name.len() - ext.len()]);
            }
        }
    }
    Some(name)
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// The root of `server` for `file`: among the ancestors of `file` up to and including
/// `session_root` that hold one of the server's markers, the nearest one — unless an outer one
/// claims its subtree (the same rule as [`detect`]: any marker but `Cargo.toml` does, a
/// `Cargo.toml` does when it has `[workspace]`), in which case the outermost claiming one.
/// Without any marker, and for a file outside `session_root` (a dependency source reached by
/// go-to-definition is best served by the server that indexed it), `session_root`.
pub fn server_root_for_file(file: &Path, session_root: &Path, server: &ServerConfig) -> PathBuf {
    if !file.starts_with(session_root) {
        return session_root.to_path_buf();
    }
    let start = if file.is_dir() {
        file
    } else {
        file.parent().unwrap_or(session_root)
    };
    let mut nearest: Option<&Path> = None;
    let mut outermost_claiming: Option<&Path> = None;
    for dir in start.ancestors() {
        if !dir.starts_with(session_root) {
            break;
        }
        let present: BTreeSet<String> = server
            .root_markers
            .iter()
            .filter(|m| dir.join(m.as_str()).symlink_metadata().is_ok())
            .cloned()
            .collect();
        if !present.is_empty() {
            if nearest.is_none() {
                nearest = Some(dir);
            }
            if claims_subtree(dir, &present) {
                outermost_claiming = Some(dir);
            }
        }
        if dir == session_root {
            break;
        }
    }
    outermost_claiming
        .or(nearest)
        .unwrap_or(session_root)
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for (path, content) in files {
            let p = dir.path().join(path);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
            }
            if path.ends_with('/') {
                std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("{e}"));
            } else {
                std::fs::write(&p, content).unwrap_or_else(|e| panic!("{e}"));
            }
        }
        dir
    }

    const PKG: &str = "[package]\nname = \"x\"\nversion = \"0.1.0\"\n";

    /// (server, root relative to the tree, reason) for the given servers
    /// only; the relative root `/`-separated on every OS (`a/b`, `a\b` on
    /// Windows), so one expectation fits both.
    fn found(root: &Path, config: &Config, servers: &[&str]) -> Vec<(String, String, String)> {
        detect(root, config)
            .into_iter()
            .filter(|d| servers.contains(&d.server.as_str()))
            .map(|d| {
                let rel = d
                    .root
                    .strip_prefix(root)
                    .map(|p| {
                        let names: Vec<_> = p
                            .components()
                            .map(|c| c.as_os_str().to_string_lossy())
                            .collect();
                        names.join("/")
                    })
                    .unwrap_or_else(|_| format!("OUTSIDE {}", d.root.display()));
                (d.server, rel, d.reason.to_string())
            })
            .collect()
    }

    fn t(server: &str, root: &str, why: &str) -> (String, String, String) {
        (server.to_string(), root.to_string(), why.to_string())
    }

    #[test]
    fn single_cargo_project() {
        let dir = tree(&[("Cargo.toml", PKG), ("src/main.rs", "fn main() {}")]);
        let all = detect(dir.path(), &Config::builtin());
        assert_eq!(
            all,
            vec![
                Detected {
                    server: "rust-analyzer".to_string(),
                    root: dir.path().to_path_buf(),
                    reason: DetectReason::Marker("Cargo.toml".to_string()),
                },
                // Cargo.toml is a TOML file: taplo applies by extension.
                Detected {
                    server: "taplo".to_string(),
                    root: dir.path().to_path_buf(),
                    reason: DetectReason::Extension("toml".to_string()),
                },
            ]
        );
    }

    #[test]
    fn monorepo_with_two_crates() {
        let dir = tree(&[
            ("a/Cargo.toml", PKG),
            ("a/src/lib.rs", ""),
            ("b/Cargo.toml", PKG),
            ("b/src/lib.rs", ""),
            ("README.txt", ""),
        ]);
        assert_eq!(
            found(dir.path(), &Config::builtin(), &["rust-analyzer"]),
            vec![
                t("rust-analyzer", "a", "marker Cargo.toml"),
                t("rust-analyzer", "b", "marker Cargo.toml"),
            ]
        );
    }

    #[test]
    fn cargo_workspace_members_give_one_root() {
        let dir = tree(&[
            ("ws/Cargo.toml", "[workspace]\nmembers = [\"crates/*\"]\n"),
            ("ws/crates/a/Cargo.toml", PKG),
            ("ws/crates/a/src/lib.rs", ""),
            ("ws/crates/b/Cargo.toml", PKG),
            ("ws/crates/b/src/lib.rs", ""),
            // A plain package nested in a plain package stays separate.
            ("solo/Cargo.toml", PKG),
            ("solo/src/lib.rs", ""),
            ("solo/fixtures/inner/Cargo.toml", PKG),
            ("solo/fixtures/inner/src/lib.rs", ""),
        ]);
        assert_eq!(
            found(dir.path(), &Config::builtin(), &["rust-analyzer"]),
            vec![
                t("rust-analyzer", "solo", "marker Cargo.toml"),
                t("rust-analyzer", "solo/fixtures/inner", "marker Cargo.toml"),
                t("rust-analyzer", "ws", "marker Cargo.toml"),
            ]
        );
    }

    #[test]
    fn python_and_rust_mixed() {
        let dir = tree(&[
            ("Cargo.toml", PKG),
            ("src/lib.rs", ""),
            ("py/pyproject.toml", "[project]\nname = \"p\"\n"),
            ("py/p/__init__.py", ""),
            ("py/sub/setup.py", ""),
            ("py/sub/m.py", ""),
        ]);
        let got = found(
            dir.path(),
            &Config::builtin(),
            &["rust-analyzer", "pyright", "pylsp", "clangd"],
        );
        assert_eq!(
            got,
            vec![
                t("pylsp", "py", "marker pyproject.toml"),
                t("pyright", "py", "marker pyproject.toml"),
                t("rust-analyzer", "", "marker Cargo.toml"),
            ]
        );
    }

    #[test]
    fn gitignored_markers_are_ignored() {
        let dir = tree(&[
            (".gitignore", "generated/\n"),
            ("Cargo.toml", PKG),
            ("src/lib.rs", ""),
            ("generated/pkg/go.mod", "module x\n"),
            ("generated/pkg/main.go", "package main\n"),
            ("generated/crate/Cargo.toml", PKG),
            ("generated/crate/src/lib.rs", ""),
        ]);
        let got = found(dir.path(), &Config::builtin(), &["rust-analyzer", "gopls"]);
        assert_eq!(got, vec![t("rust-analyzer", "", "marker Cargo.toml")]);
        // Without the ignore file, both show up (the assertion above can fail).
        std::fs::remove_file(dir.path().join(".gitignore")).unwrap_or_else(|e| panic!("{e}"));
        let got = found(dir.path(), &Config::builtin(), &["rust-analyzer", "gopls"]);
        assert_eq!(
            got,
            vec![
                t("gopls", "generated/pkg", "marker go.mod"),
                t("rust-analyzer", "", "marker Cargo.toml"),
                t("rust-analyzer", "generated/crate", "marker Cargo.toml"),
            ]
        );
    }

    #[test]
    fn skip_dirs_are_honoured() {
        let dir = tree(&[
            ("pyproject.toml", ""),
            ("app.py", ""),
            ("node_modules/left-pad/package.json", "{}"),
            ("node_modules/left-pad/index.js", ""),
        ]);
        let cfg = Config::builtin();
        let got = found(dir.path(), &cfg, &["typescript-language-server", "pyright"]);
        assert_eq!(got, vec![t("pyright", "", "marker pyproject.toml")]);
        // With node_modules no longer skipped, the package is found.
        let mut cfg = cfg;
        cfg.skip_dirs = vec!["target".to_string()];
        let got = found(dir.path(), &cfg, &["typescript-language-server"]);
        assert_eq!(
            got,
            vec![t(
                "typescript-language-server",
                "node_modules/left-pad",
                "marker package.json"
            )]
        );
    }

    #[test]
    fn extension_only_fallback() {
        let dir = tree(&[("scripts/run.sh", "echo hi"), ("tool.py", "")]);
        let got = found(
            dir.path(),
            &Config::builtin(),
            &["bash-language-server", "pyright", "rust-analyzer"],
        );
        assert_eq!(
            got,
            vec![
                t("bash-language-server", "", "*.sh files"),
                t("pyright", "", "*.py files"),
            ]
        );
    }

    #[test]
    fn markers_need_files_of_the_server() {
        // A Makefile and a tooling package.json in a Rust project start neither clangd nor
        // the TypeScript server.
        let dir = tree(&[
            ("Cargo.toml", PKG),
            ("src/main.rs", ""),
            ("Makefile", "all:\n"),
            ("package.json", "{}"),
        ]);
        let got = found(
            dir.path(),
            &Config::builtin(),
            &["clangd", "typescript-language-server", "rust-analyzer"],
        );
        assert_eq!(got, vec![t("rust-analyzer", "", "marker Cargo.toml")]);
    }

    #[test]
    fn outermost_marker_wins_for_other_servers() {
        let dir = tree(&[
            ("web/package.json", "{}"),
            ("web/packages/ui/package.json", "{}"),
            ("web/packages/ui/index.ts", ""),
            ("api/package.json", "{}"),
            ("api/main.js", ""),
        ]);
        let got = found(
            dir.path(),
            &Config::builtin(),
            &["typescript-language-server"],
        );
        assert_eq!(
            got,
            vec![
                t("typescript-language-server", "api", "marker package.json"),
                t("typescript-language-server", "web", "marker package.json"),
            ]
        );
    }

    #[test]
    fn disabled_servers_are_not_detected() {
        let dir = tree(&[("a.py", "")]);
        let mut cfg = Config::builtin();
        for s in &mut cfg.servers {
            if s.name == "pyright" {
                s.enabled = false;
            }
        }
        let got = found(dir.path(), &cfg, &["pyright", "pylsp"]);
        assert_eq!(got, vec![t("pylsp", "", "*.py files")]);
    }

    #[test]
    fn server_root_for_file_nearest_marker() {
        let dir = tree(&[
            ("a/Cargo.toml", PKG),
            ("a/src/lib.rs", ""),
            ("a/inner/Cargo.toml", PKG),
            ("a/inner/src/lib.rs", ""),
            ("ws/Cargo.toml", "[workspace]\n"),
            ("ws/m/Cargo.toml", PKG),
            ("ws/m/src/lib.rs", ""),
            ("loose/x.rs", ""),
            ("py/pyproject.toml", ""),
            ("py/pkg/setup.py", ""),
            ("py/pkg/mod.py", ""),
        ]);
        let root = dir.path();
        let cfg = Config::builtin();
        let ra = cfg.server("rust-analyzer").unwrap_or_else(|| panic!());
        let py = cfg.server("pyright").unwrap_or_else(|| panic!());
        assert_eq!(
            server_root_for_file(&root.join("a/src/lib.rs"), root, ra),
            root.join("a")
        );
        assert_eq!(
            server_root_for_file(&root.join("a/inner/src/lib.rs"), root, ra),
            root.join("a/inner")
        );
        // Workspace members belong to the workspace root, as in `detect`.
        assert_eq!(
            server_root_for_file(&root.join("ws/m/src/lib.rs"), root, ra),
            root.join("ws")
        );
        assert_eq!(
            server_root_for_file(&root.join("loose/x.rs"), root, ra),
            root.to_path_buf()
        );
        // A file that does not exist yet still finds its root.
        assert_eq!(
            server_root_for_file(&root.join("a/src/new.rs"), root, ra),
            root.join("a")
        );
        // Outermost marker for servers other than cargo.
        assert_eq!(
            server_root_for_file(&root.join("py/pkg/mod.py"), root, py),
            root.join("py")
        );
        // Bounded by the session root.
        assert_eq!(
            server_root_for_file(
                &root.join("a/inner/src/lib.rs"),
                &root.join("a/inner/src"),
                ra
            ),
            root.join("a/inner/src")
        );
        assert_eq!(
            server_root_for_file(Path::new("/elsewhere/lib.rs"), root, ra),
            root.to_path_buf()
        );
    }

    #[test]
    fn find_on_path_finds_executables_only() {
        let dir = tree(&[("bin/tool", "#!/bin/sh\n"), ("bin/plain", "")]);
        let tool = dir.path().join("bin/tool");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let tool_str = tool.display().to_string();
        #[cfg(unix)]
        assert_eq!(find_on_path(&tool_str), Some(tool.clone()));
        // Windows: no mode bits; `bin/tool` names `bin/tool.cmd` through PATHEXT.
        #[cfg(windows)]
        {
            let shim = dir.path().join("bin/tool.cmd");
            std::fs::write(&shim, "@echo off\r\n").unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(find_on_path(&tool_str), Some(shim));
        }
        #[cfg(unix)]
        {
            let plain = dir.path().join("bin/plain").display().to_string();
            assert_eq!(find_on_path(&plain), None);
        }
        assert_eq!(find_on_path("/no/such/acp-lsp-tool"), None);
        assert_eq!(find_on_path(""), None);
        // `sh` is on PATH on any unix test machine.
        #[cfg(unix)]
        assert!(find_on_path("sh").is_some_and(|p| p.is_absolute() && p.ends_with("sh")));
        assert_eq!(find_on_path("acp-lsp-surely-not-installed-xyz"), None);
    }
}
