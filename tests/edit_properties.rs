//! Properties of the edit planner against a reference written here: random
//! documents (ASCII, CJK, astral characters, combining marks, mixed line
//! ends, with and without a final newline) and random non-overlapping edits,
//! applied by the planner in every position encoding, must give what a
//! character-by-character application gives. Plus end-to-end checks through
//! the public API with the real `Confinement` and the disk.

use acp_lsp::edit::{
    apply_to_disk, dry_run, plan, plan_on_disk, Decisions, Entry, FileOperation, Plan, PlanContext,
    PlanError, PlanErrorKind, PositionEncoding,
};
use acp_lsp_core::gate::confine::Confinement;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

const ENCODINGS: [PositionEncoding; 3] = [
    PositionEncoding::Utf8,
    PositionEncoding::Utf16,
    PositionEncoding::Utf32,
];

/// Pieces documents and new texts are made of: one- to four-byte UTF-8,
/// astral characters (UTF-16 surrogate pairs), a base letter with a
/// combining accent, a lone combining mark, and every LSP line end.
const PIECES: &[&str] = &[
    "a", "b", "Z", " ", "\t", "é", "中", "文", "😀", "🎉", "𝔸", "e\u{301}", "\u{308}", "\n",
    "\r\n", "\r",
];

// The document of the properties, inside the root: on drive C on Windows,
// where a path with no drive is not absolute (its URI would be refused).
#[cfg(not(windows))]
const ROOT: &str = "/ws";
#[cfg(not(windows))]
const FILE: &str = "/ws/doc.txt";
#[cfg(not(windows))]
const FILE_URI: &str = "file:///ws/doc.txt";
#[cfg(windows)]
const ROOT: &str = r"C:\ws";
#[cfg(windows)]
const FILE: &str = r"C:\ws\doc.txt";
#[cfg(windows)]
const FILE_URI: &str = "file:///C:/ws/doc.txt";

fn text_of(pieces: &[&str]) -> String {
    pieces.concat()
}

/// A document, with its ending forced one of four ways.
fn document() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(prop::sample::select(PIECES), 0..40),
        0..4u8,
    )
        .prop_map(|(pieces, ending)| {
            let mut text = text_of(&pieces);
            match ending {
                1 => text.push('\n'),
                2 => text.push_str("\r\n"),
                3 => {
                    while text.ends_with(['\n', '\r']) {
                        text.pop();
                    }
                }
                _ => {}
            }
            text
        })
}

fn new_text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..3).prop_map(|p| text_of(&p))
}

/// An edit by character (scalar) offsets: replace `[start, end)` with `text`.
#[derive(Debug, Clone)]
struct CharEdit {
    start: usize,
    end: usize,
    text: String,
}

/// Non-overlapping edits for `doc`, in a random order. Offsets are drawn,
/// moved off the middle of a `\r\n` (no LSP position is there), sorted and
/// paired, so ranges may touch and several insertions may share a position.
fn edits_for(doc: &str) -> impl Strategy<Value = Vec<CharEdit>> {
    let chars: Vec<char> = doc.chars().collect();
    let n = chars.len();
    prop::collection::vec((0..=n, 0..=n, any::<bool>(), new_text(), any::<u8>()), 0..7).prop_map(
        move |raw| {
            let valid = |p: usize| {
                if p > 0 && p < n && chars[p - 1] == '\r' && chars[p] == '\n' {
                    p - 1
                } else {
                    p
                }
            };
            let mut offsets: Vec<usize> =
                raw.iter().flat_map(|r| [valid(r.0), valid(r.1)]).collect();
            offsets.sort_unstable();
            let mut edits: Vec<(u8, CharEdit)> = raw
                .iter()
                .enumerate()
                .map(|(i, (_, _, insertion, text, key))| {
                    let start = offsets[2 * i];
                    let end = if *insertion {
                        start
                    } else {
                        offsets[2 * i + 1]
                    };
                    (
                        *key,
                        CharEdit {
                            start,
                            end,
                            text: text.clone(),
                        },
                    )
                })
                .collect();
            // The order the edits are sent in: a stable sort by random keys.
            edits.sort_by_key(|(key, _)| *key);
            edits.into_iter().map(|(_, e)| e).collect()
        },
    )
}

