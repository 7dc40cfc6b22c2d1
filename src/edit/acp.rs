//! Applying a `WorkspaceEdit` from the agent's side, through the ACP client's
//! `fs/read_text_file` and `fs/write_text_file`.
//!
//! An agent that gets a `WorkspaceEdit` back from `lsp/request` (a rename, a
//! code action) should write it through the editor, so open buffers follow
//! and the editor's review applies. ACP's file methods read and write whole
//! text files and nothing else, so of LSP's resource operations only
//! `CreateFile` can be expressed (a write of the new file's text).
//! `RenameFile` and `DeleteFile` cannot: there is no way to remove a file
//! through ACP, and a rename done as write-new-plus-keep-old would leave a
//! stale copy that still compiles. An edit containing either is refused with
//! [`AgentApplyError::Unsupported`] before anything is written (the files
//! are read first: only the plan tells whether e.g. a delete with
//! `ignoreIfNotExists` is a no-op); [`super::apply::apply_to_disk`] supports
//! them.
//!
//! ACP writes are one request per file, so unlike the disk applier this one
//! cannot be atomic across files. When a write fails, the files already
//! written get their old text back (best effort); files it created cannot be
//! removed and are named in the report.

use super::apply::ApplyReport;
use super::plan::{
    plan, touched_paths, Annotation, Decisions, Entry, FileOperation, PlanContext, PlanError,
};
use super::position::PositionEncoding;
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};

/// The two ACP client methods the helper needs, so it works over any ACP SDK
/// connection (or a test double). Paths are absolute, as ACP requires.
pub trait AgentFs {
    /// `fs/read_text_file` of the whole file.
    fn read_text_file(
        &self,
        path: &Path,
    ) -> impl Future<Output = Result<String, AgentFsError>> + Send;

    /// `fs/write_text_file`: creates the file or replaces its text.
    fn write_text_file(
        &self,
        path: &Path,
        content: &str,
    ) -> impl Future<Output = Result<(), AgentFsError>> + Send;
}

/// A failed `fs/*` call. Implementations map the client's "resource not
/// found" answer (JSON-RPC -32002 in ACP) to `NotFound`: the helper needs it
/// to tell a file that does not exist yet from one it cannot read.
#[derive(Debug, thiserror::Error)]
pub enum AgentFsError {
    #[error("file not found")]
    NotFound,
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

#[derive(Debug, thiserror::Error)]
pub enum AgentApplyError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The edit renames or deletes a file (change `failed_change`), which
    /// ACP's file methods cannot do; nothing was written.
    #[error(
        "change {failed_change}: ACP's fs methods cannot {operation} a file; \
         the edit must be applied some other way"
    )]
    Unsupported {
        failed_change: usize,
        operation: &'static str,
    },
    /// Some change annotation needing confirmation was not confirmed;
    /// nothing was written.
    #[error("the edit needs confirmation of: {}", ids_of(annotations))]
    Unconfirmed { annotations: Vec<Annotation> },
    /// A file could not be read; nothing was written.
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: AgentFsError,
    },
    /// A write failed. `report` names what is still in effect after the
    /// files already written were given their old text back.
    #[error(
        "writing {}: {source} ({})",
        path.display(),
        if report.rolled_back { "earlier writes restored" } else { "earlier writes partly remain" }
    )]
    Write {
        path: PathBuf,
        #[source]
        source: AgentFsError,
        report: Box<ApplyReport>,
    },
}

