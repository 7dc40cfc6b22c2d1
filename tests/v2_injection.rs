//! The MCP entry acp-lsp adds to `session/new`, end to end through the
//! `acp-lsp proxy` binary, in each protocol version's spelling (issue 27, 4):
//! a v2 agent gets a tagged stdio entry (`"type": "stdio"`, which v2's
//! `McpServer` requires) and, when its `initialize` answer advertises http in
//! v2's spelling (`capabilities.session.mcp.http`), the http entry; a v1
//! agent keeps the untagged stdio entry.
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]

mod support;

use serde_json::{json, Value};
use support::proxy::ProxyBuilder;

/// An agent that answers `initialize` with `INIT` and `session/new` with the
/// `mcpServers` it received (beside `sessionId`, which the proxy forwards
/// to the editor byte for byte).
fn echoing_agent(init: &Value) -> String {
    format!(
        r#"
import json, sys
INIT = json.loads({init:?})
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if "id" not in msg or "method" not in msg:
        continue
    if msg["method"] == "initialize":
        result = INIT
    elif msg["method"] == "session/new":
        result = {{"sessionId": "s", "seen": msg["params"].get("mcpServers")}}
    else:
        result = None
    sys.stdout.write(json.dumps({{"jsonrpc": "2.0", "id": msg["id"], "result": result}}) + "\n")
    sys.stdout.flush()
"#,
        init = init.to_string()
    )
}

/// The `mcpServers` the agent got in `session/new`, through a proxy in
/// front of an agent answering `initialize` with `agent_init`, the editor
/// speaking `protocol_version`.
async fn injected(protocol_version: u64, agent_init: Value) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let mut proxy = ProxyBuilder::new(&root, &echoing_agent(&agent_init))
        .arg("--mcp")
        .arg("auto")
        .spawn();
    let init = if protocol_version >= 2 {
        json!({"protocolVersion": 2, "capabilities": {}, "info": {"name": "ed", "version": "2"}})
    } else {
        json!({"protocolVersion": 1, "clientCapabilities": {}})
    };
    let answer = proxy.editor.call("initialize", init).await;
    assert!(answer.get("result").is_some(), "{answer}");
    let session = proxy
        .editor
        .call(
            "session/new",
            json!({"cwd": root.display().to_string(), "mcpServers": []}),
        )
        .await;
    let seen = session["result"]["seen"]
        .as_array()
        .unwrap_or_else(|| panic!("no mcpServers reached the agent: {session}"))
        .clone();
    assert_eq!(seen.len(), 1, "one entry, acp-lsp's: {seen:#?}");
    assert_eq!(seen[0]["name"], "acp-lsp", "{seen:#?}");
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v2_agent_gets_a_tagged_stdio_entry() {
    let seen = injected(
        2,
        json!({"protocolVersion": 2, "capabilities": {"session": {"mcp": {"stdio": {}}}},
               "info": {"name": "agent", "version": "2"}}),
    )
    .await;
    assert_eq!(seen[0]["type"], "stdio", "{seen:#?}");
    assert_eq!(seen[0]["args"][0], "mcp", "{seen:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v2_agent_that_advertises_http_in_v2_spelling_gets_the_http_entry() {
    let seen = injected(
        2,
        json!({"protocolVersion": 2,
               "capabilities": {"session": {"mcp": {"http": {}, "stdio": {}}}},
               "info": {"name": "agent", "version": "2"}}),
    )
    .await;
    assert_eq!(seen[0]["type"], "http", "{seen:#?}");
    let url = seen[0]["url"].as_str().unwrap_or_default();
    assert!(url.starts_with("http://127.0.0.1:"), "{seen:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1_agent_keeps_the_untagged_stdio_entry() {
    let seen = injected(1, json!({"protocolVersion": 1, "agentCapabilities": {}})).await;
    assert!(seen[0].get("type").is_none(), "{seen:#?}");
    assert_eq!(seen[0]["args"][0], "mcp", "{seen:#?}");
}