/// The reference application, one character at a time: at each position,
/// first the insertions there in the order given, then the replacement
/// starting there (which skips the characters it covers).
fn reference_apply(doc: &str, edits: &[CharEdit]) -> String {
    let chars: Vec<char> = doc.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    loop {
        for e in edits.iter().filter(|e| e.start == i && e.end == i) {
            out.push_str(&e.text);
        }
        if let Some(e) = edits.iter().find(|e| e.start == i && e.end > i) {
            out.push_str(&e.text);
            i = e.end;
            continue;
        }
        match chars.get(i) {
            Some(c) => out.push(*c),
            None => break,
        }
        i += 1;
    }
    out
}

fn units(c: char, encoding: PositionEncoding) -> u64 {
    match encoding {
        PositionEncoding::Utf8 => c.len_utf8() as u64,
        PositionEncoding::Utf16 => c.len_utf16() as u64,
        PositionEncoding::Utf32 => 1,
    }
}

/// The reference converter: a character offset as an LSP `(line, character)`,
/// counting `\r\n`, `\r` and `\n` as line ends.
fn reference_position(doc: &str, offset: usize, encoding: PositionEncoding) -> (u64, u64) {
    let chars: Vec<char> = doc.chars().collect();
    let (mut line, mut character, mut i) = (0, 0, 0);
    while i < offset {
        match chars[i] {
            '\r' if chars.get(i + 1) == Some(&'\n') => {
                assert!(i + 1 < offset, "offset {offset} is inside a \\r\\n");
                line += 1;
                character = 0;
                i += 2;
            }
            '\r' | '\n' => {
                line += 1;
                character = 0;
                i += 1;
            }
            c => {
                character += units(c, encoding);
                i += 1;
            }
        }
    }
    (line, character)
}

/// Line `line`'s end as a character offset (before its terminator); the
/// document's end for lines past the last.
fn reference_line_end(doc: &str, line: u64) -> usize {
    let chars: Vec<char> = doc.chars().collect();
    let (mut current, mut i) = (0, 0);
    while i < chars.len() {
        if chars[i] == '\r' || chars[i] == '\n' {
            if current == line {
                return i;
            }
            current += 1;
            i += if chars[i] == '\r' && chars.get(i + 1) == Some(&'\n') {
                2
            } else {
                1
            };
        } else {
            i += 1;
        }
    }
    chars.len()
}

fn lsp_edit(start: (u64, u64), end: (u64, u64), text: &str) -> Value {
    json!({"range": {"start": {"line": start.0, "character": start.1},
                     "end": {"line": end.0, "character": end.1}}, "newText": text})
}

fn plan_for(edit: &Value, doc: &str, encoding: PositionEncoding) -> Result<Plan, PlanError> {
    let files: HashMap<PathBuf, Entry> = [(PathBuf::from(FILE), Entry::versioned(doc, 7))].into();
    let current = move |path: &Path| files.get(path).cloned();
    plan(
        edit,
        &PlanContext {
            encoding,
            current: &current,
            writable: &|p: &Path| p.starts_with(ROOT),
            decisions: &Decisions::default(),
        },
    )
}

