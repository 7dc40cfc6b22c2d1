//! `_acp-lsp/diagnostics` against real servers: diagnostics that reflect the
//! text on disk right now, after each change, without the agent opening
//! anything; pulled from servers that answer `textDocument/diagnostic`
//! (rust-analyzer), waited for from those that push (pyright, clangd).

mod support;

use acp_lsp::lsp::config::Config;
use acp_lsp::lsp::registry::{Registry, RegistryOptions};
use acp_lsp_core::gate::{Gate, GateConfig, GateMethod};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Longest wait for pyright to publish diagnostics for a new text.
const WAIT_MS: u64 = 60_000;
/// Bound on a whole gate call.
const CALL_TIMEOUT: Duration = Duration::from_secs(90);

struct Harness {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    registry: Arc<Registry>,
    gate: Arc<Gate<Registry>>,
    next_id: AtomicU64,
}

impl Harness {
    fn start() -> Harness {
        Harness::start_with(
            "pyright",
            "pyright-langserver",
            "npm i -g pyright",
            |root| {
                std::fs::write(root.join("pyproject.toml"), "[project]\nname = \"d\"\n")
                    .expect("write");
                std::fs::write(root.join("a.py"), "x: int = 1\n").expect("write");
            },
        )
    }

    /// Only the built-in server `server` (whose binary is `command`), on a
    /// temporary root that `prepare` fills.
    fn start_with(
        server: &str,
        command: &str,
        install: &str,
        prepare: impl FnOnce(&Path),
    ) -> Harness {
        support::require(command, install);
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical root");
        prepare(&root);
        let mut config = Config::builtin();
        config.servers.retain(|s| s.name == server);
        let registry = Registry::new(config, RegistryOptions::default());
        let gate = Gate::new(Arc::clone(&registry), GateConfig::default());
        gate.open_session("s", vec![root.clone()]);
        Harness {
            _dir: dir,
            root,
            registry,
            gate,
            next_id: AtomicU64::new(1),
        }
    }

    fn uri(&self, name: &str) -> String {
        url::Url::from_file_path(self.root.join(name))
            .expect("file URI")
            .to_string()
    }

    async fn diagnostics(&self, params: Value) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        support::gate::call(
            &self.gate,
            id,
            GateMethod::Diagnostics,
            &params,
            CALL_TIMEOUT,
        )
        .await
    }

    /// The entries for `file`, waited for up to [`WAIT_MS`].
    async fn entries_for(&self, file: &str) -> Vec<Value> {
        let response = self
            .diagnostics(json!({"sessionId": "s", "uris": [self.uri(file)], "waitMs": WAIT_MS}))
            .await;
        entries_of(&response)
    }

    /// The one pyright entry for `a.py`, waited for until fresh.
    async fn fresh_for_a(&self) -> Value {
        let response = self
            .diagnostics(json!({"sessionId": "s", "uris": [self.uri("a.py")], "waitMs": WAIT_MS}))
            .await;
        let entries = entries_of(&response);
        assert_eq!(entries.len(), 1, "{response}");
        let entry = entries[0].clone();
        assert_eq!(entry["uri"], self.uri("a.py"), "{entry}");
        assert_eq!(entry["fresh"], true, "{entry}");
        assert_eq!(entry["timedOut"], false, "{entry}");
        assert_eq!(
            entry["serverId"].as_str().map(str::len),
            Some(36),
            "{entry}"
        );
        entry
    }
}

/// The entries of a `_acp-lsp/diagnostics` response.
fn entries_of(response: &Value) -> Vec<Value> {
    response["result"]["diagnostics"]
        .as_array()
        .unwrap_or_else(|| panic!("no diagnostics array: {response}"))
        .clone()
}

