//! A server's file watchers (`workspace/didChangeWatchedFiles` registrations
//! and static globs from config), matched against watch events. The globs
//! never become OS watches: servers register globs over whole parent
//! directories or the Python standard library.

use super::registration::Registration;
use super::watch::FileChange;
use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// LSP `WatchKind` bits.
const WATCH_CREATE: u8 = 1;
const WATCH_CHANGE: u8 = 2;
const WATCH_DELETE: u8 = 4;
const WATCH_ALL: u8 = WATCH_CREATE | WATCH_CHANGE | WATCH_DELETE;

struct Watcher {
    matcher: GlobMatcher,
    /// A `RelativePattern`'s base: the pattern matches paths relative to it.
    base: Option<PathBuf>,
    kind: u8,
}

/// The watchers of one server.
pub struct FileWatchers {
    watchers: Vec<Watcher>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Options {
    #[serde(default)]
    watchers: Vec<WatcherOptions>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WatcherOptions {
    glob_pattern: GlobPattern,
    #[serde(default)]
    kind: Option<u8>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum GlobPattern {
    Plain(String),
    Relative {
        #[serde(rename = "baseUri")]
        base_uri: BaseUri,
        pattern: String,
    },
}

#[derive(Deserialize)]
#[serde(untagged)]
enum BaseUri {
    Uri(String),
    Folder { uri: String },
}

fn compile(pattern: &str) -> Option<GlobMatcher> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| tracing::debug!(pattern, error = %e, "unusable watch glob"))
        .ok()
}

fn uri_path(uri: &str) -> Option<PathBuf> {
    url::Url::parse(uri).ok()?.to_file_path().ok()
}

impl FileWatchers {
    /// From the server's live registrations and its configured static globs.
    pub fn new(registrations: &[Registration], static_globs: &[String]) -> FileWatchers {
        let mut watchers: Vec<Watcher> = static_globs
            .iter()
            .filter_map(|g| compile(g))
            .map(|matcher| Watcher {
                matcher,
                base: None,
                kind: WATCH_ALL,
            })
            .collect();
        for reg in registrations
            .iter()
            .filter(|r| r.method == "workspace/didChangeWatchedFiles")
        {
            let Some(options) = reg
                .register_options
                .as_ref()
                .and_then(|o| serde_json::from_str::<Options>(o.get()).ok())
            else {
                continue;
            };
            for w in options.watchers {
                let kind = w.kind.unwrap_or(WATCH_ALL);
                let (pattern, base) = match w.glob_pattern {
                    GlobPattern::Plain(p) => (p, None),
                    GlobPattern::Relative { base_uri, pattern } => {
                        let uri = match base_uri {
                            BaseUri::Uri(u) | BaseUri::Folder { uri: u } => u,
                        };
                        match uri_path(&uri) {
                            Some(base) => (pattern, Some(base)),
                            None => continue,
                        }
                    }
                };
                if let Some(matcher) = compile(&pattern) {
                    watchers.push(Watcher {
                        matcher,
                        base,
                        kind,
                    });
                }
            }
        }
        FileWatchers { watchers }
    }

    pub fn is_empty(&self) -> bool {
        self.watchers.is_empty()
    }

    fn matches(&self, root: &Path, path: &Path, change: FileChange) -> bool {
        let bit = match change {
            FileChange::Created => WATCH_CREATE,
            FileChange::Changed => WATCH_CHANGE,
            FileChange::Deleted => WATCH_DELETE,
        };
        self.watchers.iter().any(|w| {
            if w.kind & bit == 0 {
                return false;
            }
            match &w.base {
                Some(base) => path
                    .strip_prefix(base)
                    .is_ok_and(|rel| w.matcher.is_match(rel)),
                // A plain pattern may be absolute (`/ws/**/*.py`) or relative
                // to the workspace (`**/*.rs`, `Cargo.toml`).
                None => {
                    w.matcher.is_match(path)
                        || path
                            .strip_prefix(root)
                            .is_ok_and(|rel| w.matcher.is_match(rel))
                }
            }
        })
    }

    /// The `FileEvent`s to send for `changes` (LSP types: 1 created, 2 changed, 3 deleted).
    pub fn events(&self, root: &Path, changes: &[(PathBuf, FileChange)]) -> Vec<Value> {
        changes
            .iter()
            .filter(|(path, change)| self.matches(root, path, *change))
            .filter_map(|(path, change)| {
                let uri = url::Url::from_file_path(path).ok()?;
                let kind = match change {
                    FileChange::Created => 1,
                    FileChange::Changed => 2,
                    FileChange::Deleted => 3,
                };
                Some(json!({ "uri": uri.as_str(), "type": kind }))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsp::registration::raw_json;
    use crate::test_paths::{os_pathbuf, os_uri};

    fn registration(options: Value) -> Registration {
        Registration {
            id: "w".into(),
            method: "workspace/didChangeWatchedFiles".into(),
            register_options: Some(raw_json(&options)),
        }
    }

    #[test]
    fn plain_relative_and_absolute_patterns_match() {
        let root = &os_pathbuf("/ws/proj");
        // An absolute glob as a server on this OS writes one (globs use `/`).
        let absolute = if cfg!(windows) {
            "C:/ws/proj/**/Cargo.toml"
        } else {
            "/ws/proj/**/Cargo.toml"
        };
        let watchers = FileWatchers::new(
            &[registration(json!({"watchers": [
                {"globPattern": "**/*.rs"},
                {"globPattern": absolute, "kind": 4},
                {"globPattern": {"baseUri": os_uri("/ws/proj/py"), "pattern": "*.py"}},
                {"globPattern": {"baseUri": {"uri": os_uri("/ws/proj/cfg"), "name": "cfg"}, "pattern": "**/*.json"}}
            ]}))],
            &["**/*.md".to_string()],
        );
        let events = watchers.events(
            root,
            &[
                (root.join("src/lib.rs"), FileChange::Changed),
                (root.join("a/Cargo.toml"), FileChange::Changed),
                (root.join("a/Cargo.toml2"), FileChange::Deleted),
                (root.join("b/Cargo.toml"), FileChange::Deleted),
                (root.join("py/m.py"), FileChange::Created),
                (root.join("py/sub/m.py"), FileChange::Created),
                (root.join("cfg/x/y.json"), FileChange::Deleted),
                (root.join("README.md"), FileChange::Changed),
                (root.join("notes.txt"), FileChange::Changed),
            ],
        );
        let uris: Vec<(String, i64)> = events
            .iter()
            .map(|e| {
                (
                    e["uri"].as_str().unwrap().to_string(),
                    e["type"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            uris,
            vec![
                (os_uri("/ws/proj/src/lib.rs"), 2),
                (os_uri("/ws/proj/b/Cargo.toml"), 3),
                (os_uri("/ws/proj/py/m.py"), 1),
                (os_uri("/ws/proj/cfg/x/y.json"), 3),
                (os_uri("/ws/proj/README.md"), 2),
            ]
        );
    }

    #[test]
    fn other_registrations_and_bad_globs_are_ignored() {
        let other = Registration {
            id: "f".into(),
            method: "textDocument/formatting".into(),
            register_options: None,
        };
        let watchers = FileWatchers::new(
            &[
                other,
                registration(json!({"watchers": [{"globPattern": "[unclosed"}]})),
            ],
            &[],
        );
        assert!(watchers.is_empty());
    }
}
