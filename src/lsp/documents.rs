//! What one server has been told about documents: which are open, at which
//! version, with which content. Decides didOpen/didChange/didClose; does no I/O
//! (the caller reads the disk and sends what this returns, in order).

use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::SystemTime;

/// Documents open per server before the least recently used one is closed.
pub const DEFAULT_MAX_OPEN_DOCUMENTS: usize = 500;
/// Files larger than this are never opened on a server.
pub const MAX_DOCUMENT_BYTES: u64 = 5 * 1024 * 1024;

// What a read saw of the file; defined with the read, which is below `lsp`.
pub use crate::read::Stamp;

#[derive(Debug, Clone)]
struct Document {
    path: PathBuf,
    language_id: String,
    version: i32,
    /// Hash of the text the server has.
    hash: u64,
    /// The disk stamp and the hash of the text at the last read of the disk.
    /// A confirmed `fs/write_text_file` changes `hash` but not these: its text
    /// stays until the disk changes (the editor may save later, or never).
    stamp: Option<Stamp>,
    disk_hash: u64,
    last_used: u64,
}

/// A notification to send, in the order returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentNotification {
    Open {
        uri: String,
        language_id: String,
        version: i32,
        text: String,
    },
    Change {
        uri: String,
        version: i32,
        text: String,
    },
    Close {
        uri: String,
    },
}

/// What the server saw of one document when a request was sent (`_meta.documents`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentState {
    pub uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// Why the document was not opened (`too_large`, `unreadable`,
    /// `not_found`, `not_a_file`, `outside_roots`: see `crate::read`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<&'static str>,
}

/// The open documents of one server connection.
#[derive(Debug)]
pub struct DocumentTable {
    docs: HashMap<String, Document>,
    max_open: usize,
    clock: u64,
}

