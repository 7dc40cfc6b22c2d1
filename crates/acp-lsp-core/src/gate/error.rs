//! Gate errors, and the one place that maps them to JSON-RPC error objects.

use super::confine::ConfineError;
use super::entry::{ServerState, ServerSummary, State};
use super::ids::ServerId;
use super::methods::Refusal;
use crate::jsonrpc::ErrorObject;
use serde::Serialize;
use serde_json::value::RawValue;

/// JSON-RPC: invalid params.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: method not found.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: internal error.
pub const INTERNAL_ERROR: i64 = -32603;
/// JSON-RPC: parse error.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: invalid request.
pub const INVALID_REQUEST: i64 = -32600;
/// ACP and LSP: request cancelled.
pub const REQUEST_CANCELLED: i64 = -32800;
/// LSP: content modified.
pub const CONTENT_MODIFIED: i64 = -32801;
/// LSP's ServerCancelled (3.17): the server dropped the request and it may be asked again.
pub const SERVER_CANCELLED: i64 = -32802;

/// The codes LSP reserves for itself (-32899..=-32800: RequestCancelled,
/// ContentModified, ServerCancelled, RequestFailed). A server error with one
/// of them keeps it as the top-level `error.code`; any other server code is
/// reported as -32603. The RFD puts the server's own `code` in `error.data`
/// and says nothing of the top level, which is the ACP hop's: there every
/// other code already means something that is false of a server's error
/// (-32601: the client has no `lsp/request`; -32602: the RFD's own three
/// reasons; -32000 auth required; -32002 resource not found), while LSP's
/// range means in ACP what it means in LSP (-32800: cancelled) or nothing
/// (rfd/lsp-over-acp.md, section 10).
pub(crate) const LSP_RESERVED_CODES: std::ops::RangeInclusive<i64> = -32899..=-32800;

