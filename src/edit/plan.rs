//! The edit planner: an LSP `WorkspaceEdit` in, an ordered list of whole-file
//! operations (each write with its old and new text) out.
//!
//! The planner does no I/O. Everything it knows about files comes from the
//! caller's `current` lookup (which may read a disk, an editor's buffers, or
//! a map), and what it produces is data: `apply` writes it to disk, `acp`
//! through an agent's `fs/*` methods. Keeping the decisions here means both
//! appliers share one reading of the LSP rules, and every rule can be tested
//! without a file system.
//!
//! Resource operations (`CreateFile`, `RenameFile`, `DeleteFile`) are applied
//! in sequence to a virtual file system layered over the lookup, so a
//! `TextDocumentEdit` after a `RenameFile` edits the renamed file, and an
//! edit after a `CreateFile` edits the new, empty file.
//!
//! Change annotations that need confirmation are never applied silently:
//! their changes are planned, the annotations are listed in
//! [`Plan::needs_confirmation`], and both appliers refuse a plan until each
//! is confirmed ([`Plan::confirm`], or [`Decisions::confirmed`] up front).
//! Declining an annotation means planning again with its id in
//! [`Decisions::declined`]: its changes are then left out and the later
//! changes are planned against the text without them, which dropping
//! operations from a finished plan could not do (each write holds whole
//! contents computed after every earlier change).

mod read;
mod vfs;

use self::read::*;
use self::vfs::*;
use super::position::{LineIndex, PositionEncoding, PositionError};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use url::Url;

/// A file's text as the caller knows it, with its LSP document version when
/// known (an editor's open buffer has one; a file on disk does not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    pub text: String,
    pub version: Option<i32>,
}

/// What exists at a path. A path with nothing at it is `None` in a lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A text file that can be edited.
    File(Current),
    /// A file that exists but whose text is not available (not UTF-8,
    /// unreadable): it can be renamed, deleted or overwritten, not edited.
    Opaque,
    Directory,
}

impl Entry {
    /// A text file without a known version (e.g. read from disk).
    pub fn text(text: impl Into<String>) -> Entry {
        Entry::File(Current {
            text: text.into(),
            version: None,
        })
    }

    /// A text file whose LSP document version is known.
    pub fn versioned(text: impl Into<String>, version: i32) -> Entry {
        Entry::File(Current {
            text: text.into(),
            version: Some(version),
        })
    }
}

/// A change annotation (`changeAnnotations[id]`) that needs confirmation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    pub id: String,
    pub label: String,
    pub description: Option<String>,
}

/// The user's answers about change annotations, by annotation id. A declined
/// id wins over a confirmed one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decisions {
    /// Annotations the user already confirmed: not left unconfirmed in the plan.
    pub confirmed: BTreeSet<String>,
    /// Annotations the user declined: their changes are left out of the plan.
    pub declined: BTreeSet<String>,
}

/// What the planner needs besides the edit itself.
pub struct PlanContext<'a> {
    /// The server's position encoding (the `positionEncoding` it negotiated).
    pub encoding: PositionEncoding,
    /// What is at a path now; `None` when nothing is. Asked once per path
    /// at most, and only for paths that pass `writable`.
    pub current: &'a dyn Fn(&Path) -> Option<Entry>,
    /// Whether a path may be changed (created, written, renamed from or to,
    /// deleted): the session roots, e.g. `Confinement::is_writable`.
    pub writable: &'a dyn Fn(&Path) -> bool,
    pub decisions: &'a Decisions,
}

/// One step of a plan. `change` is the index of the change it came from
/// (counted as in [`PlanError::failed_change`]); `annotations` the change
/// annotation ids it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOperation {
    /// Replace the whole text of an existing file (possibly one created or
    /// renamed by an earlier operation of the plan).
    Write {
        path: PathBuf,
        old: String,
        new: String,
        change: usize,
        annotations: Vec<String>,
    },
    /// Create an empty file. `overwrite`: a file is there and is replaced
    /// (its text in `old` when known); otherwise nothing may be there.
    Create {
        path: PathBuf,
        overwrite: bool,
        old: Option<String>,
        change: usize,
        annotations: Vec<String>,
    },
    /// Move a file or directory. `overwrite`: something is at `to` and is
    /// replaced; otherwise nothing may be there.
    Rename {
        from: PathBuf,
        to: PathBuf,
        overwrite: bool,
        change: usize,
        annotations: Vec<String>,
    },
    /// Remove a file, or a directory (with its contents when `recursive`;
    /// an empty one otherwise). `old` is a text file's text, for diffs.
    Delete {
        path: PathBuf,
        recursive: bool,
        directory: bool,
        old: Option<String>,
        change: usize,
        annotations: Vec<String>,
    },
}

