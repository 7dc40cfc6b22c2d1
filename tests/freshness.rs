//! Document state from the disk, with real language servers: what an agent
//! asks through `lsp/request` reflects the disk (and the agent's own confirmed
//! writes) when it asks.
//!
//! - rust-analyzer and pyright: a plain write, an atomic save (temp file +
//!   rename), a delete, and a new module that existing code then imports.
//! - rust-analyzer: a rename at a definition edits three files, two of which
//!   were never opened on the server.
//! - Read-your-writes through the relay: 1,000 `fs/write_text_file`s that the
//!   editor confirms without touching the disk, each followed at once by a
//!   hover that must show the written value (pyright).
//! - Version order: 1,000 rapid rewrites of one file while hovers run; the
//!   recorded `didOpen`/`didChange` versions strictly increase, the texts
//!   never go back to an older disk state, and the last text the server got
//!   is the disk's (clangd).
//!
//! Fixtures are copied from `tests/projects/` into temporary directories
//! (servers write `target/` and caches into their workspace). A missing server
//! fails its test with the command that installs it; nothing is skipped.
//!
//! What is synchronous and what is not: a request's *named* documents are
//! synced from the disk before it is forwarded, so checks on them run right
//! after the disk change. A file the request does not name reaches the server
//! only through the proxy's watcher (20 ms coalescing window, then a dispatch
//! task: 15-50 ms measured here); a request sent before that sees the old
//! state. Those checks therefore first wait, bounded, until the recording
//! shows the proxy sent the change, and then ask once (see [`WatchedApply`]
//! for the one server that may need a second query).
#![cfg(target_os = "linux")]

mod support;

