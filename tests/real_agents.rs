//! The ACP agents people use, from npm at pinned versions (tests/agents,
//! installed by `.ci/run` with `npm ci`), behind the real `acp-lsp proxy`:
//! Gemini CLI, Claude Code and Codex (through Zed's ACP adapters).
//!
//! The test plays the editor; each agent talks to a fake of its model API
//! written here (a small HTTP server on 127.0.0.1: Gemini's
//! `generateContent`/`streamGenerateContent`, Anthropic's `messages` with SSE,
//! OpenAI's `responses` with SSE), pointed at by `GOOGLE_GEMINI_BASE_URL`,
//! `ANTHROPIC_BASE_URL` and a Codex model provider, with no real key. The
//! scripted model calls acp-lsp's `references` tool with a symbol's name
//! only when the prompt carries [`MARKER`], then again with an ambiguous
//! name, and ends the turn once both results are in the conversation. Each
//! test checks, from what the agent sent the model: acp-lsp's tools were
//! offered; the requests after the scripted calls carry the references that
//! pyright (a real language server, through the gate) computed, and the
//! candidates of the ambiguous name. It then closes the editor's side and checks that the
//! proxy ends and leaves no process of the agent's group.
//!
//! Each agent runs with the default `--mcp auto` (all three take the HTTP entry)
//! and with `--mcp stdio`. Needs node, pyright-langserver and
//! `npm ci --prefix tests/agents`; without them the tests fail (never skip).

mod support;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::procfs::{group_members, process_group, wait_until_gone};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::timeout;

/// In the prompt: the fake model calls the tool only in that conversation
/// (agents also ask the model for titles, routing and the like).
const MARKER: &str = "ACP-LSP-E2E";
/// What the scripted model answers once the tool's result is back.
const FINAL_TEXT: &str = "Found the references.";
/// `rect_area` by name only (defined at shapes/geometry.py:1:5, used in shapes/report.py).
const TOOL_ARGS: &str = r#"{"symbol": "rect_area"}"#;
/// A name two files define (shapes/report.py and shapes/solid.py, written by the test).
const AMBIGUOUS_ARGS: &str = r#"{"symbol": "square"}"#;
/// What the answer to the ambiguous name must hold: both candidates.
const EXPECTED_CANDIDATES: [&str; 3] = [
    "`square` is ambiguous",
    "shapes/report.py:4:5",
    "shapes/solid.py:1:5",
];
/// Lines only pyright's answer can produce, as the tool writes them for
/// models: the definition in another file, and another use.
const EXPECTED_REFERENCES: [&str; 2] = [
    "shapes/geometry.py:1:5: def rect_area(width: int, height: int) -> int:",
    "shapes/report.py:5:12: return rect_area(side, side)",
];
/// acp-lsp's tools, as the agent must offer them to the model.
const TOOLS: [&str; 13] = [
    "lsp_servers",
    "lsp_request",
    "definition",
    "references",
    "hover",
    "implementation",
    "type_definition",
    "call_hierarchy",
    "document_symbols",
    "workspace_symbols",
    "diagnostics",
    "rename",
    "code_actions",
];

/// The scripted model's next step, from the tool results already in the
/// conversation: the first call, the second (ambiguous) one, or the end.
fn next_call(results: usize) -> Option<(&'static str, &'static str)> {
    match results {
        0 => Some(("1", TOOL_ARGS)),
        1 => Some(("2", AMBIGUOUS_ARGS)),
        _ => None,
    }
}

/// Longest wait for one ACP answer outside a prompt turn (an agent's start
/// includes node loading a large bundle).
const IO_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait for the prompt turn (agent, model, tool, pyright).
const PROMPT_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest wait for the proxy to exit after the editor closes its input:
/// above the proxy's own escalation (agent_process), so a hang fails here.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long SIGKILLed processes may take to leave /proc.
const GONE_TIMEOUT: Duration = Duration::from_secs(5);

/// One agent at a time: each runs node, pyright and the proxy on a small machine.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Agent {
    Gemini,
    Claude,
    Codex,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mcp {
    Auto,
    Stdio,
}

impl Mcp {
    fn flag(self) -> &'static str {
        match self {
            Mcp::Auto => "auto",
            Mcp::Stdio => "stdio",
        }
    }
}

fn agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/node_modules")
}

