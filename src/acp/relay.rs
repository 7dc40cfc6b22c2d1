//! The relay: editor ⇄ proxy ⇄ agent, newline-delimited JSON-RPC both ways.
//!
//! Every line is forwarded as the exact bytes that arrived, in order, except:
//! the editor's `initialize` request (gains the `lsp` capability), the
//! editor's session requests (gain acp-lsp's MCP server in `mcpServers`,
//! unless `--mcp off`), the agent's requests to the gate (answered here,
//! never forwarded), the agent's `$/cancel_request` for one of those, and the
//! editor's answers to acp-lsp's own requests (consumed). Session lifecycle,
//! the agent's `initialize` answer and `fs/write_text_file` are observed on
//! the way through.

use super::initialize::rewrite_initialize;
use super::sessions::{result_session_id, session_op, SessionOp};
use super::writer::{output, Outgoing, Output, Sink};
use crate::gate::error::{GateError, INVALID_REQUEST, PARSE_ERROR};
use crate::gate::{Gate, GateMethod, LspHost};
use crate::jsonrpc::ndjson::{LineChunk, LineReader};
use crate::jsonrpc::{
    self, depth, first_significant_byte, shallow, Envelope, ErrorObject, Kind, Outcome, RequestId,
};
use crate::mcp::inject::{carries_mcp_servers, inject};
use crate::mcp::McpRelay;
use crate::record::{Direction, Recorder};
use bytes::Bytes;
use futures::future::{join_all, BoxFuture};
use futures::FutureExt;
use parking_lot::{Mutex, MutexGuard};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::AsyncRead;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod inspect;

use inspect::{
    agent_takes_mcp_http, answer_error, cancelled_request_id, editor_writes_files, join_array,
    names_gate_method,
};

/// Who answers the agent's `lsp/*` calls when the editor advertises `lsp` itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LspMode {
    /// Pass them to the editor when it advertises `lsp` (its servers know unsaved buffers); answer otherwise.
    #[default]
    Auto,
    /// Always answer them here.
    Own,
}

/// How the relay behaves.
#[derive(Clone, Default)]
pub struct RelayOptions {
    pub lsp_mode: LspMode,
    pub recorder: Option<Recorder>,
    /// Inject acp-lsp's MCP server into session requests (`None`: `--mcp=off`).
    pub mcp: Option<McpRelay>,
}

/// How the relay ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayEnd {
    /// The agent closed its output (it exited).
    AgentClosed,
    /// The editor stopped reading our output.
    EditorGone,
}

/// A request the agent sent the editor that the relay watches for its answer.
enum AgentRequest {
    WriteTextFile { line: Bytes },
}

/// A session request of the editor awaiting the agent's answer.
struct PendingSession {
    op: Option<SessionOp>,
    /// The MCP token injected into it, bound to the session on success.
    token: Option<String>,
}

struct State {
    /// Whether the gate answers the agent's `lsp/*` calls.
    answer_lsp: bool,
    /// The editor's `initialize` request, whose answer says what MCP
    /// transports the agent takes.
    initialize_id: Option<RequestId>,
    /// The agent's `initialize` answer advertised `mcpCapabilities.http`.
    agent_mcp_http: bool,
    /// Editor request id → session lifecycle request awaiting the agent's answer.
    editor_requests: HashMap<RequestId, PendingSession>,
    /// Agent request id → request awaiting the editor's answer.
    agent_requests: HashMap<RequestId, AgentRequest>,
}

struct Relay<H> {
    gate: Arc<Gate<H>>,
    options: RelayOptions,
    state: Mutex<State>,
    to_agent: Sink,
    to_editor: Sink,
    /// The tasks answering the agent's calls (see [`Relay::answer`]).
    answers: TaskTracker,
    /// Cancelled when the agent or the editor goes away: every answer task
    /// then ends at once, dropping its gate future (and so the host's
    /// request, which tells its server), instead of running to its deadline.
    shutdown: CancellationToken,
}

