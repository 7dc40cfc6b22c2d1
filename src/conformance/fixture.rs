//! One scenario folder of `fixtures/`: `scenario.toml`, `workspace/`,
//! `session.jsonl` and `expect/`, read into typed lines.

use super::ConformanceError;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::path::{Path, PathBuf};

pub use crate::record::Direction as Dir;

/// What the editor's user did between messages.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkspaceStep {
    Write {
        path: String,
        text: String,
    },
    Remove(String),
    /// SIGKILL the server with this (recorded) serverId.
    Kill(String),
    /// A pause while recording; replay ignores it.
    Sleep(u64),
}

/// A line's content.
#[derive(Debug, Clone)]
pub enum Body {
    /// A JSON message (object or batch array), as its exact text.
    Message(Box<RawValue>),
    /// Bytes that were not JSON.
    Text(String),
    /// A piece of a line too long to inspect.
    Fragment(String),
    Spawn {
        name: String,
        root: String,
    },
    Exit {
        status: String,
    },
    Eof,
    Step(WorkspaceStep),
}

/// One line of `session.jsonl`.
#[derive(Debug, Clone)]
pub struct Line {
    /// 1-based line number in `session.jsonl`.
    pub number: usize,
    pub dir: Dir,
    pub body: Body,
    /// The line exactly as stored (for rewriting and reports).
    pub source: String,
}

#[derive(Deserialize)]
struct RawLine<'a> {
    dir: String,
    #[serde(borrow, default)]
    msg: Option<&'a RawValue>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    fragment: Option<String>,
    #[serde(default)]
    event: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    root: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    write: Option<WriteStep>,
    #[serde(default)]
    remove: Option<String>,
    #[serde(default)]
    kill: Option<String>,
    #[serde(default)]
    sleep_ms: Option<u64>,
}

#[derive(Deserialize)]
struct WriteStep {
    path: String,
    text: String,
}

/// Parses one line of the record format.
pub(crate) fn parse_line(number: usize, text: &str) -> Result<Line, String> {
    let raw: RawLine = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let dir = Dir::parse(&raw.dir).ok_or_else(|| format!("unknown dir {:?}", raw.dir))?;
    let body = if dir == Dir::Workspace {
        let step = if let Some(w) = raw.write {
            WorkspaceStep::Write {
                path: w.path,
                text: w.text,
            }
        } else if let Some(path) = raw.remove {
            WorkspaceStep::Remove(path)
        } else if let Some(id) = raw.kill {
            WorkspaceStep::Kill(id)
        } else if let Some(ms) = raw.sleep_ms {
            WorkspaceStep::Sleep(ms)
        } else {
            return Err("a workspace line needs write, remove, kill or sleep_ms".into());
        };
        Body::Step(step)
    } else if let Some(msg) = raw.msg {
        Body::Message(msg.to_owned())
    } else if let Some(text) = raw.text {
        Body::Text(text)
    } else if let Some(fragment) = raw.fragment {
        Body::Fragment(fragment)
    } else {
        match raw.event.as_deref() {
            Some("spawn") => Body::Spawn {
                name: raw.name.ok_or("a spawn event needs name")?,
                root: raw.root.ok_or("a spawn event needs root")?,
            },
            Some("exit") => Body::Exit {
                status: raw.status.unwrap_or_default(),
            },
            Some("eof") => Body::Eof,
            Some(other) => return Err(format!("unknown event {other:?}")),
            None => {
                return Err("a line needs msg, text, fragment, event or a workspace step".into())
            }
        }
    };
    Ok(Line {
        number,
        dir,
        body,
        source: text.to_string(),
    })
}

/// `scenario.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioMeta {
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub rfd: Vec<String>,
    /// Part of the normative suite (`acp-lsp conformance`).
    #[serde(default)]
    pub normative: bool,
    /// acp-lsp configuration TOML for this session.
    #[serde(default)]
    pub config: String,
    /// Extra normative checks on answers (e.g. read-your-writes).
    #[serde(default)]
    pub checks: Vec<AnswerCheck>,
}

/// The scenario's acp-lsp configuration as recordings are made and replayed:
/// `project_code = "run"` unless the scenario says otherwise. The fixtures
/// hold no build scripts or plugins, and their recordings were made with
/// servers' defaults; the trust setting is tested elsewhere.
pub(crate) fn config_with_defaults(scenario_config: &str) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = scenario_config.parse().map_err(|e| format!("{e}"))?;
    if !doc.contains_key("project_code") {
        doc.insert("project_code", toml_edit::value("run"));
    }
    Ok(doc.to_string())
}

/// `[[checks]]`: the agent's request `id` (its JSON text, e.g. `"\"a5\""`)
/// must get an answer whose JSON text contains `contains`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerCheck {
    pub id: String,
    pub contains: String,
}

/// A scenario folder, loaded.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub dir: PathBuf,
    pub meta: ScenarioMeta,
    pub lines: Vec<Line>,
}

impl Scenario {
    pub fn load(dir: &Path) -> Result<Scenario, ConformanceError> {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bad = |what: String| ConformanceError::Fixture {
            scenario: name.clone(),
            what,
        };
        let meta_path = dir.join("scenario.toml");
        let meta = match std::fs::read_to_string(&meta_path) {
            Ok(text) => toml::from_str(&text).map_err(|e| bad(format!("scenario.toml: {e}")))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ScenarioMeta::default(),
            Err(e) => return Err(bad(format!("scenario.toml: {e}"))),
        };
        let session = std::fs::read_to_string(dir.join("session.jsonl"))
            .map_err(|e| bad(format!("session.jsonl: {e}")))?;
        let mut lines = Vec::new();
        for (index, text) in session.lines().enumerate() {
            if text.trim().is_empty() {
                continue;
            }
            let line = parse_line(index + 1, text)
                .map_err(|e| bad(format!("session.jsonl:{}: {e}", index + 1)))?;
            lines.push(line);
        }
        Ok(Scenario {
            name,
            dir: dir.to_path_buf(),
            meta,
            lines,
        })
    }