/// Everything that can end an `lsp/servers` or `lsp/request` without a result.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The params are not what the method takes (`invalid_params`).
    #[error("invalid params: {0}")]
    InvalidParams(String),
    /// The params are over [`Limits::max_intercepted_params`](crate::jsonrpc::Limits::max_intercepted_params)
    /// (`params_too_large`).
    #[error("params are larger than {limit} bytes")]
    ParamsTooLarge {
        /// The limit, bytes.
        limit: usize,
    },
    /// The params nest deeper than [`Limits::max_depth`](crate::jsonrpc::Limits::max_depth)
    /// (`params_too_deep`).
    #[error("params are nested deeper than {limit} levels")]
    TooDeep {
        /// The limit, levels.
        limit: usize,
    },
    /// One object of the params holds `key` twice: parsers disagree on which
    /// one counts, so what was checked might not be what a server reads.
    #[error("params repeat the key {key:?} in one object")]
    DuplicateKeys {
        /// The key, decoded.
        key: String,
    },
    /// No open session has this id (`unknown_session`).
    #[error("unknown session {0:?}")]
    UnknownSession(String),
    /// No server with that id is listed for the session (a server of another
    /// session is unknown too: sessions do not learn of each other).
    #[error("no server {server_id:?} is listed for this session; ask lsp/servers again")]
    UnknownServer {
        /// The id the request named.
        server_id: ServerId,
        /// The session's servers, filled in by the gate.
        servers: Vec<ServerSummary>,
    },
    /// The method is not in `availableMethods` (for this server).
    #[error("{method} is not forwarded: {}", refusal_text(*refusal))]
    MethodNotForwarded {
        /// The LSP method.
        method: String,
        /// Why it is not (`data.category`).
        refusal: Refusal,
        /// The methods that are, filled in by the gate.
        available: Vec<String>,
    },
    /// `workspace/executeCommand` with a command the server's allowlist
    /// does not hold (`command_not_allowed`).
    #[error("workspace/executeCommand {command} is not forwarded: the command is not on the server's executeCommand allowlist")]
    CommandNotAllowed {
        /// The command asked for.
        command: String,
        /// The server's allowlist.
        allowed: Vec<String>,
    },
    /// A URI of the params is not confined to the session
    /// (`uri_outside_roots`, `uri_scheme_not_allowed`, `invalid_uri`).
    #[error("{0}")]
    Confined(#[from] ConfineError),
    /// The server is listed but not `running`.
    #[error("{} is {} ({}){}", server.label(), server.status.wire().as_str(), server.status.as_str(), not_running_detail(server.waited_ms, server.last_error.as_deref()))]
    ServerNotRunning {
        /// Which server, and how it stands.
        server: Box<NotRunning>,
        /// The session's servers, filled in by the gate.
        servers: Vec<ServerSummary>,
    },
    /// `server` names it: "rust-analyzer at /path/to/root".
    /// The server exited before answering (`server_exited`, retryable).
    #[error("{server} exited before answering")]
    ServerExited {
        /// Its id.
        server_id: ServerId,
        /// "rust-analyzer at /path/to/root".
        server: String,
    },
    /// The server answered with an error object (`server_error`; the
    /// server's `code`, `message` and `data` go to the agent verbatim).
    #[error("{}", server_error_message(lsp_error).unwrap_or_else(|| "the language server answered with an error".into()))]
    ServerError {
        /// The server's error object, raw.
        lsp_error: Box<RawValue>,
    },
    /// The server's response was over the frame limit (`response_too_large`).
    #[error("the server's response of {declared} bytes is over the frame limit")]
    ResponseTooLarge {
        /// Its `Content-Length`.
        declared: usize,
    },
    /// No answer within the route's deadline (`deadline_exceeded`, retryable).
    #[error("no response within the {ms} ms deadline")]
    DeadlineExceeded {
        /// The deadline, ms.
        ms: u64,
    },
    /// The agent cancelled the request (-32800 `cancelled`).
    #[error("request cancelled")]
    Cancelled,
    /// A document the request names changed while it was in flight
    /// (-32801 `content_modified`, retryable).
    #[error("the document changed while the request was in flight")]
    ContentModified,
    /// Too many `lsp/request`s in flight (`overloaded`, retryable).
    #[error("too many lsp/requests in flight ({scope}: at most {limit}); retry later")]
    Overloaded {
        /// Which quota: `session` or `total`.
        scope: &'static str,
        /// Its limit.
        limit: usize,
    },
    /// Starting the server would pass the host's cap on running servers
    /// (`max_running_servers`) and no running server could make room.
    #[error("{server} cannot start: {limit} servers are running (max_running_servers) and none of them is a nested root's server that could be stopped")]
    ServerLimit {
        /// The server that could not start.
        server_id: String,
        /// "pyright at /path/to/root".
        server: String,
        /// `max_running_servers`.
        limit: usize,
    },
    /// A bug, or a host's failure with nothing more specific to say
    /// (-32603 `internal`).
    #[error("internal error: {0}")]
    Internal(String),
    /// `proxy --shared`: the daemon went away (or could not be reached) while
    /// the request was in flight; the proxy restarts it and re-attaches.
    #[error("the shared acp-lsp daemon is unavailable: {0}")]
    DaemonUnavailable(String),
}

/// Which server is not running, and how.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct NotRunning {
    /// Its id.
    pub server_id: ServerId,
    /// Its name (`rust-analyzer`).
    pub name: String,
    /// Its root.
    pub workspace_path: String,
    /// Its state (the wire's `state` is [`ServerState::wire`]).
    pub status: ServerState,
    /// How long the request waited (`waitUntilReady`), if it did.
    pub waited_ms: Option<u64>,
    /// Why it last failed, if it did.
    pub last_error: Option<String>,
}

impl NotRunning {
    fn label(&self) -> String {
        format!("{} at {}", self.name, self.workspace_path)
    }
}

fn not_running_detail(waited_ms: Option<u64>, last_error: Option<&str>) -> String {
    let mut text = String::new();
    if let Some(ms) = waited_ms {
        text.push_str(&format!(" after waiting {ms} ms"));
    }
    if let Some(error) = last_error.and_then(|e| e.lines().next()) {
        text.push_str(&format!(": {error}"));
    }
    text
}

fn refusal_text(refusal: Refusal) -> &'static str {
    match refusal {
        Refusal::Lifecycle => "the proxy owns the server's lifecycle",
        Refusal::DocumentSync => "the proxy keeps documents in sync with the disk",
        Refusal::Notification => "lsp/request carries requests, not notifications",
        Refusal::ServerToClient => "it is a server-to-client method",
        Refusal::FileLifecycle => "the client alone sends file lifecycle requests",
        Refusal::EditorInteraction => "it serves an editor's typing, not an agent",
        Refusal::NotListed => "it is not in availableMethods",
    }
}

