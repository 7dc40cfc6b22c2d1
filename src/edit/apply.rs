//! Carrying out a [`Plan`] on disk, all-or-nothing where the OS allows, and
//! rendering a plan as a unified diff for a dry run.
//!
//! Disk application runs in three phases so that a failure leaves the tree as
//! it was:
//!
//! 1. check: every path in the plan's `basis` still holds what the planner
//!    was told (a file changed since planning is not overwritten with text
//!    computed from its old contents);
//! 2. stage: every new file content is written to a temporary file and
//!    fsynced, before anything visible changes (a full disk fails here);
//! 3. commit: operations run in order, each one a `rename(2)` (atomic per
//!    file), and each keeps what it replaced under a backup name in the same
//!    directory: a hard link to the replaced file, or the deleted file or
//!    directory moved aside. When a step fails, the steps already done are
//!    undone in reverse from those backups; when all succeed the backups are
//!    removed.
//!
//! A replaced file keeps its permission bits and, where the process may set
//! them, its owner and group (a new inode would otherwise get the umask's
//! bits and the caller's owner). Other metadata (ACLs, xattrs) is not copied.
//! A write to a symlink writes the file it points to, so the link survives.
//! Temporary files are staged in the nearest existing ancestor directory that
//! no rename or delete of the plan moves; a rename across file systems then
//! fails at commit and is rolled back.

use super::plan::{plan, Decisions, Entry, FileOperation, Plan, PlanContext, PlanError};
use super::position::PositionEncoding;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a disk application did. On success `rolled_back` is false and the
/// lists name every change made. After a failure (inside
/// [`ApplyError::Commit`]) `rolled_back` says whether every committed step
/// was undone; the lists then name the changes still in effect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyReport {
    /// Files whose text was replaced, each once, in order of first write.
    pub written: Vec<PathBuf>,
    pub created: Vec<PathBuf>,
    pub renamed: Vec<(PathBuf, PathBuf)>,
    pub deleted: Vec<PathBuf>,
    pub rolled_back: bool,
    /// Temporary or backup files that could not be removed. After an
    /// incomplete rollback these hold the only copy of replaced originals.
    pub leftovers: Vec<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Some change annotation needing confirmation is not confirmed; nothing
    /// was done.
    #[error("the edit needs confirmation of: {}", ids.join(", "))]
    Unconfirmed { ids: Vec<String> },
    /// A path no longer holds what the plan was made from; nothing was done.
    #[error("{} changed since the edit was planned", path.display())]
    Stale { path: PathBuf },
    /// A new file content could not be staged; nothing was done.
    #[error("staging the new text of {}: {source}", path.display())]
    Stage {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Operation `operation` (index into the plan's operations) failed; the
    /// report says whether the earlier ones were undone.
    #[error(
        "operation {operation} on {} failed: {source} ({})",
        path.display(),
        if report.rolled_back { "all changes rolled back" } else { "rollback incomplete" }
    )]
    Commit {
        operation: usize,
        path: PathBuf,
        #[source]
        source: io::Error,
        report: Box<ApplyReport>,
    },
}

/// What is at `path` on disk, as the planner's lookup wants it. Files that
/// are not UTF-8 or not readable are `Opaque`; a path below a regular file
/// is absent.
pub fn disk_entry(path: &Path) -> Option<Entry> {
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if is_absent(&e) => {
            // A dangling symlink is still something a create would replace.
            return fs::symlink_metadata(path).ok().map(|_| Entry::Opaque);
        }
        // Something is in the way that cannot be inspected: refusing to
        // edit it is safe, pretending it is absent is not.
        Err(_) => return Some(Entry::Opaque),
    };
    if meta.is_dir() {
        return Some(Entry::Directory);
    }
    if !meta.is_file() {
        // A FIFO or device: reading it could block or never end.
        return Some(Entry::Opaque);
    }
    match fs::read_to_string(path) {
        Ok(text) => Some(Entry::text(text)),
        Err(_) => Some(Entry::Opaque),
    }
}

