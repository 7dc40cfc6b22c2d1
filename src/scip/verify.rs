//! Which documents of an index may be answered: those whose bytes on disk
//! are the bytes that were indexed (the sidecar's SHA-256), read through
//! the session's confinement at the moment of the read (`read::read_confined_blocking`).
//! A document outside the roots is never read; one with no hash is never
//! answered.
//!
//! A verdict is kept per document with the stamp (size, mtime) of what was
//! read, and reused while a `stat` shows the same stamp; a file modified
//! less than [`MIN_AGE`] before its read is checked again every time (an
//! edit within the clock's granularity could keep size and mtime). With the
//! verdict, the text of the document's non-ASCII lines is kept, which is
//! what converting positions between encodings needs.

use super::index::{Encoding, Index};
use super::sidecar::{self, Hash};
use crate::read::{read_confined_blocking, ReadError, Stamp};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Largest document checked (larger ones are never answered).
pub const MAX_DOCUMENT_BYTES: u64 = 32 * 1024 * 1024;
/// A verdict on a file younger than this at its read is not kept.
pub const MIN_AGE: Duration = Duration::from_secs(2);
/// Most bytes of kept non-ASCII lines, over all documents of one index;
/// past it the kept verdicts are dropped and rebuilt as needed.
pub const MAX_KEPT_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Whether a document may be answered from the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Same bytes as when indexed.
    Unchanged,
    /// Different bytes, or gone.
    Changed,
    /// The sidecar has no hash for it (or the index holds it twice).
    Unverifiable,
    /// Not read: outside the roots, not a regular file, too large, unreadable.
    NotRead(&'static str),
}

impl Verdict {
    pub fn is_unchanged(&self) -> bool {
        matches!(self, Verdict::Unchanged)
    }

    /// Words for an answer's meta.
    pub fn reason(&self) -> &'static str {
        match self {
            Verdict::Unchanged => "unchanged",
            Verdict::Changed => "changed_since_indexed",
            Verdict::Unverifiable => "no_hash",
            Verdict::NotRead(reason) => reason,
        }
    }
}

/// One document's check.
#[derive(Debug)]
pub struct Checked {
    pub verdict: Verdict,
    stamp: Option<Stamp>,
    /// Kept for a later request (old enough at the read).
    keep: bool,
    /// Line number → text, for the lines with non-ASCII characters.
    non_ascii: HashMap<u32, Box<str>>,
    /// Per occurrence of the document (bit `i` for its `i`th): whether its
    /// text is a name. Indexers also record operators (`+` for `Add::add`),
    /// keywords that name modules (`self`, `super`, `crate`) and whole-file
    /// ranges (a module's definition); servers list names only.
    names: Vec<u64>,
}

impl Checked {
    fn bare(verdict: Verdict) -> Arc<Checked> {
        Arc::new(Checked {
            verdict,
            stamp: None,
            keep: false,
            non_ascii: HashMap::new(),
            names: Vec::new(),
        })
    }

    /// Whether the `nth` occurrence of the document is a name.
    pub fn is_name(&self, nth: u32) -> bool {
        self.names
            .get(nth as usize / 64)
            .is_some_and(|word| word & (1 << (nth % 64)) != 0)
    }

    /// `character` of `line` from `from` to `to`. ASCII lines are the same
    /// in every encoding.
    pub fn convert(&self, line: u32, character: u32, from: Encoding, to: Encoding) -> u32 {
        if from == to {
            return character;
        }
        match self.non_ascii.get(&line) {
            Some(text) => convert(text, character, from, to),
            None => character,
        }
    }
}

/// `character` counted in `from` units, counted again in `to` units, along `text`.
pub fn convert(text: &str, character: u32, from: Encoding, to: Encoding) -> u32 {
    let width = |c: char, e: Encoding| match e {
        Encoding::Utf8 => c.len_utf8() as u32,
        Encoding::Utf16 => c.len_utf16() as u32,
        Encoding::Utf32 => 1,
    };
    let (mut seen, mut out) = (0u32, 0u32);
    for c in text.chars() {
        if seen >= character {
            return out;
        }
        seen += width(c, from);
        out += width(c, to);
    }
    // Past the end of the line: what is left, as it is.
    out + character.saturating_sub(seen)
}

/// The documents of one index and what is known of them.
pub struct Truth {
    /// The project's directory on this machine (canonical).
    root: PathBuf,
    /// Per document number: the hash it must have.
    hashes: Vec<Option<Hash>>,
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    verdicts: HashMap<u32, Arc<Checked>>,
    line_bytes: usize,
}

