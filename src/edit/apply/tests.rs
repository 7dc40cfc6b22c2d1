//! Unit tests of `edit/apply.rs`.

use super::*;
use serde_json::{json, Value};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }
    fn root(&self) -> PathBuf {
        fs::canonicalize(self.dir.path()).expect("canonical root")
    }
    fn path(&self, name: &str) -> PathBuf {
        self.root().join(name)
    }
    fn uri(&self, name: &str) -> String {
        url::Url::from_file_path(self.path(name))
            .expect("file url")
            .to_string()
    }
    fn write(&self, name: &str, text: &str) {
        let path = self.path(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("mkdir");
        }
        fs::write(path, text).expect("write");
    }
    fn read(&self, name: &str) -> Option<String> {
        fs::read_to_string(self.path(name)).ok()
    }
    fn plan(&self, edit: &Value) -> Result<Plan, PlanError> {
        let root = self.root();
        plan_on_disk(
            edit,
            PositionEncoding::Utf16,
            &|p: &Path| p.starts_with(&root),
            &Decisions::default(),
        )
    }
    /// Every entry of the tree, recursively, so tests can assert that no
    /// temporary or backup file is left behind.
    fn listing(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![self.root()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir).expect("read_dir") {
                let path = entry.expect("entry").path();
                out.push(
                    path.strip_prefix(self.root())
                        .expect("below root")
                        .display()
                        .to_string(),
                );
                if path.is_dir() && !path.is_symlink() {
                    stack.push(path);
                }
            }
        }
        out.sort();
        out
    }
}

fn insert(line: u64, character: u64, text: &str) -> Value {
    json!({"range": {"start": {"line": line, "character": character},
                         "end": {"line": line, "character": character}}, "newText": text})
}

fn doc(uri: String, edits: Vec<Value>) -> Value {
    json!({"textDocument": {"uri": uri, "version": null}, "edits": edits})
}

