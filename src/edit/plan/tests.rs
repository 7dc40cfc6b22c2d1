//! Unit tests of `edit/plan.rs`.

use super::*;
use crate::test_paths::{os_pathbuf, os_uri};
use serde_json::json;
use std::collections::HashMap;

/// The root, `/ws` (`C:\ws` on Windows).
fn root() -> PathBuf {
    os_pathbuf("/ws")
}

fn p(name: &str) -> PathBuf {
    root().join(name)
}

fn uri(name: &str) -> String {
    os_uri(&format!("/ws/{name}"))
}

fn in_root(path: &Path) -> bool {
    path.starts_with(root())
}

fn run_with(
    edit: Value,
    files: &[(&str, Entry)],
    encoding: PositionEncoding,
    decisions: &Decisions,
) -> Result<Plan, PlanError> {
    let map: HashMap<PathBuf, Entry> = files
        .iter()
        .map(|(name, entry)| (p(name), entry.clone()))
        .collect();
    let current = move |path: &Path| map.get(path).cloned();
    plan(
        &edit,
        &PlanContext {
            encoding,
            current: &current,
            writable: &in_root,
            decisions,
        },
    )
}

fn run(edit: Value, files: &[(&str, Entry)]) -> Result<Plan, PlanError> {
    run_with(edit, files, PositionEncoding::Utf16, &Decisions::default())
}

fn edit(sl: u64, sc: u64, el: u64, ec: u64, text: &str) -> Value {
    json!({"range": {"start": {"line": sl, "character": sc},
                         "end": {"line": el, "character": ec}}, "newText": text})
}

fn text_doc(name: &str, version: Value, edits: Vec<Value>) -> Value {
    json!({"textDocument": {"uri": uri(name), "version": version}, "edits": edits})
}

/// The final text of `name` after the plan's writes, if it has any.
fn final_text(plan: &Plan, name: &str) -> Option<String> {
    plan.operations.iter().rev().find_map(|op| match op {
        FileOperation::Write { path, new, .. } if *path == p(name) => Some(new.clone()),
        _ => None,
    })
}

fn err_of(result: Result<Plan, PlanError>) -> PlanError {
    result.expect_err("planning should fail")
}

#[test]
fn changes_map_with_edits_in_any_order() {
    let plan = run(
        json!({"changes": {uri("a.rs"): [
            edit(1, 0, 1, 3, "BBB"),
            edit(0, 0, 0, 1, "X"),
            edit(2, 3, 2, 3, "!"),
        ]}}),
        &[("a.rs", Entry::text("abc\nbbb\nccc"))],
    )
    .expect("plan");
    assert_eq!(plan.operations.len(), 1);
    let FileOperation::Write {
        old, new, change, ..
    } = &plan.operations[0]
    else {
        panic!("expected a write: {plan:?}");
    };
    assert_eq!(old, "abc\nbbb\nccc");
    assert_eq!(new, "Xbc\nBBB\nccc!");
    assert_eq!(*change, 0);
    assert_eq!(
        plan.basis,
        vec![(p("a.rs"), Some(Entry::text("abc\nbbb\nccc")))]
    );
}

#[test]
fn document_changes_win_over_changes() {
    let plan = run(
        json!({
            "changes": {uri("a.rs"): [edit(0, 0, 0, 0, "from changes")]},
            "documentChanges": [text_doc("a.rs", Value::Null, vec![edit(0, 0, 0, 0, "dc ")])]
        }),
        &[("a.rs", Entry::text("x"))],
    )
    .expect("plan");
    assert_eq!(final_text(&plan, "a.rs").as_deref(), Some("dc x"));
}

#[test]
fn insertions_at_one_position_keep_their_order() {
    let plan = run(
        json!({"changes": {uri("a.rs"): [
            edit(0, 1, 0, 2, "R"),
            edit(0, 1, 0, 1, "1"),
            edit(0, 1, 0, 1, "2"),
            edit(0, 2, 0, 2, "3"),
        ]}}),
        &[("a.rs", Entry::text("abc"))],
    )
    .expect("plan");
    // Insertions at 1 in array order, then the replacement of "b", then
    // the insertion where the replacement ends.
    assert_eq!(final_text(&plan, "a.rs").as_deref(), Some("a12R3c"));
}

