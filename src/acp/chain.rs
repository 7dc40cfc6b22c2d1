//! acp-lsp as one proxy of a chain (the proxy-chains RFD,
//! `agent-client-protocol-conductor`): `acp-lsp proxy --chain` starts no
//! agent; the conductor is on its stdin and stdout, and both sides of the
//! relay travel on that one connection.
//!
//! The conductor sends `proxy/initialize` instead of `initialize`, delivers
//! the editor's messages as they are, and wraps the successor's (the next
//! proxy's or the agent's) in `proxy/successor {method, params}`; what a
//! proxy sends its successor it wraps the same way, and the successor's
//! answer to a wrapped request comes back as the answer to that request.
//!
//! This module only translates: it feeds the unchanged relay
//! ([`super::relay::run`]) two virtual peers, so the chain has the relay's
//! semantics exactly (the `lsp` capability, the gate, session roots, MCP
//! injection, `fs/write_text_file`, cancellation). Ids need no mapping:
//! every request id the conductor sends us is unique among its requests in
//! flight, so the wrapper of an editor request reuses that request's id, and
//! an agent request forwarded to the editor keeps the id its wrapper came
//! with. A response from the conductor is the successor's when its id is a
//! wrapper of ours in flight, else the editor's; a `$/cancel_request` is the
//! successor's when it names a request the conductor delivered wrapped.
//! Cancellation travels as the RFD says: `$/cancel_request` naming the
//! `proxy/successor` request, never wrapped.

use super::relay::{self, RelayEnd, RelayOptions};
use super::writer::{output, Outgoing, Output, Sink};
use crate::gate::{Gate, LspHost};
use crate::jsonrpc::ndjson::{LineChunk, LineReader};
use crate::jsonrpc::{self, first_significant_byte, Envelope, Kind, RequestId};
use bytes::Bytes;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashSet;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWriteExt, DuplexStream};

/// `proxy/initialize`: the conductor's `initialize` to a proxy.
pub const PROXY_INITIALIZE: &str = "proxy/initialize";
/// `proxy/successor`: a message to or from the successor.
pub const PROXY_SUCCESSOR: &str = "proxy/successor";
/// Longest line taken from or given to the conductor. A wrapped message
/// must be read whole to be unwrapped; a longer line is dropped (and
/// logged), unlike the relay's own streaming of long lines.
pub const MAX_CHAIN_LINE: usize = 64 * 1024 * 1024;
/// Requests in flight through the chain in each direction; past it a new one
/// is still forwarded, but its answer is taken for the editor's (logged once).
pub const MAX_CHAIN_IN_FLIGHT: usize = 65_536;
/// Bytes of each in-memory pipe between the translator and the relay.
const PIPE_BYTES: usize = 1024 * 1024;

/// Ids in flight, shared by the translator's two directions.
#[derive(Default)]
struct InFlight {
    /// Our `proxy/successor` requests (an editor request's id, reused).
    wrapped: HashSet<RequestId>,
    /// The conductor's `proxy/successor` requests (from the successor).
    delivered: HashSet<RequestId>,
    /// A cap was hit (logged once).
    warned: bool,
}

impl InFlight {
    fn note(set: &mut HashSet<RequestId>, warned: &mut bool, id: RequestId) {
        if set.len() >= MAX_CHAIN_IN_FLIGHT {
            if !*warned {
                *warned = true;
                tracing::warn!(
                    limit = "max_chain_in_flight",
                    value = MAX_CHAIN_IN_FLIGHT,
                    "limit hit: a proxy-chain request is not tracked"
                );
            }
            return;
        }
        set.insert(id);
    }
}

/// Where a line from the conductor goes.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    /// To the relay as the editor's, as it came.
    Editor,
    /// To the relay as the editor's, rewritten (`proxy/initialize`).
    EditorAs(Vec<u8>),
    /// To the relay as the agent's, as it came.
    Agent,
    /// To the relay as the agent's, unwrapped.
    AgentAs(Vec<u8>),
}

/// The params of a `proxy/successor` envelope (its own `_meta` is hop-local).
#[derive(Deserialize)]
struct Wrapped<'a> {
    #[serde(borrow)]
    method: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

