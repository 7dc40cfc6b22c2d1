//! Real language servers behind the gate, driven the way an agent would:
//! `lsp/servers`, then `lsp/request` for definition, references, hover and
//! rename, on small fixture projects (`tests/projects/<name>/`, copied into a
//! temporary directory first because servers write `target/` and
//! `.cache/clangd/` into their workspace).
//!
//! One test per server: rust-analyzer, clangd, pyright and
//! typescript-language-server. A missing server fails the test with the command
//! that installs it; these tests never skip.
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]
#![cfg(target_os = "linux")]

mod support;

use support::procfs::{group_members, process_alive};
use support::recorded::{request_params, uri_path, Recorded, SESSION_ID};
use support::require;
use support::write_compile_commands;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use acp_lsp_core::gate::{GateMethod, ServerState};
use serde_json::{json, Value};

/// Longest wait for a server to reach `ready` (rust-analyzer needs ~3-10 s on
/// two cores; the others well under 2 s, but the four tests run in parallel).
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// `waitUntilReady` of the first `lsp/request`, in milliseconds.
const WAIT_UNTIL_READY_MS: u64 = 60_000;
/// Longest wait for a stopped server's processes to leave /proc.
const EXIT_TIMEOUT: Duration = Duration::from_secs(20);
/// Pause between two looks at /proc.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Length of a hyphenated UUID, the form of `serverId`.
const UUID_LEN: usize = 36;

/// A position in a fixture file: the first occurrence of `needle` on the
/// 0-based `line` (so a fixture edit that moves things fails loudly).
#[derive(Clone, Copy)]
struct Spot {
    file: &'static str,
    line: u32,
    needle: &'static str,
}

const fn spot(file: &'static str, line: u32, needle: &'static str) -> Spot {
    Spot { file, line, needle }
}

/// What one server is expected to do on its fixture. Lines are 0-based.
struct Case {
    fixture: &'static str,
    /// The `name` of the `lsp/servers` entry (the built-in config's name).
    server: &'static str,
    command: &'static str,
    install: &'static str,
    /// Members the server's initialize result is known to carry.
    capabilities: &'static [&'static str],
    /// Whether the server answers `positionEncoding` itself (else the entry
    /// reports the LSP default, utf-16).
    sends_position_encoding: bool,
    definition_at: Spot,
    definition: (&'static str, u32),
    references_at: Spot,
    references: &'static [(&'static str, u32)],
    hover_at: Spot,
    /// Every one of these appears in the hover text.
    hover_mentions: &'static [&'static str],
    rename_at: Spot,
    new_name: &'static str,
    /// File → number of edits of the rename.
    rename_edits: &'static [(&'static str, usize)],
    /// Run on the project copy before the session opens.
    prepare: Option<fn(&Path)>,
}

const COMMON_CAPABILITIES: &[&str] = &[
    "definitionProvider",
    "referencesProvider",
    "hoverProvider",
    "renameProvider",
];

const RUST: Case = Case {
    fixture: "rust-three-files",
    server: "rust-analyzer",
    command: "rust-analyzer",
    install: "rustup component add rust-analyzer",
    capabilities: COMMON_CAPABILITIES,
    sends_position_encoding: true,
    definition_at: spot("src/stats.rs", 4, "area"),
    definition: ("src/geometry.rs", 1),
    references_at: spot("src/report.rs", 4, "area"),
    references: &[
        ("src/geometry.rs", 1),
        ("src/report.rs", 0),
        ("src/report.rs", 4),
        ("src/stats.rs", 4),
        ("src/stats.rs", 5),
    ],
    hover_at: spot("src/report.rs", 4, "area"),
    hover_mentions: &["pub fn area(width: u32, height: u32) -> u32", "Area of a"],
    rename_at: spot("src/report.rs", 4, "area"),
    new_name: "rect_area",
    rename_edits: &[
        ("src/geometry.rs", 1),
        ("src/report.rs", 2),
        ("src/stats.rs", 2),
    ],
    prepare: None,
};

