//! Text searches inside the session's roots, for what the servers do not
//! say: where a name occurs when `workspace/symbol` finds nothing, which
//! occurrences of an old name a rename left, which files an edit may have
//! broken. Ignore-aware (`.gitignore`, hidden files, no symlinks followed),
//! bounded ([`MAX_SCAN_FILES`], [`MAX_SCAN_BYTES`]), every file read
//! confined at the moment of the read; blocking: call it off the runtime
//! threads.

use super::names::word_occurrences;
use crate::gate::confine::Confinement;
use crate::lsp::documents::MAX_DOCUMENT_BYTES;
use crate::read::read_confined_blocking;
use std::path::{Path, PathBuf};

/// Most files one scan lists or reads.
pub(crate) const MAX_SCAN_FILES: usize = 5000;
/// Most bytes one scan reads.
pub(crate) const MAX_SCAN_BYTES: u64 = 64 * 1024 * 1024;
/// Directories never walked even when no ignore file says so: build output
/// and dependencies, not the project's own text.
const SKIPPED_DIRS: &[&str] = &["node_modules", "target", "__pycache__", "build", "dist"];

/// The files under `roots` (ignore-aware), those whose extension is in
/// `extensions` when given, sorted; and how many more there were past
/// `limit`.
pub(crate) fn source_files(
    roots: &[PathBuf],
    extensions: Option<&[String]>,
    limit: usize,
) -> (Vec<PathBuf>, usize) {
    let mut files = Vec::new();
    let mut left_out = 0;
    for root in roots {
        let walk = ignore::WalkBuilder::new(root)
            .standard_filters(true)
            .follow_links(false)
            .filter_entry(|entry| {
                !(entry.depth() > 0
                    && entry.file_type().is_some_and(|t| t.is_dir())
                    && entry
                        .file_name()
                        .to_str()
                        .is_some_and(|name| SKIPPED_DIRS.contains(&name)))
            })
            .build();
        for entry in walk.flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let path = entry.into_path();
            let wanted = extensions.is_none_or(|extensions| {
                path.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| extensions.iter().any(|x| x == e))
            });
            if !wanted || files.contains(&path) {
                continue;
            }
            if files.len() < limit {
                files.push(path);
            } else {
                left_out += 1;
            }
        }
    }
    files.sort();
    (files, left_out)
}

/// One occurrence of a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hit {
    pub(crate) path: PathBuf,
    /// 0-based line.
    pub(crate) line: u32,
    /// 0-based column, in characters.
    pub(crate) column: usize,
    /// The line's text, trimmed.
    pub(crate) text: String,
    /// What the occurrence stands in ([`context_of`]).
    pub(crate) context: &'static str,
}

/// What a scan found and what it could not look at.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub(crate) hits: Vec<Hit>,
    /// Files read (text, inside the roots).
    pub(crate) files_read: usize,
    /// Files not read: past the byte budget, too large, not text, or outside.
    pub(crate) files_skipped: usize,
    /// Occurrences past `max_hits` (counted, not kept).
    pub(crate) hits_left_out: usize,
}

/// The whole-word occurrences of `name` in `files`, each file read confined
/// to `confinement`, at most [`MAX_SCAN_BYTES`] in all; at most `max_hits`
/// kept (the rest counted).
pub(crate) fn occurrences(
    files: &[PathBuf],
    name: &str,
    confinement: &Confinement,
    max_hits: usize,
) -> Scan {
    let mut scan = Scan::default();
    let mut budget = MAX_SCAN_BYTES;
    let allowed = |real: &Path| confinement.contains(real);
    for path in files {
        let Ok(read) = read_confined_blocking(path, &allowed, MAX_DOCUMENT_BYTES.min(budget))
        else {
            scan.files_skipped += 1;
            continue;
        };
        budget -= read.text.len() as u64;
        scan.files_read += 1;
        find_in(path, &read.text, name, max_hits, &mut scan);
    }
    scan
}

/// The occurrences of `name` in one text.
pub(crate) fn find_in(path: &Path, text: &str, name: &str, max_hits: usize, scan: &mut Scan) {
    if !text.contains(name) {
        return;
    }
    for (line_number, line) in text.split('\n').enumerate() {
        for range in word_occurrences(line, name) {
            if scan.hits.len() >= max_hits {
                scan.hits_left_out += 1;
                continue;
            }
            let column = line[..range.start].chars().count();
            scan.hits.push(Hit {
                path: path.to_path_buf(),
                line: line_number as u32,
                column,
                text: line.trim().to_string(),
                context: context_of(line, column),
            });
        }
    }
}

/// What kind of text an occurrence stands in, from its line alone (a
/// guess for the reader, never used to decide anything).
pub(crate) fn context_of(line: &str, column: usize) -> &'static str {
    let trimmed = line.trim_start();
    if ["///", "//!", "/**", "* ", "\"\"\"", "'''"]
        .iter()
        .any(|p| trimmed.starts_with(p))
        || trimmed == "*"
    {
        return "doc comment";
    }
    let before: String = line.chars().take(column).collect();
    if before.contains("//") || before.trim_start().starts_with('#') || before.contains("/*") {
        return "comment";
    }
    let quotes = before.chars().filter(|&c| c == '"').count();
    let singles = before.chars().filter(|&c| c == '\'' || c == '`').count();
    if quotes % 2 == 1 || singles % 2 == 1 {
        return "string";
    }
    "code"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occurrences_are_found_in_the_files_under_the_roots_only() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root = base.join("root");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("target")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        std::fs::write(
            root.join("src/a.rs"),
            "fn area() {}\n/// area of x\nlet s = \"area\";\n",
        )
        .unwrap();
        std::fs::write(root.join("src/b.txt"), "area\n").unwrap();
        std::fs::write(root.join("target/c.rs"), "area\n").unwrap();
        std::fs::write(base.join("outside/d.rs"), "area\n").unwrap();
        // A link out of the roots (Unix: Windows links need a privilege).
        #[cfg(unix)]
        std::os::unix::fs::symlink(base.join("outside/d.rs"), root.join("src/link.rs")).unwrap();
        let (files, left) =
            source_files(std::slice::from_ref(&root), Some(&["rs".to_string()]), 100);
        assert_eq!(files, [root.join("src/a.rs")]);
        assert_eq!(left, 0);
        let (all, _) = source_files(std::slice::from_ref(&root), None, 100);
        assert_eq!(all.len(), 2, "{all:?}");
        let confinement = Confinement::new(std::slice::from_ref(&root), &[], &[]);
        // A path named directly that leads outside is not read.
        let scan = occurrences(
            &[root.join("src/a.rs"), root.join("src/link.rs")],
            "area",
            &confinement,
            10,
        );
        assert_eq!(scan.files_read, 1);
        assert_eq!(scan.files_skipped, 1);
        let kinds: Vec<_> = scan
            .hits
            .iter()
            .map(|h| (h.line, h.column, h.context))
            .collect();
        assert_eq!(
            kinds,
            [(0, 3, "code"), (1, 4, "doc comment"), (2, 9, "string")]
        );
        assert_eq!(context_of("/// area of x", 4), "doc comment");
        assert_eq!(context_of("let s = \"area\";", 9), "string");
        assert_eq!(context_of("x = 1 // area", 9), "comment");
        assert_eq!(context_of("area(1)", 0), "code");
        let capped = occurrences(&[root.join("src/a.rs")], "area", &confinement, 1);
        assert_eq!((capped.hits.len(), capped.hits_left_out), (1, 2));
    }
}
