//! Adding acp-lsp's own entry to the `mcpServers` of a session request
//! (`session/new`, `session/load`, `session/resume`, `session/fork`), with
//! order-preserving raw edits: every other byte of the message is kept.

use crate::jsonrpc::object::RawObject;
use serde_json::value::RawValue;
use std::path::{Path, PathBuf};

/// The name of the injected MCP server (what agents show and prefix tools with).
pub const SERVER_NAME: &str = "acp-lsp";
/// The environment variable carrying the connection token to the `mcp`
/// bridge (the environment, unlike argv, is not readable by other users in /proc).
pub const TOKEN_ENV: &str = "ACP_LSP_MCP_TOKEN";

/// The session requests that carry `mcpServers`.
pub fn carries_mcp_servers(method: &str) -> bool {
    matches!(
        method,
        "session/new" | "session/load" | "session/resume" | "session/fork"
    )
}

/// How the agent reaches the injected server: a stdio entry running
/// `acp-lsp mcp --connect SOCKET`.
#[derive(Debug, Clone)]
pub struct StdioEntry {
    /// The acp-lsp executable.
    pub command: PathBuf,
    /// The proxy's private socket.
    pub socket: PathBuf,
}

impl StdioEntry {
    /// The `McpServerStdio` JSON for `token`, in the spelling of
    /// `protocol_version`: v2's `McpServer` is tagged and requires
    /// `"type": "stdio"`; v1's stdio entry is the untagged one.
    pub fn to_json(&self, token: &str, protocol_version: u64) -> String {
        let mut entry = serde_json::json!({
            "name": SERVER_NAME,
            "command": path_text(&self.command),
            "args": ["mcp", "--connect", path_text(&self.socket)],
            "env": [{ "name": TOKEN_ENV, "value": token }],
        });
        if protocol_version >= 2 {
            entry["type"] = "stdio".into();
        }
        // `type` first, as the schema writes a tagged entry (serde_json
        // without `preserve_order` sorts keys; with it, insertion order).
        sorted_with_type_first(entry)
    }
}

/// The MCP-over-ACP entry (`"type": "acp"`, the mcp-over-acp RFD) for the
/// ACP-transport server id `server_id`: the agent reaches the tools with
/// `mcp/connect` and `mcp/message` on the ACP connection itself.
pub fn acp_entry_json(server_id: &str) -> String {
    sorted_with_type_first(serde_json::json!({
        "type": "acp",
        "name": SERVER_NAME,
        "serverId": server_id,
    }))
}

/// `entry` as JSON text with `type` (if any) first and the other keys sorted:
/// the same bytes whichever way the build orders `json!` maps.
fn sorted_with_type_first(entry: serde_json::Value) -> String {
    let serde_json::Value::Object(map) = entry else {
        return entry.to_string();
    };
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort_by_key(|k| (k.as_str() != "type", k.as_str()));
    let members: Vec<String> = keys
        .iter()
        .map(|k| {
            format!(
                "{}:{}",
                serde_json::Value::from(k.as_str()),
                map[k.as_str()]
            )
        })
        .collect();
    format!("{{{}}}", members.join(","))
}

/// How an agent that advertises `mcpCapabilities.http` reaches the injected
/// server: an `http` entry on 127.0.0.1 with the token as a bearer token.
#[derive(Debug, Clone)]
pub struct HttpEntry {
    pub url: String,
}

impl HttpEntry {
    /// The `McpServerHttp` JSON for `token`.
    pub fn to_json(&self, token: &str) -> String {
        serde_json::json!({
            "type": "http",
            "name": SERVER_NAME,
            "url": self.url,
            "headers": [{ "name": "Authorization", "value": format!("Bearer {token}") }],
        })
        .to_string()
    }
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Whether `servers` (the raw `mcpServers` array) already holds an entry of
/// ours: one passing our token variable, or named like ours.
pub fn has_our_entry(servers: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Env {
        #[serde(default)]
        name: String,
    }
    #[derive(serde::Deserialize)]
    struct Server {
        #[serde(default)]
        name: String,
        #[serde(default)]
        env: Option<Vec<Env>>,
    }
    let Ok(servers) = serde_json::from_str::<Vec<Server>>(servers.get()) else {
        return false;
    };
    servers
        .iter()
        .any(|s| s.name == SERVER_NAME || s.env.iter().flatten().any(|e| e.name == TOKEN_ENV))
}

/// Why no entry was injected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// The message or its params are not objects, or `mcpServers` is not an array.
    Unreadable,
    /// The request already has an entry of ours.
    AlreadyPresent,
}

