//! The one JSON-RPC 2.0 message model shared by both framings (ACP lines and LSP
//! Content-Length frames). Only this module and its children know framing.
//!
//! Messages are kept as the exact bytes that arrived; [`Envelope`] is a borrowed
//! view of the few top-level members the proxy acts on, so forwarding never
//! re-serializes and ids are echoed byte for byte.

pub mod content_length;
pub mod limits;
pub mod ndjson;

// The relay's raw-text tools, public only because acp-lsp's proxy is a
// crate of its own; not the embedder's API (ARCHITECTURE.md, "Crates"), so
// hidden from its documentation, and free to change in any release.
#[doc(hidden)]
pub mod depth;
#[doc(hidden)]
pub mod object;
#[doc(hidden)]
pub mod shallow;

use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

pub use limits::Limits;

/// A request id kept as its exact JSON text (`7`, `"7"`, `18446744073709551616`).
///
/// Two ids are equal only when their JSON text is equal, so `"7"` ≠ `7` and a
/// 2^64 integer never passes through a float.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RequestId(Box<str>);

impl RequestId {
    /// Builds an id from a raw JSON value (whitespace around it is dropped).
    pub fn from_raw(raw: &RawValue) -> RequestId {
        RequestId(raw.get().trim().into())
    }

    /// An integer id, as the proxy uses toward language servers.
    pub fn from_u64(n: u64) -> RequestId {
        RequestId(n.to_string().into())
    }

    /// The id's JSON text.
    pub fn as_json(&self) -> &str {
        &self.0
    }

    /// The id as a raw JSON value, ready to embed in an outgoing message.
    pub fn as_raw(&self) -> &RawValue {
        // The text came from a parsed RawValue or a formatted integer: it is valid JSON.
        serde_json::from_str::<&RawValue>(&self.0)
            .expect("BUG: a RequestId always holds valid JSON text")
    }

    /// The id as an unsigned integer, when it is one.
    pub fn as_u64(&self) -> Option<u64> {
        self.0.parse().ok()
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A borrowed view of a message's top-level members. Unknown members are skipped
/// without being allocated.
#[derive(Debug, Default, Deserialize)]
pub struct Envelope<'a> {
    /// `id`, raw.
    #[serde(borrow, default)]
    pub id: Option<&'a RawValue>,
    /// `method`.
    #[serde(borrow, default)]
    pub method: Option<Cow<'a, str>>,
    /// `params`, raw.
    #[serde(borrow, default)]
    pub params: Option<&'a RawValue>,
    /// `result`, raw.
    #[serde(borrow, default)]
    pub result: Option<&'a RawValue>,
    /// `error`, raw.
    #[serde(borrow, default)]
    pub error: Option<&'a RawValue>,
}

/// What a message is, decided from its envelope.
#[derive(Debug)]
pub enum Kind<'a> {
    /// A request: it gets one response.
    Request {
        /// Its id, to echo byte for byte.
        id: RequestId,
        /// Its method.
        method: Cow<'a, str>,
        /// Its params, raw.
        params: Option<&'a RawValue>,
    },
    /// A notification (also a request with `"id": null`, which cannot be answered).
    Notification {
        /// Its method.
        method: Cow<'a, str>,
        /// Its params, raw.
        params: Option<&'a RawValue>,
    },
    /// A response to a request.
    Response {
        /// The request's id.
        id: RequestId,
        /// Its result or error.
        outcome: Outcome<'a>,
    },
}

/// The outcome carried by a response.
#[derive(Debug)]
pub enum Outcome<'a> {
    /// `result`, raw (`null` included).
    Result(&'a RawValue),
    /// `error`, raw.
    Error(&'a RawValue),
}

impl<'a> Envelope<'a> {
    /// Parses the envelope of one JSON object. Fails for anything that is not a
    /// JSON object (arrays are batches and are split by the caller).
    pub fn parse(bytes: &'a [u8]) -> Result<Envelope<'a>, serde_json::Error> {
        // A derived struct would also accept a JSON array positionally.
        if first_significant_byte(bytes) != Some(b'{') {
            return Err(serde::de::Error::custom(
                "a JSON-RPC message must be an object",
            ));
        }
        serde_json::from_slice(bytes)
    }

    /// Classifies the message. `None` when it is neither a request, a
    /// notification nor a response (e.g. `{}`).
    pub fn kind(self) -> Option<Kind<'a>> {
        match (self.method, self.id) {
            (Some(method), Some(id)) if !is_null(id) => Some(Kind::Request {
                id: RequestId::from_raw(id),
                method,
                params: self.params,
            }),
            // A request with `"id": null` is treated as a notification: it cannot be answered.
            (Some(method), _) => Some(Kind::Notification {
                method,
                params: self.params,
            }),
            (None, Some(id)) => {
                let outcome = match (self.result, self.error) {
                    (_, Some(error)) if !is_null(error) => Outcome::Error(error),
                    (Some(result), _) => Outcome::Result(result),
                    // `"result": null` arrives as None through Option: a null result.
                    _ => Outcome::Result(null_raw()),
                };
                Some(Kind::Response {
                    id: RequestId::from_raw(id),
                    outcome,
                })
            }
            (None, None) => None,
        }
    }
}

/// Whether a raw value is JSON `null`.
pub fn is_null(raw: &RawValue) -> bool {
    raw.get().trim() == "null"
}

/// A raw JSON `null`.
pub fn null_raw() -> &'static RawValue {
    serde_json::from_str::<&RawValue>("null").expect("BUG: null is valid JSON")
}