// ---------------------------------------------------------------- fake model

/// One request an agent sent the model.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    body: Value,
}

/// The fake model API on 127.0.0.1: records every request and answers it.
struct FakeModel {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeModel {
    async fn start() -> FakeModel {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind the fake model");
        let addr = listener.local_addr().expect("address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let seen = Arc::clone(&recorded);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let seen = Arc::clone(&seen);
                        async move { Ok::<_, Infallible>(answer(request, &seen).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        FakeModel { addr, seen, task }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen lock").clone()
    }
}

async fn answer(request: Request<Incoming>, seen: &Mutex<Vec<Seen>>) -> Response<Full<Bytes>> {
    let path = request
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    seen.lock().expect("seen lock").push(Seen {
        path: path.clone(),
        body: body.clone(),
    });
    if path.contains(":generateContent") || path.contains(":streamGenerateContent") {
        gemini_answer(&path, &body)
    } else if path.starts_with("/v1/messages/count_tokens") {
        respond("application/json", json!({"input_tokens": 10}).to_string())
    } else if path.starts_with("/v1/messages") {
        anthropic_answer(&body)
    } else if path.starts_with("/v1/responses") {
        openai_answer(&body)
    } else {
        let mut response = Response::new(Full::new(Bytes::new()));
        *response.status_mut() = hyper::StatusCode::NOT_FOUND;
        response
    }
}

fn respond(content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        content_type.parse().expect("content type"),
    );
    response
}

/// The declared tool whose name ends with `tool` (agents prefix MCP tools
/// with the server's name: `mcp_acp-lsp_references`, `mcp__acp-lsp__references`,
/// Codex's namespace `mcp__acp_lsp`).
fn declared_tool<'a>(names: &'a [String], tool: &str) -> Option<&'a String> {
    names.iter().find(|n| {
        (n.contains("acp-lsp") || n.contains("acp_lsp")) && n.ends_with(&format!("_{tool}"))
    })
}

/// Codex's tools: MCP tools come in a `namespace` tool per server; named
/// here `NAMESPACE__TOOL`.
fn openai_tool_names(body: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for tool in body["tools"].as_array().into_iter().flatten() {
        match tool["type"].as_str() {
            Some("namespace") => {
                let space = tool["name"].as_str().unwrap_or_default();
                for inner in tool["tools"].as_array().into_iter().flatten() {
                    if let Some(name) = inner["name"].as_str() {
                        names.push(format!("{space}__{name}"));
                    }
                }
            }
            _ => names.extend(tool["name"].as_str().map(str::to_string)),
        }
    }
    names
}

fn gemini_tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
        .filter_map(|f| f["name"].as_str().map(str::to_string))
        .collect()
}

fn anthropic_tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

