//! Property-based fuzzing of what peers control: the two framings
//! (`jsonrpc::ndjson`, `jsonrpc::content_length`), the gate's params and
//! URI confinement (`gate::confine`). Each property asserts no panic and no
//! false accept: every frame delivered was sent, every URI let through lies
//! inside the session root by an oracle written here independently of the
//! gate (the `url`-free reading of both RFC 3986 and WHATWG parsers, with
//! symlinks resolved by the OS).
//!
//! `cargo test` runs a few hundred cases per property. The fuzzing run is
//!
//! ```sh
//! ACP_LSP_FUZZ_CASES=100000 cargo test --release --test fuzz
//! ```
//!
//! (`ACP_LSP_FUZZ_CASES` cases per property; proptest prints a failing case
//! shrunk to its smallest form.)
// Linux and Windows (run under wine in CI): the URI part has a tree and
// an oracle for each (tests/fuzz/).
#![cfg(any(target_os = "linux", windows))]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acp_lsp_core::gate::confine::Confinement;
use acp_lsp_core::gate::{
    Gate, GateConfig, GateError, GateMethod, HostCall, HostReply, LspHost, Route, ServerEntry,
    Session,
};
use acp_lsp_core::jsonrpc::content_length::{ContentLengthCodec, LspFrame};
use acp_lsp_core::jsonrpc::ndjson::{LineChunk, LineReader};
use acp_lsp_core::jsonrpc::{Limits, RequestId};
use bytes::BytesMut;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio_util::codec::Decoder;

/// Cases per property under plain `cargo test`.
const DEFAULT_CASES: u32 = 256;

fn cases() -> u32 {
    std::env::var("ACP_LSP_FUZZ_CASES")
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        // Deterministic failures are shrunk; no regression files are written
        // into the source tree.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Counts of one property's cases and of those that went the interesting
/// way (accepted, forwarded), printed after its last case: the figure that
/// shows a "no false accept" property is not vacuous.
static URI_RUNS: AtomicU64 = AtomicU64::new(0);
static URI_ACCEPTED: AtomicU64 = AtomicU64::new(0);
static GATE_RUNS: AtomicU64 = AtomicU64::new(0);
static GATE_FORWARDED: AtomicU64 = AtomicU64::new(0);

fn report(what: &str, runs: &AtomicU64, hits: &AtomicU64, hit: u64) {
    let hits = hits.fetch_add(hit, Ordering::Relaxed) + hit;
    let runs = runs.fetch_add(1, Ordering::Relaxed) + 1;
    if runs == u64::from(cases()) {
        eprintln!("{what}: {hits} of {runs} cases");
    }
}

// ------------------------------------------------------------- framing

/// An `AsyncRead` over `data` that hands out at most `step` bytes a read.
struct Trickle {
    data: Vec<u8>,
    at: usize,
    step: usize,
}

impl tokio::io::AsyncRead for Trickle {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let n = self
            .step
            .min(buf.remaining())
            .min(self.data.len() - self.at);
        let start = self.at;
        buf.put_slice(&self.data[start..start + n]);
        self.at += n;
        std::task::Poll::Ready(Ok(()))
    }
}

fn ndjson_input() -> impl Strategy<Value = Vec<u8>> {
    // Newlines often (one byte value in eight), so lines of every length
    // appear; one generated vector per case keeps generation cheap.
    (prop::collection::vec(any::<u8>(), 0..400), 1u8..16).prop_map(|(bytes, every)| {
        bytes
            .into_iter()
            .map(|b| if b % every == 0 { b'\n' } else { b })
            .collect()
    })
}

proptest! {
    #![proptest_config(config())]

    /// ndjson: whatever the bytes and read sizes, the reader never panics,
    /// its lines and fragments put back together are the input exactly, and
    /// no whole line is longer than the limit.
    #[test]
    fn ndjson_reassembles_any_input_and_bounds_lines(
        input in ndjson_input(),
        max_line in 1usize..80,
        step in 1usize..64,
    ) {
        let rt = runtime();
        let chunks = rt.block_on(async {
            let mut reader = LineReader::new(
                Trickle { data: input.clone(), at: 0, step },
                max_line,
            );
            let mut out = Vec::new();
            // Both readings: line by line, and a batch of whole lines per read.
            loop {
                let chunk = if step % 2 == 0 { reader.next_batch().await } else { reader.next().await };
                let Some(chunk) = chunk.expect("in-memory reads do not fail") else { break };
                out.push(chunk);
            }
            out
        });
        let mut rebuilt = Vec::new();
        for chunk in &chunks {
            match chunk {
                LineChunk::Line { bytes, terminated } => {
                    prop_assert!(bytes.len() <= max_line, "a whole line over the limit");
                    prop_assert!(!bytes.contains(&b'\n'));
                    rebuilt.extend_from_slice(bytes);
                    if *terminated {
                        rebuilt.push(b'\n');
                    }
                }
                LineChunk::Lines(bytes) => {
                    prop_assert!(bytes.ends_with(b"\n"));
                    for line in bytes[..bytes.len() - 1].split(|b| *b == b'\n') {
                        prop_assert!(line.len() <= max_line, "a whole line over the limit");
                    }
                    rebuilt.extend_from_slice(bytes);
                }
                LineChunk::Fragment { bytes, last, terminated } => {
                    prop_assert!(!bytes.contains(&b'\n'));
                    rebuilt.extend_from_slice(bytes);
                    if *last && *terminated {
                        rebuilt.push(b'\n');
                    }
                }
            }
        }
        prop_assert_eq!(rebuilt, input);
    }
}

