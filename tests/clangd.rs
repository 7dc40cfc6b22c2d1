//! clangd on a plain folder of C files (`tests/projects/c-plain`: `main.c`,
//! `util.c`, `util.h` and only a `compile_flags.txt`): acp-lsp gives clangd
//! a compilation database of the root in a private cache directory, so a
//! rename from `main.c` reaches every file and the program still builds;
//! clangd is `running` only once its background index covers the project;
//! and a session leaves nothing in the project (`.cache/clangd/` and the
//! database live in the cache directory).
//!
//! The binary runs with `XDG_CACHE_HOME` in the test's temporary directory.
//! A missing clangd or C compiler fails the tests; they never skip.
#![cfg(target_os = "linux")]

mod support;

use support::recorded::{request_params, uri_path, Recorded};
use support::{copy_tree, require, snapshot_tree};

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use acp_lsp_core::gate::{GateMethod, ServerState};
use serde_json::{json, Value};

/// Upper bound on the wait for clangd to be `ready` in-process.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// Upper bound on the wait, after a source is created or deleted, for a new
/// clangd process to be ready (the watcher hands changes on within tens of
/// milliseconds; clangd restarts and indexes this project in well under a second).
const RESTART_TIMEOUT: Duration = Duration::from_secs(60);
const CLANGD_INSTALL: &str = "apt-get install -y clangd";
const FILES: &[&str] = &["main.c", "util.c", "util.h"];

/// A copy of `tests/projects/c-plain` (`project/`) beside an empty cache
/// home (`cache/`) and config home (`config/`).
struct Plain {
    dir: tempfile::TempDir,
    root: PathBuf,
}

impl Plain {
    fn new() -> Plain {
        require("clangd", CLANGD_INSTALL);
        let dir = tempfile::Builder::new()
            .prefix("acp-lsp-clangd-")
            .tempdir()
            .expect("create a temporary directory");
        let copy = dir.path().join("project");
        for sub in ["project", "cache", "config"] {
            std::fs::create_dir(dir.path().join(sub)).expect("create a directory");
        }
        copy_tree(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/c-plain"),
            &copy,
        );
        let root = copy.canonicalize().expect("canonicalize the copy");
        Plain { dir, root }
    }

    fn cache_home(&self) -> PathBuf {
        self.dir.path().join("cache")
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.root.join(file)).unwrap_or_else(|e| panic!("read {file}: {e}"))
    }

    /// `acp-lsp ARGS` in the project, bounded by `support::cli::RUN_TIMEOUT`;
    /// it must succeed.
    async fn run(&self, args: &[&str]) -> Output {
        let (cache, config) = (self.cache_home(), self.dir.path().join("config"));
        let output = support::cli::run(
            args,
            &self.root,
            &[
                ("XDG_CACHE_HOME", cache.as_os_str()),
                ("XDG_CONFIG_HOME", config.as_os_str()),
            ],
        )
        .await;
        support::cli::assert_success(&output, &format!("`acp-lsp {}`", args.join(" ")));
        output
    }

    /// The one per-root clangd directory under the cache home.
    fn clangd_dir(&self) -> PathBuf {
        let parent = self.cache_home().join("acp-lsp/clangd");
        let dirs: Vec<PathBuf> = std::fs::read_dir(&parent)
            .unwrap_or_else(|e| panic!("read {}: {e}", parent.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        assert_eq!(dirs.len(), 1, "one directory per root: {dirs:?}");
        dirs.into_iter().next().expect("one directory")
    }

    /// Nothing but the fixture's own files in the project.
    fn assert_nothing_added(&self) {
        let files: Vec<PathBuf> = snapshot_tree(&self.root, &[]).into_keys().collect();
        let mut expected: Vec<PathBuf> = FILES
            .iter()
            .chain(&["compile_flags.txt"])
            .map(PathBuf::from)
            .collect();
        expected.sort();
        assert_eq!(files, expected, "the session left files in the project");
    }
}

fn identifier_count(text: &str, name: &str) -> usize {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| *w == name)
        .count()
}

