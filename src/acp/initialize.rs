//! The one rewrite the relay makes: adding the `lsp` client capability to the
//! `initialize` request the agent receives.

use crate::jsonrpc::object::RawObject;
use serde_json::value::RawValue;

/// What the rewrite found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitializeRewrite {
    /// The message to forward (unchanged when the editor already advertises `lsp`).
    pub message: Vec<u8>,
    /// The editor itself advertises the `lsp` capability.
    pub editor_has_lsp: bool,
    pub protocol_version: u64,
}

/// The key under which client capabilities live in a protocol version.
pub fn capabilities_key(protocol_version: u64) -> &'static str {
    if protocol_version >= 2 {
        "capabilities"
    } else {
        "clientCapabilities"
    }
}

/// Rewrites an `initialize` request. Returns `None` when the message is not an
/// object with object params (it is then forwarded untouched).
pub fn rewrite_initialize(message: &[u8]) -> Option<InitializeRewrite> {
    let text = std::str::from_utf8(message).ok()?;
    let raw: &RawValue = serde_json::from_str(text).ok()?;
    let mut top = RawObject::parse(raw).ok()?;
    let mut params = RawObject::parse(top.get_raw("params")?).ok()?;
    // An absent or unreadable version is v1, the only released one.
    let protocol_version = params
        .get("protocolVersion")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(1);
    let key = capabilities_key(protocol_version);
    let mut caps = match params.get_raw(key) {
        Some(raw) if raw.get().trim() != "null" => RawObject::parse(raw).ok()?,
        _ => RawObject::empty(),
    };
    let mut meta = match caps.get_raw("_meta") {
        Some(raw) if raw.get().trim() != "null" => RawObject::parse(raw).ok()?,
        _ => RawObject::empty(),
    };
    let editor_has_lsp = caps.has_non_null("lsp") || meta.has_non_null("lsp");
    if editor_has_lsp {
        return Some(InitializeRewrite {
            message: message.to_vec(),
            editor_has_lsp,
            protocol_version,
        });
    }
    caps.set("lsp", "{}".into());
    meta.set("lsp", "{}".into());
    caps.set("_meta", meta.to_json());
    params.set(key, caps.to_json());
    top.set("params", params.to_json());
    Some(InitializeRewrite {
        message: top.to_json().into_bytes(),
        editor_has_lsp,
        protocol_version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn rewrite(text: &str) -> (Value, InitializeRewrite) {
        let out = rewrite_initialize(text.as_bytes()).expect("rewritten");
        (serde_json::from_slice(&out.message).unwrap(), out)
    }

    #[test]
    fn v1_gets_client_capabilities_lsp_and_meta() {
        let (msg, out) = rewrite(
            r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true},"_meta":{"x":1}},"clientInfo":{"name":"e"}}}"#,
        );
        assert!(!out.editor_has_lsp);
        assert_eq!(out.protocol_version, 1);
        assert_eq!(msg["params"]["clientCapabilities"]["lsp"], json!({}));
        assert_eq!(
            msg["params"]["clientCapabilities"]["_meta"],
            json!({"x":1,"lsp":{}})
        );
        assert_eq!(
            msg["params"]["clientCapabilities"]["fs"],
            json!({"readTextFile":true})
        );
        let text = String::from_utf8(out.message).unwrap();
        assert!(text.contains(r#""id":18446744073709551616"#), "{text}");
        assert!(
            text.starts_with(r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"initialize""#)
        );
    }

    #[test]
    fn v2_uses_capabilities() {
        let (msg, out) = rewrite(
            r#"{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":2,"capabilities":{},"info":{"name":"e","version":"1"}}}"#,
        );
        assert_eq!(out.protocol_version, 2);
        assert_eq!(
            msg["params"]["capabilities"],
            json!({"lsp":{},"_meta":{"lsp":{}}})
        );
        assert!(msg["params"].get("clientCapabilities").is_none());
        assert_eq!(msg["id"], json!("a"));
    }

    #[test]
    fn missing_or_null_capabilities_are_created() {
        let (msg, _) = rewrite(r#"{"id":1,"method":"initialize","params":{"protocolVersion":1}}"#);
        assert_eq!(
            msg["params"]["clientCapabilities"],
            json!({"lsp":{},"_meta":{"lsp":{}}})
        );
        let (msg, _) = rewrite(
            r#"{"id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":null}}"#,
        );
        assert_eq!(msg["params"]["clientCapabilities"]["lsp"], json!({}));
    }

    #[test]
    fn an_editor_with_lsp_is_left_alone() {
        for caps in [r#"{"lsp":{}}"#, r#"{"_meta":{"lsp":{}}}"#] {
            let text = format!(
                r#"{{"id":1,"method":"initialize","params":{{"protocolVersion":1,"clientCapabilities":{caps}}}}}"#
            );
            let out = rewrite_initialize(text.as_bytes()).unwrap();
            assert!(out.editor_has_lsp);
            assert_eq!(out.message, text.as_bytes());
        }
    }

    #[test]
    fn non_object_params_are_not_rewritten() {
        assert!(rewrite_initialize(br#"{"id":1,"method":"initialize","params":[1]}"#).is_none());
        assert!(rewrite_initialize(b"not json").is_none());
    }
}