/// A stable 64-bit FNV-1a hash of a text (stable across runs, so recordings compare).
pub fn content_hash(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

impl DocumentTable {
    pub fn new(max_open: usize) -> DocumentTable {
        DocumentTable {
            docs: HashMap::new(),
            max_open: max_open.max(1),
            clock: 0,
        }
    }

    /// Whether the disk must be read to know if `uri` changed: not open yet,
    /// stamp differs, or the stamp is too recent to trust (same-second writes).
    pub fn needs_read(&self, uri: &str, stamp: Stamp, now: SystemTime) -> bool {
        let Some(doc) = self.docs.get(uri) else {
            return true;
        };
        match (doc.stamp, stamp.modified) {
            (Some(old), Some(modified)) if old == stamp => now
                .duration_since(modified)
                .map_or(true, |age| age < AMBIGUOUS_WINDOW),
            _ => true,
        }
    }

    /// Takes the disk's text for `uri`. Returns what to send.
    pub fn sync(
        &mut self,
        uri: &str,
        path: PathBuf,
        language_id: &str,
        text: String,
        stamp: Option<Stamp>,
    ) -> Vec<DocumentNotification> {
        self.clock += 1;
        let hash = content_hash(&text);
        let clock = self.clock;
        if let Some(doc) = self.docs.get_mut(uri) {
            doc.last_used = clock;
            // The disk as it was at the last read: the server's text (maybe a
            // confirmed write the disk does not have yet) is the newest.
            let disk_unchanged = stamp.is_some() && doc.stamp == stamp && doc.disk_hash == hash;
            doc.stamp = stamp;
            doc.disk_hash = hash;
            if doc.hash == hash || disk_unchanged {
                return Vec::new();
            }
            doc.hash = hash;
            doc.version += 1;
            return vec![DocumentNotification::Change {
                uri: uri.to_string(),
                version: doc.version,
                text,
            }];
        }
        self.open(
            uri,
            Document {
                path,
                language_id: language_id.to_string(),
                version: 1,
                hash,
                stamp,
                disk_hash: hash,
                last_used: clock,
            },
            text,
        )
    }

    /// Text written through `fs/write_text_file` for a document: changes it only
    /// if it is open (a closed document is read from disk when next needed).
    /// It stays until the disk changes from what was last read there.
    pub fn written(&mut self, uri: &str, text: String) -> Vec<DocumentNotification> {
        self.clock += 1;
        let clock = self.clock;
        let Some(doc) = self.docs.get_mut(uri) else {
            return Vec::new();
        };
        doc.last_used = clock;
        let hash = content_hash(&text);
        if doc.hash == hash {
            return Vec::new();
        }
        doc.hash = hash;
        doc.version += 1;
        vec![DocumentNotification::Change {
            uri: uri.to_string(),
            version: doc.version,
            text,
        }]
    }

    /// A confirmed write to a document the server does not have open: open
    /// it with the written text. `stamp` and `disk_hash` describe the disk
    /// now, so the disk's older text does not replace the write until the
    /// disk changes.
    pub fn written_unopened(
        &mut self,
        uri: &str,
        path: PathBuf,
        language_id: &str,
        text: String,
        stamp: Stamp,
        disk_hash: u64,
    ) -> Vec<DocumentNotification> {
        if self.docs.contains_key(uri) {
            return self.written(uri, text);
        }
        self.clock += 1;
        let document = Document {
            path,
            language_id: language_id.to_string(),
            version: 1,
            hash: content_hash(&text),
            stamp: Some(stamp),
            disk_hash,
            last_used: self.clock,
        };
        self.open(uri, document, text)
    }

    /// Makes room, then opens `document` with `text` on the server.
    fn open(&mut self, uri: &str, document: Document, text: String) -> Vec<DocumentNotification> {
        let mut out = self.evict_for_one();
        out.push(DocumentNotification::Open {
            uri: uri.to_string(),
            language_id: document.language_id.clone(),
            version: document.version,
            text,
        });
        self.docs.insert(uri.to_string(), document);
        out
    }

    /// The file is gone from disk.
    pub fn deleted(&mut self, uri: &str) -> Vec<DocumentNotification> {
        match self.docs.remove(uri) {
            Some(_) => vec![DocumentNotification::Close {
                uri: uri.to_string(),
            }],
            None => Vec::new(),
        }
    }

    fn evict_for_one(&mut self) -> Vec<DocumentNotification> {
        let mut out = Vec::new();
        while self.docs.len() >= self.max_open {
            let Some(oldest) = self
                .docs
                .iter()
                .min_by_key(|(_, d)| d.last_used)
                .map(|(uri, _)| uri.clone())
            else {
                break;
            };
            self.docs.remove(&oldest);
            out.push(DocumentNotification::Close { uri: oldest });
        }
        out
    }

    /// Open documents at or below `path` (a deleted directory closes them all).
    pub fn open_under(&self, path: &std::path::Path) -> Vec<(String, PathBuf)> {
        self.docs
            .iter()
            .filter(|(_, d)| d.path.starts_with(path))
            .map(|(uri, d)| (uri.clone(), d.path.clone()))
            .collect()
    }

    /// Every open document.
    pub fn open_documents(&self) -> Vec<(String, PathBuf)> {
        self.docs
            .iter()
            .map(|(uri, d)| (uri.clone(), d.path.clone()))
            .collect()
    }

    /// The version the server has of `uri`, if open: [`DocumentTable::state`]
    /// without building it (the check after every answer needs only this).
    pub fn version(&self, uri: &str) -> Option<i32> {
        self.docs.get(uri).map(|doc| doc.version)
    }

    /// Whether `uri` is open.
    pub fn is_open(&self, uri: &str) -> bool {
        self.docs.contains_key(uri)
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// What the server holds for `uri` now.
    pub fn state(&self, uri: &str) -> DocumentState {
        match self.docs.get(uri) {
            Some(doc) => DocumentState {
                uri: uri.to_string(),
                version: Some(doc.version),
                hash: Some(format!("{:016x}", doc.hash)),
                skipped: None,
            },
            None => DocumentState {
                uri: uri.to_string(),
                version: None,
                hash: None,
                skipped: None,
            },
        }
    }

    /// Forgets everything (the server restarted) and returns the documents to
    /// reopen: (uri, path, language id).
    pub fn reset(&mut self) -> Vec<(String, PathBuf, String)> {
        let mut docs: Vec<_> = self.docs.drain().collect();
        docs.sort_by_key(|(_, d)| d.last_used);
        docs.into_iter()
            .map(|(uri, d)| (uri, d.path, d.language_id))
            .collect()
    }
}

/// A stamp whose mtime is this recent may hide a second write in the same tick.
const AMBIGUOUS_WINDOW: std::time::Duration = std::time::Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_to_an_unopened_document_opens_it_and_outlives_the_older_disk() {
        let mut table = DocumentTable::new(10);
        let stamp = Stamp {
            size: 4,
            modified: None,
        };
        let notes = table.written_unopened(
            "file:///a.rs",
            PathBuf::from("/a.rs"),
            "rust",
            "new\n".into(),
            stamp,
            content_hash("old\n"),
        );
        assert!(
            matches!(&notes[..], [DocumentNotification::Open { text, version: 1, .. }] if text == "new\n")
        );
        let mut disk = |text: &str, size| {
            let stamp = Stamp {
                size,
                modified: None,
            };
            table.sync(
                "file:///a.rs",
                "/a.rs".into(),
                "rust",
                text.into(),
                Some(stamp),
            )
        };
        // The disk still has the old text: nothing is sent.
        assert!(disk("old\n", 4).is_empty());
        // Once the disk changes, its text wins.
        let notes = disk("saved\n", 6);
        assert!(matches!(
            &notes[..],
            [DocumentNotification::Change { version: 2, .. }]
        ));
    }
    use std::time::Duration;

    fn stamp(size: u64, secs: u64) -> Stamp {
        Stamp {
            size,
            modified: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)),
        }
    }

    #[test]
    fn opens_once_then_changes_with_increasing_versions() {
        let mut table = DocumentTable::new(10);
        let open = table.sync(
            "file:///a",
            "/a".into(),
            "rust",
            "1".into(),
            Some(stamp(1, 1)),
        );
        assert!(matches!(
            &open[..],
            [DocumentNotification::Open { version: 1, .. }]
        ));
        assert!(table
            .sync(
                "file:///a",
                "/a".into(),
                "rust",
                "1".into(),
                Some(stamp(1, 1))
            )
            .is_empty());
        let change = table.sync(
            "file:///a",
            "/a".into(),
            "rust",
            "2".into(),
            Some(stamp(1, 2)),
        );
        assert!(matches!(
            &change[..],
            [DocumentNotification::Change { version: 2, .. }]
        ));
        let change = table.written("file:///a", "3".into());
        assert!(matches!(
            &change[..],
            [DocumentNotification::Change { version: 3, .. }]
        ));
        assert!(table.written("file:///other", "x".into()).is_empty());
    }

    #[test]
    fn a_confirmed_write_stays_until_the_disk_changes() {
        let mut table = DocumentTable::new(10);
        table.sync(
            "file:///a",
            "/a".into(),
            "py",
            "0".into(),
            Some(stamp(1, 1)),
        );
        let change = table.written("file:///a", "1".into());
        assert!(matches!(
            &change[..],
            [DocumentNotification::Change { version: 2, .. }]
        ));
        // The disk as last read: the written text is kept.
        assert!(table
            .sync(
                "file:///a",
                "/a".into(),
                "py",
                "0".into(),
                Some(stamp(1, 1))
            )
            .is_empty());
        // The editor saved it: same text, nothing to send.
        assert!(table
            .sync(
                "file:///a",
                "/a".into(),
                "py",
                "1".into(),
                Some(stamp(1, 2))
            )
            .is_empty());
        // Written again, then someone else changes the disk: the disk wins.
        table.written("file:///a", "2".into());
        let change = table.sync(
            "file:///a",
            "/a".into(),
            "py",
            "3".into(),
            Some(stamp(1, 3)),
        );
        assert!(matches!(
            &change[..],
            [DocumentNotification::Change { version: 4, text, .. }] if text == "3"
        ));
    }

    #[test]
    fn stamps_decide_whether_to_read() {
        let mut table = DocumentTable::new(10);
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        assert!(table.needs_read("file:///a", stamp(1, 1), now));
        table.sync(
            "file:///a",
            "/a".into(),
            "rust",
            "x".into(),
            Some(stamp(1, 1)),
        );
        assert!(!table.needs_read("file:///a", stamp(1, 1), now));
        assert!(table.needs_read("file:///a", stamp(2, 1), now));
        // Modified within the ambiguous window: read again even with the same stamp.
        table.sync(
            "file:///a",
            "/a".into(),
            "rust",
            "y".into(),
            Some(stamp(1, 99)),
        );
        assert!(table.needs_read("file:///a", stamp(1, 99), now));
    }

    #[test]
    fn evicts_the_least_recently_used() {
        let mut table = DocumentTable::new(2);
        table.sync("file:///a", "/a".into(), "rust", "a".into(), None);
        table.sync("file:///b", "/b".into(), "rust", "b".into(), None);
        table.sync("file:///a", "/a".into(), "rust", "a".into(), None);
        let out = table.sync("file:///c", "/c".into(), "rust", "c".into(), None);
        assert_eq!(
            out[0],
            DocumentNotification::Close {
                uri: "file:///b".into()
            }
        );
        assert!(table.is_open("file:///a") && table.is_open("file:///c"));
        assert_eq!(table.len(), 2);
    }
}
