//! The `[indexes]` table of a config file:
//!
//! ```toml
//! [indexes]
//! paths = ["/ci/artifacts/scip", "../shared/index.scip"]  # files, or directories of *.scip
//! conventional = true          # also look for index.scip and .scip/*.scip in each session root
//! max_occurrences = 10000000   # a larger index is refused
//! max_bytes = 2147483648       # a larger index file is refused
//! ```
//!
//! Relative paths are relative to the file that names them (as every path
//! of a config file). A configured index is matched to each session root:
//! its sidecar's `root` is taken relative to that session root.

use super::load::{LoadLimits, DEFAULT_MAX_INDEX_BYTES, DEFAULT_MAX_OCCURRENCES};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The file name looked for in a session root.
pub const CONVENTIONAL_FILE: &str = "index.scip";
/// The directory of `*.scip` files looked for in a session root.
pub const CONVENTIONAL_DIR: &str = ".scip";

/// Where indexes are found and what a load may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexesConfig {
    /// Configured index files or directories of them (absolute).
    pub paths: Vec<PathBuf>,
    /// Whether the conventional places of a session root are looked at.
    pub conventional: bool,
    pub limits: LoadLimits,
}

impl Default for IndexesConfig {
    fn default() -> Self {
        IndexesConfig {
            paths: Vec::new(),
            conventional: true,
            limits: LoadLimits {
                max_occurrences: DEFAULT_MAX_OCCURRENCES,
                max_bytes: DEFAULT_MAX_INDEX_BYTES,
            },
        }
    }
}

/// The `[indexes]` table as written (every key optional).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexesPatch {
    paths: Option<Vec<String>>,
    conventional: Option<bool>,
    max_occurrences: Option<u64>,
    max_bytes: Option<u64>,
}

impl IndexesConfig {
    /// Applies a file's `[indexes]` table; `resolve` makes a written path
    /// absolute (relative to the file). On error: the key and the message.
    pub fn apply(
        &mut self,
        patch: IndexesPatch,
        resolve: impl Fn(&str) -> PathBuf,
    ) -> Result<(), (String, String)> {
        if let Some(paths) = patch.paths {
            self.paths = paths.iter().map(|p| resolve(p)).collect();
        }
        if let Some(conventional) = patch.conventional {
            self.conventional = conventional;
        }
        for (key, value, slot) in [
            (
                "indexes.max_occurrences",
                patch.max_occurrences,
                &mut self.limits.max_occurrences,
            ),
            (
                "indexes.max_bytes",
                patch.max_bytes,
                &mut self.limits.max_bytes,
            ),
        ] {
            if let Some(n) = value {
                if n == 0 {
                    return Err((key.to_string(), "must be greater than 0".into()));
                }
                *slot = n;
            }
        }
        Ok(())
    }

    /// The index files for a session root, with the directory each one's
    /// sidecar `root` is relative to: `root/index.scip` and
    /// `root/.scip/*.scip` (base `root`), then the configured ones (base
    /// `root`). Sorted within each place; each file once.
    pub fn files_for(&self, root: &Path) -> Vec<(PathBuf, PathBuf)> {
        let mut found: Vec<(PathBuf, PathBuf)> = Vec::new();
        let mut add = |file: PathBuf, base: &Path| {
            if !found.iter().any(|(f, _)| *f == file) {
                found.push((file, base.to_path_buf()));
            }
        };
        if self.conventional {
            let file = root.join(CONVENTIONAL_FILE);
            if file.is_file() {
                add(file, root);
            }
            for file in scip_files_in(&root.join(CONVENTIONAL_DIR)) {
                add(file, root);
            }
        }
        for path in &self.paths {
            if path.is_dir() {
                for file in scip_files_in(path) {
                    add(file, root);
                }
            } else if path.is_file() {
                add(path.clone(), root);
            } else {
                tracing::info!(path = %path.display(), "configured SCIP index not found");
            }
        }
        found
    }
}

/// The `*.scip` files directly in `dir`, sorted.
fn scip_files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "scip") && p.is_file())
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_conventional_and_configured_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        std::fs::create_dir_all(root.join(".scip")).unwrap();
        std::fs::write(root.join("index.scip"), b"").unwrap();
        std::fs::write(root.join(".scip/b.scip"), b"").unwrap();
        std::fs::write(root.join(".scip/a.scip"), b"").unwrap();
        std::fs::write(root.join(".scip/a.scip.acp-lsp.json"), b"{}").unwrap();
        let shared = dir.path().join("shared");
        std::fs::create_dir_all(&shared).unwrap();
        std::fs::write(shared.join("c.scip"), b"").unwrap();

        let mut config = IndexesConfig::default();
        let patch: IndexesPatch =
            toml::from_str("paths = [\"shared\", \"missing.scip\"]\nmax_occurrences = 5").unwrap();
        config
            .apply(patch, |p| dir.path().join(p))
            .expect("a valid table");
        assert_eq!(config.limits.max_occurrences, 5);
        let files: Vec<PathBuf> = config
            .files_for(&root)
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(
            files,
            vec![
                root.join("index.scip"),
                root.join(".scip/a.scip"),
                root.join(".scip/b.scip"),
                shared.join("c.scip"),
            ]
        );
        config.conventional = false;
        assert_eq!(config.files_for(&root).len(), 1);

        let zero: IndexesPatch = toml::from_str("max_occurrences = 0").unwrap();
        assert!(config.apply(zero, |p| PathBuf::from(p)).is_err());
        assert!(toml::from_str::<IndexesPatch>("unknown = 1").is_err());
    }
}