    pub fn workspace(&self) -> PathBuf {
        self.dir.join("workspace")
    }

    pub fn expect(&self) -> PathBuf {
        self.dir.join("expect")
    }

    /// Whether the session has anything besides the editor's and agent's
    /// side, i.e. it was recorded (a script has only `…→proxy` and
    /// `workspace` lines).
    pub fn is_recorded(&self) -> bool {
        self.lines.iter().any(|l| {
            !matches!(
                l.dir,
                Dir::EditorToProxy | Dir::AgentToProxy | Dir::Workspace
            )
        })
    }
}

/// Every scenario folder under `fixtures` (those with a `session.jsonl`), by name.
pub(crate) fn scenario_dirs(fixtures: &Path) -> Result<Vec<PathBuf>, ConformanceError> {
    let entries = std::fs::read_dir(fixtures).map_err(|e| ConformanceError::Io {
        what: format!("reading {}", fixtures.display()),
        source: e,
    })?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join("session.jsonl").is_file())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// Names a fixture's workspace never owns: the build output and caches that
/// language servers and their tools write into a project (rust-analyzer's
/// `cargo check` makes `target/` and `Cargo.lock`, clangd `.cache/`, Python
/// `__pycache__/`). A session run on this repository can leave them in
/// `fixtures/*/workspace`; copies and comparisons leave them out, so a
/// replay is not thrown by files its recording never had. A fixture that
/// needs one of these names cannot have it.
pub const NOT_OWNED: &[&str] = &[
    "target",
    "Cargo.lock",
    ".cache",
    "__pycache__",
    ".pytest_cache",
    "node_modules",
];

/// Whether `name` (a file or folder name) is one a fixture never owns.
pub fn not_owned(name: &std::ffi::OsStr) -> bool {
    NOT_OWNED.iter().any(|n| name == *n)
}

/// Copies `from` to `to`, replacing `${ROOT}` by `root` in files that contain
/// it (e.g. `compile_commands.json`), leaving out what the fixture does not
/// own ([`NOT_OWNED`], said once on stderr's log).
pub fn copy_workspace(from: &Path, to: &Path, root: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if not_owned(&entry.file_name()) {
            tracing::warn!(
                path = %entry.path().display(),
                "left out of the fixture's copy: build output or a cache, not the fixture's"
            );
            continue;
        }
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_workspace(&entry.path(), &target, root)?;
        } else if kind.is_file() {
            let bytes = std::fs::read(entry.path())?;
            match std::str::from_utf8(&bytes) {
                Ok(text) if text.contains(super::ROOT) => {
                    std::fs::write(&target, text.replace(super::ROOT, root))?
                }
                _ => std::fs::write(&target, &bytes)?,
            }
        }
    }
    Ok(())
}

/// Files under `dir` (relative path → bytes), for comparing workspaces;
/// what no fixture owns ([`NOT_OWNED`]) left out.
pub(crate) fn read_tree(
    dir: &Path,
) -> std::io::Result<std::collections::BTreeMap<String, Vec<u8>>> {
    fn walk(
        base: &Path,
        dir: &Path,
        out: &mut std::collections::BTreeMap<String, Vec<u8>>,
    ) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            // Build output and caches are nobody's result (NOT_OWNED).
            if not_owned(&entry.file_name()) {
                continue;
            }
            let path = entry.path();
            let kind = entry.file_type()?;
            if kind.is_dir() {
                walk(base, &path, out)?;
            } else if kind.is_file() {
                let rel = path
                    .strip_prefix(base)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(&path)?);
            }
        }
        Ok(())
    }
    let mut out = std::collections::BTreeMap::new();
    if dir.exists() {
        walk(dir, dir, &mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directions_round_trip() {
        for label in [
            "editor→proxy",
            "proxy→agent",
            "agent→proxy",
            "proxy→editor",
            "proxy→server:${serverId:clangd}",
            "server:${serverId:clangd}→proxy",
            "workspace",
        ] {
            assert_eq!(Dir::parse(label).unwrap().label(), label);
        }
        assert_eq!(Dir::parse("sideways"), None);
    }

    #[test]
    fn parses_each_kind_of_line() {
        let line = parse_line(
            1,
            r#"{"t":1,"dir":"agent→proxy","msg":{"id":18446744073709551616}}"#,
        )
        .unwrap();
        match line.body {
            Body::Message(raw) => assert_eq!(raw.get(), r#"{"id":18446744073709551616}"#),
            other => panic!("{other:?}"),
        }
        let line = parse_line(
            2,
            r#"{"dir":"proxy→server:x","event":"spawn","name":"pyright","root":"${ROOT}"}"#,
        )
        .unwrap();
        assert!(matches!(line.body, Body::Spawn { ref name, .. } if name == "pyright"));
        let line = parse_line(
            3,
            r#"{"dir":"workspace","write":{"path":"a.py","text":"x = 1\n"}}"#,
        )
        .unwrap();
        assert!(matches!(line.body, Body::Step(WorkspaceStep::Write { .. })));
        assert!(parse_line(4, r#"{"dir":"workspace"}"#).is_err());
        assert!(parse_line(5, r#"{"dir":"agent→proxy"}"#).is_err());
        assert!(parse_line(6, r#"{"dir":"up","msg":{}}"#).is_err());
    }
}