/// The document's text after the plan (unchanged when nothing is written).
fn result_text(plan: &Plan, doc: &str) -> String {
    match plan.operations.as_slice() {
        [] => doc.to_string(),
        [FileOperation::Write { path, old, new, .. }] => {
            assert_eq!(path, Path::new(FILE));
            assert_eq!(old, doc);
            new.clone()
        }
        other => panic!("unexpected operations {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn planner_matches_the_reference_in_every_encoding(
        (doc, edits, shape) in document().prop_flat_map(|doc| {
            let edits = edits_for(&doc);
            (Just(doc), edits, 0..3u8)
        })
    ) {
        let expected = reference_apply(&doc, &edits);
        for encoding in ENCODINGS {
            let lsp: Vec<Value> = edits
                .iter()
                .map(|e| lsp_edit(
                    reference_position(&doc, e.start, encoding),
                    reference_position(&doc, e.end, encoding),
                    &e.text,
                ))
                .collect();
            let edit = match shape {
                0 => json!({"changes": {FILE_URI: lsp}}),
                1 => json!({"documentChanges": [
                    {"textDocument": {"uri": FILE_URI, "version": 7}, "edits": lsp}]}),
                _ => json!({"documentChanges": [
                    {"textDocument": {"uri": FILE_URI, "version": null}, "edits": lsp}]}),
            };
            let plan = plan_for(&edit, &doc, encoding)
                .map_err(|e| TestCaseError::fail(format!("{encoding:?}: {e}")))?;
            prop_assert_eq!(result_text(&plan, &doc), expected.clone(), "{:?}", encoding);
        }
    }

    #[test]
    fn characters_past_the_line_end_clamp_to_it(
        (doc, line, extra) in document().prop_flat_map(|doc| {
            // Line ends: each `\r\n` has one `\r` and one `\n` but is one end.
            let ends = doc.matches(['\r', '\n']).count() - doc.matches("\r\n").count();
            (Just(doc), 0..(ends as u64 + 3), 0..5u64)
        })
    ) {
        let end = reference_line_end(&doc, line);
        let mut expected: String = doc.chars().take(end).collect();
        expected.push('X');
        expected.extend(doc.chars().skip(end));
        for encoding in ENCODINGS {
            let (l, c) = reference_position(&doc, end, encoding);
            // At or past the line's end, and for lines past the last, far past.
            let at = if l == line { (line, c + extra) } else { (line, c + extra + 1000) };
            let edit = json!({"changes": {FILE_URI: [lsp_edit(at, at, "X")]}});
            let plan = plan_for(&edit, &doc, encoding)
                .map_err(|e| TestCaseError::fail(format!("{encoding:?}: {e}")))?;
            prop_assert_eq!(result_text(&plan, &doc), expected.clone(), "{:?}", encoding);
        }
    }

    #[test]
    fn overlapping_edits_are_rejected_with_their_change_index(
        (doc, a, b, c, before, swap) in document()
            .prop_filter("two characters", |d| d.chars().count() >= 3)
            .prop_flat_map(|doc| {
                let n = doc.chars().count();
                (Just(doc), 0..n - 2, 2..n + 1, any::<prop::sample::Index>(), 0..3usize, any::<bool>())
            })
            .prop_map(|(doc, a, b, c, before, swap)| {
                let b = b.max(a + 2);
                // A point strictly inside [a, b).
                let c = a + 1 + c.index(b - a - 1);
                (doc, a, b, c, before, swap)
            })
    ) {
        let chars: Vec<char> = doc.chars().collect();
        let inside_crlf = |p: usize| p > 0 && p < chars.len() && chars[p - 1] == '\r' && chars[p] == '\n';
        prop_assume!(!inside_crlf(a) && !inside_crlf(b) && !inside_crlf(c));
        let encoding = PositionEncoding::Utf16;
        let pos = |o| reference_position(&doc, o, encoding);
        let mut edits = vec![lsp_edit(pos(a), pos(b), "R"), lsp_edit(pos(c), pos(c), "I")];
        if swap {
            edits.reverse();
        }
        let mut changes: Vec<Value> = (0..before)
            .map(|_| json!({"textDocument": {"uri": FILE_URI, "version": null}, "edits": []}))
            .collect();
        changes.push(json!({"textDocument": {"uri": FILE_URI, "version": null}, "edits": edits}));
        let e = plan_for(&json!({"documentChanges": changes}), &doc, encoding)
            .expect_err("overlap");
        prop_assert_eq!(e.failed_change, Some(before));
        prop_assert_eq!(
            e.kind,
            PlanErrorKind::Overlap { path: PathBuf::from(FILE), first: 0, second: 1 }
        );
    }
}

#[test]
fn reference_helpers_agree_with_known_positions() {
    let doc = "a😀\r\nb\rc";
    assert_eq!(reference_position(doc, 2, PositionEncoding::Utf16), (0, 3));
    assert_eq!(reference_position(doc, 2, PositionEncoding::Utf8), (0, 5));
    assert_eq!(reference_position(doc, 4, PositionEncoding::Utf32), (1, 0));
    assert_eq!(reference_position(doc, 6, PositionEncoding::Utf32), (2, 0));
    assert_eq!(reference_line_end(doc, 0), 2);
    assert_eq!(reference_line_end(doc, 9), 7);
    let edits = [
        CharEdit {
            start: 1,
            end: 1,
            text: "x".into(),
        },
        CharEdit {
            start: 1,
            end: 2,
            text: "R".into(),
        },
        CharEdit {
            start: 1,
            end: 1,
            text: "y".into(),
        },
    ];
    assert_eq!(reference_apply("abc", &edits), "axyRc");
}

/// A workspace on disk with a real `Confinement` over it.
struct Workspace {
    _dir: tempfile::TempDir,
    root: PathBuf,
    confinement: Confinement,
}

impl Workspace {
    fn new() -> Workspace {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = fs::canonicalize(dir.path()).expect("canonical");
        // `C:\…`, as the plan names files, not canonicalize's `\\?\C:\…`.
        #[cfg(windows)]
        let root = PathBuf::from(root.display().to_string().trim_start_matches(r"\\?\"));
        fs::create_dir(root.join("proj")).expect("mkdir");
        let confinement = Confinement::new(&[root.join("proj")], &[], &[]);
        Workspace {
            _dir: dir,
            root,
            confinement,
        }
    }

    fn uri(&self, rel: &str) -> String {
        url::Url::from_file_path(self.root.join(rel))
            .expect("url")
            .to_string()
    }

    fn plan(&self, edit: &Value) -> Result<Plan, PlanError> {
        plan_on_disk(
            edit,
            PositionEncoding::Utf16,
            &|p: &Path| self.confinement.is_writable(p),
            &Decisions::default(),
        )
    }
}

#[cfg(unix)]
#[test]
fn confinement_refuses_writes_outside_the_roots() {
    let ws = Workspace::new();
    fs::write(ws.root.join("proj/a.rs"), "a").expect("write");
    fs::write(ws.root.join("secret"), "s").expect("write");
    std::os::unix::fs::symlink(ws.root.join("secret"), ws.root.join("proj/link")).expect("symlink");
    let insert = lsp_edit((0, 0), (0, 0), "x");
    for (uri, change) in [
        (ws.uri("secret"), 1),
        (ws.uri("proj/../secret"), 1),
        (ws.uri("proj/link"), 1),
    ] {
        let edit = json!({"documentChanges": [
            {"textDocument": {"uri": ws.uri("proj/a.rs"), "version": null}, "edits": [insert]},
            {"textDocument": {"uri": uri, "version": null}, "edits": [insert]},
        ]});
        let e = ws.plan(&edit).expect_err("outside the roots");
        assert_eq!(e.failed_change, Some(change), "{uri}: {e}");
        assert!(
            matches!(e.kind, PlanErrorKind::NotWritable { .. }),
            "{uri}: {e}"
        );
    }
    let e = ws
        .plan(&json!({"documentChanges": [
            {"kind": "rename", "oldUri": ws.uri("proj/a.rs"), "newUri": ws.uri("stolen.rs")},
        ]}))
        .expect_err("rename out");
    assert!(matches!(e.kind, PlanErrorKind::NotWritable { .. }), "{e}");
    assert_eq!(
        fs::read_to_string(ws.root.join("secret")).expect("read"),
        "s"
    );
}

#[test]
fn end_to_end_rename_edit_and_dry_run_on_disk() {
    let ws = Workspace::new();
    fs::write(ws.root.join("proj/lib.rs"), "mod old;\r\n").expect("write");
    fs::write(ws.root.join("proj/old.rs"), "pub fn f() {}\r\n").expect("write");
    let edit = json!({"documentChanges": [
        {"kind": "rename", "oldUri": ws.uri("proj/old.rs"), "newUri": ws.uri("proj/new.rs")},
        {"textDocument": {"uri": ws.uri("proj/lib.rs"), "version": null},
         "edits": [lsp_edit((0, 4), (0, 7), "new")]},
        {"textDocument": {"uri": ws.uri("proj/new.rs"), "version": null},
         "edits": [lsp_edit((0, 7), (0, 8), "g"), lsp_edit((0, 99), (0, 99), " // moved")]},
    ]});
    let plan = ws.plan(&edit).expect("plan");
    assert_eq!(
        dry_run(&plan, &ws.root),
        "diff --git a/proj/old.rs b/proj/new.rs\nsimilarity index 100%\n\
         rename from proj/old.rs\nrename to proj/new.rs\n\
         diff --git a/proj/lib.rs b/proj/lib.rs\n\
         --- a/proj/lib.rs\n+++ b/proj/lib.rs\n@@ -1 +1 @@\n-mod old;\r\n+mod new;\r\n\
         diff --git a/proj/new.rs b/proj/new.rs\n\
         --- a/proj/new.rs\n+++ b/proj/new.rs\n@@ -1 +1 @@\n-pub fn f() {}\r\n+pub fn g() {} // moved\r\n"
    );
    let report = apply_to_disk(&plan).expect("apply");
    assert_eq!(
        report.renamed,
        vec![(ws.root.join("proj/old.rs"), ws.root.join("proj/new.rs"))]
    );
    assert_eq!(
        report.written,
        vec![ws.root.join("proj/lib.rs"), ws.root.join("proj/new.rs")]
    );
    assert_eq!(
        fs::read_to_string(ws.root.join("proj/lib.rs")).expect("read"),
        "mod new;\r\n"
    );
    assert_eq!(
        fs::read_to_string(ws.root.join("proj/new.rs")).expect("read"),
        "pub fn g() {} // moved\r\n"
    );
    assert!(!ws.root.join("proj/old.rs").exists());
}

#[test]
fn disk_apply_is_all_or_nothing() {
    // A create below a regular file fails at commit, as root too; the edit
    // and the rename before it are undone.
    let ws = Workspace::new();
    fs::write(ws.root.join("proj/a.rs"), "a").expect("write");
    fs::write(ws.root.join("proj/b.rs"), "b").expect("write");
    fs::write(ws.root.join("proj/file"), "f").expect("write");
    let edit = json!({"documentChanges": [
        {"textDocument": {"uri": ws.uri("proj/a.rs"), "version": null},
         "edits": [lsp_edit((0, 0), (0, 0), "x")]},
        {"kind": "rename", "oldUri": ws.uri("proj/b.rs"), "newUri": ws.uri("proj/c.rs")},
        {"kind": "create", "uri": ws.uri("proj/file/below.rs")},
    ]});
    let plan = ws.plan(&edit).expect("plan");
    let e = apply_to_disk(&plan).expect_err("must fail");
    let acp_lsp::edit::ApplyError::Commit {
        operation, report, ..
    } = e
    else {
        panic!("expected a commit failure: {e}");
    };
    assert_eq!(operation, 2);
    assert!(report.rolled_back);
    assert_eq!(
        fs::read_to_string(ws.root.join("proj/a.rs")).expect("read"),
        "a"
    );
    assert_eq!(
        fs::read_to_string(ws.root.join("proj/b.rs")).expect("read"),
        "b"
    );
    let mut names: Vec<String> = fs::read_dir(ws.root.join("proj"))
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, vec!["a.rs", "b.rs", "file"]);
}
