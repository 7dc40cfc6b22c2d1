//! In-process tests of the relay and the gate: `acp_lsp::acp::relay::run` is
//! driven over `tokio::io::duplex` pairs, the test playing both the editor
//! (writes `editor_in`, reads `editor_out`) and the agent (reads `agent_in`,
//! writes `agent_out`), over a scripted fake [`LspHost`] that records every
//! call it gets.
//!
//! No test sleeps to synchronise: "nothing was forwarded" is shown by sending
//! a sentinel behind the message and checking the sentinel is the next line
//! the other side reads (both directions keep their order).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acp_lsp::acp::relay::{self, LspMode, RelayEnd, RelayOptions};
use acp_lsp_core::gate::{
    AcpLspEntry, EntryMeta, Gate, GateConfig, GateError, HostCall, HostReply, LspHost, Route,
    ServerEntry, ServerState, Session, State,
};
use acp_lsp_core::jsonrpc::Limits;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::io::{duplex, AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::{oneshot, Notify};
use tokio::task::JoinHandle;
use tokio::time::timeout;

/// Longest wait for one line (or one end) before the test fails instead of hanging.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the backpressure test lets the agent write before checking it stalled.
const STALL_WAIT: Duration = Duration::from_millis(500);
/// Buffer of each duplex pipe unless a test asks for another.
const PIPE_BUFFER: usize = 64 * 1024;

// ---------------------------------------------------------------------------
// The scripted host
// ---------------------------------------------------------------------------

/// What `route` answers.
#[derive(Clone)]
enum RouteScript {
    Ok {
        execute_commands: Vec<String>,
        request_timeout: Duration,
    },
    UnknownServer,
}

/// What `request` does.
#[derive(Clone)]
enum ReplyScript {
    /// Answers this raw result.
    Result(String),
    /// Fails with this raw LSP error object.
    LspError(String),
    /// Waits for the cancel token, then fails with `Cancelled`.
    WaitForCancel,
    /// Never answers.
    Never,
    /// Panics (a bug in a host), after recording the call.
    Panic,
}

/// One `request` the host got.
#[derive(Debug, Clone, PartialEq)]
struct Recorded {
    session: String,
    server_id: String,
    method: String,
    params: Option<String>,
}

struct Script {
    servers: Vec<ServerEntry>,
    route: RouteScript,
    reply: ReplyScript,
}

struct FakeHost {
    script: Mutex<Script>,
    calls: Mutex<Vec<Recorded>>,
    routes: Mutex<Vec<(String, String)>>,
    opened: Mutex<Vec<(String, Vec<PathBuf>)>>,
    closed: Mutex<Vec<String>>,
    written: Mutex<Vec<(String, PathBuf, String)>>,
    /// Signalled each time `request` is entered.
    call_arrived: Notify,
    /// When set, `text_written` blocks (synchronously, as the relay's caller
    /// would) until a message arrives here, after recording the write.
    write_gate: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    /// Signalled each time `text_written` has recorded a write.
    write_recorded: Notify,
    /// `request` futures dropped before they answered (the gate gave up on
    /// them: deadline, or the relay ending).
    abandoned: AtomicUsize,
    /// Signalled each time a `request` future is dropped unanswered.
    request_abandoned: Notify,
}

/// Counts a `request` future dropped before it answered.
struct Abandoned<'a> {
    host: &'a FakeHost,
    answered: bool,
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.host.abandoned.fetch_add(1, Ordering::SeqCst);
            self.host.request_abandoned.notify_one();
        }
    }
}

/// A fixture path written the Unix way (`/ws/proj`) as an absolute path of
/// this OS: itself on Unix, `C:\ws\proj` on Windows, where a path with no
/// drive is not absolute and the gate rightly refuses what lies under it.
fn os_path(unix: &str) -> String {
    if cfg!(windows) {
        format!("C:{}", unix.replace('/', "\\"))
    } else {
        unix.to_string()
    }
}

/// The file URI of [`os_path`]: `file:///ws/proj/a.rs` on Unix,
/// `file:///C:/ws/proj/a.rs` on Windows.
fn os_uri(unix: &str) -> String {
    if cfg!(windows) {
        format!("file:///C:{unix}")
    } else {
        format!("file://{unix}")
    }
}

/// [`os_path`] as a JSON string, quoted and escaped, for raw request lines.
fn os_json(unix: &str) -> String {
    Value::from(os_path(unix)).to_string()
}

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_string()).expect("test JSON is valid")
}

fn server_entry(id: &str) -> ServerEntry {
    ServerEntry {
        server_id: id.into(),
        name: "fake-analyzer".into(),
        workspace_path: "/ws/proj".into(),
        language_id: "rust".into(),
        file_extensions: vec!["rs".into()],
        state: State::Running,
        capabilities: raw(r#"{"hoverProvider":true}"#),
        meta: EntryMeta {
            acp_lsp: AcpLspEntry {
                status: ServerState::Ready,
                progress: None,
                last_error: None,
                language_ids: vec!["rust".into()],
                version: Some("1.0".into()),
                position_encoding: "utf-16".into(),
                execute_commands: vec![],
                extension_methods: vec![],
                registrations: vec![],
                pid: None,
                restarts: 0,
                memory_bytes: None,
                degraded_roots: vec![],
                dropped: None,
                state_reason: None,
                companion: false,
                install_command: None,
            },
        },
    }
}

impl FakeHost {
    fn new() -> Arc<FakeHost> {
        Arc::new(FakeHost {
            script: Mutex::new(Script {
                servers: vec![server_entry("rust-analyzer")],
                route: RouteScript::Ok {
                    execute_commands: vec![],
                    request_timeout: Duration::from_secs(30),
                },
                reply: ReplyScript::Result("null".into()),
            }),
            calls: Mutex::default(),
            routes: Mutex::default(),
            opened: Mutex::default(),
            closed: Mutex::default(),
            written: Mutex::default(),
            call_arrived: Notify::new(),
            write_gate: Mutex::default(),
            write_recorded: Notify::new(),
            abandoned: AtomicUsize::new(0),
            request_abandoned: Notify::new(),
        })
    }

    fn set_route(&self, route: RouteScript) {
        self.script.lock().unwrap().route = route;
    }

    fn set_reply(&self, reply: ReplyScript) {
        self.script.lock().unwrap().reply = reply;
    }

    fn calls(&self) -> Vec<Recorded> {
        self.calls.lock().unwrap().clone()
    }

    fn routes(&self) -> Vec<(String, String)> {
        self.routes.lock().unwrap().clone()
    }

    fn opened(&self) -> Vec<(String, Vec<PathBuf>)> {
        self.opened.lock().unwrap().clone()
    }

    fn closed(&self) -> Vec<String> {
        self.closed.lock().unwrap().clone()
    }

    fn written(&self) -> Vec<(String, PathBuf, String)> {
        self.written.lock().unwrap().clone()
    }
}

impl FakeHost {
    /// The scripted routing, recorded.
    fn route(&self, session: &Session, server_id: &str) -> Result<Route, GateError> {
        self.routes
            .lock()
            .unwrap()
            .push((session.id().to_string(), server_id.to_string()));
        let route = self.script.lock().unwrap().route.clone();
        match route {
            RouteScript::Ok {
                execute_commands,
                request_timeout,
            } => Ok(Route {
                execute_commands,
                extension_methods: vec![],
                request_timeout,
            }),
            RouteScript::UnknownServer => Err(GateError::UnknownServer {
                server_id: server_id.into(),
                servers: vec![],
            }),
        }
    }
}

impl LspHost for FakeHost {
    async fn servers(&self, _session: &Session) -> Vec<ServerEntry> {
        self.script.lock().unwrap().servers.clone()
    }

    async fn request(&self, call: HostCall) -> Result<HostReply, GateError> {
        // One host call: route, then the gate's checks against the route,
        // then what reaches the server (recorded).
        let route = self.route(call.session(), call.server_id())?;
        let call = call.route(&route)?;
        self.calls.lock().unwrap().push(Recorded {
            session: call.session.id().to_string(),
            server_id: call.server_id.to_string(),
            method: call.method.clone(),
            params: call.params.as_ref().map(|p| p.get().to_string()),
        });
        let reply = self.script.lock().unwrap().reply.clone();
        self.call_arrived.notify_one();
        let mut abandoned = Abandoned {
            host: self,
            answered: false,
        };
        let outcome = match reply {
            ReplyScript::Result(text) => Ok(HostReply {
                result: raw(&text),
                meta: None,
            }),
            ReplyScript::LspError(text) => Err(GateError::ServerError {
                lsp_error: raw(&text),
            }),
            ReplyScript::WaitForCancel => {
                call.cancel.cancelled().await;
                Err(GateError::Cancelled)
            }
            ReplyScript::Never => std::future::pending().await,
            // No lock of the host's is held here.
            ReplyScript::Panic => panic!("scripted panic in the host"),
        };
        abandoned.answered = true;
        outcome
    }

    fn session_opened(self: &Arc<Self>, session: &Arc<Session>) {
        self.opened
            .lock()
            .unwrap()
            .push((session.id().to_string(), session.roots().to_vec()));
    }

    fn session_closed(self: &Arc<Self>, session: &Arc<Session>) {
        self.closed.lock().unwrap().push(session.id().to_string());
    }

    fn text_written(&self, session: &Arc<Session>, path: &Path, text: &str) {
        self.written.lock().unwrap().push((
            session.id().to_string(),
            path.to_path_buf(),
            text.to_string(),
        ));
        self.write_recorded.notify_one();
        let gate = self.write_gate.lock().unwrap().take();
        if let Some(gate) = gate {
            let _ = gate.recv();
        }
    }
}

// ---------------------------------------------------------------------------
// The harness: one relay, the test on both ends
// ---------------------------------------------------------------------------

struct Setup {
    config: GateConfig,
    options: RelayOptions,
    editor_out_buffer: usize,
    agent_out_buffer: usize,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            config: GateConfig::default(),
            options: RelayOptions::default(),
            editor_out_buffer: PIPE_BUFFER,
            agent_out_buffer: PIPE_BUFFER,
        }
    }
}

struct Harness {
    host: Arc<FakeHost>,
    /// The editor's side of `editor_in` (the test writes here).
    editor_w: Option<DuplexStream>,
    /// The editor's side of `editor_out` (the test reads here).
    editor_r: BufReader<DuplexStream>,
    /// The agent's side of `agent_in`.
    agent_r: BufReader<DuplexStream>,
    /// The agent's side of `agent_out`.
    agent_w: Option<DuplexStream>,
    relay: Option<JoinHandle<RelayEnd>>,
    editor_eof: Option<oneshot::Receiver<()>>,
}