fn messages(entry: &Value) -> Vec<String> {
    entry["diagnostics"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(|d| d["message"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostics_follow_the_disk() {
    let h = Harness::start();

    // Clean file: a fresh, empty publish.
    let entry = h.fresh_for_a().await;
    assert!(messages(&entry).is_empty(), "{entry}");

    // Broken on disk: the next query sees the error, without any didOpen by the agent.
    std::fs::write(h.root.join("a.py"), "x: int = \"text\"\n").expect("write");
    let entry = h.fresh_for_a().await;
    let found = messages(&entry);
    assert_eq!(found.len(), 1, "{entry}");
    assert!(
        found[0].contains("Literal['text']") && found[0].contains("int"),
        "{found:?}"
    );

    // Fixed again (an atomic save this time).
    std::fs::write(h.root.join(".a.py.tmp"), "x: int = 2\n").expect("write");
    std::fs::rename(h.root.join(".a.py.tmp"), h.root.join("a.py")).expect("rename");
    let entry = h.fresh_for_a().await;
    assert!(messages(&entry).is_empty(), "{entry}");

    // Without uris: everything known, each marked fresh or not.
    let all = h.diagnostics(json!({"sessionId": "s"})).await;
    let listed = all["result"]["diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(listed.iter().any(|e| e["uri"] == h.uri("a.py")), "{all}");

    // Confinement and sessions apply to the extension too.
    let outside = h
        .diagnostics(json!({"sessionId": "s", "uris": ["file:///etc/passwd"]}))
        .await;
    assert_eq!(
        outside["error"]["data"]["reason"], "uri_outside_roots",
        "{outside}"
    );
    let unknown = h.diagnostics(json!({"sessionId": "nope"})).await;
    assert_eq!(
        unknown["error"]["data"]["reason"], "unknown_session",
        "{unknown}"
    );

    h.registry.shutdown().await;
}

fn errors(entry: &Value) -> Vec<String> {
    entry["diagnostics"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter(|d| d["severity"] == 1)
                .filter_map(|d| d["message"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// rust-analyzer answers pull diagnostics and, offered them, pushes none of
/// its own: a syntax error appended to a crate's `src/lib.rs` must be found
/// by pulling, not missed after a push wait that never ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_analyzer_syntax_error_is_pulled() {
    let h = Harness::start_with(
        "rust-analyzer",
        "rust-analyzer",
        "rustup component add rust-analyzer",
        |root| {
            support::copy_tree(
                &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/rust-three-files"),
                root,
            );
        },
    );

    // Clean crate: one entry, pulled, fresh, without errors.
    let entries = h.entries_for("src/lib.rs").await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert_eq!(entry["mode"], "pull", "{entry}");
    assert_eq!(entry["fresh"], true, "{entry}");
    assert_eq!(entry["timedOut"], false, "{entry}");
    assert!(errors(entry).is_empty(), "{entry}");

    // A syntax error appended on disk.
    let lib = h.root.join("src/lib.rs");
    let mut text = std::fs::read_to_string(&lib).expect("read lib.rs");
    text.push_str("\npub fn broken( {\n");
    std::fs::write(&lib, text).expect("write lib.rs");
    let entries = h.entries_for("src/lib.rs").await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert_eq!(entry["uri"], h.uri("src/lib.rs"), "{entry}");
    assert_eq!(entry["mode"], "pull", "{entry}");
    assert_eq!(entry["fresh"], true, "{entry}");
    assert_eq!(entry["timedOut"], false, "{entry}");
    assert!(!errors(entry).is_empty(), "no error found: {entry}");

    h.registry.shutdown().await;
}

/// clangd pushes: an undeclared identifier in a C file is waited for and found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clangd_error_is_pushed() {
    let h = Harness::start_with("clangd", "clangd", "apt-get install -y clangd", |root| {
        std::fs::write(root.join("compile_flags.txt"), "-std=c11\n").expect("write");
        std::fs::write(root.join("a.c"), "int main(void) { return 0; }\n").expect("write");
    });
    std::fs::write(
        h.root.join("a.c"),
        "int main(void) { return undeclared_name; }\n",
    )
    .expect("write a.c");
    let entries = h.entries_for("a.c").await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert_eq!(entry["mode"], "push", "{entry}");
    assert_eq!(entry["fresh"], true, "{entry}");
    assert_eq!(entry["timedOut"], false, "{entry}");
    let found = errors(entry);
    assert!(
        found.iter().any(|m| m.contains("undeclared_name")),
        "{entry}"
    );
    h.registry.shutdown().await;
}

/// A push server that publishes nothing for a document still gives one
/// entry, empty, stale and marked `timedOut`, instead of no entry at all
/// (which reads as "no problems"); one that publishes gives a fresh entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_times_out_visibly() {
    use support::fake::{FakeServer, SESSION};
    for (mode, timed_out) in [("", true), ("diagnostics", false)] {
        let (fake, _) = FakeServer::start(
            mode,
            acp_lsp::lsp::registry::RegistryOptions::default(),
            |root| std::fs::write(root.join("a.fake"), "an error here\n").expect("write"),
            |_, _| {},
        )
        .await;
        // The fake publishes (or not) right after didOpen: a short wait is a
        // bound, not a synchronisation.
        let wait_ms = if timed_out { 200 } else { WAIT_MS };
        let response = fake
            .call(
                GateMethod::Diagnostics,
                json!({"sessionId": SESSION, "uris": [fake.uri("a.fake")], "waitMs": wait_ms}),
            )
            .await;
        let entries = entries_of(&response);
        assert_eq!(entries.len(), 1, "{mode}: {response}");
        let entry = &entries[0];
        assert_eq!(entry["uri"], fake.uri("a.fake"), "{entry}");
        assert_eq!(entry["mode"], "push", "{entry}");
        assert_eq!(entry["timedOut"], timed_out, "{entry}");
        assert_eq!(entry["fresh"], !timed_out, "{entry}");
        assert_eq!(errors(entry).len(), usize::from(!timed_out), "{entry}");
        fake.shut_down().await;
    }
}

/// typescript-language-server pushes: a type error written to disk in a
/// project file is waited for and found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_error_is_found() {
    let h = Harness::start_with(
        "typescript-language-server",
        "typescript-language-server",
        "npm i -g typescript-language-server typescript@6",
        |root| {
            support::copy_tree(
                &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/ts-project"),
                root,
            );
        },
    );
    let main = h.root.join("src/main.ts");
    let mut text = std::fs::read_to_string(&main).expect("read main.ts");
    text.push_str("\nexport const broken: number = \"not a number\";\n");
    std::fs::write(&main, text).expect("write main.ts");
    let entries = h.entries_for("src/main.ts").await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert_eq!(entry["mode"], "push", "{entry}");
    assert_eq!(entry["fresh"], true, "{entry}");
    assert_eq!(entry["timedOut"], false, "{entry}");
    assert!(
        errors(entry).iter().any(|m| m.contains("not assignable")),
        "{entry}"
    );
    h.registry.shutdown().await;
}

/// A server that publishes one version in stages (an empty set, then the
/// errors: typescript-language-server's syntactic, then semantic
/// diagnostics) is answered with the last stage, not the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_publish_is_answered_with_its_last_stage() {
    use support::fake::{FakeServer, SESSION};
    let (fake, _) = FakeServer::start(
        "diagnostics,staged_diagnostics_ms=100",
        acp_lsp::lsp::registry::RegistryOptions::default(),
        |root| std::fs::write(root.join("a.fake"), "an error here\n").expect("write"),
        |_, _| {},
    )
    .await;
    let response = fake
        .call(
            GateMethod::Diagnostics,
            json!({"sessionId": SESSION, "uris": [fake.uri("a.fake")], "waitMs": WAIT_MS}),
        )
        .await;
    let entries = entries_of(&response);
    assert_eq!(entries.len(), 1, "{response}");
    let entry = &entries[0];
    assert_eq!(entry["fresh"], true, "{entry}");
    assert_eq!(
        errors(entry).len(),
        1,
        "the first stage's empty set: {entry}"
    );
    fake.shut_down().await;
}
