//! The planner's view of files while it plans: layers of planned changes
//! over the caller's lookup, newest first, directory renames and deletions
//! included.

use super::*;

/// The state of files as the plan has changed them so far: a log of layers
/// over the caller's lookup, read newest first. Directory renames and
/// deletions are layers too, so paths below them resolve without the
/// planner having to know a directory's contents.
pub(super) struct Vfs<'a> {
    pub(super) base: &'a dyn Fn(&Path) -> Option<Entry>,
    pub(super) log: Vec<Layer>,
    pub(super) basis: Vec<(PathBuf, Option<Entry>)>,
    /// Index into `basis` by path.
    pub(super) looked_up: HashMap<PathBuf, usize>,
}

pub(super) enum Layer {
    Set(PathBuf, Entry),
    /// The path and everything below it are gone.
    Remove(PathBuf),
    /// Everything at or below `from` is now at or below `to` (and whatever
    /// was at `to` before is gone).
    Move {
        from: PathBuf,
        to: PathBuf,
    },
}

impl Vfs<'_> {
    pub(super) fn get(&mut self, path: &Path) -> Option<Entry> {
        let mut p = path.to_path_buf();
        let mut moved = false;
        for layer in self.log.iter().rev() {
            match layer {
                Layer::Set(q, entry) => {
                    if *q == p {
                        return Some(forget_version(entry.clone(), moved));
                    }
                    // Below a file there is nothing; below a directory the
                    // layer says nothing about the children.
                    if p.starts_with(q) && !matches!(entry, Entry::Directory) {
                        return None;
                    }
                }
                Layer::Remove(q) => {
                    if p.starts_with(q) {
                        return None;
                    }
                }
                Layer::Move { from, to } => {
                    if let Ok(rest) = p.strip_prefix(to) {
                        p = if rest.as_os_str().is_empty() {
                            from.clone()
                        } else {
                            from.join(rest)
                        };
                        moved = true;
                    } else if p.starts_with(from) {
                        return None;
                    }
                }
            }
        }
        // The lookup is asked once per path: the plan must rest on one
        // answer per path, even if the caller's files change meanwhile.
        let entry = match self.looked_up.get(&p) {
            Some(&i) => self.basis[i].1.clone(),
            None => {
                let entry = (self.base)(&p);
                self.looked_up.insert(p.clone(), self.basis.len());
                self.basis.push((p, entry.clone()));
                entry
            }
        };
        entry.map(|e| forget_version(e, moved))
    }

    pub(super) fn set(&mut self, path: PathBuf, entry: Entry) {
        self.log.push(Layer::Set(path, entry));
    }
}

/// A document's LSP version belongs to its old URI; after a move it is unknown.
pub(super) fn forget_version(entry: Entry, moved: bool) -> Entry {
    match entry {
        Entry::File(Current { text, .. }) if moved => Entry::File(Current {
            text,
            version: None,
        }),
        other => other,
    }
}
