//! Several servers per language: pyright (the primary) and ruff (a
//! companion, `[servers.ruff] enabled = true`) on one Python project, both
//! real. `lsp/servers` lists each, ruff marked as a companion; navigation
//! goes to the primary; `_acp-lsp/diagnostics` returns both servers'
//! findings for one file, each under its own `serverId` (that the MCP
//! `diagnostics` tool tags each finding with its server from there is
//! `tests/mcp_tools.rs`'s).
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]

mod support;

use std::path::Path;

use acp_lsp::lsp::config::Config;
use acp_lsp::session_facade::SessionFacade;
use serde_json::Value;

fn project(root: &Path) {
    std::fs::write(root.join("pyproject.toml"), "[project]\nname = \"p\"\n").expect("write");
    // F401 (ruff): an unused import; a type error (pyright): str for int.
    std::fs::write(
        root.join("m.py"),
        "import os\n\n\ndef area(width: int) -> int:\n    return width\n\n\narea(\"wide\")\n",
    )
    .expect("write");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyright_and_ruff_answer_side_by_side() {
    support::require(
        "pyright-langserver",
        "npm i -g pyright (or acp-lsp install pyright)",
    );
    support::require("ruff", "acp-lsp install ruff");
    let dir = tempfile::tempdir().expect("temp dir");
    project(dir.path());
    let config = Config::from_toml_str(
        "[servers.ruff]\nenabled = true\n",
        Path::new("/test/config.toml"),
        Config::builtin(),
    )
    .expect("config");
    let tool = SessionFacade::start(dir.path(), config);
    let servers = tool.servers().await.expect("lsp/servers");
    let named = |name: &str| {
        servers
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no {name}: {servers:?}"))
            .clone()
    };
    let (pyright, ruff) = (named("pyright"), named("ruff"));
    assert!(!pyright.ours().companion && ruff.ours().companion);
    assert_eq!(
        serde_json::to_value(&ruff).expect("JSON")["_meta"]["acp-lsp"]["companion"],
        true
    );
    // Navigation: the primary.
    let file = tool.root().join("m.py");
    let picked = tool.pick_server(None, Some(&file)).await.expect("pick");
    assert_eq!(picked.name, "pyright");

    let uri = url::Url::from_file_path(&file).expect("uri").to_string();
    let entries: Vec<Value> = tool
        .diagnostics(vec![uri], std::time::Duration::from_secs(60))
        .await
        .expect("diagnostics")
        .iter()
        .map(|e| serde_json::from_str(&e.to_json()).expect("JSON"))
        .collect();
    let result = Value::Array(entries.clone());
    let of = |id: &str| -> Vec<Value> {
        entries
            .iter()
            .filter(|e| e["serverId"] == id)
            .flat_map(|e| e["diagnostics"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    let from_ruff = of(ruff.server_id.as_ref());
    let from_pyright = of(pyright.server_id.as_ref());
    assert!(
        from_ruff.iter().any(|d| d["code"] == "F401"),
        "ruff's unused import: {result:#}"
    );
    assert!(
        from_pyright.iter().any(|d| d["message"]
            .as_str()
            .is_some_and(|m| m.contains("\"Literal['wide']\"") || m.contains("str"))),
        "pyright's type error: {result:#}"
    );
    assert!(
        !from_pyright.iter().any(|d| d["code"] == "F401"),
        "each finding under its own server: {result:#}"
    );
    tool.finish().await;
}
