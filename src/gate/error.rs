//! Gate errors, and the one place that maps them to JSON-RPC error objects.

use super::confine::ConfineError;
use super::methods::Refusal;
use crate::jsonrpc::ErrorObject;
use serde_json::value::RawValue;
use serde_json::{json, Value};

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

/// Codes a server may use that mean something else in ACP, and so never reach
/// the agent as they are: -32000 (ACP: auth required), -32002 (ACP: resource
/// not found; LSP: server not initialized).
pub const COLLIDING_CODES: &[i64] = &[-32000, -32002];

/// Everything that can end an `lsp/servers` or `lsp/request` without a result.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("invalid params: {0}")]
    InvalidParams(String),
    #[error("params are larger than {limit} bytes")]
    ParamsTooLarge { limit: usize },
    #[error("params are nested deeper than {limit} levels")]
    TooDeep { limit: usize },
    /// One object of the params holds `key` twice: parsers disagree on which
    /// one counts, so what was checked might not be what a server reads.
    #[error("params repeat the key {key:?} in one object")]
    DuplicateKeys { key: String },
    #[error("unknown session {0:?}")]
    UnknownSession(String),
    #[error("unknown server {0:?}")]
    UnknownServer(String),
    #[error("server {0:?} does not serve this session")]
    ForeignServer(String),
    #[error("{method} is not forwarded: {}", refusal_text(*refusal))]
    Refused { method: String, refusal: Refusal },
    #[error(
        "workspace/executeCommand {command} is not forwarded: {}",
        refusal_text(Refusal::CommandNotAllowed)
    )]
    CommandNotAllowed { command: String },
    #[error("{0}")]
    Confined(#[from] ConfineError),
    #[error("server {server_id:?} is {state}")]
    ServerNotReady { server_id: String, state: String },
    #[error("server {server_id:?} did not become ready within {waited_ms} ms (it is {state})")]
    ReadyTimeout {
        server_id: String,
        state: String,
        waited_ms: u64,
    },
    #[error("server {server_id:?} has failed: {detail}")]
    ServerFailed { server_id: String, detail: String },
    #[error("server {server_id:?} exited before answering")]
    ServerExited { server_id: String },
    #[error("the language server answered with an error")]
    ServerError { lsp_error: Box<RawValue> },
    #[error("the server's response of {declared} bytes is over the frame limit")]
    ResponseTooLarge { declared: usize },
    #[error("no response within the {ms} ms deadline")]
    DeadlineExceeded { ms: u64 },
    #[error("request cancelled")]
    Cancelled,
    #[error("the document changed while the request was in flight")]
    ContentModified,
    #[error("internal error: {0}")]
    Internal(String),
}