/// Reads one whole line, newline included; empty at end of input.
async fn read_raw(reader: &mut BufReader<DuplexStream>, who: &str) -> Vec<u8> {
    let mut buf = Vec::new();
    match timeout(IO_TIMEOUT, reader.read_until(b'\n', &mut buf)).await {
        Ok(Ok(_)) => buf,
        Ok(Err(e)) => panic!("{who}: read failed: {e}"),
        Err(_) => panic!("{who}: no line within {IO_TIMEOUT:?}"),
    }
}

/// Reads one line and returns it without its newline; fails at end of input.
async fn read_line(reader: &mut BufReader<DuplexStream>, who: &str) -> String {
    let mut bytes = read_raw(reader, who).await;
    assert_eq!(
        bytes.pop(),
        Some(b'\n'),
        "{who}: input ended (or a line was cut): {:?}",
        String::from_utf8_lossy(&bytes)
    );
    String::from_utf8(bytes).expect("lines in these tests are UTF-8")
}

fn parse(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

impl Harness {
    fn start() -> Harness {
        Harness::with(Setup::default())
    }

    /// [`Harness::start`] with session `s1` open on `/ws/proj`.
    async fn in_session() -> Harness {
        let mut h = Harness::start();
        h.open_session("s1", "/ws/proj", &[]).await;
        h
    }

    fn with(setup: Setup) -> Harness {
        let host = FakeHost::new();
        let gate = Gate::new(Arc::clone(&host), setup.config);
        let (editor_in, editor_w) = duplex(PIPE_BUFFER);
        let (editor_out, editor_r) = duplex(setup.editor_out_buffer);
        let (agent_in, agent_r) = duplex(PIPE_BUFFER);
        let (agent_out, agent_w) = duplex(setup.agent_out_buffer);
        let (eof_tx, eof_rx) = oneshot::channel();
        let relay = tokio::spawn(relay::run(
            gate,
            editor_in,
            editor_out,
            agent_in,
            agent_out,
            setup.options,
            move || {
                let _ = eof_tx.send(());
            },
        ));
        Harness {
            host,
            editor_w: Some(editor_w),
            editor_r: BufReader::new(editor_r),
            agent_r: BufReader::new(agent_r),
            agent_w: Some(agent_w),
            relay: Some(relay),
            editor_eof: Some(eof_rx),
        }
    }

    async fn editor_send_raw(&mut self, bytes: &[u8]) {
        let w = self.editor_w.as_mut().expect("editor writer open");
        timeout(IO_TIMEOUT, w.write_all(bytes))
            .await
            .expect("editor write stalled")
            .expect("editor write failed");
    }

    async fn agent_send_raw(&mut self, bytes: &[u8]) {
        let w = self.agent_w.as_mut().expect("agent writer open");
        timeout(IO_TIMEOUT, w.write_all(bytes))
            .await
            .expect("agent write stalled")
            .expect("agent write failed");
    }

    async fn editor_send(&mut self, line: &str) {
        self.editor_send_raw(format!("{line}\n").as_bytes()).await;
    }

    async fn agent_send(&mut self, line: &str) {
        self.agent_send_raw(format!("{line}\n").as_bytes()).await;
    }

    async fn editor_recv(&mut self) -> String {
        read_line(&mut self.editor_r, "editor").await
    }

    async fn agent_recv(&mut self) -> String {
        read_line(&mut self.agent_r, "agent").await
    }

    /// The editor sends `line`; the agent gets it unchanged.
    async fn editor_passes(&mut self, line: &str) {
        self.editor_send(line).await;
        assert_eq!(self.agent_recv().await, line);
    }

    /// The agent sends `line`; the editor gets it unchanged.
    async fn agent_passes(&mut self, line: &str) {
        self.agent_send(line).await;
        assert_eq!(self.editor_recv().await, line);
    }

    /// The agent sends `line` and gets an error answer to `id` with `code`
    /// and `reason` (see [`expect_error`]); returns its `data`.
    async fn agent_error(&mut self, line: &str, id: Value, code: i64, reason: &str) -> Value {
        self.agent_send(line).await;
        let answer = self.agent_recv_json().await;
        assert_eq!(answer["id"], id);
        expect_error(&answer, code, reason)
    }

    async fn agent_recv_json(&mut self) -> Value {
        let line = self.agent_recv().await;
        parse(&line)
    }

    /// Shows that nothing from the agent reached the editor: a sentinel sent
    /// now must be the editor's next line.
    async fn assert_editor_got_nothing(&mut self, tag: &str) {
        let sentinel = format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sentinel":"{tag}"}}}}"#
        );
        self.agent_send(&sentinel).await;
        assert_eq!(
            self.editor_recv().await,
            sentinel,
            "the editor got something before the sentinel {tag}"
        );
    }

    /// Runs `session/new` through the relay with a success answer.
    /// `cwd` and `additional`: real paths of this OS, or fixture paths
    /// spelled the Unix way, which [`os_path`] makes this OS's.
    async fn open_session(&mut self, session_id: &str, cwd: &str, additional: &[&str]) {
        let native = |p: &str| {
            if Path::new(p).is_absolute() {
                p.to_string()
            } else {
                os_path(p)
            }
        };
        let cwd = native(cwd);
        let additional: Vec<String> = additional.iter().map(|p| native(p)).collect();
        let request = json!({
            "jsonrpc": "2.0",
            "id": format!("new-{session_id}"),
            "method": "session/new",
            "params": {"cwd": cwd, "additionalDirectories": additional, "mcpServers": []},
        })
        .to_string();
        self.editor_passes(&request).await;
        let response = json!({
            "jsonrpc": "2.0",
            "id": format!("new-{session_id}"),
            "result": {"sessionId": session_id},
        })
        .to_string();
        self.agent_passes(&response).await;
    }

    /// Sends the agent's `lsp/request` and returns the proxy's answer.
    async fn lsp_request(&mut self, id: u64, params: Value) -> Value {
        let request =
            json!({"jsonrpc": "2.0", "id": id, "method": "lsp/request", "params": params});
        self.agent_send(&request.to_string()).await;
        let answer = self.agent_recv_json().await;
        assert_eq!(
            answer["id"],
            json!(id),
            "answer to another request: {answer}"
        );
        answer
    }

    /// Sends the agent's `lsp/servers` and returns the proxy's answer.
    async fn lsp_servers(&mut self, id: u64, session_id: &str) -> Value {
        let request = json!({
            "jsonrpc": "2.0", "id": id, "method": "lsp/servers",
            "params": {"sessionId": session_id},
        });
        self.agent_send(&request.to_string()).await;
        let answer = self.agent_recv_json().await;
        assert_eq!(
            answer["id"],
            json!(id),
            "answer to another request: {answer}"
        );
        answer
    }
}

fn hover(session: &str, uri: &str) -> Value {
    json!({
        "sessionId": session,
        "serverId": "rust-analyzer",
        "method": "textDocument/hover",
        "params": {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}},
    })
}

/// Asserts an error answer's code and `data.reason`; returns `data`.
fn expect_error(answer: &Value, code: i64, reason: &str) -> Value {
    let error = &answer["error"];
    assert_eq!(error["code"], json!(code), "wrong code: {answer}");
    assert_eq!(
        error["data"]["reason"],
        json!(reason),
        "wrong reason: {answer}"
    );
    assert!(answer.get("result").is_none(), "{answer}");
    error["data"].clone()
}

// ---------------------------------------------------------------------------
// 1. Byte-exact forwarding
// ---------------------------------------------------------------------------

#[tokio::test]
async fn forwards_every_line_byte_for_byte_both_ways_in_order() {
    let mut h = Harness::start();
    let from_editor: &[&[u8]] = &[
        br#"{"jsonrpc":"2.0","id":"7","method":"session/prompt","params":{"sessionId":"s","prompt":[]}}"#,
        br#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}"#,
        br#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"session/set_mode","params":{"sessionId":"s","modeId":"x"}}"#,
        b"  { \"jsonrpc\" :\t\"2.0\" ,  \"method\":\"session/cancel\" , \"params\" : { \"sessionId\" : \"s\" }  }  ",
        b"this is not JSON at all {",
        b"",
        b"{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{\"sessionId\":\"s\"}}\r",
        "{\"jsonrpc\":\"2.0\",\"method\":\"x/note\",\"params\":{\"text\":\"h\u{e9}llo \u{2713} \u{1f980} \\u00e9\"}}".as_bytes(),
        br#"{"jsonrpc":"2.0","id":"w","result":null}"#,
        br#"{}"#,
    ];
    let from_agent: &[&[u8]] = &[
        br#"{"jsonrpc":"2.0","id":"7","result":{"stopReason":"end_turn"}}"#,
        br#"{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}"#,
        br#"{"jsonrpc":"2.0","id":18446744073709551616,"error":{"code":-32601,"message":"nope"}}"#,
        b"{  \"jsonrpc\":\"2.0\",",
        b"\t{\"jsonrpc\" : \"2.0\", \"method\" : \"session/update\",\"params\":{ \"a\" : [ 1 , 2.50 , 1e3 ] } }",
        b"not json either ]]",
        b"",
        b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"fs/read_text_file\",\"params\":{\"sessionId\":\"s\",\"path\":\"/a\"}}\r",
        "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"t\":\"\u{fc}n\u{ef}c\u{f6}d\u{e9} \u{1f980}\",\"e\":\"\\ud83e\\udd80\"}}".as_bytes(),
    ];

    let mut editor_bytes = Vec::new();
    for line in from_editor {
        editor_bytes.extend_from_slice(line);
        editor_bytes.push(b'\n');
    }
    let mut agent_bytes = Vec::new();
    for line in from_agent {
        agent_bytes.extend_from_slice(line);
        agent_bytes.push(b'\n');
    }
    h.editor_send_raw(&editor_bytes).await;
    h.agent_send_raw(&agent_bytes).await;

    let mut agent_got = Vec::new();
    for _ in from_editor {
        agent_got.extend(read_raw(&mut h.agent_r, "agent").await);
    }
    let mut editor_got = Vec::new();
    for _ in from_agent {
        editor_got.extend(read_raw(&mut h.editor_r, "editor").await);
    }
    assert_eq!(
        String::from_utf8_lossy(&agent_got),
        String::from_utf8_lossy(&editor_bytes)
    );
    assert_eq!(agent_got, editor_bytes);
    assert_eq!(editor_got, agent_bytes);
    assert!(h.host.calls().is_empty());
}

// ---------------------------------------------------------------------------
// 2. The initialize rewrite
// ---------------------------------------------------------------------------