/// The `error.data` members, in one struct so their bytes do not depend on
/// serde_json's map implementation. Empty lists and `None`s are left out.
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct ErrorData<'a> {
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    category: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uri: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    server_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<State>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<ServerState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    waited_ms: Option<u64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    retryable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    servers: Option<&'a [ServerSummary]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    available_methods: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    allowed_commands: Option<&'a [String]>,
    /// `duplicate_keys`: the key that appears twice.
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a str>,
    /// `overloaded`: which quota (`session`, `total`) and its limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    scope: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<usize>,
}

impl GateError {
    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        match self {
            GateError::InvalidParams(_)
            | GateError::ParamsTooLarge { .. }
            | GateError::TooDeep { .. }
            | GateError::DuplicateKeys { .. }
            | GateError::UnknownSession(_)
            | GateError::UnknownServer { .. }
            | GateError::MethodNotForwarded { .. }
            | GateError::CommandNotAllowed { .. }
            | GateError::Confined(_)
            | GateError::ServerNotRunning { .. } => INVALID_PARAMS,
            GateError::ServerError { lsp_error } => {
                let code = server_error_code(lsp_error);
                match code {
                    Some(code) if LSP_RESERVED_CODES.contains(&code) => code,
                    _ => INTERNAL_ERROR,
                }
            }
            GateError::Cancelled => REQUEST_CANCELLED,
            GateError::ContentModified => CONTENT_MODIFIED,
            GateError::ServerExited { .. }
            | GateError::ResponseTooLarge { .. }
            | GateError::DeadlineExceeded { .. }
            | GateError::Overloaded { .. }
            | GateError::ServerLimit { .. }
            | GateError::DaemonUnavailable(_)
            | GateError::Internal(_) => INTERNAL_ERROR,
        }
    }

    /// The machine-readable `data.reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            GateError::InvalidParams(_) => "invalid_params",
            GateError::ParamsTooLarge { .. } => "params_too_large",
            GateError::TooDeep { .. } => "params_too_deep",
            GateError::DuplicateKeys { .. } => "duplicate_keys",
            GateError::UnknownSession(_) => "unknown_session",
            GateError::UnknownServer { .. } => "unknown_server",
            GateError::MethodNotForwarded { .. } => "method_not_forwarded",
            GateError::CommandNotAllowed { .. } => "command_not_allowed",
            GateError::Confined(e) => e.reason(),
            GateError::ServerNotRunning { .. } => "server_not_running",
            GateError::ServerExited { .. } => "server_exited",
            // The server's own ContentModified: the same word as ours.
            GateError::ServerError { lsp_error }
                if server_error_code(lsp_error) == Some(CONTENT_MODIFIED) =>
            {
                "content_modified"
            }
            GateError::ServerError { .. } => "server_error",
            GateError::ResponseTooLarge { .. } => "response_too_large",
            GateError::DeadlineExceeded { .. } => "deadline_exceeded",
            GateError::Cancelled => "cancelled",
            GateError::ContentModified => "content_modified",
            GateError::Overloaded { .. } => "overloaded",
            GateError::ServerLimit { .. } => "server_limit",
            GateError::Internal(_) => "internal",
            GateError::DaemonUnavailable(_) => "daemon_unavailable",
        }
    }

    /// Whether the same request may succeed if sent again later.
    pub fn retryable(&self) -> bool {
        match self {
            GateError::ServerNotRunning { server, .. } => server.status.will_run(),
            // ContentModified, ServerCancelled: the server dropped the request
            // because the workspace moved; asked again, it answers.
            GateError::ServerError { lsp_error } => matches!(
                server_error_code(lsp_error),
                Some(CONTENT_MODIFIED | SERVER_CANCELLED)
            ),
            GateError::ServerExited { .. }
            | GateError::DeadlineExceeded { .. }
            | GateError::ContentModified
            | GateError::DaemonUnavailable(_)
            | GateError::Overloaded { .. } => true,
            _ => false,
        }
    }

    /// Whether the gate should attach the session's server list (the RFD:
    /// these errors SHOULD include it).
    pub(crate) fn wants_servers(&self) -> bool {
        matches!(
            self,
            GateError::UnknownServer { .. } | GateError::ServerNotRunning { .. }
        )
    }

    /// Attaches the session's server list to the errors that carry one.
    pub(crate) fn with_servers(mut self, list: Vec<ServerSummary>) -> GateError {
        if let GateError::UnknownServer { servers, .. }
        | GateError::ServerNotRunning { servers, .. } = &mut self
        {
            *servers = list;
        }
        self
    }

    /// The error object sent to the agent. `method` is the LSP method concerned, when known.
    pub fn to_error_object(&self, method: Option<&str>) -> ErrorObject {
        let mut data = ErrorData {
            reason: self.reason(),
            method,
            retryable: self.retryable(),
            ..ErrorData::default()
        };
        match self {
            GateError::MethodNotForwarded {
                method,
                refusal,
                available,
            } => {
                data.method = Some(method);
                data.category = Some(refusal.category());
                data.available_methods = Some(available);
            }
            GateError::CommandNotAllowed { command, allowed } => {
                data.method = Some(super::methods::EXECUTE_COMMAND);
                data.command = Some(command);
                data.allowed_commands = Some(allowed);
            }
            GateError::Confined(e) => data.uri = Some(e.uri()),
            GateError::UnknownServer { server_id, servers } => {
                data.server_id = Some(server_id);
                data.servers = Some(servers);
            }
            GateError::ServerNotRunning { server, servers } => {
                data.server_id = Some(&server.server_id);
                data.state = Some(server.status.wire());
                data.status = Some(server.status);
                data.waited_ms = server.waited_ms;
                data.last_error = server.last_error.as_deref();
                data.servers = Some(servers);
            }
            GateError::DuplicateKeys { key } => {
                data.key = Some(key);
            }
            GateError::ServerExited { server_id, .. } => data.server_id = Some(server_id),
            GateError::Overloaded { scope, limit } => {
                data.scope = Some(scope);
                data.limit = Some(*limit);
            }
            GateError::ServerLimit {
                server_id, limit, ..
            } => {
                data.server_id = Some(server_id);
                data.limit = Some(*limit);
            }
            _ => {}
        }
        let mut text = serde_json::to_string(&data).expect("BUG: error data always serializes");
        if let GateError::ServerError { lsp_error } = self {
            // The RFD: the server's `code`, `message` and `data`, verbatim,
            // spliced as raw bytes beside our `reason`.
            text.pop();
            for (key, value) in server_error_members(lsp_error) {
                text.push_str(",\"");
                text.push_str(key);
                text.push_str("\":");
                text.push_str(value.get());
            }
            text.push('}');
        }
        ErrorObject {
            code: self.code(),
            message: self.to_string(),
            data: RawValue::from_string(text).ok(),
        }
    }
}