use support::recorded::{
    file_uri, fixture_copy, recorded_registry, recorder, request_params, uri_path, Recorded,
    SESSION_ID,
};
use support::require;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use acp_lsp::acp::relay::{self, RelayEnd, RelayOptions};
use acp_lsp_core::gate::{Gate, GateConfig, GateMethod};
use serde_json::{json, Value};
use tokio::io::{duplex, AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

/// `waitUntilReady` of a test's first `lsp/request`, in milliseconds
/// (rust-analyzer needs ~3-10 s on two cores; the tests run in parallel).
const WAIT_UNTIL_READY_MS: u64 = 90_000;
/// Longest wait for the proxy's watcher to forward a disk change to a server
/// (coalescing window of 20 ms plus dispatch; generous for a loaded machine).
const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for a server that applies watched-file events off its message
/// loop (rust-analyzer's VFS loader thread) to answer from the new disk state.
const SERVER_APPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait, after the last rewrite, for the server's text to be the disk's.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between two looks at the recording (or two queries, see above).
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Longest wait for one line on a relay pipe.
const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// Buffer of each duplex pipe of the relay test.
const PIPE_BUFFER: usize = 64 * 1024;
/// Iterations of the read-your-writes and version-order tests.
const ROUNDS: usize = 1_000;
/// LSP `FileChangeType`.
const CREATED: u64 = 1;
const CHANGED: u64 = 2;
const DELETED: u64 = 3;
/// LSP `ContentModified`.
const CONTENT_MODIFIED: i64 = -32801;

// ---------------------------------------------------------------------------
// Harness: a registry and gate over a fresh copy of a fixture, recorded
// ---------------------------------------------------------------------------

/// A fixture copy's [`Recorded`] harness (`Deref`s to it).
struct Harness {
    recorded: Recorded,
}

impl std::ops::Deref for Harness {
    type Target = Recorded;

    fn deref(&self) -> &Recorded {
        &self.recorded
    }
}

/// A fresh copy of `tests/projects/<fixture>` with `extra` files written into
/// it.
fn project(fixture: &str, extra: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    fixture_copy(fixture, "acp-lsp-fresh-", |root| write_extra(root, extra))
}

fn write_extra(root: &Path, extra: &[(&str, &str)]) {
    for (file, text) in extra {
        std::fs::write(root.join(file), text).expect("write an extra fixture file");
    }
}

impl Harness {
    fn start(fixture: &str, extra: &[(&str, &str)]) -> Harness {
        Harness {
            recorded: Recorded::start(fixture, "acp-lsp-fresh-", |root| write_extra(root, extra)),
        }
    }

    /// One gate call; the whole response.
    async fn call(&self, method: GateMethod, params: Value) -> Value {
        self.response(method, params).await
    }

    /// The id of the session's server called `name`.
    async fn server_id(&self, name: &str) -> String {
        let entry = self.entry(name).await;
        entry["serverId"]
            .as_str()
            .unwrap_or_else(|| panic!("no serverId: {entry}"))
            .to_string()
    }

    /// The glob patterns the server registered for `didChangeWatchedFiles`.
    async fn watched_globs(&self, name: &str) -> Vec<String> {
        let entry = self.entry(name).await;
        entry["_meta"]["acp-lsp"]["registrations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["method"] == json!("workspace/didChangeWatchedFiles"))
            .flat_map(|r| {
                r["registerOptions"]["watchers"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|w| match &w["globPattern"] {
                Value::String(glob) => glob.clone(),
                relative => format!(
                    "{}/{}",
                    relative["baseUri"]["uri"]
                        .as_str()
                        .or(relative["baseUri"].as_str())
                        .unwrap_or_default(),
                    relative["pattern"].as_str().unwrap_or_default()
                ),
            })
            .collect()
    }

    /// `lsp/request`; the whole response (result or error).
    async fn request_raw(
        &self,
        server_id: &str,
        method: &str,
        params: Value,
        wait_until_ready_ms: Option<u64>,
    ) -> Value {
        self.call(
            GateMethod::Request,
            request_params(server_id, method, params, wait_until_ready_ms),
        )
        .await
    }

    /// `lsp/request`; the `result` (fails on an error answer).
    async fn request(
        &self,
        server_id: &str,
        method: &str,
        params: Value,
        wait_until_ready_ms: Option<u64>,
    ) -> Value {
        let response = self
            .request_raw(server_id, method, params.clone(), wait_until_ready_ms)
            .await;
        assert!(
            response.get("error").is_none(),
            "error answer to {method} {params}: {response}"
        );
        response["result"].clone()
    }

    fn path(&self, file: &str) -> PathBuf {
        self.root.join(file)
    }

    /// `{textDocument, position}` at the first `needle` on 0-based `line` of
    /// the file as it is on disk now.
    fn at(&self, file: &str, line: u32, needle: &str) -> Value {
        position_params(&self.path(file), &self.uri(file), line, needle)
    }

    /// A URI's path relative to the project root.
    fn relative(&self, uri: &str) -> String {
        self.relative_path(&uri_path(uri), uri)
    }

    /// (file, start line) of a definition result; empty for `null`/`[]`.
    fn locations(&self, result: &Value) -> Vec<(String, u32)> {
        let items = match result {
            Value::Null => Vec::new(),
            Value::Array(items) => items.clone(),
            Value::Object(_) => vec![result.clone()],
            other => panic!("no locations: {other}"),
        };
        items
            .iter()
            .map(|item| {
                let uri = item
                    .get("targetUri")
                    .or_else(|| item.get("uri"))
                    .and_then(Value::as_str)
                    .unwrap_or_else(|| panic!("location without a uri: {item}"));
                let range = item
                    .get("targetSelectionRange")
                    .or_else(|| item.get("range"))
                    .unwrap_or_else(|| panic!("location without a range: {item}"));
                (self.relative(uri), start_line(range))
            })
            .collect()
    }

    /// Every recorded message the proxy sent the server, in wire order.
    fn sent_to(&self, server_id: &str) -> Vec<Value> {
        self.recorder.sync();
        sent_to(&self.recording, server_id)
    }

    async fn shutdown(&self) {
        self.registry.shutdown().await;
    }
}

fn position_params(path: &Path, uri: &str, line: u32, needle: &str) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let text_line = text
        .lines()
        .nth(line as usize)
        .unwrap_or_else(|| panic!("{} has no line {line}:\n{text}", path.display()));
    let byte = text_line
        .find(needle)
        .unwrap_or_else(|| panic!("{}:{line} has no {needle:?}: {text_line}", path.display()));
    let character = text_line[..byte].encode_utf16().count();
    json!({
        "textDocument": { "uri": uri },
        "position": { "line": line, "character": character },
    })
}

fn start_line(range: &Value) -> u32 {
    range["start"]["line"]
        .as_u64()
        .and_then(|l| u32::try_from(l).ok())
        .unwrap_or_else(|| panic!("range without a start line: {range}"))
}

/// Messages recorded in direction `proxy→server:<id>`.
fn sent_to(recording: &Path, server_id: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(recording).expect("read the recording");
    let dir = json!(format!("proxy→server:{server_id}"));
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["dir"] == dir)
        .map(|mut l| l["msg"].take())
        .collect()
}

/// One line per message: method, uri, version (for failure messages).
fn summary(messages: &[Value]) -> String {
    messages
        .iter()
        .map(|m| {
            let p = &m["params"];
            let what = match p["textDocument"]["uri"].as_str() {
                Some(uri) => format!("{uri} v{}", p["textDocument"]["version"]),
                None => p["changes"].to_string(),
            };
            format!("\n  {} {} {what}", m["id"], m["method"])
        })
        .collect()
}

/// The `uri` of a document notification (didOpen, didChange, didClose).
fn notified_uri(msg: &Value) -> Option<&str> {
    let method = msg["method"].as_str()?;
    if msg.get("id").is_some() || !method.starts_with("textDocument/did") {
        return None;
    }
    msg["params"]["textDocument"]["uri"].as_str()
}

/// Whether `msg` carries the disk change of `uri` to the server: the
/// document's own didChange/didClose when it is open there, or a
/// `workspace/didChangeWatchedFiles` event of `kind`.
fn forwards(msg: &Value, uri: &str, kind: u64) -> bool {
    match msg["method"].as_str() {
        Some("workspace/didChangeWatchedFiles") => {
            msg["params"]["changes"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|e| e["uri"] == json!(uri) && e["type"] == json!(kind))
            })
        }
        Some("textDocument/didChange" | "textDocument/didClose") => notified_uri(msg) == Some(uri),
        _ => false,
    }
}

