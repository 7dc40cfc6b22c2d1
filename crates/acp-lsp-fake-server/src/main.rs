//! TEST SUPPORT, not a real language server: a scriptable fake LSP server for
//! fault tests and benchmarks of acp-lsp.
//!
//! It speaks LSP Content-Length framing on stdin/stdout. Nothing but protocol
//! is ever written to stdout (except deliberately, in `garbage_stdout` mode).
//!
//! # Default behaviour
//! * `initialize` → `{"capabilities":{"textDocumentSync":1,"hoverProvider":true,
//!   "definitionProvider":true,"referencesProvider":true,"renameProvider":true,
//!   "positionEncoding":"utf-16"},"serverInfo":{"name":"fake","version":"1.0"}}`
//! * `shutdown` → `null`; the `exit` notification ends the process with code 0
//!   after `shutdown`, 1 without (as LSP specifies).
//! * any other request → `{"echo":{"method":M,"params":P}}` (`P` byte for
//!   byte as received, `null` when absent). Request ids are echoed byte for byte.
//! * other notifications and responses are ignored.
//! * end of stdin ends the process (code 0 after `shutdown`, 1 otherwise).
//!
//! # Environment
//! * `FAKE_LSP_MODE` — comma-separated flags (below); `name=value` items are parameters.
//! * `FAKE_LSP_LOG=<path>` — every message RECEIVED is appended to this file as
//!   one JSON line (a body that is not JSON is logged as a JSON string).
//! * `FAKE_LSP_GRANDCHILD_PID_FILE=<path>` — with `fork_grandchild`, receives the grandchild's pid.
//! * `FAKE_LSP_HUGE_BYTES=<n>` — result size for `huge_response` (default 40 MiB).
//! * `FAKE_LSP_DELAY_MS=<n>` — delay for `slow` (default 100 ms).
//!
//! Pid files are written atomically (temporary file, then rename) before the
//! first message is read, so once `initialize` is answered they exist.
//!
//! # Flags
//! * `crash_on_start` — exit(4) immediately.
//! * `crash_on_request` — exit(3) on the first request other than `initialize`
//!   (after reading and logging it; `shutdown` counts).
//! * `hang` — never answer requests other than `initialize`/`shutdown`.
//! * `hang_initialize` — never answer `initialize`.
//! * `ignore_shutdown` — answer `shutdown`, but ignore `exit`, end of stdin and
//!   `SIGTERM` (set to `SIG_IGN`): only `SIGKILL` ends it.
//! * `fork_grandchild` — at start, spawn a copy of this binary in the hidden
//!   `sleep_forever` mode, in the same process group, with stdout to
//!   `/dev/null` and stderr inherited (like a real server's helper processes).
//! * `stderr_flood` — a background thread writes ~6 MB/s of text lines to stderr.
//! * `garbage_stdout` — before each response, write `hello world\n` to stdout.
//! * `huge_response` — answer requests (other than `initialize`/`shutdown`)
//!   with a result string of `FAKE_LSP_HUGE_BYTES` bytes.
//! * `server_requests` — after `initialized`, send the client
//!   `workspace/configuration` (`items: [{"section":"fake"}]`),
//!   `client/registerCapability` and `window/workDoneProgress/create`
//!   (ids `"fake-1"`, `"fake-2"`, `"fake-3"`); requests other than
//!   `initialize`/`shutdown` are held, and answered only once all three have
//!   been answered (as real servers stall). The answers are logged like every
//!   received message.
//! * `slow` — delay each answer by `FAKE_LSP_DELAY_MS`.
//! * `exit_after=<n>` — exit(5) right after answering the n-th request
//!   (counting `initialize`).
//! * `content_modified=<n>` — answer the first n requests other than
//!   `initialize`/`shutdown` with the error -32801 ContentModified (as
//!   rust-analyzer does when the workspace changes under a request), then as
//!   usual.
//! * `answer_after_change=<n>` — hold the first n requests other than
//!   `initialize`/`shutdown` until the next `workspace/didChangeWatchedFiles`
//!   arrives, then answer them as usual (an answer computed while the
//!   workspace changed, which rust-analyzer gives for references from part
//!   of the workspace).
//! * `diagnostics` — after each `didOpen`/`didChange`, publish diagnostics for
//!   that version: one error per line containing `error`. With
//!   `staged_diagnostics_ms=<ms>`, an empty set for the version first and
//!   the real one that many milliseconds later.
//! * `progress` — after `initialized`, begin work-done progress (token
//!   `"fake-index"`, title `Indexing`, percentage `12.5`); the first
//!   `workspace/didChangeWatchedFiles` (a file changed on disk), or a
//!   `fake/finishIndexing` request, reports 50 % and ends it.
//!
//! * `flood_progress=<n>` — after `initialized`, send n `$/progress` begins,
//!   each with its own token (`"flood-<i>"`), none ever ended.
//! * `flood_registrations=<n>` — after `initialized`, send n
//!   `client/registerCapability` requests (ids `"flood-<i>"`), each
//!   registering a `workspace/didChangeWatchedFiles` watcher with its own id.
//! * `flood_diagnostics=<n>` — after `initialized`, publish diagnostics for n
//!   different documents (`file:///flood/<i>.fake`), each one diagnostic whose
//!   message is `diagnostic_bytes=<b>` bytes long (default 100).
//! * `flood_garbage=<bytes>` — after `initialized`, write that many bytes of
//!   text that is no LSP frame to stdout.
//! * `workspace_symbols=<n>` — advertise `workspaceSymbolProvider` and answer
//!   `workspace/symbol {query}` with n functions named `query`, the i-th in
//!   `s<i mod 100>.fake` of the workspace root (`initialize`'s `rootUri`) at
//!   line `i / 100`; when `FAKE_LSP_SYMBOL_OUTSIDE` names a file, one more
//!   there, first. A query starting with `outside_` gets only that one.
//!
//! The floods are written before the next message is read, so the answer to
//! any later request arrives after all of them. After any flood the fake asks
//! `workspace/configuration` with id `"flood-done"`: once its answer is in
//! the log, the proxy has read the whole flood (it reads in order).
//!
//! Hidden helper modes (used by tests, not by the proxy):
//! * `sleep_forever` — do nothing until killed (the `fork_grandchild` grandchild).
//! * `echo_agent` — not LSP at all: a tiny ACP agent for the relay benchmark
//!   (`benches/suite.rs`). Reads newline-delimited JSON-RPC on stdin and
//!   answers every request with `{"jsonrpc":"2.0","id":ID,"result":{}}`, except
//!   `bench/pingBack {"count":n}`: it first sends n `bench/ping` requests (ids
//!   `"a1"`…), each after the response to the previous one, then answers.
//!   Other lines are ignored; end of stdin ends it (code 0).

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