#[test]
fn overlapping_edits_are_rejected_with_the_failing_change() {
    let e = err_of(run(
        json!({"documentChanges": [
            text_doc("a.rs", Value::Null, vec![edit(0, 0, 0, 1, "x")]),
            text_doc("b.rs", Value::Null, vec![edit(0, 0, 0, 3, "x"), edit(0, 5, 0, 5, "y"), edit(0, 2, 0, 4, "z")]),
        ]}),
        &[
            ("a.rs", Entry::text("abcdef")),
            ("b.rs", Entry::text("abcdef")),
        ],
    ));
    assert_eq!(e.failed_change, Some(1));
    assert_eq!(
        e.kind,
        PlanErrorKind::Overlap {
            path: p("b.rs"),
            first: 0,
            second: 2
        }
    );
    // An insertion strictly inside a replaced range overlaps it too.
    let e = err_of(run(
        json!({"changes": {uri("a.rs"): [edit(0, 0, 0, 3, "x"), edit(0, 1, 0, 1, "y")]}}),
        &[("a.rs", Entry::text("abcdef"))],
    ));
    assert!(matches!(e.kind, PlanErrorKind::Overlap { .. }), "{e}");
    // Identical non-empty ranges overlap.
    let e = err_of(run(
        json!({"changes": {uri("a.rs"): [edit(0, 0, 0, 3, "x"), edit(0, 0, 0, 3, "y")]}}),
        &[("a.rs", Entry::text("abcdef"))],
    ));
    assert!(matches!(e.kind, PlanErrorKind::Overlap { .. }), "{e}");
}

#[test]
fn version_is_checked_when_both_are_known() {
    let files = [("a.rs", Entry::versioned("abc", 4))];
    let e = err_of(run(
        json!({"documentChanges": [text_doc("a.rs", json!(3), vec![edit(0, 0, 0, 0, "x")])]}),
        &files,
    ));
    assert_eq!(e.failed_change, Some(0));
    assert_eq!(
        e.kind,
        PlanErrorKind::VersionMismatch {
            path: p("a.rs"),
            expected: 3,
            actual: 4
        }
    );
    for version in [json!(4), Value::Null] {
        let plan = run(
            json!({"documentChanges": [text_doc("a.rs", version, vec![edit(0, 0, 0, 0, "x")])]}),
            &files,
        )
        .expect("matching or null version");
        assert_eq!(final_text(&plan, "a.rs").as_deref(), Some("xabc"));
    }
    // A file without a known version accepts any version.
    run(
        json!({"documentChanges": [text_doc("a.rs", json!(9), vec![edit(0, 0, 0, 0, "x")])]}),
        &[("a.rs", Entry::text("abc"))],
    )
    .expect("unknown current version");
}

#[test]
fn positions_past_the_line_end_clamp() {
    let plan = run(
        json!({"changes": {uri("a.rs"): [edit(0, 2, 0, 99, "Z"), edit(7, 0, 9, 0, "!")]}}),
        &[("a.rs", Entry::text("abcd\r\nef"))],
    )
    .expect("plan");
    assert_eq!(final_text(&plan, "a.rs").as_deref(), Some("abZ\r\nef!"));
}

#[test]
fn crlf_and_lone_cr_are_line_ends() {
    let plan = run(
        json!({"changes": {uri("a.rs"): [
            edit(1, 0, 1, 1, "B"),
            edit(2, 0, 2, 1, "C"),
            edit(3, 0, 3, 1, "D"),
        ]}}),
        &[("a.rs", Entry::text("a\r\nb\rc\nd"))],
    )
    .expect("plan");
    assert_eq!(final_text(&plan, "a.rs").as_deref(), Some("a\r\nB\rC\nD"));
}