/// The text of hover `contents`: `MarkupContent`, `MarkedString` or a list.
fn hover_text(result: &Value) -> String {
    fn text(contents: &Value) -> String {
        match contents {
            Value::String(s) => s.clone(),
            Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join("\n"),
            Value::Object(o) => o
                .get("value")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            _ => String::new(),
        }
    }
    text(&result["contents"])
}

/// Replaces `path` the way editors save: a temporary file beside it, renamed over it.
fn atomic_write(path: &Path, text: &str) {
    let name = path
        .file_name()
        .expect("a file name")
        .to_string_lossy()
        .into_owned();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).expect("write the temporary file");
    std::fs::rename(&tmp, path).expect("rename over the original");
}

// ---------------------------------------------------------------------------
// 1. Plain write, atomic save, delete, new module
// ---------------------------------------------------------------------------

/// How a server takes file changes it learns of without a request naming them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum WatchedApply {
    /// Before it answers the next request.
    InOrder,
    /// Off its message loop: a request right after the notification may still
    /// see the old state. rust-analyzer hands `didChangeWatchedFiles` and
    /// `didClose` to its VFS loader thread (`loader.handle.invalidate`), which
    /// reads the disk and reports back to the main loop as a separate event;
    /// only for such a server does [`Steps::ask`] ask again. Measured here:
    /// the first query was already fresh every time (the loader needs well
    /// under the ~10 ms the test takes to see the forward in the recording).
    Async,
}

/// One server's run through the four disk changes.
struct Steps<'a> {
    h: &'a Harness,
    server: String,
    name: &'static str,
    apply: WatchedApply,
}