#[tokio::test]
async fn v1_initialize_gains_the_lsp_capability_and_keeps_the_rest() {
    let mut h = Harness::start();
    let init = r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true,"_meta":{"zed":{"x":1}}},"clientInfo":{"name":"ed","title":"Ed ✓","version":"1.0"}}}"#;
    h.editor_send(init).await;
    let got = h.agent_recv().await;
    assert_ne!(got, init, "initialize was not rewritten");
    assert!(
        got.contains(r#""id":18446744073709551616"#),
        "the id text changed: {got}"
    );
    let msg = parse(&got);
    let caps = &msg["params"]["clientCapabilities"];
    assert_eq!(caps["lsp"], json!({}));
    assert_eq!(caps["_meta"]["lsp"], json!({}));
    assert_eq!(caps["_meta"]["zed"], json!({"x": 1}));
    assert_eq!(
        caps["fs"],
        json!({"readTextFile": true, "writeTextFile": true})
    );
    assert_eq!(caps["terminal"], json!(true));
    assert_eq!(
        msg["params"]["clientInfo"],
        json!({"name": "ed", "title": "Ed ✓", "version": "1.0"})
    );
    assert_eq!(msg["params"]["protocolVersion"], json!(1));
    assert_eq!(msg["method"], json!("initialize"));
    assert_eq!(msg["jsonrpc"], json!("2.0"));
    assert!(msg["params"].get("capabilities").is_none());

    // The agent's answer goes back untouched.
    let answer = r#"{"jsonrpc":"2.0","id":18446744073709551616,"result":{"protocolVersion":1,"agentCapabilities":{}}}"#;
    h.agent_passes(answer).await;
}

#[tokio::test]
async fn v2_initialize_gains_the_lsp_capability_under_capabilities() {
    let mut h = Harness::start();
    let init = r#"{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":2,"capabilities":{"elicitation":{}},"info":{"name":"ed","version":"2"}}}"#;
    h.editor_send(init).await;
    let msg = parse(&h.agent_recv().await);
    assert_eq!(msg["id"], json!("i"));
    assert_eq!(
        msg["params"]["capabilities"],
        json!({"elicitation": {}, "lsp": {}, "_meta": {"lsp": {}}})
    );
    assert!(msg["params"].get("clientCapabilities").is_none());
    assert_eq!(msg["params"]["info"], json!({"name": "ed", "version": "2"}));
}

const INIT_WITH_LSP: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"lsp":{},"fs":{"readTextFile":true}}}}"#;

#[tokio::test]
async fn an_editor_with_lsp_keeps_initialize_and_gets_the_agents_lsp_calls() {
    let mut h = Harness::start();
    h.editor_passes(INIT_WITH_LSP).await;

    // Passthrough: the agent's lsp calls go to the editor, byte for byte.
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"lsp/servers","params":{"sessionId":"s1"}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"_zed.dev/lsp/request","params":{"sessionId":"s1","serverId":"x","method":"textDocument/hover","params":{}}}"#,
        r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}"#,
    ] {
        h.agent_passes(line).await;
    }
    // And the editor's answer goes back untouched.
    let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"servers":[],"fromTheEditor":true}}"#;
    h.editor_passes(answer).await;
    assert!(h.host.calls().is_empty());
}

#[tokio::test]
async fn lsp_mode_own_answers_even_when_the_editor_has_lsp() {
    let mut h = Harness::with(Setup {
        options: RelayOptions {
            lsp_mode: LspMode::Own,
            ..Default::default()
        },
        ..Default::default()
    });
    h.editor_send(INIT_WITH_LSP).await;
    assert_eq!(
        h.agent_recv().await,
        INIT_WITH_LSP,
        "initialize must stay untouched"
    );
    h.open_session("s1", "/ws/proj", &[]).await;
    let answer = h.lsp_servers(1, "s1").await;
    assert_eq!(
        answer["result"]["servers"][0]["serverId"],
        json!("rust-analyzer")
    );
    h.assert_editor_got_nothing("own").await;
}

// ---------------------------------------------------------------------------
// 3. lsp/servers
// ---------------------------------------------------------------------------

#[tokio::test]
async fn lsp_servers_is_answered_under_every_spelling_with_the_id_echoed() {
    let mut h = Harness::in_session().await;
    for (id, method) in [
        ("\"7\"", "lsp/servers"),
        ("7", "_lsp/servers"),
        ("18446744073709551616", "_zed.dev/lsp/servers"),
    ] {
        let request = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{"sessionId":"s1"}}}}"#
        );
        h.agent_send(&request).await;
        let line = h.agent_recv().await;
        assert!(
            line.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"#)),
            "id not echoed exactly for {method}: {line}"
        );
        let answer = parse(&line);
        let result = &answer["result"];
        let servers = result["servers"].as_array().expect("servers array");
        assert_eq!(servers.len(), 1);
        assert_eq!(servers[0]["serverId"], json!("rust-analyzer"));
        assert_eq!(servers[0]["state"], json!("running"));
        assert_eq!(servers[0]["workspacePath"], json!("/ws/proj"));
        assert_eq!(servers[0]["fileExtensions"], json!(["rs"]));
        assert_eq!(servers[0]["capabilities"], json!({"hoverProvider": true}));
        let methods = result["availableMethods"]
            .as_array()
            .expect("availableMethods");
        assert!(methods.contains(&json!("textDocument/hover")), "{result}");
        assert!(
            !methods.contains(&json!("textDocument/didOpen")),
            "{result}"
        );
    }
    h.assert_editor_got_nothing("servers").await;
}

#[tokio::test]
async fn lsp_servers_for_an_unknown_session_is_invalid_params() {
    let mut h = Harness::start();
    let answer = h.lsp_servers(3, "nope").await;
    expect_error(&answer, -32602, "unknown_session");
    h.assert_editor_got_nothing("unknown").await;
}

// ---------------------------------------------------------------------------
// 4. Session tracking
// ---------------------------------------------------------------------------

#[tokio::test]
async fn session_lifecycle_commits_roots_only_on_success() {
    let mut h = Harness::start();

    // Before any session/new, s1 is unknown.
    expect_error(&h.lsp_servers(1, "s1").await, -32602, "unknown_session");

    h.open_session("s1", "/ws/a", &["/ws/b", "/ws/c"]).await;
    assert_eq!(
        h.host.opened(),
        vec![(
            "s1".to_string(),
            vec![
                PathBuf::from(os_path("/ws/a")),
                os_path("/ws/b").into(),
                os_path("/ws/c").into()
            ]
        )]
    );
    assert!(h.lsp_servers(2, "s1").await.get("result").is_some());

    // An error answer commits nothing, and a late duplicate success for the
    // same id no longer matches a pending request.
    let request = format!(
        r#"{{"jsonrpc":"2.0","id":20,"method":"session/new","params":{{"cwd":{},"mcpServers":[]}}}}"#,
        os_json("/ws/x")
    );
    h.editor_passes(&request).await;
    let failure = r#"{"jsonrpc":"2.0","id":20,"error":{"code":-32603,"message":"no"}}"#;
    h.agent_passes(failure).await;
    let late = r#"{"jsonrpc":"2.0","id":20,"result":{"sessionId":"s2"}}"#;
    h.agent_passes(late).await;
    assert_eq!(h.host.opened().len(), 1);
    expect_error(&h.lsp_servers(3, "s2").await, -32602, "unknown_session");

    // A success answer to a request with another id (here "20" ≠ 20) commits nothing either.
    let request = format!(
        r#"{{"jsonrpc":"2.0","id":21,"method":"session/new","params":{{"cwd":{},"mcpServers":[]}}}}"#,
        os_json("/ws/y")
    );
    h.editor_passes(&request).await;
    let wrong_id = r#"{"jsonrpc":"2.0","id":"21","result":{"sessionId":"s3"}}"#;
    h.agent_passes(wrong_id).await;
    expect_error(&h.lsp_servers(4, "s3").await, -32602, "unknown_session");

    // session/close: dropped on success.
    let close = r#"{"jsonrpc":"2.0","id":30,"method":"session/close","params":{"sessionId":"s1"}}"#;
    h.editor_passes(close).await;
    let closed = r#"{"jsonrpc":"2.0","id":30,"result":{}}"#;
    h.agent_passes(closed).await;
    assert_eq!(h.host.closed(), vec!["s1".to_string()]);
    expect_error(&h.lsp_servers(5, "s1").await, -32602, "unknown_session");
}

#[tokio::test]
async fn session_close_that_fails_keeps_the_session() {
    let mut h = Harness::start();
    h.open_session("s1", "/ws/a", &[]).await;
    let close = r#"{"jsonrpc":"2.0","id":30,"method":"session/close","params":{"sessionId":"s1"}}"#;
    h.editor_passes(close).await;
    let failed = r#"{"jsonrpc":"2.0","id":30,"error":{"code":-32601,"message":"no close"}}"#;
    h.agent_passes(failed).await;
    assert!(h.host.closed().is_empty());
    assert!(h.lsp_servers(1, "s1").await.get("result").is_some());
}

#[tokio::test]
async fn session_load_and_fork_commit_their_roots() {
    let mut h = Harness::start();

    // session/load: the id is in the request; the result may be null.
    let load = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"session/load","params":{{"sessionId":"old","cwd":{},"additionalDirectories":[{}],"mcpServers":[]}}}}"#,
        os_json("/ws/l"),
        os_json("/ws/m")
    );
    h.editor_passes(&load).await;
    expect_error(&h.lsp_servers(100, "old").await, -32602, "unknown_session");
    let loaded = r#"{"jsonrpc":"2.0","id":1,"result":null}"#;
    h.agent_passes(loaded).await;
    assert_eq!(
        h.host.opened(),
        vec![(
            "old".to_string(),
            vec![PathBuf::from(os_path("/ws/l")), os_path("/ws/m").into()]
        )]
    );
    assert!(h.lsp_servers(101, "old").await.get("result").is_some());

    // session/fork without roots: the new id comes in the response, roots from the source.
    let fork = r#"{"jsonrpc":"2.0","id":2,"method":"session/fork","params":{"sessionId":"old"}}"#;
    h.editor_passes(fork).await;
    let forked = r#"{"jsonrpc":"2.0","id":2,"result":{"sessionId":"child"}}"#;
    h.agent_passes(forked).await;
    assert_eq!(
        h.host.opened()[1],
        (
            "child".to_string(),
            vec![PathBuf::from(os_path("/ws/l")), os_path("/ws/m").into()]
        )
    );

    // session/fork with its own roots.
    let fork = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"session/fork","params":{{"sessionId":"old","cwd":{}}}}}"#,
        os_json("/ws/f")
    );
    h.editor_passes(&fork).await;
    let forked = r#"{"jsonrpc":"2.0","id":3,"result":{"sessionId":"child2"}}"#;
    h.agent_passes(forked).await;
    assert_eq!(
        h.host.opened()[2],
        ("child2".to_string(), vec![PathBuf::from(os_path("/ws/f"))])
    );
    assert!(h.lsp_servers(102, "child2").await.get("result").is_some());
}