const DEFAULT_HUGE_BYTES: usize = 40 * 1024 * 1024;
const DEFAULT_DELAY_MS: u64 = 100;
/// One flood write; with [`FLOOD_PAUSE`] about 6 MB/s.
const FLOOD_CHUNK: usize = 64 * 1024;
const FLOOD_PAUSE: Duration = Duration::from_millis(10);
/// Largest header line accepted before the input is considered garbage.
const MAX_HEADER_LINE: usize = 8 * 1024;
/// Largest body accepted (bigger ones end the server with an error).
const MAX_BODY: usize = 256 * 1024 * 1024;
const SERVER_REQUEST_IDS: [&str; 3] = ["fake-1", "fake-2", "fake-3"];

fn main() {
    let code = match run() {
        Ok(code) => code,
        Err(error) => {
            eprintln!("acp-lsp-fake-server: {error}");
            1
        }
    };
    std::process::exit(code);
}

struct Mode {
    flags: HashSet<String>,
    params: HashMap<String, String>,
}

impl Mode {
    fn from_env() -> Mode {
        let mut flags = HashSet::new();
        let mut params = HashMap::new();
        let raw = std::env::var("FAKE_LSP_MODE").unwrap_or_default();
        for item in raw
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
        {
            match item.split_once('=') {
                Some((name, value)) => {
                    params.insert(name.trim().to_string(), value.trim().to_string());
                }
                None => {
                    flags.insert(item.to_string());
                }
            }
        }
        Mode { flags, params }
    }