fn is_absent(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// Plans `edit` against the files on disk ([`disk_entry`] as the lookup).
pub fn plan_on_disk(
    edit: &serde_json::Value,
    encoding: PositionEncoding,
    writable: &dyn Fn(&Path) -> bool,
    decisions: &Decisions,
) -> Result<Plan, PlanError> {
    plan(
        edit,
        &PlanContext {
            encoding,
            current: &disk_entry,
            writable,
            decisions,
        },
    )
}

/// Carries out `plan` on disk; see the module documentation for the phases
/// and guarantees.
pub fn apply_to_disk(plan: &Plan) -> Result<ApplyReport, ApplyError> {
    let unconfirmed = plan.unconfirmed();
    if !unconfirmed.is_empty() {
        return Err(ApplyError::Unconfirmed {
            ids: unconfirmed.iter().map(|a| a.id.clone()).collect(),
        });
    }
    for (path, expected) in &plan.basis {
        if !same_state(disk_entry(path).as_ref(), expected.as_ref()) {
            return Err(ApplyError::Stale { path: path.clone() });
        }
    }
    let moved: Vec<&Path> = plan
        .operations
        .iter()
        .flat_map(|op| match op {
            FileOperation::Rename { from, to, .. } => vec![from.as_path(), to.as_path()],
            FileOperation::Delete { path, .. } => vec![path.as_path()],
            _ => vec![],
        })
        .collect();
    let mut tx = Transaction::default();
    let mut staged = Vec::with_capacity(plan.operations.len());
    for op in &plan.operations {
        let content = match op {
            FileOperation::Write { path, new, .. } => Some((path, new.as_str())),
            FileOperation::Create { path, .. } => Some((path, "")),
            _ => None,
        };
        let temp = match content {
            Some((path, text)) => match stage(path, text, &moved) {
                Ok(temp) => {
                    tx.temps.push(temp.clone());
                    Some(temp)
                }
                Err(source) => {
                    tx.discard_temps();
                    return Err(ApplyError::Stage {
                        path: path.clone(),
                        source,
                    });
                }
            },
            None => None,
        };
        staged.push(temp);
    }
    for (index, (op, temp)) in plan.operations.iter().zip(staged).enumerate() {
        if let Err((path, source)) = tx.commit(op, temp) {
            let report = tx.rollback();
            return Err(ApplyError::Commit {
                operation: index,
                path,
                source,
                report: Box::new(report),
            });
        }
    }
    Ok(tx.finish())
}

/// Whether the disk still matches what the planner was told. Versions are
/// not compared: the disk has none.
fn same_state(disk: Option<&Entry>, planned: Option<&Entry>) -> bool {
    match (disk, planned) {
        (None, None) => true,
        (Some(Entry::File(a)), Some(Entry::File(b))) => a.text == b.text,
        (Some(Entry::Opaque), Some(Entry::Opaque)) => true,
        (Some(Entry::Directory), Some(Entry::Directory)) => true,
        _ => false,
    }
}

/// Process-wide, so concurrent applications never pick the same names.
static NAME_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A hidden sibling name for `path`: `.<name>.acp-lsp-<pid>-<n>.<suffix>`.
/// The name part is cut short so the result stays under NAME_MAX.
fn sibling_name(path: &Path, suffix: &str) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or("file".into());
    let mut cut = String::new();
    for c in name.chars() {
        if cut.len() + c.len_utf8() > 64 {
            break;
        }
        cut.push(c);
    }
    let mut file = OsString::from(".");
    file.push(cut);
    file.push(format!(
        ".acp-lsp-{}-{}.{suffix}",
        std::process::id(),
        NAME_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    dir.join(file)
}

/// The directory to stage `target`'s new text in: its nearest existing
/// ancestor that no rename or delete of the plan moves (a staged file there
/// would move with it).
fn staging_dir(target: &Path, moved: &[&Path]) -> PathBuf {
    for dir in target.ancestors().skip(1) {
        if moved.iter().any(|m| dir.starts_with(m)) {
            continue;
        }
        if fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
            return dir.to_path_buf();
        }
    }
    PathBuf::from("/")
}

/// Writes `text` to a new temporary file for `target` and fsyncs it.
fn stage(target: &Path, text: &str, moved: &[&Path]) -> io::Result<PathBuf> {
    let dir = staging_dir(target, moved);
    let name = target.file_name().map(PathBuf::from).unwrap_or_default();
    loop {
        let temp = sibling_name(&dir.join(&name), "tmp");
        let mut file = match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        let written = file
            .write_all(text.as_bytes())
            .and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = fs::remove_file(&temp);
            return Err(e);
        }
        return Ok(temp);
    }
}