/// The case: with only `compile_flags.txt`, clangd alone renames
/// `main.c` and leaves `util.c`/`util.h`, and the build breaks. Through the
/// `acp-lsp rename` binary (its gate, registry and a real clangd), every
/// occurrence in the three files is renamed and the program still builds
/// and runs; the project holds no `.cache/` and no database afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_across_three_files_with_only_compile_flags_still_compiles() {
    require("cc", "apt-get install -y gcc");
    let project = Plain::new();
    // main.c line 6: `    int sum = add_numbers(1, 2);`
    let output = project.run(&["rename", "main.c:6:15", "sum_of"]).await;
    let mut printed: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    printed.sort();
    let expected: Vec<String> = FILES
        .iter()
        .map(|f| format!("changed {}", project.root.join(f).display()))
        .collect();
    assert_eq!(printed, expected);
    let mut renamed = 0;
    for file in FILES {
        let text = project.read(file);
        assert_eq!(identifier_count(&text, "add_numbers"), 0, "{file}:\n{text}");
        renamed += identifier_count(&text, "sum_of");
    }
    assert_eq!(renamed, 5, "every occurrence is renamed");

    // It still builds, and runs as before.
    let program = project.dir.path().join("program");
    let built = std::process::Command::new("cc")
        .args(["-std=c11", "-Wall", "-Werror", "main.c", "util.c", "-o"])
        .arg(&program)
        .current_dir(&project.root)
        .output()
        .expect("run cc");
    assert!(
        built.status.success(),
        "cc failed after the rename:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let ran = std::process::Command::new(&program)
        .output()
        .expect("run the program");
    assert_eq!(String::from_utf8_lossy(&ran.stdout), "3 14\n");

    // The database and clangd's index are in the private cache directory.
    project.assert_nothing_added();
    let dir = project.clangd_dir();
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&dir)
            .expect("stat the cache dir")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
    let database: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("compile_commands.json")).expect("the database"),
    )
    .expect("the database is JSON");
    let mut listed: Vec<String> = database
        .as_array()
        .expect("an array")
        .iter()
        .map(|c| c["file"].as_str().expect("a file").to_string())
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        ["main.c", "util.c"].map(|f| project.root.join(f).display().to_string())
    );
    let index: Vec<String> = std::fs::read_dir(dir.join(".cache/clangd/index"))
        .expect("clangd's index beside the database")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    for source in ["main.c.", "util.c.", "util.h."] {
        assert!(
            index.iter().any(|f| f.starts_with(source)),
            "no index shard of {source}: {index:?}"
        );
    }
}

/// The issue measured `--dry-run` leaving clangd's `.cache/` in the project.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_leaves_the_project_as_it_was() {
    let project = Plain::new();
    let before = snapshot_tree(&project.root, &[]);
    let output = project
        .run(&["rename", "main.c:6:15", "sum_of", "--dry-run"])
        .await;
    let diff = String::from_utf8_lossy(&output.stdout);
    for file in FILES {
        assert!(
            diff.contains(&format!("+++ b/{file}")),
            "{file} not in:\n{diff}"
        );
    }
    assert_eq!(snapshot_tree(&project.root, &[]), before);
    project.assert_nothing_added();
}

/// The serverId of session s1's clangd, from `lsp/servers`.
async fn clangd_id(h: &Recorded) -> String {
    let servers = h
        .response(GateMethod::Servers, json!({ "sessionId": "s1" }))
        .await;
    servers["result"]["servers"]
        .as_array()
        .and_then(|s| s.iter().find(|e| e["name"] == "clangd"))
        .and_then(|e| e["serverId"].as_str())
        .unwrap_or_else(|| panic!("no clangd entry: {servers}"))
        .to_string()
}

/// clangd answers from its index as soon as it is `ready`: references from
/// `main.c`, asked without `waitUntilReady` the moment the server is first
/// `ready`, include `util.c` and `util.h`, which no request has opened. (A
/// clangd taken as ready after its handshake answers from `main.c` alone.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clangd_is_ready_only_once_its_index_covers_the_project() {
    require("clangd", CLANGD_INSTALL);
    let h = Recorded::start("c-plain", "acp-lsp-clangd-ready-", |_| {});
    let server_id = clangd_id(&h).await;
    let server = h.registry.server(&server_id).expect("the listed server");
    server.ensure_started();
    let state = tokio::time::timeout(
        READY_TIMEOUT,
        server.wait_for_state(|s| {
            matches!(
                s,
                ServerState::Ready | ServerState::Failed | ServerState::Stopped
            )
        }),
    )
    .await
    .unwrap_or_else(|_| {
        panic!(
            "clangd not ready within {READY_TIMEOUT:?}: {:?}",
            server.status()
        )
    });
    assert_eq!(state, ServerState::Ready, "{:?}", server.status());
    assert!(
        server.status().loaded,
        "ready after its index: {:?}",
        server.status()
    );

    let params = json!({
        "textDocument": { "uri": h.uri("main.c") },
        "position": { "line": 5, "character": 14 },
        "context": { "includeDeclaration": true },
    });
    let response = h
        .response(
            GateMethod::Request,
            request_params(&server_id, "textDocument/references", params, None),
        )
        .await;
    let locations = response["result"]["lspResult"]
        .as_array()
        .unwrap_or_else(|| panic!("references: {response}"));
    let mut found: Vec<(String, u64)> = locations
        .iter()
        .map(|l| {
            let uri = l["uri"].as_str().expect("a uri");
            (
                h.relative_path(&uri_path(uri), uri),
                l["range"]["start"]["line"].as_u64().expect("a line"),
            )
        })
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            ("main.c", 5),
            ("main.c", 7),
            ("util.c", 2),
            ("util.c", 7),
            ("util.h", 4)
        ]
        .map(|(f, l)| (f.to_string(), l)),
        "{response}"
    );
    h.registry.shutdown().await;
}