impl Steps<'_> {
    /// Marks the recording: what the proxy sent so far.
    fn mark(&self) -> usize {
        self.h.sent_to(&self.server).len()
    }

    /// Waits until the proxy has sent the server the change of `file` (kind
    /// `kind`) seen by its watcher, after `mark`. Asynchronous by nature: the
    /// watcher coalesces events for 20 ms, then a task dispatches them.
    async fn forwarded(&self, mark: usize, file: &str, kind: u64, since: Instant) -> Duration {
        let uri = self.h.uri(file);
        let deadline = Instant::now() + FORWARD_TIMEOUT;
        loop {
            let sent = self.h.sent_to(&self.server);
            if sent.iter().skip(mark).any(|m| forwards(m, &uri, kind)) {
                return since.elapsed();
            }
            assert!(
                Instant::now() < deadline,
                "{}: the proxy did not forward the change of {file} (type {kind}) within {FORWARD_TIMEOUT:?}; sent since: {:#?}",
                self.name,
                &sent[mark.min(sent.len())..]
            );
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Asks once, or, for a server that applies watched changes
    /// asynchronously, until `fresh` holds (bounded). Prints how many queries
    /// and how long it took; returns the fresh result.
    async fn ask(
        &self,
        what: &str,
        method: &str,
        params: Value,
        fresh: impl Fn(&Value) -> bool,
    ) -> Value {
        let started = Instant::now();
        let deadline = started + SERVER_APPLY_TIMEOUT;
        let mut asked = 0;
        loop {
            let result = self
                .h
                .request(&self.server, method, params.clone(), None)
                .await;
            asked += 1;
            if fresh(&result) {
                eprintln!(
                    "{}: {what}: fresh at query {asked}; asking took {:?}",
                    self.name,
                    started.elapsed()
                );
                return result;
            }
            assert!(
                self.apply == WatchedApply::Async && Instant::now() < deadline,
                "{}: {what}: stale answer after {asked} queries over {:?}: {result}",
                self.name,
                started.elapsed()
            );
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Asks once, right away: for changes of documents the request names.
    async fn ask_now(&self, method: &str, params: Value) -> Value {
        self.h.request(&self.server, method, params, None).await
    }
}

/// What one language's fixture looks like for the four steps. Lines are 0-based.
struct Script {
    fixture: &'static str,
    server: &'static str,
    command: &'static str,
    install: &'static str,
    apply: WatchedApply,
    /// The module defining the function, and the function's name.
    module: &'static str,
    function: &'static str,
    /// The defining line (after the rewrites below, which keep it).
    def_line: u32,
    /// A use site in another file: (file, line).
    use_site: (&'static str, u32),
    /// The module rewritten by a plain write: doc `PLAIN`, parameters `(w, h)`.
    plain: &'static str,
    plain_signature: &'static str,
    /// The module saved atomically: doc `ATOMIC`.
    atomic: &'static str,
    atomic_signature: &'static str,
    /// The new module, the importing file's new text, and where its use is.
    new_module: &'static str,
    new_module_text: &'static str,
    importer: &'static str,
    importer_text: &'static str,
    new_use: (u32, &'static str),
    new_def_line: u32,
    /// What definition at the use site answers once the module is deleted.
    unresolved: &'static str,
}

const PLAIN: &str = "Revised by a plain write";
const ATOMIC: &str = "Revised by an atomic save";

const RUST: Script = Script {
    fixture: "rust-three-files",
    server: "rust-analyzer",
    command: "rust-analyzer",
    install: "rustup component add rust-analyzer",
    apply: WatchedApply::Async,
    module: "src/geometry.rs",
    function: "area",
    def_line: 1,
    use_site: ("src/report.rs", 4),
    plain: "/// Revised by a plain write.\npub fn area(w: u32, h: u32) -> u32 {\n    w * h\n}\n",
    plain_signature: "pub fn area(w: u32, h: u32) -> u32",
    atomic: "/// Revised by an atomic save.\npub fn area(across: u32, down: u32) -> u32 {\n    across * down\n}\n",
    atomic_signature: "pub fn area(across: u32, down: u32) -> u32",
    new_module: "src/units.rs",
    new_module_text: "/// Scales a length.\npub fn scale(value: u32, factor: u32) -> u32 {\n    value * factor\n}\n",
    importer: "src/lib.rs",
    importer_text: "pub mod report;\npub mod stats;\npub mod units;\n\npub fn doubled(value: u32) -> u32 {\n    units::scale(value, 2)\n}\n",
    new_use: (5, "scale"),
    new_def_line: 1,
    unresolved: "[]",
};

const PYTHON: Script = Script {
    fixture: "python-project",
    server: "pyright",
    command: "pyright-langserver",
    install: "npm i -g pyright",
    apply: WatchedApply::InOrder,
    module: "shapes/geometry.py",
    function: "rect_area",
    def_line: 0,
    use_site: ("shapes/report.py", 4),
    plain: "def rect_area(w: int, h: int) -> int:\n    \"\"\"Revised by a plain write.\"\"\"\n    return w * h\n",
    plain_signature: "w: int",
    atomic: "def rect_area(across: int, down: int) -> int:\n    \"\"\"Revised by an atomic save.\"\"\"\n    return across * down\n",
    atomic_signature: "across: int",
    new_module: "shapes/units.py",
    new_module_text: "def scale(value: int, factor: int) -> int:\n    \"\"\"Scales a length.\"\"\"\n    return value * factor\n",
    importer: "shapes/report.py",
    importer_text: "from shapes.units import scale\n\n\ndef doubled(value: int) -> int:\n    return scale(value, 2)\n",
    new_use: (4, "scale"),
    new_def_line: 0,
    unresolved: "null",
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_analyzer_follows_the_disk() {
    follow_the_disk(&RUST).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyright_follows_the_disk() {
    follow_the_disk(&PYTHON).await;
}

async fn follow_the_disk(script: &Script) {
    require(script.command, script.install);
    let h = Harness::start(script.fixture, &[]);
    let server = h.server_id(script.server).await;
    let s = Steps {
        h: &h,
        server,
        name: script.server,
        apply: script.apply,
    };
    let (use_file, use_line) = script.use_site;
    let use_at = || h.at(use_file, use_line, script.function);
    let def_at = || h.at(script.module, script.def_line, script.function);
    let module_uri = h.uri(script.module);

    // Ready, with the fixture's own text (the use site names only its file).
    let started = Instant::now();
    let first = h
        .request(
            &s.server,
            "textDocument/hover",
            use_at(),
            Some(WAIT_UNTIL_READY_MS),
        )
        .await;
    assert!(
        hover_text(&first["lspResult"]).contains("Area of a"),
        "{}: first hover: {first}",
        s.name
    );
    eprintln!("{}: first answer after {:?}", s.name, started.elapsed());
    // Changes to files no request names reach the server only as
    // didChangeWatchedFiles events matching what it registered.
    let globs = h.watched_globs(script.server).await;
    eprintln!("{}: registered file watchers {globs:?}", s.name);
    assert!(
        !globs.is_empty(),
        "{} registered no didChangeWatchedFiles watchers",
        s.name
    );

    // (a) A plain write of the defining module, which the server read from
    // the disk for the first hover but was never given. The hover names it:
    // opened with the disk's text before forwarding, so the first answer is
    // the new text.
    let mark = s.mark();
    std::fs::write(h.path(script.module), script.plain).expect("plain write");
    let hover = s.ask_now("textDocument/hover", def_at()).await;
    let text = hover_text(&hover["lspResult"]);
    assert!(
        text.contains(PLAIN) && text.contains(script.plain_signature),
        "{}: hover after a plain write: {text:?}",
        s.name
    );
    // Then, at once, the use site in the other file sees the new definition
    // too. pyright re-checks the files that import a module when its disk
    // text changes, but not when a didOpen brings new text: the proxy says
    // first that the file changed on disk (below), or the use site would keep
    // the old signature for good (the watcher's own event comes after the
    // didOpen, when pyright ignores disk events for the open file).
    let hover = s.ask_now("textDocument/hover", use_at()).await;
    let text = hover_text(&hover["lspResult"]);
    let sent = h.sent_to(&s.server);
    assert!(
        text.contains(PLAIN),
        "{}: use-site hover after a plain write: {text:?}; sent: {}",
        s.name,
        summary(&sent[mark..])
    );
    let sent = &sent[mark..];
    let opened_at = sent
        .iter()
        .position(|m| {
            m["method"] == json!("textDocument/didOpen")
                && notified_uri(m) == Some(module_uri.as_str())
        })
        .unwrap_or_else(|| panic!("{}: the module was not opened: {}", s.name, summary(sent)));
    assert_eq!(
        sent[opened_at]["params"]["textDocument"]["text"],
        json!(script.plain),
        "{}: opened with other text",
        s.name
    );
    assert!(
        sent[..opened_at]
            .iter()
            .any(|m| m["method"] == json!("workspace/didChangeWatchedFiles")
                && forwards(m, &module_uri, CHANGED)),
        "{}: no didChangeWatchedFiles for the module before its didOpen: {}",
        s.name,
        summary(sent)
    );

    // (b) An atomic save of the module, now open on the server but not named
    // by the use-site hover: the watcher syncs the open document.
    let mark = s.mark();
    let saved = Instant::now();
    atomic_write(&h.path(script.module), script.atomic);
    let forwarded = s.forwarded(mark, script.module, CREATED, saved).await;
    eprintln!(
        "{}: atomic save forwarded by the watcher after {forwarded:?}",
        s.name
    );
    // The watcher's didChange of the open module comes first in its batch.
    assert!(
        h.sent_to(&s.server)[mark..].iter().any(|m| {
            m["method"] == json!("textDocument/didChange")
                && notified_uri(m) == Some(module_uri.as_str())
                && m["params"]["contentChanges"][0]["text"] == json!(script.atomic)
        }),
        "{}: the open module was not synced by the watcher",
        s.name
    );
    s.ask(
        "atomic save, use-site hover",
        "textDocument/hover",
        use_at(),
        |r| hover_text(&r["lspResult"]).contains(ATOMIC),
    )
    .await;
    // The defining module, named: already in sync, so no new version.
    let version_before = h
        .sent_to(&s.server)
        .iter()
        .filter(|m| notified_uri(m) == Some(module_uri.as_str()))
        .count();
    let hover = s.ask_now("textDocument/hover", def_at()).await;
    let text = hover_text(&hover["lspResult"]);
    assert!(
        text.contains(ATOMIC) && text.contains(script.atomic_signature),
        "{}: hover after an atomic save: {text:?}",
        s.name
    );
    let version_after = h
        .sent_to(&s.server)
        .iter()
        .filter(|m| notified_uri(m) == Some(module_uri.as_str()))
        .count();
    assert_eq!(
        version_before, version_after,
        "{}: the module was sent again though the server had its text",
        s.name
    );

    // Before the delete, definition at the use site lands in the module.
    let definition = s.ask_now("textDocument/definition", use_at()).await;
    assert_eq!(
        h.locations(&definition["lspResult"]),
        vec![(script.module.to_string(), script.def_line)],
        "{}: definition before the delete",
        s.name
    );

    // (c) Delete the module: the use site's symbol no longer resolves. The
    // request names only the use site's file, so the server learns of the
    // delete from the watcher (didClose of the open module, then a
    // didChangeWatchedFiles deletion).
    let mark = s.mark();
    let deleted = Instant::now();
    std::fs::remove_file(h.path(script.module)).expect("delete the module");
    let forwarded = s.forwarded(mark, script.module, DELETED, deleted).await;
    eprintln!(
        "{}: delete forwarded by the watcher after {forwarded:?}",
        s.name
    );
    let sent = h.sent_to(&s.server);
    assert!(
        sent[mark..]
            .iter()
            .any(|m| m["method"] == json!("textDocument/didClose")
                && notified_uri(m) == Some(module_uri.as_str())),
        "{}: the deleted module was not closed on the server",
        s.name
    );
    // rust-analyzer answers `[]`, pyright `null`.
    let unresolved: Value = serde_json::from_str(script.unresolved).expect("JSON");
    s.ask(
        "delete, definition at the use site",
        "textDocument/definition",
        use_at(),
        |r| r["lspResult"] == unresolved,
    )
    .await;

    // (d) A new module, never opened, then the file that imports it: the
    // importer is named (synced at once), the new module reaches the server
    // only through the watcher.
    let mark = s.mark();
    let created = Instant::now();
    std::fs::write(h.path(script.new_module), script.new_module_text)
        .expect("write the new module");
    std::fs::write(h.path(script.importer), script.importer_text).expect("edit the importer");
    let forwarded = s.forwarded(mark, script.new_module, CREATED, created).await;
    eprintln!(
        "{}: new module forwarded by the watcher after {forwarded:?}",
        s.name
    );
    let (line, needle) = script.new_use;
    s.ask(
        "new module, definition at the use site",
        "textDocument/definition",
        h.at(script.importer, line, needle),
        |r| {
            h.locations(&r["lspResult"])
                == vec![(script.new_module.to_string(), script.new_def_line)]
        },
    )
    .await;
    // The new module was never opened on the server.
    let new_uri = h.uri(script.new_module);
    assert!(
        !h.sent_to(&s.server)
            .iter()
            .any(|m| notified_uri(m) == Some(new_uri.as_str())),
        "{}: the new module was opened",
        s.name
    );
    eprintln!("{}: all steps {:?}", s.name, started.elapsed());
    h.shutdown().await;
}

// ---------------------------------------------------------------------------
// 2. Rename across files never opened
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_analyzer_renames_in_files_never_opened() {
    require("rust-analyzer", RUST.install);
    let h = Harness::start("rust-three-files", &[]);
    let server = h.server_id("rust-analyzer").await;
    let mut params = h.at("src/geometry.rs", 1, "area");
    params["newName"] = json!("rect_area");
    let result = h
        .request(
            &server,
            "textDocument/rename",
            params,
            Some(WAIT_UNTIL_READY_MS),
        )
        .await;
    // File → (line, character, newText) of every edit.
    let mut edits: BTreeMap<String, BTreeSet<(u32, u64, String)>> = BTreeMap::new();
    let mut add = |uri: &str, list: &Value| {
        for edit in list.as_array().expect("edits are a list") {
            edits.entry(h.relative(uri)).or_default().insert((
                start_line(&edit["range"]),
                edit["range"]["start"]["character"]
                    .as_u64()
                    .expect("a character"),
                edit["newText"].as_str().expect("newText").to_string(),
            ));
        }
    };
    let edit = &result["lspResult"];
    for change in edit["documentChanges"].as_array().into_iter().flatten() {
        add(
            change["textDocument"]["uri"].as_str().expect("a uri"),
            &change["edits"],
        );
    }
    for (uri, list) in edit["changes"].as_object().into_iter().flatten() {
        add(uri, list);
    }
    // Each edit replaces an `area` on disk, where the fixture has one.
    let expect = |file: &str, lines: &[u32]| -> BTreeSet<(u32, u64, String)> {
        let text = std::fs::read_to_string(h.path(file)).expect("read a fixture file");
        let all: Vec<&str> = text.lines().collect();
        lines
            .iter()
            .map(|&l| {
                let line = all[l as usize];
                let col = line
                    .find("area(")
                    .or_else(|| line.find("area;"))
                    .unwrap_or_else(|| panic!("{file}:{l} has no `area`"));
                (
                    l,
                    line[..col].encode_utf16().count() as u64,
                    "rect_area".to_string(),
                )
            })
            .collect()
    };
    let expected: BTreeMap<String, BTreeSet<(u32, u64, String)>> = [
        ("src/geometry.rs", expect("src/geometry.rs", &[1])),
        ("src/report.rs", expect("src/report.rs", &[0, 4])),
        ("src/stats.rs", expect("src/stats.rs", &[4, 5])),
    ]
    .into_iter()
    .map(|(f, e)| (f.to_string(), e))
    .collect();
    assert_eq!(edits, expected, "rename: {edit}");
    // Only the file the request named was ever opened on the server.
    let opened: Vec<String> = h
        .sent_to(&server)
        .iter()
        .filter(|m| m["method"] == json!("textDocument/didOpen"))
        .filter_map(|m| notified_uri(m).map(|u| h.relative(u)))
        .collect();
    assert_eq!(opened, vec!["src/geometry.rs".to_string()]);
    h.shutdown().await;
}

// ---------------------------------------------------------------------------
// 3. Read-your-writes through the relay
// ---------------------------------------------------------------------------

/// One side of the relay as the test plays it.
struct Peer {
    name: &'static str,
    reader: BufReader<DuplexStream>,
    writer: DuplexStream,
}

impl Peer {
    async fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        tokio::time::timeout(IO_TIMEOUT, self.writer.write_all(line.as_bytes()))
            .await
            .unwrap_or_else(|_| panic!("{}: write stalled", self.name))
            .unwrap_or_else(|e| panic!("{}: write failed: {e}", self.name));
    }

    async fn recv(&mut self) -> Value {
        let mut line = String::new();
        let read = tokio::time::timeout(IO_TIMEOUT, self.reader.read_line(&mut line))
            .await
            .unwrap_or_else(|_| panic!("{}: no line within {IO_TIMEOUT:?}", self.name))
            .unwrap_or_else(|e| panic!("{}: read failed: {e}", self.name));
        assert!(read > 0, "{}: input ended", self.name);
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {line}", self.name))
    }
}

/// The value pyright's hover shows for `VALUE: Final = <i>`.
fn shows_value(hover: &str, i: usize) -> bool {
    hover.contains(&format!("Literal[{i}]"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_your_writes_through_the_relay() {
    require(PYTHON.command, PYTHON.install);
    let initial = "from typing import Final\n\nVALUE: Final = 0\n";
    let (_project, root) = project("python-project", &[("shapes/values.py", initial)]);
    let file = root.join("shapes/values.py");
    let uri = file_uri(&file);
    let (_recording_dir, _recording, recorder) = recorder();
    let registry = recorded_registry(&recorder);
    let gate = Gate::new(Arc::clone(&registry), GateConfig::default());

    let (editor_in, editor_w) = duplex(PIPE_BUFFER);
    let (editor_out, editor_r) = duplex(PIPE_BUFFER);
    let (agent_in, agent_r) = duplex(PIPE_BUFFER);
    let (agent_out, agent_w) = duplex(PIPE_BUFFER);
    let relay = tokio::spawn(relay::run(
        gate,
        editor_in,
        editor_out,
        agent_in,
        agent_out,
        RelayOptions::default(),
        || {},
    ));
    let mut editor = Peer {
        name: "editor",
        reader: BufReader::new(editor_r),
        writer: editor_w,
    };
    let mut agent = Peer {
        name: "agent",
        reader: BufReader::new(agent_r),
        writer: agent_w,
    };

    // initialize: the agent gets the `lsp` capability added.
    editor
        .send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}},
            }}),
        )
        .await;
    let init = agent.recv().await;
    assert_eq!(
        init["params"]["clientCapabilities"]["lsp"],
        json!({}),
        "{init}"
    );
    agent
        .send(&json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {}}}))
        .await;
    assert_eq!(editor.recv().await["id"], json!(0));

    // session/new: committed when the agent answers.
    editor
        .send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {
                "cwd": root.display().to_string(), "mcpServers": [],
            }}),
        )
        .await;
    assert_eq!(agent.recv().await["method"], json!("session/new"));
    agent
        .send(&json!({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SESSION_ID}}))
        .await;
    assert_eq!(editor.recv().await["id"], json!(1));

    agent
        .send(&json!({"jsonrpc": "2.0", "id": "servers", "method": "lsp/servers", "params": {"sessionId": SESSION_ID}}))
        .await;
    let servers = agent.recv().await;
    let server_id = servers["result"]["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == json!("pyright"))
        .and_then(|s| s["serverId"].as_str())
        .unwrap_or_else(|| panic!("no pyright in {servers}"))
        .to_string();

    let hover_params = position_params(&file, &uri, 2, "VALUE");
    let hover = |id: Value, wait: Option<u64>| {
        let mut params = json!({
            "sessionId": SESSION_ID, "serverId": server_id,
            "method": "textDocument/hover", "params": hover_params,
        });
        if let Some(ms) = wait {
            params["waitUntilReady"] = json!(ms);
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "lsp/request", "params": params})
    };
    // The first hover opens the document (writes to documents not open on a
    // server are read from the disk when next needed, by design).
    agent
        .send(&hover(json!("first"), Some(WAIT_UNTIL_READY_MS)))
        .await;
    let first = agent.recv().await;
    let text = hover_text(&first["result"]["lspResult"]);
    assert!(shows_value(&text, 0), "first hover: {first}");

    let started = Instant::now();
    for i in 1..=ROUNDS {
        let content = format!("from typing import Final\n\nVALUE: Final = {i}\n");
        let write = json!({"jsonrpc": "2.0", "id": format!("w{i}"), "method": "fs/write_text_file",
            "params": {"sessionId": SESSION_ID, "path": file.display().to_string(), "content": content}});
        agent.send(&write).await;
        assert_eq!(editor.recv().await, write);
        // The editor confirms without writing the disk: only the relay's
        // report of the confirmed write can make the server see it.
        let ok = json!({"jsonrpc": "2.0", "id": format!("w{i}"), "result": null});
        editor.send(&ok).await;
        assert_eq!(agent.recv().await, ok);
        agent.send(&hover(json!(i), None)).await;
        let answer = agent.recv().await;
        assert_eq!(answer["id"], json!(i), "{answer}");
        let text = hover_text(&answer["result"]["lspResult"]);
        assert!(
            shows_value(&text, i),
            "round {i}: the hover after the confirmed write shows {text:?}: {answer}"
        );
    }
    let took = started.elapsed();
    eprintln!(
        "read-your-writes: {ROUNDS} of {ROUNDS} writes seen, {took:?} ({:?} per write + hover)",
        took / ROUNDS as u32
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("read the file"),
        initial,
        "the disk was written"
    );

    drop(editor);
    drop(agent);
    let end = tokio::time::timeout(IO_TIMEOUT, relay)
        .await
        .expect("the relay ends when the agent's output closes")
        .expect("the relay task");
    assert_eq!(end, RelayEnd::AgentClosed);
    registry.shutdown().await;
}