    fn has(&self, flag: &str) -> bool {
        self.flags.contains(flag)
    }
}

fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn run() -> io::Result<i32> {
    let mode = Mode::from_env();
    if mode.has("sleep_forever") {
        sleep_forever();
    }
    if mode.has("echo_agent") {
        return echo_agent();
    }
    if mode.has("crash_on_start") {
        return Ok(4);
    }
    if mode.has("fork_grandchild") {
        fork_grandchild()?;
    }
    if mode.has("ignore_shutdown") {
        // SAFETY: setting a signal disposition to SIG_IGN installs no handler
        // code; it is done before any other thread of ours exists.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
        }
    }
    if mode.has("stderr_flood") {
        std::thread::spawn(flood_stderr);
    }
    let log = match std::env::var_os("FAKE_LSP_LOG") {
        Some(path) => Some(OpenOptions::new().create(true).append(true).open(path)?),
        None => None,
    };
    let stdin = io::stdin().lock();
    let stdout = io::stdout().lock();
    let mut server = Server {
        out: stdout,
        log,
        stalled: mode.has("server_requests"),
        asked: false,
        pending_answers: HashSet::new(),
        held: VecDeque::new(),
        shutdown: false,
        answered: 0,
        exit_after: mode.params.get("exit_after").and_then(|n| n.parse().ok()),
        content_modified: mode
            .params
            .get("content_modified")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        huge: None,
        indexed: false,
        hold_for_change: mode
            .params
            .get("answer_after_change")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        held_for_change: Vec::new(),
        root: None,
        mode,
    };
    server.serve(BufReader::new(stdin))
}

/// The parts of a received message the fake looks at; `id` and `params` stay verbatim.
#[derive(Deserialize)]
struct Incoming {
    #[serde(default)]
    id: Option<Box<RawValue>>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Box<RawValue>>,
}

struct Server<W: Write> {
    mode: Mode,
    out: W,
    log: Option<File>,
    /// `server_requests`: requests are held until our own requests are answered.
    stalled: bool,
    /// `server_requests`: our requests have been sent.
    asked: bool,
    pending_answers: HashSet<String>,
    held: VecDeque<(Box<RawValue>, String, Option<Box<RawValue>>)>,
    shutdown: bool,
    answered: u64,
    exit_after: Option<u64>,
    /// `content_modified=<n>`: requests still to be answered with -32801.
    content_modified: u64,
    huge: Option<String>,
    /// `progress`: the indexing progress has ended.
    indexed: bool,
    /// `answer_after_change=<n>`: requests still to be held for a change.
    hold_for_change: u64,
    /// `answer_after_change`: requests held until the next file change.
    held_for_change: Vec<(Box<RawValue>, String, Option<Box<RawValue>>)>,
    /// `workspace_symbols`: the workspace root, from `initialize`.
    root: Option<PathBuf>,
}

impl<W: Write> Server<W> {
    fn serve(&mut self, mut input: impl BufRead) -> io::Result<i32> {
        loop {
            let Some(body) = read_message(&mut input)? else {
                return Ok(self.on_eof());
            };
            let message: Option<Incoming> = serde_json::from_slice(&body).ok();
            self.log_received(&body, message.is_some())?;
            let Some(message) = message else { continue };
            if let Some(code) = self.handle(message)? {
                return Ok(code);
            }
        }
    }

    fn on_eof(&self) -> i32 {
        if self.mode.has("ignore_shutdown") {
            sleep_forever();
        }
        if self.shutdown {
            0
        } else {
            1
        }
    }

    /// Handles one message; `Some(code)` ends the process.
    fn handle(&mut self, message: Incoming) -> io::Result<Option<i32>> {
        let Incoming { id, method, params } = message;
        match (method, id) {
            (Some(method), Some(id)) => self.on_request(id, method, params),
            (Some(method), None) => {
                if self.mode.has("diagnostics") {
                    self.publish_diagnostics(&method, params.as_deref())?;
                }
                self.on_notification(&method)
            }
            (None, Some(id)) => {
                if let Ok(id) = serde_json::from_str::<String>(id.get()) {
                    self.pending_answers.remove(&id);
                }
                if self.stalled && self.pending_answers.is_empty() && self.asked {
                    self.stalled = false;
                    while let Some((id, method, params)) = self.held.pop_front() {
                        if let Some(code) = self.on_request(id, method, params)? {
                            return Ok(Some(code));
                        }
                    }
                }
                Ok(None)
            }
            (None, None) => Ok(None),
        }
    }

