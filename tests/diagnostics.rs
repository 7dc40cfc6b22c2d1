//! `_acp-lsp/diagnostics` against real pyright: diagnostics that reflect the
//! text on disk right now, after each change, without the agent opening anything.

mod support;

use acp_lsp::gate::{Gate, GateConfig, GateMethod};
use acp_lsp::jsonrpc::RequestId;
use acp_lsp::lsp::config::Config;
use acp_lsp::lsp::detect::find_on_path;
use acp_lsp::lsp::registry::{Registry, RegistryOptions};
use serde_json::{json, Value};
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
        assert!(
            find_on_path("pyright-langserver").is_some(),
            "pyright-langserver is not installed: npm i -g pyright"
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical root");
        std::fs::write(root.join("pyproject.toml"), "[project]\nname = \"d\"\n").expect("write");
        std::fs::write(root.join("a.py"), "x: int = 1\n").expect("write");
        let mut config = Config::builtin();
        config.servers.retain(|s| s.name == "pyright");
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
        let id = RequestId::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed));
        let raw = serde_json::value::to_raw_value(&params).expect("params");
        let bytes = tokio::time::timeout(
            CALL_TIMEOUT,
            self.gate.call(id, GateMethod::Diagnostics, Some(raw)),
        )
        .await
        .expect("the gate answered in time");
        serde_json::from_slice(&bytes).expect("a JSON response")
    }

    /// The one pyright entry for `a.py`, waited for until fresh.
    async fn fresh_for_a(&self) -> Value {
        let response = self
            .diagnostics(json!({"sessionId": "s", "uris": [self.uri("a.py")], "waitMs": WAIT_MS}))
            .await;
        let entries = response["result"]["diagnostics"]
            .as_array()
            .unwrap_or_else(|| panic!("no diagnostics array: {response}"))
            .clone();
        assert_eq!(entries.len(), 1, "{response}");
        let entry = entries[0].clone();
        assert_eq!(entry["uri"], self.uri("a.py"), "{entry}");
        assert_eq!(entry["fresh"], true, "{entry}");
        assert_eq!(
            entry["serverId"].as_str().map(str::len),
            Some(36),
            "{entry}"
        );
        entry
    }
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