/// The `code`, `message` and `data` members of a server's error object, raw.
fn server_error_members(lsp_error: &RawValue) -> Vec<(&'static str, &RawValue)> {
    #[derive(serde::Deserialize)]
    struct Members<'a> {
        #[serde(borrow, default)]
        code: Option<&'a RawValue>,
        #[serde(borrow, default)]
        message: Option<&'a RawValue>,
        #[serde(borrow, default)]
        data: Option<&'a RawValue>,
    }
    let Ok(members) = serde_json::from_str::<Members>(lsp_error.get()) else {
        return Vec::new();
    };
    [
        ("code", members.code),
        ("message", members.message),
        ("data", members.data),
    ]
    .into_iter()
    .filter_map(|(key, value)| value.map(|v| (key, v)))
    .collect()
}

fn server_error_code(lsp_error: &RawValue) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    serde_json::from_str::<Code>(lsp_error.get())
        .ok()
        .map(|c| c.code)
}

fn server_error_message(lsp_error: &RawValue) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Message {
        message: String,
    }
    serde_json::from_str::<Message>(lsp_error.get())
        .ok()
        .map(|m| m.message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    fn data(obj: &ErrorObject) -> Value {
        serde_json::from_str(obj.data.as_ref().unwrap().get()).unwrap()
    }

    #[test]
    fn server_errors_carry_code_message_and_data_verbatim() {
        let modified = GateError::ServerError {
            lsp_error: raw(
                r#"{"code":-32801,"message":"content modified","data":{"z":1,"a":[2]}}"#,
            ),
        };
        let obj = modified.to_error_object(Some("textDocument/hover"));
        assert_eq!(obj.code, -32801);
        assert_eq!(obj.message, "content modified");
        let text = obj.data.as_ref().unwrap().get();
        assert!(
            text.ends_with(
                r#","code":-32801,"message":"content modified","data":{"z":1,"a":[2]}}"#
            ),
            "{text}"
        );
        // The server's own ContentModified reads as ours, and may be retried.
        assert_eq!(data(&obj)["reason"], "content_modified");
        assert_eq!(data(&obj)["retryable"], true);

        let not_initialized = GateError::ServerError {
            lsp_error: raw(r#"{"code":-32002,"message":"not initialized"}"#),
        };
        let obj = not_initialized.to_error_object(None);
        assert_eq!(obj.code, INTERNAL_ERROR);
        assert_eq!(data(&obj)["code"], -32002);
        assert!(data(&obj).get("data").is_none());
    }

    #[test]
    fn a_server_code_with_an_acp_meaning_never_reaches_the_top_level() {
        // pyright's MethodNotFound must not read as "the client has no
        // lsp/request", nor a server's InvalidParams as one of the RFD's reasons.
        for (server_code, top) in [
            (-32601, INTERNAL_ERROR),
            (-32602, INTERNAL_ERROR),
            (-32600, INTERNAL_ERROR),
            (-32700, INTERNAL_ERROR),
            (-32603, INTERNAL_ERROR),
            (-32000, INTERNAL_ERROR),
            (-32001, INTERNAL_ERROR),
            (-32002, INTERNAL_ERROR),
            (-32099, INTERNAL_ERROR),
            (1, INTERNAL_ERROR),
            (-1, INTERNAL_ERROR),
            (-32800, -32800),
            (-32801, -32801),
            (-32802, -32802),
            (-32803, -32803),
        ] {
            let e = GateError::ServerError {
                lsp_error: raw(&format!(
                    r#"{{"code":{server_code},"message":"m","data":[1]}}"#
                )),
            };
            let obj = e.to_error_object(Some("textDocument/hover"));
            assert_eq!(obj.code, top, "server code {server_code}");
            let data = data(&obj);
            assert_eq!(data["code"], server_code, "verbatim in data");
            assert_eq!(data["message"], "m");
            assert_eq!(data["data"], serde_json::json!([1]));
        }
    }

    #[test]
    fn a_refused_command_names_the_method_and_the_command_apart() {
        let e = GateError::CommandNotAllowed {
            command: "pyright.organizeimports".into(),
            allowed: vec![],
        };
        let obj = e.to_error_object(None);
        assert_eq!(obj.code, INVALID_PARAMS);
        let data = data(&obj);
        assert_eq!(data["reason"], "command_not_allowed");
        assert_eq!(data["method"], "workspace/executeCommand");
        assert_eq!(data["command"], "pyright.organizeimports");
    }

    #[test]
    fn methods_not_forwarded_name_the_method_category_and_the_list() {
        let e = GateError::MethodNotForwarded {
            method: "textDocument/didOpen".into(),
            refusal: Refusal::DocumentSync,
            available: vec!["textDocument/hover".into()],
        };
        let obj = e.to_error_object(None);
        assert_eq!(obj.code, INVALID_PARAMS);
        let data = data(&obj);
        assert_eq!(data["reason"], "method_not_forwarded");
        assert_eq!(data["category"], "document_sync");
        assert_eq!(data["method"], "textDocument/didOpen");
        assert_eq!(data["availableMethods"][0], "textDocument/hover");
        assert!(obj.message.contains("textDocument/didOpen"));
    }

    #[test]
    fn a_server_not_running_carries_its_state_and_names_itself() {
        let e = GateError::ServerNotRunning {
            server: Box::new(NotRunning {
                server_id: "s".into(),
                name: "rust-analyzer".into(),
                workspace_path: "/ws".into(),
                status: ServerState::Indexing,
                waited_ms: None,
                last_error: None,
            }),
            servers: vec![],
        };
        let obj = e.to_error_object(None);
        assert_eq!(obj.code, INVALID_PARAMS);
        let data = data(&obj);
        assert_eq!(data["reason"], "server_not_running");
        assert_eq!(data["state"], "starting");
        assert_eq!(data["status"], "indexing");
        assert_eq!(data["retryable"], true);
        assert_eq!(data["servers"], serde_json::json!([]));
        assert!(
            obj.message.contains("rust-analyzer at /ws"),
            "{}",
            obj.message
        );
    }

    #[test]
    fn retryable_errors_say_so() {
        let e = GateError::ServerExited {
            server_id: "s".into(),
            server: "clangd at /p".into(),
        };
        let object = e.to_error_object(None);
        assert_eq!(object.message, "clangd at /p exited before answering");
        let data = data(&object);
        assert_eq!(data["reason"], "server_exited");
        assert_eq!(data["retryable"], true);
        assert_eq!(data["serverId"], "s");
    }
}
