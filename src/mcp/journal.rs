//! What each session wrote through acp-lsp, and the diagnostics acp-lsp had
//! seen before: the baseline `diagnostics {since: "last_edit"}` compares
//! against. One per proxy (held by [`super::editor::EditorFs`], which every
//! MCP connection and the relay share), so an agent that starts its MCP
//! server anew for each tool call still sees its earlier writes.
//!
//! An edit is the writes since the session's last diagnostics check: the
//! agent's `fs/write_text_file` that the editor confirmed (the relay reports
//! them) and the tools' own writes (`rename`). Its baseline is what the
//! session's diagnostics were known to be when the first of them came: the
//! latest answer of a `diagnostics` call for each (server, file).

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

/// Sessions remembered; the least recently used is forgotten first.
pub(crate) const MAX_SESSIONS: usize = 256;
/// (server, file) pairs remembered per session; past it, new files are not
/// remembered (their problems then count as new after an edit).
pub(crate) const MAX_KNOWN_FILES: usize = 4096;
/// Problems remembered per (server, file).
pub(crate) const MAX_PROBLEMS_PER_FILE: usize = 1000;
/// Files remembered per edit.
pub(crate) const MAX_EDIT_FILES: usize = 1024;

/// One diagnostic as compared across an edit: what it says, not where
/// (an edit above it moves it without changing it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Problem {
    pub(crate) severity: String,
    pub(crate) code: String,
    pub(crate) message: String,
    /// 1-based, where it was last seen (shown, not compared).
    pub(crate) line: u64,
    pub(crate) column: u64,
}

impl Problem {
    /// What makes two problems the same one.
    pub(crate) fn identity(&self) -> (&str, &str, &str) {
        (&self.severity, &self.code, &self.message)
    }
}

/// Which server said what about which file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct FileKey {
    pub(crate) server: String,
    pub(crate) path: PathBuf,
}

/// The problems last seen per (server, file).
pub(crate) type Snapshot = BTreeMap<FileKey, Vec<Problem>>;

/// Who wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    /// The agent's `fs/write_text_file`, confirmed by the editor.
    Agent,
    /// acp-lsp's `rename` tool.
    Rename,
}

/// The writes since the last diagnostics check, and what was known before them.
#[derive(Debug, Clone)]
pub(crate) struct Edit {
    /// The files written, in order, each once (at most [`MAX_EDIT_FILES`]).
    pub(crate) files: Vec<PathBuf>,
    /// Files written past [`MAX_EDIT_FILES`].
    pub(crate) files_left_out: usize,
    /// How many writes, and by whom.
    pub(crate) by_agent: u64,
    pub(crate) by_rename: u64,
    /// The diagnostics known when the first write came.
    pub(crate) baseline: Arc<Snapshot>,
}

#[derive(Default)]
struct Ledger {
    known: Arc<Snapshot>,
    edit: Option<Edit>,
    /// A check came after the edit's last write: the next write starts a new edit.
    checked: bool,
    last_used: u64,
}

#[derive(Default)]
struct Inner {
    sessions: HashMap<String, Ledger>,
    clock: u64,
}

/// Every session's writes and known diagnostics (see the module's comment).
#[derive(Default)]
pub struct Journal {
    inner: Mutex<Inner>,
}

impl Journal {
    fn ledger<'a>(inner: &'a mut Inner, session: &str) -> &'a mut Ledger {
        inner.clock += 1;
        let clock = inner.clock;
        if !inner.sessions.contains_key(session) && inner.sessions.len() >= MAX_SESSIONS {
            let oldest = inner
                .sessions
                .iter()
                .min_by_key(|(_, ledger)| ledger.last_used)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                inner.sessions.remove(&oldest);
            }
        }
        let ledger = inner.sessions.entry(session.to_string()).or_default();
        ledger.last_used = clock;
        ledger
    }

    /// `session` wrote `files`: they join the current edit, or start one
    /// whose baseline is what is known now.
    pub(crate) fn wrote(&self, session: &str, files: &[PathBuf], by: Writer) {
        let mut inner = self.inner.lock();
        let ledger = Self::ledger(&mut inner, session);
        if ledger.checked || ledger.edit.is_none() {
            ledger.edit = Some(Edit {
                files: Vec::new(),
                files_left_out: 0,
                by_agent: 0,
                by_rename: 0,
                baseline: Arc::clone(&ledger.known),
            });
            ledger.checked = false;
        }
        let edit = ledger.edit.as_mut().expect("BUG: the edit was just made");
        match by {
            Writer::Agent => edit.by_agent += 1,
            Writer::Rename => edit.by_rename += 1,
        }
        for file in files {
            if edit.files.contains(file) {
                continue;
            }
            if edit.files.len() < MAX_EDIT_FILES {
                edit.files.push(file.clone());
            } else {
                edit.files_left_out += 1;
            }
        }
    }

    /// The session's current edit, if it wrote anything.
    pub(crate) fn last_edit(&self, session: &str) -> Option<Edit> {
        let mut inner = self.inner.lock();
        Self::ledger(&mut inner, session).edit.clone()
    }

    /// A diagnostics check saw `checked`: it is what is known of those
    /// (server, file) pairs from now on, and the current edit is complete.
    pub(crate) fn observe(&self, session: &str, checked: Vec<(FileKey, Vec<Problem>)>) {
        let mut inner = self.inner.lock();
        let ledger = Self::ledger(&mut inner, session);
        let known = Arc::make_mut(&mut ledger.known);
        for (key, mut problems) in checked {
            problems.truncate(MAX_PROBLEMS_PER_FILE);
            if known.len() >= MAX_KNOWN_FILES && !known.contains_key(&key) {
                continue;
            }
            known.insert(key, problems);
        }
        ledger.checked = true;
    }
}

