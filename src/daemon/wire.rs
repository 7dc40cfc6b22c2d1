//! The daemon socket's protocol: one JSON message per line. A client sends
//! [`Request`]s, the daemon answers the ones that need it with a [`Reply`]
//! of the same id. Payloads (LSP params, results, capabilities) are raw
//! JSON, carried byte for byte; errors are typed ([`WireError`]) and map
//! back to the [`GateError`] the daemon's registry returned.

use crate::gate::{GateError, NotRunning, ServerEntry, ServerId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::path::PathBuf;

/// One message from a client.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    pub op: Op,
}

/// What a client asks. `open`, `close`, `written` and `cancel` get no reply
/// and are handled in the order they arrive (a confirmed write is taken in
/// before any later request); the rest are answered, each on its own task.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// The first message of a proxy: it becomes a client.
    Hello {
        pid: u32,
        version: String,
    },
    /// The first (and only) message of `acp-lsp daemon status`.
    Status,
    Open {
        session: String,
        roots: Vec<PathBuf>,
    },
    Close {
        session: String,
    },
    Written {
        session: String,
        path: PathBuf,
        text: String,
    },
    Servers {
        session: String,
    },
    Route {
        session: String,
        server_id: String,
    },
    Request(Box<ForwardedRequest>),
    /// Cancels the request with id `target` (its reply still comes).
    Cancel {
        target: u64,
    },
    /// `lsp/servers` with `_meta.startAll`: starts every server of the
    /// session (within the daemon's cap); answered with `null`.
    StartAll {
        session: String,
    },
    /// `lsp/servers` without `_meta.startAll`: starts what the listing
    /// shows, within the daemon's cap; answered with `null`.
    StartShown {
        session: String,
    },
    /// Starts a server of the session if need be and waits (up to
    /// `wait_ms`) for it to settle; answered with `null`.
    EnsureReady {
        session: String,
        server_id: String,
        wait_ms: u64,
    },
    Diagnostics {
        session: String,
        documents: Vec<(String, PathBuf)>,
        wait_ms: u64,
    },
}

/// An `lsp/request` the gate admitted, as `HostCall` carries it.
#[derive(Debug, Serialize, Deserialize)]
pub struct ForwardedRequest {
    pub session: String,
    pub server_id: ServerId,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Box<RawValue>>,
    pub documents: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// The daemon's answer to request `id`: `ok` or `err`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Reply {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub err: Option<WireError>,
}

/// `hello`'s answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct Welcome {
    /// This client's number in the daemon (`daemon status`).
    pub client: u64,
    pub pid: u32,
}

/// `route`'s answer (`gate::Route`).
#[derive(Debug, Serialize, Deserialize)]
pub struct WireRoute {
    pub execute_commands: Vec<String>,
    pub extension_methods: Vec<String>,
    pub request_timeout_ms: u64,
}

/// `request`'s answer (`gate::HostReply`): the server's result, verbatim.
#[derive(Debug, Serialize, Deserialize)]
pub struct WireReply {
    pub result: Box<RawValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Box<RawValue>>,
}

/// `status`'s answer (`daemon status --json`).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub pid: u32,
    pub version: String,
    pub uptime_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    pub socket: PathBuf,
    pub clients: Vec<ClientStatus>,
    pub servers: Vec<ServerEntry>,
}

/// One connected proxy.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientStatus {
    pub client: u64,
    pub pid: u32,
    pub sessions: usize,
    pub connected_ms: u64,
    pub in_flight: usize,
}

/// The errors a host returns, as they cross the socket.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireError {
    UnknownSession(String),
    UnknownServer {
        server_id: ServerId,
    },
    ServerNotRunning(Box<NotRunning>),
    ServerExited {
        server_id: ServerId,
        server: String,
    },
    ServerError {
        lsp_error: Box<RawValue>,
    },
    ResponseTooLarge {
        declared: usize,
    },
    DeadlineExceeded {
        ms: u64,
    },
    Cancelled,
    ContentModified,
    /// The daemon's own per-client cap, or a host quota.
    Overloaded {
        scope: String,
        limit: usize,
    },
    /// The daemon's cap on running servers (`max_running_servers`).
    ServerLimit {
        server_id: String,
        server: String,
        limit: usize,
    },
    InvalidParams(String),
    /// Anything else, by its message (`data.reason` `internal`).
    Internal(String),
}

impl From<GateError> for WireError {
    fn from(error: GateError) -> WireError {
        match error {
            GateError::UnknownSession(id) => WireError::UnknownSession(id),
            GateError::UnknownServer { server_id, .. } => WireError::UnknownServer { server_id },
            GateError::ServerNotRunning { server, .. } => WireError::ServerNotRunning(server),
            GateError::ServerExited { server_id, server } => {
                WireError::ServerExited { server_id, server }
            }
            GateError::ServerError { lsp_error } => WireError::ServerError { lsp_error },
            GateError::ResponseTooLarge { declared } => WireError::ResponseTooLarge { declared },
            GateError::DeadlineExceeded { ms } => WireError::DeadlineExceeded { ms },
            GateError::Cancelled => WireError::Cancelled,
            GateError::ContentModified => WireError::ContentModified,
            GateError::Overloaded { scope, limit } => WireError::Overloaded {
                scope: scope.to_string(),
                limit,
            },
            GateError::ServerLimit {
                server_id,
                server,
                limit,
            } => WireError::ServerLimit {
                server_id,
                server,
                limit,
            },
            GateError::InvalidParams(text) => WireError::InvalidParams(text),
            other => WireError::Internal(other.to_string()),
        }
    }
}