// ---------------------------------------------------------------------------
// 5. Refused categories
// ---------------------------------------------------------------------------

#[tokio::test]
async fn refused_methods_are_not_forwarded_and_never_reach_the_host() {
    let mut h = Harness::in_session().await;
    let cases = [
        ("$/cancelRequest", "notification"),
        ("$/setTrace", "notification"),
        ("$/somethingElse", "notification"),
        ("initialize", "lifecycle"),
        ("initialized", "lifecycle"),
        ("shutdown", "lifecycle"),
        ("exit", "lifecycle"),
        ("textDocument/didOpen", "document_sync"),
        ("textDocument/didChange", "document_sync"),
        ("workspace/didChangeWatchedFiles", "document_sync"),
        ("workspace/applyEdit", "server_to_client"),
        ("client/registerCapability", "server_to_client"),
        ("workspace/configuration", "server_to_client"),
        ("workspace/willCreateFiles", "file_lifecycle"),
        ("workspace/willRenameFiles", "file_lifecycle"),
        ("workspace/willDeleteFiles", "file_lifecycle"),
        ("textDocument/foldingRange", "editor_interaction"),
        ("textDocument/selectionRange", "editor_interaction"),
        ("textDocument/linkedEditingRange", "editor_interaction"),
        ("textDocument/onTypeFormatting", "editor_interaction"),
    ];
    for (i, (method, category)) in cases.into_iter().enumerate() {
        let answer = h
            .lsp_request(
                i as u64,
                json!({"sessionId": "s1", "serverId": "rust-analyzer", "method": method, "params": {}}),
            )
            .await;
        // The RFD: -32602 method_not_forwarded, with the method list.
        let data = expect_error(&answer, -32602, "method_not_forwarded");
        assert_eq!(data["method"], json!(method), "{answer}");
        assert_eq!(data["category"], json!(category), "{answer}");
        let listed = data["availableMethods"]
            .as_array()
            .expect("availableMethods");
        assert!(listed.contains(&json!("textDocument/hover")), "{answer}");
        assert!(!listed.contains(&json!(method)), "{answer}");
    }
    assert!(h.host.calls().is_empty(), "{:?}", h.host.calls());
    assert!(h.host.routes().is_empty(), "{:?}", h.host.routes());
    h.assert_editor_got_nothing("refused").await;
}

#[tokio::test]
async fn methods_outside_available_methods_are_not_forwarded() {
    let mut h = Harness::in_session().await;
    for (i, method) in [
        "textDocument/madeUp",
        "rust-analyzer/analyzerStatus",
        // No server of the session allows a command: not listed either.
        "workspace/executeCommand",
    ]
    .into_iter()
    .enumerate()
    {
        let answer = h
            .lsp_request(
                i as u64,
                json!({"sessionId": "s1", "serverId": "rust-analyzer", "method": method,
                       "params": {"command": "x"}}),
            )
            .await;
        let data = expect_error(&answer, -32602, "method_not_forwarded");
        assert_eq!(data["category"], json!("not_listed"), "{answer}");
        assert!(!data["availableMethods"]
            .as_array()
            .expect("availableMethods")
            .contains(&json!(method)));
    }
    assert!(h.host.calls().is_empty(), "{:?}", h.host.calls());
    h.assert_editor_got_nothing("not listed").await;
}

#[tokio::test]
async fn params_is_required_and_null_is_a_value() {
    let mut h = Harness::in_session().await;
    let answer = h
        .lsp_request(
            1,
            json!({"sessionId": "s1", "serverId": "rust-analyzer", "method": "textDocument/hover"}),
        )
        .await;
    expect_error(&answer, -32602, "invalid_params");
    assert!(h.host.calls().is_empty(), "{:?}", h.host.calls());

    h.host.set_reply(ReplyScript::Result("null".into()));
    let answer = h
        .lsp_request(
            2,
            json!({"sessionId": "s1", "serverId": "rust-analyzer", "method": "workspace/symbol",
                   "params": null}),
        )
        .await;
    assert_eq!(answer["result"]["lspResult"], Value::Null, "{answer}");
    let calls = h.host.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].params, None, "null params are forwarded as none");
}

#[tokio::test]
async fn execute_command_is_refused_unless_on_the_routes_allowlist() {
    let mut h = Harness::in_session().await;
    h.host.set_route(RouteScript::Ok {
        execute_commands: vec!["fake.allowed".into()],
        request_timeout: Duration::from_secs(30),
    });
    let call = |command: &str| {
        json!({
            "sessionId": "s1", "serverId": "rust-analyzer",
            "method": "workspace/executeCommand",
            "params": {"command": command, "arguments": [1]},
        })
    };
    let answer = h.lsp_request(1, call("rm.everything")).await;
    let data = expect_error(&answer, -32602, "command_not_allowed");
    assert_eq!(data["method"], "workspace/executeCommand", "{answer}");
    assert_eq!(data["command"], "rm.everything", "{answer}");
    assert!(h.host.calls().is_empty());

    h.host
        .set_reply(ReplyScript::Result(r#"{"done":true}"#.into()));
    let answer = h.lsp_request(2, call("fake.allowed")).await;
    assert_eq!(
        answer["result"]["lspResult"],
        json!({"done": true}),
        "{answer}"
    );
    let calls = h.host.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].method, "workspace/executeCommand");
    assert_eq!(calls[0].server_id, "rust-analyzer");
    assert_eq!(calls[0].session, "s1");
    assert_eq!(
        serde_json::from_str::<Value>(calls[0].params.as_deref().unwrap()).unwrap(),
        json!({"command": "fake.allowed", "arguments": [1]})
    );
}

// ---------------------------------------------------------------------------
// 6. URI confinement
// ---------------------------------------------------------------------------

/// The path part of a file URI for a real absolute path of this OS:
/// `/tmp/…` on Unix, `/C:/users/…` on Windows.
fn uri_path(path: &Path) -> String {
    let text = path.display().to_string();
    if cfg!(windows) {
        format!("/{}", text.replace('\\', "/"))
    } else {
        text
    }
}

/// On a real directory tree; on Windows its root is on drive C, spelled
/// `C:\…` as users give it (not the verbatim `\\?\C:\…` of `canonicalize`).
#[tokio::test]
async fn uris_outside_the_session_roots_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    #[cfg(windows)]
    let base = PathBuf::from(base.display().to_string().trim_start_matches(r"\\?\"));
    let proj = base.join("ws").join("proj");
    let evil = base.join("ws").join("proj-evil");
    let outside = base.join("outside");
    for dir in [&proj.join("src"), &evil, &outside] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(proj.join("src").join("main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(evil.join("x.rs"), "secret\n").unwrap();
    std::fs::write(outside.join("secret.rs"), "secret\n").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&outside, proj.join("link")).unwrap();
    let p = uri_path(&proj);
    let evil = uri_path(&evil);

    let mut h = Harness::start();
    h.open_session("s1", &proj.display().to_string(), &[]).await;

    let mut refused = vec![
        (
            format!("file://{p}/../../outside/secret.rs"),
            "uri_outside_roots",
        ),
        (
            format!("file://{p}/src/../../../outside/secret.rs"),
            "uri_outside_roots",
        ),
        (
            format!("file://{p}/%2e%2e/%2e%2e/outside/secret.rs"),
            "uri_outside_roots",
        ),
        (
            format!("file://{p}/%2E%2E/proj-evil/x.rs"),
            "uri_outside_roots",
        ),
        (
            format!("file://{p}/..%2F..%2Foutside/secret.rs"),
            "invalid_uri",
        ),
        (format!("file://{p}/src%2fmain.rs"), "invalid_uri"),
        (format!("file://{p}/src/main.rs%00.txt"), "invalid_uri"),
        (format!("file://{evil}/x.rs"), "uri_outside_roots"),
        (os_uri("/etc/passwd"), "uri_outside_roots"),
        (format!("file://evil.example{p}/src/main.rs"), "invalid_uri"),
    ];
    // Through a symlink out of the root: Unix only, since creating a
    // symlink on Windows needs a privilege a test run cannot count on.
    if cfg!(unix) {
        refused.extend([
            (format!("file://{p}/link/secret.rs"), "uri_outside_roots"),
            (
                format!("file://{p}/link/../../proj/src/main.rs"),
                "uri_outside_roots",
            ),
        ]);
    }
    for (i, (uri, reason)) in refused.iter().enumerate() {
        let answer = h.lsp_request(i as u64, hover("s1", uri)).await;
        let data = expect_error(&answer, -32602, reason);
        assert_eq!(data["uri"], json!(uri), "{answer}");
        assert_eq!(data["method"], json!("textDocument/hover"), "{answer}");
    }
    // A URI hidden deep in the params (a WorkspaceEdit) is found as well.
    let answer = h
        .lsp_request(
            50,
            json!({
                "sessionId": "s1", "serverId": "rust-analyzer", "method": "codeAction/resolve",
                "params": {"title": "t", "edit": {"changes": {
                    format!("file://{evil}/x.rs"): []
                }}},
            }),
        )
        .await;
    expect_error(&answer, -32602, "uri_outside_roots");
    assert!(h.host.calls().is_empty(), "{:?}", h.host.calls());

    let inside = format!("file://{p}/src/main.rs");
    h.host.set_reply(ReplyScript::Result(
        r#"{"contents" : "fn main()",  "n":18446744073709551616}"#.into(),
    ));
    let request = json!({"jsonrpc": "2.0", "id": 60, "method": "lsp/request", "params": hover("s1", &inside)});
    h.agent_send(&request.to_string()).await;
    let line = h.agent_recv().await;
    assert_eq!(
        line,
        r#"{"jsonrpc":"2.0","id":60,"result":{"lspResult":{"contents" : "fn main()",  "n":18446744073709551616}}}"#,
        "the server's result must pass verbatim"
    );
    let calls = h.host.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].method, "textDocument/hover");
    assert!(calls[0].params.as_deref().unwrap().contains(&inside));
}

// ---------------------------------------------------------------------------
// 7. Limits
// ---------------------------------------------------------------------------

