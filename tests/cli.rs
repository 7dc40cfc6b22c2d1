//! The real `acp-lsp` binary from the command line: `rename` (applied and
//! `--dry-run`), `request` (a result, a refused method, a URI outside the
//! root), `servers`, `--help`, `--version`, and bad input. The language
//! server is clangd (it starts in well under a second) on a copy of
//! `tests/projects/c-project`.
//!
//! Every run is bounded by `support::cli::RUN_TIMEOUT`, and a run that started a server
//! is followed by a check that no process is left working in the project
//! (servers run with the project root as their working directory). A missing
//! clangd fails the tests with the command that installs it; they never skip.
#![cfg(target_os = "linux")]

mod support;

use support::cli::{assert_success, stderr, stdout};
use support::procfs::{processes_in, POLL_INTERVAL};
use support::{copy_tree, require, snapshot_tree, write_compile_commands};

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use acp_lsp::lsp::detect::find_on_path;
use serde_json::{json, Value};

/// Longest wait, after the binary exited, for processes in the project to go.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
const CLANGD_INSTALL: &str = "apt-get install -y clangd";
const C_FILES: &[&str] = &["include/geometry.h", "src/geometry.c", "src/main.c"];

/// A copy of the C fixture, with a compilation database and an empty config home.
struct Project {
    dir: tempfile::TempDir,
    /// The copy's canonical path.
    root: PathBuf,
}

impl Project {
    fn c() -> Project {
        require("clangd", CLANGD_INSTALL);
        let dir = tempfile::Builder::new()
            .prefix("acp-lsp-cli-")
            .tempdir()
            .expect("create a temporary directory");
        let copy = dir.path().join("project");
        std::fs::create_dir_all(&copy).expect("create the project directory");
        std::fs::create_dir_all(dir.path().join("config")).expect("create the config home");
        copy_tree(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/c-project"),
            &copy,
        );
        let root = copy.canonicalize().expect("canonicalize the copy");
        write_compile_commands(&root);
        Project { dir, root }
    }

    /// A copy of `examples/sample-project` (a Rust crate), served by rust-analyzer.
    fn rust() -> Project {
        require("rust-analyzer", "rustup component add rust-analyzer");
        let dir = tempfile::Builder::new()
            .prefix("acp-lsp-cli-")
            .tempdir()
            .expect("create a temporary directory");
        let copy = dir.path().join("project");
        std::fs::create_dir_all(&copy).expect("create the project directory");
        std::fs::create_dir_all(dir.path().join("config")).expect("create the config home");
        copy_tree(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample-project"),
            &copy,
        );
        let root = copy.canonicalize().expect("canonicalize the copy");
        Project { dir, root }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.root.join(file)
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.path(file)).unwrap_or_else(|e| panic!("read {file}: {e}"))
    }

    fn uri(&self, file: &str) -> String {
        url::Url::from_file_path(self.path(file))
            .expect("an absolute path")
            .to_string()
    }

    /// Runs `acp-lsp ARGS` in `cwd` (default: the project) with no user
    /// config, then checks that no process is left in the project.
    async fn run(&self, args: &[&str], cwd: Option<&Path>) -> Output {
        self.run_env(args, cwd, &[]).await
    }

    /// [`Project::run`] with environment variables set.
    async fn run_env(&self, args: &[&str], cwd: Option<&Path>, env: &[(&str, &str)]) -> Output {
        let output = run_in(
            args,
            cwd.unwrap_or(&self.root),
            &self.dir.path().join("config"),
            env,
        )
        .await;
        let left = wait_until_none_in(&self.root, EXIT_TIMEOUT).await;
        assert!(
            left.is_empty(),
            "processes {left:?} still work in {} {EXIT_TIMEOUT:?} after `acp-lsp {}` exited",
            self.root.display(),
            args.join(" ")
        );
        output
    }

    /// Every file of the copy and its bytes (clangd's `.cache` left out).
    /// `acp-lsp request <method> <params> --root <root>`.
    async fn request(&self, method: &str, params: &Value) -> Output {
        self.run(
            &[
                "request",
                method,
                &params.to_string(),
                "--root",
                &self.root.display().to_string(),
            ],
            None,
        )
        .await
    }

    fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        snapshot_tree(&self.root, &[".cache"])
    }
}