fn unwrap(id: Option<&RequestId>, params: Option<&RawValue>) -> Option<Vec<u8>> {
    let inner: Wrapped = serde_json::from_str(params?.get()).ok()?;
    let params = inner.params.filter(|p| !jsonrpc::is_null(p));
    Some(jsonrpc::encode_request(id, &inner.method, params))
}

fn wrap(id: Option<&RequestId>, method: &str, params: Option<&RawValue>) -> Vec<u8> {
    let mut inner = Vec::with_capacity(32 + params.map_or(0, |p| p.get().len()));
    inner.extend_from_slice(b"{\"method\":");
    serde_json::to_writer(&mut inner, method).expect("BUG: a string always serializes");
    if let Some(params) = params {
        inner.extend_from_slice(b",\"params\":");
        inner.extend_from_slice(params.get().as_bytes());
    }
    inner.push(b'}');
    let inner = String::from_utf8(inner).expect("BUG: JSON text is UTF-8");
    let inner = RawValue::from_string(inner).expect("BUG: the envelope is valid JSON");
    jsonrpc::encode_request(id, PROXY_SUCCESSOR, Some(&inner))
}

/// The cancelled request's id of `$/cancel_request` params.
fn cancelled(params: Option<&RawValue>) -> Option<RequestId> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Cancel<'a> {
        #[serde(borrow)]
        request_id: &'a RawValue,
    }
    let cancel: Cancel = serde_json::from_str(params?.get()).ok()?;
    Some(RequestId::from_raw(cancel.request_id))
}

/// Decides where one line from the conductor goes.
fn route_from_conductor(line: &[u8], in_flight: &Mutex<InFlight>) -> Route {
    let Some(kind) = Envelope::parse(line).ok().and_then(Envelope::kind) else {
        return Route::Editor;
    };
    match kind {
        Kind::Request { id, method, params } if method == PROXY_SUCCESSOR => {
            match unwrap(Some(&id), params) {
                Some(inner) => {
                    let mut state = in_flight.lock();
                    let InFlight {
                        delivered, warned, ..
                    } = &mut *state;
                    InFlight::note(delivered, warned, id);
                    Route::AgentAs(inner)
                }
                None => Route::Editor,
            }
        }
        Kind::Notification { method, params } if method == PROXY_SUCCESSOR => {
            unwrap(None, params).map_or(Route::Editor, Route::AgentAs)
        }
        Kind::Request { id, method, params } if method == PROXY_INITIALIZE => {
            Route::EditorAs(jsonrpc::encode_request(Some(&id), "initialize", params))
        }
        Kind::Request { method, .. } if method == "initialize" => {
            tracing::warn!(
                "acp-lsp --chain was sent `initialize`, not `proxy/initialize`: \
                 it is a proxy and needs a successor (list the agent after it)"
            );
            Route::Editor
        }
        Kind::Notification { method, params } if method == "$/cancel_request" => {
            let theirs =
                cancelled(params).is_some_and(|id| in_flight.lock().delivered.contains(&id));
            if theirs {
                Route::Agent
            } else {
                Route::Editor
            }
        }
        Kind::Response { id, .. } => {
            if in_flight.lock().wrapped.remove(&id) {
                Route::Agent
            } else {
                Route::Editor
            }
        }
        _ => Route::Editor,
    }
}

/// What one line the relay sends its agent becomes toward the conductor.
fn to_conductor_from_agent_side(line: &[u8], in_flight: &Mutex<InFlight>) -> Option<Vec<u8>> {
    let Some(kind) = Envelope::parse(line).ok().and_then(Envelope::kind) else {
        tracing::warn!("a line for the successor that is no message was dropped");
        return None;
    };
    Some(match kind {
        Kind::Request { id, method, params } => {
            let wrapped = wrap(Some(&id), &method, params);
            let mut state = in_flight.lock();
            let InFlight {
                wrapped: set,
                warned,
                ..
            } = &mut *state;
            InFlight::note(set, warned, id);
            wrapped
        }
        // It names a wrapper of ours (the editor request's id, reused).
        Kind::Notification { method, .. } if method == "$/cancel_request" => line.to_vec(),
        Kind::Notification { method, params } => wrap(None, &method, params),
        Kind::Response { id, .. } => {
            in_flight.lock().delivered.remove(&id);
            line.to_vec()
        }
    })
}