/// What to do with one message.
enum Action {
    Forward,
    Replace(Vec<u8>),
    /// Answered by the gate (or at once); nothing is forwarded.
    Answer(BoxFuture<'static, Vec<u8>>),
    /// Consumed here; nothing is forwarded or answered.
    Swallow,
}

/// Runs the relay until the agent's output ends or the editor stops reading.
///
/// `editor_eof` is called once the editor's input ends (the agent's input is
/// then closed; the caller bounds how long the agent may take to exit).
/// Answers still in flight when the editor's input ends or the relay ends
/// are cancelled (their host requests dropped), so the relay returns at
/// once instead of at the deadline of a request nobody can receive.
pub async fn run<H, EI, EO, AI, AO>(
    gate: Arc<Gate<H>>,
    editor_in: EI,
    editor_out: EO,
    agent_in: AI,
    agent_out: AO,
    options: RelayOptions,
    editor_eof: impl FnOnce() + Send + 'static,
) -> RelayEnd
where
    H: LspHost,
    EI: AsyncRead + Unpin + Send + 'static,
    EO: Into<Output>,
    AI: Into<Output>,
    AO: AsyncRead + Unpin + Send + 'static,
{
    let recorder = options.recorder.clone();
    let (to_agent, agent_writer) = output(
        agent_in.into(),
        recorder.clone().map(|r| (r, Direction::ProxyToAgent)),
    );
    let (to_editor, editor_writer) = output(
        editor_out.into(),
        recorder.clone().map(|r| (r, Direction::ProxyToEditor)),
    );
    let max_line = gate.limits().max_inspected_line;
    let relay = Arc::new(Relay {
        gate,
        options,
        state: Mutex::new(State {
            answer_lsp: true,
            initialize_id: None,
            agent_mcp_http: false,
            editor_requests: HashMap::new(),
            agent_requests: HashMap::new(),
        }),
        to_agent,
        to_editor,
        answers: TaskTracker::new(),
        shutdown: CancellationToken::new(),
    });

    let agent_writer = tokio::spawn(agent_writer);
    let editor_writer = tokio::spawn(editor_writer);
    // Requests acp-lsp itself sends the editor (the MCP tools' fs/* calls).
    let editor_outbox = relay
        .options
        .mcp
        .as_ref()
        .and_then(|mcp| mcp.editor.take_outbox())
        .map(|mut outbox| {
            let to_editor = relay.to_editor.clone();
            tokio::spawn(async move {
                while let Some(line) = outbox.recv().await {
                    if to_editor.send(Outgoing::line(line)).await.is_err() {
                        break;
                    }
                }
            })
        });

    let from_editor = {
        let relay = Arc::clone(&relay);
        tokio::spawn(async move {
            relay.pump(editor_in, max_line, Side::Editor).await;
            if let Some(recorder) = &relay.options.recorder {
                recorder.event(&Direction::EditorToProxy, "eof", &[]);
            }
            // Tell the caller first: closing below waits for queue room, and
            // an agent that stopped reading must not delay the caller's grace period.
            editor_eof();
            // Other senders of `to_agent` (the relay itself, in-flight
            // answers) outlive the editor, so dropping ours would not end the
            // agent's input; an explicit close after the forwarded lines does.
            let _ = relay.to_agent.send(Outgoing::Close).await;
            // Answers still on their way could not reach the agent now.
            relay.shutdown.cancel();
        })
    };
    let end = relay.pump(agent_out, max_line, Side::Agent).await;
    from_editor.abort();
    // The agent or the editor is gone: no answer in flight can be delivered.
    relay.shutdown.cancel();
    relay.answers.close();
    relay.answers.wait().await;
    // It holds a sender to the editor's writer, which must end now.
    if let Some(task) = editor_outbox {
        task.abort();
    }
    // Dropping the last senders lets both writers drain and finish.
    drop(relay);
    let _ = agent_writer.await;
    let editor_result = editor_writer.await;
    match (end, editor_result) {
        (RelayEnd::AgentClosed, Ok(Ok(()))) => RelayEnd::AgentClosed,
        _ => RelayEnd::EditorGone,
    }
}

/// How much of the previous piece of a streamed agent line is scanned again
/// with the next: a `"method": "…"` member split between two pieces is
/// still seen whole (escapes make it at most a few hundred bytes, unless
/// padded with whitespace).
const FRAGMENT_OVERLAP: usize = 4096;

/// The agent line being streamed in pieces.
#[derive(Default)]
struct Streamed {
    /// Pieces seen so far.
    pieces: usize,
    /// It named a gate method: the rest is dropped.
    cut: bool,
    /// The end of the last piece, scanned again with the next.
    tail: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Editor,
    Agent,
}

impl<H: LspHost> Relay<H> {
    fn sink(&self, side: Side) -> &Sink {
        match side {
            Side::Editor => &self.to_agent,
            Side::Agent => &self.to_editor,
        }
    }