impl FileOperation {
    /// The index of the change this operation came from.
    pub fn change(&self) -> usize {
        match self {
            FileOperation::Write { change, .. }
            | FileOperation::Create { change, .. }
            | FileOperation::Rename { change, .. }
            | FileOperation::Delete { change, .. } => *change,
        }
    }

    /// The change annotation ids this operation carries.
    pub(crate) fn annotations(&self) -> &[String] {
        match self {
            FileOperation::Write { annotations, .. }
            | FileOperation::Create { annotations, .. }
            | FileOperation::Rename { annotations, .. }
            | FileOperation::Delete { annotations, .. } => annotations,
        }
    }
}

/// The result of planning: what to do, in order, and what needs a yes first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub operations: Vec<FileOperation>,
    /// Annotations with `needsConfirmation: true` that some planned change
    /// carries, in order of first use. Their changes are in `operations`,
    /// but appliers refuse the plan while any is unconfirmed.
    pub needs_confirmation: Vec<Annotation>,
    /// Every path the planner looked up and what the lookup said, in lookup
    /// order: the state the plan assumes. The disk applier checks it again
    /// before changing anything, so a file changed since planning is not
    /// overwritten with text computed from its old contents.
    pub basis: Vec<(PathBuf, Option<Entry>)>,
    confirmed: BTreeSet<String>,
}

impl Plan {
    /// Records the user's confirmation of these annotation ids.
    pub(crate) fn confirm<I, S>(&mut self, ids: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.confirmed.extend(ids.into_iter().map(Into::into));
    }

    /// Whether applying the plan would change no file: every operation
    /// writes a file's own text back (a rename to the name it already has).
    pub(crate) fn changes_nothing(&self) -> bool {
        self.operations
            .iter()
            .all(|op| matches!(op, FileOperation::Write { old, new, .. } if old == new))
    }

    /// The annotations in `needs_confirmation` not confirmed yet.
    pub(crate) fn unconfirmed(&self) -> Vec<&Annotation> {
        self.needs_confirmation
            .iter()
            .filter(|a| !self.confirmed.contains(&a.id))
            .collect()
    }
}

/// Why an edit cannot be planned; `failed_change` like LSP's
/// `ApplyWorkspaceEditResult.failedChange`: the index of the change, `None`
/// when the edit is malformed outside any one change. A change is one entry
/// of `documentChanges`, or one URI of the `changes` map, counted in the
/// map's iteration order (serde_json's: sorted by URI).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(*.failed_change, .kind))]
pub struct PlanError {
    pub failed_change: Option<usize>,
    pub kind: PlanErrorKind,
}