/// One piece of a Content-Length stream.
#[derive(Debug, Clone)]
enum Piece {
    /// A valid frame with this body.
    Frame(Vec<u8>),
    /// Bytes that can never form a header: no `n`, so never `content-length`.
    Garbage(Vec<u8>),
}

fn piece() -> impl Strategy<Value = Piece> {
    let body = prop::collection::vec(any::<u8>(), 0..200);
    // No `n` or `N`: never `content-length`. Some bytes become header-ish.
    let garbage = prop::collection::vec(any::<u8>(), 1..300).prop_map(|bytes| {
        bytes
            .into_iter()
            .map(|b| match b % 8 {
                0 => b'\r',
                1 => b'\n',
                2 => b':',
                _ if b.eq_ignore_ascii_case(&b'n') => b'-',
                _ => b,
            })
            .collect()
    });
    prop_oneof![
        3 => body.prop_map(Piece::Frame),
        1 => garbage.prop_map(Piece::Garbage),
    ]
}

fn encode(pieces: &[Piece]) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Frame(body) => {
                out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
                out.extend_from_slice(body);
            }
            Piece::Garbage(bytes) => out.extend_from_slice(bytes),
        }
    }
    out
}

/// Decodes `input` fed `step` bytes at a time, then at end of input.
fn decode_all(input: &[u8], step: usize, limits: Limits) -> Vec<LspFrame> {
    let mut codec = ContentLengthCodec::new(limits);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for chunk in input.chunks(step.max(1)) {
        buf.extend_from_slice(chunk);
        while let Some(frame) = codec.decode(&mut buf).expect("the decoder never fails") {
            out.push(frame);
        }
    }
    while let Some(frame) = codec.decode_eof(&mut buf).ok().flatten() {
        out.push(frame);
        if buf.is_empty() {
            break;
        }
    }
    out
}

proptest! {
    #![proptest_config(config())]

    /// Content-Length: arbitrary bytes never panic the decoder, and what it
    /// skips plus what it delivers never exceeds the input.
    #[test]
    fn content_length_survives_arbitrary_bytes(
        input in (
            prop::collection::vec(any::<u8>(), 0..1000),
            prop::collection::vec((any::<prop::sample::Index>(), prop::sample::select(vec![
                &b"Content-Length: 12\r\n\r\n"[..],
                b"content-length:99999999999999999999\r\n\r\n",
                b"Content-Length: 3\r\nContent-Length: 2\r\n\r\n",
                b"\r\n\r\n",
                b"Content-Length: -1\r\n\r\n",
            ])), 0..6),
        ).prop_map(|(mut bytes, inserts)| {
            for (at, text) in inserts {
                let at = at.index(bytes.len() + 1);
                bytes.splice(at..at, text.iter().copied());
            }
            bytes
        }),
        step in 1usize..300,
        max_frame in 1usize..200,
    ) {
        let limits = Limits { max_lsp_frame: max_frame, max_header_bytes: 64, ..Limits::default() };
        let frames = decode_all(&input, step, limits);
        let mut accounted = 0usize;
        for frame in &frames {
            match frame {
                LspFrame::Message(body) => {
                    prop_assert!(body.len() <= max_frame);
                    accounted += body.len();
                }
                LspFrame::Malformed { skipped, .. } => accounted += skipped,
                LspFrame::Oversized { .. } => {}
            }
        }
        prop_assert!(accounted <= input.len());
    }

    /// Content-Length: valid frames mixed with garbage (that cannot hold a
    /// header) come out exactly, in order; nothing else is delivered (no
    /// false accept), whatever the read sizes.
    #[test]
    fn content_length_delivers_exactly_the_frames_sent(
        pieces in prop::collection::vec(piece(), 0..12),
        step in 1usize..400,
    ) {
        let input = encode(&pieces);
        let frames = decode_all(&input, step, Limits::default());
        let delivered: Vec<Vec<u8>> = frames
            .iter()
            .filter_map(|f| match f {
                LspFrame::Message(body) => Some(body.to_vec()),
                _ => None,
            })
            .collect();
        let sent: Vec<Vec<u8>> = pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Frame(body) => Some(body.clone()),
                Piece::Garbage(_) => None,
            })
            .collect();
        prop_assert_eq!(delivered, sent);
    }
}