/// A C file created after clangd has indexed joins its index: acp-lsp
/// writes the database again and restarts clangd on it (clangd 14 does not
/// reread it), and the server is not `running` until the new index is done.
/// Deleted again, it leaves the database the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_source_joins_the_index() {
    require("clangd", CLANGD_INSTALL);
    let h = Recorded::start("c-plain", "acp-lsp-clangd-new-", |_| {});
    let server_id = clangd_id(&h).await;
    let server = h.registry.server(&server_id).expect("the listed server");
    server.ensure_started();
    tokio::time::timeout(
        READY_TIMEOUT,
        server.wait_for_state(|s| s == ServerState::Ready),
    )
    .await
    .unwrap_or_else(|_| panic!("clangd not ready: {:?}", server.status()));

    let before = server
        .entry()
        .ours()
        .pid
        .expect("a running clangd has a pid");
    std::fs::write(
        h.root.join("extra.c"),
        "#include \"util.h\"\n\nint extra(void) {\n    return add_numbers(5, 6);\n}\n",
    )
    .expect("write extra.c");
    // The watcher's batch restarts clangd: a new process, ready once indexed.
    let first = ready_process(&server, before).await;
    let params = json!({
        "textDocument": { "uri": h.uri("util.h") },
        "position": { "line": 4, "character": 4 },
        "context": { "includeDeclaration": false },
    });
    let response = h
        .response(
            GateMethod::Request,
            request_params(&server_id, "textDocument/references", params, Some(60_000)),
        )
        .await;
    let files: std::collections::BTreeSet<String> = response["result"]["lspResult"]
        .as_array()
        .unwrap_or_else(|| panic!("references: {response}"))
        .iter()
        .map(|l| {
            let uri = l["uri"].as_str().expect("a uri");
            h.relative_path(&uri_path(uri), uri)
        })
        .collect();
    assert!(files.contains("extra.c"), "{response}");
    assert!(
        files.contains("main.c") && files.contains("util.c"),
        "{response}"
    );

    // Deleted: the database is written again without it, clangd restarted.
    std::fs::remove_file(h.root.join("extra.c")).expect("delete extra.c");
    ready_process(&server, first).await;
    let dir = acp_lsp::lsp::caches::root_dir("clangd", &h.root).expect("a cache directory");
    let database =
        std::fs::read_to_string(dir.join("compile_commands.json")).expect("the database");
    assert!(!database.contains("extra.c"), "{database}");
    assert!(database.contains("main.c"), "{database}");
    h.registry.shutdown().await;
}

/// With the project's own `compile_commands.json`, clangd reads it through a
/// link in the cache directory and writes its index there: a session (the
/// issue's `--dry-run`) leaves no `.cache/` in the project.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_projects_own_database_the_index_stays_out_of_the_project() {
    let project = Plain::new();
    let root = project.root.display().to_string();
    let commands: Vec<Value> = ["main.c", "util.c"]
        .iter()
        .map(|file| {
            json!({
                "directory": root,
                "file": file,
                "arguments": ["cc", "-std=c11", "-c", file],
            })
        })
        .collect();
    let own = project.root.join("compile_commands.json");
    std::fs::write(&own, Value::Array(commands).to_string()).expect("write the database");
    let before = snapshot_tree(&project.root, &[]);
    let output = project
        .run(&["rename", "main.c:6:15", "sum_of", "--dry-run"])
        .await;
    let diff = String::from_utf8_lossy(&output.stdout);
    for file in FILES {
        assert!(
            diff.contains(&format!("+++ b/{file}")),
            "{file} not in:\n{diff}"
        );
    }
    assert_eq!(
        snapshot_tree(&project.root, &[]),
        before,
        "the session changed the project (clangd's .cache/?)"
    );
    let dir = project.clangd_dir();
    assert_eq!(
        std::fs::read_link(dir.join("compile_commands.json")).ok(),
        Some(own)
    );
    assert!(dir.join(".cache/clangd/index").is_dir());
}

/// Waits, up to [`RESTART_TIMEOUT`], for `server` to be `ready` in a
/// process other than `old`; returns its pid. (A pid, not a state change:
/// the restart may pass through every state between two looks.)
async fn ready_process(server: &acp_lsp::lsp::server::Server, old: u32) -> u32 {
    support::wait::until(
        "clangd restarted and ready in a new process",
        RESTART_TIMEOUT,
        || {
            let pid = server.entry().ours().pid.filter(|pid| *pid != old)?;
            (server.status().state == ServerState::Ready).then_some(pid)
        },
    )
    .await
}