fn ids_of(annotations: &[Annotation]) -> String {
    annotations
        .iter()
        .map(|a| a.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One file's outcome: its text before (`None`: it did not exist) and after.
struct FileWrite {
    path: PathBuf,
    old: Option<String>,
    new: String,
}

/// Reads every file `edit` touches through `fs`, plans the edit, and writes
/// each changed file once with its final text. Paths `writable` refuses are
/// never read; the plan then fails on them. `decisions` carries the user's
/// answers to change annotations: the edit is refused while one that needs
/// confirmation is neither confirmed nor declined.
pub async fn apply_with_agent_fs<F, W>(
    edit: &serde_json::Value,
    fs: &F,
    encoding: PositionEncoding,
    writable: W,
    decisions: &Decisions,
) -> Result<ApplyReport, AgentApplyError>
where
    F: AgentFs + Sync,
    W: Fn(&Path) -> bool + Send + Sync,
{
    let mut known: HashMap<PathBuf, Entry> = HashMap::new();
    for path in touched_paths(edit)? {
        if !writable(&path) {
            continue;
        }
        match fs.read_text_file(&path).await {
            Ok(text) => {
                known.insert(path, Entry::text(text));
            }
            Err(AgentFsError::NotFound) => {}
            Err(source) => return Err(AgentApplyError::Read { path, source }),
        }
    }
    let writes = {
        let current = |path: &Path| known.get(path).cloned();
        let plan = plan(
            edit,
            &PlanContext {
                encoding,
                current: &current,
                writable: &writable,
                decisions,
            },
        )?;
        for op in &plan.operations {
            let operation = match op {
                FileOperation::Rename { .. } => "rename",
                FileOperation::Delete { .. } => "delete",
                FileOperation::Write { .. } | FileOperation::Create { .. } => continue,
            };
            return Err(AgentApplyError::Unsupported {
                failed_change: op.change(),
                operation,
            });
        }
        let unconfirmed = plan.unconfirmed();
        if !unconfirmed.is_empty() {
            return Err(AgentApplyError::Unconfirmed {
                annotations: unconfirmed.into_iter().cloned().collect(),
            });
        }
        final_texts(plan.operations)
    };
    let mut report = ApplyReport::default();
    let mut done: Vec<&FileWrite> = Vec::new();
    for write in &writes {
        if let Err(source) = fs.write_text_file(&write.path, &write.new).await {
            let report = restore(fs, &done).await;
            return Err(AgentApplyError::Write {
                path: write.path.clone(),
                source,
                report: Box::new(report),
            });
        }
        done.push(write);
        match write.old {
            Some(_) => report.written.push(write.path.clone()),
            None => report.created.push(write.path.clone()),
        }
    }
    Ok(report)
}

/// Collapses a plan without renames or deletes into one write per file (its
/// final text), in order of first appearance: ACP has no atomic multi-file
/// write, so fewer writes mean fewer half-applied states.
fn final_texts(operations: Vec<FileOperation>) -> Vec<FileWrite> {
    let mut writes: Vec<FileWrite> = Vec::new();
    for op in operations {
        let (path, old, new) = match op {
            FileOperation::Write { path, old, new, .. } => (path, Some(old), new),
            FileOperation::Create { path, old, .. } => (path, old, String::new()),
            FileOperation::Rename { .. } | FileOperation::Delete { .. } => continue,
        };
        match writes.iter_mut().find(|w| w.path == path) {
            Some(w) => w.new = new,
            None => writes.push(FileWrite { path, old, new }),
        }
    }
    // A file created empty and never edited still needs its write; one
    // whose final text equals its old text does not.
    writes.retain(|w| w.old.as_deref() != Some(w.new.as_str()));
    writes
}

/// Gives the files in `done` their old text back, newest first; reports what
/// could not be undone (created files, failed restores).
async fn restore<F: AgentFs + Sync>(fs: &F, done: &[&FileWrite]) -> ApplyReport {
    let mut report = ApplyReport::default();
    for write in done.iter().rev() {
        match &write.old {
            Some(old) => {
                if let Err(e) = fs.write_text_file(&write.path, old).await {
                    tracing::warn!(path = %write.path.display(), error = %e, "restoring a file failed");
                    report.written.push(write.path.clone());
                }
            }
            None => report.created.push(write.path.clone()),
        }
    }
    report.written.reverse();
    report.created.reverse();
    report.rolled_back = report.written.is_empty() && report.created.is_empty();
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_paths::{os_pathbuf, os_uri};
    use serde_json::{json, Value};
    use std::sync::Mutex;

    /// An in-memory client: files by path, a log of writes, and an optional
    /// path whose writes fail.
    #[derive(Default)]
    struct FakeFs {
        files: Mutex<HashMap<PathBuf, String>>,
        writes: Mutex<Vec<PathBuf>>,
        reads: Mutex<Vec<PathBuf>>,
        fail_write: Option<PathBuf>,
    }

    impl FakeFs {
        fn with(files: &[(&str, &str)]) -> FakeFs {
            FakeFs {
                files: Mutex::new(
                    files
                        .iter()
                        .map(|(p, t)| (os_pathbuf(p), t.to_string()))
                        .collect(),
                ),
                ..FakeFs::default()
            }
        }
        fn get(&self, path: &str) -> Option<String> {
            self.files
                .lock()
                .expect("lock")
                .get(&os_pathbuf(path))
                .cloned()
        }
    }

    impl AgentFs for FakeFs {
        fn read_text_file(
            &self,
            path: &Path,
        ) -> impl Future<Output = Result<String, AgentFsError>> + Send {
            self.reads.lock().expect("lock").push(path.to_path_buf());
            let found = self.files.lock().expect("lock").get(path).cloned();
            async move { found.ok_or(AgentFsError::NotFound) }
        }

        fn write_text_file(
            &self,
            path: &Path,
            content: &str,
        ) -> impl Future<Output = Result<(), AgentFsError>> + Send {
            let result = if self.fail_write.as_deref() == Some(path) {
                Err(AgentFsError::Other("disk full".into()))
            } else {
                self.writes.lock().expect("lock").push(path.to_path_buf());
                self.files
                    .lock()
                    .expect("lock")
                    .insert(path.to_path_buf(), content.to_string());
                Ok(())
            };
            async move { result }
        }
    }

    fn in_ws(path: &Path) -> bool {
        path.starts_with(os_pathbuf("/ws"))
    }

    fn insert(text: &str) -> Value {
        json!({"range": {"start": {"line": 0, "character": 0},
                         "end": {"line": 0, "character": 0}}, "newText": text})
    }

    async fn apply(edit: Value, fs: &FakeFs) -> Result<ApplyReport, AgentApplyError> {
        apply_with_agent_fs(
            &edit,
            fs,
            PositionEncoding::Utf16,
            in_ws,
            &Decisions::default(),
        )
        .await
    }

    #[tokio::test]
    async fn edits_and_creates_are_written_once_per_file() {
        let fs = FakeFs::with(&[("/ws/a.rs", "a")]);
        let report = apply(
            json!({"documentChanges": [
                {"textDocument": {"uri": os_uri("/ws/a.rs"), "version": null}, "edits": [insert("1")]},
                {"kind": "create", "uri": os_uri("/ws/n.rs")},
                {"textDocument": {"uri": os_uri("/ws/n.rs"), "version": null}, "edits": [insert("new")]},
                {"textDocument": {"uri": os_uri("/ws/a.rs"), "version": null}, "edits": [insert("2")]},
            ]}),
            &fs,
        )
        .await
        .expect("apply");
        assert_eq!(report.written, vec![os_pathbuf("/ws/a.rs")]);
        assert_eq!(report.created, vec![os_pathbuf("/ws/n.rs")]);
        assert_eq!(fs.get("/ws/a.rs").as_deref(), Some("21a"));
        assert_eq!(fs.get("/ws/n.rs").as_deref(), Some("new"));
        assert_eq!(
            *fs.writes.lock().expect("lock"),
            vec![os_pathbuf("/ws/a.rs"), os_pathbuf("/ws/n.rs")]
        );
    }

    #[tokio::test]
    async fn rename_and_delete_are_unsupported_and_nothing_is_written() {
        let fs = FakeFs::with(&[("/ws/a.rs", "a"), ("/ws/b.rs", "b")]);
        let e = apply(
            json!({"documentChanges": [
                {"textDocument": {"uri": os_uri("/ws/a.rs"), "version": null}, "edits": [insert("1")]},
                {"kind": "rename", "oldUri": os_uri("/ws/b.rs"), "newUri": os_uri("/ws/c.rs")},
            ]}),
            &fs,
        )
        .await
        .expect_err("rename");
        assert!(
            matches!(
                e,
                AgentApplyError::Unsupported {
                    failed_change: 1,
                    operation: "rename"
                }
            ),
            "{e}"
        );
        let e = apply(
            json!({"documentChanges": [{"kind": "delete", "uri": os_uri("/ws/b.rs")}]}),
            &fs,
        )
        .await
        .expect_err("delete");
        assert!(
            matches!(
                e,
                AgentApplyError::Unsupported {
                    operation: "delete",
                    ..
                }
            ),
            "{e}"
        );
        // A delete skipped by ignoreIfNotExists is no operation at all.
        apply(
            json!({"documentChanges": [{"kind": "delete", "uri": os_uri("/ws/zz"), "options": {"ignoreIfNotExists": true}}]}),
            &fs,
        )
        .await
        .expect("nothing to do");
        assert!(fs.writes.lock().expect("lock").is_empty());
        assert_eq!(fs.get("/ws/a.rs").as_deref(), Some("a"));
    }

    #[tokio::test]
    async fn a_failed_write_restores_earlier_ones() {
        let mut fs = FakeFs::with(&[("/ws/a.rs", "a"), ("/ws/b.rs", "b")]);
        fs.fail_write = Some(os_pathbuf("/ws/b.rs"));
        let e = apply(
            json!({"documentChanges": [
                {"textDocument": {"uri": os_uri("/ws/a.rs"), "version": null}, "edits": [insert("1")]},
                {"kind": "create", "uri": os_uri("/ws/n.rs")},
                {"textDocument": {"uri": os_uri("/ws/b.rs"), "version": null}, "edits": [insert("2")]},
            ]}),
            &fs,
        )
        .await
        .expect_err("write fails");
        let AgentApplyError::Write { path, report, .. } = e else {
            panic!("expected a write error: {e}");
        };
        assert_eq!(path, os_pathbuf("/ws/b.rs"));
        assert_eq!(fs.get("/ws/a.rs").as_deref(), Some("a"));
        // The created file cannot be removed through ACP: it is reported.
        assert!(!report.rolled_back);
        assert_eq!(report.created, vec![os_pathbuf("/ws/n.rs")]);
        assert!(report.written.is_empty());
    }

    #[tokio::test]
    async fn outside_paths_are_neither_read_nor_written() {
        let fs = FakeFs::with(&[("/etc/passwd", "root")]);
        let e = apply(
            json!({"changes": {os_uri("/etc/passwd"): [insert("x")]}}),
            &fs,
        )
        .await
        .expect_err("outside");
        assert!(matches!(e, AgentApplyError::Plan(_)), "{e}");
        assert!(fs.reads.lock().expect("lock").is_empty());
        assert_eq!(fs.get("/etc/passwd").as_deref(), Some("root"));
    }

    #[tokio::test]
    async fn needs_confirmation_blocks_until_confirmed() {
        let fs = FakeFs::with(&[("/ws/a.rs", "a")]);
        let edit = json!({
            "changeAnnotations": {"x": {"label": "Risky", "needsConfirmation": true}},
            "changes": {os_uri("/ws/a.rs"): [{"range": {"start": {"line": 0, "character": 0},
                "end": {"line": 0, "character": 0}}, "newText": "1", "annotationId": "x"}]}
        });
        let e = apply(edit.clone(), &fs).await.expect_err("unconfirmed");
        assert!(
            matches!(&e, AgentApplyError::Unconfirmed { annotations } if annotations[0].id == "x"),
            "{e}"
        );
        assert_eq!(fs.get("/ws/a.rs").as_deref(), Some("a"));
        let decisions = Decisions {
            confirmed: ["x".to_string()].into(),
            ..Decisions::default()
        };
        apply_with_agent_fs(&edit, &fs, PositionEncoding::Utf16, in_ws, &decisions)
            .await
            .expect("confirmed");
        assert_eq!(fs.get("/ws/a.rs").as_deref(), Some("1a"));
    }

    #[test]
    fn the_future_is_send() {
        fn assert_send<T: Send>(_: &T) {}
        let fs = FakeFs::default();
        let edit = json!({});
        let decisions = Decisions::default();
        let future = apply_with_agent_fs(&edit, &fs, PositionEncoding::Utf8, in_ws, &decisions);
        assert_send(&future);
    }
}