#[test]
fn encodings_address_the_same_character() {
    let text = "x😀é\u{301}y";
    // The 'y': UTF-8 byte 9, UTF-16 unit 5, scalar 4.
    for (encoding, character) in [
        (PositionEncoding::Utf8, 9),
        (PositionEncoding::Utf16, 5),
        (PositionEncoding::Utf32, 4),
    ] {
        let plan = run_with(
            json!({"changes": {uri("a.rs"): [edit(0, character, 0, character + 1, "Y")]}}),
            &[("a.rs", Entry::text(text))],
            encoding,
            &Decisions::default(),
        )
        .expect("plan");
        assert_eq!(
            final_text(&plan, "a.rs").as_deref(),
            Some("x😀é\u{301}Y"),
            "{encoding:?}"
        );
    }
}

#[test]
fn a_position_inside_a_surrogate_pair_is_refused() {
    let e = err_of(run(
        json!({"changes": {uri("a.rs"): [edit(0, 1, 0, 1, "x")]}}),
        &[("a.rs", Entry::text("😀"))],
    ));
    assert!(
        matches!(e.kind, PlanErrorKind::InvalidRange { edit: 0, .. }),
        "{e}"
    );
}

#[test]
fn reversed_range_is_refused() {
    let e = err_of(run(
        json!({"changes": {uri("a.rs"): [edit(0, 2, 0, 1, "x")]}}),
        &[("a.rs", Entry::text("abc"))],
    ));
    assert!(matches!(e.kind, PlanErrorKind::InvalidRange { .. }), "{e}");
}

#[test]
fn rename_then_edit_edits_the_renamed_file() {
    let plan = run(
        json!({"documentChanges": [
            {"kind": "rename", "oldUri": uri("old.rs"), "newUri": uri("new.rs")},
            text_doc("new.rs", Value::Null, vec![edit(0, 0, 0, 0, "// moved\n")]),
        ]}),
        &[("old.rs", Entry::versioned("fn f() {}", 3))],
    )
    .expect("plan");
    assert_eq!(
        plan.operations[0],
        FileOperation::Rename {
            from: p("old.rs"),
            to: p("new.rs"),
            overwrite: false,
            change: 0,
            annotations: vec![]
        }
    );
    assert_eq!(
        final_text(&plan, "new.rs").as_deref(),
        Some("// moved\nfn f() {}")
    );
    // The old name is gone afterwards.
    let e = err_of(run(
        json!({"documentChanges": [
            {"kind": "rename", "oldUri": uri("old.rs"), "newUri": uri("new.rs")},
            text_doc("old.rs", Value::Null, vec![edit(0, 0, 0, 0, "x")]),
        ]}),
        &[("old.rs", Entry::text("fn f() {}"))],
    ));
    assert_eq!(e.failed_change, Some(1));
    assert_eq!(e.kind, PlanErrorKind::NotFound { path: p("old.rs") });
}

#[test]
fn directory_rename_carries_its_files() {
    let plan = run(
        json!({"documentChanges": [
            {"kind": "rename", "oldUri": uri("src"), "newUri": uri("lib")},
            text_doc("lib/m.rs", Value::Null, vec![edit(0, 0, 0, 0, "x")]),
        ]}),
        &[("src", Entry::Directory), ("src/m.rs", Entry::text("m"))],
    )
    .expect("plan");
    assert_eq!(final_text(&plan, "lib/m.rs").as_deref(), Some("xm"));
    let e = err_of(run(
        json!({"documentChanges": [
            {"kind": "rename", "oldUri": uri("src"), "newUri": uri("src/inner")},
        ]}),
        &[("src", Entry::Directory)],
    ));
    assert!(matches!(e.kind, PlanErrorKind::InvalidRename { .. }), "{e}");
}

#[test]
fn rename_options() {
    let files = [("a", Entry::text("A")), ("b", Entry::text("B"))];
    let rename = |options: Value| {
        json!({"documentChanges": [
            {"kind": "rename", "oldUri": uri("a"), "newUri": uri("b"), "options": options},
        ]})
    };
    let e = err_of(run(rename(json!({})), &files));
    assert_eq!(e.kind, PlanErrorKind::AlreadyExists { path: p("b") });
    let plan = run(rename(json!({"ignoreIfExists": true})), &files).expect("ignored");
    assert!(plan.operations.is_empty());
    let plan = run(
        rename(json!({"overwrite": true, "ignoreIfExists": true})),
        &files,
    )
    .expect("overwrite wins");
    assert!(matches!(
        plan.operations[0],
        FileOperation::Rename {
            overwrite: true,
            ..
        }
    ));
    let e = err_of(run(
        rename(json!({"overwrite": true})),
        &[("a", Entry::text("A")), ("b", Entry::Directory)],
    ));
    assert!(matches!(e.kind, PlanErrorKind::Conflict { .. }), "{e}");
    let e = err_of(run(rename(json!({})), &[]));
    assert_eq!(e.kind, PlanErrorKind::NotFound { path: p("a") });
}