const C: Case = Case {
    fixture: "c-project",
    server: "clangd",
    command: "clangd",
    install: "apt-get install -y clangd",
    capabilities: COMMON_CAPABILITIES,
    sends_position_encoding: false,
    definition_at: spot("src/main.c", 3, "rect_area"),
    definition: ("src/geometry.c", 2),
    references_at: spot("src/main.c", 4, "rect_area"),
    references: &[
        ("include/geometry.h", 4),
        ("src/geometry.c", 2),
        ("src/main.c", 3),
        ("src/main.c", 4),
    ],
    hover_at: spot("src/main.c", 3, "rect_area"),
    hover_mentions: &["rect_area", "int rect_area(int width, int height)"],
    rename_at: spot("src/main.c", 3, "rect_area"),
    new_name: "box_area",
    rename_edits: &[
        ("include/geometry.h", 1),
        ("src/geometry.c", 1),
        ("src/main.c", 2),
    ],
    prepare: Some(write_compile_commands),
};

const PYTHON: Case = Case {
    fixture: "python-project",
    server: "pyright",
    command: "pyright-langserver",
    install: "npm i -g pyright typescript-language-server typescript@6",
    capabilities: COMMON_CAPABILITIES,
    sends_position_encoding: false,
    definition_at: spot("shapes/report.py", 4, "rect_area"),
    definition: ("shapes/geometry.py", 0),
    references_at: spot("shapes/report.py", 8, "rect_area"),
    references: &[
        ("shapes/geometry.py", 0),
        ("shapes/report.py", 0),
        ("shapes/report.py", 4),
        ("shapes/report.py", 8),
    ],
    hover_at: spot("shapes/report.py", 4, "rect_area"),
    // pyright breaks the signature over lines.
    hover_mentions: &[
        "def rect_area(",
        "width: int",
        "height: int",
        ") -> int",
        "Area of a",
    ],
    rename_at: spot("shapes/report.py", 4, "rect_area"),
    new_name: "box_area",
    rename_edits: &[("shapes/geometry.py", 1), ("shapes/report.py", 3)],
    prepare: None,
};

