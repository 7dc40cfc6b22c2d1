//! Lazy roots with real servers (issue 14): only a session root's own
//! servers start on `session/new`; for an agent that knows the extension
//! (`_meta.startAll: false`) a nested root's server is `idle` until a
//! request names its id or a file under its root, or `lsp/servers` asks
//! `_meta.startAll`; an agent that knows only the RFD (no `startAll`) sees
//! every server being started, within the cap (issue 27);
//! `max_running_servers` stops the least recently used server that may make
//! room (a nested one, or a session root's own unused for the idle time),
//! or refuses with `server_limit`; a nested server that idles for
//! `nested_idle_stop_ms` goes back to `idle`.
#![cfg(target_os = "linux")]

mod support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use acp_lsp::lsp::config::Config;
use acp_lsp::lsp::registry::{Registry, RegistryOptions};
use acp_lsp_core::gate::{Gate, GateConfig, GateMethod, ServerState};
use acp_lsp_core::jsonrpc::RequestId;
use serde_json::{json, Value};
use support::recorded::file_uri;
use support::require;

/// Upper bound on one gate call (above the gate's own deadline).
const CALL_TIMEOUT: Duration = Duration::from_secs(150);
/// `waitUntilReady` of requests that need an answer, in milliseconds.
const WAIT_UNTIL_READY_MS: u64 = 90_000;
/// Longest wait for a server to reach a state.
const STATE_TIMEOUT: Duration = Duration::from_secs(120);
const PYRIGHT_INSTALL: &str = "npm i -g pyright";
const RUST_ANALYZER_INSTALL: &str = "rustup component add rust-analyzer";

const CARGO_PACKAGE: &str = "[package]\nname = \"NAME\"\nversion = \"0.1.0\"\nedition = \"2021\"\n";
const PYTHON_MODULE: &str = "def rect_area(width: int, height: int) -> int:\n    return width * height\n\n\nprint(rect_area(2, 3))\n";

/// Writes `files` (path, text) below a new temporary directory.
fn tree(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("acp-lsp-lazy-")
        .tempdir()
        .expect("temp dir");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&path, text).expect("write a file");
    }
    let root = dir.path().canonicalize().expect("canonical root");
    (dir, root)
}

/// A Rust crate at the top with a nested crate and a nested Python project.
fn rust_with_nested_roots() -> (tempfile::TempDir, PathBuf) {
    tree(&[
        ("Cargo.toml", &CARGO_PACKAGE.replace("NAME", "top")),
        ("src/lib.rs", "pub fn top() -> u32 {\n    1\n}\n"),
        (
            "nested/Cargo.toml",
            &CARGO_PACKAGE.replace("NAME", "nested"),
        ),
        ("nested/src/lib.rs", "pub fn nested() -> u32 {\n    2\n}\n"),
        ("py/pyproject.toml", "[project]\nname = \"py\"\n"),
        ("py/m.py", PYTHON_MODULE),
    ])
}

/// Python projects in `names`, each in its own folder below a new directory
/// (so each is a nested root of a session on that directory).
fn python_projects(names: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let files: Vec<(String, String)> = names
        .iter()
        .flat_map(|n| {
            [
                (
                    format!("{n}/pyproject.toml"),
                    format!("[project]\nname = \"{n}\"\n"),
                ),
                (format!("{n}/m.py"), PYTHON_MODULE.to_string()),
            ]
        })
        .collect();
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    tree(&borrowed)
}

/// One registry and gate with one session over `roots`.
struct Lazy {
    registry: Arc<Registry>,
    gate: Arc<Gate<Registry>>,
    next_id: AtomicU64,
}

const SESSION: &str = "s1";

impl Lazy {
    fn open(config: Config, roots: Vec<PathBuf>) -> Lazy {
        let registry = Registry::new(config, RegistryOptions::default());
        let gate = Gate::new(Arc::clone(&registry), GateConfig::default());
        gate.open_session(SESSION, roots);
        Lazy {
            registry,
            gate,
            next_id: AtomicU64::new(1),
        }
    }