#[tokio::test]
async fn oversized_and_overdeep_params_are_refused_and_the_relay_keeps_going() {
    let mut h = Harness::in_session().await;

    // Params over 4 MiB.
    let pad = "a".repeat(4 * 1024 * 1024 + 16);
    let answer = h
        .lsp_request(
            1,
            json!({"sessionId": "s1", "serverId": "rust-analyzer", "method": "textDocument/hover",
                   "params": {"pad": pad}}),
        )
        .await;
    expect_error(&answer, -32602, "params_too_large");

    // Nesting depth 70 (parses fine, over the gate's 64).
    let deep = format!("{}{}", "[".repeat(70), "]".repeat(70));
    let request = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"lsp/request","params":{{"sessionId":"s1","serverId":"rust-analyzer","method":"textDocument/hover","params":{{"x":{deep}}}}}}}"#
    );
    h.agent_error(&request, json!(2), -32602, "params_too_deep")
        .await;

    // Nesting depth 100,000: deeper than any recursive parser allows.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let request = format!(
        r#"{{"jsonrpc":"2.0","id":"deep","method":"lsp/request","params":{{"sessionId":"s1","serverId":"rust-analyzer","method":"textDocument/hover","params":{deep}}}}}"#
    );
    h.agent_send(&request).await;
    let line = h.agent_recv().await;
    assert!(
        line.starts_with(r#"{"jsonrpc":"2.0","id":"deep","error":"#),
        "{line}"
    );
    expect_error(&parse(&line), -32602, "params_too_deep");

    // The same, broken (never closed) so the line cannot parse at all: the
    // shallow fallback still answers with the request's id.
    let request = format!(
        r#"{{"jsonrpc":"2.0","id":18446744073709551616,"method":"_lsp/request","params":{}"#,
        "[".repeat(100_000)
    );
    h.agent_send(&request).await;
    let line = h.agent_recv().await;
    assert!(
        line.starts_with(r#"{"jsonrpc":"2.0","id":18446744073709551616,"error":"#),
        "{line}"
    );
    expect_error(&parse(&line), -32602, "params_too_deep");

    // Broken but shallow: a parse error, still with the id.
    h.agent_error(
        r#"{"jsonrpc":"2.0","id":9,"method":"lsp/servers","params":{"#,
        json!(9),
        -32700,
        "parse_error",
    )
    .await;

    assert!(h.host.calls().is_empty());
    h.assert_editor_got_nothing("limits").await;

    // Still working.
    h.host.set_reply(ReplyScript::Result("42".into()));
    let answer = h
        .lsp_request(10, hover("s1", &os_uri("/ws/proj/a.rs")))
        .await;
    assert_eq!(answer["result"]["lspResult"], json!(42), "{answer}");
    assert!(h.lsp_servers(11, "s1").await.get("result").is_some());
}

#[tokio::test]
async fn lines_longer_than_the_inspection_limit_stream_through_untouched() {
    let mut h = Harness::with(Setup {
        config: GateConfig {
            limits: Limits {
                max_inspected_line: 256,
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    });
    let long_from_agent = format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"text":"{}","u":"🦀"}}}}"#,
        "x".repeat(100_000)
    );
    let short = r#"{"jsonrpc":"2.0","method":"session/update","params":{"after":true}}"#;
    // Written while the editor reads: the lines are larger than every buffer on the way.
    let mut agent_w = h.agent_w.take().expect("agent writer");
    let text = format!("{long_from_agent}\n{short}\n{long_from_agent}\n");
    let writing = tokio::spawn(async move {
        agent_w
            .write_all(text.as_bytes())
            .await
            .expect("agent write");
        agent_w
    });
    assert_eq!(h.editor_recv().await, long_from_agent);
    assert_eq!(h.editor_recv().await, short);
    assert_eq!(h.editor_recv().await, long_from_agent);
    h.agent_w = Some(writing.await.expect("writer task"));

    let long_from_editor = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{{"sessionId":"s","prompt":[{{"type":"text","text":"{}"}}]}}}}"#,
        "y".repeat(300_000)
    );
    let mut editor_w = h.editor_w.take().expect("editor writer");
    let text = format!("{long_from_editor}\n{short}\n");
    let writing = tokio::spawn(async move {
        editor_w
            .write_all(text.as_bytes())
            .await
            .expect("editor write");
        editor_w
    });
    assert_eq!(h.agent_recv().await, long_from_editor);
    assert_eq!(h.agent_recv().await, short);
    h.editor_w = Some(writing.await.expect("writer task"));

    // Too long to inspect, but ours: never forwarded, answered with an
    // error (a lenient editor would run it unchecked).
    let padded = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"lsp/servers","params":{{"sessionId":"s1","pad":"{}"}}}}"#,
        "z".repeat(1000)
    );
    h.agent_error(&padded, json!(1), -32602, "params_too_large")
        .await;
    h.assert_editor_got_nothing("over the limit, ours").await;
    // Named only past the first piece: what went ahead is cut there (no
    // parser reads it as a request) and the agent gets the error.
    let late = format!(
        r#"{{"jsonrpc":"2.0","pad":"{}","id":2,"method":"lsp/request","params":{{}}}}"#,
        "z".repeat(100_000)
    );
    h.agent_send(&late).await;
    // (The editor reads first: the pieces ahead fill the pipes to it.)
    let cut = h.editor_recv().await;
    let answer = h.agent_recv_json().await;
    expect_error(&answer, -32600, "params_too_large");
    assert!(late.starts_with(&cut) && cut.len() < late.len(), "cut");
    assert!(!cut.contains("lsp/"), "{}", &cut[cut.len() - 200..]);
    assert!(serde_json::from_str::<Value>(&cut).is_err());
    h.assert_editor_got_nothing("over the limit, ours late")
        .await;
}

// ---------------------------------------------------------------------------
// 8. v2 batches
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_mixed_batch_is_split_between_the_editor_and_our_answers() {
    let mut h = Harness::in_session().await;
    let ours = r#"{"jsonrpc":"2.0","id":1,"method":"lsp/servers","params":{"sessionId":"s1"}}"#;
    let prompt = r#"{ "jsonrpc" : "2.0", "id" : 2, "method":"session/prompt","params":{"sessionId":"s1","prompt":[ ]}}"#;
    let note = r#"{"jsonrpc":"2.0","method":"session/update","params":{"t":"ü"}}"#;
    h.agent_send(&format!("[{ours}, {prompt},\t{note}]")).await;

    assert_eq!(h.editor_recv().await, format!("[{prompt},{note}]"));
    let answer = h.agent_recv_json().await;
    let answers = answer.as_array().expect("answers come back as one array");
    assert_eq!(answers.len(), 1, "{answer}");
    assert_eq!(answers[0]["id"], json!(1));
    assert_eq!(
        answers[0]["result"]["servers"][0]["serverId"],
        json!("rust-analyzer")
    );
}

#[tokio::test]
async fn an_all_ours_batch_forwards_nothing_and_an_empty_batch_passes() {
    let mut h = Harness::in_session().await;
    let batch = format!(
        "[{},{}]",
        r#"{"jsonrpc":"2.0","id":"a","method":"_lsp/servers","params":{"sessionId":"s1"}}"#,
        r#"{"jsonrpc":"2.0","id":"b","method":"lsp/request","params":{"sessionId":"zz","serverId":"x","method":"textDocument/hover"}}"#,
    );
    h.agent_send(&batch).await;
    let answer = h.agent_recv_json().await;
    let answers = answer.as_array().expect("one array");
    assert_eq!(answers.len(), 2, "{answer}");
    assert_eq!(answers[0]["id"], json!("a"));
    assert!(answers[0]["result"]["servers"].is_array());
    assert_eq!(answers[1]["id"], json!("b"));
    expect_error(&answers[1], -32602, "unknown_session");
    h.assert_editor_got_nothing("all-ours").await;

    h.agent_passes("[]").await;
    h.agent_passes(" [ ] ").await;
    // A batch with nothing of ours passes byte for byte.
    let theirs = r#"[{"jsonrpc":"2.0","method":"a"} , {"jsonrpc":"2.0","id":5,"result":null}]"#;
    h.agent_passes(theirs).await;
}

// ---------------------------------------------------------------------------
// 9. Cancellation
// ---------------------------------------------------------------------------

#[tokio::test]
async fn cancel_request_of_ours_is_answered_and_swallowed() {
    let mut h = Harness::in_session().await;
    h.host.set_reply(ReplyScript::WaitForCancel);
    let request = json!({"jsonrpc": "2.0", "id": "c1", "method": "lsp/request",
                         "params": hover("s1", &os_uri("/ws/proj/a.rs"))});
    h.agent_send(&request.to_string()).await;
    timeout(IO_TIMEOUT, h.host.call_arrived.notified())
        .await
        .expect("the host never got the request");

    h.agent_error(
        r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"c1"}}"#,
        json!("c1"),
        -32800,
        "cancelled",
    )
    .await;
    h.assert_editor_got_nothing("cancel").await;

    // Not ours (and not ours any more): forwarded to the editor.
    for cancel in [
        r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":99}}"#,
        r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"c1"}}"#,
    ] {
        h.agent_passes(cancel).await;
    }
    assert_eq!(h.host.calls().len(), 1);
}

#[tokio::test]
async fn cancel_matches_the_exact_id_text() {
    let mut h = Harness::in_session().await;
    h.host.set_reply(ReplyScript::WaitForCancel);
    let request = json!({"jsonrpc": "2.0", "id": 5, "method": "lsp/request",
                         "params": hover("s1", &os_uri("/ws/proj/a.rs"))});
    h.agent_send(&request.to_string()).await;
    timeout(IO_TIMEOUT, h.host.call_arrived.notified())
        .await
        .expect("the host never got the request");
    // "5" is another id than 5: forwarded, and the request stays in flight.
    let other = r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"5"}}"#;
    h.agent_passes(other).await;
    h.agent_error(
        r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}"#,
        json!(5),
        -32800,
        "cancelled",
    )
    .await;
}

// ---------------------------------------------------------------------------
// 10. Deadline
// ---------------------------------------------------------------------------

// Real time: `start_paused` needs tokio's `test-util` feature, which this
// crate's dev-dependencies do not enable; 50 ms of wall time is cheap.
#[tokio::test]
async fn a_request_past_its_deadline_gets_exactly_one_retryable_error() {
    let mut h = Harness::in_session().await;
    h.host.set_route(RouteScript::Ok {
        execute_commands: vec![],
        request_timeout: Duration::from_millis(50),
    });
    h.host.set_reply(ReplyScript::Never);
    let started = tokio::time::Instant::now();
    let answer = h
        .lsp_request(1, hover("s1", &os_uri("/ws/proj/a.rs")))
        .await;
    let data = expect_error(&answer, -32603, "deadline_exceeded");
    assert_eq!(data["retryable"], json!(true), "{answer}");
    assert_eq!(data["method"], json!("textDocument/hover"));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(50) && waited < IO_TIMEOUT,
        "deadline fired after {waited:?}"
    );
    assert_eq!(h.host.calls().len(), 1);
    // Exactly one response: the next line the agent reads answers the next request.
    let next = h.lsp_servers(2, "s1").await;
    assert!(next.get("result").is_some(), "{next}");
}