#[test]
fn create_with_and_without_overwrite() {
    let create = |options: Value| {
        json!({"documentChanges": [
            {"kind": "create", "uri": uri("n.rs"), "options": options},
            text_doc("n.rs", Value::Null, vec![edit(0, 0, 0, 0, "new")]),
        ]})
    };
    // Nothing there: created, then edited.
    let plan = run(create(json!({})), &[]).expect("create");
    assert_eq!(
        plan.operations[0],
        FileOperation::Create {
            path: p("n.rs"),
            overwrite: false,
            old: None,
            change: 0,
            annotations: vec![]
        }
    );
    assert_eq!(final_text(&plan, "n.rs").as_deref(), Some("new"));
    let existing = [("n.rs", Entry::text("old"))];
    // Existing, no options: refused.
    let e = err_of(run(create(json!({})), &existing));
    assert_eq!(e.failed_change, Some(0));
    assert_eq!(e.kind, PlanErrorKind::AlreadyExists { path: p("n.rs") });
    // Existing, ignoreIfExists: the create is skipped, the edit applies to the old text.
    let plan = run(create(json!({"ignoreIfExists": true})), &existing).expect("ignore");
    assert_eq!(plan.operations.len(), 1);
    assert_eq!(final_text(&plan, "n.rs").as_deref(), Some("newold"));
    // Existing, overwrite (wins over ignoreIfExists): emptied, then edited.
    let plan = run(
        create(json!({"overwrite": true, "ignoreIfExists": true})),
        &existing,
    )
    .expect("overwrite");
    assert!(matches!(
        &plan.operations[0],
        FileOperation::Create { overwrite: true, old: Some(old), .. } if old == "old"
    ));
    assert_eq!(final_text(&plan, "n.rs").as_deref(), Some("new"));
    // A directory cannot be overwritten by a file.
    let e = err_of(run(
        create(json!({"overwrite": true})),
        &[("n.rs", Entry::Directory)],
    ));
    assert!(matches!(e.kind, PlanErrorKind::Conflict { .. }), "{e}");
}

#[test]
fn delete_options_and_recursion() {
    let delete = |name: &str, options: Value| json!({"documentChanges": [{"kind": "delete", "uri": uri(name), "options": options}]});
    let files = [("d", Entry::Directory), ("d/x.rs", Entry::text("x"))];
    let plan = run(delete("d", json!({"recursive": true})), &files).expect("delete");
    assert_eq!(
        plan.operations,
        vec![FileOperation::Delete {
            path: p("d"),
            recursive: true,
            directory: true,
            old: None,
            change: 0,
            annotations: vec![]
        }]
    );
    let e = err_of(run(delete("gone", json!({})), &files));
    assert_eq!(e.kind, PlanErrorKind::NotFound { path: p("gone") });
    let plan = run(delete("gone", json!({"ignoreIfNotExists": true})), &files).expect("skip");
    assert!(plan.operations.is_empty());
    // After a recursive delete, files below the directory are gone.
    let e = err_of(run(
        json!({"documentChanges": [
            {"kind": "delete", "uri": uri("d"), "options": {"recursive": true}},
            text_doc("d/x.rs", Value::Null, vec![edit(0, 0, 0, 0, "y")]),
        ]}),
        &files,
    ));
    assert_eq!(e.failed_change, Some(1));
    assert_eq!(e.kind, PlanErrorKind::NotFound { path: p("d/x.rs") });
}