/// Runs the relay for a conductor on `conductor_in`/`conductor_out` until
/// the conductor closes our input (or stops reading).
pub async fn run<H: LspHost>(
    gate: Arc<Gate<H>>,
    conductor_in: impl AsyncRead + Unpin + Send + 'static,
    conductor_out: Output,
    options: RelayOptions,
) -> RelayEnd {
    let (editor_in, mut to_editor_in) = tokio::io::duplex(PIPE_BYTES);
    let (from_editor_out, editor_out) = tokio::io::duplex(PIPE_BYTES);
    let (from_agent_in, agent_in) = tokio::io::duplex(PIPE_BYTES);
    let (agent_out, mut to_agent_out) = tokio::io::duplex(PIPE_BYTES);
    let relay = tokio::spawn(relay::run(
        gate,
        editor_in,
        editor_out,
        agent_in,
        agent_out,
        options,
        || {},
    ));
    let (sink, writer) = output(conductor_out, None);
    let writer = tokio::spawn(writer);
    let in_flight = Arc::new(Mutex::new(InFlight::default()));

    let editor_side = tokio::spawn(pump_to_conductor(
        from_editor_out,
        sink.clone(),
        Arc::clone(&in_flight),
        false,
    ));
    let agent_side = tokio::spawn(pump_to_conductor(
        from_agent_in,
        sink.clone(),
        Arc::clone(&in_flight),
        true,
    ));
    drop(sink);

    let mut reader = LineReader::new(conductor_in, MAX_CHAIN_LINE);
    let mut oversized = false;
    loop {
        let chunk = match reader.next().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(error = %e, "reading the conductor failed");
                break;
            }
        };
        let line = match chunk {
            LineChunk::Line { bytes, .. } => bytes,
            LineChunk::Lines(bytes) => bytes,
            LineChunk::Fragment { last, .. } => {
                if !oversized {
                    tracing::warn!(
                        limit = "max_chain_line",
                        value = MAX_CHAIN_LINE,
                        "limit hit: a line from the conductor was dropped"
                    );
                }
                oversized = !last;
                continue;
            }
        };
        let delivered = match route_from_conductor(&line, &in_flight) {
            Route::Editor => write_line(&mut to_editor_in, &line).await,
            Route::EditorAs(new) => write_line(&mut to_editor_in, &new).await,
            Route::Agent => write_line(&mut to_agent_out, &line).await,
            Route::AgentAs(new) => write_line(&mut to_agent_out, &new).await,
        };
        if !delivered {
            break;
        }
    }
    // The conductor closed our input: both virtual peers end, and the relay
    // with them.
    drop(to_editor_in);
    drop(to_agent_out);
    let end = relay.await.unwrap_or(RelayEnd::EditorGone);
    let _ = editor_side.await;
    let _ = agent_side.await;
    match writer.await {
        Ok(Ok(())) => end,
        _ => RelayEnd::EditorGone,
    }
}

async fn write_line(to: &mut DuplexStream, line: &[u8]) -> bool {
    let mut framed = Vec::with_capacity(line.len() + 1);
    framed.extend_from_slice(line);
    if framed.last() != Some(&b'\n') {
        framed.push(b'\n');
    }
    to.write_all(&framed).await.is_ok()
}

