//! What a server registered with `client/registerCapability`, and the one
//! helper that turns a `serde_json::Value` built here into raw JSON.
//!
//! Shared by the supervisor (`server`), the handshake and the watchers, so
//! none of those needs another's internals (no import circles inside `lsp`).

use serde_json::value::RawValue;
use serde_json::Value;

/// A dynamic registration (`client/registerCapability`).
#[derive(Debug, Clone)]
pub struct Registration {
    pub id: String,
    pub method: String,
    pub register_options: Option<Box<RawValue>>,
}

/// A value acp-lsp built, as raw JSON for a message.
pub(crate) fn raw_json(value: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("BUG: a Value always serializes")
}