    async fn call(&self, method: GateMethod, params: Value) -> Value {
        let id = RequestId::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed));
        let raw = serde_json::value::to_raw_value(&params).expect("params serialize");
        let bytes = tokio::time::timeout(CALL_TIMEOUT, self.gate.call(id, method, Some(raw)))
            .await
            .unwrap_or_else(|_| panic!("no answer within {CALL_TIMEOUT:?} to {params}"));
        serde_json::from_slice(&bytes).expect("the gate answers JSON")
    }

    /// `lsp/servers` entries, by (name, workspacePath relative to `root`).
    async fn servers(&self, meta: Option<Value>) -> Vec<Value> {
        let mut params = json!({ "sessionId": SESSION });
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        let answer = self.call(GateMethod::Servers, params).await;
        answer["result"]["servers"]
            .as_array()
            .unwrap_or_else(|| panic!("no servers: {answer}"))
            .clone()
    }

    /// The entry of `name` at `root`, listed as an agent that knows the
    /// extension and keeps the lazy start (`_meta.startAll: false`).
    async fn entry(&self, name: &str, root: &Path) -> Value {
        self.entry_listed(name, root, Some(json!({ "startAll": false })))
            .await
    }

    /// The entry of `name` at `root`, listed with `meta`.
    async fn entry_listed(&self, name: &str, root: &Path, meta: Option<Value>) -> Value {
        let path = root.display().to_string();
        self.servers(meta)
            .await
            .into_iter()
            .find(|e| e["name"] == json!(name) && e["workspacePath"] == json!(path))
            .unwrap_or_else(|| panic!("no {name} at {path}"))
    }

    /// A hover at (0, 4) of `file`, to `server_id`.
    async fn hover(&self, server_id: &str, file: &Path, wait_ms: Option<u64>) -> Value {
        let mut params = json!({
            "sessionId": SESSION,
            "serverId": server_id,
            "method": "textDocument/hover",
            "params": {
                "textDocument": { "uri": file_uri(file) },
                "position": { "line": 0, "character": 4 },
            },
        });
        if let Some(ms) = wait_ms {
            params["_meta"] = json!({ "waitUntilReady": ms });
        }
        self.call(GateMethod::Request, params).await
    }

    fn live_roots(&self) -> Vec<(String, PathBuf)> {
        let mut live: Vec<(String, PathBuf)> = self
            .registry
            .running_servers()
            .iter()
            .map(|s| (s.spec().config.name.clone(), s.spec().root.clone()))
            .collect();
        live.sort();
        live
    }

    /// Waits until the server `id` (the object registered now) reaches a
    /// state `until` accepts.
    async fn wait_state(&self, id: &str, until: impl Fn(ServerState) -> bool) -> ServerState {
        let server = self.registry.server(id).expect("registered");
        tokio::time::timeout(STATE_TIMEOUT, server.wait_for_state(until))
            .await
            .unwrap_or_else(|_| panic!("no such state: {:?}", server.status()))
    }
}

fn id_of(entry: &Value) -> String {
    entry["serverId"].as_str().expect("serverId").to_string()
}

fn status(entry: &Value) -> (&str, &str) {
    (
        entry["state"].as_str().unwrap_or_default(),
        entry["_meta"]["acp-lsp"]["status"]
            .as_str()
            .unwrap_or_default(),
    )
}