fn describe(failed_change: Option<usize>, kind: &PlanErrorKind) -> String {
    match failed_change {
        Some(i) => format!("change {i}: {kind}"),
        None => kind.to_string(),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanErrorKind {
    #[error("malformed workspace edit: {0}")]
    Malformed(String),
    #[error("invalid URI {uri:?}: {why}")]
    InvalidUri { uri: String, why: String },
    #[error("{} is outside the writable roots", path.display())]
    NotWritable { path: PathBuf },
    #[error("{} does not exist", path.display())]
    NotFound { path: PathBuf },
    #[error("{} is a directory, not a file", path.display())]
    NotAFile { path: PathBuf },
    #[error("{} is not a readable text file", path.display())]
    NotText { path: PathBuf },
    #[error("{} is at version {actual}, the edit is for version {expected}", path.display())]
    VersionMismatch {
        path: PathBuf,
        expected: i32,
        actual: i32,
    },
    /// Two edits of one change overlap; indices into the change's `edits`.
    #[error("edits {first} and {second} of {} overlap", path.display())]
    Overlap {
        path: PathBuf,
        first: usize,
        second: usize,
    },
    #[error("edit {edit} of {}: {why}", path.display())]
    InvalidRange {
        path: PathBuf,
        edit: usize,
        why: String,
    },
    #[error("{} already exists", path.display())]
    AlreadyExists { path: PathBuf },
    #[error("{}: {why}", path.display())]
    Conflict { path: PathBuf, why: String },
    #[error("cannot rename {} to {}: one contains the other", from.display(), to.display())]
    InvalidRename { from: PathBuf, to: PathBuf },
    #[error("unknown change annotation {id:?}")]
    UnknownAnnotation { id: String },
}

/// Plans `edit` (an LSP `WorkspaceEdit`). `documentChanges`, when present,
/// is used and `changes` ignored, as LSP prefers it.
pub fn plan(edit: &Value, cx: &PlanContext<'_>) -> Result<Plan, PlanError> {
    let obj = edit
        .as_object()
        .ok_or_else(|| top_level("a WorkspaceEdit must be an object"))?;
    let annotations = read_annotations(obj).map_err(|kind| PlanError {
        failed_change: None,
        kind,
    })?;
    let mut planner = Planner {
        cx,
        annotations,
        needs_confirmation: Vec::new(),
        vfs: Vfs {
            base: cx.current,
            log: Vec::new(),
            basis: Vec::new(),
            looked_up: HashMap::new(),
        },
        operations: Vec::new(),
    };
    for (index, change) in changes_of(obj)?.into_iter().enumerate() {
        planner.change(index, change).map_err(|kind| PlanError {
            failed_change: Some(index),
            kind,
        })?;
    }
    Ok(Plan {
        operations: planner.operations,
        needs_confirmation: planner.needs_confirmation,
        basis: planner.vfs.basis,
        confirmed: cx.decisions.confirmed.clone(),
    })
}

/// Every path the edit names (document URIs, create/rename/delete URIs), in
/// order, each once: what a caller must look up before planning when its
/// lookup cannot be lazy (e.g. an async read through ACP).
pub fn touched_paths(edit: &Value) -> Result<Vec<PathBuf>, PlanError> {
    let obj = edit
        .as_object()
        .ok_or_else(|| top_level("a WorkspaceEdit must be an object"))?;
    let mut seen = HashSet::new();
    let mut paths = Vec::new();
    for (index, change) in changes_of(obj)?.into_iter().enumerate() {
        let at = |kind| PlanError {
            failed_change: Some(index),
            kind,
        };
        let uris = match change {
            Change::Text { uri, .. } => vec![uri],
            Change::Create(op) | Change::Delete(op) => vec![req_str(op, "uri").map_err(at)?],
            Change::Rename(op) => vec![
                req_str(op, "oldUri").map_err(at)?,
                req_str(op, "newUri").map_err(at)?,
            ],
        };
        for uri in uris {
            let path = path_of(uri).map_err(at)?;
            if seen.insert(path.clone()) {
                paths.push(path);
            }
        }
    }
    Ok(paths)
}

struct Planner<'a, 'c> {
    cx: &'a PlanContext<'c>,
    annotations: BTreeMap<String, AnnotationInfo>,
    needs_confirmation: Vec<Annotation>,
    vfs: Vfs<'c>,
    operations: Vec<FileOperation>,
}

/// One text edit, resolved to byte offsets of the current text.
struct Resolved<'v> {
    start: usize,
    end: usize,
    new_text: &'v str,
    /// Index in the change's `edits`, for errors and for the order of
    /// insertions at one position.
    index: usize,
}

impl Planner<'_, '_> {
    fn change(&mut self, index: usize, change: Change<'_>) -> Result<(), PlanErrorKind> {
        match change {
            Change::Text {
                uri,
                version,
                edits,
            } => self.text_edit(index, uri, version, edits),
            Change::Create(op) => self.create(index, op),
            Change::Rename(op) => self.rename(index, op),
            Change::Delete(op) => self.delete(index, op),
        }
    }

    /// Whether a change carrying `id` is planned: unknown ids are errors,
    /// declined ones are left out.
    fn admit(&self, id: Option<&str>) -> Result<bool, PlanErrorKind> {
        let Some(id) = id else { return Ok(true) };
        if !self.annotations.contains_key(id) {
            return Err(PlanErrorKind::UnknownAnnotation { id: id.to_string() });
        }
        Ok(!self.cx.decisions.declined.contains(id))
    }

    /// Adds `op` to the plan, listing the annotations it carries that need
    /// confirmation. Only here: a change that turns out to do nothing (an
    /// ignored create, an edit leaving the text as it was) asks nothing.
    fn push(&mut self, op: FileOperation) {
        for id in op.annotations() {
            let Some(info) = self.annotations.get(id) else {
                continue;
            };
            if info.needs_confirmation && !self.needs_confirmation.iter().any(|a| a.id == *id) {
                self.needs_confirmation.push(Annotation {
                    id: id.clone(),
                    label: info.label.clone(),
                    description: info.description.clone(),
                });
            }
        }
        self.operations.push(op);
    }

    fn writable_path(&self, uri: &str) -> Result<PathBuf, PlanErrorKind> {
        let path = path_of(uri)?;
        if (self.cx.writable)(&path) {
            Ok(path)
        } else {
            Err(PlanErrorKind::NotWritable { path })
        }
    }

    fn text_edit(
        &mut self,
        change: usize,
        uri: &str,
        version: Option<i32>,
        edits: &[Value],
    ) -> Result<(), PlanErrorKind> {
        let path = self.writable_path(uri)?;
        let current = match self.vfs.get(&path) {
            Some(Entry::File(current)) => current,
            Some(Entry::Directory) => return Err(PlanErrorKind::NotAFile { path }),
            Some(Entry::Opaque) => return Err(PlanErrorKind::NotText { path }),
            None => return Err(PlanErrorKind::NotFound { path }),
        };
        if let (Some(expected), Some(actual)) = (version, current.version) {
            if expected != actual {
                return Err(PlanErrorKind::VersionMismatch {
                    path,
                    expected,
                    actual,
                });
            }
        }
        let text = current.text;
        let lines = LineIndex::new(&text);
        let mut resolved = Vec::with_capacity(edits.len());
        let mut annotations: Vec<String> = Vec::new();
        for (index, edit) in edits.iter().enumerate() {
            let edit = edit
                .as_object()
                .ok_or_else(|| malformed("a text edit must be an object"))?;
            let id = opt_str(edit, "annotationId")?;
            if !self.admit(id)? {
                continue;
            }
            if let Some(id) = id {
                if !annotations.iter().any(|a| a == id) {
                    annotations.push(id.to_string());
                }
            }
            let new_text = req_str(edit, "newText")?;
            let range = edit
                .get("range")
                .and_then(Value::as_object)
                .ok_or_else(|| malformed("a text edit needs a `range` object"))?;
            let offset = |key: &str| -> Result<usize, PlanErrorKind> {
                let (line, character) = position(range, key)?;
                lines
                    .offset(&text, line, character, self.cx.encoding)
                    .map_err(
                        |PositionError::InsideCharacter { .. }| PlanErrorKind::InvalidRange {
                            path: path.clone(),
                            edit: index,
                            why: format!(
                                "{key} {line}:{character} falls inside a character in {}",
                                self.cx.encoding.as_lsp()
                            ),
                        },
                    )
            };
            let (start, end) = (offset("start")?, offset("end")?);
            if start > end {
                return Err(PlanErrorKind::InvalidRange {
                    path,
                    edit: index,
                    why: "the range ends before it starts".to_string(),
                });
            }
            resolved.push(Resolved {
                start,
                end,
                new_text,
                index,
            });
        }
        // Insertions at a position go before a replacement starting there
        // (they are before the replaced text), and among themselves keep the
        // order of the array, as LSP requires: a stable sort by (start, end).
        resolved.sort_by_key(|e| (e.start, e.end));
        for pair in resolved.windows(2) {
            if pair[1].start < pair[0].end {
                return Err(PlanErrorKind::Overlap {
                    path,
                    first: pair[0].index.min(pair[1].index),
                    second: pair[0].index.max(pair[1].index),
                });
            }
        }
        let mut new = String::with_capacity(text.len());
        let mut cursor = 0;
        for e in &resolved {
            new.push_str(&text[cursor..e.start]);
            new.push_str(e.new_text);
            cursor = e.end;
        }
        new.push_str(&text[cursor..]);
        if new == text {
            return Ok(());
        }
        self.vfs.set(path.clone(), Entry::text(new.clone()));
        self.push(FileOperation::Write {
            path,
            old: text,
            new,
            change,
            annotations,
        });
        Ok(())
    }

    /// The annotation id of a resource operation, if it is to be planned.
    fn admit_op(&self, op: &Map<String, Value>) -> Result<Option<Vec<String>>, PlanErrorKind> {
        let id = opt_str(op, "annotationId")?;
        Ok(self
            .admit(id)?
            .then(|| id.map(str::to_string).into_iter().collect()))
    }

    fn create(&mut self, change: usize, op: &Map<String, Value>) -> Result<(), PlanErrorKind> {
        let Some(annotations) = self.admit_op(op)? else {
            return Ok(());
        };
        let path = self.writable_path(req_str(op, "uri")?)?;
        // LSP: "Overwrite wins over `ignoreIfExists`".
        let overwrite = option(op, "overwrite")?;
        let ignore_if_exists = option(op, "ignoreIfExists")?;
        let old = match self.vfs.get(&path) {
            None => None,
            Some(_) if ignore_if_exists && !overwrite => return Ok(()),
            Some(Entry::Directory) if overwrite => {
                return Err(PlanErrorKind::Conflict {
                    path,
                    why: "a directory is there; creating a file would not replace it".into(),
                })
            }
            Some(_) if !overwrite => return Err(PlanErrorKind::AlreadyExists { path }),
            Some(Entry::File(current)) => Some(Some(current.text)),
            Some(_) => Some(None),
        };
        self.vfs.set(path.clone(), Entry::text(""));
        self.push(FileOperation::Create {
            path,
            overwrite: old.is_some(),
            old: old.flatten(),
            change,
            annotations,
        });
        Ok(())
    }

    fn rename(&mut self, change: usize, op: &Map<String, Value>) -> Result<(), PlanErrorKind> {
        let Some(annotations) = self.admit_op(op)? else {
            return Ok(());
        };
        let from = self.writable_path(req_str(op, "oldUri")?)?;
        let to = self.writable_path(req_str(op, "newUri")?)?;
        let overwrite = option(op, "overwrite")?;
        let ignore_if_exists = option(op, "ignoreIfExists")?;
        let Some(source) = self.vfs.get(&from) else {
            return Err(PlanErrorKind::NotFound { path: from });
        };
        if from == to {
            return Ok(());
        }
        if to.starts_with(&from) || from.starts_with(&to) {
            return Err(PlanErrorKind::InvalidRename { from, to });
        }
        let target = self.vfs.get(&to);
        if let Some(target) = &target {
            if ignore_if_exists && !overwrite {
                return Ok(());
            }
            if !overwrite {
                return Err(PlanErrorKind::AlreadyExists { path: to });
            }
            // rename(2) replaces a file with a file and a directory with a
            // directory; the other pairings fail on disk, so fail them here.
            let source_is_dir = source == Entry::Directory;
            let target_is_dir = *target == Entry::Directory;
            if source_is_dir != target_is_dir {
                return Err(PlanErrorKind::Conflict {
                    path: to,
                    why: if target_is_dir {
                        "cannot replace a directory with a file".into()
                    } else {
                        "cannot replace a file with a directory".into()
                    },
                });
            }
        }
        self.vfs.log.push(Layer::Move {
            from: from.clone(),
            to: to.clone(),
        });
        self.push(FileOperation::Rename {
            from,
            to,
            overwrite: target.is_some(),
            change,
            annotations,
        });
        Ok(())
    }

    fn delete(&mut self, change: usize, op: &Map<String, Value>) -> Result<(), PlanErrorKind> {
        let Some(annotations) = self.admit_op(op)? else {
            return Ok(());
        };
        let path = self.writable_path(req_str(op, "uri")?)?;
        let recursive = option(op, "recursive")?;
        let ignore_if_not_exists = option(op, "ignoreIfNotExists")?;
        let entry = match self.vfs.get(&path) {
            Some(entry) => entry,
            None if ignore_if_not_exists => return Ok(()),
            None => return Err(PlanErrorKind::NotFound { path }),
        };
        self.vfs.log.push(Layer::Remove(path.clone()));
        self.push(FileOperation::Delete {
            path,
            recursive,
            directory: entry == Entry::Directory,
            old: match entry {
                Entry::File(current) => Some(current.text),
                _ => None,
            },
            change,
            annotations,
        });
        Ok(())
    }
}

/// `range[key]` as `(line, character)`.
fn position(range: &Map<String, Value>, key: &str) -> Result<(u64, u64), PlanErrorKind> {
    let p = range
        .get(key)
        .and_then(Value::as_object)
        .ok_or_else(|| malformed(&format!("`range.{key}` must be a position object")))?;
    let number = |field: &str| {
        p.get(field).and_then(Value::as_u64).ok_or_else(|| {
            malformed(&format!(
                "`range.{key}.{field}` must be a non-negative integer"
            ))
        })
    };
    Ok((number("line")?, number("character")?))
}

#[cfg(test)]
mod tests;
