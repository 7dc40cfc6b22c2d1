//! Where acp-lsp keeps its files, per OS (the `directories` crate: the XDG
//! base directories on Linux, the standard directories on macOS, the Known
//! Folders on Windows). A `XDG_CONFIG_HOME` or `XDG_CACHE_HOME` set to an
//! absolute path wins on every OS, so a user (or a test) can move them.
//!
//! | what | Linux | macOS | Windows |
//! |---|---|---|---|
//! | config | `~/.config/acp-lsp` | `~/Library/Application Support/acp-lsp` | `%APPDATA%\acp-lsp\config` |
//! | caches | `~/.cache/acp-lsp` | `~/Library/Caches/acp-lsp` | `%LOCALAPPDATA%\acp-lsp\cache` |
//! | runtime (daemon, MCP sockets) | `$XDG_RUNTIME_DIR`, else the temp dir | the temp dir (`$TMPDIR`, per user) | the temp dir (`%TEMP%`, per user); sockets are named pipes |

use std::path::PathBuf;

/// An absolute path in the environment variable `name`.
fn absolute_env(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

fn project() -> Option<directories::ProjectDirs> {
    directories::ProjectDirs::from("", "", "acp-lsp")
}

/// acp-lsp's configuration directory (the user file is `config.toml` in it).
pub(crate) fn config_dir() -> Option<PathBuf> {
    if let Some(base) = absolute_env("XDG_CONFIG_HOME") {
        return Some(base.join("acp-lsp"));
    }
    project().map(|dirs| dirs.config_dir().to_path_buf())
}

/// acp-lsp's cache directory (per-(server, root) caches and build output).
pub(crate) fn cache_dir() -> Option<PathBuf> {
    if let Some(base) = absolute_env("XDG_CACHE_HOME") {
        return Some(base.join("acp-lsp"));
    }
    project().map(|dirs| dirs.cache_dir().to_path_buf())
}

/// Where the shared daemon's directory goes: `$XDG_RUNTIME_DIR` when it is
/// an absolute directory (on any OS), else the temp dir, which macOS and
/// Windows make per user.
pub(crate) fn runtime_base() -> PathBuf {
    absolute_env("XDG_RUNTIME_DIR")
        .filter(|dir| dir.is_dir())
        .unwrap_or_else(std::env::temp_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_place_is_absolute_and_named_for_acp_lsp() {
        for dir in [config_dir(), cache_dir()].into_iter().flatten() {
            assert!(dir.is_absolute(), "{}", dir.display());
            assert!(
                dir.components().any(|c| c.as_os_str() == "acp-lsp"),
                "{}",
                dir.display()
            );
        }
        assert!(runtime_base().is_absolute());
    }
}