/// The tool results in a request, as the model reads them.
fn tool_results(agent: Agent, body: &Value) -> Vec<String> {
    match agent {
        Agent::Gemini => body["contents"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["parts"].as_array().into_iter().flatten())
            .filter_map(|p| p.get("functionResponse"))
            .map(|r| match &r["response"]["output"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect(),
        Agent::Claude => body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|m| m["content"].as_array().into_iter().flatten())
            .filter(|c| c["type"] == "tool_result")
            .map(|c| match &c["content"] {
                Value::String(s) => s.clone(),
                Value::Array(blocks) => blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                other => other.to_string(),
            })
            .collect(),
        Agent::Codex => body["input"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|i| i["type"] == "function_call_output")
            .map(|i| match &i["output"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect(),
    }
}

/// OpenAI's Responses API as Codex streams it: the whole output item in
/// `response.output_item.done`, then `response.completed`.
fn openai_answer(body: &Value) -> Response<Full<Bytes>> {
    let names = openai_tool_names(body);
    let message = |text: &str| {
        json!({"type": "message", "role": "assistant", "id": "msg_e2e",
            "content": [{"type": "output_text", "text": text}]})
    };
    let step = next_call(tool_results(Agent::Codex, body).len());
    let item = if step.is_none() {
        message(FINAL_TEXT)
    } else if let (true, Some(tool), Some((n, args))) = (
        body["input"].to_string().contains(MARKER),
        declared_tool(&names, "references"),
        step,
    ) {
        let (namespace, name) = tool.rsplit_once("__").expect("NAMESPACE__TOOL");
        json!({"type": "function_call", "id": format!("fc_e2e_{n}"), "call_id": format!("call_e2e_{n}"),
            "namespace": namespace, "name": name, "arguments": args})
    } else {
        message("ok")
    };
    let mut events = String::new();
    for event in [
        json!({"type": "response.created", "response": {"id": "resp_e2e"}}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": {"id": "resp_e2e", "usage":
            {"input_tokens": 10, "input_tokens_details": null, "output_tokens": 5,
             "output_tokens_details": null, "total_tokens": 15}}}),
    ] {
        events.push_str(&format!(
            "event: {}\ndata: {event}\n\n",
            event["type"].as_str().unwrap_or_default()
        ));
    }
    respond("text/event-stream", events)
}

fn gemini_answer(path: &str, body: &Value) -> Response<Full<Bytes>> {
    let config = &body["generationConfig"];
    let names = gemini_tool_names(body);
    let parts = if config["responseMimeType"] == "application/json"
        || !config["responseJsonSchema"].is_null()
        || !config["responseSchema"].is_null()
    {
        // Gemini CLI's helpers (model routing, next-speaker checks) want JSON.
        let answer = json!({"reasoning": "test", "next_speaker": "user",
            "complexity_reasoning": "test", "complexity_score": 1, "model_choice": "flash"});
        json!([{"text": answer.to_string()}])
    } else if next_call(tool_results(Agent::Gemini, body).len()).is_none() {
        json!([{"text": FINAL_TEXT}])
    } else if let (true, Some(tool), Some((_, args))) = (
        body.to_string().contains(MARKER),
        declared_tool(&names, "references"),
        next_call(tool_results(Agent::Gemini, body).len()),
    ) {
        let args: Value = serde_json::from_str(args).expect("args");
        json!([{"functionCall": {"name": tool, "args": args}}])
    } else {
        json!([{"text": "ok"}])
    };
    let chunk = json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
    });
    if path.contains("alt=sse") {
        respond("text/event-stream", format!("data: {chunk}\r\n\r\n"))
    } else {
        respond("application/json", chunk.to_string())
    }
}

fn anthropic_answer(body: &Value) -> Response<Full<Bytes>> {
    let names = anthropic_tool_names(body);
    let step = next_call(tool_results(Agent::Claude, body).len());
    let (blocks, stop) = if step.is_none() {
        (json!([{"type": "text", "text": FINAL_TEXT}]), "end_turn")
    } else if let (true, Some(tool), Some((n, args))) = (
        body["messages"].to_string().contains(MARKER),
        declared_tool(&names, "references"),
        step,
    ) {
        let input: Value = serde_json::from_str(args).expect("args");
        (
            json!([{"type": "tool_use", "id": format!("toolu_e2e_{n}"), "name": tool, "input": input}]),
            "tool_use",
        )
    } else {
        (json!([{"type": "text", "text": "ok"}]), "end_turn")
    };
    let model = body["model"].as_str().unwrap_or("claude");
    let usage = json!({"input_tokens": 10, "output_tokens": 5});
    if body["stream"] != true {
        return respond(
            "application/json",
            json!({"id": "msg_e2e", "type": "message", "role": "assistant", "model": model,
                "content": blocks, "stop_reason": stop, "stop_sequence": null, "usage": usage})
            .to_string(),
        );
    }
    let mut events = String::new();
    let mut event = |name: &str, data: Value| {
        events.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_e2e", "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    for (index, block) in blocks.as_array().expect("blocks").iter().enumerate() {
        if block["type"] == "text" {
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "text", "text": ""}}),
            );
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": block["text"]}}),
            );
        } else {
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block":
                    {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}),
            );
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta":
                    {"type": "input_json_delta", "partial_json": block["input"].to_string()}}),
            );
        }
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 5}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    respond("text/event-stream", events)
}

// ---------------------------------------------------------------- the editor

struct Editor {
    proxy: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    next_id: i64,
    /// `session/update` notifications seen.
    updates: Vec<Value>,
    /// Permission requests answered.
    permissions: usize,
    log: PathBuf,
}