impl Truth {
    /// `hashes` by relative path (the sidecar's); `duplicate` marks documents
    /// the index holds twice, which are never answered.
    pub fn new(
        root: PathBuf,
        index: &Index,
        hashes: &std::collections::BTreeMap<String, Hash>,
        duplicate: &[bool],
    ) -> Truth {
        let hashes = index
            .documents
            .iter()
            .enumerate()
            .map(|(i, d)| {
                if duplicate.get(i).copied().unwrap_or(false) {
                    None
                } else {
                    hashes.get(&*d.path).copied()
                }
            })
            .collect();
        Truth {
            root,
            hashes,
            kept: Mutex::new(Kept::default()),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file of a document on this machine.
    pub fn path_of(&self, index: &Index, document: u32) -> PathBuf {
        self.root.join(&*index.documents[document as usize].path)
    }

    /// Whether any document can be checked at all.
    pub fn any_hash(&self) -> bool {
        self.hashes.iter().any(Option::is_some)
    }

    /// Checks `document` (blocking: it may read the file). `allowed` is the
    /// session's confinement of a real path.
    pub fn check(
        &self,
        index: &Index,
        document: u32,
        allowed: &dyn Fn(&Path) -> bool,
    ) -> Arc<Checked> {
        let Some(expected) = self.hashes.get(document as usize).copied().flatten() else {
            return Checked::bare(Verdict::Unverifiable);
        };
        let path = self.path_of(index, document);
        // Never even opened when the path is plainly outside (the read's own
        // check of the opened file is the one that counts).
        if !allowed(&path) {
            return Checked::bare(Verdict::NotRead(ReadError::OutsideRoots.reason()));
        }
        if let Some(kept) = self.kept.lock().verdicts.get(&document).cloned() {
            if stamp_of(&path) == kept.stamp {
                return kept;
            }
        }
        let read = match read_confined_blocking(&path, allowed, MAX_DOCUMENT_BYTES) {
            Ok(read) => read,
            Err(ReadError::NotFound) => return Checked::bare(Verdict::Changed),
            Err(e) => return Checked::bare(Verdict::NotRead(e.reason())),
        };
        // Text that was not UTF-8 was replaced in the read, so it cannot
        // match: such a file is never answered.
        let unchanged = sidecar::hash(read.text.as_bytes()) == expected;
        let non_ascii: HashMap<u32, Box<str>> = if unchanged {
            read.text
                .split('\n')
                .enumerate()
                .filter(|(_, line)| !line.is_ascii())
                .map(|(n, line)| (n as u32, line.trim_end_matches('\r').into()))
                .collect()
        } else {
            HashMap::new()
        };
        let names = if unchanged {
            names_of(index, document, &read.text)
        } else {
            Vec::new()
        };
        let keep = read
            .stamp
            .modified
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .is_some_and(|age| age >= MIN_AGE);
        let checked = Arc::new(Checked {
            verdict: if unchanged {
                Verdict::Unchanged
            } else {
                Verdict::Changed
            },
            stamp: Some(read.stamp),
            keep,
            non_ascii,
            names,
        });
        if checked.keep {
            let bytes: usize = checked.non_ascii.values().map(|l| l.len()).sum();
            let mut kept = self.kept.lock();
            if kept.line_bytes + bytes > MAX_KEPT_LINE_BYTES {
                kept.verdicts.clear();
                kept.line_bytes = 0;
            }
            kept.line_bytes += bytes;
            if let Some(old) = kept.verdicts.insert(document, Arc::clone(&checked)) {
                let freed: usize = old.non_ascii.values().map(|l| l.len()).sum();
                kept.line_bytes = kept.line_bytes.saturating_sub(freed);
            }
        }
        checked
    }
}

/// The name bits of `document`'s occurrences over its `text` (see [`Checked`]).
fn names_of(index: &Index, document: u32, text: &str) -> Vec<u64> {
    let d = &index.documents[document as usize];
    let rust = d.language.eq_ignore_ascii_case("rust") || d.path.ends_with(".rs");
    let lines: Vec<&str> = text.split('\n').collect();
    let range = index.occurrences_in(document);
    let mut bits = vec![0u64; (range.len()).div_ceil(64)];
    for (i, o) in range.enumerate() {
        let span = index.occurrence(o).span;
        if span.start.line != span.end.line || span.start == span.end {
            continue;
        }
        let Some(line) = lines.get(span.start.line as usize) else {
            continue;
        };
        let line = line.trim_end_matches('\r');
        let byte = |c: u32| convert(line, c, d.encoding, Encoding::Utf8) as usize;
        let Some(word) = line.get(byte(span.start.character)..byte(span.end.character)) else {
            continue;
        };
        if is_name(word, rust) {
            bits[i / 64] |= 1 << (i % 64);
        }
    }
    bits
}

/// An identifier, and in Rust not a keyword that names a module.
fn is_name(word: &str, rust: bool) -> bool {
    let mut chars = word.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$');
    first_ok
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        && !(rust && matches!(word, "self" | "super" | "crate"))
}

fn stamp_of(path: &Path) -> Option<Stamp> {
    let metadata = std::fs::metadata(path).ok()?;
    metadata.is_file().then(|| Stamp {
        size: metadata.len(),
        modified: metadata.modified().ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_identifiers() {
        for (word, rust, name) in [
            ("norm", true, true),
            ("Self", true, true),
            ("self", true, false),
            ("self", false, true),
            ("super", true, false),
            ("crate", true, false),
            ("+", true, false),
            ("shapes.geometry", false, false),
            ("$el", false, true),
            ("é_1", false, true),
            ("", false, false),
        ] {
            assert_eq!(is_name(word, rust), name, "{word:?}");
        }
    }

    #[test]
    fn converts_between_encodings() {
        let line = "let é = \"😀\"; x";
        // 'x' is at UTF-8 byte 17, UTF-16 unit 14, char 13.
        let utf8 = line.find('x').unwrap() as u32;
        assert_eq!(utf8, 17);
        assert_eq!(convert(line, utf8, Encoding::Utf8, Encoding::Utf16), 14);
        assert_eq!(convert(line, 14, Encoding::Utf16, Encoding::Utf8), 17);
        assert_eq!(convert(line, 14, Encoding::Utf16, Encoding::Utf32), 13);
        assert_eq!(convert(line, 13, Encoding::Utf32, Encoding::Utf16), 14);
        // Past the end stays past the end.
        assert_eq!(convert("é", 5, Encoding::Utf8, Encoding::Utf16), 4);
    }
}