/// Python servers other than pyright stay out of these trees' way.
fn pyright_only(mut config: Config) -> Config {
    for server in &mut config.servers {
        if ["basedpyright", "pylsp"].contains(&server.name.as_str()) {
            server.enabled = false;
        }
    }
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_session_roots_server_starts_and_a_named_file_starts_its_own() {
    require("rust-analyzer", RUST_ANALYZER_INSTALL);
    require("pyright-langserver", PYRIGHT_INSTALL);
    let (_dir, root) = rust_with_nested_roots();
    let lazy = Lazy::open(pyright_only(Config::builtin()), vec![root.clone()]);

    // Listed: all three; started: the session root's rust-analyzer alone.
    let servers = lazy.servers(Some(json!({ "startAll": false }))).await;
    assert_eq!(servers.len(), 3, "{servers:#?}");
    let top = lazy.entry("rust-analyzer", &root).await;
    assert!(
        ["starting", "running"].contains(&status(&top).0),
        "top-level: {top}"
    );
    let nested = lazy.entry("rust-analyzer", &root.join("nested")).await;
    let python = lazy.entry("pyright", &root.join("py")).await;
    for entry in [&nested, &python] {
        assert_eq!(status(entry), ("not_running", "idle"), "{entry}");
    }
    // Still so once the top-level server is ready: nothing else started it.
    let state = lazy
        .wait_state(&id_of(&top), |s| {
            matches!(s, ServerState::Ready | ServerState::Failed)
        })
        .await;
    assert_eq!(state, ServerState::Ready);
    assert_eq!(
        lazy.live_roots(),
        vec![("rust-analyzer".into(), root.clone())]
    );

    // A request naming the idle pyright starts it: at once, "starting"…
    let file = root.join("py/m.py");
    let answer = lazy.hover(&id_of(&python), &file, None).await;
    assert_eq!(
        answer["error"]["data"]["reason"],
        json!("server_not_running"),
        "{answer}"
    );
    assert_eq!(
        answer["error"]["data"]["state"],
        json!("starting"),
        "{answer}"
    );
    assert_eq!(
        answer["error"]["data"]["status"],
        json!("starting"),
        "{answer}"
    );
    // …and with waitUntilReady, an answer.
    let answer = lazy
        .hover(&id_of(&python), &file, Some(WAIT_UNTIL_READY_MS))
        .await;
    let hover = answer["result"]["lspResult"].to_string();
    assert!(hover.contains("rect_area"), "{answer}");

    // A request that names a file under the nested crate, to the top-level
    // server, starts the nested crate's own server.
    assert_eq!(
        status(&lazy.entry("rust-analyzer", &root.join("nested")).await).1,
        "idle"
    );
    let _ = lazy
        .hover(&id_of(&top), &root.join("nested/src/lib.rs"), None)
        .await;
    let nested = lazy.entry("rust-analyzer", &root.join("nested")).await;
    assert_ne!(status(&nested).1, "idle", "{nested}");
    assert_eq!(lazy.live_roots().len(), 3, "{:?}", lazy.live_roots());
    lazy.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_all_starts_the_nested_servers() {
    require("pyright-langserver", PYRIGHT_INSTALL);
    let (_dir, root) = python_projects(&["a", "b"]);
    let lazy = Lazy::open(pyright_only(Config::builtin()), vec![root.clone()]);
    let before = lazy.servers(Some(json!({ "startAll": false }))).await;
    assert_eq!(before.len(), 2, "{before:#?}");
    assert!(
        before.iter().all(|e| status(e) == ("not_running", "idle")),
        "{before:#?}"
    );
    assert!(lazy.live_roots().is_empty());

    let after = lazy.servers(Some(json!({ "startAll": true }))).await;
    assert!(after.iter().all(|e| status(e).1 != "idle"), "{after:#?}");
    assert_eq!(
        lazy.live_roots(),
        vec![
            ("pyright".to_string(), root.join("a")),
            ("pyright".to_string(), root.join("b"))
        ]
    );
    lazy.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_running_server_cap_stops_the_least_recently_used_nested_server() {
    require("pyright-langserver", PYRIGHT_INSTALL);
    // Session roots: a Python project (its server is top-level) and a folder
    // of two nested ones.
    let (_top_dir, top) = python_projects(&["."]);
    let (_nested_dir, nested) = python_projects(&["x", "y"]);
    let mut config = pyright_only(Config::builtin());
    config.max_running_servers = 2;
    let lazy = Lazy::open(config, vec![top.clone(), nested.clone()]);
    let top_entry = lazy.entry("pyright", &top).await;
    assert_ne!(status(&top_entry).1, "idle", "{top_entry}");

    // x starts: two running, the cap.
    let x = id_of(&lazy.entry("pyright", &nested.join("x")).await);
    let answer = lazy
        .hover(&x, &nested.join("x/m.py"), Some(WAIT_UNTIL_READY_MS))
        .await;
    assert!(answer["result"].is_object(), "{answer}");
    let old_x = lazy.registry.server(&x).expect("registered");

    // y starts: x, the least recently used nested server, is stopped.
    let y = id_of(&lazy.entry("pyright", &nested.join("y")).await);
    let answer = lazy
        .hover(&y, &nested.join("y/m.py"), Some(WAIT_UNTIL_READY_MS))
        .await;
    assert!(answer["result"].is_object(), "{answer}");
    tokio::time::timeout(
        STATE_TIMEOUT,
        old_x.wait_for_state(|s| s == ServerState::Stopped),
    )
    .await
    .expect("x stopped to make room");
    assert_eq!(
        status(&lazy.entry("pyright", &nested.join("x")).await),
        ("not_running", "idle")
    );
    let mut expected = vec![
        ("pyright".to_string(), top.clone()),
        ("pyright".to_string(), nested.join("y")),
    ];
    expected.sort();
    assert_eq!(lazy.live_roots(), expected);
    lazy.registry.shutdown().await;

    // With room for one, the session root's server: a nested one is refused.
    let mut config = pyright_only(Config::builtin());
    config.max_running_servers = 1;
    let lazy = Lazy::open(config, vec![top.clone(), nested.clone()]);
    let x = id_of(&lazy.entry("pyright", &nested.join("x")).await);
    let answer = lazy.hover(&x, &nested.join("x/m.py"), None).await;
    assert_eq!(
        answer["error"]["data"]["reason"],
        json!("server_limit"),
        "{answer}"
    );
    assert_eq!(answer["error"]["data"]["limit"], json!(1), "{answer}");
    assert_eq!(answer["error"]["data"]["serverId"], json!(x), "{answer}");
    assert_eq!(
        lazy.live_roots(),
        vec![("pyright".to_string(), top.clone())]
    );
    lazy.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_server_that_idles_goes_back_to_idle() {
    require("pyright-langserver", PYRIGHT_INSTALL);
    let (_dir, root) = python_projects(&["a"]);
    let mut config = pyright_only(Config::builtin());
    config.nested_idle_stop_ms = 1;
    let lazy = Lazy::open(config, vec![root.clone()]);
    let a = id_of(&lazy.entry("pyright", &root.join("a")).await);
    let answer = lazy
        .hover(&a, &root.join("a/m.py"), Some(WAIT_UNTIL_READY_MS))
        .await;
    // Not stopped while it served the request: it answered.
    assert!(answer["result"].is_object(), "{answer}");
    let served = lazy.registry.server(&a).expect("registered");
    tokio::time::timeout(
        STATE_TIMEOUT,
        served.wait_for_state(|s| s == ServerState::Stopped),
    )
    .await
    .expect("stopped after idling");
    assert_eq!(
        status(&lazy.entry("pyright", &root.join("a")).await),
        ("not_running", "idle")
    );
    assert!(lazy.live_roots().is_empty());
    // Used again, it starts again.
    let answer = lazy
        .hover(&a, &root.join("a/m.py"), Some(WAIT_UNTIL_READY_MS))
        .await;
    assert!(answer["result"].is_object(), "{answer}");
    lazy.registry.shutdown().await;
}

/// Lists the session's servers as an agent written to the RFD alone does
/// (no `_meta`) until `done` holds for the entries, within `STATE_TIMEOUT`.
async fn poll_until(lazy: &Lazy, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + STATE_TIMEOUT;
    loop {
        let servers = lazy.servers(None).await;
        if done(&servers) {
            return servers;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never so: {servers:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 27, 1: a monorepo of separate projects (no marker at the top) and
/// an agent that knows only the RFD: it sends requests only to servers it
/// sees `running`, so every server it is shown must be on its way there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_knows_only_the_rfd_reaches_every_nested_server() {
    require("pyright-langserver", PYRIGHT_INSTALL);
    let (_dir, root) = python_projects(&["p1", "p2"]);
    let lazy = Lazy::open(pyright_only(Config::builtin()), vec![root.clone()]);
    // The first listing already shows both being started…
    let first = lazy.servers(None).await;
    assert_eq!(first.len(), 2, "{first:#?}");
    for entry in &first {
        assert_ne!(status(entry).1, "idle", "{entry}");
        assert!(
            ["starting", "running"].contains(&status(entry).0),
            "{entry}"
        );
    }
    // …and both get to `running` with nothing but listings.
    let running = poll_until(&lazy, |servers| {
        servers.iter().all(|e| e["state"] == json!("running"))
    })
    .await;
    // The RFD's FAQ rule finds each file's server; it answers.
    for project in ["p1", "p2"] {
        let file = root.join(project).join("m.py");
        let server = running
            .iter()
            .find(|e| file.starts_with(e["workspacePath"].as_str().unwrap_or("/nowhere")))
            .unwrap_or_else(|| panic!("no server for {}", file.display()));
        let answer = lazy.hover(&id_of(server), &file, None).await;
        assert!(
            answer["result"]["lspResult"]
                .to_string()
                .contains("rect_area"),
            "{answer}"
        );
    }
    lazy.registry.shutdown().await;
}

/// Issue 27, 1: what cannot start for the cap is not shown as starting: it
/// is `not_running` with the reason and the cap, and the listing starts no
/// more than there is room for (nor stops what it started).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_starts_only_what_the_cap_has_room_for_and_says_why_not() {
    require("pyright-langserver", PYRIGHT_INSTALL);
    let (_dir, root) = python_projects(&["p1", "p2", "p3"]);
    let mut config = pyright_only(Config::builtin());
    config.max_running_servers = 2;
    let lazy = Lazy::open(config, vec![root.clone()]);
    for _ in 0..3 {
        let servers = lazy.servers(None).await;
        let started: Vec<&Value> = servers.iter().filter(|e| status(e).1 != "idle").collect();
        let refused: Vec<&Value> = servers.iter().filter(|e| status(e).1 == "idle").collect();
        assert_eq!(started.len(), 2, "{servers:#?}");
        assert_eq!(refused.len(), 1, "{servers:#?}");
        assert_eq!(status(refused[0]).0, "not_running");
        assert_eq!(
            refused[0]["_meta"]["acp-lsp"]["stateReason"],
            json!({ "reason": "server_limit", "limit": 2 }),
            "{servers:#?}"
        );
        for entry in started {
            assert!(
                entry["_meta"]["acp-lsp"].get("stateReason").is_none(),
                "{entry}"
            );
        }
        assert_eq!(lazy.live_roots().len(), 2, "{:?}", lazy.live_roots());
    }
    lazy.registry.shutdown().await;
}

/// Issue 27, 9: more session roots than `max_running_servers`: a session
/// root's own server that nothing used for the idle time makes room for
/// the next session's, which is shown `not_running` with the reason and the
/// cap until then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_session_roots_than_the_cap_take_turns() {
    require("pyright-langserver", PYRIGHT_INSTALL);
    let dirs: Vec<(tempfile::TempDir, PathBuf)> = (0..3).map(|_| python_projects(&["."])).collect();
    let mut config = pyright_only(Config::builtin());
    config.max_running_servers = 2;
    config.nested_idle_stop_ms = 5_000;
    let registry = Registry::new(
        config,
        RegistryOptions {
            start_when_listed: true,
            ..RegistryOptions::default()
        },
    );
    let gate = Gate::new(Arc::clone(&registry), GateConfig::default());
    let lazy = Lazy {
        registry,
        gate,
        next_id: AtomicU64::new(1),
    };
    // Two sessions, each on its own project: both servers run, are used.
    for (i, (_, root)) in dirs.iter().take(2).enumerate() {
        let session = format!("s{i}");
        lazy.gate.open_session(&session, vec![root.clone()]);
    }
    let mut ids = Vec::new();
    for (i, (_, root)) in dirs.iter().take(2).enumerate() {
        let session = format!("s{i}");
        let answer = lazy
            .call(GateMethod::Servers, json!({ "sessionId": session }))
            .await;
        let id = answer["result"]["servers"][0]["serverId"]
            .as_str()
            .expect("a server")
            .to_string();
        let hover = lazy
            .call(
                GateMethod::Request,
                json!({
                    "sessionId": session, "serverId": id, "method": "textDocument/hover",
                    "params": {"textDocument": {"uri": file_uri(&root.join("m.py"))},
                               "position": {"line": 0, "character": 4}},
                    "_meta": {"waitUntilReady": WAIT_UNTIL_READY_MS}
                }),
            )
            .await;
        assert!(hover["result"].is_object(), "{hover}");
        ids.push(id);
    }
    // Both used just now (their starts took a while on a busy machine).
    for (i, (_, root)) in dirs.iter().take(2).enumerate() {
        let hover = lazy
            .call(
                GateMethod::Request,
                json!({
                    "sessionId": format!("s{i}"), "serverId": ids[i], "method": "textDocument/hover",
                    "params": {"textDocument": {"uri": file_uri(&root.join("m.py"))},
                               "position": {"line": 0, "character": 4}}
                }),
            )
            .await;
        assert!(hover["result"].is_object(), "{hover}");
    }
    // The third session's own server has no room yet: said, with the cap.
    lazy.gate.open_session("s2", vec![dirs[2].1.clone()]);
    let listed = lazy
        .call(GateMethod::Servers, json!({ "sessionId": "s2" }))
        .await;
    let third = &listed["result"]["servers"][0];
    assert_eq!(status(third), ("not_running", "idle"), "{listed}");
    assert_eq!(
        third["_meta"]["acp-lsp"]["stateReason"],
        json!({ "reason": "server_limit", "limit": 2 }),
        "{listed}"
    );
    // Once the others idled for the idle time, its agent's listing starts it.
    let deadline = tokio::time::Instant::now() + STATE_TIMEOUT;
    loop {
        let listed = lazy
            .call(GateMethod::Servers, json!({ "sessionId": "s2" }))
            .await;
        let third = &listed["result"]["servers"][0];
        if third["state"] == json!("running") {
            assert!(
                third["_meta"]["acp-lsp"].get("stateReason").is_none(),
                "{third}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never ran: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The least recently used session root's server made room.
    assert_eq!(lazy.live_roots().len(), 2, "{:?}", lazy.live_roots());
    let first = lazy.registry.server(&ids[0]).expect("registered");
    assert_eq!(first.state(), ServerState::Idle, "s0's server stopped");
    lazy.registry.shutdown().await;
}