/// Appends `entry` (JSON text) to `params.mcpServers` of the request
/// `message`, creating the array when it is absent or `null`.
pub fn inject(message: &[u8], entry: &str) -> Result<Vec<u8>, Skip> {
    let text = std::str::from_utf8(message).map_err(|_| Skip::Unreadable)?;
    let raw: &RawValue = serde_json::from_str(text).map_err(|_| Skip::Unreadable)?;
    let mut top = RawObject::parse(raw).map_err(|_| Skip::Unreadable)?;
    let mut params = RawObject::parse(top.get_raw("params").ok_or(Skip::Unreadable)?)
        .map_err(|_| Skip::Unreadable)?;
    let servers = match params.get_raw("mcpServers") {
        Some(raw) if raw.get().trim() != "null" => {
            if has_our_entry(raw) {
                return Err(Skip::AlreadyPresent);
            }
            let items: Vec<&RawValue> =
                serde_json::from_str(raw.get()).map_err(|_| Skip::Unreadable)?;
            let mut out = String::from("[");
            for item in items {
                out.push_str(item.get());
                out.push(',');
            }
            out.push_str(entry);
            out.push(']');
            out
        }
        _ => format!("[{entry}]"),
    };
    params.set("mcpServers", servers);
    top.set("params", params.to_json());
    Ok(top.to_json().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    const ENTRY: &str = r#"{"name":"acp-lsp","command":"/bin/acp-lsp","args":[],"env":[]}"#;

    #[test]
    fn appends_to_existing_servers_and_keeps_other_bytes() {
        let message = br#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"x" ,"command":"y","args":[],"env":[]}],"_meta":{"n":1.50}}}"#;
        let out = String::from_utf8(inject(message, ENTRY).unwrap()).unwrap();
        assert_eq!(
            out,
            r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"x" ,"command":"y","args":[],"env":[]},{"name":"acp-lsp","command":"/bin/acp-lsp","args":[],"env":[]}],"_meta":{"n":1.50}}}"#
        );
    }

    #[test]
    fn creates_missing_or_null_servers() {
        for params in [
            r#"{"sessionId":"s"}"#,
            r#"{"sessionId":"s","mcpServers":null}"#,
        ] {
            let message = format!(r#"{{"id":1,"method":"session/resume","params":{params}}}"#);
            let out: Value =
                serde_json::from_slice(&inject(message.as_bytes(), ENTRY).unwrap()).unwrap();
            assert_eq!(out["params"]["mcpServers"][0]["name"], json!("acp-lsp"));
            assert_eq!(out["params"]["sessionId"], json!("s"));
        }
    }

    #[test]
    fn an_entry_of_ours_is_not_added_twice() {
        let entry = StdioEntry {
            command: "/bin/acp-lsp".into(),
            socket: "/tmp/s".into(),
        }
        .to_json("t", 1);
        let once = inject(
            br#"{"id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}"#,
            &entry,
        )
        .unwrap();
        assert_eq!(inject(&once, &entry), Err(Skip::AlreadyPresent));
        let renamed = br#"{"id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"mine","command":"c","env":[{"name":"ACP_LSP_MCP_TOKEN","value":"v"}]}]}}"#;
        assert_eq!(inject(renamed, &entry), Err(Skip::AlreadyPresent));
    }

    #[test]
    fn the_stdio_entry_carries_the_token_in_env_only() {
        let entry: Value = serde_json::from_str(
            &StdioEntry {
                command: "/usr/bin/acp-lsp".into(),
                socket: "/tmp/d/mcp.sock".into(),
            }
            .to_json("secret", 1),
        )
        .unwrap();
        assert_eq!(
            entry,
            json!({"name":"acp-lsp","command":"/usr/bin/acp-lsp","args":["mcp","--connect","/tmp/d/mcp.sock"],
                   "env":[{"name":"ACP_LSP_MCP_TOKEN","value":"secret"}]})
        );
        assert!(!entry["args"].to_string().contains("secret"));
    }

    #[test]
    fn the_v2_stdio_entry_is_tagged_and_the_v1_one_is_not() {
        let stdio = StdioEntry {
            command: "/usr/bin/acp-lsp".into(),
            socket: "/tmp/d/mcp.sock".into(),
        };
        let v1: Value = serde_json::from_str(&stdio.to_json("k", 1)).unwrap();
        assert!(v1.get("type").is_none(), "{v1}");
        let v2_text = stdio.to_json("k", 2);
        assert!(v2_text.starts_with(r#"{"type":"stdio","#), "{v2_text}");
        let v2: Value = serde_json::from_str(&v2_text).unwrap();
        let mut untagged = v2.clone();
        untagged.as_object_mut().unwrap().remove("type");
        assert_eq!(untagged, v1, "v2 adds only the tag");
        let acp: Value =
            serde_json::from_str(&acp_entry_json("550e8400-e29b-41d4-a716-446655440000")).unwrap();
        assert_eq!(
            acp,
            json!({"type":"acp","name":"acp-lsp","serverId":"550e8400-e29b-41d4-a716-446655440000"})
        );
    }

    #[test]
    fn unreadable_messages_are_left_alone() {
        assert_eq!(inject(b"nope", ENTRY), Err(Skip::Unreadable));
        assert_eq!(
            inject(
                br#"{"id":1,"method":"session/new","params":{"mcpServers":{}}}"#,
                ENTRY
            ),
            Err(Skip::Unreadable)
        );
    }
}