/// The first non-whitespace byte of a frame, used to tell objects from batches
/// without parsing.
pub fn first_significant_byte(bytes: &[u8]) -> Option<u8> {
    bytes.iter().copied().find(|b| !b.is_ascii_whitespace())
}

/// A JSON-RPC error object as sent by the proxy.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ErrorObject {
    /// The JSON-RPC error code.
    pub code: i64,
    /// For people.
    pub message: String,
    /// Raw, so a server's `data` inside it keeps its bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Box<RawValue>>,
}

impl ErrorObject {
    /// An error whose `data` is `{"reason": reason}`.
    pub fn with_reason(code: i64, message: impl Into<String>, reason: &str) -> ErrorObject {
        #[derive(serde::Serialize)]
        struct Data<'a> {
            reason: &'a str,
        }
        ErrorObject {
            code,
            message: message.into(),
            data: serde_json::value::to_raw_value(&Data { reason }).ok(),
        }
    }

    /// `data.reason`, when there is one.
    pub fn reason(&self) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Data {
            reason: String,
        }
        let data = self.data.as_ref()?;
        serde_json::from_str::<Data>(data.get())
            .ok()
            .map(|d| d.reason)
    }
}

/// Serializes a success response with a raw result, without re-encoding the result.
pub fn encode_result(id: &RequestId, result: &RawValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(result.get().len() + id.as_json().len() + 40);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_json().as_bytes());
    out.extend_from_slice(b",\"result\":");
    out.extend_from_slice(result.get().as_bytes());
    out.push(b'}');
    out
}

/// Serializes an error response. `id` is `None` when the request's id is unknown.
pub fn encode_error(id: Option<&RequestId>, error: &ErrorObject) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.map_or("null", RequestId::as_json).as_bytes());
    out.extend_from_slice(b",\"error\":");
    serde_json::to_writer(&mut out, error).expect("BUG: an ErrorObject always serializes");
    out.push(b'}');
    out
}

/// Serializes a request or notification with raw params.
pub fn encode_request(id: Option<&RequestId>, method: &str, params: Option<&RawValue>) -> Vec<u8> {
    // Sized for the whole message: a buffer that grows is a `realloc`, and
    // under the gate's load glibc's arena lock made those a tenth of the
    // request path (BENCHMARKS.md).
    let id_len = id.map_or(0, |id| id.as_json().len());
    let params_len = params.map_or(0, |p| p.get().len());
    let mut out = Vec::with_capacity(48 + id_len + method.len() + params_len);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",");
    if let Some(id) = id {
        out.extend_from_slice(b"\"id\":");
        out.extend_from_slice(id.as_json().as_bytes());
        out.push(b',');
    }
    out.extend_from_slice(b"\"method\":");
    serde_json::to_writer(&mut out, method).expect("BUG: a string always serializes");
    if let Some(params) = params {
        out.extend_from_slice(b",\"params\":");
        out.extend_from_slice(params.get().as_bytes());
    }
    out.push(b'}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind_of(text: &str) -> Option<Kind<'_>> {
        Envelope::parse(text.as_bytes()).ok()?.kind()
    }

    #[test]
    fn ids_keep_their_exact_text() {
        let Some(Kind::Request { id, .. }) = kind_of(r#"{"id":"7","method":"m"}"#) else {
            panic!("not a request")
        };
        let Some(Kind::Request { id: number, .. }) = kind_of(r#"{"id":7,"method":"m"}"#) else {
            panic!("not a request")
        };
        assert_ne!(id, number);
        assert_eq!(id.as_json(), "\"7\"");
        let Some(Kind::Request { id: big, .. }) =
            kind_of(r#"{"id":18446744073709551616,"method":"m"}"#)
        else {
            panic!("not a request")
        };
        assert_eq!(big.as_json(), "18446744073709551616");
        let encoded = encode_result(&big, null_raw());
        assert_eq!(
            std::str::from_utf8(&encoded).unwrap(),
            r#"{"jsonrpc":"2.0","id":18446744073709551616,"result":null}"#
        );
    }

    #[test]
    fn classifies_every_kind() {
        assert!(matches!(
            kind_of(r#"{"method":"n"}"#),
            Some(Kind::Notification { .. })
        ));
        assert!(matches!(
            kind_of(r#"{"id":null,"method":"n"}"#),
            Some(Kind::Notification { .. })
        ));
        assert!(matches!(
            kind_of(r#"{"id":1,"result":null}"#),
            Some(Kind::Response {
                outcome: Outcome::Result(_),
                ..
            })
        ));
        assert!(matches!(
            kind_of(r#"{"id":1,"error":{"code":1,"message":"x"}}"#),
            Some(Kind::Response {
                outcome: Outcome::Error(_),
                ..
            })
        ));
        assert!(kind_of("{}").is_none());
        assert!(Envelope::parse(b"[1]").is_err());
    }

    #[test]
    fn encodes_requests_with_raw_params() {
        let params: &RawValue = serde_json::from_str(r#"{ "a" : 1 }"#).unwrap();
        let out = encode_request(Some(&RequestId::from_u64(3)), "x/y", Some(params));
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"jsonrpc":"2.0","id":3,"method":"x/y","params":{ "a" : 1 }}"#
        );
    }
}
