//! acp-lsp as one proxy of a proxy chain (issue 27), under the real
//! `agent-client-protocol-conductor` from crates.io:
//!
//! editor (this test, official ACP Rust SDK) ⇄ conductor ⇄
//! [`acp-lsp proxy --chain`, `tests/peers/chain-proxy.rs`] ⇄ agent
//!
//! - in front of elizacp (crates.io): the injected MCP tools (stdio) answer
//!   from a real pyright, and a rename is written through the editor with
//!   acp-lsp's own `fs/*` requests crossing the conductor;
//! - in front of `tests/peers/acp-mcp-agent.rs`, an agent that takes MCP
//!   over ACP: acp-lsp offers its tools as `"type": "acp"` and answers
//!   `mcp/connect`, `mcp/message`, `mcp/disconnect` that cross the chain
//!   back to it, in both wire forms.
//!
//! (`tests/real_agents.rs` runs an npm agent in the same chain,
//! `tests/example_rename.rs` the RFD-literal example agent.)
//! Needs the conductor, elizacp and pyright on PATH; fails without them.
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]

mod support;

use agent_client_protocol::{AcpAgent, AcpAgentConfig};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::acp_editor::{lock, Seen};

/// Bound on one whole conversation (conductor, two proxies, agent, pyright).
const SESSION_TIMEOUT: Duration = Duration::from_secs(240);
const CONDUCTOR: &str = "agent-client-protocol-conductor";
const CONDUCTOR_INSTALL: &str =
    "cargo install --locked agent-client-protocol-conductor (or run .ci/run)";

/// `'arg'` for the conductor's component strings (split like a POSIX shell).
fn quoted(arg: &Path) -> String {
    format!("'{}'", arg.display().to_string().replace('\'', "'\\''"))
}

/// A copy of the Python project, canonical.
fn python_project(tmp: &tempfile::TempDir) -> PathBuf {
    let root = tmp.path().join("project");
    std::fs::create_dir_all(&root).expect("project dir");
    support::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/python-project"),
        &root,
    );
    root.canonicalize().expect("canonical project")
}

struct Chain {
    /// The record acp-lsp writes (its relay's view: `proxy→agent` is toward
    /// its successor).
    record: PathBuf,
    /// Where the other proxy says it ran.
    mark: PathBuf,
    conductor: AcpAgent,
}

/// The conductor running `acp-lsp proxy --chain`, the test's own proxy, and `agent`.
fn chain(tmp: &tempfile::TempDir, agent: &str) -> Chain {
    support::require(CONDUCTOR, CONDUCTOR_INSTALL);
    support::require("pyright-langserver", "npm i -g pyright");
    let built = support::cargo_build::build(&[], &["chain-proxy", "acp-mcp-agent"], false)
        .expect("building the test peers");
    let record = tmp.path().join("record.jsonl");
    let mark = tmp.path().join("chain-proxy.mark");
    let acp_lsp = format!(
        "{} proxy --chain --record {}",
        quoted(Path::new(env!("CARGO_BIN_EXE_acp-lsp"))),
        quoted(&record)
    );
    let agent = agent.replace("{acp-mcp-agent}", &quoted(&built["acp-mcp-agent"]));
    let conductor = AcpAgent::new(
        AcpAgentConfig::new(CONDUCTOR)
            .args([
                "agent".to_string(),
                acp_lsp,
                quoted(&built["chain-proxy"]),
                agent,
            ])
            .env("CHAIN_PROXY_MARK", mark.display().to_string()),
    );
    Chain {
        record,
        mark,
        conductor,
    }
}

/// One session on `root` through `conductor`: initialize, session/new,
/// `prompts`; the agent's reply to each.
async fn converse(
    conductor: AcpAgent,
    root: &Path,
    prompts: &[String],
    seen: Arc<Mutex<Seen>>,
) -> Vec<String> {
    support::acp_editor::converse(conductor, "acp-lsp-chain-test", root, prompts, seen).await
}

/// The records acp-lsp wrote, as (dir, msg).
fn record(path: &Path) -> Vec<(String, Value)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|r| Some((r["dir"].as_str()?.to_string(), r.get("msg")?.clone())))
        .collect()
}

