//! The file texts one MCP connection's tools have read (the file a position
//! names, the files results point at), kept while the disk says they are
//! unchanged: a tool call on files read before costs a confinement check
//! and a stat on the calling thread instead of a confined read on the
//! blocking pool (a thread handoff each way) and a new line index.
//!
//! Only text a confined read returned ([`crate::read`]) is kept, so a hit
//! never shows anything from outside the roots. A hit also needs, at the
//! moment of the call, the path to pass the session's confinement (the
//! gate's check: symlinks resolved) and the file's stamp (size, mtime) to be
//! the one read. A text is kept only when its mtime was at least
//! [`TRUST_AGE`] old at the read, so a write later in the same mtime tick,
//! of the same size, cannot hide behind an equal stamp (the document table's
//! rule, `crate::lsp::documents`).

use crate::edit::LineIndex;
use crate::gate::confine::Confinement;
use crate::read::Stamp;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Most files kept per connection; the least recently used goes first.
pub(crate) const MAX_CACHED_FILES: usize = 64;
/// Most bytes of text kept per connection.
pub(crate) const MAX_CACHED_BYTES: u64 = 8 * 1024 * 1024;
/// How old a file's mtime must be at the read for its text to be kept.
const TRUST_AGE: Duration = Duration::from_secs(2);

/// A file's text with its line index.
#[derive(Debug)]
pub(crate) struct Text {
    pub(crate) text: String,
    pub(crate) index: LineIndex,
}

impl Text {
    pub(crate) fn new(text: String) -> Text {
        let index = LineIndex::new(&text);
        Text { text, index }
    }
}

struct Entry {
    stamp: Stamp,
    text: Arc<Text>,
    last_used: u64,
}

#[derive(Default)]
struct Entries {
    map: HashMap<PathBuf, Entry>,
    bytes: u64,
    clock: u64,
}

/// The texts of one connection (see the module's comment).
#[derive(Default)]
pub(crate) struct TextCache {
    entries: Mutex<Entries>,
}

impl TextCache {
    /// `path`'s text as read before, if the file is unchanged since and the
    /// path is inside `confinement` now; `None` means: read it.
    pub(crate) fn get(&self, path: &Path, confinement: &Confinement) -> Option<Arc<Text>> {
        let (stamp, text) = {
            let entries = self.entries.lock();
            let entry = entries.map.get(path)?;
            (entry.stamp, Arc::clone(&entry.text))
        };
        let inside = url::Url::from_file_path(path)
            .ok()
            .is_some_and(|uri| matches!(confinement.check_uri(uri.as_str()), Ok(Some(_))));
        let unchanged = inside
            && std::fs::metadata(path).is_ok_and(|metadata| {
                metadata.is_file()
                    && stamp
                        == Stamp {
                            size: metadata.len(),
                            modified: metadata.modified().ok(),
                        }
            });
        let mut entries = self.entries.lock();
        if !unchanged {
            entries.remove(path);
            return None;
        }
        entries.clock += 1;
        let clock = entries.clock;
        if let Some(entry) = entries.map.get_mut(path) {
            entry.last_used = clock;
        }
        Some(text)
    }

    /// Keeps `text`, read confined from `path` with `stamp`, unless its mtime
    /// was too recent at `read_at` to trust; makes room first.
    pub(crate) fn put(&self, path: PathBuf, stamp: Stamp, text: Arc<Text>, read_at: SystemTime) {
        let trusted = stamp
            .modified
            .and_then(|modified| read_at.duration_since(modified).ok())
            .is_some_and(|age| age >= TRUST_AGE);
        let size = text.text.len() as u64;
        let mut entries = self.entries.lock();
        entries.remove(&path);
        if !trusted || size > MAX_CACHED_BYTES {
            return;
        }
        while entries.map.len() >= MAX_CACHED_FILES || entries.bytes + size > MAX_CACHED_BYTES {
            let oldest = entries
                .map
                .iter()
                .min_by_key(|(_, entry)| entry.last_used)
                .map(|(path, _)| path.clone());
            match oldest {
                Some(oldest) => entries.remove(&oldest),
                None => break,
            }
        }
        entries.clock += 1;
        let last_used = entries.clock;
        entries.bytes += size;
        entries.map.insert(
            path,
            Entry {
                stamp,
                text,
                last_used,
            },
        );
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map.len()
    }
}

