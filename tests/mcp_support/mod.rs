//! The harness of the MCP tests (`tests/mcp.rs`, `tests/mcp_tools.rs`): a
//! relay with MCP injection in-process over `tokio::io::duplex` pipes, the
//! test playing the editor and the agent, and the real `acp-lsp mcp
//! --connect …` bridge spoken to by rmcp's child-process client.

#![allow(dead_code)]

use crate::support;
use acp_lsp::acp::relay::{self, RelayEnd, RelayOptions};
use acp_lsp::lsp::config::Config;
use acp_lsp::lsp::registry::{Registry, RegistryOptions};
use acp_lsp::mcp::editor::EditorFs;
use acp_lsp::mcp::http::McpHttp;
use acp_lsp::mcp::inject::{HttpEntry, StdioEntry};
use acp_lsp::mcp::socket::McpSocket;
use acp_lsp::mcp::tokens::TokenTable;
use acp_lsp::mcp::McpRelay;
use acp_lsp::proxy_host::ProxyHost;
use acp_lsp_core::gate::Gate;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{duplex, AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::task::JoinHandle;
use tokio::time::timeout;

/// Longest wait for one ACP line before the test fails instead of hanging.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for one tool call: above the tools' own `READY_WAIT`, so a
/// server that never gets ready is reported by the tool, not by this bound.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(120);
pub const PIPE_BUFFER: usize = 1024 * 1024;
/// How long tools wait for a server that stays indexing, in the test of that.
pub const INDEXING_WAIT: Duration = Duration::from_millis(500);

pub type Client = RunningService<RoleClient, ()>;

pub struct Proxy {
    pub editor_w: Option<DuplexStream>,
    pub editor_r: Option<BufReader<DuplexStream>>,
    pub agent_r: BufReader<DuplexStream>,
    pub agent_w: DuplexStream,
    pub relay: JoinHandle<RelayEnd>,
    pub tokens: Arc<TokenTable>,
    pub registry: Arc<Registry>,
    pub root: PathBuf,
    pub _socket: McpSocket,
    pub _http: McpHttp,
    pub _tmp: tempfile::TempDir,
}

pub async fn read_json(reader: &mut BufReader<DuplexStream>, who: &str) -> Value {
    let mut line = String::new();
    match timeout(IO_TIMEOUT, reader.read_line(&mut line)).await {
        Ok(Ok(n)) if n > 0 => {}
        other => panic!("{who}: no line within {IO_TIMEOUT:?}: {other:?}"),
    }
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{who}: not JSON ({e}): {line}"))
}

pub async fn send(writer: &mut DuplexStream, message: &Value) {
    let line = format!("{message}\n");
    timeout(IO_TIMEOUT, writer.write_all(line.as_bytes()))
        .await
        .expect("write stalled")
        .expect("write failed");
}

impl Proxy {
    /// A relay with MCP injection over a copy of the rust-three-files project.
    pub async fn start() -> Proxy {
        Proxy::start_with(
            Config::builtin(),
            |root| {
                support::copy_tree(
                    &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/rust-three-files"),
                    root,
                )
            },
            acp_lsp::mcp::tools::READY_WAIT,
        )
        .await
    }

    /// A relay with MCP injection over a project `fill` writes, tools waiting
    /// `ready_wait` for their server.
    pub async fn start_with(
        config: Config,
        fill: impl FnOnce(&Path),
        ready_wait: Duration,
    ) -> Proxy {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("project");
        std::fs::create_dir_all(&root).expect("create project dir");
        fill(&root);
        let root = root.canonicalize().expect("canonical root");
        let gate_config = config.gate_config();
        let registry = Registry::new(config, RegistryOptions::default());
        let gate = Gate::new(
            Arc::new(ProxyHost::Local(Arc::clone(&registry))),
            gate_config,
        );
        let tokens = Arc::new(TokenTable::new());
        let editor = Arc::new(EditorFs::new("test"));
        let socket = McpSocket::bind(
            Arc::clone(&gate),
            Arc::clone(&tokens),
            Some(Arc::clone(&editor)),
            &acp_lsp::mcp::random_hex().expect("random"),
            ready_wait,
        )
        .expect("bind the MCP socket");
        let http = McpHttp::bind(
            Arc::clone(&gate),
            Arc::clone(&tokens),
            Some(Arc::clone(&editor)),
            ready_wait,
        )
        .await
        .expect("bind the MCP http server");
        let mcp = McpRelay {
            tokens: Arc::clone(&tokens),
            entry: StdioEntry {
                command: PathBuf::from(env!("CARGO_BIN_EXE_acp-lsp")),
                socket: socket.path().to_path_buf(),
            },
            http: Some(HttpEntry { url: http.url() }),
            editor,
        };
        let (editor_in, editor_w) = duplex(PIPE_BUFFER);
        let (editor_out, editor_r) = duplex(PIPE_BUFFER);
        let (agent_in, agent_r) = duplex(PIPE_BUFFER);
        let (agent_out, agent_w) = duplex(PIPE_BUFFER);
        let relay = tokio::spawn(relay::run(
            gate,
            editor_in,
            editor_out,
            agent_in,
            agent_out,
            RelayOptions {
                mcp: Some(mcp),
                ..Default::default()
            },
            || {},
        ));
        Proxy {
            editor_w: Some(editor_w),
            editor_r: Some(BufReader::new(editor_r)),
            agent_r: BufReader::new(agent_r),
            agent_w,
            relay,
            tokens,
            registry,
            root,
            _socket: socket,
            _http: http,
            _tmp: tmp,
        }
    }

    pub fn editor_w(&mut self) -> &mut DuplexStream {
        self.editor_w.as_mut().expect("editor writer")
    }

    pub fn editor_r(&mut self) -> &mut BufReader<DuplexStream> {
        self.editor_r.as_mut().expect("editor reader")
    }

    /// `initialize` both ways; `fs` says whether the editor advertises
    /// reading and writing files.
    pub async fn initialize(&mut self, fs: bool) {
        self.initialize_with(fs, json!({})).await;
    }

    /// `initialize` both ways, the agent answering `agent_capabilities`.
    pub async fn initialize_with(&mut self, fs: bool, agent_capabilities: Value) {
        let request = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": fs, "writeTextFile": fs}},
        }});
        send(self.editor_w(), &request).await;
        let seen = read_json(&mut self.agent_r, "agent").await;
        assert_eq!(seen["method"], "initialize");
        let response = json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": agent_capabilities}});
        send(&mut self.agent_w, &response).await;
        assert_eq!(read_json(self.editor_r(), "editor").await, response);
    }

    /// `session/new` through the relay; returns the entry the agent got.
    pub async fn new_session(&mut self, session_id: &str) -> Value {
        let request = json!({"jsonrpc": "2.0", "id": "n1", "method": "session/new", "params": {
            "cwd": self.root, "mcpServers": [{"name": "other", "command": "/bin/true", "args": [], "env": []}],
        }});
        send(self.editor_w(), &request).await;
        let seen = read_json(&mut self.agent_r, "agent").await;
        // Nothing else changed.
        let mut without_ours = seen.clone();
        let servers = without_ours["params"]["mcpServers"]
            .as_array_mut()
            .expect("mcpServers");
        assert_eq!(servers.len(), 2, "{seen}");
        let ours = servers.pop().expect("our entry");
        assert_eq!(without_ours, request);
        let response = json!({"jsonrpc": "2.0", "id": "n1", "result": {"sessionId": session_id}});
        send(&mut self.agent_w, &response).await;
        assert_eq!(read_json(self.editor_r(), "editor").await, response);
        ours
    }
}