#[test]
fn paths_outside_the_roots_are_refused() {
    let e = err_of(run(
        json!({"documentChanges": [
            text_doc("a.rs", Value::Null, vec![edit(0, 0, 0, 0, "x")]),
            {"kind": "create", "uri": os_uri("/etc/evil")},
        ]}),
        &[("a.rs", Entry::text(""))],
    ));
    assert_eq!(e.failed_change, Some(1));
    assert_eq!(
        e.kind,
        PlanErrorKind::NotWritable {
            path: os_pathbuf("/etc/evil")
        }
    );
    // Renaming out of the roots is refused as well, and the lookup is
    // never asked about the outside path.
    let e = err_of(run(
        json!({"documentChanges": [
            {"kind": "rename", "oldUri": uri("a.rs"), "newUri": os_uri("/tmp/a.rs")},
        ]}),
        &[("a.rs", Entry::text(""))],
    ));
    assert!(matches!(e.kind, PlanErrorKind::NotWritable { .. }), "{e}");
    let e = err_of(run(
        json!({"changes": {"untitled:Untitled-1": [edit(0, 0, 0, 0, "x")]}}),
        &[],
    ));
    assert!(matches!(e.kind, PlanErrorKind::InvalidUri { .. }), "{e}");
}

#[test]
fn needs_confirmation_is_surfaced_not_applied_silently() {
    let edit = json!({
        "changeAnnotations": {
            "risky": {"label": "Rename file", "needsConfirmation": true, "description": "moves a.rs"},
            "plain": {"label": "Fix"},
            "unused": {"label": "Never used", "needsConfirmation": true},
        },
        "documentChanges": [
            {"kind": "rename", "oldUri": uri("a.rs"), "newUri": uri("b.rs"), "annotationId": "risky"},
            {"textDocument": {"uri": uri("c.rs"), "version": null}, "edits": [
                {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                 "newText": "x", "annotationId": "plain"},
            ]},
        ]
    });
    let files = [("a.rs", Entry::text("a")), ("c.rs", Entry::text("c"))];
    let mut plan = run(edit.clone(), &files).expect("plan");
    assert_eq!(
        plan.needs_confirmation,
        vec![Annotation {
            id: "risky".into(),
            label: "Rename file".into(),
            description: Some("moves a.rs".into())
        }]
    );
    assert_eq!(plan.operations.len(), 2);
    assert_eq!(plan.operations[0].annotations(), ["risky".to_string()]);
    assert_eq!(plan.operations[1].annotations(), ["plain".to_string()]);
    assert!(!plan.unconfirmed().is_empty());
    plan.confirm(["risky"]);
    assert!(plan.unconfirmed().is_empty());

    // Confirmed up front.
    let decisions = Decisions {
        confirmed: ["risky".to_string()].into(),
        declined: BTreeSet::new(),
    };
    let plan = run_with(edit.clone(), &files, PositionEncoding::Utf16, &decisions).expect("plan");
    assert!(plan.unconfirmed().is_empty());

    // Declined: the rename is left out, the rest planned without it.
    let decisions = Decisions {
        confirmed: BTreeSet::new(),
        declined: ["risky".to_string()].into(),
    };
    let plan = run_with(edit, &files, PositionEncoding::Utf16, &decisions).expect("plan");
    assert!(plan.needs_confirmation.is_empty());
    assert_eq!(plan.operations.len(), 1);
    assert_eq!(final_text(&plan, "c.rs").as_deref(), Some("xc"));
}

#[test]
fn a_change_that_does_nothing_asks_nothing() {
    let plan = run(
        json!({
            "changeAnnotations": {"c": {"label": "Create", "needsConfirmation": true}},
            "documentChanges": [{"kind": "create", "uri": uri("n"), "annotationId": "c",
                                 "options": {"ignoreIfExists": true}}]
        }),
        &[("n", Entry::text("there"))],
    )
    .expect("plan");
    assert!(plan.operations.is_empty());
    assert!(plan.needs_confirmation.is_empty());
}

#[test]
fn unknown_annotation_is_refused() {
    let e = err_of(run(
        json!({"documentChanges": [{"kind": "create", "uri": uri("n"), "annotationId": "nope"}]}),
        &[],
    ));
    assert_eq!(e.failed_change, Some(0));
    assert_eq!(
        e.kind,
        PlanErrorKind::UnknownAnnotation { id: "nope".into() }
    );
}

