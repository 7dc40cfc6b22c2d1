//! Where installed servers live: a private prefix under the user's data
//! directory (`directories`: `~/.local/share/acp-lsp` on Linux,
//! `~/Library/Application Support/acp-lsp` on macOS, `%APPDATA%\acp-lsp`
//! on Windows), or [`DATA_DIR_ENV`] when set. Never system-wide.

use std::path::{Path, PathBuf};

/// Overrides [`data_home`] (an absolute path): a clean prefix for CI and
/// tests, or a shared one for a team's machines.
pub const DATA_DIR_ENV: &str = "ACP_LSP_DATA_DIR";

/// acp-lsp's data directory: [`DATA_DIR_ENV`] when it holds an absolute
/// path, else the platform's per-user data directory for `acp-lsp`.
/// This is the one function for acp-lsp's data (caches are
/// `lsp::caches::cache_home`).
pub fn data_home() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(DATA_DIR_ENV)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        return Some(dir);
    }
    directories::ProjectDirs::from("", "", "acp-lsp").map(|d| d.data_dir().to_path_buf())
}

/// The store of installed servers: `<data_home>/servers`.
pub fn servers_home() -> Option<PathBuf> {
    data_home().map(|d| d.join("servers"))
}

/// The layout of one store (a `servers` directory):
///
/// ```text
/// servers/<store name>/.lock                  held while one process installs or removes
/// servers/<store name>/<version>-<key>/       a complete install (renamed into place)
/// servers/<store name>/<version>-<key>/.acp-lsp-install.json   its marker, written last
/// servers/<store name>/.stage-<version>-<key>-<random>/        an install under way
/// ```
#[derive(Debug, Clone)]
pub struct Store {
    pub root: PathBuf,
}

/// The marker file inside a complete install.
pub const MARKER_FILE: &str = ".acp-lsp-install.json";
/// The prefix of staging directories.
pub const STAGE_PREFIX: &str = ".stage-";
/// The lock file of one package's directory.
pub const LOCK_FILE: &str = ".lock";

impl Store {
    /// The user's store ([`servers_home`]).
    pub fn user() -> Option<Store> {
        servers_home().map(|root| Store { root })
    }

    pub fn at(root: impl Into<PathBuf>) -> Store {
        Store { root: root.into() }
    }

    pub fn package_dir(&self, store_name: &str) -> PathBuf {
        self.root.join(store_name)
    }

    pub fn install_dir(&self, store_name: &str, install_name: &str) -> PathBuf {
        self.package_dir(store_name).join(install_name)
    }

    pub fn marker(dir: &Path) -> PathBuf {
        dir.join(MARKER_FILE)
    }
}