impl From<WireError> for GateError {
    fn from(error: WireError) -> GateError {
        match error {
            WireError::UnknownSession(id) => GateError::UnknownSession(id),
            WireError::UnknownServer { server_id } => GateError::UnknownServer {
                server_id,
                servers: Vec::new(),
            },
            WireError::ServerNotRunning(server) => GateError::ServerNotRunning {
                server,
                servers: Vec::new(),
            },
            WireError::ServerExited { server_id, server } => {
                GateError::ServerExited { server_id, server }
            }
            WireError::ServerError { lsp_error } => GateError::ServerError { lsp_error },
            WireError::ResponseTooLarge { declared } => GateError::ResponseTooLarge { declared },
            WireError::DeadlineExceeded { ms } => GateError::DeadlineExceeded { ms },
            WireError::Cancelled => GateError::Cancelled,
            WireError::ContentModified => GateError::ContentModified,
            WireError::Overloaded { scope, limit } => GateError::Overloaded {
                scope: if scope == "session" {
                    "session"
                } else {
                    "total"
                },
                limit,
            },
            WireError::ServerLimit {
                server_id,
                server,
                limit,
            } => GateError::ServerLimit {
                server_id,
                server,
                limit,
            },
            WireError::InvalidParams(text) => GateError::InvalidParams(text),
            WireError::Internal(text) => GateError::Internal(text),
        }
    }
}

/// One line of JSON (no newline inside: serde_json escapes them).
pub fn line<T: Serialize>(message: &T) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string(message)?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::ServerState;

    #[test]
    fn raw_payloads_cross_byte_for_byte() {
        let params = r#"{"b":18446744073709551616,"a":"x\u00e9"}"#;
        let request = Request {
            id: 7,
            op: Op::Request(Box::new(ForwardedRequest {
                session: "s".into(),
                server_id: "id".into(),
                method: "textDocument/hover".into(),
                params: Some(RawValue::from_string(params.into()).unwrap()),
                documents: vec![],
                wait_ms: None,
            })),
        };
        let text = line(&request).unwrap();
        assert!(text.ends_with('\n') && !text[..text.len() - 1].contains('\n'));
        let back: Request = serde_json::from_str(&text).unwrap();
        let Op::Request(call) = back.op else {
            panic!("not a request: {text}")
        };
        assert_eq!(call.params.unwrap().get(), params);

        let reply: Reply = serde_json::from_str(
            &line(&Reply {
                id: 7,
                ok: Some(
                    RawValue::from_string(
                        serde_json::to_string(&WireReply {
                            result: RawValue::from_string("null".into()).unwrap(),
                            meta: None,
                        })
                        .unwrap(),
                    )
                    .unwrap(),
                ),
                err: None,
            })
            .unwrap(),
        )
        .unwrap();
        let answer: WireReply = serde_json::from_str(reply.ok.unwrap().get()).unwrap();
        assert_eq!(answer.result.get(), "null", "a null result stays a result");
    }

    #[test]
    fn host_errors_keep_their_reason_across_the_socket() {
        let errors = [
            GateError::ServerExited {
                server_id: "s".into(),
                server: "ra at /p".into(),
            },
            GateError::ServerError {
                lsp_error: RawValue::from_string(r#"{"code":-32801,"message":"m"}"#.into())
                    .unwrap(),
            },
            GateError::ServerNotRunning {
                server: Box::new(NotRunning {
                    server_id: "s".into(),
                    name: "ra".into(),
                    workspace_path: "/p".into(),
                    status: ServerState::Indexing,
                    waited_ms: Some(3),
                    last_error: None,
                }),
                servers: vec![],
            },
            GateError::Cancelled,
            GateError::DeadlineExceeded { ms: 5 },
            GateError::ServerLimit {
                server_id: "s".into(),
                server: "pyright at /p/nested".into(),
                limit: 8,
            },
        ];
        for error in errors {
            let before = error.to_error_object(None);
            let wire: WireError = error.into();
            let text = serde_json::to_string(&wire).unwrap();
            let after: GateError = serde_json::from_str::<WireError>(&text).unwrap().into();
            let after = after.to_error_object(None);
            assert_eq!(before.code, after.code);
            assert_eq!(before.message, after.message);
            assert_eq!(
                before.data.as_ref().map(|d| d.get().to_string()),
                after.data.as_ref().map(|d| d.get().to_string())
            );
        }
    }
}