/// How to undo one committed step.
enum Undo {
    /// `rename(backup, target)`: puts the replaced original back.
    Restore { backup: PathBuf, target: PathBuf },
    /// Removes a file the step created.
    RemoveFile(PathBuf),
    /// Removes a directory the step created (empty again by then).
    RemoveDir(PathBuf),
    /// `rename(from, to)`: moves a renamed or deleted path back.
    MoveBack { from: PathBuf, to: PathBuf },
}

impl Undo {
    fn run(&self) -> io::Result<()> {
        match self {
            Undo::Restore { backup, target } => fs::rename(backup, target),
            Undo::RemoveFile(path) => fs::remove_file(path),
            Undo::RemoveDir(path) => fs::remove_dir(path),
            Undo::MoveBack { from, to } => fs::rename(from, to),
        }
    }
}

/// What a committed step changed, for the report.
enum Done {
    Written(PathBuf),
    Created(PathBuf),
    Renamed(PathBuf, PathBuf),
    Deleted(PathBuf),
}

/// One committed operation: what it did (`None` for a step that failed
/// halfway) and how to take it back.
struct Step {
    done: Option<Done>,
    undo: Vec<Undo>,
}

#[derive(Default)]
struct Transaction {
    /// Staged files not yet renamed into place.
    temps: Vec<PathBuf>,
    /// Backups to remove once the outcome is settled.
    backups: Vec<PathBuf>,
    steps: Vec<Step>,
    /// Directories whose entries changed, fsynced at the end.
    dirs: Vec<PathBuf>,
}

type StepError = (PathBuf, io::Error);

impl Transaction {
    fn commit(&mut self, op: &FileOperation, temp: Option<PathBuf>) -> Result<(), StepError> {
        let mut undo = Vec::new();
        match self.commit_into(op, temp, &mut undo) {
            Ok(done) => {
                self.steps.push(Step {
                    done: Some(done),
                    undo,
                });
                Ok(())
            }
            Err(e) => {
                // A step that failed halfway may still have done something
                // (created parent directories, moved a target aside): keep
                // its undo list so the rollback covers it.
                if !undo.is_empty() {
                    self.steps.push(Step { done: None, undo });
                }
                Err(e)
            }
        }
    }