// ------------------------------------------------------------- URIs

// The tree, the adversarial URIs and the oracle differ per OS: a Unix
// path and symlinks, or drive letters, UNC and device names, 8.3 short
// names and case-insensitive names.
#[cfg(unix)]
#[path = "fuzz/unix_uris.rs"]
mod uris;
#[cfg(windows)]
#[path = "fuzz/windows_uris.rs"]
mod uris;
use uris::{file_uri_in, inside, tree, uri};

proptest! {
    #![proptest_config(config())]

    /// Confinement: every URI `check_uri` accepts is inside the root by the
    /// oracle, and the path it returns is too; nothing panics.
    #[test]
    fn check_uri_never_accepts_a_uri_outside_the_root(
        uri in uri(tree())
    ) {
        let tree = tree();
        let confinement = Confinement::new(std::slice::from_ref(&tree.root), &[], &[]);
        let accepted = confinement.check_uri(&uri);
        report("check_uri: URIs accepted", &URI_RUNS, &URI_ACCEPTED, u64::from(accepted.is_ok()));
        if let Ok(found) = accepted {
            let path = found.ok_or_else(|| TestCaseError::fail(format!("{uri:?}: accepted as a non-file URI")))?;
            prop_assert!(path.starts_with(&tree.root), "{uri:?} → {}", path.display());
            inside(&uri, &tree.root).map_err(|why| TestCaseError::fail(format!("false accept {uri:?}: {why}")))?;
        }
    }
}

// ------------------------------------------------------------- gate params

/// A host that serves one server and records what reaches it.
#[derive(Default)]
struct Recorder {
    forwarded: Mutex<Vec<String>>,
}

impl LspHost for Recorder {
    async fn servers(&self, _session: &Session) -> Vec<ServerEntry> {
        Vec::new()
    }

    async fn request(&self, call: HostCall) -> Result<HostReply, GateError> {
        if call.server_id() != "srv" {
            return Err(GateError::UnknownServer {
                server_id: call.server_id().clone(),
                servers: Vec::new(),
            });
        }
        let call = call.route(&Route {
            execute_commands: vec!["allowed.command".into()],
            extension_methods: vec![],
            request_timeout: Duration::from_secs(5),
        })?;
        self.forwarded.lock().expect("lock").push(
            call.params
                .as_ref()
                .map_or_else(String::new, |p| p.get().to_string()),
        );
        Ok(HostReply {
            result: RawValue::from_string("null".into()).expect("JSON"),
            meta: None,
        })
    }
}

