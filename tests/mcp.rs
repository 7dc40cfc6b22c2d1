//! The MCP server acp-lsp injects into sessions, end to end with a real MCP
//! client (the official Rust SDK, rmcp) and real rust-analyzer.
//!
//! The relay runs in-process over `tokio::io::duplex` pipes, the test playing
//! the editor and the agent; the gate is the real registry's. The test reads
//! the entry the agent receives in `session/new` and starts it exactly as an
//! agent would: the real `acp-lsp mcp --connect …` binary with the entry's
//! args and env, spoken to by rmcp's child-process client.
//!
//! Needs rust-analyzer on `PATH`; without it the tests fail (never skip).
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]

mod mcp_support;
mod support;

use mcp_support::*;

use acp_lsp::lsp::config::{Config, ServerConfig};
use acp_lsp::lsp::registry::{Registry, RegistryOptions};
use acp_lsp::mcp::http::McpHttp;
use acp_lsp::mcp::tokens::TokenTable;
use acp_lsp::proxy_host::ProxyHost;
use acp_lsp_core::gate::Gate;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::time::timeout;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_answers_through_the_injected_server() {
    let mut proxy = Proxy::start().await;
    proxy.initialize(false).await;
    let entry = proxy.new_session("s1").await;
    assert_eq!(entry["name"], "acp-lsp");
    assert!(entry.get("type").is_none(), "a stdio entry: {entry}");
    assert_eq!(entry["args"][0], "mcp");
    assert_eq!(entry["args"][1], "--connect");
    assert!(
        !entry["args"]
            .to_string()
            .contains(entry["env"][0]["value"].as_str().unwrap()),
        "the token must not be in argv"
    );
    let client = connect(&entry).await;

    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    for name in [
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
    ] {
        assert!(
            tools.iter().any(|t| t == name),
            "{name} missing from {tools:?}"
        );
    }

    // `area` is defined at geometry.rs:2:8 and used in report.rs and stats.rs.
    let (refs, structured) = success(
        "references",
        &call(
            &client,
            "references",
            json!({"file": "src/geometry.rs", "line": 2, "column": 8}),
        )
        .await,
    );
    for needle in [
        "src/geometry.rs:2:8: pub fn area(width: u32, height: u32) -> u32 {",
        "src/report.rs:5:5: area(side, side)",
        "src/stats.rs:5:27: let first = geometry::area(a.0, a.1);",
        "src/stats.rs:6:28: let second = geometry::area(b.0, b.1);",
    ] {
        assert!(refs.contains(needle), "{needle:?} not in\n{refs}");
    }
    assert_eq!(
        structured["locations"].as_array().map(Vec::len),
        Some(5),
        "{structured}"
    );

    let (definition, _) = success(
        "definition",
        &call(
            &client,
            "definition",
            json!({"file": "src/stats.rs", "line": 5, "column": 27}),
        )
        .await,
    );
    assert!(definition.contains("src/geometry.rs:2:8:"), "{definition}");
    // One location, counted in the singular.
    assert!(definition.starts_with("1 definition:\n"), "{definition}");

    let (hover, _) = success(
        "hover",
        &call(
            &client,
            "hover",
            json!({"file": proxy.root.join("src/report.rs"), "line": 5, "column": 5}),
        )
        .await,
    );
    assert!(
        hover.contains("pub fn area(width: u32, height: u32) -> u32"),
        "{hover}"
    );

    let (symbols, _) = success(
        "document_symbols",
        &call(&client, "document_symbols", json!({"file": "src/stats.rs"})).await,
    );
    assert!(
        symbols.contains("function total src/stats.rs:4:8"),
        "{symbols}"
    );

    let (found, _) = success(
        "workspace_symbols",
        &call(&client, "workspace_symbols", json!({"query": "square"})).await,
    );
    assert!(
        found.contains("function square src/report.rs:4:8"),
        "{found}"
    );

    let (actions, _) = success(
        "code_actions",
        &call(
            &client,
            "code_actions",
            json!({"file": "src/report.rs", "line": 4, "column": 8}),
        )
        .await,
    );
    assert!(!actions.starts_with("no code actions"), "{actions}");

    let (servers, structured) = success(
        "lsp_servers",
        &call(&client, "lsp_servers", json!({})).await,
    );
    assert!(servers.contains("rust-analyzer [ready]"), "{servers}");
    let server_id = structured["servers"][0]["serverId"].clone();

    let uri = url::Url::from_file_path(proxy.root.join("src/geometry.rs")).unwrap();
    let (raw, structured) = success(
        "lsp_request",
        &call(
            &client,
            "lsp_request",
            json!({"method": "textDocument/documentSymbol",
            "params": {"textDocument": {"uri": uri.as_str()}}}),
        )
        .await,
    );
    assert_eq!(structured["serverId"], server_id);
    assert!(raw.contains("\"area\""), "{raw}");
    // The same refusals and confinement as lsp/request.
    let refused = call(
        &client,
        "lsp_request",
        json!({"method": "textDocument/didOpen",
        "params": {"textDocument": {"uri": uri.as_str()}}, "server": server_id}),
    )
    .await;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("not forwarded"),
        "{}",
        text(&refused)
    );
    let outside = call(&client, "lsp_request", json!({"method": "textDocument/hover",
        "params": {"textDocument": {"uri": "file:///etc/passwd"}, "position": {"line": 0, "character": 0}},
        "server": server_id})).await;
    assert_eq!(outside.is_error, Some(true));
    assert!(text(&outside).contains("outside"), "{}", text(&outside));

    // A syntax error, written to disk: diagnostics waits for the fresh ones.
    std::fs::write(
        proxy.root.join("src/report.rs"),
        "use crate::geometry::area;\n\n/// Area of a square of side `side`.\npub fn square(side: u32) -> u32 {\n    area(side, side\n}\n",
    )
    .unwrap();
    let (diagnostics, structured) = success(
        "diagnostics",
        &call(&client, "diagnostics", json!({"files": ["src/report.rs"]})).await,
    );
    assert!(diagnostics.contains("src/report.rs:5:"), "{diagnostics}");
    assert!(
        structured["diagnostics"]
            .as_array()
            .is_some_and(|d| d.iter().any(|d| d["severity"] == "error")),
        "{structured}"
    );
    std::fs::write(
        proxy.root.join("src/report.rs"),
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/projects/rust-three-files/src/report.rs"),
        )
        .unwrap(),
    )
    .unwrap();

    // Rename, applied to disk (this editor does not write files).
    let (renamed, structured) = success(
        "rename",
        &call(
            &client,
            "rename",
            json!({"file": "src/geometry.rs", "line": 2, "column": 8, "new_name": "surface"}),
        )
        .await,
    );
    assert!(renamed.contains("written through the disk"), "{renamed}");
    let mut changed: Vec<String> = structured["changed"]
        .as_array()
        .expect("changed")
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    changed.sort();
    assert_eq!(
        changed,
        ["src/geometry.rs", "src/report.rs", "src/stats.rs"]
    );
    let stats = std::fs::read_to_string(proxy.root.join("src/stats.rs")).unwrap();
    assert!(stats.contains("geometry::surface(a.0, a.1)"), "{stats}");

    client.cancel().await.expect("close the MCP client");
    proxy.registry.shutdown().await;
    proxy.relay.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_is_written_through_the_editor_when_it_writes_files() {
    let mut proxy = Proxy::start().await;
    proxy.initialize(true).await;
    let entry = proxy.new_session("s2").await;
    let client = connect(&entry).await;

    // The editor serves fs/* from disk and records what it was asked.
    let served: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let mut editor_r = proxy.editor_r.take().expect("editor reader");
    let mut editor_w = proxy.editor_w.take().expect("editor writer");
    let editor = {
        let served = Arc::clone(&served);
        tokio::spawn(async move {
            loop {
                let mut line = String::new();
                if editor_r.read_line(&mut line).await.unwrap_or(0) == 0 {
                    return (editor_r, editor_w);
                }
                let message: Value = serde_json::from_str(&line).expect("JSON from the proxy");
                let method = message["method"].as_str().unwrap_or_default().to_string();
                let path = message["params"]["path"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let result = match method.as_str() {
                    "fs/read_text_file" => match std::fs::read_to_string(&path) {
                        Ok(content) => json!({"result": {"content": content}}),
                        Err(_) => json!({"error": {"code": -32002, "message": "not found"}}),
                    },
                    "fs/write_text_file" => {
                        let content = message["params"]["content"].as_str().unwrap_or_default();
                        std::fs::write(&path, content).expect("editor write");
                        json!({"result": null})
                    }
                    // The sentinel the agent sends at the end.
                    _ if message["params"]["sentinel"] == "end" => return (editor_r, editor_w),
                    _ => continue,
                };
                served.lock().unwrap().push((method, path));
                let mut response = json!({"jsonrpc": "2.0", "id": message["id"]});
                for (k, v) in result.as_object().unwrap() {
                    response[k] = v.clone();
                }
                send(&mut editor_w, &response).await;
            }
        })
    };

    let (renamed, structured) = success(
        "rename",
        &call(
            &client,
            "rename",
            json!({"file": "src/geometry.rs", "line": 2, "column": 8, "new_name": "surface"}),
        )
        .await,
    );
    assert!(renamed.contains("written through the editor"), "{renamed}");
    assert_eq!(
        structured["changed"].as_array().map(Vec::len),
        Some(3),
        "{structured}"
    );
    let writes: Vec<String> = served
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _)| m == "fs/write_text_file")
        .map(|(_, p)| p.clone())
        .collect();
    assert_eq!(writes.len(), 3, "{:?}", served.lock().unwrap());
    let report = std::fs::read_to_string(proxy.root.join("src/report.rs")).unwrap();
    assert!(report.contains("use crate::geometry::surface;"), "{report}");

    // The editor's answers to acp-lsp's own requests never reached the agent:
    // the next thing the agent reads is what the editor sends now.
    client.cancel().await.expect("close the MCP client");
    let sentinel =
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s2"}});
    let (_r, mut w) = {
        // Stop the editor task with a sentinel from the agent side, then take the pipes back.
        send(
            &mut proxy.agent_w,
            &json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sentinel": "end"}}),
        )
        .await;
        editor.await.expect("editor task")
    };
    send(&mut w, &sentinel).await;
    assert_eq!(read_json(&mut proxy.agent_r, "agent").await, sentinel);
    proxy.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_session_request_revokes_its_token_and_a_wrong_token_is_refused() {
    let mut proxy = Proxy::start().await;
    proxy.initialize(false).await;
    let request = json!({"jsonrpc": "2.0", "id": 7, "method": "session/new", "params": {"cwd": proxy.root, "mcpServers": []}});
    send(proxy.editor_w(), &request).await;
    let seen = read_json(&mut proxy.agent_r, "agent").await;
    let entry = seen["params"]["mcpServers"][0].clone();
    assert_eq!(entry["name"], "acp-lsp");
    assert_eq!(proxy.tokens.len(), 1);
    let error = json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": "no"}});
    send(&mut proxy.agent_w, &error).await;
    assert_eq!(read_json(proxy.editor_r(), "editor").await, error);
    assert!(
        proxy.tokens.is_empty(),
        "the token of a failed session/new is revoked"
    );

    // The bridge with a revoked token: the proxy closes the connection, and
    // the client's initialize fails instead of serving anything.
    assert!(refused(&entry).await, "a revoked token was served");

    // An entry already present is not added twice.
    let ours = json!({"jsonrpc": "2.0", "id": 8, "method": "session/new", "params": {"cwd": proxy.root, "mcpServers": [entry]}});
    send(proxy.editor_w(), &ours).await;
    assert_eq!(read_json(&mut proxy.agent_r, "agent").await, ours);
    proxy.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_says_the_server_is_still_indexing_rather_than_answering_empty() {
    // The fake server reports indexing progress that never ends.
    let mut server = ServerConfig::new(
        "fake",
        support::fake::fake_server(),
        &[],
        &["fake"],
        &["fake"],
        &["fake.toml"],
    );
    server.env.insert("FAKE_LSP_MODE".into(), "progress".into());
    // Indexing from the start: the fake never says it is quiescent (without
    // this it would be ready for the moment between `initialize` and its
    // first progress report).
    server.ready_when_quiescent = true;
    let config = Config {
        servers: vec![server],
        ..Config::builtin()
    };
    let mut proxy = Proxy::start_with(
        config,
        |root| {
            std::fs::write(root.join("fake.toml"), "").expect("write marker");
            std::fs::write(root.join("a.fake"), "hello fake\n").expect("write document");
        },
        INDEXING_WAIT,
    )
    .await;
    proxy.initialize(false).await;
    let entry = proxy.new_session("s3").await;
    let client = connect(&entry).await;
    let result = call(
        &client,
        "references",
        json!({"file": "a.fake", "line": 1, "column": 1}),
    )
    .await;
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    let message = text(&result);
    assert!(message.contains("fake is still indexing"), "{message}");
    // It never answered: the tool's text is the refusal, not a location list.
    assert!(!message.contains("references"), "{message}");
    client.cancel().await.expect("close the MCP client");
    proxy.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_load_binds_its_token_and_session_close_revokes_it() {
    let mut proxy = Proxy::start().await;
    proxy.initialize(false).await;
    // session/load names the session in the request; the token is bound on success.
    let load = json!({"jsonrpc": "2.0", "id": "l1", "method": "session/load", "params": {
        "sessionId": "loaded", "cwd": proxy.root, "mcpServers": [],
    }});
    send(proxy.editor_w(), &load).await;
    let seen = read_json(&mut proxy.agent_r, "agent").await;
    let entry = seen["params"]["mcpServers"][0].clone();
    assert_eq!(entry["name"], "acp-lsp", "{seen}");
    let ok = json!({"jsonrpc": "2.0", "id": "l1", "result": {}});
    send(&mut proxy.agent_w, &ok).await;
    assert_eq!(read_json(proxy.editor_r(), "editor").await, ok);

    let client = connect(&entry).await;
    let (servers, _) = success(
        "lsp_servers",
        &call(&client, "lsp_servers", json!({})).await,
    );
    assert!(servers.contains("rust-analyzer"), "{servers}");
    client.cancel().await.expect("close the MCP client");

    // session/close (answered with success) ends the session and its token.
    let close = json!({"jsonrpc": "2.0", "id": "c1", "method": "session/close", "params": {"sessionId": "loaded"}});
    send(proxy.editor_w(), &close).await;
    assert_eq!(read_json(&mut proxy.agent_r, "agent").await, close);
    let ok = json!({"jsonrpc": "2.0", "id": "c1", "result": {}});
    send(&mut proxy.agent_w, &ok).await;
    assert_eq!(read_json(proxy.editor_r(), "editor").await, ok);
    assert!(
        proxy.tokens.is_empty(),
        "session/close revokes the session's tokens"
    );
    assert!(refused(&entry).await, "a closed session's token was served");
    proxy.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_takes_http_gets_an_http_entry_with_a_bearer_token() {
    let mut proxy = Proxy::start().await;
    proxy
        .initialize_with(false, json!({"mcpCapabilities": {"http": true}}))
        .await;
    let entry = proxy.new_session("h1").await;
    assert_eq!(entry["type"], "http", "{entry}");
    assert_eq!(entry["name"], "acp-lsp");
    let url = entry["url"].as_str().expect("url").to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let bearer = entry["headers"][0]["value"].as_str().expect("header");
    let token = bearer
        .strip_prefix("Bearer ")
        .expect("a bearer token")
        .to_string();

    // Without the token: refused before MCP.
    let anonymous = ().serve(StreamableHttpClientTransport::from_uri(url.clone())).await;
    assert!(anonymous.is_err(), "served without a token");

    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
    );
    let client = timeout(IO_TIMEOUT, ().serve(transport))
        .await
        .expect("MCP initialize timed out")
        .expect("MCP initialize failed");
    let (refs, _) = success(
        "references",
        &call(
            &client,
            "references",
            json!({"file": "src/geometry.rs", "line": 2, "column": 8}),
        )
        .await,
    );
    assert!(
        refs.contains("src/report.rs:5:5: area(side, side)"),
        "{refs}"
    );
    client.cancel().await.expect("close the MCP client");
    proxy.registry.shutdown().await;
}

// ------------------------------------- MCP over HTTP: limits (issue 13, item 9)

/// An MCP HTTP server over a gate with no language server, with `limits`,
/// and one live token.
async fn limited_http(
    limits: acp_lsp::lsp::config::McpHttpLimits,
) -> (McpHttp, String, Arc<TokenTable>) {
    let config = Config {
        servers: Vec::new(),
        ..Config::builtin()
    };
    let gate_config = config.gate_config();
    let registry = Registry::new(config, RegistryOptions::default());
    let gate = Gate::new(Arc::new(ProxyHost::Local(registry)), gate_config);
    let tokens = Arc::new(TokenTable::new());
    let token = tokens.create(Some("s")).expect("token");
    let http = McpHttp::bind_with_limits(
        gate,
        Arc::clone(&tokens),
        None,
        acp_lsp::mcp::tools::READY_WAIT,
        limits,
    )
    .await
    .expect("bind");
    (http, token, tokens)
}

/// Sends `head` (request line and headers, without the blank line) and
/// `body` on a new connection to `url`'s address; returns the connection.
async fn raw_http(url: &str, head: &str, body: &[u8]) -> tokio::net::TcpStream {
    let address = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .expect("http://host:port/path");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    stream
        .write_all(format!("{head}\r\nHost: {address}\r\n\r\n").as_bytes())
        .await
        .expect("write head");
    stream.write_all(body).await.expect("write body");
    stream
}

/// The status code of the response on `stream`.
async fn status_of(stream: &mut tokio::net::TcpStream) -> u16 {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    timeout(IO_TIMEOUT, reader.read_line(&mut line))
        .await
        .expect("a response in time")
        .expect("read");
    line.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP status line: {line:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_http_refuses_foreign_origins_large_bodies_and_slow_bodies() {
    let limits = acp_lsp::lsp::config::McpHttpLimits {
        max_body_bytes: 1024,
        max_concurrent: 4,
        read_timeout: Duration::from_millis(300),
    };
    let (http, token, _tokens) = limited_http(limits).await;
    let url = http.url();
    let auth = format!("Authorization: Bearer {token}");
    let post = |extra: &str, length: usize| {
        format!("POST /mcp HTTP/1.1\r\n{auth}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {length}{extra}")
    };

    // A web page elsewhere cannot drive the tools, even with the token.
    for origin in [
        "https://evil.example",
        "null",
        "http://127.0.0.2.evil.example",
    ] {
        let mut s = raw_http(&url, &post(&format!("\r\nOrigin: {origin}"), 2), b"{}").await;
        assert_eq!(status_of(&mut s).await, 403, "Origin {origin}");
    }
    // A loopback origin reaches MCP (which refuses `{}` in its own way).
    let mut s = raw_http(&url, &post("\r\nOrigin: http://localhost:3000", 2), b"{}").await;
    let status = status_of(&mut s).await;
    assert!(![403, 408, 413, 429].contains(&status), "got {status}");

    // Over the size limit, declared or streamed.
    let mut s = raw_http(&url, &post("", 4096), b"").await;
    assert_eq!(status_of(&mut s).await, 413);
    let chunked = format!("POST /mcp HTTP/1.1\r\n{auth}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked");
    let body = format!("800\r\n{}\r\n0\r\n\r\n", "x".repeat(0x800));
    let mut s = raw_http(&url, &chunked, body.as_bytes()).await;
    assert_eq!(status_of(&mut s).await, 413);

    // A body that never completes: 408 once the read timeout passes.
    let mut s = raw_http(&url, &post("", 100), b"{\"partial\":").await;
    assert_eq!(status_of(&mut s).await, 408);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_http_answers_429_past_its_concurrency_limit() {
    let limits = acp_lsp::lsp::config::McpHttpLimits {
        max_body_bytes: 1024,
        max_concurrent: 1,
        read_timeout: Duration::from_secs(60),
    };
    let (http, token, _tokens) = limited_http(limits).await;
    let url = http.url();
    let post = |length: usize| {
        format!("POST /mcp HTTP/1.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {length}")
    };
    // A holds the one place while its body trickles in.
    let mut a = raw_http(&url, &post(2), b"{").await;
    // B (oversized: answered at once when admitted) is refused with 429
    // once A's handler has taken the place; until then B takes and returns it.
    let mut attempts = 0;
    loop {
        let mut b = raw_http(&url, &post(4096), b"").await;
        match status_of(&mut b).await {
            429 => break,
            413 => {
                attempts += 1;
                assert!(attempts < 1000, "A never held its place");
                tokio::task::yield_now().await;
            }
            other => panic!("B got {other}"),
        }
    }
    // A completes: its place comes back.
    a.write_all(b"}").await.expect("finish A");
    let status = status_of(&mut a).await;
    assert!(![408, 413, 429].contains(&status), "A got {status}");
    drop(a);
    let mut attempts = 0;
    loop {
        let mut c = raw_http(&url, &post(4096), b"").await;
        match status_of(&mut c).await {
            413 => break,
            429 => {
                // A's response body may still be held for a moment.
                attempts += 1;
                assert!(attempts < 1000, "the place never came back");
                tokio::task::yield_now().await;
            }
            other => panic!("C got {other}"),
        }
    }
}

/// The SSE events of a `text/event-stream` body: each event's `data:` lines
/// joined, or `None` for an event with no `data:` field (comments dropped).
fn sse_events(body: &str) -> Vec<(String, Option<String>)> {
    body.replace("\r\n", "\n")
        .split("\n\n")
        .filter_map(|block| {
            let fields: Vec<&str> = block
                .lines()
                .filter(|l| !l.is_empty() && !l.starts_with(':'))
                .collect();
            if fields.is_empty() {
                return None;
            }
            let data: Vec<&str> = fields
                .iter()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            let data = (!data.is_empty()).then(|| data.join("\n"));
            Some((block.to_string(), data))
        })
        .collect()
}

/// What Gemini CLI's MCP client does with each SSE event: `JSON.parse` its
/// data. Every event must carry JSON; returns the parsed messages.
fn json_events(what: &str, body: &str) -> Vec<Value> {
    sse_events(body)
        .into_iter()
        .map(|(block, data)| {
            let data = data.unwrap_or_default();
            serde_json::from_str(&data).unwrap_or_else(|e| {
                panic!("{what}: an SSE event whose data is not JSON ({e}): {block:?}")
            })
        })
        .collect()
}

/// One POST of a JSON-RPC message to the MCP endpoint; returns the response.
async fn mcp_post(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    headers: &[(&str, &str)],
    message: Value,
) -> reqwest::Response {
    let mut request = http
        .post(url)
        .header("authorization", format!("Bearer {token}"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(message.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    timeout(IO_TIMEOUT, request.send())
        .await
        .expect("MCP POST timed out")
        .expect("MCP POST failed")
}

async fn body_text(what: &str, response: reqwest::Response) -> String {
    let status = response.status();
    let body = timeout(IO_TIMEOUT, response.text())
        .await
        .unwrap_or_else(|_| panic!("{what}: the body did not end"))
        .expect("read body");
    assert!(status.is_success(), "{what}: HTTP {status}: {body}");
    body
}

/// Gemini CLI parses every SSE event's data as JSON and drops the server on
/// an empty one; rmcp opens each stream with such a "priming" event unless
/// told not to. Checked on every MCP version agents speak, on the POST
/// answers and on the GET stream a client opens for server messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sse_event_of_the_http_server_carries_json_on_each_protocol_version() {
    let mut proxy = Proxy::start_with(Config::builtin(), |_| {}, INDEXING_WAIT).await;
    proxy
        .initialize_with(false, json!({"mcpCapabilities": {"http": true}}))
        .await;
    let entry = proxy.new_session("sse").await;
    let url = entry["url"].as_str().expect("url").to_string();
    let token = entry["headers"][0]["value"]
        .as_str()
        .and_then(|v| v.strip_prefix("Bearer "))
        .expect("a bearer token")
        .to_string();
    let http = reqwest::Client::new();

    // The versions with the initialize handshake and sessions.
    for version in ["2025-06-18", "2025-11-25"] {
        let init = mcp_post(&http, &url, &token, &[], json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "sse-test", "version": "0"},
        }}))
        .await;
        let session = init
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("an MCP session id")
            .to_string();
        let answers = json_events(version, &body_text("initialize", init).await);
        assert_eq!(answers.len(), 1, "{version}: {answers:?}");
        assert_eq!(answers[0]["result"]["protocolVersion"], version);
        let session_headers = [
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", version),
        ];
        let initialized = mcp_post(
            &http,
            &url,
            &token,
            &session_headers,
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
        assert!(initialized.status().is_success(), "{version}: initialized");

        // The stream for server messages, read until the session ends.
        let get = timeout(
            IO_TIMEOUT,
            http.get(&url)
                .header("authorization", format!("Bearer {token}"))
                .header("accept", "text/event-stream")
                .header("mcp-session-id", session.as_str())
                .header("mcp-protocol-version", version)
                .send(),
        )
        .await
        .expect("GET timed out")
        .expect("GET failed");
        assert!(get.status().is_success(), "{version}: GET {}", get.status());
        let standalone = tokio::spawn(async move { get.text().await });

        let list = mcp_post(
            &http,
            &url,
            &token,
            &session_headers,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        )
        .await;
        let answers = json_events(version, &body_text("tools/list", list).await);
        assert_eq!(answers.len(), 1, "{version}: {answers:?}");
        assert!(
            answers[0]["result"]["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["name"] == "references")),
            "{version}: {answers:?}"
        );

        // Ending the session ends the GET stream.
        let delete = timeout(
            IO_TIMEOUT,
            http.delete(&url)
                .header("authorization", format!("Bearer {token}"))
                .header("mcp-session-id", session.as_str())
                .header("mcp-protocol-version", version)
                .send(),
        )
        .await
        .expect("DELETE timed out")
        .expect("DELETE failed");
        assert!(delete.status().is_success(), "{version}: DELETE");
        let standalone = timeout(IO_TIMEOUT, standalone)
            .await
            .expect("the GET stream did not end with its session")
            .expect("GET task")
            .expect("GET body");
        json_events(version, &standalone);
    }

    // 2026-07-28: no handshake, no sessions; the version rides on each request.
    let version = "2026-07-28";
    let list = mcp_post(
        &http,
        &url,
        &token,
        &[
            ("mcp-protocol-version", version),
            ("mcp-method", "tools/list"),
        ],
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "sse-test", "version": "0"},
        }}}),
    )
    .await;
    let answers = json_events(version, &body_text("tools/list", list).await);
    assert_eq!(answers.len(), 1, "{version}: {answers:?}");
    assert!(
        answers[0]["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "references")),
        "{version}: {answers:?}"
    );
    proxy.registry.shutdown().await;
}

/// Longest wait for a tool call on a hostile file: the tool must answer
/// promptly; beyond this the proxy is taken to be frozen.
const FREEZE_BOUND: Duration = Duration::from_secs(60);

/// One tool call bounded by [`FREEZE_BOUND`]; `None` when it did not answer.
async fn call_bounded(client: &Client, tool: &str, arguments: Value) -> Option<CallToolResult> {
    let arguments = arguments.as_object().expect("arguments object").clone();
    let call =
        client.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments));
    match timeout(FREEZE_BOUND, call).await {
        Ok(result) => {
            Some(result.unwrap_or_else(|e| panic!("{tool} failed at the protocol level: {e}")))
        }
        Err(_) => None,
    }
}