#[test]
fn malformed_edits_say_where() {
    let e = err_of(run(json!([]), &[]));
    assert_eq!(e.failed_change, None);
    let e = err_of(run(
        json!({"documentChanges": [{"kind": "create", "uri": uri("n")}, {"kind": "copy"}]}),
        &[],
    ));
    assert_eq!(e.failed_change, Some(1));
    let e = err_of(run(
        json!({"changes": {uri("a.rs"): [{"range": {"start": {"line": -1, "character": 0},
                                                        "end": {"line": 0, "character": 0}}, "newText": ""}]}}),
        &[("a.rs", Entry::text(""))],
    ));
    assert!(matches!(e.kind, PlanErrorKind::Malformed(_)), "{e}");
    assert!(e.to_string().starts_with("change 0: "), "{e}");
    let plan = run(json!({}), &[]).expect("an empty edit is fine");
    assert!(plan.operations.is_empty());
}

#[test]
fn edits_that_change_nothing_write_nothing() {
    let plan = run(
        json!({"changes": {uri("a.rs"): [edit(0, 0, 0, 1, "a")]}}),
        &[("a.rs", Entry::text("abc"))],
    )
    .expect("plan");
    assert!(plan.operations.is_empty());
}

#[test]
fn edits_of_missing_files_and_directories_are_refused() {
    let e = err_of(run(
        json!({"changes": {uri("nope.rs"): [edit(0, 0, 0, 0, "x")]}}),
        &[],
    ));
    assert_eq!(e.kind, PlanErrorKind::NotFound { path: p("nope.rs") });
    let e = err_of(run(
        json!({"changes": {uri("d"): [edit(0, 0, 0, 0, "x")]}}),
        &[("d", Entry::Directory)],
    ));
    assert_eq!(e.kind, PlanErrorKind::NotAFile { path: p("d") });
    let e = err_of(run(
        json!({"changes": {uri("bin"): [edit(0, 0, 0, 0, "x")]}}),
        &[("bin", Entry::Opaque)],
    ));
    assert_eq!(e.kind, PlanErrorKind::NotText { path: p("bin") });
}

#[test]
fn sequential_edits_of_one_file_see_each_other() {
    let plan = run(
        json!({"documentChanges": [
            text_doc("a.rs", json!(1), vec![edit(0, 0, 0, 0, "12")]),
            text_doc("a.rs", json!(1), vec![edit(0, 2, 0, 2, "34")]),
        ]}),
        &[("a.rs", Entry::versioned("ab", 1))],
    )
    .expect("plan");
    // After the first edit the document's version is unknown, so the
    // second one's version is not checked.
    assert_eq!(plan.operations.len(), 2);
    assert_eq!(final_text(&plan, "a.rs").as_deref(), Some("1234ab"));
}

#[test]
fn the_lookup_is_asked_once_per_path() {
    let asked = std::cell::RefCell::new(Vec::new());
    let current = |path: &Path| {
        asked.borrow_mut().push(path.to_path_buf());
        None
    };
    let plan = plan(
        &json!({"documentChanges": [
            {"kind": "delete", "uri": uri("n"), "options": {"ignoreIfNotExists": true}},
            {"kind": "create", "uri": uri("n")},
        ]}),
        &PlanContext {
            encoding: PositionEncoding::Utf16,
            current: &current,
            writable: &in_root,
            decisions: &Decisions::default(),
        },
    )
    .expect("plan");
    assert_eq!(*asked.borrow(), vec![p("n")]);
    assert_eq!(plan.basis, vec![(p("n"), None)]);
}

#[test]
fn touched_paths_lists_every_uri_once() {
    let paths = touched_paths(&json!({"documentChanges": [
        {"kind": "rename", "oldUri": uri("a"), "newUri": uri("b")},
        text_doc("b", Value::Null, vec![]),
        {"kind": "delete", "uri": uri("c")},
    ]}))
    .expect("paths");
    assert_eq!(paths, vec![p("a"), p("b"), p("c")]);
}