/// Runs the binary with a bounded wait; it is killed if the test gives up.
async fn run_in(args: &[&str], cwd: &Path, config_home: &Path, env: &[(&str, &str)]) -> Output {
    let mut all: Vec<(&str, &OsStr)> = vec![("XDG_CONFIG_HOME", config_home.as_os_str())];
    all.extend(env.iter().map(|(name, value)| (*name, OsStr::new(*value))));
    support::cli::run(args, cwd, &all).await
}

/// Polls until no process works in `root` or `timeout` passes; returns those left.
async fn wait_until_none_in(root: &Path, timeout: Duration) -> Vec<u32> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = processes_in(root);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// A failed run: non-zero exit, nothing on stdout, every `mentions` on stderr.
fn assert_failure(output: &Output, what: &str, mentions: &[&str]) {
    assert!(
        !output.status.success() && output.status.code().is_some(),
        "{what} should fail with an exit code: {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        stdout(output),
        stderr(output)
    );
    assert!(
        output.stdout.is_empty(),
        "{what} printed on stdout: {}",
        stdout(output)
    );
    let err = stderr(output);
    for mention in mentions {
        assert!(
            err.contains(mention),
            "{what}: stderr lacks {mention:?}:\n{err}"
        );
    }
}

fn count_identifier(text: &str, name: &str) -> usize {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| *w == name)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_with_clangd_writes_every_file_and_names_them() {
    let project = Project::c();
    // FILE relative to the working directory; 1-based line and column.
    let output = project
        .run(
            &[
                "rename",
                "src/main.c:4:17",
                "box_area",
                "--root",
                &project.root.display().to_string(),
            ],
            None,
        )
        .await;
    assert_success(&output, "acp-lsp rename");

    let mut printed: Vec<String> = stdout(&output).lines().map(str::to_string).collect();
    printed.sort();
    let expected: Vec<String> = C_FILES
        .iter()
        .map(|f| format!("changed {}", project.path(f).display()))
        .collect();
    assert_eq!(printed, expected, "stdout:\n{}", stdout(&output));
    let mut renamed = 0;
    for file in C_FILES {
        let text = project.read(file);
        assert_eq!(count_identifier(&text, "rect_area"), 0, "{file}:\n{text}");
        renamed += count_identifier(&text, "box_area");
    }
    assert_eq!(renamed, 4, "every occurrence is renamed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_dry_run_prints_a_diff_and_writes_nothing() {
    let project = Project::c();
    let before = project.snapshot();
    let location = format!("{}:3:5", project.path("src/geometry.c").display());
    let root = project.root.display().to_string();
    let output = project
        .run(
            &[
                "rename",
                &location,
                "box_area",
                "--root",
                &root,
                "--dry-run",
            ],
            // Anywhere: FILE is absolute.
            Some(project.dir.path()),
        )
        .await;
    assert_success(&output, "acp-lsp rename --dry-run");

    assert_eq!(project.snapshot(), before, "--dry-run changed the disk");
    let diff = stdout(&output);
    // Paths relative to the root, as `git apply` reads them there.
    for file in C_FILES {
        let name = file;
        assert!(
            diff.contains(&format!(
                "diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n@@ "
            )),
            "no hunk for {file}:\n{diff}"
        );
    }
    for line in [
        "-int rect_area(int width, int height);",
        "+int box_area(int width, int height);",
        "+int box_area(int width, int height) {",
        "+    int small = box_area(2, 3);",
        "+    int large = box_area(40, 50);",
    ] {
        assert!(diff.lines().any(|l| l == line), "no {line:?} in:\n{diff}");
    }
    assert!(!diff.contains("changed "), "{diff}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_prints_the_servers_raw_result() {
    let project = Project::c();
    // `rect_area` in `int small = rect_area(2, 3);`: zero-based, UTF-16.
    let params = json!({
        "textDocument": { "uri": project.uri("src/main.c") },
        "position": { "line": 3, "character": 16 },
    });
    let output = project.request("textDocument/definition", &params).await;
    assert_success(&output, "acp-lsp request textDocument/definition");
    let text = stdout(&output);
    let result: Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}): {text}"));
    let locations = match &result {
        Value::Array(items) => items.clone(),
        Value::Object(_) => vec![result.clone()],
        other => panic!("no location: {other}"),
    };
    assert_eq!(locations.len(), 1, "{result}");
    let location = &locations[0];
    let uri = location.get("uri").or_else(|| location.get("targetUri"));
    let range = location
        .get("range")
        .or_else(|| location.get("targetSelectionRange"));
    assert_eq!(uri, Some(&json!(project.uri("src/geometry.c"))), "{result}");
    assert_eq!(
        range.map(|r| &r["start"]["line"]),
        Some(&json!(2)),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_refuses_a_document_sync_method() {
    let project = Project::c();
    let before = project.snapshot();
    let params = json!({
        "textDocument": {
            "uri": project.uri("src/main.c"),
            "languageId": "c",
            "version": 1,
            "text": "int main(void) { return 0; }\n",
        },
    });
    let output = project.request("textDocument/didOpen", &params).await;
    assert_failure(
        &output,
        "acp-lsp request textDocument/didOpen",
        &["textDocument/didOpen is not forwarded"],
    );
    assert_eq!(project.snapshot(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_refuses_a_uri_outside_the_root() {
    let project = Project::c();
    // Beside the project, not in it.
    let outside = project.dir.path().join("outside.c");
    std::fs::write(&outside, "int outside(void) { return 0; }\n").expect("write outside.c");
    let params = json!({
        "textDocument": { "uri": url::Url::from_file_path(&outside).expect("absolute").as_str() },
        "position": { "line": 0, "character": 5 },
    });
    let output = project.request("textDocument/hover", &params).await;
    assert_failure(
        &output,
        "acp-lsp request with a URI outside the root",
        &["outside the session roots", "outside.c"],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_lists_clangd_with_its_binary() {
    let project = Project::c();
    let clangd = find_on_path("clangd").expect("checked by Project::c");
    let output = project
        .run(&["servers", &project.root.display().to_string()], None)
        .await;
    assert_success(&output, "acp-lsp servers");
    let text = stdout(&output);
    let row = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("clangd"))
        .unwrap_or_else(|| panic!("no clangd row:\n{text}"));
    assert!(
        row.split_whitespace()
            .any(|w| Path::new(w) == clangd.as_path()),
        "the clangd row does not name {}: {row:?}\n{text}",
        clangd.display()
    );
}

/// With two Python servers installed, `servers` runs the first of the
/// built-in order (pyright) and says why the other (pylsp) does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_names_the_primary_server_and_why_another_does_not_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir bin");
    for name in ["pyright-langserver", "pylsp"] {
        let stub = bin.join(name);
        std::fs::write(&stub, "#!/bin/sh\nexit 0\n").expect("write a stub");
        std::fs::set_permissions(&stub, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
    }
    let project = dir.path().join("project");
    std::fs::create_dir(&project).expect("mkdir project");
    std::fs::write(project.join("pyproject.toml"), "[project]\nname = \"p\"\n").expect("write");
    std::fs::write(project.join("m.py"), "x = 1\n").expect("write");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = run_in(
        &["servers", "--verbose", &project.display().to_string()],
        dir.path(),
        dir.path(),
        &[("PATH", &path)],
    )
    .await;
    assert_success(&output, "acp-lsp servers --verbose");
    let text = stdout(&output);
    // The brief view: one line for pyright, and why pylsp does not run.
    let brief = run_in(
        &["servers", &project.display().to_string()],
        dir.path(),
        dir.path(),
        &[("PATH", &path)],
    )
    .await;
    let brief = stdout(&brief);
    assert!(
        brief
            .lines()
            .any(|l| l.starts_with("  pyright") && l.contains(". at session start")),
        "{brief}"
    );
    assert!(
        brief
            .lines()
            .any(|l| l.starts_with("Not run: pylsp (pyright comes first")),
        "{brief}"
    );
    let row = |name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row:\n{text}"))
            .to_string()
    };
    assert!(row("pyright").contains("at session start"), "{text}");
    assert!(row("pylsp").contains("no (pyright first)"), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("Not run: pylsp")
            && l.contains("pyright comes first")
            && l.contains("secondary = true")),
        "{text}"
    );
}

/// `servers --print-builtins` prints the built-in table as a config file
/// that reads back to the built-in servers (over the built-ins or alone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_print_builtins_reads_back_to_the_builtin_servers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = run_in(
        &["servers", "--print-builtins"],
        dir.path(),
        dir.path(),
        &[],
    )
    .await;
    assert_success(&output, "acp-lsp servers --print-builtins");
    let text = stdout(&output);
    assert_eq!(text, acp_lsp::lsp::config::BUILTIN_TOML);
    let file = dir.path().join("config.toml");
    std::fs::write(&file, &text).expect("write the printed table");
    let loaded = acp_lsp::lsp::config::Config::load(Some(&file)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        loaded.servers,
        acp_lsp::lsp::config::Config::builtin().servers
    );
    assert!(
        text.contains("[servers.pyright]") && text.contains("[servers.rust-analyzer]"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_and_version() {
    let project = Project::c();
    let help = project.run(&["--help"], None).await;
    assert_success(&help, "acp-lsp --help");
    for command in ["proxy", "request", "rename", "servers"] {
        assert!(
            stdout(&help).contains(command),
            "--help does not list {command}:\n{}",
            stdout(&help)
        );
    }

    let rename = project.run(&["rename", "--help"], None).await;
    assert_success(&rename, "acp-lsp rename --help");
    let text = stdout(&rename);
    for mention in [
        "FILE:LINE:COL",
        "LINE and COL are 1-based",
        "converted to the server's position encoding",
        "--dry-run",
        "--root",
    ] {
        assert!(
            text.contains(mention),
            "rename --help lacks {mention:?}:\n{text}"
        );
    }

    let version = project.run(&["--version"], None).await;
    assert_success(&version, "acp-lsp --version");
    let text = stdout(&version);
    assert!(
        text.starts_with(&format!("acp-lsp {}\n", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    // The protocols it speaks.
    for mention in [
        "ACP protocol versions: 1, and 2",
        "lsp/servers",
        "lsp/request",
        "RFD",
    ] {
        assert!(
            text.contains(mention),
            "--version lacks {mention:?}:\n{text}"
        );
    }

    // Every argument and option says what it is.
    for command in ["rename", "request", "servers", "proxy"] {
        let help = project.run(&[command, "--help"], None).await;
        assert_success(&help, "--help");
        let text = stdout(&help);
        let config = text
            .split("--config <CONFIG>")
            .nth(1)
            .unwrap_or_else(|| panic!("{command} --help has no --config:\n{text}"));
        assert!(
            config.trim_start().starts_with("Config file"),
            "{command} --help: --config has no help:\n{text}"
        );
    }
    let rename = stdout(&project.run(&["rename", "--help"], None).await);
    let new_name = rename
        .split("<NEW_NAME>")
        .nth(2)
        .unwrap_or_else(|| panic!("no NEW_NAME argument:\n{rename}"));
    assert!(
        new_name.trim_start().starts_with("The symbol's new name"),
        "NEW_NAME has no help:\n{rename}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_rejects_a_malformed_location() {
    let project = Project::c();
    let before = project.snapshot();
    let output = project.run(&["rename", "nocolon", "newname"], None).await;
    assert_failure(
        &output,
        "acp-lsp rename nocolon",
        &["\"nocolon\" is not FILE:LINE:COL"],
    );
    let output = project
        .run(&["rename", "src/main.c:0:3", "newname"], None)
        .await;
    assert_failure(&output, "acp-lsp rename at line 0", &["1-based"]);
    let output = project
        .run(&["rename", "src/main.c:4:x", "newname"], None)
        .await;
    assert_failure(&output, "acp-lsp rename at column x", &["column \"x\""]);
    assert_eq!(project.snapshot(), before);
}

/// The process's exit code (it was not killed by a signal).
fn code(output: &Output) -> i32 {
    output
        .status
        .code()
        .unwrap_or_else(|| panic!("killed by a signal: {}", output.status))
}

/// stderr is exactly one `error: …` line: no "Caused by:" list, no backtrace.
fn assert_one_error_line(output: &Output, what: &str) -> String {
    let err = stderr(output);
    assert!(
        err.starts_with("error: ") && err.ends_with('\n') && err.lines().count() == 1,
        "{what}: stderr is not one error line:\n{err}"
    );
    for noise in [
        "Caused by",
        "backtrace",
        "Backtrace",
        "(code -32",
        "lspError",
    ] {
        assert!(!err.contains(noise), "{what}: {noise:?} in:\n{err}");
    }
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_refuses_a_missing_folder_and_a_file() {
    let project = Project::c();
    let missing = project.dir.path().join("nonexistent");
    let output = project
        .run(&["servers", &missing.display().to_string()], None)
        .await;
    assert_failure(
        &output,
        "acp-lsp servers on a missing folder",
        &["nonexistent"],
    );
    assert_eq!(code(&output), 2, "a usage error");
    let err = assert_one_error_line(&output, "servers on a missing folder");
    assert!(err.contains("No such file or directory"), "{err}");

    let output = project.run(&["servers", "src/main.c"], None).await;
    assert_failure(
        &output,
        "acp-lsp servers on a file",
        &["src/main.c is a file, not a folder"],
    );
    assert_eq!(code(&output), 2, "a usage error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_said_once_with_no_backtrace_and_usage_exits_2() {
    let project = Project::c();
    // Many Rust users set RUST_BACKTRACE=1: a user's mistake is still one line.
    let backtrace = [("RUST_BACKTRACE", "1"), ("RUST_LIB_BACKTRACE", "1")];
    let output = project
        .run_env(&["servers", "--config", "nope.toml"], None, &backtrace)
        .await;
    assert_failure(&output, "--config nope.toml", &["nope.toml"]);
    let err = assert_one_error_line(&output, "--config nope.toml");
    assert!(err.contains("no such file"), "{err}");
    assert_eq!(code(&output), 2);

    let output = project
        .run_env(&["rename", "src/nope.c:1:1", "foo"], None, &backtrace)
        .await;
    assert_failure(&output, "rename src/nope.c:1:1", &[]);
    let err = assert_one_error_line(&output, "rename src/nope.c:1:1");
    assert_eq!(err, "error: cannot read src/nope.c: it does not exist\n");
    assert_eq!(code(&output), 2);

    let output = project
        .run_env(
            &["request", "textDocument/hover", "{not json"],
            None,
            &backtrace,
        )
        .await;
    assert_failure(
        &output,
        "request with bad JSON",
        &["PARAMS_JSON is not valid JSON"],
    );
    assert_one_error_line(&output, "request with bad JSON");
    assert_eq!(code(&output), 2);

    let output = project
        .run_env(
            &[
                "rename",
                "src/main.c:1:1",
                "x",
                "--log-level",
                "acp_lsp=loud",
            ],
            None,
            &backtrace,
        )
        .await;
    assert_failure(
        &output,
        "--log-level acp_lsp=loud",
        &["--log-level \"acp_lsp=loud\""],
    );
    assert_one_error_line(&output, "--log-level acp_lsp=loud");
    assert_eq!(code(&output), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_outside_the_root_is_refused_before_any_server_starts() {
    let project = Project::c();
    let outside = project.dir.path().join("other/util.h");
    std::fs::create_dir_all(outside.parent().expect("a parent")).expect("mkdir other");
    std::fs::write(&outside, "int util(void);\n").expect("write util.h");
    let output = project
        .run(
            &[
                "rename",
                "../other/util.h:1:5",
                "helper",
                "--log-level",
                "info",
            ],
            None,
        )
        .await;
    assert_failure(
        &output,
        "rename outside the root",
        &["../other/util.h is outside the root", "--root"],
    );
    assert_eq!(code(&output), 2);
    let err = stderr(&output);
    assert!(!err.contains("no running language server"), "{err}");
    // Refused before anything started: the log has no server in it.
    assert!(
        !err.contains("server spawned"),
        "a server was started:\n{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_error_is_shown_as_the_servers_message() {
    let project = Project::c();
    let before = project.snapshot();
    // clangd refuses a rename to the name the symbol already has.
    let output = project
        .run(&["rename", "src/geometry.c:3:5", "rect_area"], None)
        .await;
    assert_failure(&output, "rename to the same name", &[]);
    let err = assert_one_error_line(&output, "rename to the same name");
    assert_eq!(
        err,
        "error: clangd: Cannot rename symbol: new name is the same as the old name\n"
    );
    assert_eq!(code(&output), 1, "a failure, not a usage error");
    assert_eq!(project.snapshot(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_server_name_lists_the_valid_ones() {
    let project = Project::c();
    let output = project
        .run(
            &[
                "rename",
                "src/geometry.c:3:5",
                "box_area",
                "--server",
                "nosuch",
            ],
            None,
        )
        .await;
    assert_failure(
        &output,
        "--server nosuch",
        &["no server named \"nosuch\"", "choose one of: clangd"],
    );
    assert_one_error_line(&output, "--server nosuch");
    assert_eq!(code(&output), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_dry_run_is_a_patch_git_applies() {
    let project = Project::c();
    let output = project
        .run(
            &["rename", "src/geometry.c:3:5", "box_area", "--dry-run"],
            None,
        )
        .await;
    assert_success(&output, "rename --dry-run");
    let patch = project.dir.path().join("rename.patch");
    std::fs::write(&patch, &output.stdout).expect("write the patch");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&project.root)
            .output()
            .unwrap_or_else(|e| panic!("cannot run git: {e}"));
        assert!(
            out.status.success(),
            "git {}: {}\n{}\npatch:\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr),
            stdout(&output)
        );
    };
    git(&["init", "-q"]);
    git(&["apply", "--check", &patch.display().to_string()]);
    git(&["apply", &patch.display().to_string()]);
    let header = project.read("include/geometry.h");
    assert!(
        header.contains("int box_area(int width, int height);"),
        "{header}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_shows_progress_on_stderr_as_plain_lines() {
    let project = Project::c();
    // Shown from the start instead of after half a second, so the test does
    // not depend on how long clangd takes.
    let output = project
        .run_env(
            &["rename", "src/main.c:4:17", "box_area", "--dry-run"],
            None,
            &[(acp_lsp::cli::progress::SHOW_AFTER_ENV, "0")],
        )
        .await;
    assert_success(&output, "rename with progress");
    let err = stderr(&output);
    let line = err
        .lines()
        .find(|l| l.starts_with("acp-lsp: rename src/main.c:4:17 → box_area"))
        .unwrap_or_else(|| panic!("no progress line:\n{err}"));
    assert!(line.ends_with(" s)"), "no elapsed time: {line:?}");
    // Not a terminal: no spinner, no escape sequences, no carriage returns.
    assert!(!err.contains('\x1b') && !err.contains('\r'), "{err:?}");
    // The diff alone is on stdout.
    assert!(
        stdout(&output).starts_with("diff --git "),
        "{}",
        stdout(&output)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_says_each_scenario_as_it_finishes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scenario = std::fs::read_dir(root.join("fixtures"))
        .expect("fixtures/")
        .filter_map(Result::ok)
        .filter(|e| e.path().join("session.jsonl").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .min()
        .expect("a recorded scenario");
    let config = tempfile::tempdir().expect("config home");
    let output = run_in(
        &["conformance", "--replay", "--scenario", &scenario],
        root,
        config.path(),
        &[],
    )
    .await;
    assert_success(&output, "conformance --replay");
    let err = stderr(&output);
    assert!(
        err.lines()
            .any(|l| l.starts_with(&format!("conformance [1/1] {scenario}: pass"))),
        "no line for {scenario}:\n{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_logs_each_request_with_its_server_outcome_and_time() {
    let project = Project::c();
    let params = json!({
        "textDocument": { "uri": project.uri("src/main.c") },
        "position": { "line": 3, "character": 16 },
    });
    let output = project
        .run(
            &[
                "request",
                "textDocument/definition",
                &params.to_string(),
                "--log-level",
                "debug",
                "--log-format",
                "json",
            ],
            None,
        )
        .await;
    assert_success(&output, "request --log-level debug --log-format json");
    let err = stderr(&output);
    let request = err
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|e| e["message"] == "lsp/request")
        .unwrap_or_else(|| panic!("no lsp/request line:\n{err}"));
    assert_eq!(request["level"], "DEBUG", "{request}");
    assert_eq!(request["method"], "textDocument/definition", "{request}");
    assert_eq!(request["server"], "clangd", "{request}");
    assert_eq!(request["outcome"], "ok", "{request}");
    assert!(request["ms"].is_u64(), "{request}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_to_the_current_name_says_there_is_nothing_to_change() {
    // rust-analyzer answers a rename to the same name with an edit that
    // changes nothing (clangd refuses it: see above).
    let project = Project::rust();
    let before = snapshot_tree(&project.root, &["target"]);
    let output = project
        .run(&["rename", "src/greet.rs:4:8", "greeting"], None)
        .await;
    assert_success(&output, "rename to the current name");
    assert_eq!(
        stdout(&output),
        "",
        "nothing was changed, so nothing is listed"
    );
    assert_eq!(
        stderr(&output),
        "nothing to change: the symbol at src/greet.rs:4:8 is already named greeting\n"
    );
    assert_eq!(snapshot_tree(&project.root, &["target"]), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_hit_is_logged() {
    let project = Project::c();
    // Nested past the gate's depth limit (64), within serde_json's (128).
    let mut params = json!({ "textDocument": { "uri": project.uri("src/main.c") } });
    for _ in 0..100 {
        params = json!({ "textDocument": { "uri": project.uri("src/main.c") }, "deep": params });
    }
    let output = project
        .run(
            &[
                "request",
                "textDocument/hover",
                &params.to_string(),
                "--log-format",
                "json",
            ],
            None,
        )
        .await;
    assert_eq!(code(&output), 1, "{}", stderr(&output));
    let err = stderr(&output);
    let limit = err
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("limit hit"))
        })
        .unwrap_or_else(|| panic!("no limit line:\n{err}"));
    assert_eq!(limit["level"], "WARN", "{limit}");
    assert_eq!(limit["limit"], "max_depth", "{limit}");
    assert_eq!(limit["value"], 64, "{limit}");
}

/// rustup's `rust-analyzer` stub on PATH without the component (every rustup
/// user has it): `servers` runs each binary's start check and says the stub
/// fails and how to fix it, where the real binary starts; a request then
/// fails naming the server by name and root, with the same fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_reports_a_rustup_stub_and_its_fix() {
    let project = Project::rust();
    let root = project.root.display().to_string();
    let row_of = |text: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some("rust-analyzer"))
            .unwrap_or_else(|| panic!("no rust-analyzer row:\n{text}"))
            .to_string()
    };

    // The real binary starts.
    let output = project.run(&["servers", "--verbose", &root], None).await;
    assert_success(&output, "acp-lsp servers");
    let text = stdout(&output);
    assert!(row_of(&text).contains(" starts ("), "{text}");
    assert!(!text.contains("To fix"), "{text}");

    // rustup's stub, first on PATH.
    let stub_dir = project.dir.path().join("stub-bin");
    std::fs::create_dir_all(&stub_dir).expect("create the stub directory");
    let stub = support::write_rustup_stub(&stub_dir);
    let path = format!(
        "{}:{}",
        stub_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = [("PATH", path.as_str())];
    let output = project
        .run_env(&["servers", "--verbose", &root], None, &env)
        .await;
    assert_success(&output, "acp-lsp servers with the stub");
    let text = stdout(&output);
    let row = row_of(&text);
    assert!(
        row.contains(&stub.display().to_string())
            && row.contains("FAILS: rustup's stub")
            && row.contains("not installed"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "To fix rust-analyzer ({}): rustup component add rust-analyzer",
            stub.display()
        )),
        "{text}"
    );

    // A request: the error names the server and root, and the fix.
    let params = json!({
        "textDocument": {"uri": project.uri("src/lib.rs")},
        "position": {"line": 0, "character": 0}
    });
    let output = project
        .run_env(
            &[
                "request",
                "textDocument/hover",
                &params.to_string(),
                "--root",
                &root,
            ],
            None,
            &env,
        )
        .await;
    assert_failure(
        &output,
        "acp-lsp request with the stub",
        &[
            &format!("rust-analyzer at {root}"),
            "rustup component add rust-analyzer",
        ],
    );
}

/// A definition in the Rust standard library can be followed: the
/// toolchain's sources are a discovered read-only root, so a hover on the
/// definition `textDocument/definition` gave is answered (it was refused as
/// outside the session roots), and `servers` lists the root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_definition_in_the_standard_library_can_be_hovered() {
    let project = Project::rust();
    let root = project.root.display().to_string();
    // `String` in `pub fn greeting(name: &str) -> String {` (src/greet.rs).
    let line = project
        .read("src/greet.rs")
        .lines()
        .position(|l| l.contains("-> String"))
        .expect("greet.rs returns a String");
    let character = project
        .read("src/greet.rs")
        .lines()
        .nth(line)
        .unwrap_or_default()
        .find("String")
        .unwrap_or_default();
    let output = project
        .request(
            "textDocument/definition",
            &json!({
                "textDocument": {"uri": project.uri("src/greet.rs")},
                "position": {"line": line, "character": character + 1}
            }),
        )
        .await;
    assert_success(&output, "definition of String");
    let found: Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    let target = &found[0];
    let uri = target["targetUri"]
        .as_str()
        .unwrap_or_else(|| panic!("{found}"));
    assert!(
        uri.contains("/lib/rustlib/src/rust/library/alloc/src/string.rs"),
        "String is defined in the standard library's sources (`rustup component add rust-src`): {found}"
    );
    let output = project
        .request(
            "textDocument/hover",
            &json!({
                "textDocument": {"uri": uri},
                "position": target["targetSelectionRange"]["start"]
            }),
        )
        .await;
    assert_success(&output, "hover inside the standard library");
    let hover: Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    assert!(
        hover["contents"]["value"]
            .as_str()
            .is_some_and(|v| v.contains("pub struct String")),
        "{hover}"
    );

    let output = project.run(&["servers", "--verbose", &root], None).await;
    assert_success(&output, "acp-lsp servers");
    let text = stdout(&output);
    assert!(
        text.lines().any(|l| l.trim_start().starts_with('/')
            && l.contains("/lib/rustlib/src/rust")
            && l.contains("Rust standard library sources")),
        "{text}"
    );
}

/// `acp-lsp servers` on this repository (a Rust workspace with fixture
/// projects of four languages nested in it) fits a terminal: at most 25
/// lines of at most 100 columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_on_this_repository_fits_a_terminal() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = run_in(&["servers", &repo.display().to_string()], repo, repo, &[]).await;
    assert_success(&output, "acp-lsp servers on this repository");
    let text = stdout(&output);
    let widest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(
        text.lines().count() <= 25 && widest <= 100,
        "{} lines, the widest {widest} columns:\n{text}",
        text.lines().count()
    );
    // One line per server, whatever its number of roots.
    assert_eq!(
        text.lines()
            .filter(|l| l.split_whitespace().next() == Some("pyright"))
            .count(),
        1,
        "{text}"
    );
}

/// `request --shared` uses the shared daemon's server, and a later
/// `request` without the flag finds the daemon running and uses its warm
/// server too: the same rust-analyzer process answers all three calls, and
/// it outlives each command (the daemon's idle grace keeps it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_uses_the_shared_daemons_warm_server() {
    let project = Project::rust();
    let runtime = project.dir.path().join("runtime");
    std::fs::create_dir_all(&runtime).expect("mkdir runtime");
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod runtime");
    let runtime_text = runtime.display().to_string();
    let env = [("XDG_RUNTIME_DIR", runtime_text.as_str())];
    let root = project.root.display().to_string();
    let params = json!({
        "textDocument": {"uri": project.uri("src/lib.rs")},
        "position": {"line": 0, "character": 0}
    })
    .to_string();
    let config_home = project.dir.path().join("config");
    // The call without --shared runs with a PATH that has no rust-analyzer:
    // only the daemon's running server can answer it (its own would be
    // "not installed", exit 1).
    let no_servers = project.dir.path().join("empty-bin");
    std::fs::create_dir_all(&no_servers).expect("mkdir empty-bin");
    let no_servers = no_servers.display().to_string();
    let call = |shared: bool| {
        let mut args = vec![
            "request",
            "textDocument/hover",
            params.as_str(),
            "--root",
            root.as_str(),
        ];
        let mut env: Vec<(&str, &str)> = env.to_vec();
        if shared {
            args.push("--shared");
        } else {
            env.push(("PATH", no_servers.as_str()));
        }
        let args: Vec<String> = args.into_iter().map(str::to_string).collect();
        let env: Vec<(String, String)> = env
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let cwd = project.root.clone();
        let config_home = config_home.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            run_in(&args, &cwd, &config_home, &env).await
        }
    };
    let status = || async {
        let output = run_in(
            &["daemon", "status", "--json"],
            &project.root,
            &config_home,
            &env,
        )
        .await;
        assert_success(&output, "acp-lsp daemon status");
        serde_json::from_slice::<Value>(&output.stdout).expect("status JSON")
    };
    let server_pids = |status: &Value| -> Vec<u64> {
        status["servers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["name"] == "rust-analyzer")
            .filter_map(|s| s["_meta"]["acp-lsp"]["pid"].as_u64())
            .collect()
    };
    let first = call(true).await;
    assert_success(&first, "request --shared");
    let after_first = status().await;
    let pids = server_pids(&after_first);
    assert_eq!(
        pids.len(),
        1,
        "the daemon runs rust-analyzer: {after_first}"
    );
    let second = call(true).await;
    assert_success(&second, "request --shared, again");
    let third = call(false).await;
    assert_success(
        &third,
        "request while the daemon runs, with no rust-analyzer on PATH",
    );
    assert_eq!(first.stdout, second.stdout);
    assert_eq!(first.stdout, third.stdout);
    let after = status().await;
    assert_eq!(
        server_pids(&after),
        pids,
        "the same warm server answered: {after}"
    );
    // The daemon and its servers go with the test.
    if let Some(pid) = after["pid"].as_u64() {
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
    }
}