// ---------------------------------------------------------------------------
// 11. Server errors and routing errors
// ---------------------------------------------------------------------------

#[tokio::test]
async fn server_errors_are_mapped_and_routing_errors_named() {
    let mut h = Harness::in_session().await;
    let uri = &os_uri("/ws/proj/a.rs");

    h.host.set_reply(ReplyScript::LspError(
        r#"{"code":-32801,"message":"content modified","data":{"x":1}}"#.into(),
    ));
    let answer = h.lsp_request(1, hover("s1", uri)).await;
    // The server's own ContentModified: reason `content_modified`, retryable.
    let data = expect_error(&answer, -32801, "content_modified");
    assert_eq!(data["retryable"], json!(true));
    // The RFD: the server's code, message and data, verbatim, in error.data.
    assert_eq!(data["code"], json!(-32801));
    assert_eq!(data["message"], json!("content modified"));
    assert_eq!(data["data"], json!({"x": 1}));
    assert_eq!(answer["error"]["message"], json!("content modified"));

    h.host.set_reply(ReplyScript::LspError(
        r#"{"code":-32002,"message":"server not initialized"}"#.into(),
    ));
    let answer = h.lsp_request(2, hover("s1", uri)).await;
    let data = expect_error(&answer, -32603, "server_error");
    assert_eq!(data["code"], json!(-32002));

    h.host.set_reply(ReplyScript::LspError(
        r#"{"code":-32000,"message":"custom"}"#.into(),
    ));
    let answer = h.lsp_request(3, hover("s1", uri)).await;
    let data = expect_error(&answer, -32603, "server_error");
    assert_eq!(data["code"], json!(-32000));
    assert_eq!(h.host.calls().len(), 3);

    h.host.set_route(RouteScript::UnknownServer);
    let answer = h.lsp_request(4, hover("s1", uri)).await;
    let data = expect_error(&answer, -32602, "unknown_server");
    assert_eq!(data["serverId"], json!("rust-analyzer"));
    // The RFD: the error SHOULD carry the current server list.
    assert_eq!(
        data["servers"],
        json!([{"serverId": "rust-analyzer", "name": "fake-analyzer",
                "workspacePath": "/ws/proj", "state": "running"}]),
        "{answer}"
    );
    assert_eq!(
        h.host.calls().len(),
        3,
        "routing errors must not reach request"
    );

    // Unknown session for lsp/request too.
    let answer = h.lsp_request(6, hover("nope", uri)).await;
    expect_error(&answer, -32602, "unknown_session");
    // Missing params.
    h.agent_error(
        r#"{"jsonrpc":"2.0","id":7,"method":"lsp/request"}"#,
        json!(7),
        -32602,
        "invalid_params",
    )
    .await;
}

// ---------------------------------------------------------------------------
// 12. fs/write_text_file
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_confirmed_write_reaches_the_host_before_the_agent_sees_the_answer() {
    let mut h = Harness::in_session().await;

    let write = r#"{"jsonrpc":"2.0","id":"w1","method":"fs/write_text_file","params":{"sessionId":"s1","path":"/ws/proj/a.rs","content":"fn main() { \"✓\" }\n"}}"#;
    h.agent_passes(write).await;
    assert!(
        h.host.written().is_empty(),
        "told the host before the editor confirmed"
    );
    let ok = r#"{"jsonrpc":"2.0","id":"w1","result":null}"#;
    h.editor_passes(ok).await;
    // The relay forwards the confirmation only after telling the host.
    assert_eq!(
        h.host.written(),
        vec![(
            "s1".to_string(),
            PathBuf::from("/ws/proj/a.rs"),
            "fn main() { \"✓\" }\n".to_string()
        )]
    );

    // A refused write is not reported.
    let write = r#"{"jsonrpc":"2.0","id":"w2","method":"fs/write_text_file","params":{"sessionId":"s1","path":"/ws/proj/b.rs","content":"x"}}"#;
    h.agent_passes(write).await;
    let refused = r#"{"jsonrpc":"2.0","id":"w2","error":{"code":-32603,"message":"disk full"}}"#;
    h.editor_passes(refused).await;
    assert_eq!(h.host.written().len(), 1);

    // A success for an id the agent never used for a write is not reported.
    let stray = r#"{"jsonrpc":"2.0","id":"w3","result":{}}"#;
    h.editor_passes(stray).await;
    assert_eq!(h.host.written().len(), 1);
}

/// While the host is still taking the text in, the agent must not have the
/// confirmation: its next `lsp/request` could otherwise see the old text.
/// (Multi-threaded, so the relay's writer could run while the host blocks.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_confirmation_waits_for_the_host_to_take_the_text() {
    let mut h = Harness::in_session().await;
    let (release, gate) = std::sync::mpsc::channel();
    *h.host.write_gate.lock().unwrap() = Some(gate);

    let write = r#"{"jsonrpc":"2.0","id":1,"method":"fs/write_text_file","params":{"sessionId":"s1","path":"/ws/proj/a.rs","content":"new"}}"#;
    h.agent_passes(write).await;
    let ok = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
    h.editor_send(ok).await;
    timeout(IO_TIMEOUT, h.host.write_recorded.notified())
        .await
        .expect("text_written was not called");
    // The host is blocked inside text_written: nothing may reach the agent.
    let mut early = Vec::new();
    let read = timeout(STALL_WAIT, h.agent_r.read_until(b'\n', &mut early)).await;
    assert!(
        read.is_err(),
        "the agent got {:?} while the host was still taking the text in",
        String::from_utf8_lossy(&early)
    );
    release.send(()).unwrap();
    assert_eq!(h.agent_recv().await, ok);
}

// ---------------------------------------------------------------------------
// 13. Backpressure
// ---------------------------------------------------------------------------

// Real time (see the deadline test): the stall is structural, as every
// buffer on the way is far smaller than what the agent writes, so a short
// wait cannot pass by accident; it only has to let the pipeline fill.
#[tokio::test]
async fn a_slow_editor_stalls_the_agent_and_loses_nothing() {
    const LINES: usize = 1000;
    const LINE_LEN: usize = 1024;
    let mut h = Harness::with(Setup {
        editor_out_buffer: 1024,
        agent_out_buffer: 1024,
        ..Default::default()
    });
    let lines: Vec<Vec<u8>> = (0..LINES)
        .map(|i| {
            let head = format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"i":{i},"pad":""#
            );
            let tail = "\"}}\n";
            let pad = "p".repeat(LINE_LEN - head.len() - tail.len());
            format!("{head}{pad}{tail}").into_bytes()
        })
        .collect();
    assert!(lines.iter().all(|l| l.len() == LINE_LEN));

    let sent = Arc::new(AtomicUsize::new(0));
    let mut agent_w = h.agent_w.take().expect("agent writer");
    let mut writer = {
        let lines = lines.clone();
        let sent = Arc::clone(&sent);
        tokio::spawn(async move {
            for line in &lines {
                agent_w.write_all(line).await.expect("agent write failed");
                sent.fetch_add(1, Ordering::SeqCst);
            }
            agent_w
        })
    };
    // Nobody reads the editor's output: once every buffer on the way is full,
    // the agent's writes stall.
    assert!(
        timeout(STALL_WAIT, &mut writer).await.is_err(),
        "the agent wrote all {LINES} KiB although the editor read nothing"
    );
    let stalled_at = sent.load(Ordering::SeqCst);
    assert!(
        stalled_at > 0 && stalled_at < LINES,
        "stalled after {stalled_at} lines"
    );

    // The editor starts reading: everything arrives, in order.
    for (i, line) in lines.iter().enumerate() {
        let got = read_raw(&mut h.editor_r, "editor").await;
        assert!(got == *line, "line {i} differs");
    }
    let agent_w = timeout(IO_TIMEOUT, writer)
        .await
        .expect("the agent's writes never completed")
        .expect("writer task failed");
    h.agent_w = Some(agent_w);
    assert_eq!(sent.load(Ordering::SeqCst), LINES);
}

// ---------------------------------------------------------------------------
// 14. Ends
// ---------------------------------------------------------------------------

#[tokio::test]
async fn editor_eof_calls_back_and_closes_the_agents_input() {
    let mut h = Harness::start();
    let last = r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#;
    h.editor_send(last).await;
    drop(h.editor_w.take());
    timeout(IO_TIMEOUT, h.editor_eof.take().expect("eof receiver"))
        .await
        .expect("the editor-eof callback was not called")
        .expect("the callback was dropped uncalled");
    // What the editor sent before closing still arrives, then end of input.
    assert_eq!(h.agent_recv().await, last);
    let rest = read_raw(&mut h.agent_r, "agent").await;
    assert!(
        rest.is_empty(),
        "the agent's input did not end: {:?}",
        String::from_utf8_lossy(&rest)
    );

    // The agent can still talk to the editor until it exits.
    let note = r#"{"jsonrpc":"2.0","method":"session/update","params":{"bye":true}}"#;
    h.agent_passes(note).await;
    drop(h.agent_w.take());
    let end = timeout(IO_TIMEOUT, h.relay.take().expect("relay"))
        .await
        .expect("the relay did not end")
        .expect("relay task failed");
    assert_eq!(end, RelayEnd::AgentClosed);
}

#[tokio::test]
async fn agent_eof_ends_the_relay_and_the_editors_input() {
    let mut h = Harness::start();
    let last = r#"{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}"#;
    h.agent_send(last).await;
    drop(h.agent_w.take());
    let end = timeout(IO_TIMEOUT, h.relay.take().expect("relay"))
        .await
        .expect("the relay did not end")
        .expect("relay task failed");
    assert_eq!(end, RelayEnd::AgentClosed);
    assert_eq!(h.editor_recv().await, last);
    assert!(read_raw(&mut h.editor_r, "editor").await.is_empty());
    assert!(read_raw(&mut h.agent_r, "agent").await.is_empty());
}

