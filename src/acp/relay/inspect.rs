//! What the relay reads out of the messages it inspects (the agent's MCP
//! capability, the editor's `fs` capability, a gate method in an unparsable
//! line, a cancelled request's id) and the small answers it builds.

use crate::gate::error::INVALID_REQUEST;
use crate::gate::GateMethod;
use crate::jsonrpc::{self, shallow, ErrorObject, RequestId};
use futures::future::BoxFuture;
use futures::FutureExt;
use serde::Deserialize;
use serde_json::value::RawValue;

/// Whether the agent's `initialize` result advertises
/// `agentCapabilities.mcpCapabilities.http` (v1; v2 names the member
/// `capabilities`).
pub(super) fn agent_takes_mcp_http(result: &RawValue) -> bool {
    let Ok(result) = serde_json::from_str::<serde_json::Value>(result.get()) else {
        return false;
    };
    ["agentCapabilities", "capabilities"]
        .iter()
        .any(|key| result[key]["mcpCapabilities"]["http"] == true)
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