    fn on_request(
        &mut self,
        id: Box<RawValue>,
        method: String,
        params: Option<Box<RawValue>>,
    ) -> io::Result<Option<i32>> {
        match method.as_str() {
            "initialize" => {
                if self.mode.has("hang_initialize") {
                    return Ok(None);
                }
                let mut result = json!({
                    "capabilities": {
                        "textDocumentSync": 1,
                        "hoverProvider": true,
                        "definitionProvider": true,
                        "referencesProvider": true,
                        "renameProvider": true,
                        "positionEncoding": "utf-16"
                    },
                    "serverInfo": {"name": "fake", "version": "1.0"}
                });
                if self.mode.params.contains_key("workspace_symbols") {
                    result["capabilities"]["workspaceSymbolProvider"] = json!(true);
                    self.root = params
                        .as_deref()
                        .and_then(|p| serde_json::from_str::<serde_json::Value>(p.get()).ok())
                        .and_then(|p| p["rootUri"].as_str().map(str::to_string))
                        .and_then(|uri| uri.strip_prefix("file://").map(PathBuf::from));
                }
                self.answer(&id, &result.to_string())
            }
            _ if self.mode.has("crash_on_request") => Ok(Some(3)),
            "shutdown" => {
                self.shutdown = true;
                self.answer(&id, "null")
            }
            "fake/finishIndexing" if self.mode.has("progress") => {
                self.finish_indexing()?;
                self.answer(&id, "null")
            }
            _ if self.stalled => {
                self.held.push_back((id, method, params));
                Ok(None)
            }
            _ if self.mode.has("hang") => Ok(None),
            _ if self.hold_for_change > 0 => {
                self.hold_for_change -= 1;
                self.held_for_change.push((id, method, params));
                Ok(None)
            }
            _ if self.content_modified > 0 => {
                self.content_modified -= 1;
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32801,"message":"content modified"}}}}"#,
                    id.get()
                );
                write_message(&mut self.out, body.as_bytes())?;
                Ok(None)
            }
            "workspace/symbol" if self.mode.params.contains_key("workspace_symbols") => {
                let result = workspace_symbols(&self.mode, self.root.as_deref(), params.as_deref());
                self.answer(&id, &result.to_string())
            }
            _ => {
                if self.mode.has("huge_response") {
                    let size = env_number("FAKE_LSP_HUGE_BYTES", DEFAULT_HUGE_BYTES);
                    // Only 'x's: the JSON string is the text between two quotes.
                    let result = self
                        .huge
                        .get_or_insert_with(|| format!("\"{}\"", "x".repeat(size)))
                        .clone();
                    return self.answer(&id, &result);
                }
                // `params` verbatim, byte for byte.
                let params = params.as_deref().map_or("null", RawValue::get);
                let method = serde_json::to_string(&method)?;
                let result = format!(r#"{{"echo":{{"method":{method},"params":{params}}}}}"#);
                self.answer(&id, &result)
            }
        }
    }

    /// `diagnostics` mode: after each didOpen/didChange, one diagnostic per
    /// line that contains `error`, for that version.
    fn publish_diagnostics(&mut self, method: &str, params: Option<&RawValue>) -> io::Result<()> {
        if !matches!(method, "textDocument/didOpen" | "textDocument/didChange") {
            return Ok(());
        }
        let Some(params) =
            params.and_then(|p| serde_json::from_str::<serde_json::Value>(p.get()).ok())
        else {
            return Ok(());
        };
        let document = &params["textDocument"];
        let text = document["text"]
            .as_str()
            .or_else(|| params["contentChanges"][0]["text"].as_str())
            .unwrap_or_default();
        let diagnostics: Vec<serde_json::Value> = text
            .lines()
            .enumerate()
            .filter(|(_, line)| line.contains("error"))
            .map(|(n, line)| {
                json!({"range": {"start": {"line": n, "character": 0},
                                 "end": {"line": n, "character": line.len()}},
                       "severity": 1, "message": line})
            })
            .collect();
        let version = document["version"].clone();
        // `staged_diagnostics_ms=<ms>`: first an empty set for the version,
        // the real one that much later (as typescript-language-server
        // publishes tsserver's syntactic, then semantic diagnostics).
        if let Some(pause) = self
            .mode
            .params
            .get("staged_diagnostics_ms")
            .and_then(|ms| ms.parse().ok())
        {
            let note = json!({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
                              "params": {"uri": document["uri"], "version": version,
                                         "diagnostics": []}});
            write_message(&mut self.out, note.to_string().as_bytes())?;
            self.out.flush()?;
            std::thread::sleep(Duration::from_millis(pause));
        }
        let note = json!({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
                          "params": {"uri": document["uri"], "version": version,
                                     "diagnostics": diagnostics}});
        write_message(&mut self.out, note.to_string().as_bytes())
    }

    /// Reports 50 % and ends the `fake-index` progress, once.
    fn finish_indexing(&mut self) -> io::Result<()> {
        if std::mem::replace(&mut self.indexed, true) {
            return Ok(());
        }
        for value in [
            json!({"kind": "report", "percentage": 50}),
            json!({"kind": "end"}),
        ] {
            self.progress(value)?;
        }
        Ok(())
    }

    /// Sends `$/progress` on the `fake-index` token.
    fn progress(&mut self, value: serde_json::Value) -> io::Result<()> {
        let note = json!({"jsonrpc": "2.0", "method": "$/progress",
                          "params": {"token": "fake-index", "value": value}});
        write_message(&mut self.out, note.to_string().as_bytes())
    }

    /// The `flood_*` modes, on `initialized`.
    fn flood(&mut self) -> io::Result<()> {
        let count = |name: &str| -> usize {
            self.mode
                .params
                .get(name)
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        for i in 0..count("flood_progress") {
            let note = json!({"jsonrpc": "2.0", "method": "$/progress",
                              "params": {"token": format!("flood-{i}"),
                                         "value": {"kind": "begin", "title": "Flooding"}}});
            write_message(&mut self.out, note.to_string().as_bytes())?;
        }
        for i in 0..count("flood_registrations") {
            let request = json!({"jsonrpc": "2.0", "id": format!("flood-{i}"),
            "method": "client/registerCapability",
            "params": {"registrations": [{
                "id": format!("flood-watch-{i}"),
                "method": "workspace/didChangeWatchedFiles",
                "registerOptions": {"watchers": [{"globPattern": format!("**/*.flood{i}")}]}
            }]}});
            write_message(&mut self.out, request.to_string().as_bytes())?;
        }
        let size = match count("diagnostic_bytes") {
            0 => 100,
            n => n,
        };
        let message = "d".repeat(size);
        for i in 0..count("flood_diagnostics") {
            let note = json!({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
                "params": {"uri": format!("file:///flood/{i}.fake"), "diagnostics": [{
                    "range": {"start": {"line": 0, "character": 0},
                              "end": {"line": 0, "character": 1}},
                    "severity": 1, "message": message}]}});
            write_message(&mut self.out, note.to_string().as_bytes())?;
        }
        let mut left = count("flood_garbage");
        let block = b"garbage that is not a frame\n".repeat(FLOOD_CHUNK / 28);
        while left > 0 {
            let n = left.min(block.len());
            self.out.write_all(&block[..n])?;
            left -= n;
        }
        let flooded = [
            "flood_progress",
            "flood_registrations",
            "flood_diagnostics",
            "flood_garbage",
        ]
        .iter()
        .any(|name| count(name) > 0);
        if flooded {
            let done = json!({"jsonrpc": "2.0", "id": "flood-done",
                              "method": "workspace/configuration", "params": {"items": []}});
            write_message(&mut self.out, done.to_string().as_bytes())?;
        }
        self.out.flush()
    }

    fn on_notification(&mut self, method: &str) -> io::Result<Option<i32>> {
        if method == "initialized" {
            self.flood()?;
        }
        if method == "workspace/didChangeWatchedFiles" {
            for (id, method, params) in std::mem::take(&mut self.held_for_change) {
                if let Some(code) = self.on_request(id, method, params)? {
                    return Ok(Some(code));
                }
            }
        }
        match method {
            "initialized" if self.mode.has("progress") => {
                let begin = json!({"kind": "begin", "title": "Indexing", "percentage": 12.5});
                self.progress(begin)?;
                Ok(None)
            }
            "workspace/didChangeWatchedFiles" if self.mode.has("progress") => {
                self.finish_indexing()?;
                Ok(None)
            }
            "exit" if !self.mode.has("ignore_shutdown") => {
                Ok(Some(if self.shutdown { 0 } else { 1 }))
            }
            "initialized" if self.mode.has("server_requests") && !self.asked => {
                self.asked = true;
                let requests = [
                    (
                        "workspace/configuration",
                        json!({"items": [{"section": "fake"}]}),
                    ),
                    (
                        "client/registerCapability",
                        json!({"registrations": [{
                            "id": "fake-watch",
                            "method": "workspace/didChangeWatchedFiles",
                            "registerOptions": {"watchers": [{"globPattern": "**/*.fake"}]}
                        }]}),
                    ),
                    (
                        "window/workDoneProgress/create",
                        json!({"token": "fake-progress"}),
                    ),
                ];
                for (id, (method, params)) in SERVER_REQUEST_IDS.iter().zip(requests) {
                    self.pending_answers.insert((*id).to_string());
                    let request =
                        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
                    write_message(&mut self.out, request.to_string().as_bytes())?;
                }
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// Answers request `id` (echoed verbatim) with `result`, a JSON text.
    fn answer(&mut self, id: &RawValue, result: &str) -> io::Result<Option<i32>> {
        if self.mode.has("slow") {
            std::thread::sleep(Duration::from_millis(env_number(
                "FAKE_LSP_DELAY_MS",
                DEFAULT_DELAY_MS,
            )));
        }
        if self.mode.has("garbage_stdout") {
            self.out.write_all(b"hello world\n")?;
        }
        let id = id.get();
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#);
        write_message(&mut self.out, body.as_bytes())?;
        self.answered += 1;
        if self.exit_after.is_some_and(|n| self.answered >= n) {
            return Ok(Some(5));
        }
        Ok(None)
    }

    /// Logs a received body as one line: verbatim when it is JSON (line
    /// breaks can only be whitespace there, so they become spaces), as a JSON
    /// string otherwise.
    fn log_received(&mut self, body: &[u8], is_json: bool) -> io::Result<()> {
        let Some(log) = self.log.as_mut() else {
            return Ok(());
        };
        let mut line = if is_json {
            body.iter()
                .map(|b| if matches!(b, b'\n' | b'\r') { b' ' } else { *b })
                .collect()
        } else {
            serde_json::to_vec(&String::from_utf8_lossy(body))?
        };
        line.push(b'\n');
        log.write_all(&line)
    }
}

/// Reads one Content-Length frame; `None` at a clean end of input.
fn read_message(input: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    let mut length: Option<usize> = None;
    let mut started = false;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = input
            .by_ref()
            .take(MAX_HEADER_LINE as u64)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            if started {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "input ended inside a header",
                ));
            }
            return Ok(None);
        }
        started = true;
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            if let Some(length) = length {
                if length > MAX_BODY {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, "body too large"));
                }
                let mut body = vec![0; length];
                input.read_exact(&mut body)?;
                return Ok(Some(body));
            }
            continue;
        }
        if let Some((name, value)) = text.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok();
            }
        }
    }
}