/// Any JSON, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
        Just(Value::from("file:///etc/passwd")),
        Just(Value::from("lsp/request")),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "uri",
                    "targetUri",
                    "changes",
                    "textDocument",
                    "sessionId",
                    "serverId",
                    "method",
                    "params",
                    "command",
                    "x",
                ])
                .prop_map(str::to_string),
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The URI-bearing strings of `params` a server would read as a location:
/// `uri`/`*Uri` values, `changes` keys and every string starting `file:`.
fn uri_strings(value: &Value, under_changes: bool, out: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            let t = s.trim_start_matches(|c: char| c.is_whitespace() || c.is_control());
            if t.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("file:")) {
                out.push(s.clone());
            }
        }
        Value::Array(items) => items.iter().for_each(|v| uri_strings(v, false, out)),
        Value::Object(map) => {
            for (key, v) in map {
                if under_changes {
                    out.push(key.clone());
                }
                if key == "uri" || key.ends_with("Uri") {
                    if let Value::String(s) = v {
                        out.push(s.clone());
                    }
                }
                uri_strings(v, key == "changes", out);
            }
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(config())]

    /// The gate with adversarial URIs at every place a URI hides: a request
    /// that reaches the host names only places inside the root (by the
    /// oracle); every call gets exactly one well-formed answer.
    #[test]
    fn the_gate_forwards_no_uri_outside_the_root(
        adversarial in uri(tree()),
        slot in 0usize..4,
        noise in any_json(),
        method in prop::sample::select(vec![
            "textDocument/hover", "textDocument/rename", "workspace/executeCommand",
            "textDocument/didOpen", "workspace/willRenameFiles", "$/cancelRequest",
        ]),
    ) {
        let tree = tree();
        // One adversarial URI in one of the places a URI hides; the others
        // name a file inside, so the request is forwarded whenever the
        // adversarial one is accepted.
        let fine = file_uri_in(&tree.root, "sub/file.rs");
        let mut uris = vec![fine; 4];
        uris[slot] = adversarial;
        let [u1, u2, u3, u4] = <[String; 4]>::try_from(uris).expect("four");
        let rt = runtime();
        let host = Arc::new(Recorder::default());
        let gate = Gate::new(Arc::clone(&host), GateConfig::default());
        gate.open_session("s", vec![tree.root.clone()]);
        let inner = json!({
            "textDocument": {"uri": u1},
            "position": {"line": 0, "character": 0},
            "command": "allowed.command",
            "arguments": [{"targetUri": u2}, [u3.clone()]],
            "edit": {"changes": {u4.clone(): []}},
            "noise": noise,
        });
        let params = json!({"sessionId": "s", "serverId": "srv", "method": method, "params": inner});
        let raw = serde_json::value::to_raw_value(&params).expect("JSON");
        let bytes = rt.block_on(gate.call(RequestId::from_u64(7), GateMethod::Request, Some(raw)));
        let answer: Value = serde_json::from_slice(&bytes).map_err(|e| TestCaseError::fail(format!("not JSON: {e}")))?;
        prop_assert_eq!(&answer["id"], &json!(7));
        prop_assert!(answer.get("result").is_some() != answer.get("error").is_some(), "{}", answer);
        if let Some(error) = answer.get("error") {
            prop_assert!(error["data"]["reason"].is_string(), "{}", answer);
        }
        let forwarded_now = host.forwarded.lock().expect("lock").len() as u64;
        report("gate: requests forwarded", &GATE_RUNS, &GATE_FORWARDED, forwarded_now);
        for forwarded in host.forwarded.lock().expect("lock").iter() {
            let value: Value = serde_json::from_str(forwarded).expect("forwarded params are JSON");
            let mut uris = Vec::new();
            uri_strings(&value, false, &mut uris);
            for uri in uris {
                inside(&uri, &tree.root)
                    .map_err(|why| TestCaseError::fail(format!("forwarded {uri:?}: {why}")))?;
            }
        }
    }

    /// The gate on arbitrary params (any JSON) for each of its methods:
    /// exactly one answer with the request's id, a reason on every error.
    #[test]
    fn the_gate_answers_any_params_once(
        params in any_json(),
        method in prop::sample::select(vec![GateMethod::Servers, GateMethod::Request, GateMethod::Diagnostics]),
    ) {
        let rt = runtime();
        let host = Arc::new(Recorder::default());
        let gate = Gate::new(Arc::clone(&host), GateConfig::default());
        gate.open_session("s", vec![PathBuf::from("/nonexistent/root")]);
        let raw = serde_json::value::to_raw_value(&params).expect("JSON");
        let bytes = rt.block_on(gate.call(RequestId::from_u64(9), method, Some(raw)));
        let answer: Value = serde_json::from_slice(&bytes).map_err(|e| TestCaseError::fail(format!("not JSON: {e}")))?;
        prop_assert_eq!(&answer["id"], &json!(9));
        prop_assert!(answer.get("result").is_some() != answer.get("error").is_some(), "{}", answer);
        if let Some(error) = answer.get("error") {
            prop_assert!(error["data"]["reason"].is_string(), "{}", answer);
        }
    }
}

/// The URI generator exercises both sides: a fixed-seed sample of it holds
/// URIs the confinement accepts and URIs it refuses (so "no false accept"
/// above is not vacuous). Prints the split.
#[test]
fn the_uri_generator_produces_accepted_and_refused_uris() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};
    const SAMPLE: usize = 5_000;
    let tree = tree();
    let confinement = Confinement::new(std::slice::from_ref(&tree.root), &[], &[]);
    let mut runner = TestRunner::new_with_rng(
        ProptestConfig::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let strategy = uri(tree);
    let accepted = (0..SAMPLE)
        .filter(|_| {
            let uri = strategy.new_tree(&mut runner).expect("a value").current();
            confinement.check_uri(&uri).is_ok()
        })
        .count();
    eprintln!("URI generator: {accepted} of {SAMPLE} accepted");
    assert!(accepted > SAMPLE / 20, "{accepted} of {SAMPLE} accepted");
    assert!(
        accepted < SAMPLE * 19 / 20,
        "{accepted} of {SAMPLE} accepted"
    );
}