#[tokio::test]
async fn an_editor_that_stops_reading_ends_the_relay_as_editor_gone() {
    let mut h = Harness::start();
    // The editor goes away entirely: its end of the output pipe is closed.
    let editor_r = std::mem::replace(&mut h.editor_r, BufReader::new(duplex(1).0));
    drop(editor_r);
    // The agent keeps talking; writes toward the editor now fail and the
    // relay notices on a later line. The agent stops once its pipe is closed.
    let mut agent_w = h.agent_w.take().expect("agent writer");
    let chatter = tokio::spawn(async move {
        let line = b"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{}}\n";
        while agent_w.write_all(line).await.is_ok() {}
    });
    let end = timeout(IO_TIMEOUT, h.relay.take().expect("relay"))
        .await
        .expect("the relay did not end")
        .expect("relay task failed");
    assert_eq!(end, RelayEnd::EditorGone);
    timeout(IO_TIMEOUT, chatter)
        .await
        .expect("the agent's output stayed open after the relay ended")
        .expect("chatter task failed");
}

// ---------------------------------------------------------------------------
// 15. Tracked answers and panic isolation (issue 18)
// ---------------------------------------------------------------------------

/// A request deadline no test waits out: far beyond [`IO_TIMEOUT`], so a
/// relay that waited for it would fail the test instead of passing late.
const UNREACHED_DEADLINE: Duration = Duration::from_secs(3600);

/// The agent's `lsp/request` that the scripted host holds forever; returns
/// once the host has it.
async fn request_held_by_the_host(h: &mut Harness, id: u64) {
    const { assert!(UNREACHED_DEADLINE.as_secs() > 10 * IO_TIMEOUT.as_secs()) };
    h.host.set_route(RouteScript::Ok {
        execute_commands: vec![],
        request_timeout: UNREACHED_DEADLINE,
    });
    h.host.set_reply(ReplyScript::Never);
    let request = json!({"jsonrpc": "2.0", "id": id, "method": "lsp/request",
                         "params": hover("s1", &os_uri("/ws/proj/a.rs"))});
    h.agent_send(&request.to_string()).await;
    timeout(IO_TIMEOUT, h.host.call_arrived.notified())
        .await
        .expect("the host never got the request");
}

/// The agent exits while one of its `lsp/request`s waits on a server that
/// never answers: the relay ends then, not at the request's deadline, and
/// the host's request is dropped (a real host tells its server).
#[tokio::test]
async fn the_agent_exiting_with_a_request_in_flight_ends_the_relay() {
    let mut h = Harness::in_session().await;
    request_held_by_the_host(&mut h, 1).await;
    drop(h.agent_w.take());
    let end = timeout(IO_TIMEOUT, h.relay.take().expect("relay"))
        .await
        .expect("the relay waited for the request in flight instead of ending")
        .expect("relay task failed");
    assert_eq!(end, RelayEnd::AgentClosed);
    assert_eq!(h.host.abandoned.load(Ordering::SeqCst), 1);
    assert!(read_raw(&mut h.editor_r, "editor").await.is_empty());
}

/// The editor goes away while the agent's `lsp/request` is in flight: the
/// answer could no longer reach the agent (its input is closed), so the
/// host's request is dropped at once rather than at its deadline; the agent
/// exiting then ends the relay.
#[tokio::test]
async fn the_editor_leaving_cancels_the_requests_in_flight() {
    let mut h = Harness::in_session().await;
    request_held_by_the_host(&mut h, 1).await;
    drop(h.editor_w.take());
    timeout(IO_TIMEOUT, h.host.request_abandoned.notified())
        .await
        .expect("the request in flight outlived the editor");
    assert_eq!(h.host.abandoned.load(Ordering::SeqCst), 1);
    assert!(read_raw(&mut h.agent_r, "agent").await.is_empty());
    drop(h.agent_w.take());
    let end = timeout(IO_TIMEOUT, h.relay.take().expect("relay"))
        .await
        .expect("the relay did not end")
        .expect("relay task failed");
    assert_eq!(end, RelayEnd::AgentClosed);
}

/// A host whose request panics: the agent still gets exactly one answer,
/// -32603 `internal` saying so, the relay keeps going, and the request is
/// out of the cancellation table (a later cancel of its id is not ours).
#[tokio::test]
async fn a_panicking_host_still_answers_once_and_forgets_the_request() {
    let mut h = Harness::in_session().await;
    h.host.set_reply(ReplyScript::Panic);
    let answer = h
        .lsp_request(7, hover("s1", &os_uri("/ws/proj/a.rs")))
        .await;
    expect_error(&answer, -32603, "internal");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("panicked"), "{answer}");
    assert_eq!(h.host.calls().len(), 1);
    h.agent_passes(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}"#)
        .await;
    // Exactly one response: the next line the agent reads answers the next request.
    let next = h.lsp_servers(8, "s1").await;
    assert!(next.get("result").is_some(), "{next}");
}

/// The same at the gate, as an editor host embedding it uses it: the
/// future answers whatever the host does, and a future dropped before it
/// answers leaves no cancellation entry behind.
#[tokio::test]
async fn gate_calls_answer_through_panics_and_leave_no_entry_when_dropped() {
    use acp_lsp_core::gate::GateMethod;
    use acp_lsp_core::jsonrpc::RequestId;
    let host = FakeHost::new();
    let gate = Gate::new(Arc::clone(&host), GateConfig::default());
    gate.open_session("s1", vec![PathBuf::from(os_path("/ws/proj"))]);
    let params =
        || serde_json::value::to_raw_value(&hover("s1", &os_uri("/ws/proj/a.rs"))).expect("params");

    host.set_reply(ReplyScript::Panic);
    let id = RequestId::from_u64(1);
    let bytes = timeout(
        IO_TIMEOUT,
        gate.call(id.clone(), GateMethod::Request, Some(params())),
    )
    .await
    .expect("answered");
    let answer: Value = serde_json::from_slice(&bytes).expect("JSON");
    assert_eq!(answer["id"], json!(1));
    expect_error(&answer, -32603, "internal");
    assert!(!gate.cancel(&id), "the panicked request is still in flight");

    host.set_reply(ReplyScript::Never);
    let id = RequestId::from_u64(2);
    let call = gate.call(id.clone(), GateMethod::Request, Some(params()));
    assert!(gate.cancel(&id), "registered before the future is polled");
    drop(call);
    assert!(!gate.cancel(&id), "a dropped request is still in flight");
}

// ---------------------------------------------------------------------------
// Overload quotas (issue 13, item 9)
// ---------------------------------------------------------------------------

/// Beyond `max_requests_per_session` (or `max_requests_total`) requests in
/// flight, one more is answered at once with a retryable `overloaded`; a
/// finished request gives its place back. Nothing is queued.
#[tokio::test]
async fn requests_over_the_quotas_are_refused_at_once_with_a_retryable_reason() {
    use acp_lsp_core::gate::{
        GateMethod, DEFAULT_MAX_REQUESTS_PER_SESSION, DEFAULT_MAX_REQUESTS_TOTAL,
    };
    use acp_lsp_core::jsonrpc::RequestId;
    const { assert!(DEFAULT_MAX_REQUESTS_PER_SESSION <= DEFAULT_MAX_REQUESTS_TOTAL) };
    let host = FakeHost::new();
    host.set_reply(ReplyScript::WaitForCancel);
    let gate = Gate::new(
        Arc::clone(&host),
        GateConfig {
            max_requests_per_session: 2,
            max_requests_total: 3,
            ..Default::default()
        },
    );
    for session in ["s1", "s2", "s3"] {
        gate.open_session(session, vec![PathBuf::from(os_path("/ws/proj"))]);
    }
    let raw_params = |session: &str| {
        serde_json::value::to_raw_value(&hover(session, &os_uri("/ws/proj/a.rs"))).expect("params")
    };
    // One request in flight: sent (see `arrived` for the host seeing it).
    let in_flight = |n: u64, session: &str| {
        tokio::spawn(gate.call(
            RequestId::from_u64(n),
            GateMethod::Request,
            Some(raw_params(session)),
        ))
    };
    let arrived = || async {
        timeout(IO_TIMEOUT, host.call_arrived.notified())
            .await
            .expect("the host never got the request");
    };
    let answer = |n: u64, session: &str| {
        let call = gate.call(
            RequestId::from_u64(n),
            GateMethod::Request,
            Some(raw_params(session)),
        );
        async move {
            let bytes = timeout(IO_TIMEOUT, call).await.expect("answered at once");
            serde_json::from_slice::<Value>(&bytes).expect("JSON")
        }
    };

    let first = in_flight(1, "s1");
    arrived().await;
    let _second = in_flight(2, "s1");
    arrived().await;
    let refused = answer(3, "s1").await;
    let data = expect_error(&refused, -32603, "overloaded");
    assert_eq!(data["retryable"], true, "{refused}");
    assert_eq!(data["scope"], "session", "{refused}");
    assert_eq!(data["limit"], 2, "{refused}");

    let _third = in_flight(4, "s2");
    arrived().await;
    let refused = answer(5, "s3").await;
    let data = expect_error(&refused, -32603, "overloaded");
    assert_eq!(data["scope"], "total", "{refused}");
    assert_eq!(data["limit"], 3, "{refused}");
    assert_eq!(
        host.calls().len(),
        3,
        "refused requests never reach the host"
    );

    // lsp/servers is not counted.
    let servers = serde_json::value::to_raw_value(&json!({"sessionId": "s3"})).expect("params");
    let listing: Value = serde_json::from_slice(
        &gate
            .call(RequestId::from_u64(6), GateMethod::Servers, Some(servers))
            .await,
    )
    .expect("JSON");
    assert!(listing.get("result").is_some(), "{listing}");

    // The first one ends (cancelled): its place is free again.
    assert!(gate.cancel(&RequestId::from_u64(1)));
    let ended: Value = serde_json::from_slice(&first.await.expect("task")).expect("JSON");
    expect_error(&ended, -32800, "cancelled");
    let _fourth = in_flight(7, "s1");
    arrived().await;
    assert_eq!(host.calls().len(), 4);
    for id in [2, 4, 7] {
        gate.cancel(&RequestId::from_u64(id));
    }
}

// 12. Hostile shapes: duplicate keys, lines that do not parse
// ---------------------------------------------------------------------------

/// An `lsp/request` line whose inner LSP params are `inner` (raw JSON text).
fn request_line(id: u64, inner: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"lsp/request","params":{{"sessionId":"s1","serverId":"rust-analyzer","method":"textDocument/hover","params":{inner}}}}}"#
    )
}