    fn commit_into(
        &mut self,
        op: &FileOperation,
        temp: Option<PathBuf>,
        undo: &mut Vec<Undo>,
    ) -> Result<Done, StepError> {
        let staged = || {
            temp.clone()
                .ok_or_else(|| io::Error::other("BUG: no staged file for a write"))
        };
        match op {
            FileOperation::Write { path, .. } => {
                let at = |e| (path.clone(), e);
                let target = follow_symlink(path).map_err(at)?;
                self.replace_file(&staged().map_err(at)?, &target, undo)
                    .map_err(at)?;
                Ok(Done::Written(path.clone()))
            }
            FileOperation::Create {
                path, overwrite, ..
            } => {
                let at = |e| (path.clone(), e);
                let temp = staged().map_err(at)?;
                match fs::symlink_metadata(path) {
                    Ok(_) if *overwrite => {
                        let target = follow_symlink(path).map_err(at)?;
                        self.replace_file(&temp, &target, undo).map_err(at)?;
                    }
                    Ok(_) => return Err(at(already_exists(path))),
                    Err(e) if is_absent(&e) => {
                        self.create_parents(path, undo).map_err(at)?;
                        fs::rename(&temp, path).map_err(at)?;
                        self.committed_temp(&temp, path);
                        undo.push(Undo::RemoveFile(path.clone()));
                    }
                    Err(e) => return Err(at(e)),
                }
                Ok(Done::Created(path.clone()))
            }
            FileOperation::Rename {
                from,
                to,
                overwrite,
                ..
            } => {
                let at = |e| (to.clone(), e);
                fs::symlink_metadata(from).map_err(|e| (from.clone(), e))?;
                match fs::symlink_metadata(to) {
                    Ok(_) if !*overwrite => return Err(at(already_exists(to))),
                    Ok(meta) => {
                        let backup = if meta.is_dir() {
                            // rename(2) replaces only an empty directory.
                            self.move_aside(to).map_err(at)?
                        } else {
                            self.link_backup(to).map_err(at)?
                        };
                        undo.push(Undo::Restore {
                            backup,
                            target: to.clone(),
                        });
                    }
                    Err(e) if is_absent(&e) => self.create_parents(to, undo).map_err(at)?,
                    Err(e) => return Err(at(e)),
                }
                fs::rename(from, to).map_err(at)?;
                undo.push(Undo::MoveBack {
                    from: to.clone(),
                    to: from.clone(),
                });
                self.note_dir(from);
                self.note_dir(to);
                Ok(Done::Renamed(from.clone(), to.clone()))
            }
            FileOperation::Delete {
                path, recursive, ..
            } => {
                let at = |e| (path.clone(), e);
                let meta = fs::symlink_metadata(path).map_err(at)?;
                if meta.is_dir() && !recursive && fs::read_dir(path).map_err(at)?.next().is_some() {
                    return Err(at(io::Error::new(
                        io::ErrorKind::DirectoryNotEmpty,
                        "the directory is not empty and the delete is not recursive",
                    )));
                }
                // Moving aside instead of removing keeps the delete undoable;
                // the backup is removed once every step has succeeded.
                let backup = self.move_aside(path).map_err(at)?;
                undo.push(Undo::MoveBack {
                    from: backup,
                    to: path.clone(),
                });
                Ok(Done::Deleted(path.clone()))
            }
        }
    }