impl Editor {
    async fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("editor input open");
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .expect("write to the proxy");
        stdin.flush().await.expect("flush");
    }

    async fn read(&mut self) -> Value {
        let line = self
            .stdout
            .next_line()
            .await
            .expect("read the proxy's stdout")
            .unwrap_or_else(|| panic!("the proxy's stdout ended\n{}", self.log_text()));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends a request and answers the agent's requests until its response.
    async fn request(&mut self, method: &str, params: Value, limit: Duration) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let answered = timeout(limit, async {
            loop {
                let message = self.read().await;
                match (message.get("method"), message.get("id")) {
                    (None, Some(got)) if *got == json!(id) => return message,
                    (Some(m), Some(request_id)) => {
                        let answer = self.answer(m.as_str().unwrap_or_default(), &message);
                        self.send(json!({"jsonrpc": "2.0", "id": request_id, "result": answer}))
                            .await;
                    }
                    (Some(m), None) if m == "session/update" => {
                        self.updates.push(message["params"]["update"].clone())
                    }
                    _ => {}
                }
            }
        })
        .await;
        let response = answered.unwrap_or_else(|_| {
            panic!(
                "no answer to {method} within {limit:?}\nproxy log:\n{}",
                self.log_text()
            )
        });
        assert!(
            response.get("error").is_none(),
            "{method} failed: {response}\nproxy log:\n{}",
            self.log_text()
        );
        response["result"].clone()
    }

    /// The editor's side of the agent's requests: every tool call allowed.
    fn answer(&mut self, method: &str, request: &Value) -> Value {
        match method {
            "session/request_permission" => {
                self.permissions += 1;
                let options = request["params"]["options"].as_array().expect("options");
                let allow = options
                    .iter()
                    .find(|o| o["kind"] == "allow_once")
                    .or_else(|| {
                        options
                            .iter()
                            .find(|o| o["kind"].as_str().is_some_and(|k| k.starts_with("allow")))
                    })
                    .expect("an allow option");
                json!({"outcome": {"outcome": "selected", "optionId": allow["optionId"]}})
            }
            other => panic!("unexpected request from the agent: {other}: {request}"),
        }
    }
}

/// What one run saw.
struct Run {
    seen: Vec<Seen>,
    updates: Vec<Value>,
    permissions: usize,
    /// The `mcpServers` entry acp-lsp added to the agent's `session/new`.
    entry: Value,
    /// The proxy's log (and the agent's stderr).
    log: String,
}