fn refusal_text(refusal: Refusal) -> &'static str {
    match refusal {
        Refusal::Lifecycle => "the proxy owns the server's lifecycle",
        Refusal::DocumentSync => "the proxy keeps documents in sync with the disk",
        Refusal::Notification => "lsp/request carries requests, not notifications",
        Refusal::ServerToClient => "it is a server-to-client method",
        Refusal::CommandNotAllowed => "the command is not on the server's executeCommand allowlist",
    }
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
            | GateError::UnknownServer(_)
            | GateError::ForeignServer(_)
            | GateError::Confined(_)
            | GateError::ServerNotReady { .. }
            | GateError::ReadyTimeout { .. } => INVALID_PARAMS,
            GateError::Refused { .. } | GateError::CommandNotAllowed { .. } => METHOD_NOT_FOUND,
            GateError::ServerError { lsp_error } => {
                let code = server_error_code(lsp_error);
                match code {
                    Some(code) if !COLLIDING_CODES.contains(&code) => code,
                    _ => INTERNAL_ERROR,
                }
            }
            GateError::Cancelled => REQUEST_CANCELLED,
            GateError::ContentModified => CONTENT_MODIFIED,
            GateError::ServerFailed { .. }
            | GateError::ServerExited { .. }
            | GateError::ResponseTooLarge { .. }
            | GateError::DeadlineExceeded { .. }
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
            GateError::UnknownServer(_) => "unknown_server",
            GateError::ForeignServer(_) => "foreign_server",
            GateError::Refused { refusal, .. } => refusal.reason(),
            GateError::CommandNotAllowed { .. } => Refusal::CommandNotAllowed.reason(),
            GateError::Confined(e) => e.reason(),
            GateError::ServerNotReady { state, .. } => match state.as_str() {
                "restarting" => "server_restarting",
                "stopped" => "server_stopped",
                _ => "server_starting",
            },
            GateError::ReadyTimeout { .. } => "not_ready",
            GateError::ServerFailed { .. } => "server_failed",
            GateError::ServerExited { .. } => "server_exited",
            GateError::ServerError { .. } => "server_error",
            GateError::ResponseTooLarge { .. } => "response_too_large",
            GateError::DeadlineExceeded { .. } => "deadline_exceeded",
            GateError::Cancelled => "cancelled",
            GateError::ContentModified => "content_modified",
            GateError::Internal(_) => "internal",
        }
    }

    /// Whether the same request may succeed if sent again later.
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            GateError::ServerNotReady { .. }
                | GateError::ReadyTimeout { .. }
                | GateError::ServerExited { .. }
                | GateError::DeadlineExceeded { .. }
                | GateError::ContentModified
        )
    }

    /// The error object sent to the agent. `method` is the LSP method concerned, when known.
    pub fn to_error_object(&self, method: Option<&str>) -> ErrorObject {
        let mut data = json!({ "reason": self.reason() });
        let extra = data.as_object_mut().expect("BUG: json! object literal");
        if let Some(method) = method {
            extra.insert("method".into(), json!(method));
        }
        if self.retryable() {
            extra.insert("retryable".into(), json!(true));
        }
        match self {
            GateError::Refused { method, .. } => {
                extra.insert("method".into(), json!(method));
            }
            GateError::CommandNotAllowed { command } => {
                extra.insert("method".into(), json!("workspace/executeCommand"));
                extra.insert("command".into(), json!(command));
            }
            GateError::Confined(e) => {
                extra.insert("uri".into(), json!(e.uri()));
            }
            GateError::DuplicateKeys { key } => {
                extra.insert("key".into(), json!(key));
            }
            GateError::UnknownServer(id)
            | GateError::ForeignServer(id)
            | GateError::ServerNotReady { server_id: id, .. }
            | GateError::ReadyTimeout { server_id: id, .. }
            | GateError::ServerFailed { server_id: id, .. }
            | GateError::ServerExited { server_id: id } => {
                extra.insert("serverId".into(), json!(id));
            }
            GateError::ServerError { lsp_error } => {
                let original: Value = serde_json::from_str(lsp_error.get()).unwrap_or(Value::Null);
                extra.insert("lspError".into(), original);
            }
            _ => {}
        }
        if let GateError::ServerNotReady { state, .. } | GateError::ReadyTimeout { state, .. } =
            self
        {
            extra.insert("state".into(), json!(state));
        }
        // The same bytes whatever map serde_json was built with (a dependency
        // may turn on `preserve_order`): agents and recordings compare them.
        sort_keys(&mut data);
        let message = match self {
            GateError::ServerError { lsp_error } => {
                server_error_message(lsp_error).unwrap_or_else(|| self.to_string())
            }
            _ => self.to_string(),
        };
        ErrorObject {
            code: self.code(),
            message,
            data: Some(data),
        }
    }
}

fn sort_keys(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.sort_keys();
            map.values_mut().for_each(sort_keys);
        }
        Value::Array(items) => items.iter_mut().for_each(sort_keys),
        _ => {}
    }
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

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    #[test]
    fn server_errors_keep_standard_codes_and_wrap_colliding_ones() {
        let modified = GateError::ServerError {
            lsp_error: raw(r#"{"code":-32801,"message":"content modified"}"#),
        };
        let obj = modified.to_error_object(Some("textDocument/hover"));
        assert_eq!(obj.code, -32801);
        assert_eq!(obj.message, "content modified");
        let data = obj.data.unwrap();
        assert_eq!(data["reason"], "server_error");
        assert_eq!(data["lspError"]["code"], -32801);

        let not_initialized = GateError::ServerError {
            lsp_error: raw(r#"{"code":-32002,"message":"not initialized"}"#),
        };
        let obj = not_initialized.to_error_object(None);
        assert_eq!(obj.code, INTERNAL_ERROR);
        assert_eq!(obj.data.unwrap()["lspError"]["code"], -32002);
    }

    #[test]
    fn a_refused_command_names_the_method_and_the_command_apart() {
        let e = GateError::CommandNotAllowed {
            command: "pyright.organizeimports".into(),
        };
        let obj = e.to_error_object(None);
        assert_eq!(obj.code, -32601);
        let data = obj.data.unwrap();
        assert_eq!(data["reason"], "command_not_allowed");
        assert_eq!(data["method"], "workspace/executeCommand");
        assert_eq!(data["command"], "pyright.organizeimports");
    }

    #[test]
    fn refusals_name_the_method_and_reason() {
        let e = GateError::Refused {
            method: "textDocument/didOpen".into(),
            refusal: Refusal::DocumentSync,
        };
        let obj = e.to_error_object(None);
        assert_eq!(obj.code, METHOD_NOT_FOUND);
        let data = obj.data.unwrap();
        assert_eq!(data["reason"], "document_sync_method");
        assert_eq!(data["method"], "textDocument/didOpen");
        assert!(obj.message.contains("textDocument/didOpen"));
    }

    #[test]
    fn retryable_errors_say_so() {
        let e = GateError::ServerExited {
            server_id: "s".into(),
        };
        let data = e.to_error_object(None).data.unwrap();
        assert_eq!(data["reason"], "server_exited");
        assert_eq!(data["retryable"], true);
        assert_eq!(data["serverId"], "s");
    }
}