    /// Renames staged `temp` over the existing file `target`, with the
    /// original's permissions and owner, keeping a backup of the original.
    fn replace_file(&mut self, temp: &Path, target: &Path, undo: &mut Vec<Undo>) -> io::Result<()> {
        let meta = fs::metadata(target)?;
        if !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        fs::set_permissions(temp, meta.permissions())?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let temp_meta = fs::metadata(temp)?;
            if (temp_meta.uid(), temp_meta.gid()) != (meta.uid(), meta.gid()) {
                // Only a privileged process may give a file away; otherwise the
                // new inode stays the caller's, as with any editor's save.
                let _ = std::os::unix::fs::chown(temp, Some(meta.uid()), Some(meta.gid()));
            }
        }
        let backup = self.link_backup(target)?;
        fs::rename(temp, target)?;
        self.committed_temp(temp, target);
        undo.push(Undo::Restore {
            backup,
            target: target.to_path_buf(),
        });
        Ok(())
    }

    /// A backup of the file at `path` that stays valid after `path` is
    /// replaced: a hard link (same inode, so owner and mode come back
    /// exactly), or a copy where the file system has no hard links.
    fn link_backup(&mut self, path: &Path) -> io::Result<PathBuf> {
        loop {
            let backup = sibling_name(path, "orig");
            match fs::hard_link(path, &backup) {
                Ok(()) => {
                    self.backups.push(backup.clone());
                    return Ok(backup);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(_) => {
                    if fs::symlink_metadata(&backup).is_ok() {
                        continue;
                    }
                    fs::copy(path, &backup)?;
                    self.backups.push(backup.clone());
                    return Ok(backup);
                }
            }
        }
    }

    /// Moves `path` (file or directory) to a backup name beside it.
    fn move_aside(&mut self, path: &Path) -> io::Result<PathBuf> {
        let backup = loop {
            let backup = sibling_name(path, "orig");
            // rename(2) would silently replace an existing file.
            if fs::symlink_metadata(&backup).is_err() {
                break backup;
            }
        };
        fs::rename(path, &backup)?;
        self.backups.push(backup.clone());
        self.note_dir(path);
        Ok(backup)
    }

    /// Creates the missing ancestors of `path`, outermost first, each undone
    /// by removing it.
    fn create_parents(&mut self, path: &Path, undo: &mut Vec<Undo>) -> io::Result<()> {
        let Some(parent) = path.parent() else {
            return Ok(());
        };
        let mut missing = Vec::new();
        for dir in parent.ancestors() {
            match fs::symlink_metadata(dir) {
                Ok(_) => break,
                Err(e) if is_absent(&e) => missing.push(dir.to_path_buf()),
                Err(e) => return Err(e),
            }
        }
        for dir in missing.into_iter().rev() {
            fs::create_dir(&dir)?;
            undo.push(Undo::RemoveDir(dir.clone()));
            self.note_dir(&dir);
        }
        Ok(())
    }

    fn committed_temp(&mut self, temp: &Path, target: &Path) {
        self.temps.retain(|t| t != temp);
        self.note_dir(target);
    }

    fn note_dir(&mut self, path: &Path) {
        if let Some(dir) = path.parent() {
            if !self.dirs.iter().any(|d| d == dir) {
                self.dirs.push(dir.to_path_buf());
            }
        }
    }

    fn discard_temps(&mut self) {
        for temp in self.temps.drain(..) {
            let _ = fs::remove_file(temp);
        }
    }

    /// Removes `paths` (files or directory trees); returns those that remain.
    fn remove_all(paths: Vec<PathBuf>) -> Vec<PathBuf> {
        paths
            .into_iter()
            .filter(|path| {
                let removed = match fs::symlink_metadata(path) {
                    Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
                    Ok(_) => fs::remove_file(path),
                    Err(e) if is_absent(&e) => Ok(()),
                    Err(e) => Err(e),
                };
                removed.is_err()
            })
            .collect()
    }

    fn sync_dirs(&self) {
        // Durability of the renames themselves; a failure here cannot be
        // undone and does not change what was done, so it is only logged.
        for dir in &self.dirs {
            if let Err(e) = File::open(dir).and_then(|d| d.sync_all()) {
                tracing::debug!(dir = %dir.display(), error = %e, "fsync of directory failed");
            }
        }
    }

    fn finish(mut self) -> ApplyReport {
        self.discard_temps();
        self.sync_dirs();
        let mut report = report_of(self.steps.iter().filter_map(|s| s.done.as_ref()));
        report.leftovers = Transaction::remove_all(std::mem::take(&mut self.backups));
        report
    }

    /// Undoes the committed steps, newest first. A step whose undo fails
    /// stays in the report, and then no backup is removed: it may be the only
    /// copy of an original.
    fn rollback(mut self) -> ApplyReport {
        self.discard_temps();
        let mut remaining = Vec::new();
        let mut incomplete = false;
        for step in self.steps.drain(..).rev() {
            let mut ok = true;
            for undo in step.undo.iter().rev() {
                if let Err(e) = undo.run() {
                    tracing::warn!(error = %e, "undoing an edit step failed");
                    ok = false;
                }
            }
            if !ok {
                remaining.push(step.done);
                incomplete = true;
            }
        }
        self.sync_dirs();
        remaining.reverse();
        let rolled_back = !incomplete;
        let mut report = report_of(remaining.iter().flatten());
        report.rolled_back = rolled_back;
        report.leftovers = if rolled_back {
            Transaction::remove_all(std::mem::take(&mut self.backups))
        } else {
            std::mem::take(&mut self.backups)
                .into_iter()
                .filter(|b| fs::symlink_metadata(b).is_ok())
                .collect()
        };
        report
    }
}