fn write_message(out: &mut impl Write, body: &[u8]) -> io::Result<()> {
    write!(out, "Content-Length: {}\r\n\r\n", body.len())?;
    out.write_all(body)?;
    out.flush()
}

/// The hidden `echo_agent` mode (see the top of this file).
fn echo_agent() -> io::Result<i32> {
    let mut input = BufReader::new(io::stdin().lock());
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(0);
        }
        let Ok(Incoming {
            id: Some(id),
            method: Some(method),
            params,
        }) = serde_json::from_slice::<Incoming>(&line)
        else {
            continue;
        };
        if method == "bench/pingBack" {
            let count = params
                .and_then(|p| serde_json::from_str::<serde_json::Value>(p.get()).ok())
                .and_then(|p| p["count"].as_u64())
                .unwrap_or(0);
            for k in 1..=count {
                let ping = format!("\"a{k}\"");
                writeln!(
                    out,
                    r#"{{"jsonrpc":"2.0","id":{ping},"method":"bench/ping","params":{{}}}}"#
                )?;
                out.flush()?;
                // Until the response to this ping (a line with its id and no method).
                loop {
                    line.clear();
                    if input.read_until(b'\n', &mut line)? == 0 {
                        return Ok(0);
                    }
                    if let Ok(Incoming {
                        id: Some(answered),
                        method: None,
                        ..
                    }) = serde_json::from_slice::<Incoming>(&line)
                    {
                        if answered.get() == ping {
                            break;
                        }
                    }
                }
            }
        }
        writeln!(
            out,
            r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#,
            id.get()
        )?;
        out.flush()?;
    }
}