#[test]
fn writes_are_applied_and_permissions_kept() {
    let t = Tree::new();
    t.write("a.rs", "fn a() {}\n");
    t.write("b.sh", "echo b\n");
    fs::set_permissions(t.path("b.sh"), fs::Permissions::from_mode(0o751)).expect("chmod");
    let plan = t
        .plan(&json!({"documentChanges": [
            doc(t.uri("a.rs"), vec![insert(0, 0, "// a\n")]),
            doc(t.uri("b.sh"), vec![insert(0, 0, "#!/bin/sh\n")]),
        ]}))
        .expect("plan");
    let report = apply_to_disk(&plan).expect("apply");
    assert_eq!(report.written, vec![t.path("a.rs"), t.path("b.sh")]);
    assert!(!report.rolled_back);
    assert!(report.leftovers.is_empty());
    assert_eq!(t.read("a.rs").as_deref(), Some("// a\nfn a() {}\n"));
    assert_eq!(t.read("b.sh").as_deref(), Some("#!/bin/sh\necho b\n"));
    let mode = fs::metadata(t.path("b.sh"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o751);
    assert_eq!(t.listing(), vec!["a.rs", "b.sh"]);
}

#[test]
fn a_write_through_a_symlink_keeps_the_link() {
    let t = Tree::new();
    t.write("real.rs", "x");
    std::os::unix::fs::symlink(t.path("real.rs"), t.path("link.rs")).expect("symlink");
    let plan = t
        .plan(&json!({"changes": {t.uri("link.rs"): [insert(0, 0, "y")]}}))
        .expect("plan");
    apply_to_disk(&plan).expect("apply");
    assert!(t.path("link.rs").is_symlink());
    assert_eq!(t.read("real.rs").as_deref(), Some("yx"));
}

#[test]
fn create_rename_delete_and_edit_in_sequence() {
    let t = Tree::new();
    t.write("old.rs", "old\n");
    t.write("gone/x.rs", "x");
    t.write("gone/deeper/y.rs", "y");
    let plan = t
        .plan(&json!({"documentChanges": [
            {"kind": "create", "uri": t.uri("new/dir/n.rs")},
            doc(t.uri("new/dir/n.rs"), vec![insert(0, 0, "fresh\n")]),
            {"kind": "rename", "oldUri": t.uri("old.rs"), "newUri": t.uri("moved/old.rs")},
            doc(t.uri("moved/old.rs"), vec![insert(1, 0, "more\n")]),
            {"kind": "delete", "uri": t.uri("gone"), "options": {"recursive": true}},
        ]}))
        .expect("plan");
    let report = apply_to_disk(&plan).expect("apply");
    assert_eq!(report.created, vec![t.path("new/dir/n.rs")]);
    assert_eq!(
        report.written,
        vec![t.path("new/dir/n.rs"), t.path("moved/old.rs")]
    );
    assert_eq!(
        report.renamed,
        vec![(t.path("old.rs"), t.path("moved/old.rs"))]
    );
    assert_eq!(report.deleted, vec![t.path("gone")]);
    assert_eq!(t.read("new/dir/n.rs").as_deref(), Some("fresh\n"));
    assert_eq!(t.read("moved/old.rs").as_deref(), Some("old\nmore\n"));
    assert_eq!(
        t.listing(),
        vec!["moved", "moved/old.rs", "new", "new/dir", "new/dir/n.rs"]
    );
}

#[test]
fn non_recursive_delete_of_a_full_directory_fails_and_rolls_back() {
    let t = Tree::new();
    t.write("a.rs", "a");
    t.write("d/x.rs", "x");
    let plan = t
        .plan(&json!({"documentChanges": [
            doc(t.uri("a.rs"), vec![insert(0, 0, "changed ")]),
            {"kind": "delete", "uri": t.uri("d")},
        ]}))
        .expect("plan");
    let Err(ApplyError::Commit {
        operation, report, ..
    }) = apply_to_disk(&plan)
    else {
        panic!("the delete should fail");
    };
    assert_eq!(operation, 1);
    assert!(report.rolled_back);
    assert_eq!(t.read("a.rs").as_deref(), Some("a"));
    assert_eq!(t.listing(), vec!["a.rs", "d", "d/x.rs"]);
}

#[test]
fn a_failure_midway_rolls_back_every_step() {
    // Works as root too: the failure is a path below a regular file,
    // which no permission bit is involved in.
    let t = Tree::new();
    t.write("a.rs", "a");
    t.write("b.rs", "b");
    t.write("c.rs", "c");
    t.write("blocker", "I am a file");
    fs::set_permissions(t.path("a.rs"), fs::Permissions::from_mode(0o640)).expect("chmod");
    let ino_before = fs::metadata(t.path("a.rs")).expect("meta").ino();
    let plan = t
        .plan(&json!({"documentChanges": [
            doc(t.uri("a.rs"), vec![insert(0, 0, "changed ")]),
            {"kind": "rename", "oldUri": t.uri("b.rs"), "newUri": t.uri("sub/b2.rs")},
            {"kind": "delete", "uri": t.uri("c.rs")},
            {"kind": "create", "uri": t.uri("blocker/new.rs")},
        ]}))
        .expect("plan");
    let Err(ApplyError::Commit {
        operation,
        path,
        report,
        ..
    }) = apply_to_disk(&plan)
    else {
        panic!("creating below a file should fail");
    };
    assert_eq!(operation, 3);
    assert_eq!(path, t.path("blocker/new.rs"));
    assert_eq!(
        *report,
        ApplyReport {
            rolled_back: true,
            ..ApplyReport::default()
        }
    );
    assert_eq!(t.read("a.rs").as_deref(), Some("a"));
    assert_eq!(t.read("b.rs").as_deref(), Some("b"));
    assert_eq!(t.read("c.rs").as_deref(), Some("c"));
    // The original inode is back, with its mode.
    let meta = fs::metadata(t.path("a.rs")).expect("meta");
    assert_eq!(meta.ino(), ino_before);
    assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
    assert_eq!(t.listing(), vec!["a.rs", "b.rs", "blocker", "c.rs"]);
}

#[test]
fn a_file_changed_since_planning_is_not_overwritten() {
    let t = Tree::new();
    t.write("a.rs", "a");
    let plan = t
        .plan(&json!({"changes": {t.uri("a.rs"): [insert(0, 0, "x")]}}))
        .expect("plan");
    t.write("a.rs", "someone else");
    let e = apply_to_disk(&plan).expect_err("stale");
    assert!(
        matches!(e, ApplyError::Stale { ref path } if *path == t.path("a.rs")),
        "{e}"
    );
    assert_eq!(t.read("a.rs").as_deref(), Some("someone else"));
}

#[test]
fn unconfirmed_plans_are_refused() {
    let t = Tree::new();
    let edit = json!({
        "changeAnnotations": {"c": {"label": "Create", "needsConfirmation": true}},
        "documentChanges": [{"kind": "create", "uri": t.uri("n.rs"), "annotationId": "c"}]
    });
    let mut plan = t.plan(&edit).expect("plan");
    let e = apply_to_disk(&plan).expect_err("unconfirmed");
    assert!(
        matches!(e, ApplyError::Unconfirmed { ref ids } if ids == &["c"]),
        "{e}"
    );
    assert_eq!(t.read("n.rs"), None);
    plan.confirm(["c"]);
    apply_to_disk(&plan).expect("confirmed");
    assert_eq!(t.read("n.rs").as_deref(), Some(""));
}

#[test]
fn create_overwrite_and_rename_overwrite_on_disk() {
    let t = Tree::new();
    t.write("a", "A");
    t.write("b", "B");
    t.write("c", "C");
    fs::set_permissions(t.path("c"), fs::Permissions::from_mode(0o600)).expect("chmod");
    let plan = t
            .plan(&json!({"documentChanges": [
                {"kind": "rename", "oldUri": t.uri("a"), "newUri": t.uri("b"), "options": {"overwrite": true}},
                {"kind": "create", "uri": t.uri("c"), "options": {"overwrite": true}},
            ]}))
            .expect("plan");
    let report = apply_to_disk(&plan).expect("apply");
    assert_eq!(report.renamed, vec![(t.path("a"), t.path("b"))]);
    assert_eq!(report.created, vec![t.path("c")]);
    assert_eq!(t.read("b").as_deref(), Some("A"));
    assert_eq!(t.read("c").as_deref(), Some(""));
    let mode = fs::metadata(t.path("c"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o600);
    assert_eq!(t.listing(), vec!["b", "c"]);
}

#[test]
fn disk_entries() {
    let t = Tree::new();
    t.write("a", "text");
    fs::write(t.path("bin"), [0xff, 0xfe]).expect("write");
    t.write("f", "");
    assert_eq!(disk_entry(&t.path("a")), Some(Entry::text("text")));
    assert_eq!(disk_entry(&t.path("bin")), Some(Entry::Opaque));
    assert_eq!(disk_entry(&t.root()), Some(Entry::Directory));
    assert_eq!(disk_entry(&t.path("none")), None);
    assert_eq!(disk_entry(&t.path("f/below")), None);
}

#[test]
fn dry_run_renders_a_unified_diff() {
    let t = Tree::new();
    t.write("a.rs", "one\ntwo\nthree");
    t.write("old.rs", "x\n");
    t.write("del.rs", "bye\n");
    let plan = t
        .plan(&json!({"documentChanges": [
            doc(t.uri("a.rs"), vec![json!({"range": {"start": {"line": 1, "character": 0},
                "end": {"line": 1, "character": 3}}, "newText": "TWO"})]),
            {"kind": "create", "uri": t.uri("n.rs")},
            {"kind": "rename", "oldUri": t.uri("old.rs"), "newUri": t.uri("new.rs")},
            {"kind": "delete", "uri": t.uri("del.rs")},
        ]}))
        .expect("plan");
    let base = t.path("a.rs").parent().expect("a parent").to_path_buf();
    let expected = "diff --git a/a.rs b/a.rs\n--- a/a.rs\n+++ b/a.rs\n\
             @@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n\\ No newline at end of file\n\
             diff --git a/n.rs b/n.rs\nnew file mode 100644\n\
             diff --git a/old.rs b/new.rs\nsimilarity index 100%\nrename from old.rs\nrename to new.rs\n\
             diff --git a/del.rs b/del.rs\ndeleted file mode 100644\n--- a/del.rs\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n";
    assert_eq!(dry_run(&plan, &base), expected);
    // Outside the base, paths stay absolute.
    let elsewhere = dry_run(&plan, Path::new("/nonexistent-base"));
    assert!(elsewhere.contains(&format!("+++ b/{}", t.path("a.rs").display())));
    // A dry run changes nothing.
    assert_eq!(t.listing(), vec!["a.rs", "del.rs", "old.rs"]);
}