/// Duplicate-key requests where the parsed value (the last duplicate wins)
/// is inside the roots and another duplicate is outside: 4 placements of the
/// duplicate × 3 spellings of the key × 3 outside URIs, plus duplicates in
/// the `lsp/request` params themselves and in the other gate methods.
fn duplicate_key_lines() -> Vec<String> {
    let inside = os_uri("/ws/proj/a.rs");
    let mut lines = Vec::new();
    let mut id = 100;
    for outside in [
        os_uri("/etc/passwd"),
        os_uri("/ws/proj/../../etc/shadow"),
        os_uri("/home/user/.ssh/id_rsa"),
    ] {
        for key in ["uri", "\\u0075ri", "u\\u0072i"] {
            let shapes = [
                format!(
                    r#"{{"textDocument":{{"uri":"{outside}","{key}":"{inside}"}},"position":{{"line":0,"character":0}}}}"#
                ),
                format!(
                    r#"{{"textDocument":{{"{key}":"{outside}"}},"textDocument":{{"uri":"{inside}"}},"position":{{"line":0,"character":0}}}}"#
                ),
                format!(
                    r#"{{"textDocument":{{"uri":"{inside}"}},"locations":[{{"uri":"{outside}","{key}":"{inside}"}}]}}"#
                ),
                format!(
                    r#"{{"edit":{{"changes":{{"{inside}":[]}},"changes":{{"{inside}":[]}}}},"item":{{"uri":"{outside}","{key}":"{inside}","data":[[{{"a":1}}]]}}}}"#
                ),
            ];
            for inner in shapes {
                id += 1;
                lines.push(request_line(id, &inner));
            }
        }
        // The lsp/request envelope: a second `params` or `sessionId`.
        id += 1;
        lines.push(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"lsp/request","params":{{"sessionId":"s1","serverId":"rust-analyzer","method":"textDocument/hover","params":{{"textDocument":{{"uri":"{outside}"}}}},"params":{{"textDocument":{{"uri":"{inside}"}}}}}}}}"#
        ));
        id += 1;
        lines.push(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"lsp/request","params":{{"sessionId":"other","sessionId":"s1","serverId":"rust-analyzer","method":"textDocument/hover","params":{{"textDocument":{{"uri":"{inside}"}},"x":"{outside}"}}}}}}"#
        ));
        id += 1;
        lines.push(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"_acp-lsp/diagnostics","params":{{"sessionId":"s1","uris":["{outside}"],"uris":["{inside}"]}}}}"#
        ));
        // A number no parser into f64 takes, ahead of the duplicate: a
        // scan that stops at it must not miss what follows.
        id += 1;
        lines.push(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"lsp/request","params":{{"big":1e400,"sessionId":"s1","serverId":"rust-analyzer","method":"textDocument/hover","params":{{"textDocument":{{"uri":"{outside}","uri":"{inside}"}}}}}}}}"#
        ));
    }
    lines
}

#[tokio::test]
async fn duplicate_keys_are_refused_before_anything_is_forwarded() {
    let mut h = Harness::in_session().await;
    let lines = duplicate_key_lines();
    let mut forwarded = 0;
    let mut refused = Vec::new();
    for line in &lines {
        // (Not through a parser: one line holds a number out of its range.)
        let id: u64 = line["{\"jsonrpc\":\"2.0\",\"id\":".len()..]
            .split(',')
            .next()
            .and_then(|n| n.parse().ok())
            .expect("an integer id");
        let id = json!(id);
        h.agent_send(line).await;
        let answer = h.agent_recv_json().await;
        assert_eq!(answer["id"], id, "{answer}");
        if answer.get("result").is_some() {
            forwarded += 1;
        } else {
            refused.push(answer);
        }
    }
    println!(
        "duplicate-key requests answered with a result: {forwarded} of {}; forwarded to the host: {}",
        lines.len(),
        h.host.calls().len()
    );
    assert_eq!(forwarded, 0);
    for answer in &refused {
        expect_error(answer, -32602, "duplicate_keys");
    }
    assert!(h.host.calls().is_empty(), "{:?}", h.host.calls());
    h.assert_editor_got_nothing("duplicates").await;

    // The same request without the duplicate still goes through.
    let answer = h
        .lsp_request(1, hover("s1", &os_uri("/ws/proj/a.rs")))
        .await;
    assert!(answer.get("result").is_some(), "{answer}");
}

/// Lines from the agent that name a gate method in some reading but do not
/// parse (or parse to something else): each must be answered here, never
/// forwarded. Returns (line bytes, the id the answer must carry).
fn unparsable_lsp_lines() -> Vec<(Vec<u8>, Value)> {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let mut lines: Vec<(Vec<u8>, Value)> = Vec::new();
    let mut push = |bytes: Vec<u8>, id: Value| lines.push((bytes, id));
    // Invalid UTF-8 in the LSP params.
    push(
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lsp/request\",\"params\":{\"sessionId\":\"s1\",\"serverId\":\"x\",\"method\":\"textDocument/hover\",\"params\":{\"textDocument\":{\"uri\":\"file:///etc/passwd\xff\"}}}}".to_vec(),
        json!(1),
    );
    // Invalid UTF-8 in the sessionId.
    push(
        b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"_lsp/servers\",\"params\":{\"sessionId\":\"s\xc31\"}}".to_vec(),
        json!(2),
    );
    // A duplicate `method` whose last value is ours.
    push(
        br#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","method":"lsp/request","params":{"sessionId":"s1","serverId":"x","method":"textDocument/hover","params":{"textDocument":{"uri":"file:///etc/passwd"}}}}"#.to_vec(),
        json!(3),
    );
    // A duplicate `method` whose first value is ours.
    push(
        br#"{"jsonrpc":"2.0","id":4,"method":"_zed.dev/lsp/request","method":"session/prompt","params":{"sessionId":"s1"}}"#.to_vec(),
        json!(4),
    );
    // Invalid UTF-8 and nesting deeper than the gate's limit.
    let mut deep_bad =
        b"{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"lsp/request\",\"params\":{\"x\":\"\xfe\",\"y\":"
            .to_vec();
    deep_bad.extend_from_slice(deep.as_bytes());
    deep_bad.extend_from_slice(b"}}");
    push(deep_bad, json!("d"));
    // The method written with escapes, invalid UTF-8 elsewhere.
    push(
        b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"lsp\\/request\",\"params\":{\"sessionId\":\"\xff\"}}".to_vec(),
        json!(6),
    );
    // The key written with escapes, invalid UTF-8 elsewhere.
    push(
        b"{\"jsonrpc\":\"2.0\",\"id\":7,\"\\u006dethod\":\"\\u006csp/servers\",\"params\":{\"sessionId\":\"\xff\"}}".to_vec(),
        json!(7),
    );
    // The diagnostics extension, invalid UTF-8.
    push(
        b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"_acp-lsp/diagnostics\",\"params\":{\"sessionId\":\"s1\",\"uris\":[\"file:///etc/\xff\"]}}".to_vec(),
        json!(8),
    );
    // A duplicate `id` and the method in the middle of a broken line.
    push(
        br#"{"jsonrpc":"2.0","id":9,"id":10,"method":"lsp/servers","params":{"sessionId":"s1"}"#
            .to_vec(),
        json!(9),
    );
    // No id at all, broken: answered with id null.
    push(
        b"{\"jsonrpc\":\"2.0\",\"method\":\"lsp/request\",\"params\":{\"a\":\"\xff\"}}".to_vec(),
        Value::Null,
    );
    // A batch that does not parse, with one of ours inside.
    push(
        b"[{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"lsp/servers\",\"params\":{\"sessionId\":\"\xff\"}}]".to_vec(),
        Value::Null,
    );
    // A UTF-8 byte order mark before the object.
    push(
        b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"lsp/servers\",\"params\":{\"sessionId\":\"s1\"}}".to_vec(),
        json!(12),
    );
    lines
}

/// Sends every unparsable line of ours; returns how many reached the editor.
async fn count_forwarded_unparsable(h: &mut Harness, tag: &str) -> usize {
    let lines = unparsable_lsp_lines();
    let mut forwarded = 0;
    for (i, (bytes, id)) in lines.iter().enumerate() {
        let mut line = bytes.clone();
        line.push(b'\n');
        h.agent_send_raw(&line).await;
        let sentinel = format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sentinel":"{tag}-{i}"}}}}"#
        );
        h.agent_send(&sentinel).await;
        let first = read_raw(&mut h.editor_r, "editor").await;
        if first != format!("{sentinel}\n").into_bytes() {
            forwarded += 1;
            println!("forwarded: {}", String::from_utf8_lossy(&first));
            assert_eq!(h.editor_recv().await, sentinel);
            continue;
        }
        let answer = h.agent_recv_json().await;
        let answer = match answer {
            Value::Array(mut items) if items.len() == 1 => items.remove(0),
            answer => answer,
        };
        assert_eq!(&answer["id"], id, "{answer}");
        assert!(
            answer["error"]["data"]["reason"].is_string(),
            "an error with a reason: {answer}"
        );
    }
    println!(
        "{tag}: unparsable lsp lines forwarded: {forwarded} of {}",
        lines.len()
    );
    forwarded
}

#[tokio::test]
async fn unparsable_lsp_lines_are_answered_and_never_forwarded() {
    // The editor answers lsp/* itself: well-formed calls go to it, but what
    // does not parse must not (a lenient editor would run it).
    let mut h = Harness::start();
    h.editor_passes(INIT_WITH_LSP).await;
    h.open_session("s1", "/ws/proj", &[]).await;
    let auto = count_forwarded_unparsable(&mut h, "auto").await;

    let mut h = Harness::with(Setup {
        options: RelayOptions {
            lsp_mode: LspMode::Own,
            ..Default::default()
        },
        ..Default::default()
    });
    h.editor_send(INIT_WITH_LSP).await;
    assert_eq!(h.agent_recv().await, INIT_WITH_LSP);
    h.open_session("s1", "/ws/proj", &[]).await;
    let own = count_forwarded_unparsable(&mut h, "own").await;
    // With --lsp own, an `lsp/*` request with `"id": null` cannot be
    // answered as a request, and must not reach the editor either.
    let null_id = r#"{"jsonrpc":"2.0","id":null,"method":"lsp/request","params":{"sessionId":"s1","serverId":"rust-analyzer","method":"textDocument/hover","params":{"textDocument":{"uri":"file:///etc/passwd"}}}}"#;
    h.agent_send(null_id).await;
    let answer = h.agent_recv_json().await;
    assert_eq!(answer["id"], Value::Null, "{answer}");
    expect_error(&answer, -32600, "invalid_request");
    h.assert_editor_got_nothing("null-id").await;
    assert!(h.host.calls().is_empty(), "{:?}", h.host.calls());
    assert_eq!((auto, own), (0, 0));
}