/// acp-lsp's MCP entry in the `session/new` it sent its successor.
fn injected(record: &[(String, Value)]) -> Value {
    record
        .iter()
        .find(|(dir, m)| dir == "proxy→agent" && m["method"] == "session/new")
        .and_then(|(_, m)| {
            m["params"]["mcpServers"]
                .as_array()
                .and_then(|s| s.iter().find(|e| e["name"] == "acp-lsp").cloned())
        })
        .unwrap_or_else(|| panic!("no session/new with acp-lsp's entry: {record:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_conductor_chain_in_front_of_elizacp_the_tools_answer_and_rename_through_the_editor() {
    support::require("elizacp", "cargo install --locked elizacp (or run .ci/run)");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = python_project(&tmp);
    let Chain {
        record: record_path,
        mark,
        conductor,
    } = chain(&tmp, "elizacp --deterministic acp");
    let prompts = [
        "List tools from acp-lsp".to_string(),
        r#"Use tool acp-lsp::references with {"file": "shapes/geometry.py", "line": 1, "column": 5}"#
            .to_string(),
        r#"Use tool acp-lsp::rename with {"file": "shapes/geometry.py", "line": 1, "column": 5, "new_name": "surface"}"#
            .to_string(),
    ];
    let seen = Arc::new(Mutex::new(Seen::default()));
    let replies = tokio::time::timeout(
        SESSION_TIMEOUT,
        converse(conductor, &root, &prompts, seen.clone()),
    )
    .await
    .unwrap_or_else(|_| panic!("no end of the conversation within {SESSION_TIMEOUT:?}"));
    let record = record(&record_path);
    let context = format!("replies: {replies:#?}");

    // Both proxies were in the chain, acp-lsp first.
    assert!(mark.exists(), "the other proxy never ran\n{context}");
    let initialize = record
        .iter()
        .find(|(dir, m)| dir == "proxy→agent" && m["method"] == "initialize")
        .map(|(_, m)| m.clone())
        .unwrap_or_else(|| panic!("acp-lsp forwarded no initialize\n{context}"));
    assert_eq!(
        initialize["params"]["clientCapabilities"]["lsp"],
        json!({}),
        "{initialize}"
    );
    // elizacp takes no HTTP MCP: the stdio entry, as in front of it directly.
    let entry = injected(&record);
    assert_eq!(entry["args"][0], "mcp", "{entry}");

    for tool in ["references", "rename", "definition", "hover", "diagnostics"] {
        assert!(
            replies[0].contains(&format!("- {tool}:")),
            "{tool} not listed\n{context}"
        );
    }
    assert!(replies[1].starts_with("OK: "), "{context}");
    for needle in ["shapes/report.py:5:12", "shapes/report.py:9:12"] {
        assert!(replies[1].contains(needle), "{needle} missing\n{context}");
    }
    // The rename went through the editor: acp-lsp's own fs/* requests
    // crossed the conductor and came back answered.
    assert!(replies[2].starts_with("OK: "), "{context}");
    let report = std::fs::read_to_string(root.join("shapes/report.py")).expect("report.py");
    assert!(
        report.contains("from shapes.geometry import surface"),
        "{report}"
    );
    let mut writes: Vec<String> = lock(&seen)
        .writes
        .iter()
        .map(|p| p.strip_prefix(&root).expect("inside").display().to_string())
        .collect();
    writes.sort();
    assert_eq!(writes, ["shapes/geometry.py", "shapes/report.py"]);
    assert!(
        record
            .iter()
            .any(|(dir, m)| dir == "proxy→editor" && m["method"] == "fs/write_text_file"),
        "no write of acp-lsp's went toward the editor"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_takes_mcp_over_acp_gets_the_tools_over_the_chain() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = python_project(&tmp);
    let Chain {
        record: record_path,
        mark,
        conductor,
    } = chain(&tmp, "{acp-mcp-agent}");
    let call = json!({"name": "references",
                      "arguments": {"file": "shapes/geometry.py", "line": 1, "column": 5}});
    let seen = Arc::new(Mutex::new(Seen::default()));
    let replies = tokio::time::timeout(
        SESSION_TIMEOUT,
        converse(conductor, &root, &[call.to_string()], seen),
    )
    .await
    .unwrap_or_else(|_| panic!("no end of the conversation within {SESSION_TIMEOUT:?}"));
    assert!(mark.exists(), "the other proxy never ran");
    let report: Value = serde_json::from_str(&replies[0])
        .unwrap_or_else(|e| panic!("not the agent's report ({e}): {replies:?}"));
    let record = record(&record_path);

    // The entry: MCP over ACP, parsed by the SDK as such.
    let entry = injected(&record);
    assert_eq!(entry["type"], "acp", "{entry}");
    let server_id = entry["serverId"].as_str().expect("serverId");
    assert_eq!(
        report["declared"],
        json!([{"name": "acp-lsp", "type": "acp", "serverId": server_id}]),
        "{report:#}"
    );
    // The connection form: connect, initialize, tools, a call with pyright's
    // answer, disconnect; a message after it is refused.
    let connection = &report["connection"];
    assert!(
        connection["connect"]["connectionId"].is_string(),
        "{report:#}"
    );
    assert!(
        connection["initialize"]["serverInfo"]["name"].is_string(),
        "{report:#}"
    );
    let tools = connection["tools"].as_array().expect("tools");
    for tool in ["references", "rename", "hover"] {
        assert!(tools.contains(&json!(tool)), "{tool}: {report:#}");
    }
    let text = connection["call"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    for needle in ["shapes/report.py:5:12", "shapes/report.py:9:12"] {
        assert!(text.contains(needle), "{needle} missing: {report:#}");
    }
    assert_eq!(connection["disconnect"], json!({}), "{report:#}");
    assert!(
        connection["afterDisconnect"]["code"].is_number(),
        "{report:#}"
    );
    // The connectionless form of the SDK: `{result}` around the tools.
    let connectionless = &report["connectionless"];
    assert_eq!(
        connectionless["carrierKeys"],
        json!(["result"]),
        "{report:#}"
    );
    assert!(
        connectionless["tools"]
            .as_array()
            .is_some_and(|t| t.contains(&json!("references"))),
        "{report:#}"
    );
    // None of it reached the editor: acp-lsp answered its own server's
    // traffic. Only the message on the closed connection, no longer ours,
    // went on (the editor does not know it either).
    let to_editor: Vec<&Value> = record
        .iter()
        .filter(|(dir, m)| {
            dir == "proxy→editor" && m["method"].as_str().is_some_and(|m| m.starts_with("mcp/"))
        })
        .map(|(_, m)| m)
        .collect();
    assert_eq!(to_editor.len(), 1, "{to_editor:#?}");
    assert_eq!(
        to_editor[0]["params"]["connectionId"], connection["connect"]["connectionId"],
        "{to_editor:#?}"
    );
}
