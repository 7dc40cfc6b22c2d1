//! Paths in configuration files: `~` expanded, relative paths taken from the
//! file's directory, `.`/`..` removed lexically, the home directory shown as `~`.

use std::path::{Component, Path, PathBuf};

pub(super) fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `path` with a leading home directory shown as `~`.
pub(crate) fn display_path(path: &Path) -> String {
    if let Some(home) = home_dir() {
        if home != Path::new("/") {
            if let Ok(rest) = path.strip_prefix(&home) {
                if rest.as_os_str().is_empty() {
                    return "~".to_string();
                }
                return format!("~/{}", rest.display());
            }
        }
    }
    path.display().to_string()
}

/// Expands a leading `~` or `~/`.
pub(super) fn expand_tilde(text: &str) -> PathBuf {
    if text == "~" {
        if let Some(home) = home_dir() {
            return home;
        }
    } else if let Some(rest) = text.strip_prefix("~/") {
        if let Some(home) = home_dir() {
            return home.join(rest);
        }
    }
    PathBuf::from(text)
}

/// `~` expanded; a relative path is taken relative to the directory of `origin`.
pub(super) fn resolve_path(text: &str, origin: &Path) -> PathBuf {
    let p = expand_tilde(text);
    if p.is_absolute() {
        return normalize(&p);
    }
    let base = origin.parent().unwrap_or(Path::new(""));
    normalize(&base.join(p))
}

/// Lexically removes `.` and `..` components.
pub(super) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}
