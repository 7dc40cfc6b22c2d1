//! A test agent on the official ACP Rust SDK that takes MCP over the ACP
//! connection (`mcpCapabilities.acp`), for `tests/chain.rs`.
//!
//! It advertises the `acp` MCP transport, keeps the `"type": "acp"` servers
//! of `session/new` (as the SDK parses them: an entry it cannot read is
//! skipped), and on a prompt talks MCP to the one named `acp-lsp` over ACP
//! in both forms of the draft:
//!
//! - `mcp/connect {serverId}` → `connectionId`, then `mcp/message` requests
//!   and notifications on it (`initialize`, `notifications/initialized`,
//!   `tools/list`, `tools/call`), then `mcp/disconnect`;
//! - the connectionless `mcp/message {serverId, requestId, method, params}`
//!   → `{result}` of the SDK 5.x (`tools/list`).
//!
//! The prompt's text is the `tools/call` to make, as JSON `{name,
//! arguments}`. The turn ends with one `agent_message_chunk` holding a JSON
//! report of what it saw.

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, ContentBlock, ContentChunk, Implementation, InitializeRequest,
    InitializeResponse, McpCapabilities, McpServer, NewSessionRequest, NewSessionResponse,
    PromptRequest, PromptResponse, SessionId, SessionNotification, SessionUpdate, StopReason,
    TextContent,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Agent, Client, Stdio, UntypedMessage};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Session id → the MCP servers `session/new` declared, as (name, type, serverId).
type Sessions = Arc<Mutex<HashMap<SessionId, Vec<(String, String, Option<String>)>>>>;

#[tokio::main]
async fn main() -> Result<(), agent_client_protocol::Error> {
    let sessions: Sessions = Arc::default();
    Agent
        .v1()
        .name("acp-lsp-test-acp-mcp-agent")
        .on_receive_request(
            async move |_request: InitializeRequest, responder, _cx| {
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(
                            AgentCapabilities::new()
                                .mcp_capabilities(McpCapabilities::new().acp(true)),
                        )
                        .agent_info(Implementation::new("acp-mcp-agent", "1")),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let sessions = sessions.clone();
                async move |request: NewSessionRequest, responder, _cx| {
                    let servers = request
                        .mcp_servers
                        .iter()
                        .map(|server| match server {
                            McpServer::Acp(acp) => (
                                acp.name.clone(),
                                "acp".to_string(),
                                Some(acp.server_id.to_string()),
                            ),
                            McpServer::Http(http) => (http.name.clone(), "http".into(), None),
                            McpServer::Sse(sse) => (sse.name.clone(), "sse".into(), None),
                            McpServer::Stdio(stdio) => (stdio.name.clone(), "stdio".into(), None),
                            _ => ("?".into(), "other".into(), None),
                        })
                        .collect();
                    let id = SessionId::new(format!("acp-mcp-{}", lock(&sessions).len() + 1));
                    lock(&sessions).insert(id.clone(), servers);
                    responder.respond(NewSessionResponse::new(id))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let sessions = sessions.clone();
                async move |request: PromptRequest, responder, cx: ConnectionTo<Client>| {
                    let servers = lock(&sessions)
                        .get(&request.session_id)
                        .cloned()
                        .unwrap_or_default();
                    // The turn waits on the client's answers: run it outside the loop.
                    cx.clone().spawn(async move {
                        let report = turn(&cx, &request, &servers).await;
                        cx.send_notification(SessionNotification::new(
                            request.session_id.clone(),
                            SessionUpdate::AgentMessageChunk(ContentChunk::new(
                                ContentBlock::Text(TextContent::new(report.to_string())),
                            )),
                        ))?;
                        responder.respond(PromptResponse::new(StopReason::EndTurn))
                    })
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(Stdio::new())
        .await
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One ACP request to the client; its result, or the error as JSON.
async fn ask(cx: &ConnectionTo<Client>, method: &str, params: Value) -> Result<Value, Value> {
    let request = UntypedMessage::new(method, params).map_err(|e| json!(e.to_string()))?;
    cx.send_request(request)
        .block_task()
        .await
        .map_err(|e| json!({"code": e.code, "message": e.message, "data": e.data}))
}

async fn turn(
    cx: &ConnectionTo<Client>,
    request: &PromptRequest,
    servers: &[(String, String, Option<String>)],
) -> Value {
    let declared: Vec<Value> = servers
        .iter()
        .map(|(name, kind, id)| json!({"name": name, "type": kind, "serverId": id}))
        .collect();
    let Some(server_id) = servers
        .iter()
        .find(|(name, kind, _)| name == "acp-lsp" && kind == "acp")
        .and_then(|(_, _, id)| id.clone())
    else {
        return json!({"declared": declared, "error": "no acp-lsp server over ACP"});
    };
    let call: Value = request
        .prompt
        .iter()
        .find_map(|block| match block {
            ContentBlock::Text(text) => serde_json::from_str(&text.text).ok(),
            _ => None,
        })
        .unwrap_or(Value::Null);

    // The connection form.
    let connected = ask(cx, "mcp/connect", json!({"serverId": server_id})).await;
    let connection = connected
        .as_ref()
        .ok()
        .and_then(|r| r["connectionId"].as_str())
        .map(str::to_string);
    let mut on_connection = json!({"connect": connected.clone().unwrap_or_else(|e| e)});
    if let Some(connection) = &connection {
        let message = |method: &str, params: Value| json!({"connectionId": connection, "method": method, "params": params});
        on_connection["initialize"] = ask(
            cx,
            "mcp/message",
            message(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "acp-mcp-agent", "version": "1"}}),
            ),
        )
        .await
        .unwrap_or_else(|e| json!({"error": e}));
        let _ = cx.send_notification(
            UntypedMessage::new(
                "mcp/message",
                message("notifications/initialized", json!({})),
            )
            .expect("BUG: static JSON"),
        );
        on_connection["tools"] = ask(cx, "mcp/message", message("tools/list", json!({})))
            .await
            .map(|r| tool_names(&r))
            .unwrap_or_else(|e| json!({"error": e}));
        if !call.is_null() {
            on_connection["call"] = ask(cx, "mcp/message", message("tools/call", call.clone()))
                .await
                .unwrap_or_else(|e| json!({"error": e}));
        }
        on_connection["disconnect"] =
            ask(cx, "mcp/disconnect", json!({"connectionId": connection}))
                .await
                .unwrap_or_else(|e| json!({"error": e}));
        // Gone: a message on it is refused.
        on_connection["afterDisconnect"] = ask(cx, "mcp/message", message("tools/list", json!({})))
            .await
            .map_or_else(|e| e, |r| json!({"unexpectedResult": r}));
    }

    // The connectionless form.
    let connectionless = ask(
        cx,
        "mcp/message",
        json!({"serverId": server_id, "requestId": "r-1", "method": "tools/list", "params": {}}),
    )
    .await
    .map(|r| {
        let keys: Vec<&String> = r
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        json!({"tools": tool_names(&r["result"]), "carrierKeys": keys})
    })
    .unwrap_or_else(|e| json!({"error": e}));

    json!({
        "declared": declared,
        "serverId": server_id,
        "connection": on_connection,
        "connectionless": connectionless,
    })
}

fn tool_names(result: &Value) -> Value {
    result["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect::<Vec<_>>()
        })
        .map_or(Value::Null, |names| json!(names))
}