fn sleep_forever() -> ! {
    loop {
        std::thread::park();
    }
}

fn flood_stderr() {
    let mut chunk = Vec::with_capacity(FLOOD_CHUNK + 128);
    let mut line_no: u64 = 0;
    let mut stderr = io::stderr();
    loop {
        chunk.clear();
        while chunk.len() < FLOOD_CHUNK {
            line_no += 1;
            // Writing into a Vec cannot fail.
            let _ = writeln!(
                chunk,
                "fake-lsp flood line {line_no:010} {}",
                "x".repeat(60)
            );
        }
        if stderr.write_all(&chunk).is_err() {
            return;
        }
        std::thread::sleep(FLOOD_PAUSE);
    }
}

/// Writes `pid` to `path` atomically.
fn write_pid_file(path: &Path, pid: u32) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, format!("{pid}\n"))?;
    std::fs::rename(&tmp, path)
}

fn fork_grandchild() -> io::Result<()> {
    let exe = std::env::current_exe()?;
    let child = Command::new(exe)
        .env("FAKE_LSP_MODE", "sleep_forever")
        .env_remove("FAKE_LSP_LOG")
        .env_remove("FAKE_LSP_GRANDCHILD_PID_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    if let Some(path) = std::env::var_os("FAKE_LSP_GRANDCHILD_PID_FILE") {
        write_pid_file(Path::new(&path), child.id())?;
    }
    // Deliberately never waited for: it must outlive us unless its group is killed.
    std::mem::forget(child);
    Ok(())
}