    fn record_in(&self, side: Side, bytes: &[u8], fragment: bool) {
        if let Some(rec) = &self.options.recorder {
            let dir = match side {
                Side::Editor => Direction::EditorToProxy,
                Side::Agent => Direction::AgentToProxy,
            };
            if fragment {
                rec.fragment(&dir, bytes);
            } else {
                rec.message(&dir, bytes);
            }
        }
    }

    /// Reads one side until it ends, forwarding to the other.
    async fn pump<R: AsyncRead + Unpin>(
        self: &Arc<Self>,
        input: R,
        max_line: usize,
        side: Side,
    ) -> RelayEnd {
        let mut reader = LineReader::new(input, max_line);
        // The agent's line being streamed, if any (see `on_agent_fragment`).
        let mut streamed = Streamed::default();
        loop {
            let chunk = match reader.next_batch().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => return RelayEnd::AgentClosed,
                Err(e) => {
                    tracing::warn!(?side, error = %e, "read failed");
                    return RelayEnd::AgentClosed;
                }
            };
            let sent = match chunk {
                LineChunk::Lines(bytes) => self.on_lines(side, bytes).await,
                LineChunk::Line { bytes, terminated } => {
                    self.record_in(side, &bytes, false);
                    self.on_line(side, bytes, terminated).await
                }
                LineChunk::Fragment {
                    bytes,
                    last,
                    terminated,
                } => {
                    // Too long to inspect: streamed straight through, but
                    // from the agent only as long as it names no gate method.
                    self.record_in(side, &bytes, true);
                    let fragment = Outgoing::Fragment {
                        bytes,
                        last,
                        terminated,
                    };
                    match side {
                        Side::Agent => self.on_agent_fragment(&mut streamed, fragment).await,
                        Side::Editor => self.sink(side).send(fragment).await.is_ok(),
                    }
                }
            };
            if !sent {
                return RelayEnd::EditorGone;
            }
        }
    }

    /// One piece of an agent line too long to inspect. Each piece is
    /// scanned (with the end of the one before, so that a member split
    /// between two is seen) before it is forwarded; once one names a gate
    /// method, the rest of the line is dropped and the agent gets an error
    /// (`params_too_large`). What was already forwarded ends there, a cut
    /// line no parser takes for a request; a line named ours in its first
    /// piece reaches the editor not at all. Returns false when the output
    /// is gone.
    async fn on_agent_fragment(&self, streamed: &mut Streamed, fragment: Outgoing) -> bool {
        let Outgoing::Fragment {
            bytes,
            last,
            terminated,
        } = fragment
        else {
            return self.to_editor.send(fragment).await.is_ok();
        };
        let first = streamed.pieces == 0;
        streamed.pieces += 1;
        let mut sent = true;
        if !streamed.cut {
            let mut scanned = std::mem::take(&mut streamed.tail);
            scanned.extend_from_slice(&bytes);
            // Past the first piece, the scan starts mid-line, maybe inside
            // a string: both readings (inside and outside) are scanned.
            let named = names_gate_method(&scanned)
                || (!first && names_gate_method(&[b"\"".as_slice(), &scanned].concat()));
            if named {
                streamed.cut = true;
                let id = first
                    .then(|| shallow::lossy_top_level_id(&scanned))
                    .flatten()
                    .and_then(|text| serde_json::from_str::<Box<RawValue>>(&text).ok())
                    .filter(|raw| !jsonrpc::is_null(raw))
                    .map(|raw| RequestId::from_raw(&raw));
                let limit = self.gate.limits().max_intercepted_params;
                let error = GateError::ParamsTooLarge { limit }.to_error_object(None);
                self.answer(answer_error(id, error));
                if !first {
                    sent = self
                        .to_editor
                        .send(Outgoing::Fragment {
                            bytes: Bytes::new(),
                            last: true,
                            terminated: true,
                        })
                        .await
                        .is_ok();
                }
            } else {
                let keep = scanned.len().saturating_sub(FRAGMENT_OVERLAP);
                streamed.tail = scanned.split_off(keep);
                sent = self
                    .to_editor
                    .send(Outgoing::Fragment {
                        bytes,
                        last,
                        terminated,
                    })
                    .await
                    .is_ok();
            }
        }
        if last {
            *streamed = Streamed::default();
        }
        sent
    }