/// Runs `agent` behind `acp-lsp proxy --mcp MODE` on a copy of the Python
/// project: initialize, session/new, one prompt turn; then closes the
/// editor's side and checks the proxy ends leaving no process.
async fn run(agent: Agent, mcp: Mcp) -> Run {
    let _one = ONE_AT_A_TIME.lock().await;
    support::require("node", "apt-get install nodejs (20 or later)");
    support::require(
        "pyright-langserver",
        "npm install -g pyright (or run .ci/run)",
    );
    let modules = agents_dir();
    assert!(
        modules.is_dir(),
        "{} is missing: run `npm ci --prefix tests/agents` (.ci/run does)",
        modules.display()
    );
    let model = FakeModel::start().await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&project).expect("project dir");
    support::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/python-project"),
        &project,
    );
    // A second `square`: the name is ambiguous.
    std::fs::write(
        project.join("shapes/solid.py"),
        "def square(side: int) -> int:\n    return side * side * side\n",
    )
    .expect("write solid.py");
    let project = project.canonicalize().expect("canonical project");
    let record = tmp.path().join("record.jsonl");
    let log = tmp.path().join("proxy.log");

    let mut command = Command::new(env!("CARGO_BIN_EXE_acp-lsp"));
    command.args([
        "proxy",
        "--log-level",
        "info",
        "--mcp",
        mcp.flag(),
        "--record",
    ]);
    command.arg(&record).arg("--").arg("node");
    match agent {
        Agent::Gemini => {
            // Gemini's settings and trusted folders live under GEMINI_CLI_HOME.
            let home = tmp.path().join("gemini-home");
            let dot = home.join(".gemini");
            std::fs::create_dir_all(&dot).expect("gemini home");
            std::fs::write(
                dot.join("settings.json"),
                json!({
                    "security": {"auth": {"selectedType": "gemini-api-key"}},
                    "privacy": {"usageStatisticsEnabled": false},
                    "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
                })
                .to_string(),
            )
            .expect("settings");
            // Gemini starts no MCP server in an untrusted folder.
            std::fs::write(
                dot.join("trustedFolders.json"),
                json!({ project.to_str().expect("utf-8 path"): "TRUST_FOLDER" }).to_string(),
            )
            .expect("trusted folders");
            command
                .arg(modules.join("@google/gemini-cli/bundle/gemini.js"))
                .arg("--acp")
                .env("GEMINI_CLI_HOME", &home)
                .env("GEMINI_API_KEY", "test-key-not-used")
                .env("GOOGLE_GEMINI_BASE_URL", model.url());
        }
        Agent::Claude => {
            let home = tmp.path().join("claude-home");
            std::fs::create_dir_all(&home).expect("claude home");
            command
                .arg(modules.join("@zed-industries/claude-code-acp/dist/index.js"))
                .env("CLAUDE_CONFIG_DIR", &home)
                .env("ANTHROPIC_API_KEY", "test-key-not-used")
                .env("ANTHROPIC_BASE_URL", model.url())
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                // Claude Code refuses to run as root outside a sandbox.
                command.env("IS_SANDBOX", "1");
            }
        }
        Agent::Codex => {
            // A model provider of our own: the fake speaks the Responses API.
            let home = tmp.path().join("codex-home");
            std::fs::create_dir_all(&home).expect("codex home");
            std::fs::write(
                home.join("config.toml"),
                format!(
                    "model = \"gpt-5-codex\"\nmodel_provider = \"fake\"\n\
                     [model_providers.fake]\nname = \"fake\"\nbase_url = \"{}/v1\"\n\
                     env_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n",
                    model.url()
                ),
            )
            .expect("codex config");
            command
                .arg(modules.join("@zed-industries/codex-acp/bin/codex-acp.js"))
                .env("CODEX_HOME", &home)
                .env("OPENAI_API_KEY", "test-key-not-used");
        }
    }
    let log_file = std::fs::File::create(&log).expect("log file");
    let mut proxy = command
        .current_dir(&project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log_file))
        .kill_on_drop(true)
        .spawn()
        .expect("start acp-lsp proxy");
    let stdin = proxy.stdin.take();
    let stdout = BufReader::new(proxy.stdout.take().expect("stdout")).lines();
    let mut editor = Editor {
        proxy,
        stdin,
        stdout,
        next_id: 0,
        updates: Vec::new(),
        permissions: 0,
        log,
    };

    let init = editor
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities":
                {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
                "clientInfo": {"name": "acp-lsp-e2e", "version": "0"}}),
            IO_TIMEOUT,
        )
        .await;
    assert_eq!(
        init["agentCapabilities"]["mcpCapabilities"]["http"], true,
        "every agent here takes HTTP MCP servers: {init}"
    );
    let session = editor
        .request(
            "session/new",
            json!({"cwd": project, "mcpServers": []}),
            IO_TIMEOUT,
        )
        .await;
    let session_id = session["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string();
    let turn = editor
        .request(
            "session/prompt",
            json!({"sessionId": session_id, "prompt": [{"type": "text",
                "text": format!("{MARKER}: where else is rect_area used? and square?")}]}),
            PROMPT_TIMEOUT,
        )
        .await;
    assert_eq!(turn["stopReason"], "end_turn", "{turn}");

    // The agent is the proxy's child leading its own group; note what is in it.
    let proxy_pid = editor.proxy.id().expect("proxy running");
    let agent_pid = support::procfs::all_pids()
        .into_iter()
        .find(|pid| {
            parent_of(*pid) == Some(proxy_pid) && process_group(*pid) == Some(*pid) && is_node(*pid)
        })
        .expect("the agent process");
    let members = group_members(agent_pid);
    assert!(!members.is_empty());

    // The editor closes its side: the proxy must end, leaving nothing.
    drop(editor.stdin.take());
    let status = timeout(EXIT_TIMEOUT, editor.proxy.wait())
        .await
        .unwrap_or_else(|_| panic!("the proxy did not end\n{}", editor.log_text()))
        .expect("wait for the proxy");
    let left = wait_until_gone(&members, GONE_TIMEOUT).await;
    assert!(
        left.is_empty(),
        "processes of the agent's group left: {left:?} (status {status})"
    );

    let entry = std::fs::read_to_string(&record)
        .expect("record")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["dir"] == "proxy→agent" && r["msg"]["method"] == "session/new")
        .and_then(|r| {
            r["msg"]["params"]["mcpServers"]
                .as_array()
                .and_then(|s| s.iter().find(|e| e["name"] == "acp-lsp").cloned())
        })
        .expect("the injected entry");
    Run {
        seen: model.seen(),
        updates: editor.updates.clone(),
        permissions: editor.permissions,
        entry,
        log: editor.log_text(),
    }
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

