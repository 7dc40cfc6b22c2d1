//! One call of the gate, as the relay makes it for an agent, decoded; and
//! reading what `lsp/servers` answers. Shared by the harnesses over a
//! registry (`fake::FakeServer`, `recorded::Recorded`) and the tests that
//! build their own.

use std::time::Duration;

use acp_lsp_core::gate::{Gate, GateMethod, LspHost};
use acp_lsp_core::jsonrpc::RequestId;
use serde_json::Value;

/// `method` with `params` through `gate` as request `id`, bounded by
/// `timeout` (above the gate's own deadline: it only keeps a broken build
/// from hanging the suite); the whole response, checked to answer `id`.
pub async fn call<H: LspHost>(
    gate: &std::sync::Arc<Gate<H>>,
    id: u64,
    method: GateMethod,
    params: &Value,
    timeout: Duration,
) -> Value {
    let raw = serde_json::value::to_raw_value(params).expect("params serialize");
    let bytes = tokio::time::timeout(
        timeout,
        gate.call(RequestId::from_u64(id), method, Some(raw)),
    )
    .await
    .unwrap_or_else(|_| panic!("no answer within {timeout:?} to {params}"));
    let response: Value = serde_json::from_slice(&bytes).expect("the gate writes JSON");
    assert_eq!(response["id"], id, "{response}");
    response
}

/// The `servers` of an `lsp/servers` response (fails on an error).
pub fn servers_of(response: &Value) -> Vec<Value> {
    response["result"]["servers"]
        .as_array()
        .unwrap_or_else(|| panic!("lsp/servers failed: {response}"))
        .clone()
}

/// The server entry called `name` in a list of them.
pub fn named<'a>(servers: &'a [Value], name: &str) -> &'a Value {
    servers
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no {name} among {servers:?}"))
}