fn report_of<'a>(done: impl Iterator<Item = &'a Done>) -> ApplyReport {
    let mut report = ApplyReport::default();
    for d in done {
        match d {
            Done::Written(path) => {
                if !report.written.contains(path) {
                    report.written.push(path.clone());
                }
            }
            Done::Created(path) => report.created.push(path.clone()),
            Done::Renamed(from, to) => report.renamed.push((from.clone(), to.clone())),
            Done::Deleted(path) => report.deleted.push(path.clone()),
        }
    }
    report
}

/// The file a write to `path` lands in: the symlink's target when `path` is
/// a symlink (replacing the link with a file would break it).
fn follow_symlink(path: &Path) -> io::Result<PathBuf> {
    if fs::symlink_metadata(path)?.file_type().is_symlink() {
        fs::canonicalize(path)
    } else {
        Ok(path.to_path_buf())
    }
}

fn already_exists(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("{} appeared after the edit was planned", path.display()),
    )
}

/// The plan as a git-style unified diff (`diff --git a/… b/…`), paths
/// relative to `base` (where `git apply` or `patch -p1` will run); a path
/// outside `base` stays absolute. Writes that change nothing are left out.
pub fn dry_run(plan: &Plan, base: &Path) -> String {
    let name = |path: &Path| -> String {
        let shown = match path.strip_prefix(base) {
            Ok(relative) if !relative.as_os_str().is_empty() => relative.display().to_string(),
            _ => path.display().to_string(),
        };
        // A git diff names files with `/` on every OS, as `git apply` and
        // `patch -p1` read them (on Unix `\` is part of a name, kept).
        if cfg!(windows) {
            shown.replace('\\', "/")
        } else {
            shown
        }
    };
    let mut out = String::new();
    for op in &plan.operations {
        match op {
            FileOperation::Write { path, old, new, .. } => {
                if old == new {
                    continue;
                }
                let name = name(path);
                let _ = writeln!(out, "diff --git a/{name} b/{name}");
                diff_into(
                    &mut out,
                    old,
                    new,
                    &format!("a/{name}"),
                    &format!("b/{name}"),
                );
            }
            FileOperation::Create { path, old, .. } => {
                let name = name(path);
                match old {
                    Some(old) => {
                        // Overwritten with an empty file.
                        let _ = writeln!(out, "diff --git a/{name} b/{name}");
                        diff_into(
                            &mut out,
                            old,
                            "",
                            &format!("a/{name}"),
                            &format!("b/{name}"),
                        );
                    }
                    None => {
                        let _ = writeln!(out, "diff --git a/{name} b/{name}\nnew file mode 100644");
                    }
                }
            }
            FileOperation::Rename { from, to, .. } => {
                let (from, to) = (name(from), name(to));
                let _ = writeln!(
                    out,
                    "diff --git a/{from} b/{to}\nsimilarity index 100%\nrename from {from}\nrename to {to}"
                );
            }
            FileOperation::Delete {
                path,
                directory,
                old,
                ..
            } => {
                let name = name(path);
                if *directory {
                    // git has no directories: their files are listed as deleted.
                    let _ = writeln!(out, "# deleted directory {name}");
                    continue;
                }
                let _ = writeln!(
                    out,
                    "diff --git a/{name} b/{name}\ndeleted file mode 100644"
                );
                if let Some(old) = old {
                    diff_into(&mut out, old, "", &format!("a/{name}"), "/dev/null");
                }
            }
        }
    }
    out
}

/// Appends the unified diff of `old` → `new` with `---`/`+++` headers (the
/// headers even when there are no hunks, so every file shows up).
fn diff_into(out: &mut String, old: &str, new: &str, old_name: &str, new_name: &str) {
    let _ = writeln!(out, "--- {old_name}\n+++ {new_name}");
    let diff = similar::TextDiff::from_lines(old, new);
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        let _ = write!(out, "{hunk}");
    }
}

#[cfg(all(test, unix))]
mod tests;
