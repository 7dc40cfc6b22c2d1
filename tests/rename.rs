//! From `WorkspaceEdit` to file writes, with real servers: `SessionFacade::rename`
//! asks the server, plans the edit against the disk and applies it, and the
//! project still builds afterwards (`cargo check`, `cc -fsyntax-only`, a
//! Python import). Also: a module rename that moves a file (a `RenameFile`
//! operation), a dry run that writes nothing, and a position where nothing
//! can be renamed.
//!
//! Fixtures are copied from `tests/projects/` into a temporary directory
//! first. A missing server or tool fails the test with the command that
//! installs it; these tests never skip.
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]
#![cfg(target_os = "linux")]

mod support;

use support::procfs::{group_members, wait_until_gone};
use support::{c_flags, copy_tree, require, snapshot_tree, write_compile_commands, C_SOURCES};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use acp_lsp::lsp::config::Config;
use acp_lsp::session_facade::{
    FacadeError, FileLocation, RenameError, RenameOutcome, SessionFacade,
};
use acp_lsp_core::gate::GateError;
use serde_json::{json, Value};

/// Upper bound on one `rename` or request (the server may have to start and
/// index first: `READY_WAIT` is 120 s, rust-analyzer needs ~5 s here).
const CALL_TIMEOUT: Duration = Duration::from_secs(180);
/// Longest wait for a stopped server's processes to leave /proc.
const EXIT_TIMEOUT: Duration = Duration::from_secs(20);
/// Upper bound on `cargo check`, `cc` or `python3` run on the renamed project.
const BUILD_TIMEOUT: Duration = Duration::from_secs(120);
/// How often a bounded build looks whether it has finished.
const BUILD_POLL: Duration = Duration::from_millis(20);

const RUST_ANALYZER_INSTALL: &str = "rustup component add rust-analyzer";
const CLANGD_INSTALL: &str = "apt-get install -y clangd";
const PYRIGHT_INSTALL: &str = "npm i -g pyright";

/// A fresh copy of a fixture, and a session over it.
struct Project {
    /// Holds the copy (`project/`) and, beside it, build output (`cargo-target/`).
    dir: tempfile::TempDir,
    /// The copy's canonical path.
    root: PathBuf,
    tool: SessionFacade,
    started: Instant,
}

impl Project {
    /// Copies `tests/projects/<fixture>`, runs `prepare` on the copy, opens the session.
    fn open(fixture: &str, prepare: Option<fn(&Path)>) -> Project {
        let dir = tempfile::Builder::new()
            .prefix(&format!("acp-lsp-rename-{fixture}-"))
            .tempdir()
            .expect("create a temporary directory");
        let copy = dir.path().join("project");
        std::fs::create_dir(&copy).expect("create the project directory");
        copy_tree(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/projects")
                .join(fixture),
            &copy,
        );
        let root = copy.canonicalize().expect("canonicalize the project copy");
        if let Some(prepare) = prepare {
            prepare(&root);
        }
        let tool = SessionFacade::start(&root, Config::builtin());
        Project {
            dir,
            root,
            tool,
            started: Instant::now(),
        }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.root.join(file)
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.path(file)).unwrap_or_else(|e| panic!("read {file}: {e}"))
    }

    /// The 1-based location of the first `needle` on 1-based `line` of `file`
    /// (so a fixture edit that moves things fails loudly).
    fn locate(&self, file: &str, line: usize, needle: &str) -> FileLocation {
        let text = self.read(file);
        let content = text
            .lines()
            .nth(line - 1)
            .unwrap_or_else(|| panic!("{file} has no line {line}"));
        let byte = content
            .find(needle)
            .unwrap_or_else(|| panic!("{file}:{line} does not contain {needle:?}: {content:?}"));
        FileLocation {
            file: self.path(file),
            line,
            column: content[..byte].chars().count() + 1,
        }
    }

    async fn rename(
        &self,
        at: &FileLocation,
        new_name: &str,
        dry_run: bool,
    ) -> Result<RenameOutcome, RenameError> {
        tokio::time::timeout(
            CALL_TIMEOUT,
            self.tool.rename(at, new_name, None, dry_run, false),
        )
        .await
        .unwrap_or_else(|_| panic!("rename at {at:?} took over {CALL_TIMEOUT:?}"))
    }

    /// A rename that must be applied; returns what was written.
    async fn apply(&self, at: &FileLocation, new_name: &str) -> acp_lsp::edit::ApplyReport {
        match self.rename(at, new_name, false).await {
            Ok(RenameOutcome::Applied(report)) => {
                eprintln!(
                    "{}: renamed to {new_name} {:?} after session open: {report:?}",
                    self.root.display(),
                    self.started.elapsed()
                );
                report
            }
            Ok(RenameOutcome::DryRun(diff)) => panic!("a dry run without asking: {diff}"),
            Ok(RenameOutcome::Unchanged) => {
                panic!("rename at {at:?} to {new_name} changed nothing")
            }
            Err(e) => panic!("rename at {at:?} to {new_name} failed: {e}"),
        }
    }

    /// A dry run; returns the diff.
    async fn dry_run(&self, at: &FileLocation, new_name: &str) -> String {
        match self.rename(at, new_name, true).await {
            Ok(RenameOutcome::DryRun(diff)) => diff,
            Ok(RenameOutcome::Applied(report)) => panic!("a dry run wrote files: {report:?}"),
            Ok(RenameOutcome::Unchanged) => {
                panic!("dry run at {at:?} to {new_name} changed nothing")
            }
            Err(e) => panic!("dry run at {at:?} to {new_name} failed: {e}"),
        }
    }

    /// Every file of the copy and its bytes, build output and server caches left out.
    fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        snapshot_tree(
            &self.root,
            &["target", ".cache", "__pycache__", "node_modules"],
        )
    }

    /// Stops the servers and checks that none of their processes is left.
    async fn shutdown(self) {
        let mut pids = Vec::new();
        for entry in self.tool.servers().await.expect("lsp/servers") {
            if let Some(pid) = entry.ours().pid {
                pids.push(pid);
                pids.extend(group_members(pid));
            }
        }
        self.tool.shutdown().await;
        let left = wait_until_gone(&pids, EXIT_TIMEOUT).await;
        assert!(
            left.is_empty(),
            "server processes {left:?} still alive {EXIT_TIMEOUT:?} after shutdown"
        );
    }
}