/// This process's resident memory, in bytes.
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_confine_files_first_and_never_block_a_runtime_thread() {
    // The proxy gets a runtime of its own, two workers as on this machine,
    // so that a proxy frozen by blocking reads shows as unanswered calls
    // instead of freezing the test.
    let proxy_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("proxy runtime");
    let mut proxy = proxy_runtime
        .spawn(Proxy::start())
        .await
        .expect("start the proxy");
    proxy.initialize(false).await;
    let entry = proxy.new_session("s1").await;
    let client = connect(&entry).await;

    // Two calls on a FIFO inside the root (where rust-analyzer does not
    // look), at once: before, each blocked a runtime worker for good.
    let fifo = proxy.root.join("target/pipe.rs");
    std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let at_fifo = json!({"file": "target/pipe.rs", "line": 1, "column": 1});
    let (a, b) = tokio::join!(
        call_bounded(&client, "hover", at_fifo.clone()),
        call_bounded(&client, "definition", at_fifo),
    );
    for result in [a, b] {
        let result = result.expect("a tool on a FIFO answers: the proxy did not freeze");
        assert_eq!(result.is_error, Some(true), "{}", text(&result));
        assert!(
            text(&result).contains("not a regular file"),
            "{}",
            text(&result)
        );
    }
    let servers = call_bounded(&client, "lsp_servers", json!({}))
        .await
        .expect("the proxy still answers");
    success("lsp_servers", &servers);

    // Files outside the roots: refused before anything is read, in the same
    // words whether the file exists or not, never with its line count.
    let outside = proxy.root.parent().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let secret: String = (1..=25).map(|i| format!("// secret line {i}\n")).collect();
    std::fs::write(outside.join("secret.rs"), &secret).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.rs"), proxy.root.join("src/link.rs")).unwrap();
    let pairs = [
        (
            outside.join("secret.rs").display().to_string(),
            outside.join("missing.rs").display().to_string(),
        ),
        (
            "../outside/secret.rs".to_string(),
            "../outside/missing.rs".to_string(),
        ),
        ("/etc/passwd".to_string(), "/etc/no-such-file".to_string()),
        ("src/link.rs".to_string(), "/dev/zero".to_string()),
    ];
    let at = |file: &str| json!({"file": file, "line": 30, "column": 1});
    let calls = |file: &str| {
        vec![
            ("hover", at(file)),
            ("definition", at(file)),
            ("references", at(file)),
            ("code_actions", at(file)),
            ("document_symbols", json!({"file": file})),
            ("diagnostics", json!({"files": [file]})),
            (
                "rename",
                json!({"file": file, "line": 1, "column": 1, "new_name": "x"}),
            ),
        ]
    };
    let before = resident_bytes();
    for (existing, missing) in &pairs {
        for ((tool, args), (_, args_missing)) in calls(existing).into_iter().zip(calls(missing)) {
            let mut answers = Vec::new();
            for (file, args) in [(existing, args), (missing, args_missing)] {
                let result = call_bounded(&client, tool, args)
                    .await
                    .unwrap_or_else(|| panic!("{tool} on {file} did not answer"));
                let message = text(&result);
                assert_eq!(result.is_error, Some(true), "{tool} {file}: {message}");
                assert!(
                    message.contains("outside the session's roots"),
                    "{tool} {file}: {message}"
                );
                assert!(!message.contains("lines"), "{tool} {file}: {message}");
                answers.push(message.replace(file.as_str(), "FILE"));
            }
            assert_eq!(answers[0], answers[1], "{tool}: {existing} vs {missing}");
        }
    }
    let grown = resident_bytes().saturating_sub(before);
    println!(
        "resident memory grown over the outside-file calls (/dev/zero among them): {grown} bytes"
    );
    assert!(grown < 256 * 1024 * 1024, "grew by {grown} bytes");

    client.cancel().await.expect("close the MCP client");
    let registry = Arc::clone(&proxy.registry);
    proxy_runtime
        .spawn(async move { registry.shutdown().await })
        .await
        .expect("shut the servers down");
    drop(proxy);
    proxy_runtime.shutdown_background();
}