/// Copies what the relay writes to one virtual peer to the conductor: the
/// editor's side as it is, the agent's side wrapped for the successor.
async fn pump_to_conductor(
    from: DuplexStream,
    sink: Sink,
    in_flight: Arc<Mutex<InFlight>>,
    agent_side: bool,
) {
    let mut reader = LineReader::new(from, MAX_CHAIN_LINE);
    loop {
        let line = match reader.next().await {
            Ok(Some(LineChunk::Line { bytes, .. } | LineChunk::Lines(bytes))) => bytes,
            Ok(Some(LineChunk::Fragment { .. })) => {
                tracing::warn!(
                    limit = "max_chain_line",
                    value = MAX_CHAIN_LINE,
                    "limit hit: a piece of a line toward the conductor was dropped"
                );
                continue;
            }
            Ok(None) | Err(_) => return,
        };
        let lines: Vec<Vec<u8>> = if !agent_side {
            vec![line.to_vec()]
        } else if first_significant_byte(&line) == Some(b'[') {
            // A batch (v2): each element travels in its own envelope.
            serde_json::from_slice::<Vec<&RawValue>>(&line)
                .map(|elements| {
                    elements
                        .iter()
                        .filter_map(|e| {
                            to_conductor_from_agent_side(e.get().as_bytes(), &in_flight)
                        })
                        .collect()
                })
                .unwrap_or_default()
        } else {
            to_conductor_from_agent_side(&line, &in_flight)
                .into_iter()
                .collect()
        };
        for line in lines {
            if sink.send(Outgoing::line(Bytes::from(line))).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn value(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).unwrap()
    }

    #[test]
    fn the_successors_messages_are_unwrapped_and_ours_wrapped() {
        let in_flight = Mutex::new(InFlight::default());
        // proxy/initialize → initialize, to the relay as the editor's.
        let Route::EditorAs(init) = route_from_conductor(
            br#"{"jsonrpc":"2.0","id":0,"method":"proxy/initialize","params":{"protocolVersion":1}}"#,
            &in_flight,
        ) else {
            panic!("proxy/initialize goes to the editor side")
        };
        assert_eq!(
            value(&init),
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}})
        );
        // The relay forwards it to the agent: wrapped, same id.
        let wrapped = to_conductor_from_agent_side(&init, &in_flight).unwrap();
        assert_eq!(
            value(&wrapped),
            json!({"jsonrpc":"2.0","id":0,"method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":1}}})
        );
        // The successor's answer to it is the agent's.
        assert_eq!(
            route_from_conductor(
                br#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}"#,
                &in_flight
            ),
            Route::Agent
        );
        // Answered once: a later response with that id is the editor's.
        assert_eq!(
            route_from_conductor(br#"{"jsonrpc":"2.0","id":0,"result":null}"#, &in_flight),
            Route::Editor
        );
        // A request of the successor, wrapped by the conductor: unwrapped,
        // its params' bytes kept, the envelope's _meta dropped.
        let Route::AgentAs(inner) = route_from_conductor(
            br#"{"jsonrpc":"2.0","id":"u-1","method":"proxy/successor","params":{"method":"lsp/servers","params":{"sessionId":"s" , "n":1.50},"_meta":{"hop":1}}}"#,
            &in_flight,
        ) else {
            panic!("a wrapped request goes to the agent side")
        };
        assert_eq!(
            String::from_utf8(inner).unwrap(),
            r#"{"jsonrpc":"2.0","id":"u-1","method":"lsp/servers","params":{"sessionId":"s" , "n":1.50}}"#
        );
        // Its cancel, plain from the conductor, is the agent's; another is the editor's.
        assert_eq!(
            route_from_conductor(
                br#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"u-1"}}"#,
                &in_flight
            ),
            Route::Agent
        );
        assert_eq!(
            route_from_conductor(
                br#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"e-9"}}"#,
                &in_flight
            ),
            Route::Editor
        );
        // Our answer to it goes plain, and forgets it.
        let answer = br#"{"jsonrpc":"2.0","id":"u-1","result":{"servers":[]}}"#;
        assert_eq!(
            to_conductor_from_agent_side(answer, &in_flight).unwrap(),
            answer.to_vec()
        );
        assert!(in_flight.lock().delivered.is_empty());
        // Notifications: wrapped either way, but a cancel travels plain.
        let Route::AgentAs(update) = route_from_conductor(
            br#"{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"x":1}}}"#,
            &in_flight,
        ) else {
            panic!("a wrapped notification goes to the agent side")
        };
        assert_eq!(
            value(&update),
            json!({"jsonrpc":"2.0","method":"session/update","params":{"x":1}})
        );
        let cancel = br#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}"#;
        assert_eq!(
            to_conductor_from_agent_side(cancel, &in_flight).unwrap(),
            cancel.to_vec()
        );
        let note = to_conductor_from_agent_side(
            br#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#,
            &in_flight,
        )
        .unwrap();
        assert_eq!(
            value(&note),
            json!({"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":{"sessionId":"s"}}})
        );
        // Plain editor traffic stays the editor's.
        assert_eq!(
            route_from_conductor(
                br#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{}}"#,
                &in_flight
            ),
            Route::Editor
        );
    }
}