/// The identifiers of a source text (words of letters, digits and `_`).
fn identifiers(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect()
}

fn count_identifier(text: &str, name: &str) -> usize {
    identifiers(text).iter().filter(|w| **w == name).count()
}

/// Runs `command` to completion within [`BUILD_TIMEOUT`] and asserts success.
fn run_ok(mut command: Command, what: &str) {
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let deadline = Instant::now() + BUILD_TIMEOUT;
    while child.try_wait().expect("wait for a build").is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {BUILD_TIMEOUT:?}");
        }
        std::thread::sleep(BUILD_POLL);
    }
    let output = child.wait_with_output().expect("collect a build's output");
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `cargo check --offline` in the copy, with the target directory beside it.
fn cargo_check(project: &Project) {
    require("cargo", "curl https://sh.rustup.rs -sSf | sh");
    let mut command = Command::new("cargo");
    command
        .args(["check", "--offline", "--quiet"])
        .current_dir(&project.root)
        .env("CARGO_TARGET_DIR", project.dir.path().join("cargo-target"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET");
    run_ok(command, "cargo check --offline");
}

/// `cc -fsyntax-only` with the fixture's flags on every `.c` file.
fn c_syntax_check(root: &Path) {
    require("cc", "apt-get install -y gcc");
    for file in C_SOURCES {
        let mut command = Command::new("cc");
        command
            .args(c_flags(root))
            .args(["-fsyntax-only", file])
            .current_dir(root);
        run_ok(command, &format!("cc -fsyntax-only {file}"));
    }
}

fn written(report: &acp_lsp::edit::ApplyReport, root: &Path) -> Vec<String> {
    let mut files: Vec<String> = report
        .written
        .iter()
        .map(|p| {
            p.strip_prefix(root)
                .unwrap_or_else(|_| panic!("{} written outside the project", p.display()))
                .display()
                .to_string()
        })
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_analyzer_rename_of_a_function_used_in_three_files_still_compiles() {
    require("rust-analyzer", RUST_ANALYZER_INSTALL);
    let project = Project::open("rust-three-files", None);
    let files = ["src/geometry.rs", "src/report.rs", "src/stats.rs"];
    for file in files {
        assert!(count_identifier(&project.read(file), "area") > 0, "{file}");
    }

    let at = project.locate("src/geometry.rs", 2, "area");
    assert_eq!((at.line, at.column), (2, 8));
    let report = project.apply(&at, "rect_area").await;

    assert_eq!(written(&report, &project.root), files);
    assert!(report.created.is_empty() && report.renamed.is_empty() && report.deleted.is_empty());
    assert!(
        !report.rolled_back && report.leftovers.is_empty(),
        "{report:?}"
    );
    for file in files {
        let text = project.read(file);
        assert!(
            count_identifier(&text, "rect_area") > 0,
            "{file} does not use the new name:\n{text}"
        );
        assert_eq!(
            count_identifier(&text, "area"),
            0,
            "{file} still uses the old name:\n{text}"
        );
    }
    cargo_check(&project);
    project.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyright_rename_across_modules_keeps_the_package_importable() {
    require("pyright-langserver", PYRIGHT_INSTALL);
    require("python3", "apt-get install -y python3");
    let project = Project::open("python-project", None);

    let at = project.locate("shapes/geometry.py", 1, "rect_area");
    let report = project.apply(&at, "box_area").await;

    assert_eq!(
        written(&report, &project.root),
        ["shapes/geometry.py", "shapes/report.py"]
    );
    for (file, uses) in [("shapes/geometry.py", 1), ("shapes/report.py", 3)] {
        let text = project.read(file);
        assert_eq!(count_identifier(&text, "box_area"), uses, "{file}:\n{text}");
        assert_eq!(count_identifier(&text, "rect_area"), 0, "{file}:\n{text}");
    }
    let mut python = Command::new("python3");
    python
        .args([
            "-c",
            "import shapes.geometry, shapes.report\n\
             assert shapes.geometry.box_area(4, 5) == 20\n\
             assert shapes.report.square(3) == 9\n\
             assert shapes.report.total(2, 3) == 10",
        ])
        .current_dir(&project.root)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTHONPATH");
    run_ok(python, "python3 -c 'import shapes.report; …'");
    project.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clangd_rename_across_files_still_compiles() {
    require("clangd", CLANGD_INSTALL);
    let project = Project::open("c-project", Some(write_compile_commands));
    let files = ["include/geometry.h", "src/geometry.c", "src/main.c"];
    let before: usize = files
        .iter()
        .map(|f| count_identifier(&project.read(f), "rect_area"))
        .sum();
    assert_eq!(before, 4);

    let at = project.locate("src/main.c", 4, "rect_area");
    let report = project.apply(&at, "box_area").await;

    assert_eq!(written(&report, &project.root), files);
    let mut after = 0;
    for file in files {
        let text = project.read(file);
        assert_eq!(count_identifier(&text, "rect_area"), 0, "{file}:\n{text}");
        after += count_identifier(&text, "box_area");
    }
    assert_eq!(after, before, "every occurrence is renamed");
    c_syntax_check(&project.root);
    project.shutdown().await;
}

/// rust-analyzer answers a module rename with a `RenameFile` operation only;
/// the edits to `mod` and `use` come from `workspace/willRenameFiles`, which
/// `rename` sends before applying an edit that renames files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_analyzer_module_rename_moves_the_file_and_still_compiles() {
    require("rust-analyzer", RUST_ANALYZER_INSTALL);
    let project = Project::open("rust-three-files", None);
    let module_text = project.read("src/geometry.rs");
    let at = project.locate("src/lib.rs", 3, "geometry");

    // What the server itself answers: a RenameFile operation.
    let entry = project
        .tool
        .pick_server(None, Some(&at.file))
        .await
        .expect("a server for lib.rs");
    assert_eq!(entry.name, "rust-analyzer");
    let raw = tokio::time::timeout(
        CALL_TIMEOUT,
        project.tool.request(
            &entry.server_id,
            "textDocument/rename",
            json!({
                "textDocument": { "uri": url::Url::from_file_path(&at.file).expect("absolute").as_str() },
                "position": { "line": at.line - 1, "character": at.column - 1 },
                "newName": "shapes",
            }),
        ),
    )
    .await
    .expect("textDocument/rename in time")
    .expect("textDocument/rename");
    let raw: Value = serde_json::from_str(raw.get()).expect("the result is JSON");
    eprintln!("rust-analyzer textDocument/rename on `mod geometry`: {raw}");
    let renames: Vec<&Value> = raw["documentChanges"]
        .as_array()
        .unwrap_or_else(|| panic!("no documentChanges: {raw}"))
        .iter()
        .filter(|c| c["kind"] == json!("rename"))
        .collect();
    assert_eq!(renames.len(), 1, "one RenameFile: {raw}");
    assert!(
        renames[0]["oldUri"]
            .as_str()
            .is_some_and(|u| u.ends_with("/src/geometry.rs"))
            && renames[0]["newUri"]
                .as_str()
                .is_some_and(|u| u.ends_with("/src/shapes.rs")),
        "{raw}"
    );

    // The dry run shows the move and every edit, and writes nothing.
    let before = project.snapshot();
    let diff = project.dry_run(&at, "shapes").await;
    eprintln!("module rename dry run:\n{diff}");
    assert_eq!(project.snapshot(), before, "a dry run changed the disk");
    assert!(
        diff.contains("rename from src/geometry.rs\nrename to src/shapes.rs"),
        "{diff}"
    );
    for file in ["src/lib.rs", "src/report.rs", "src/stats.rs"] {
        assert!(
            diff.contains(&format!("+++ b/{file}")),
            "the diff does not show {file}:\n{diff}"
        );
    }
    assert!(diff.contains("+pub mod shapes;"), "{diff}");

    // Applied: the file moved with its text, every use follows.
    let report = project.apply(&at, "shapes").await;
    assert_eq!(
        report.renamed,
        [(
            project.path("src/geometry.rs"),
            project.path("src/shapes.rs")
        )]
    );
    assert_eq!(
        written(&report, &project.root),
        ["src/lib.rs", "src/report.rs", "src/stats.rs"]
    );
    assert!(
        !project.path("src/geometry.rs").exists(),
        "the old file is still there"
    );
    assert_eq!(project.read("src/shapes.rs"), module_text);
    let lib = project.read("src/lib.rs");
    assert!(
        lib.contains("pub mod shapes;\n") && !lib.contains("mod geometry"),
        "{lib}"
    );
    for file in ["src/report.rs", "src/stats.rs"] {
        let text = project.read(file);
        assert!(text.contains("crate::shapes"), "{file}:\n{text}");
        assert_eq!(count_identifier(&text, "geometry"), 0, "{file}:\n{text}");
    }
    cargo_check(&project);
    project.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_shows_a_diff_of_every_file_and_leaves_the_disk_alone() {
    require("clangd", CLANGD_INSTALL);
    let project = Project::open("c-project", Some(write_compile_commands));
    let before = project.snapshot();

    let at = project.locate("src/geometry.c", 3, "rect_area");
    let diff = project.dry_run(&at, "box_area").await;
    eprintln!("clangd dry run:\n{diff}");

    assert_eq!(project.snapshot(), before, "a dry run changed the disk");
    for file in ["include/geometry.h", "src/geometry.c", "src/main.c"] {
        assert!(
            diff.contains(&format!("--- a/{file}\n+++ b/{file}\n@@ ")),
            "the diff has no hunk for {file}:\n{diff}"
        );
    }
    for line in [
        "-int rect_area(int width, int height);",
        "+int box_area(int width, int height);",
        "-int rect_area(int width, int height) {",
        "+int box_area(int width, int height) {",
        "-    int small = rect_area(2, 3);",
        "+    int small = box_area(2, 3);",
        "+    int large = box_area(40, 50);",
    ] {
        assert!(
            diff.lines().any(|l| l == line),
            "the diff lacks {line:?}:\n{diff}"
        );
    }
    project.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_analyzer_refuses_to_rename_whitespace_or_a_comment() {
    require("rust-analyzer", RUST_ANALYZER_INSTALL);
    let project = Project::open("rust-three-files", None);
    let before = project.snapshot();

    let comment = project.locate("src/lib.rs", 1, "Fixture");
    let whitespace = FileLocation {
        column: 2,
        ..project.locate("src/geometry.rs", 3, "    width")
    };
    for at in [&comment, &whitespace] {
        match project.rename(at, "renamed", false).await {
            // The server says why, through the gate.
            Err(RenameError::Gate(FacadeError::Gate {
                error: error @ GateError::ServerError { .. },
                method,
                server,
            })) => {
                assert_eq!(server.as_deref(), Some("rust-analyzer"));
                eprintln!("rust-analyzer at {at:?}: {error}");
                assert_eq!(method.as_deref(), Some("textDocument/prepareRename"));
                // The server's own message, not a wrapper's.
                assert!(!error.to_string().is_empty(), "{error:?}");
                assert_ne!(
                    error.to_string(),
                    "the language server answered with an error"
                );
            }
            // A `null` from prepareRename or rename.
            Err(RenameError::NotRenamable { server, location }) => {
                eprintln!("rust-analyzer at {at:?}: not renamable ({server}, {location})");
                assert_eq!(server, "rust-analyzer");
            }
            other => panic!("rename at {at:?}: expected a refusal, got {other:?}"),
        }
    }

    // A position past the end of the file never reaches the server's rename.
    let past = FileLocation {
        line: 99,
        ..comment.clone()
    };
    match project.rename(&past, "renamed", false).await {
        Err(RenameError::Position(message)) => {
            assert!(message.contains("line 99 does not exist"), "{message}")
        }
        other => panic!("expected a position error, got {other:?}"),
    }

    assert_eq!(
        project.snapshot(),
        before,
        "a refused rename changed the disk"
    );
    project.shutdown().await;
}