    /// Handles the whole lines one read brought in, each with its `\n`. Runs
    /// of lines that are plainly not ours ([`shallow::plainly_not_ours`]: no
    /// id, no gate, `fs/*` or cancel method in any reading) leave as one
    /// message, the bytes as read; every other line goes through
    /// [`Relay::on_line`] in its place, so the order is kept. Returns false
    /// when the output is gone.
    async fn on_lines(self: &Arc<Self>, side: Side, bytes: Bytes) -> bool {
        // The common case first: one pass over the whole read. The scan
        // only ever says "not ours" of a span whose every line it would
        // pass alone (a line's checks see the same bytes; an escape cannot
        // pair across a newline), so the read leaves as it came.
        if self.options.recorder.is_none() && shallow::plainly_not_ours(&bytes) {
            return self.sink(side).send(Outgoing::Lines(bytes)).await.is_ok();
        }
        let mut run_start = 0;
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', &bytes) {
            let line = &bytes[start..end];
            self.record_in(side, line, false);
            if !shallow::plainly_not_ours(line) {
                if run_start < start
                    && self
                        .sink(side)
                        .send(Outgoing::Lines(bytes.slice(run_start..start)))
                        .await
                        .is_err()
                {
                    return false;
                }
                if !self.on_line(side, bytes.slice(start..end), true).await {
                    return false;
                }
                run_start = end + 1;
            }
            start = end + 1;
        }
        run_start == start
            || self
                .sink(side)
                .send(Outgoing::Lines(bytes.slice(run_start..start)))
                .await
                .is_ok()
    }

    /// Handles one whole line. Returns false when the output is gone.
    async fn on_line(self: &Arc<Self>, side: Side, bytes: Bytes, terminated: bool) -> bool {
        let forward = |bytes: Bytes| Outgoing::Line { bytes, terminated };
        match first_significant_byte(&bytes) {
            Some(b'{') => match self.inspect(side, &bytes) {
                Action::Forward => self.sink(side).send(forward(bytes)).await.is_ok(),
                Action::Replace(new) => self.sink(side).send(forward(new.into())).await.is_ok(),
                Action::Answer(answer) => self.answer(answer),
                Action::Swallow => true,
            },
            Some(b'[') => self.on_batch(side, bytes, terminated).await,
            // Not JSON-RPC, unless a lenient reader skips what comes first
            // (a byte order mark): ours is answered all the same.
            _ if side == Side::Agent => match self.unparsable_from_agent(&bytes) {
                Action::Answer(answer) => self.answer(answer),
                _ => self.sink(side).send(forward(bytes)).await.is_ok(),
            },
            _ => self.sink(side).send(forward(bytes)).await.is_ok(),
        }
    }

    /// Sends `answer` to the agent once it is ready.
    fn answer(&self, answer: BoxFuture<'static, Vec<u8>>) -> bool {
        let to_agent = self.to_agent.clone();
        self.spawn_answer(async move {
            let response = answer.await;
            let _ = to_agent.send(Outgoing::line(response)).await;
        });
        true
    }

    /// Runs one answer task, tracked, until it is done or the relay shuts
    /// down. A gate future answers even when its host panics
    /// ([`Gate::call`]), so a task ends in a response or in the shutdown.
    fn spawn_answer(&self, task: impl Future<Output = ()> + Send + 'static) {
        let shutdown = self.shutdown.clone();
        self.answers.spawn(async move {
            shutdown.run_until_cancelled(task).await;
        });
    }

    /// A batch line (ACP v2): each element is handled as a message; elements
    /// for the other side leave as one array, our answers return as one array.
    async fn on_batch(self: &Arc<Self>, side: Side, bytes: Bytes, terminated: bool) -> bool {
        let Ok(elements) = serde_json::from_slice::<Vec<&RawValue>>(&bytes) else {
            if side == Side::Agent {
                if let Action::Answer(answer) = self.unparsable_batch_from_agent(&bytes) {
                    return self.answer(answer);
                }
            }
            return self
                .sink(side)
                .send(Outgoing::Line { bytes, terminated })
                .await
                .is_ok();
        };
        let mut changed = false;
        let mut forwarded: Vec<Vec<u8>> = Vec::with_capacity(elements.len());
        let mut answers = Vec::new();
        for element in &elements {
            let text = element.get().as_bytes();
            match self.inspect(side, text) {
                Action::Forward => forwarded.push(text.to_vec()),
                Action::Replace(new) => {
                    changed = true;
                    forwarded.push(new);
                }
                Action::Answer(answer) => {
                    changed = true;
                    answers.push(answer);
                }
                Action::Swallow => changed = true,
            }
        }
        if !answers.is_empty() {
            let to_agent = self.to_agent.clone();
            self.spawn_answer(async move {
                let responses = join_all(answers).await;
                let _ = to_agent.send(Outgoing::line(join_array(&responses))).await;
            });
        }
        if !changed {
            return self
                .sink(side)
                .send(Outgoing::Line { bytes, terminated })
                .await
                .is_ok();
        }
        if forwarded.is_empty() {
            return true;
        }
        self.sink(side)
            .send(Outgoing::Line {
                bytes: join_array(&forwarded).into(),
                terminated,
            })
            .await
            .is_ok()
    }

    fn inspect(&self, side: Side, bytes: &[u8]) -> Action {
        let envelope = match Envelope::parse(bytes) {
            Ok(envelope) => envelope,
            Err(_) if side == Side::Agent => return self.unparsable_from_agent(bytes),
            Err(_) => return Action::Forward,
        };
        let Some(kind) = envelope.kind() else {
            return Action::Forward;
        };
        match side {
            Side::Editor => self.inspect_from_editor(bytes, kind),
            Side::Agent => self.inspect_from_agent(bytes, kind),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    fn inspect_from_editor(&self, bytes: &[u8], kind: Kind<'_>) -> Action {
        match kind {
            Kind::Request { id, method, params } => {
                if method == "initialize" {
                    let Some(rewrite) = rewrite_initialize(bytes) else {
                        return Action::Forward;
                    };
                    let answer_lsp =
                        !rewrite.editor_has_lsp || self.options.lsp_mode == LspMode::Own;
                    {
                        let mut state = self.lock();
                        state.answer_lsp = answer_lsp;
                        state.initialize_id = Some(id);
                    }
                    tracing::info!(
                        protocol_version = rewrite.protocol_version,
                        editor_has_lsp = rewrite.editor_has_lsp,
                        answer_lsp,
                        "initialize"
                    );
                    if let Some(mcp) = &self.options.mcp {
                        mcp.editor.set_enabled(editor_writes_files(bytes));
                    }
                    if rewrite.editor_has_lsp {
                        return Action::Forward;
                    }
                    return Action::Replace(rewrite.message);
                }
                let op = session_op(&method, params);
                let mut injected = None;
                if let (Some(mcp), Some(_)) = (&self.options.mcp, &op) {
                    if carries_mcp_servers(&method) {
                        injected = self.inject_mcp(mcp, bytes);
                    }
                }
                let (token, message) = injected.unzip();
                if op.is_some() {
                    self.lock()
                        .editor_requests
                        .insert(id, PendingSession { op, token });
                }
                match message {
                    Some(message) => Action::Replace(message),
                    None => Action::Forward,
                }
            }
            Kind::Response { id, outcome } => {
                if let Some(mcp) = &self.options.mcp {
                    let reply = match outcome {
                        Outcome::Result(result) => Ok(result.to_owned()),
                        Outcome::Error(error) => Err(error.to_owned()),
                    };
                    if mcp.editor.on_response(&id, reply) {
                        return Action::Swallow;
                    }
                }
                let watched = self.lock().agent_requests.remove(&id);
                if let (Some(AgentRequest::WriteTextFile { line }), Outcome::Result(_)) =
                    (watched, outcome)
                {
                    self.text_written(&line);
                }
                Action::Forward
            }
            Kind::Notification { .. } => Action::Forward,
        }
    }

    fn inspect_from_agent(&self, bytes: &[u8], kind: Kind<'_>) -> Action {
        match kind {
            Kind::Request { id, method, params } => {
                if self
                    .options
                    .mcp
                    .as_ref()
                    .is_some_and(|mcp| mcp.editor.is_ours(&id))
                {
                    // The editor's answer would be ambiguous.
                    let error = ErrorObject::with_reason(
                        INVALID_REQUEST,
                        "this request id is in use by a request of acp-lsp's",
                        "id_in_use",
                    );
                    let response = jsonrpc::encode_error(Some(&id), &error);
                    return Action::Answer(async move { response }.boxed());
                }
                if let Some(gate_method) = GateMethod::from_acp(&method) {
                    if self.lock().answer_lsp {
                        let params = params.map(ToOwned::to_owned);
                        return Action::Answer(self.gate.call(id, gate_method, params).boxed());
                    }
                }
                if method == "fs/write_text_file" {
                    self.lock().agent_requests.insert(
                        id,
                        AgentRequest::WriteTextFile {
                            line: Bytes::copy_from_slice(bytes),
                        },
                    );
                }
                Action::Forward
            }
            Kind::Notification { method, params } => {
                if GateMethod::from_acp(&method).is_some() && self.lock().answer_lsp {
                    // A call of ours without an id (or with `"id": null`)
                    // cannot be answered as a request; it is still ours,
                    // and the editor must not run it.
                    let error = ErrorObject::with_reason(
                        INVALID_REQUEST,
                        format!("{method} is a request: it needs an id"),
                        "invalid_request",
                    );
                    return Action::Answer(answer_error(None, error));
                }
                if method == "$/cancel_request" {
                    if let Some(id) = cancelled_request_id(params) {
                        if self.gate.cancel(&id) {
                            return Action::Swallow;
                        }
                    }
                }
                Action::Forward
            }
            Kind::Response { id, outcome } => {
                if self.options.mcp.is_some() {
                    let mut state = self.lock();
                    if state.initialize_id.as_ref() == Some(&id) {
                        state.initialize_id = None;
                        if let Outcome::Result(result) = outcome {
                            state.agent_mcp_http = agent_takes_mcp_http(result);
                        }
                    }
                }
                let Some(pending) = self.lock().editor_requests.remove(&id) else {
                    return Action::Forward;
                };
                let committed = match (pending.op, outcome) {
                    (Some(op), Outcome::Result(result)) => self.commit_session(op, result),
                    _ => None,
                };
                if let (Some(mcp), Some(token)) = (&self.options.mcp, pending.token) {
                    match committed {
                        Some(session_id) => {
                            mcp.tokens.bind(&token, &session_id);
                            tracing::info!(session = %session_id, "MCP server injected");
                        }
                        None => mcp.tokens.revoke(&token),
                    }
                }
                Action::Forward
            }
        }
    }

    /// A line from the agent that does not parse as a message. If any
    /// reading of it names a gate method ([`names_gate_method`]), it is
    /// answered here with an error, whoever answers `lsp/*` otherwise: a
    /// lenient editor could read it as a call and run it unconfined. Else it
    /// is forwarded untouched (it is the editor's business).
    fn unparsable_from_agent(&self, bytes: &[u8]) -> Action {
        if !names_gate_method(bytes) {
            return Action::Forward;
        }
        let id = shallow::lossy_top_level_id(bytes)
            .and_then(|text| serde_json::from_str::<Box<RawValue>>(&text).ok())
            .filter(|raw| !jsonrpc::is_null(raw))
            .map(|raw| RequestId::from_raw(&raw));
        let limit = self.gate.limits().max_depth;
        let error = if depth::max_depth(bytes, limit + 1) > limit + 1 {
            let e = GateError::TooDeep { limit };
            e.to_error_object(None)
        } else if let Some(key) = std::str::from_utf8(bytes)
            .ok()
            .and_then(depth::duplicate_key)
        {
            GateError::DuplicateKeys { key }.to_error_object(None)
        } else {
            ErrorObject::with_reason(PARSE_ERROR, "the request is not valid JSON", "parse_error")
        };
        Action::Answer(answer_error(id, error))
    }

    /// A batch line from the agent that does not parse: one error with a
    /// null id when a reading of it names a gate method, else forwarded.
    fn unparsable_batch_from_agent(&self, bytes: &[u8]) -> Action {
        if !names_gate_method(bytes) {
            return Action::Forward;
        }
        let error =
            ErrorObject::with_reason(PARSE_ERROR, "the batch is not valid JSON", "parse_error");
        Action::Answer(answer_error(None, error))
    }

    /// Commits a successful session request; returns the id of the session
    /// it opened, if any.
    fn commit_session(&self, op: SessionOp, result: &RawValue) -> Option<String> {
        let sessions = self.gate.sessions();
        match op {
            SessionOp::New { roots } => {
                let id = result_session_id(result)?;
                self.gate.open_session(&id, roots);
                Some(id)
            }
            SessionOp::Fork { source, roots } => {
                let roots = roots.or_else(|| sessions.get(&source).map(|s| s.roots().to_vec()));
                let (id, roots) = (result_session_id(result)?, roots?);
                self.gate.open_session(&id, roots);
                Some(id)
            }
            SessionOp::Reopen { session_id, roots } => {
                let roots =
                    roots.or_else(|| sessions.get(&session_id).map(|s| s.roots().to_vec()))?;
                self.gate.open_session(&session_id, roots);
                Some(session_id)
            }
            SessionOp::Close { session_id } => {
                self.gate.close_session(&session_id);
                if let Some(mcp) = &self.options.mcp {
                    mcp.tokens.revoke_session(&session_id);
                }
                None
            }
        }
    }

    /// Adds acp-lsp's MCP server to a session request. Returns the token and
    /// the rewritten message, or `None` when the request is left as it is.
    fn inject_mcp(&self, mcp: &McpRelay, bytes: &[u8]) -> Option<(String, Vec<u8>)> {
        let token = match mcp.tokens.create(None) {
            Ok(token) => token,
            Err(e) => {
                tracing::warn!(error = %e, "no MCP token: entry not injected");
                return None;
            }
        };
        let (entry, transport) = match &mcp.http {
            Some(http) if self.lock().agent_mcp_http => (http.to_json(&token), "http"),
            _ => (mcp.entry.to_json(&token), "stdio"),
        };
        tracing::debug!(transport, "MCP entry added to a session request");
        match inject(bytes, &entry) {
            Ok(message) => Some((token, message)),
            Err(skip) => {
                tracing::debug!(?skip, "MCP entry not injected");
                mcp.tokens.revoke(&token);
                None
            }
        }
    }

    /// The editor confirmed an `fs/write_text_file`: tell the host the new text.
    fn text_written(&self, request_line: &[u8]) {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Write {
            session_id: String,
            path: PathBuf,
            content: String,
        }
        #[derive(Deserialize)]
        struct Request {
            params: Write,
        }
        if let Ok(request) = serde_json::from_slice::<Request>(request_line) {
            let write = request.params;
            // Before the servers see the text: the edit's baseline is what
            // was known until now (`diagnostics {since: "last_edit"}`).
            if let Some(mcp) = &self.options.mcp {
                mcp.editor.journal().wrote(
                    &write.session_id,
                    std::slice::from_ref(&write.path),
                    crate::mcp::journal::Writer::Agent,
                );
            }
            if let Some(session) = self.gate.sessions().get(&write.session_id) {
                self.gate
                    .host()
                    .text_written(&session, &write.path, &write.content);
            }
        }
    }
}