// ---------------------------------------------------------------------------
// 4. Version order under rapid rewrites
// ---------------------------------------------------------------------------

/// The `<i>` of a `int VALUE = <i>;` text.
fn churn_value(text: &str) -> Option<usize> {
    text.strip_prefix("int VALUE = ")?
        .strip_suffix(";\n")?
        .parse()
        .ok()
}

/// clangd (it answers in milliseconds, so many requests overlap the
/// rewrites; pyright, re-checking after every change, managed a handful).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_rewrites_reach_the_server_in_version_order() {
    require("clangd", "apt-get install -y clangd");
    let h = Arc::new(Harness::start(
        "c-project",
        &[("src/churn.c", "int VALUE = 0;\n")],
    ));
    let server = h.server_id("clangd").await;
    let file = "src/churn.c";
    let uri = h.uri(file);
    let hover_at = h.at(file, 0, "VALUE");
    h.request(
        &server,
        "textDocument/hover",
        hover_at.clone(),
        Some(WAIT_UNTIL_READY_MS),
    )
    .await;

    let started = Instant::now();
    let writing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let writer = {
        let path = h.path(file);
        let writing = Arc::clone(&writing);
        tokio::task::spawn_blocking(move || {
            for i in 1..=ROUNDS {
                let text = format!("int VALUE = {i};\n");
                // Alternate in-place writes and atomic saves.
                if i % 2 == 0 {
                    std::fs::write(&path, text).expect("rewrite");
                } else {
                    atomic_write(&path, &text);
                }
            }
            writing.store(false, Ordering::SeqCst);
        })
    };
    let answered = Arc::new(AtomicUsize::new(0));
    let modified = Arc::new(AtomicUsize::new(0));
    let hovers: Vec<_> = (0..2)
        .map(|_| {
            let h = Arc::clone(&h);
            let server = server.clone();
            let writing = Arc::clone(&writing);
            let answered = Arc::clone(&answered);
            let modified = Arc::clone(&modified);
            let params = hover_at.clone();
            tokio::spawn(async move {
                while writing.load(Ordering::SeqCst) {
                    let response = h
                        .request_raw(&server, "textDocument/hover", params.clone(), None)
                        .await;
                    match response["error"]["code"].as_i64() {
                        None => answered.fetch_add(1, Ordering::Relaxed),
                        // The document changed while the request was in
                        // flight: found by the proxy (`content_modified`) or
                        // by the server itself (`server_error`, same code).
                        Some(CONTENT_MODIFIED) => modified.fetch_add(1, Ordering::Relaxed),
                        Some(_) => panic!("hover failed: {response}"),
                    };
                }
            })
        })
        .collect();
    writer.await.expect("the writer");
    for hover in hovers {
        hover.await.expect("a hover task");
    }
    let wrote = started.elapsed();
    let (answered, modified) = (
        answered.load(Ordering::Relaxed),
        modified.load(Ordering::Relaxed),
    );
    assert!(
        answered + modified > 0,
        "no request ran while the file was rewritten"
    );
    let disk = std::fs::read_to_string(h.path(file)).expect("read the file");
    assert_eq!(disk, format!("int VALUE = {ROUNDS};\n"));

    // Every request has been answered; only the watcher may still send (it
    // reads the disk as it is now). Wait, bounded, for the last text sent to
    // be the disk's.
    let settling = Instant::now();
    let deadline = settling + SETTLE_TIMEOUT;
    let (notes, settled) = loop {
        let notes: Vec<(String, i64, String)> = h
            .sent_to(&server)
            .iter()
            .filter(|m| notified_uri(m) == Some(uri.as_str()))
            .map(|m| {
                let method = m["method"].as_str().unwrap_or_default().to_string();
                let doc = &m["params"]["textDocument"];
                let version = doc["version"].as_i64().unwrap_or(-1);
                let text = doc["text"]
                    .as_str()
                    .or_else(|| m["params"]["contentChanges"][0]["text"].as_str())
                    .unwrap_or_default()
                    .to_string();
                (method, version, text)
            })
            .collect();
        if notes.last().is_some_and(|(_, _, text)| *text == disk) {
            break (notes, settling.elapsed());
        }
        assert!(
            Instant::now() < deadline,
            "{SETTLE_TIMEOUT:?} after the last rewrite the server's last text is {:?}, the disk's {disk:?} ({} notifications)",
            notes.last(),
            notes.len()
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    };
    assert_eq!(notes[0].0, "textDocument/didOpen", "{:?}", notes[0]);
    assert!(
        notes[1..]
            .iter()
            .all(|(method, _, _)| method == "textDocument/didChange"),
        "only didChange after the didOpen: {:?}",
        notes
            .iter()
            .filter(|(m, _, _)| m != "textDocument/didChange")
            .collect::<Vec<_>>()
    );
    for pair in notes.windows(2) {
        assert!(
            pair[1].1 > pair[0].1,
            "versions do not increase: {:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
    // The disk only ever counts up, so neither may what the server is sent: a
    // sync that read the disk earlier must not reach the server later. (An
    // in-place rewrite can be read half done, as an empty file: skipped.)
    let values: Vec<(i64, usize)> = notes
        .iter()
        .filter_map(|(_, version, text)| Some((*version, churn_value(text)?)))
        .collect();
    for pair in values.windows(2) {
        assert!(
            pair[1].1 >= pair[0].1,
            "an older disk text was sent after a newer one: (version, value) {:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
    eprintln!(
        "version order: {ROUNDS} rewrites in {wrote:?}; hovers meanwhile: {answered} answered, {modified} content_modified; {} document notifications, last version {}; the server had the disk's text {:?} after the last request",
        notes.len(),
        notes.last().map_or(0, |n| n.1),
        settled
    );
    h.shutdown().await;
}