impl Entries {
    fn remove(&mut self, path: &Path) {
        if let Some(entry) = self.map.remove(path) {
            self.bytes -= entry.text.text.len() as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::read_confined_blocking;

    /// A read as the tools make it: confined, then kept.
    fn read(cache: &TextCache, path: &Path, confinement: &Confinement) -> Option<Arc<Text>> {
        if let Some(text) = cache.get(path, confinement) {
            return Some(text);
        }
        let read =
            read_confined_blocking(path, &|real| confinement.contains(real), 1 << 20).ok()?;
        let text = Arc::new(Text::new(read.text));
        cache.put(
            path.to_path_buf(),
            read.stamp,
            Arc::clone(&text),
            SystemTime::now(),
        );
        Some(text)
    }

    /// Sets a file's mtime to long ago, as a file not edited in the last seconds has.
    fn age(path: &Path, secs: u64) {
        let file = std::fs::File::options()
            .write(true)
            .open(path)
            .expect("open");
        file.set_modified(SystemTime::now() - Duration::from_secs(secs))
            .expect("set mtime");
    }

    struct Tree {
        _dir: tempfile::TempDir,
        root: PathBuf,
        #[cfg_attr(not(unix), allow(dead_code))]
        outside: PathBuf,
        confinement: Confinement,
    }

    fn tree() -> Tree {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().canonicalize().expect("canonical");
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("src")).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        let confinement = Confinement::new(std::slice::from_ref(&root), &[], &[]);
        Tree {
            _dir: dir,
            root,
            outside,
            confinement,
        }
    }

    #[test]
    fn an_unchanged_file_is_served_from_the_cache_and_a_changed_one_is_read_again() {
        let t = tree();
        let file = t.root.join("src/a.rs");
        std::fs::write(&file, "fn old() {}\n").expect("write");
        age(&file, 60);
        let cache = TextCache::default();
        let first = read(&cache, &file, &t.confinement).expect("read");
        assert_eq!(first.text, "fn old() {}\n");
        let again = cache.get(&file, &t.confinement).expect("a hit");
        assert!(Arc::ptr_eq(&first, &again), "not served from the cache");

        // Edited on disk (another size, a new mtime): the new text, not the kept one.
        std::fs::write(&file, "fn new_name() {}\n").expect("write");
        assert!(
            cache.get(&file, &t.confinement).is_none(),
            "stale text kept"
        );
        let now = read(&cache, &file, &t.confinement).expect("read");
        assert_eq!(now.text, "fn new_name() {}\n");

        // Same size, older mtime set back by a tool: the stamp differs, so read again.
        age(&file, 60);
        let kept = read(&cache, &file, &t.confinement).expect("read");
        std::fs::write(&file, "fn new_nome() {}\n").expect("write");
        age(&file, 30);
        assert!(cache.get(&file, &t.confinement).is_none());
        let now = read(&cache, &file, &t.confinement).expect("read");
        assert_eq!(now.text, "fn new_nome() {}\n");
        assert!(!Arc::ptr_eq(&kept, &now));
    }

    #[test]
    fn a_file_written_in_the_last_seconds_is_not_kept() {
        let t = tree();
        let file = t.root.join("src/a.rs");
        std::fs::write(&file, "fn a() {}\n").expect("write");
        let cache = TextCache::default();
        read(&cache, &file, &t.confinement).expect("read");
        assert_eq!(
            cache.len(),
            0,
            "a text of an mtime too recent to trust was kept"
        );
        assert!(cache.get(&file, &t.confinement).is_none());
    }

    #[cfg(unix)]
    #[test]
    fn a_kept_file_whose_path_now_leads_outside_is_not_shown() {
        let t = tree();
        let file = t.root.join("src/a.rs");
        std::fs::write(&file, "fn inside() {}\n").expect("write");
        age(&file, 60);
        let cache = TextCache::default();
        read(&cache, &file, &t.confinement).expect("read");
        assert!(cache.get(&file, &t.confinement).is_some());

        // The directory swapped for a link to the outside, where a file of
        // the same size and mtime waits: neither it nor the kept text is shown.
        std::fs::write(t.outside.join("a.rs"), "fn SECRET() {}\n").expect("write");
        let modified = std::fs::metadata(&file)
            .and_then(|m| m.modified())
            .expect("mtime");
        std::fs::File::options()
            .write(true)
            .open(t.outside.join("a.rs"))
            .and_then(|f| f.set_modified(modified))
            .expect("set mtime");
        std::fs::remove_dir_all(t.root.join("src")).expect("rm");
        std::os::unix::fs::symlink(&t.outside, t.root.join("src")).expect("symlink");
        assert!(
            cache.get(&file, &t.confinement).is_none(),
            "the kept text was shown for a path that now leads outside the roots"
        );
        assert!(read(&cache, &file, &t.confinement).is_none());
    }

    #[test]
    fn the_cache_is_bounded_by_files() {
        let t = tree();
        let cache = TextCache::default();
        for i in 0..MAX_CACHED_FILES + 5 {
            let file = t.root.join(format!("src/f{i}.rs"));
            std::fs::write(&file, "x\n").expect("write");
            age(&file, 60);
            read(&cache, &file, &t.confinement).expect("read");
        }
        assert_eq!(cache.len(), MAX_CACHED_FILES);
        // The most recent is kept, the first was evicted.
        assert!(cache
            .get(
                &t.root.join(format!("src/f{}.rs", MAX_CACHED_FILES + 4)),
                &t.confinement
            )
            .is_some());
        assert!(cache
            .get(&t.root.join("src/f0.rs"), &t.confinement)
            .is_none());
    }
}