/// The problems in `now` that `before` lacks (new) and those of `before`
/// that `now` lacks (fixed), compared as multisets of what they say.
pub(crate) fn delta<'a>(
    before: &'a [Problem],
    now: &'a [Problem],
) -> (Vec<&'a Problem>, Vec<&'a Problem>) {
    let mut left: Vec<Option<&Problem>> = before.iter().map(Some).collect();
    let mut new = Vec::new();
    for problem in now {
        match left
            .iter_mut()
            .find(|p| p.is_some_and(|p| p.identity() == problem.identity()))
        {
            Some(slot) => *slot = None,
            None => new.push(problem),
        }
    }
    let fixed = left.into_iter().flatten().collect();
    (new, fixed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(message: &str, line: u64) -> Problem {
        Problem {
            severity: "error".into(),
            code: "E1".into(),
            message: message.into(),
            line,
            column: 1,
        }
    }

    fn key(path: &str) -> FileKey {
        FileKey {
            server: "s".into(),
            path: PathBuf::from(path),
        }
    }

    #[test]
    fn writes_until_a_check_are_one_edit_with_the_baseline_from_before_the_first() {
        let journal = Journal::default();
        assert!(journal.last_edit("a").is_none());
        journal.observe("a", vec![(key("/r/x.rs"), vec![problem("old", 3)])]);
        journal.wrote("a", &[PathBuf::from("/r/x.rs")], Writer::Agent);
        journal.wrote(
            "a",
            &[PathBuf::from("/r/y.rs"), PathBuf::from("/r/x.rs")],
            Writer::Rename,
        );
        let edit = journal.last_edit("a").unwrap();
        assert_eq!(
            edit.files,
            [PathBuf::from("/r/x.rs"), PathBuf::from("/r/y.rs")]
        );
        assert_eq!((edit.by_agent, edit.by_rename), (1, 1));
        assert_eq!(edit.baseline[&key("/r/x.rs")], [problem("old", 3)]);
        // A check ends the edit (it stays the last one); the next write starts a new one.
        journal.observe("a", vec![(key("/r/x.rs"), vec![])]);
        assert_eq!(journal.last_edit("a").unwrap().files.len(), 2);
        journal.wrote("a", &[PathBuf::from("/r/z.rs")], Writer::Agent);
        let edit = journal.last_edit("a").unwrap();
        assert_eq!(edit.files, [PathBuf::from("/r/z.rs")]);
        assert_eq!(edit.baseline[&key("/r/x.rs")], []);
        // Other sessions are apart.
        assert!(journal.last_edit("b").is_none());
    }

    #[test]
    fn the_delta_is_what_appeared_and_what_went_away_wherever_it_moved() {
        let before = [problem("a", 1), problem("b", 2), problem("b", 9)];
        let now = [problem("b", 5), problem("c", 6), problem("a", 7)];
        let (new, fixed) = delta(&before, &now);
        assert_eq!(new, [&problem("c", 6)]);
        assert_eq!(fixed, [&problem("b", 9)]);
    }

    #[test]
    fn sessions_are_bounded() {
        let journal = Journal::default();
        for i in 0..MAX_SESSIONS + 10 {
            journal.wrote(&format!("s{i}"), &[PathBuf::from("/f")], Writer::Agent);
        }
        assert_eq!(journal.inner.lock().sessions.len(), MAX_SESSIONS);
        assert!(journal
            .last_edit(&format!("s{}", MAX_SESSIONS + 9))
            .is_some());
        assert!(journal.last_edit("s0").is_none());
    }
}