/// The entry's command, started as an agent does (rmcp's child-process transport).
pub fn bridge_transport(entry: &Value) -> TokioChildProcess {
    let command = entry["command"].as_str().expect("command").to_string();
    let args: Vec<String> = entry["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("arg").to_string())
        .collect();
    let env: Vec<(String, String)> = entry["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|v| {
            (
                v["name"].as_str().expect("name").to_string(),
                v["value"].as_str().expect("value").to_string(),
            )
        })
        .collect();
    TokioChildProcess::new(tokio::process::Command::new(command).configure(|cmd| {
        cmd.args(&args);
        for (name, value) in &env {
            cmd.env(name, value);
        }
    }))
    .expect("start the MCP bridge")
}

/// Connects to the entry's server as an agent does.
pub async fn connect(entry: &Value) -> Client {
    timeout(IO_TIMEOUT, ().serve(bridge_transport(entry)))
        .await
        .expect("MCP initialize timed out")
        .expect("MCP initialize failed")
}

/// Whether the entry's server refuses the connection (its MCP initialize fails, promptly).
pub async fn refused(entry: &Value) -> bool {
    timeout(IO_TIMEOUT, ().serve(bridge_transport(entry)))
        .await
        .expect("the refusal is prompt")
        .is_err()
}

pub async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    let arguments = arguments.as_object().expect("arguments object").clone();
    timeout(
        TOOL_TIMEOUT,
        client.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments)),
    )
    .await
    .unwrap_or_else(|_| panic!("{tool} did not answer within {TOOL_TIMEOUT:?}"))
    .unwrap_or_else(|e| panic!("{tool} failed at the protocol level: {e}"))
}

pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The tool succeeded; returns its text and structured content.
pub fn success(tool: &str, result: &CallToolResult) -> (String, Value) {
    assert_ne!(
        result.is_error,
        Some(true),
        "{tool} failed: {}",
        text(result)
    );
    (
        text(result),
        result.structured_content.clone().unwrap_or(Value::Null),
    )
}

impl Proxy {
    /// The agent's `fs/write_text_file` of `file` (relative to the root)
    /// through the relay; the editor writes it to disk and confirms, as
    /// editors do.
    pub async fn agent_writes(&mut self, session: &str, file: &str, content: &str) {
        let path = self.root.join(file);
        let id = format!("write-{file}-{}", content.len());
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "fs/write_text_file",
            "params": {"sessionId": session, "path": path, "content": content}});
        send(&mut self.agent_w, &request).await;
        let seen = read_json(self.editor_r(), "editor").await;
        assert_eq!(seen["method"], "fs/write_text_file", "{seen}");
        std::fs::write(&path, content).expect("the editor writes the file");
        let confirmed = json!({"jsonrpc": "2.0", "id": seen["id"], "result": null});
        send(self.editor_w(), &confirmed).await;
        let answer = read_json(&mut self.agent_r, "agent").await;
        assert_eq!(answer["id"], json!(id), "{answer}");
    }
}