fn is_node(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| {
            c.split(|b| *b == 0)
                .next()
                .is_some_and(|a| a.ends_with(b"node"))
        })
        .unwrap_or(false)
}

/// The checks every agent × transport must pass.
fn assert_tool_round_trip(agent: Agent, mcp: Mcp, run: &Run) {
    let context = format!("{agent:?} --mcp {}\nproxy log:\n{}", mcp.flag(), run.log);
    // The transport acp-lsp offered.
    match mcp {
        Mcp::Auto => assert_eq!(run.entry["type"], "http", "{}\n{context}", run.entry),
        Mcp::Stdio => assert_eq!(run.entry["args"][0], "mcp", "{}\n{context}", run.entry),
    }
    let names = |body: &Value| match agent {
        Agent::Gemini => gemini_tool_names(body),
        Agent::Claude => anthropic_tool_names(body),
        Agent::Codex => openai_tool_names(body),
    };
    // The model was offered every acp-lsp tool in the conversation's requests.
    let conversation: Vec<&Seen> = run
        .seen
        .iter()
        .filter(|s| s.body.to_string().contains(MARKER))
        .filter(|s| declared_tool(&names(&s.body), "references").is_some())
        .collect();
    let first = conversation.first().unwrap_or_else(|| {
        let paths: Vec<_> = run.seen.iter().map(|s| &s.path).collect();
        panic!("no model request offered acp-lsp's tools; requests: {paths:?}\n{context}")
    });
    let offered = names(&first.body);
    for tool in TOOLS {
        assert!(
            declared_tool(&offered, tool).is_some(),
            "{tool} not offered to the model: {offered:?}\n{context}"
        );
    }
    // The scripted turn called `references`; the agent ran it (the editor
    // allowed it) and sent the result back to the model in its next request.
    let results: Vec<String> = conversation
        .iter()
        .flat_map(|s| tool_results(agent, &s.body))
        .collect();
    assert!(
        results
            .iter()
            .any(|r| EXPECTED_REFERENCES.iter().all(|line| r.contains(line))),
        "the tool's result (pyright's answer) is not in the model's next request: {results:?}\n{context}"
    );
    assert!(
        results
            .iter()
            .any(|r| EXPECTED_CANDIDATES.iter().all(|line| r.contains(line))),
        "the ambiguous name's candidates are not in the model's last request: {results:?}\n{context}"
    );
    assert!(run.permissions >= 1, "no tool permission asked\n{context}");
    assert!(
        run.updates
            .iter()
            .any(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed"),
        "no completed tool call reported to the editor\n{context}"
    );
    assert!(
        run.updates.iter().any(|u| u["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains(FINAL_TEXT))),
        "the model's final answer did not reach the editor\n{context}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_calls_references_over_http_with_mcp_auto() {
    let run = run(Agent::Gemini, Mcp::Auto).await;
    assert_tool_round_trip(Agent::Gemini, Mcp::Auto, &run);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_calls_references_over_stdio() {
    let run = run(Agent::Gemini, Mcp::Stdio).await;
    assert_tool_round_trip(Agent::Gemini, Mcp::Stdio, &run);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_calls_references_over_http_with_mcp_auto() {
    let run = run(Agent::Claude, Mcp::Auto).await;
    assert_tool_round_trip(Agent::Claude, Mcp::Auto, &run);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_calls_references_over_stdio() {
    let run = run(Agent::Claude, Mcp::Stdio).await;
    assert_tool_round_trip(Agent::Claude, Mcp::Stdio, &run);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_calls_references_over_http_with_mcp_auto() {
    let run = run(Agent::Codex, Mcp::Auto).await;
    assert_tool_round_trip(Agent::Codex, Mcp::Auto, &run);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_calls_references_over_stdio() {
    let run = run(Agent::Codex, Mcp::Stdio).await;
    assert_tool_round_trip(Agent::Codex, Mcp::Stdio, &run);
}