const TYPESCRIPT: Case = Case {
    fixture: "ts-project",
    server: "typescript-language-server",
    command: "typescript-language-server",
    install: "npm i -g pyright typescript-language-server typescript@6",
    capabilities: COMMON_CAPABILITIES,
    sends_position_encoding: false,
    definition_at: spot("src/main.ts", 3, "rectArea"),
    definition: ("src/geometry.ts", 1),
    references_at: spot("src/main.ts", 6, "rectArea"),
    references: &[
        ("src/geometry.ts", 1),
        ("src/main.ts", 0),
        ("src/main.ts", 3),
        ("src/main.ts", 6),
    ],
    hover_at: spot("src/main.ts", 3, "rectArea"),
    // At a use site the hover shows the import alias, with the signature and doc.
    hover_mentions: &[
        "rectArea(width: number, height: number): number",
        "Area of a",
    ],
    // At the declaration: at an import site only the local alias is renamed.
    rename_at: spot("src/geometry.ts", 1, "rectArea"),
    new_name: "boxArea",
    rename_edits: &[("src/geometry.ts", 1), ("src/main.ts", 3)],
    prepare: None,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_analyzer_answers_cross_file() {
    run_case(&RUST).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clangd_answers_cross_file() {
    run_case(&C).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyright_answers_cross_file() {
    run_case(&PYTHON).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_language_server_answers_cross_file() {
    run_case(&TYPESCRIPT).await;
}

/// pyright enumerates the project on a timer after `initialized` and
/// answers from its open files alone until then; asked first thing, at the
/// definition (only that file open), references once missed every use in
/// other files. acp-lsp holds it `starting` until its log says it has found
/// its source files (`ready_after_log`), and that is what ended the load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyrights_first_answer_covers_the_files_it_has_not_opened() {
    require(PYTHON.command, PYTHON.install);
    let h = Harness::start(PYTHON.fixture, None);
    let servers = h.servers().await;
    let server_id = find_entry(&servers, PYTHON.server)["serverId"]
        .as_str()
        .expect("serverId")
        .to_string();
    let mut params = h.position_params(spot("shapes/geometry.py", 0, "rect_area"));
    params["context"] = json!({ "includeDeclaration": true });
    let references = h
        .request(
            &server_id,
            "textDocument/references",
            params,
            Some(WAIT_UNTIL_READY_MS),
        )
        .await;
    let mut found = h.locations(&references["lspResult"]);
    found.sort();
    let expected: Vec<(String, u32)> = PYTHON
        .references
        .iter()
        .map(|(file, line)| (file.to_string(), *line))
        .collect();
    assert_eq!(found, expected, "{}", references["lspResult"]);
    let servers = h.servers().await;
    let entry = find_entry(&servers, PYTHON.server);
    assert!(
        entry["_meta"]["acp-lsp"].get("stateReason").is_none(),
        "the first load ended by a timeout, not by pyright's log: {entry}"
    );
}

async fn run_case(case: &Case) {
    require(case.command, case.install);
    let h = Harness::start(case.fixture, case.prepare);

    // lsp/servers lists the server as soon as detection is done.
    let servers = h.servers().await;
    let entry = find_entry(&servers, case.server);
    let server_id = entry["serverId"]
        .as_str()
        .expect("serverId is a string")
        .to_string();
    assert_eq!(server_id.len(), UUID_LEN, "serverId {server_id}");
    assert_eq!(entry["workspacePath"], json!(h.root.display().to_string()));
    assert!(
        ["starting", "running"].contains(&entry["state"].as_str().unwrap_or("")),
        "entry: {entry}"
    );
    let server = h
        .registry
        .server(&server_id)
        .expect("the listed server is in the registry");

    // Readiness, timed from session open, raced against the first request
    // (which waits with `waitUntilReady`).
    let ready = tokio::spawn({
        let server = Arc::clone(&server);
        let opened = h.opened;
        async move {
            let state = tokio::time::timeout(
                READY_TIMEOUT,
                server.wait_for_state(|s| {
                    matches!(
                        s,
                        ServerState::Ready | ServerState::Failed | ServerState::Stopped
                    )
                }),
            )
            .await;
            (state, opened.elapsed())
        }
    });

    // definition at a call site → the defining file and line.
    let definition = h
        .request(
            &server_id,
            "textDocument/definition",
            h.position_params(case.definition_at),
            Some(WAIT_UNTIL_READY_MS),
        )
        .await;
    h.assert_first_version(&definition, case.definition_at.file);
    eprintln!(
        "{}: first answer {:?} after session open",
        case.server,
        h.opened.elapsed()
    );

    let (state, time_to_ready) = ready.await.expect("readiness waiter panicked");
    let state = state.unwrap_or_else(|_| {
        panic!(
            "{} not ready within {READY_TIMEOUT:?}: {:?}",
            case.server,
            server.status()
        )
    });
    assert_eq!(
        state,
        ServerState::Ready,
        "{} did not become ready: {:?} (install: `{}`)",
        case.server,
        server.status(),
        case.install
    );
    eprintln!(
        "{}: ready {time_to_ready:?} after session open",
        case.server
    );

    let locations = h.locations(&definition["lspResult"]);
    assert_eq!(
        locations,
        vec![(case.definition.0.to_string(), case.definition.1)],
        "definition: {}",
        definition["lspResult"]
    );

    // The entry once ready (again: opening a document may start work, e.g.
    // clangd's background index): state, pid and the server's capabilities.
    tokio::time::timeout(
        READY_TIMEOUT,
        server.wait_for_state(|s| s == ServerState::Ready),
    )
    .await
    .unwrap_or_else(|_| panic!("{} left ready: {:?}", case.server, server.status()));
    let servers = h.servers().await;
    let entry = find_entry(&servers, case.server);
    assert_eq!(entry["serverId"], json!(server_id));
    assert_eq!(entry["state"], json!("running"), "entry: {entry}");
    assert_eq!(
        entry["_meta"]["acp-lsp"]["status"],
        json!("ready"),
        "entry: {entry}"
    );
    assert_eq!(
        entry["_meta"]["acp-lsp"]["positionEncoding"],
        json!("utf-16")
    );
    let pid = entry["_meta"]["acp-lsp"]["pid"]
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
        .unwrap_or_else(|| panic!("a running server has a pid: {entry}"));
    assert!(process_alive(pid), "server pid {pid} is not alive");
    let mut group = group_members(pid);
    if !group.contains(&pid) {
        group.push(pid);
    }
    h.assert_capabilities_as_sent(case, &server_id, &entry["capabilities"]);

    // references → every use site across files.
    let mut params = h.position_params(case.references_at);
    params["context"] = json!({ "includeDeclaration": true });
    let references = h
        .request(&server_id, "textDocument/references", params, None)
        .await;
    h.assert_first_version(&references, case.references_at.file);
    let found: BTreeSet<(String, u32)> =
        h.locations(&references["lspResult"]).into_iter().collect();
    let expected: BTreeSet<(String, u32)> = case
        .references
        .iter()
        .map(|(f, l)| (f.to_string(), *l))
        .collect();
    assert_eq!(found, expected, "references: {}", references["lspResult"]);

    // hover → the symbol and its signature.
    let hover = h
        .request(
            &server_id,
            "textDocument/hover",
            h.position_params(case.hover_at),
            None,
        )
        .await;
    h.assert_first_version(&hover, case.hover_at.file);
    let text = hover_text(&hover["lspResult"]["contents"]);
    for mention in case.hover_mentions {
        assert!(
            text.contains(mention),
            "hover does not mention {mention:?}: {text:?}"
        );
    }

    // rename → a workspace edit touching every file that uses the symbol.
    let mut params = h.position_params(case.rename_at);
    params["newName"] = json!(case.new_name);
    let rename = h
        .request(&server_id, "textDocument/rename", params, None)
        .await;
    h.assert_first_version(&rename, case.rename_at.file);
    let edits = h.workspace_edits(&rename["lspResult"]);
    let counts: BTreeMap<String, usize> = edits
        .iter()
        .map(|(file, texts)| (file.clone(), texts.len()))
        .collect();
    let expected: BTreeMap<String, usize> = case
        .rename_edits
        .iter()
        .map(|(f, n)| (f.to_string(), *n))
        .collect();
    assert_eq!(counts, expected, "rename: {}", rename["lspResult"]);
    for (file, texts) in &edits {
        for text in texts {
            assert!(
                text.contains(case.new_name),
                "rename edit in {file} does not insert {}: {text:?}",
                case.new_name
            );
        }
    }

    // Shutdown leaves no process behind: the leader is reaped, the rest of
    // its group (typescript-language-server runs four) dies with it.
    let stopping = Instant::now();
    h.registry.shutdown().await;
    let deadline = Instant::now() + EXIT_TIMEOUT;
    loop {
        let leader_gone = !Path::new(&format!("/proc/{pid}")).exists();
        let survivors: Vec<u32> = group
            .iter()
            .copied()
            .filter(|p| process_alive(*p))
            .collect();
        if leader_gone && survivors.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} still running {EXIT_TIMEOUT:?} after shutdown: leader {pid} gone: {leader_gone}, survivors {survivors:?}",
            case.server
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    eprintln!(
        "{}: {} process(es) gone {:?} after shutdown",
        case.server,
        group.len(),
        stopping.elapsed()
    );
}

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

impl Harness {
    fn start(fixture: &str, prepare: Option<fn(&Path)>) -> Harness {
        Harness {
            recorded: Recorded::start(fixture, "acp-lsp-", |root| {
                if let Some(prepare) = prepare {
                    prepare(root);
                }
            }),
        }
    }

    /// Sends one gate call and returns the response's `result` (fails on an error).
    async fn call(&self, method: GateMethod, params: Value) -> Value {
        let response = self.response(method, params.clone()).await;
        assert_eq!(response["jsonrpc"], json!("2.0"));
        assert!(
            response.get("error").is_none(),
            "error answer to {params}: {response}"
        );
        response
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("no result in {response}"))
    }

    async fn servers(&self) -> Value {
        self.call(GateMethod::Servers, json!({ "sessionId": SESSION_ID }))
            .await
    }

    async fn request(
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

    /// `{textDocument, position}` for a spot, the character in UTF-16 units.
    fn position_params(&self, spot: Spot) -> Value {
        let text = std::fs::read_to_string(self.root.join(spot.file))
            .unwrap_or_else(|e| panic!("read {}: {e}", spot.file));
        let line = text
            .lines()
            .nth(spot.line as usize)
            .unwrap_or_else(|| panic!("{} has no line {}", spot.file, spot.line));
        let byte = line.find(spot.needle).unwrap_or_else(|| {
            panic!(
                "{}:{} does not contain {:?}",
                spot.file, spot.line, spot.needle
            )
        });
        let character = line[..byte].encode_utf16().count();
        json!({
            "textDocument": { "uri": self.uri(spot.file) },
            "position": { "line": spot.line, "character": character },
        })
    }

    /// A URI's path relative to the project root.
    fn relative(&self, uri: &str) -> String {
        let path = uri_path(uri);
        let path = path.canonicalize().unwrap_or(path);
        self.relative_path(&path, uri)
    }

    /// (file, start line) of a `Location`, `Location[]` or `LocationLink[]`.
    fn locations(&self, result: &Value) -> Vec<(String, u32)> {
        let items = match result {
            Value::Array(items) => items.clone(),
            Value::Object(_) => vec![result.clone()],
            other => panic!("no locations: {other}"),
        };
        items
            .iter()
            .map(|item| {
                let uri = item
                    .get("uri")
                    .or_else(|| item.get("targetUri"))
                    .and_then(Value::as_str)
                    .unwrap_or_else(|| panic!("location without a uri: {item}"));
                let range = item
                    .get("range")
                    .or_else(|| item.get("targetSelectionRange"))
                    .unwrap_or_else(|| panic!("location without a range: {item}"));
                let line = range["start"]["line"]
                    .as_u64()
                    .and_then(|l| u32::try_from(l).ok())
                    .unwrap_or_else(|| panic!("range without a start line: {item}"));
                (self.relative(uri), line)
            })
            .collect()
    }

    /// File → new texts of a `WorkspaceEdit` (`changes` or `documentChanges`).
    fn workspace_edits(&self, edit: &Value) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let texts = |edits: &Value| -> Vec<String> {
            edits
                .as_array()
                .unwrap_or_else(|| panic!("edits are not a list: {edits}"))
                .iter()
                .map(|e| e["newText"].as_str().unwrap_or_default().to_string())
                .collect()
        };
        if let Some(changes) = edit.get("documentChanges").and_then(Value::as_array) {
            for change in changes {
                let uri = change["textDocument"]["uri"]
                    .as_str()
                    .unwrap_or_else(|| panic!("not a text document edit: {change}"));
                out.entry(self.relative(uri))
                    .or_default()
                    .extend(texts(&change["edits"]));
            }
        }
        if let Some(changes) = edit.get("changes").and_then(Value::as_object) {
            for (uri, edits) in changes {
                out.entry(self.relative(uri))
                    .or_default()
                    .extend(texts(edits));
            }
        }
        assert!(!out.is_empty(), "empty workspace edit: {edit}");
        out
    }

    /// `_meta.documents[0]` names the requested document at version 1: the
    /// proxy opened it from disk, and nothing changed it since.
    fn assert_first_version(&self, result: &Value, file: &str) {
        let document = &result["_meta"]["documents"][0];
        assert_eq!(document["uri"], json!(self.uri(file)), "_meta: {result}");
        assert_eq!(document["version"], json!(1), "_meta: {result}");
    }

    /// The entry's capabilities are the server's initialize result's,
    /// verbatim (the RFD): dynamic registrations are listed apart.
    fn assert_capabilities_as_sent(&self, case: &Case, server_id: &str, listed: &Value) {
        let sent = self.sent_capabilities(server_id);
        let sent = sent.as_object().expect("capabilities are an object");
        let listed = listed.as_object().expect("capabilities are an object");
        for member in case.capabilities {
            assert!(
                sent.get(*member)
                    .is_some_and(|v| !v.is_null() && *v != json!(false)),
                "{} did not send {member}: {sent:?}",
                case.server
            );
        }
        assert_eq!(listed, sent, "capabilities of {}", case.server);
        if case.sends_position_encoding {
            assert_eq!(sent.get("positionEncoding"), Some(&json!("utf-16")));
        }
    }

    /// The `capabilities` of the server's answer to `initialize`, from the recording.
    fn sent_capabilities(&self, server_id: &str) -> Value {
        self.recorder.sync();
        let text = std::fs::read_to_string(&self.recording).expect("read the recording");
        let to_server = format!("proxy→server:{server_id}");
        let from_server = format!("server:{server_id}→proxy");
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let initialize_id = lines
            .iter()
            .find(|l| l["dir"] == json!(to_server) && l["msg"]["method"] == json!("initialize"))
            .map(|l| l["msg"]["id"].clone())
            .expect("the recording holds the initialize request");
        lines
            .iter()
            .find(|l| {
                l["dir"] == json!(from_server)
                    && l["msg"]["id"] == initialize_id
                    && l["msg"].get("method").is_none()
            })
            .map(|l| l["msg"]["result"]["capabilities"].clone())
            .expect("the recording holds the initialize answer")
    }
}

fn find_entry(servers: &Value, name: &str) -> Value {
    servers["servers"]
        .as_array()
        .expect("lsp/servers lists servers")
        .iter()
        .find(|s| s["name"] == json!(name))
        .cloned()
        .unwrap_or_else(|| panic!("lsp/servers does not list {name}: {servers}"))
}

/// The text of hover `contents`: `MarkupContent`, `MarkedString` or a list of them.
fn hover_text(contents: &Value) -> String {
    match contents {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(hover_text).collect::<Vec<_>>().join("\n"),
        Value::Object(o) => o
            .get("value")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        other => panic!("no hover contents: {other}"),
    }
}

// ------------------------------------------- project code (issue 13, item 8)

/// Name of the file the fixture's build script writes into the project.
const BUILD_MARKER: &str = "build-script-ran";

/// A crate whose `build.rs` writes [`BUILD_MARKER`] into the project when it runs.
fn build_script_project() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("acp-lsp-build-rs-")
        .tempdir()
        .expect("temp dir");
    let root = dir.path();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"marker\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .expect("write Cargo.toml");
    std::fs::write(
        root.join("build.rs"),
        format!(
            "fn main() {{\n    let dir = std::env::var(\"CARGO_MANIFEST_DIR\").unwrap();\n    \
             std::fs::write(std::path::Path::new(&dir).join(\"{BUILD_MARKER}\"), \"ran\").unwrap();\n}}\n"
        ),
    )
    .expect("write build.rs");
    std::fs::create_dir(root.join("src")).expect("mkdir src");
    std::fs::write(
        root.join("src/lib.rs"),
        "pub fn answer() -> u32 {\n    42\n}\n",
    )
    .expect("write lib.rs");
    dir
}

/// Opens a session on a fresh [`build_script_project`] with `config`, waits
/// until rust-analyzer reports ready (quiescent: workspace, build scripts and
/// proc macros loaded), and says whether the build script ran.
async fn build_script_ran(config: acp_lsp::lsp::config::Config) -> bool {
    use acp_lsp::lsp::registry::{Registry, RegistryOptions};
    use acp_lsp_core::gate::{Gate, GateConfig};
    require("rust-analyzer", RUST.install);
    let project = build_script_project();
    let root = project.path().canonicalize().expect("canonical root");
    let registry = Registry::new(config, RegistryOptions::default());
    let gate = Gate::new(Arc::clone(&registry), GateConfig::default());
    gate.open_session(SESSION_ID, vec![root.clone()]);
    let params = serde_json::value::to_raw_value(&json!({ "sessionId": SESSION_ID }))
        .expect("params serialize");
    let listing: Value = serde_json::from_slice(
        &gate
            .call(
                acp_lsp_core::jsonrpc::RequestId::from_u64(1),
                GateMethod::Servers,
                Some(params),
            )
            .await,
    )
    .expect("JSON");
    let entry = find_entry(&listing["result"], "rust-analyzer");
    let server = registry
        .server(entry["serverId"].as_str().expect("serverId"))
        .expect("registered");
    let state = tokio::time::timeout(
        READY_TIMEOUT,
        server.wait_for_state(|s| {
            matches!(
                s,
                ServerState::Ready | ServerState::Failed | ServerState::Stopped
            )
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("rust-analyzer not ready: {:?}", server.status()));
    assert_eq!(state, ServerState::Ready, "{:?}", server.status());
    let ran = root.join(BUILD_MARKER).exists();
    registry.shutdown().await;
    // Build output goes to acp-lsp's cache (`cargo.targetDir`), not the project.
    assert!(
        !root.join("target").exists(),
        "rust-analyzer left target/ in the project"
    );
    ran
}

/// With the default (`project_code` unset, the root not trusted), no build
/// script runs: rust-analyzer gets `cargo.buildScripts.enable = false`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_analyzer_runs_no_build_script_by_default() {
    let config = acp_lsp::lsp::config::Config::builtin();
    assert!(
        !build_script_ran(config).await,
        "the build script ran with project_code off"
    );
}

/// `project_code = "run"`: the build script runs before rust-analyzer is ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_analyzer_runs_build_scripts_with_project_code_run() {
    let mut config = acp_lsp::lsp::config::Config::builtin();
    config.project_code = Some(acp_lsp::lsp::config::ProjectCode::Run);
    assert!(
        build_script_ran(config).await,
        "the build script did not run with project_code run"
    );
}
