//! What the relay reads out of the messages it inspects (the agent's MCP
//! transports, the editor's `fs` capability, a gate method in an unparsable
//! line, a cancelled request's id) and the small answers it builds.

use crate::gate::error::INVALID_REQUEST;
use crate::gate::GateMethod;
use crate::jsonrpc::{self, shallow, ErrorObject, RequestId};
use futures::future::BoxFuture;
use futures::FutureExt;
use serde::Deserialize;
use serde_json::value::RawValue;

/// The MCP transports the agent's `initialize` answer takes, and the
/// protocol version the connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AgentMcp {
    /// The version the agent answered (else the editor's request's): the
    /// spelling of the answer's capabilities and of the entries injected.
    pub(crate) protocol_version: u64,
    pub(crate) stdio: bool,
    pub(crate) http: bool,
    /// MCP over the ACP connection itself (`"type": "acp"`, mcp-over-acp RFD).
    pub(crate) acp: bool,
}

impl AgentMcp {
    /// Before the agent's answer: what every v1 agent takes (stdio).
    pub(crate) fn before_answer(protocol_version: u64) -> AgentMcp {
        AgentMcp {
            protocol_version,
            stdio: protocol_version < 2,
            http: false,
            acp: false,
        }
    }
}

/// The MCP transports an `initialize` result advertises. v1:
/// `agentCapabilities.mcpCapabilities.{http, acp}` are booleans and stdio is
/// always taken. v2: `capabilities.session.mcp.{stdio, http, acp}` are
/// objects, present (not `null`) when taken; stdio too must be advertised.
/// `requested` is the version of the editor's `initialize` request, used
/// when the answer names none.
pub(crate) fn agent_mcp_transports(result: &RawValue, requested: u64) -> AgentMcp {
    let Ok(result) = serde_json::from_str::<serde_json::Value>(result.get()) else {
        return AgentMcp::before_answer(requested);
    };
    let protocol_version = result["protocolVersion"].as_u64().unwrap_or(requested);
    if protocol_version >= 2 {
        let mcp = &result["capabilities"]["session"]["mcp"];
        let takes = |name: &str| mcp[name].is_object() || mcp[name] == true;
        AgentMcp {
            protocol_version,
            stdio: takes("stdio"),
            http: takes("http"),
            acp: takes("acp"),
        }
    } else {
        let mcp = &result["agentCapabilities"]["mcpCapabilities"];
        AgentMcp {
            protocol_version,
            stdio: true,
            http: mcp["http"] == true,
            acp: mcp["acp"] == true,
        }
    }
}

/// Whether an `initialize` request advertises both `fs.readTextFile` and
/// `fs.writeTextFile` (ACP v1; v2 has no `fs/*`).
pub(super) fn editor_writes_files(initialize: &[u8]) -> bool {
    let Ok(message) = serde_json::from_slice::<serde_json::Value>(initialize) else {
        return false;
    };
    let fs = &message["params"]["clientCapabilities"]["fs"];
    fs["readTextFile"] == true && fs["writeTextFile"] == true
}

/// Whether any reading of a line that does not parse names a gate method
/// (`lsp/*` in its three spellings, `_acp-lsp/diagnostics`): the first or
/// the last `method`, with invalid UTF-8 replaced, escapes decoded.
pub(super) fn names_gate_method(bytes: &[u8]) -> bool {
    shallow::member_strings(bytes, "method")
        .iter()
        .any(|method| GateMethod::from_acp(method).is_some())
}

/// An error answer to `id` (or `null`); without an id the code is
/// invalid-request, whatever the reason.
pub(super) fn answer_error(
    id: Option<RequestId>,
    error: ErrorObject,
) -> BoxFuture<'static, Vec<u8>> {
    let error = match id {
        Some(_) => error,
        None => ErrorObject {
            code: INVALID_REQUEST,
            ..error
        },
    };
    let response = jsonrpc::encode_error(id.as_ref(), &error);
    async move { response }.boxed()
}

pub(super) fn cancelled_request_id(params: Option<&RawValue>) -> Option<RequestId> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Cancel<'a> {
        #[serde(borrow)]
        request_id: &'a RawValue,
    }
    let cancel: Cancel = serde_json::from_str(params?.get()).ok()?;
    Some(RequestId::from_raw(cancel.request_id))
}

pub(super) fn join_array(items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(items.iter().map(Vec::len).sum::<usize>() + items.len() + 2);
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.push(b']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    #[test]
    fn v1_and_v2_spell_the_agents_mcp_transports_differently() {
        // v1: booleans under agentCapabilities.mcpCapabilities; stdio always.
        let v1 = agent_mcp_transports(
            &raw(
                r#"{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"http":true,"sse":true}}}"#,
            ),
            1,
        );
        assert_eq!(
            v1,
            AgentMcp {
                protocol_version: 1,
                stdio: true,
                http: true,
                acp: false
            }
        );
        // v2: objects under capabilities.session.mcp; stdio only when said.
        let v2 = agent_mcp_transports(
            &raw(
                r#"{"protocolVersion":2,"info":{"name":"a","version":"1"},"capabilities":{"session":{"mcp":{"http":{},"stdio":{}}}}}"#,
            ),
            2,
        );
        assert_eq!(
            v2,
            AgentMcp {
                protocol_version: 2,
                stdio: true,
                http: true,
                acp: false
            }
        );
        let v2_http_only = agent_mcp_transports(
            &raw(
                r#"{"protocolVersion":2,"capabilities":{"session":{"mcp":{"http":{},"stdio":null}}}}"#,
            ),
            2,
        );
        assert!(v2_http_only.http && !v2_http_only.stdio);
        // A v1 spelling in a v2 answer says nothing.
        let misspelt = agent_mcp_transports(
            &raw(r#"{"protocolVersion":2,"capabilities":{"mcpCapabilities":{"http":true}}}"#),
            2,
        );
        assert!(!misspelt.http && !misspelt.stdio);
        // The agent answers the version it speaks: a v1 answer to a v2 request reads as v1.
        let down = agent_mcp_transports(
            &raw(r#"{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}"#),
            2,
        );
        assert_eq!(
            down,
            AgentMcp {
                protocol_version: 1,
                stdio: true,
                http: false,
                acp: true
            }
        );
    }
}