/// `workspace_symbols=<n>`: n functions named as the query (see the module's comment).
fn workspace_symbols(
    mode: &Mode,
    root: Option<&Path>,
    params: Option<&RawValue>,
) -> serde_json::Value {
    let count: usize = mode
        .params
        .get("workspace_symbols")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let query = params
        .and_then(|p| serde_json::from_str::<serde_json::Value>(p.get()).ok())
        .and_then(|p| p["query"].as_str().map(str::to_string))
        .unwrap_or_default();
    let symbol = |path: &Path, line: usize| {
        let uri = url_of(path);
        json!({"name": query, "kind": 12, "location": {"uri": uri, "range":
            {"start": {"line": line, "character": 3}, "end": {"line": line, "character": 3 + query.len()}}}})
    };
    let mut symbols = Vec::new();
    if let Some(outside) = std::env::var_os("FAKE_LSP_SYMBOL_OUTSIDE") {
        symbols.push(symbol(Path::new(&outside), 0));
    }
    let count = if query.starts_with("outside_") {
        0
    } else {
        count
    };
    let dir = root.map(Path::to_path_buf).unwrap_or_default();
    for i in 0..count {
        symbols.push(symbol(&dir.join(format!("s{}.fake", i % 100)), i / 100));
    }
    serde_json::Value::Array(symbols)
}

/// `file://` + the path, percent-encoding nothing but what a test path holds.
fn url_of(path: &Path) -> String {
    format!("file://{}", path.display()).replace(' ', "%20")
}