/// Sets a file's mtime a minute back, as a file not edited in the last
/// seconds has: the tools keep the texts of such files between calls.
fn age(path: &Path) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(std::time::SystemTime::now() - Duration::from_secs(60)))
        .unwrap_or_else(|e| panic!("cannot age {}: {e}", path.display()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_show_files_as_they_are_on_disk_now_across_calls() {
    let mut proxy = Proxy::start().await;
    proxy.initialize(false).await;
    let entry = proxy.new_session("s1").await;
    let client = connect(&entry).await;
    let (geometry, stats) = (
        proxy.root.join("src/geometry.rs"),
        proxy.root.join("src/stats.rs"),
    );
    age(&geometry);
    age(&stats);
    let at_use = json!({"file": "src/stats.rs", "line": 5, "column": 27});

    // Twice: the second call finds both files' texts kept from the first.
    for _ in 0..2 {
        let (definition, _) = success(
            "definition",
            &call(&client, "definition", at_use.clone()).await,
        );
        assert!(
            definition
                .contains("src/geometry.rs:2:8: pub fn area(width: u32, height: u32) -> u32 {\n"),
            "{definition}"
        );
    }

    // The line a result points at, edited on disk: shown as it is now.
    let original = std::fs::read_to_string(&geometry).unwrap();
    let edited = original.replace(
        "pub fn area(width: u32, height: u32) -> u32 {",
        "pub fn area(width: u32, height: u32) -> u32 { // edited",
    );
    assert_ne!(original, edited);
    std::fs::write(&geometry, &edited).unwrap();
    let (definition, structured) = success(
        "definition",
        &call(&client, "definition", at_use.clone()).await,
    );
    assert!(
        definition.contains(
            "src/geometry.rs:2:8: pub fn area(width: u32, height: u32) -> u32 { // edited"
        ),
        "the old text of geometry.rs was shown:\n{definition}"
    );
    assert_eq!(
        structured["locations"][0]["text"],
        "pub fn area(width: u32, height: u32) -> u32 { // edited"
    );

    // The file a position names, cut short on disk: its line 5 is gone now.
    std::fs::write(&stats, "use crate::geometry;\n").unwrap();
    let gone = call(&client, "definition", at_use).await;
    assert_eq!(gone.is_error, Some(true), "{}", text(&gone));
    assert!(
        text(&gone).contains("has 2 lines; line 5 does not exist"),
        "the old text of stats.rs was used: {}",
        text(&gone)
    );

    client.cancel().await.expect("close the MCP client");
    proxy.registry.shutdown().await;
    proxy.relay.abort();
}

fn signal(pid: u32, signal: &str) {
    let sent = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill {signal} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_hands_its_pipes_to_the_proxy_and_its_end_ends_the_connection() {
    let mut proxy = Proxy::start().await;
    proxy.initialize(false).await;
    let entry = proxy.new_session("s1").await;
    let transport = bridge_transport(&entry);
    let bridge = transport.id().expect("the bridge's pid");
    let client = timeout(IO_TIMEOUT, ().serve(transport))
        .await
        .expect("MCP initialize timed out")
        .expect("MCP initialize failed");

    // Stopped, a bridge that copied the messages would hold them all: the
    // proxy reads and writes the agent's pipes itself.
    signal(bridge, "-STOP");
    let answered = call_bounded(&client, "lsp_servers", json!({})).await;
    signal(bridge, "-CONT");
    let answered = answered.expect("no answer while the bridge was stopped: it still copies");
    success("lsp_servers", &answered);

    // The agent ends the bridge: the proxy ends the MCP connection on the
    // agent's pipes too (nothing keeps serving a process that is gone).
    signal(bridge, "-KILL");
    let ended = timeout(FREEZE_BOUND, client.waiting()).await;
    assert!(ended.is_ok(), "the MCP connection outlived its bridge");
    proxy.registry.shutdown().await;
    proxy.relay.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_on_sockets_as_node_agents_start_it_hands_them_over_too() {
    // Node's child_process gives a child's stdio as Unix socket pairs, not pipes.
    let mut proxy = Proxy::start().await;
    proxy.initialize(false).await;
    let entry = proxy.new_session("s1").await;
    let (stdin_ours, stdin_theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let (stdout_ours, stdout_theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let env: Vec<(String, String)> = entry["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap().to_string(),
                v["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut bridge = tokio::process::Command::new(entry["command"].as_str().unwrap())
        .args(
            entry["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap()),
        )
        .envs(env)
        .stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(
            stdin_theirs,
        )))
        .stdout(std::process::Stdio::from(std::os::fd::OwnedFd::from(
            stdout_theirs,
        )))
        .kill_on_drop(true)
        .spawn()
        .expect("start the bridge");
    let pid = bridge.id().expect("the bridge's pid");
    let as_tokio = |s: std::os::unix::net::UnixStream| {
        s.set_nonblocking(true).unwrap();
        tokio::net::UnixStream::from_std(s).unwrap()
    };
    let (to_bridge, from_bridge) = (as_tokio(stdin_ours), as_tokio(stdout_ours));
    let client = timeout(IO_TIMEOUT, ().serve((from_bridge, to_bridge)))
        .await
        .expect("MCP initialize timed out")
        .expect("MCP initialize failed");
    signal(pid, "-STOP");
    let answered = call_bounded(&client, "lsp_servers", json!({})).await;
    signal(pid, "-CONT");
    let answered = answered.expect("no answer while the bridge was stopped: it still copies");
    success("lsp_servers", &answered);

    // The agent closes the bridge's stdin: the proxy ends the connection
    // and the bridge exits.
    client.cancel().await.expect("close the MCP client");
    let status = timeout(FREEZE_BOUND, bridge.wait())
        .await
        .expect("the bridge outlived its MCP connection")
        .expect("wait for the bridge");
    assert!(status.success(), "{status}");
    proxy.registry.shutdown().await;
    proxy.relay.abort();
}

/// While the file's live server is starting (rust-analyzer held before it
/// starts by a FIFO nobody opens), the position tools answer from the
/// project's SCIP index (built by `acp-lsp index` with the real
/// `rust-analyzer scip`) and say so; without the index they would wait for
/// rust-analyzer and report it still indexing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_answer_from_a_scip_index_while_the_server_starts_and_say_so() {
    support::require("rust-analyzer", "rustup component add rust-analyzer");
    let held = tempfile::tempdir().expect("tempdir");
    let fifo = held.path().join("go");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo failed");
    let mut config = Config::builtin();
    let server = config
        .servers
        .iter_mut()
        .find(|s| s.name == "rust-analyzer")
        .expect("the built-in rust-analyzer");
    server.command = "sh".into();
    server.args = vec![
        "-c".into(),
        format!("read go < '{}' && exec rust-analyzer", fifo.display()),
    ];
    let mut proxy = Proxy::start_with(
        config,
        |root| {
            support::copy_tree(
                &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/rust-three-files"),
                root,
            );
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp-lsp"))
                .arg("index")
                .arg(root)
                .output()
                .expect("acp-lsp index runs");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        },
        Duration::from_secs(5),
    )
    .await;
    proxy.initialize(false).await;
    let entry = proxy.new_session("s1").await;
    let client = connect(&entry).await;
    let (refs, structured) = success(
        "references",
        &call(
            &client,
            "references",
            json!({"file": "src/geometry.rs", "line": 2, "column": 8}),
        )
        .await,
    );
    assert!(
        refs.starts_with("(answered from the SCIP index scip@"),
        "{refs}"
    );
    for needle in [
        "src/geometry.rs:2:8: pub fn area(width: u32, height: u32) -> u32 {",
        "src/report.rs:5:5: area(side, side)",
        "src/stats.rs:5:27: let first = geometry::area(a.0, a.1);",
        "src/stats.rs:6:28: let second = geometry::area(b.0, b.1);",
    ] {
        assert!(refs.contains(needle), "{needle:?} not in\n{refs}");
    }
    assert!(
        structured["source"]
            .as_str()
            .is_some_and(|s| s.contains("SCIP index")),
        "{structured}"
    );
    let (servers, _) = success(
        "lsp_servers",
        &call(&client, "lsp_servers", json!({})).await,
    );
    assert!(!servers.contains("rust-analyzer [ready]"), "{servers}");
    drop(client);
    drop(proxy);
}
