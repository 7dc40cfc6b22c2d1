//! SCIP indexes beside the live servers, end to end: `acp-lsp index` runs the
//! real indexers (rust-analyzer scip, scip-python, scip-typescript), a
//! registry and a gate serve the index as a server of its own, and its
//! answers are compared with the real live server's once that is ready.
//! Also what must never be answered from an index (edited files, paths
//! outside the roots, another project's index) and what must be refused
//! (a truncated or corrupt index, one over the occurrence limit).
//!
//! A missing indexer or server fails the test with its install command.
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]

mod support;

use acp_lsp::lsp::config::Config;
use acp_lsp::lsp::registry::{Registry, RegistryOptions};
use acp_lsp_core::gate::{Gate, GateConfig, GateMethod};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{copy_tree, registry, require};

const SESSION: &str = "scip-session";
/// Longest wait for a live server to be ready (2 cores shared with others).
const READY_MS: u64 = 240_000;
/// Longest wait for an index to load (a 10-million-occurrence file is read
/// in a debug build).
const LOAD_TIMEOUT: Duration = Duration::from_secs(600);
/// Longest wait for one gate call (above the gate's own deadlines).
const CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// The indexers' npm prefix in CI (`.ci/run`), on PATH through its `.bin`.
const NPM_INDEXERS: &str = "npm install --prefix ~/.cache/acp-lsp-ci-tools/indexers \
     @sourcegraph/scip-python@0.6.6 @sourcegraph/scip-typescript@0.4.0 \
     && export PATH=~/.cache/acp-lsp-ci-tools/indexers/node_modules/.bin:$PATH";

/// A registry and a gate with one session.
struct Stack {
    registry: Arc<Registry>,
    gate: Arc<Gate<Registry>>,
    next: AtomicU64,
}

impl Stack {
    fn open(root: &Path, lazy: bool) -> Stack {
        Stack::with_config(root, lazy, Config::builtin())
    }

    fn with_config(root: &Path, lazy: bool, config: Config) -> Stack {
        let registry = Registry::new(
            config,
            RegistryOptions {
                lazy,
                ..RegistryOptions::default()
            },
        );
        let gate = Gate::new(Arc::clone(&registry), GateConfig::default());
        gate.open_session(SESSION, vec![root.to_path_buf()]);
        Stack {
            registry,
            gate,
            next: AtomicU64::new(1),
        }
    }

    async fn call(&self, method: GateMethod, params: Value) -> Value {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        support::gate::call(&self.gate, id, method, &params, CALL_TIMEOUT).await
    }

    async fn servers(&self) -> Vec<Value> {
        let listing = self
            .call(GateMethod::Servers, json!({"sessionId": SESSION}))
            .await;
        listing["result"]["servers"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("no servers: {listing}"))
    }

    async fn entry(&self, name: &str) -> Value {
        self.servers()
            .await
            .into_iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no {name} entry"))
    }

    /// The whole response to one `lsp/request`.
    async fn request(&self, server: &Value, method: &str, params: Value, wait: bool) -> Value {
        let mut request = json!({
            "sessionId": SESSION,
            "serverId": server["serverId"],
            "method": method,
            "params": params,
        });
        if wait {
            request["_meta"] = json!({"waitUntilReady": READY_MS});
        }
        self.call(GateMethod::Request, request).await
    }

    /// `textDocument/references` (declaration included) at a position.
    async fn references(
        &self,
        server: &Value,
        uri: &str,
        line: u32,
        character: u32,
        wait: bool,
    ) -> Value {
        self.request(
            server,
            "textDocument/references",
            references_params(uri, line, character),
            wait,
        )
        .await
    }

    async fn shutdown(self) {
        self.gate.close_session(SESSION);
        self.registry.shutdown().await;
    }
}

fn acp_lsp() -> &'static str {
    env!("CARGO_BIN_EXE_acp-lsp")
}

/// Runs `acp-lsp index DIR`; returns the index files it wrote.
fn index(dir: &Path) -> Vec<PathBuf> {
    let out = Command::new(acp_lsp())
        .arg("index")
        .arg(dir)
        .output()
        .expect("acp-lsp index runs");
    assert!(
        out.status.success(),
        "acp-lsp index failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('\t').map(|(_, p)| PathBuf::from(p)))
        .collect()
}

/// A crate from the cargo registry this package already depends on, copied
/// into a temporary directory.
fn registry_crate(name: &str) -> tempfile::TempDir {
    let out = Command::new(env!("CARGO"))
        // Not --offline: the resolve holds crates of other platforms
        // (redox's, through `directories`) that a Linux build never fetched.
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let manifest = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == name)
        .and_then(|p| p["manifest_path"].as_str())
        .unwrap_or_else(|| panic!("{name} is not a dependency"))
        .to_string();
    let dir = tempfile::tempdir().expect("a temporary directory");
    copy_tree(
        Path::new(&manifest).parent().expect("a crate dir"),
        dir.path(),
    );
    dir
}

/// Symbols defined in the index (global ones, at most `most`, spread over
/// the documents): (file URI, line, UTF-16 character).
fn defined_symbols(index_file: &Path, root: &Path, most: usize) -> Vec<(String, u32, u32)> {
    use acp_lsp::scip::load::{load, LoadLimits};
    let loaded = load(index_file, LoadLimits::default(), None).expect("the index loads");
    let index = &loaded.index;
    let mut all = Vec::new();
    for (d, document) in index.documents.iter().enumerate() {
        let text = std::fs::read_to_string(root.join(&*document.path)).expect("a source file");
        let lines: Vec<&str> = text.split('\n').collect();
        let mut seen = BTreeSet::new();
        for o in index.occurrences_in(d as u32) {
            let occurrence = index.occurrence(o);
            // A name: a module's whole-file definition is no place to ask at.
            let span = occurrence.span;
            if !occurrence.is_definition()
                || index.is_local(occurrence.symbol)
                || span.start.line != span.end.line
                || span.start == span.end
                || !seen.insert(occurrence.symbol)
            {
                continue;
            }
            let start = occurrence.span.start;
            let line = lines.get(start.line as usize).copied().unwrap_or("");
            let character = match document.encoding {
                acp_lsp::scip::index::Encoding::Utf8 => acp_lsp::scip::verify::convert(
                    line,
                    start.character,
                    acp_lsp::scip::index::Encoding::Utf8,
                    acp_lsp::scip::index::Encoding::Utf16,
                ),
                _ => start.character,
            };
            let uri = url::Url::from_file_path(root.join(&*document.path))
                .expect("a file URI")
                .to_string();
            all.push((uri, start.line, character));
        }
    }
    let step = (all.len() / most.max(1)).max(1);
    all.into_iter().step_by(step).take(most).collect()
}

/// A location as a comparable key.
fn locations(result: &Value) -> BTreeSet<String> {
    result
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|l| {
                    let uri = l["uri"].as_str().or(l["targetUri"].as_str()).unwrap_or("");
                    let range = if l["range"].is_null() {
                        &l["targetSelectionRange"]
                    } else {
                        &l["range"]
                    };
                    format!(
                        "{uri}:{}:{}-{}:{}",
                        range["start"]["line"],
                        range["start"]["character"],
                        range["end"]["line"],
                        range["end"]["character"]
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn references_params(uri: &str, line: u32, character: u32) -> Value {
    json!({
        "textDocument": {"uri": uri},
        "position": {"line": line, "character": character},
        "context": {"includeDeclaration": true},
    })
}

/// The line of a location key of [`locations`] (a one-line range), and the
/// range's start and end in it.
fn line_at(location: &str) -> (String, usize, usize) {
    let (uri, range) = location
        .rsplit_once(':')
        .and_then(|(rest, end)| {
            let (rest, start) = rest.rsplit_once(':')?;
            let (uri, line) = rest.rsplit_once(':')?;
            Some((
                uri,
                (
                    line.parse::<usize>().ok()?,
                    start.split('-').next()?.parse::<usize>().ok()?,
                    end.parse::<usize>().ok()?,
                ),
            ))
        })
        .unwrap_or_else(|| panic!("not a location: {location}"));
    let path = url::Url::parse(uri)
        .ok()
        .and_then(|u| u.to_file_path().ok())
        .expect("a file URI");
    let text = std::fs::read_to_string(path).expect("the file");
    let line = text.lines().nth(range.0).unwrap_or("").to_string();
    (line, range.1, range.2)
}

/// The text at a location key of [`locations`] (a one-line range).
fn text_at(location: &str) -> String {
    let (line, start, end) = line_at(location);
    line.get(start..end).unwrap_or("").to_string()
}

/// Whether a location is a property's name in an object literal (`key:`,
/// `{ key, … }`) or after a `.`: where tsserver links a name to the
/// property of the contextual type, which scip-typescript does not record.
fn is_property_position(location: &str) -> bool {
    let (line, start, end) = line_at(location);
    let before = line.get(..start).unwrap_or("").trim_end();
    let after = line.get(end..).unwrap_or("").trim_start();
    before.ends_with('.') || after.starts_with([':', ',', '}'])
}

/// How the index's references compare with the live server's.
#[derive(Debug, Default)]
struct Comparison {
    symbols: usize,
    equal: usize,
    /// Locations the index gave that the live server's references did not,
    /// and its definition there does not name the symbol: wrong answers.
    wrong: Vec<String>,
    /// Locations the index gave that the live server's references did not
    /// but its definition there names the symbol: true references the live
    /// server's list left out.
    only_index: Vec<String>,
    /// Locations the index gave where the live server gives no definition
    /// at all: neither confirmed nor contradicted.
    unconfirmed: Vec<String>,
    /// Locations the live server gave in the project that the index did not.
    missing: Vec<String>,
    /// Why the index declined the symbols it did not answer (the live
    /// server answers those).
    declined: Vec<String>,
    /// Locations the live server gave outside the project (dependencies,
    /// the standard library): the index covers the project only.
    outside: usize,
}

/// References of every symbol from the index (first) and from the live
/// server once ready.
async fn compare(
    stack: &Stack,
    root: &Path,
    live_name: &str,
    symbols: &[(String, u32, u32)],
) -> Comparison {
    let project = format!("{}/", url::Url::from_file_path(root).expect("a file URI"));
    let scip = stack.entry("scip").await;
    assert_eq!(scip["state"], "running", "{scip}");
    let mut from_index = Vec::new();
    for (uri, line, character) in symbols {
        let response = stack.references(&scip, uri, *line, *character, false).await;
        let source = response["result"]["_meta"]["acp-lsp"]["source"]
            .as_str()
            .unwrap_or("");
        let declined = response["error"]["data"]["data"]["reason"].as_str();
        if let Some(reason) = declined {
            // Declined, not answered wrongly: the live server answers it.
            from_index.push(Err(reason.to_string()));
            continue;
        }
        assert!(
            source.starts_with("scip@"),
            "not answered from the index: {response}"
        );
        from_index.push(Ok(locations(&response["result"]["lspResult"])));
    }
    let live = stack.entry(live_name).await;
    let mut comparison = Comparison {
        symbols: symbols.len(),
        ..Comparison::default()
    };
    for ((uri, line, character), index) in symbols.iter().zip(from_index) {
        let response = stack.references(&live, uri, *line, *character, true).await;
        assert!(response["result"].is_object(), "{live_name}: {response}");
        let (server, outside): (BTreeSet<String>, BTreeSet<String>) =
            locations(&response["result"]["lspResult"])
                .into_iter()
                .partition(|l| l.starts_with(&project));
        comparison.outside += outside.len();
        let index = match index {
            Ok(index) => index,
            Err(reason) => {
                comparison.declined.push(reason);
                continue;
            }
        };
        if server == index {
            comparison.equal += 1;
        }
        // A location only the index gives is wrong unless the live server
        // itself, asked for the definition there, names this symbol's: then
        // its references left out a true one (rust-analyzer's, inside some
        // macro calls).
        for location in index.difference(&server) {
            let (at_uri, at_line, at_character) = start_of(location);
            let response = stack
                .request(
                    &live,
                    "textDocument/definition",
                    json!({"textDocument": {"uri": at_uri}, "position": {"line": at_line, "character": at_character}}),
                    true,
                )
                .await;
            let targets = locations(&response["result"]["lspResult"]);
            if targets.iter().any(|d| covers(d, uri, *line, *character)) {
                comparison.only_index.push(location.clone());
            } else if targets.is_empty() {
                comparison.unconfirmed.push(location.clone());
            } else {
                comparison.wrong.push(location.clone());
            }
        }
        comparison
            .missing
            .extend(server.difference(&index).cloned());
    }
    comparison
}

/// The URI and start of a location key of [`locations`].
fn start_of(location: &str) -> (String, u32, u32) {
    let (rest, _end) = location.rsplit_once('-').expect("a range");
    let (rest, character) = rest.rsplit_once(':').expect("a character");
    let (uri, line) = rest.rsplit_once(':').expect("a line");
    (
        uri.to_string(),
        line.parse().expect("a line number"),
        character.parse().expect("a character number"),
    )
}

/// Whether the range of a location key of [`locations`] (one line) holds
/// `uri` at `line`, `character`.
fn covers(location: &str, uri: &str, line: u32, character: u32) -> bool {
    let (start_uri, start_line, start_character) = start_of(location);
    let end_character: u32 = location
        .rsplit_once(':')
        .and_then(|(_, c)| c.parse().ok())
        .unwrap_or(start_character);
    start_uri == uri && start_line == line && (start_character..=end_character).contains(&character)
}

/// On a real crate from the cargo registry: the index answers references
/// for 50+ symbols before rust-analyzer is asked anything, and once it is
/// ready its answers are the index's: no wrong location.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_from_the_index_are_rust_analyzers() {
    require("rust-analyzer", "rustup component add rust-analyzer");
    let project = registry_crate("percent-encoding");
    let root = project.path().canonicalize().expect("canonical root");
    let files = index(&root);
    assert_eq!(files, vec![root.join(".scip/rust.scip")]);
    let symbols = defined_symbols(&files[0], &root, 80);
    assert!(symbols.len() >= 50, "only {} symbols", symbols.len());
    let stack = Stack::open(&root, false);
    let comparison = compare(&stack, &root, "rust-analyzer", &symbols).await;
    stack.shutdown().await;
    eprintln!("{comparison:#?}");
    assert!(comparison.equal >= 50, "{comparison:#?}");
    assert!(
        comparison.wrong.is_empty() && comparison.unconfirmed.is_empty(),
        "wrong or unconfirmed locations: {comparison:#?}"
    );
    // What rust-analyzer's references find that its `scip` does not record:
    // `Self` standing for the type, and an impl's associated type (`type
    // Item`) among the trait item's references.
    let unrecorded: Vec<&String> = comparison
        .missing
        .iter()
        .filter(|l| !matches!(text_at(l).as_str(), "Self" | "Item"))
        .collect();
    assert!(
        unrecorded.is_empty(),
        "missing locations: {unrecorded:?} of {comparison:#?}"
    );
}

/// The same for scip-python beside pyright, on packaging 24.2 (its sdist
/// from PyPI).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_from_a_python_index_are_pyrights() {
    require("scip-python", NPM_INDEXERS);
    require("pyright-langserver", "npm install -g pyright");
    let source = registry::fetch_sdist("packaging", "24.2")
        .unwrap_or_else(|e| panic!("cannot fetch packaging 24.2 from PyPI: {e:#}"));
    // What pyright finds that scip-python 0.6.6 does not record: uses in
    // `tests/`, whose `import packaging` pyright resolves through `src/`
    // (it adds a `src` directory to its import roots) and scip-python
    // leaves unresolved.
    let in_tests = |root: &Path, location: &str| {
        let tests = format!(
            "{}/",
            url::Url::from_file_path(root.join("tests")).expect("a URI")
        );
        location.starts_with(&tests)
    };
    index_agrees_with_the_live_server(&source, "python", "pyright", in_tests).await;
}

/// The same for scip-typescript beside typescript-language-server, on
/// immer 10.1.1 (its npm package, which ships its sources).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_from_a_typescript_index_are_tsservers() {
    require("scip-typescript", NPM_INDEXERS);
    require(
        "typescript-language-server",
        "npm install -g typescript-language-server typescript@6",
    );
    let source = registry::fetch_npm(&registry::IMMER)
        .unwrap_or_else(|e| panic!("cannot fetch immer 10.1.1 from npm: {e:#}"));
    // What tsserver finds that scip-typescript 0.4.0 does not record: an
    // object literal's keys (`{ applyPatches_ }`, `enumerable: …`) as
    // references of the contextual type's property.
    index_agrees_with_the_live_server(
        &source,
        "typescript",
        "typescript-language-server",
        |_, location| is_property_position(location),
    )
    .await;
}

/// A copy of `source` indexed by `acp-lsp index`; the references of 50+
/// symbols it defines, from the index before `live` is asked anything, are
/// `live`'s once it is ready: no wrong location, none missing.
async fn index_agrees_with_the_live_server(
    source: &Path,
    language: &str,
    live: &str,
    unrecorded: fn(&Path, &str) -> bool,
) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    copy_tree(source, dir.path());
    let root = dir.path().canonicalize().expect("canonical root");
    let files = index(&root);
    assert_eq!(files, vec![root.join(format!(".scip/{language}.scip"))]);
    let symbols = defined_symbols(&files[0], &root, 80);
    assert!(symbols.len() >= 50, "only {} symbols", symbols.len());
    let stack = Stack::open(&root, false);
    let comparison = compare(&stack, &root, live, &symbols).await;
    stack.shutdown().await;
    eprintln!("{language}: {comparison:#?}");
    assert!(
        comparison.wrong.is_empty() && comparison.unconfirmed.is_empty(),
        "wrong or unconfirmed locations: {comparison:#?}"
    );
    assert!(comparison.equal >= 50, "{comparison:#?}");
    // Declined only where the index merges what the server tells apart,
    // and rarely: nine symbols in ten at least are the index's to answer.
    assert!(
        comparison.declined.len() * 10 <= comparison.symbols,
        "{comparison:#?}"
    );
    assert!(
        comparison
            .declined
            .iter()
            .all(|reason| reason == "merged_declarations"),
        "{comparison:#?}"
    );
    // The set difference the indexer leaves, each of a known kind.
    let unexplained: Vec<&String> = comparison
        .missing
        .iter()
        .filter(|l| !unrecorded(&root, l))
        .collect();
    assert!(
        unexplained.is_empty(),
        "missing locations: {unexplained:?} of {comparison:#?}"
    );
}

/// Commits everything in `dir` to a new git repository; the commit.
fn git_commit_all(dir: &Path) -> String {
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "indexed"]);
    git(&["rev-parse", "HEAD"])
}

fn file_uri(path: &Path) -> String {
    url::Url::from_file_path(path)
        .expect("a file URI")
        .to_string()
}

/// Where `name` is in the first line of `file` (under `root`) that holds
/// `line_text`: (URI, line, character; the files are ASCII).
fn position_of(root: &Path, file: &str, line_text: &str, name: &str) -> (String, u32, u32) {
    let text = std::fs::read_to_string(root.join(file)).expect("a source file");
    let (line, found) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(line_text))
        .unwrap_or_else(|| panic!("no {line_text:?} in {file}"));
    let character = found
        .find(name)
        .unwrap_or_else(|| panic!("no {name:?} in {found:?}"));
    (file_uri(&root.join(file)), line as u32, character as u32)
}

/// The built-in servers, rust-analyzer's command held until a line can be
/// read from the FIFO `fifo` (made here): it stays `starting` till then.
fn held_rust_analyzer(fifo: &Path) -> Config {
    let made = Command::new("mkfifo")
        .arg(fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo failed");
    let mut config = Config::builtin();
    let server = config
        .servers
        .iter_mut()
        .find(|s| s.name == "rust-analyzer")
        .expect("the built-in rust-analyzer");
    server.command = "sh".into();
    server.args = vec![
        "-c".into(),
        format!("read go < '{}' && exec rust-analyzer", fifo.display()),
    ];
    config
}

/// Where an answer came from (`_meta["acp-lsp"].source`).
fn source_of(response: &Value) -> &str {
    response["result"]["_meta"]["acp-lsp"]["source"]
        .as_str()
        .unwrap_or_else(|| panic!("no source: {response}"))
}

/// A file edited after the index was built is never answered from it: not
/// the references of a symbol defined in it (declined while the live server
/// is not ready, the live server's once it is), not its part of another
/// symbol's references (listed as not covered, then the live server's).
/// Every answer says where it came from: `scip@<commit>`, the live server,
/// or both merged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_file_is_never_answered_from_the_index() {
    require("rust-analyzer", "rustup component add rust-analyzer");
    let project = registry_crate("percent-encoding");
    let root = project.path().canonicalize().expect("canonical root");
    let head = git_commit_all(&root);
    index(&root);
    let from_index = format!("scip@{}", &head[..12]);
    // Both positions before the edit, which appends to lib.rs.
    let encode_byte = position_of(
        &root,
        "src/lib.rs",
        "pub fn percent_encode_byte",
        "percent_encode_byte",
    );
    let controls = position_of(&root, "src/ascii_set.rs", "pub const CONTROLS", "CONTROLS");
    let lib = root.join("src/lib.rs");
    let mut text = std::fs::read_to_string(&lib).expect("lib.rs");
    text.push_str("\npub fn edited_after_indexing() -> &'static AsciiSet {\n    CONTROLS\n}\n");
    std::fs::write(&lib, &text).expect("edit lib.rs");
    let added_line = text.lines().count() as u32 - 2;
    let lib_uri = file_uri(&lib);

    // rust-analyzer held before it starts (a FIFO the test opens later):
    // "before the live server is ready" is certain, not a race.
    let held = tempfile::tempdir().expect("a temporary directory");
    let fifo = held.path().join("go");
    let stack = Stack::with_config(&root, false, held_rust_analyzer(&fifo));
    let scip = stack.entry("scip").await;
    assert_eq!(scip["state"], "running", "{scip}");
    let (uri, line, character) = &encode_byte;
    let defined_in_edited = references_params(uri, *line, *character);
    let (uri, line, character) = &controls;
    let used_in_edited = references_params(uri, *line, *character);

    // Before the live server is ready.
    let declined = stack
        .request(
            &scip,
            "textDocument/references",
            defined_in_edited.clone(),
            false,
        )
        .await;
    assert!(
        declined["result"].is_null(),
        "answered from a changed file: {declined}"
    );
    assert!(
        declined.to_string().contains("document_changed"),
        "{declined}"
    );
    let partial = stack
        .request(
            &scip,
            "textDocument/references",
            used_in_edited.clone(),
            false,
        )
        .await;
    assert_eq!(source_of(&partial), from_index, "{partial}");
    let partial_locations = locations(&partial["result"]["lspResult"]);
    assert!(!partial_locations.is_empty(), "{partial}");
    assert!(
        partial_locations.iter().all(|l| !l.starts_with(&lib_uri)),
        "a location in the edited file from the index: {partial_locations:?}"
    );
    let not_covered = &partial["result"]["_meta"]["acp-lsp"]["notCovered"];
    assert!(
        not_covered
            .as_array()
            .is_some_and(|n| n.iter().any(|c| c["uri"] == lib_uri.as_str())),
        "the edited file is not said to be uncovered: {partial}"
    );

    // A request that waits for an answer (`waitUntilReady`) waits for the
    // live server instead of hearing the index decline; it is let go now.
    let live = stack.entry("rust-analyzer").await;
    assert_eq!(live["state"], "starting", "{live}");
    let release = tokio::task::spawn_blocking(move || std::fs::write(&fifo, "go\n"));
    let waited = stack
        .request(
            &scip,
            "textDocument/references",
            defined_in_edited.clone(),
            true,
        )
        .await;
    release
        .await
        .expect("the release ran")
        .expect("rust-analyzer let go");
    assert_eq!(source_of(&waited), "rust-analyzer", "{waited}");

    // Once the live server is ready: its answers for the edited file.
    let live_used = stack
        .request(
            &live,
            "textDocument/references",
            used_in_edited.clone(),
            true,
        )
        .await;
    let live_used = locations(&live_used["result"]["lspResult"]);
    assert!(
        live_used
            .iter()
            .any(|l| l.starts_with(&format!("{lib_uri}:{added_line}:"))),
        "rust-analyzer does not see the edit: {live_used:?}"
    );
    let merged = stack
        .request(&scip, "textDocument/references", used_in_edited, false)
        .await;
    assert_eq!(
        source_of(&merged),
        format!("{from_index}+rust-analyzer"),
        "{merged}"
    );
    assert_eq!(
        locations(&merged["result"]["lspResult"]),
        live_used,
        "{merged}"
    );
    let forwarded = stack
        .request(
            &scip,
            "textDocument/references",
            defined_in_edited.clone(),
            false,
        )
        .await;
    assert_eq!(source_of(&forwarded), "rust-analyzer", "{forwarded}");
    let live_defined = stack
        .request(&live, "textDocument/references", defined_in_edited, true)
        .await;
    assert_eq!(
        locations(&forwarded["result"]["lspResult"]),
        locations(&live_defined["result"]["lspResult"])
    );
    stack.shutdown().await;
}

/// One occurrence of a small index: file, line, UTF-8 column, length,
/// symbol, whether it defines the symbol.
type Occurrence<'a> = (&'a str, i32, i32, i32, &'a str, bool);

/// Writes an index of `occurrences` (documents in their order) at `file`
/// with the scip crate's types, and a sidecar with the current bytes of the
/// documents under `root` that exist (`None` for those that do not).
fn write_index(file: &Path, root: &Path, occurrences: &[Occurrence<'_>]) {
    use acp_lsp::scip::sidecar::{self, Sidecar, FORMAT};
    use scip::types;
    let mut index = types::Index::new();
    let metadata = index.metadata.mut_or_insert_default();
    metadata.project_root = file_uri(root);
    metadata.tool_info.mut_or_insert_default().name = "tests/scip.rs".into();
    let mut hashes = std::collections::BTreeMap::new();
    for &(path, line, column, len, symbol, definition) in occurrences {
        if !index.documents.iter().any(|d| d.relative_path == path) {
            let mut document = types::Document::new();
            document.relative_path = path.into();
            document.language = "rust".into();
            document.position_encoding =
                types::PositionEncoding::UTF8CodeUnitOffsetFromLineStart.into();
            index.documents.push(document);
            if let Ok(bytes) = std::fs::read(root.join(path)) {
                hashes.insert(path.to_string(), sidecar::to_hex(&sidecar::hash(&bytes)));
            }
        }
        let document = index
            .documents
            .iter_mut()
            .find(|d| d.relative_path == path)
            .expect("added above");
        let mut occurrence = types::Occurrence::new();
        occurrence.range = vec![line, column, column + len];
        occurrence.symbol = symbol.into();
        occurrence.symbol_roles = i32::from(definition);
        document.occurrences.push(occurrence);
    }
    std::fs::create_dir_all(file.parent().expect("a parent")).expect("the index's directory");
    acp_lsp::scip::load::write_index(file, &index).expect("write the index");
    let bytes = std::fs::read(file).expect("the index");
    sidecar::write(
        file,
        &Sidecar {
            format: FORMAT.into(),
            commit: Some("feedc0de0123456789".into()),
            root: ".".into(),
            indexer: "tests/scip.rs".into(),
            index_bytes: bytes.len() as u64,
            index_sha256: sidecar::to_hex(&sidecar::hash(&bytes)),
            documents: hashes,
        },
    )
    .expect("write the sidecar");
}

/// Rewrites the sidecar of `file` to describe its bytes as they are now
/// (hashed as a stream: the 10-million-occurrence index is 300 MB).
fn describe_again(file: &Path) {
    use acp_lsp::scip::sidecar;
    use sha2::Digest;
    let mut checked = sidecar::read(file).expect("the sidecar").sidecar;
    let mut hasher = sha2::Sha256::new();
    let mut reader = std::fs::File::open(file).expect("the index");
    let (mut buffer, mut bytes) = (vec![0u8; 1 << 20], 0u64);
    loop {
        let n = std::io::Read::read(&mut reader, &mut buffer).expect("read the index");
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        bytes += n as u64;
    }
    checked.index_bytes = bytes;
    let hash: [u8; 32] = hasher.finalize().into();
    checked.index_sha256 = sidecar::to_hex(&hash);
    sidecar::write(file, &checked).expect("write the sidecar");
}

const MAIN_RS: &str = "fn helper() {}\nfn main() { helper(); }\n";
const HELPER: &str = "rust-analyzer cargo demo 0.1.0 helper().";

/// A project with `src/main.rs` and its index at `.scip/rust.scip`.
fn small_project(dir: &Path) -> (PathBuf, PathBuf) {
    let root = dir.join("project");
    std::fs::create_dir_all(root.join("src")).expect("src");
    std::fs::write(root.join("src/main.rs"), MAIN_RS).expect("main.rs");
    let file = root.join(".scip/rust.scip");
    write_index(
        &file,
        &root,
        &[
            ("src/main.rs", 0, 3, 6, HELPER, true),
            ("src/main.rs", 1, 12, 6, HELPER, false),
        ],
    );
    (root.canonicalize().expect("canonical root"), file)
}

/// A lazy session over `root` (no live server started) and its index
/// entry, loaded and running.
async fn running_index(root: &Path) -> (Stack, Value) {
    let stack = Stack::open(root, true);
    let scip = settled_entry(&stack).await;
    assert_eq!(scip["state"], "running", "{scip}");
    (stack, scip)
}

/// The index entry of a session over `root` once its load settled.
async fn settled_entry(stack: &Stack) -> Value {
    let deadline = std::time::Instant::now() + LOAD_TIMEOUT;
    loop {
        // Each listing waits up to the host's LOAD_WAIT for the load.
        let entry = stack.entry("scip").await;
        if entry["state"] != "starting" {
            return entry;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the load did not settle: {entry}"
        );
    }
}

/// The small project answers (the other bad-input tests fail only by what
/// they change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_index_answers_from_its_unchanged_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (root, _) = small_project(dir.path());
    let (stack, scip) = running_index(&root).await;
    let uri = file_uri(&root.join("src/main.rs"));
    let response = stack.references(&scip, &uri, 1, 13, false).await;
    assert_eq!(source_of(&response), "scip@feedc0de0123", "{response}");
    let expected: BTreeSet<String> = [format!("{uri}:0:3-0:9"), format!("{uri}:1:12-1:18")].into();
    assert_eq!(
        locations(&response["result"]["lspResult"]),
        expected,
        "{response}"
    );
    stack.shutdown().await;
}

/// The same project with `src/main.rs` edited after indexing (one byte
/// more, positions unchanged) and no live server: nothing in it is answered
/// from the index, and the error says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_file_is_declined_when_no_live_server_can_answer() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (root, file) = small_project(dir.path());
    // A second, unchanged document: an index none of whose documents
    // match is refused as another project's.
    std::fs::write(root.join("src/util.rs"), "pub fn util() {}\n").expect("util.rs");
    write_index(
        &file,
        &root,
        &[
            ("src/main.rs", 0, 3, 6, HELPER, true),
            ("src/main.rs", 1, 12, 6, HELPER, false),
            (
                "src/util.rs",
                0,
                7,
                4,
                "rust-analyzer cargo demo 0.1.0 util().",
                true,
            ),
        ],
    );
    std::fs::write(root.join("src/main.rs"), format!("{MAIN_RS} ")).expect("edit main.rs");
    let (stack, scip) = running_index(&root).await;
    let uri = file_uri(&root.join("src/main.rs"));
    for (method, params) in [
        ("textDocument/references", references_params(&uri, 1, 13)),
        (
            "textDocument/definition",
            json!({"textDocument": {"uri": uri}, "position": {"line": 1, "character": 13}}),
        ),
        (
            "textDocument/documentSymbol",
            json!({"textDocument": {"uri": uri}}),
        ),
    ] {
        let response = stack.request(&scip, method, params, false).await;
        assert!(
            response["result"].is_null(),
            "{method} answered from a changed file: {response}"
        );
        assert!(
            response.to_string().contains("document_changed"),
            "{method}: {response}"
        );
    }
    stack.shutdown().await;
}

/// Two overload signatures of one function (scip-typescript gives them one
/// symbol, and one symbol to each parameter name): the function's
/// references are answered, its parameter's are declined, because the live
/// server keeps each signature's parameter apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parameter_of_overload_signatures_is_declined() {
    const F: &str = "scip-typescript npm demo 1.0.0 src/`main.ts`/f().";
    const V: &str = "scip-typescript npm demo 1.0.0 src/`main.ts`/f().(v)";
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().join("project");
    std::fs::create_dir_all(root.join("src")).expect("src");
    std::fs::write(
        root.join("src/main.ts"),
        "function f(v: number): number\nfunction f(v: any) { return v }\n",
    )
    .expect("main.ts");
    write_index(
        &root.join(".scip/typescript.scip"),
        &root,
        &[
            ("src/main.ts", 0, 9, 1, F, true),
            ("src/main.ts", 0, 11, 1, V, true),
            ("src/main.ts", 1, 9, 1, F, true),
            ("src/main.ts", 1, 11, 1, V, true),
            ("src/main.ts", 1, 28, 1, V, false),
        ],
    );
    let root = root.canonicalize().expect("canonical root");
    let (stack, scip) = running_index(&root).await;
    let uri = file_uri(&root.join("src/main.ts"));
    let function = stack.references(&scip, &uri, 1, 9, false).await;
    let expected: BTreeSet<String> = [format!("{uri}:0:9-0:10"), format!("{uri}:1:9-1:10")].into();
    assert_eq!(
        locations(&function["result"]["lspResult"]),
        expected,
        "{function}"
    );
    let parameter = stack.references(&scip, &uri, 1, 28, false).await;
    assert!(parameter["result"].is_null(), "answered: {parameter}");
    assert_eq!(
        parameter["error"]["data"]["data"]["reason"], "merged_declarations",
        "{parameter}"
    );
    stack.shutdown().await;
}

/// A truncated index (its sidecar says how long it was) and bytes that are
/// no index (described by their sidecar) are refused with the reason; the
/// entry says so and requests to it get an error, never an answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_or_corrupt_index_is_refused() {
    for (case, damage, reason) in [
        (
            "truncated",
            (|f: &Path| {
                let bytes = std::fs::read(f).expect("the index");
                std::fs::write(f, &bytes[..bytes.len() / 2]).expect("truncate");
            }) as fn(&Path),
            "truncated, or replaced without its sidecar",
        ),
        (
            "corrupt",
            |f: &Path| {
                let mut bytes = std::fs::read(f).expect("the index");
                let middle = bytes.len() / 2;
                bytes[middle..].fill(0xff);
                std::fs::write(f, &bytes).expect("corrupt");
                describe_again(f);
            },
            "not a SCIP index, or truncated or corrupt",
        ),
    ] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (root, file) = small_project(dir.path());
        damage(&file);
        let stack = Stack::open(&root, true);
        let scip = settled_entry(&stack).await;
        assert_eq!(scip["state"], "not_running", "{case}: {scip}");
        assert!(scip.to_string().contains(reason), "{case}: {scip}");
        let uri = file_uri(&root.join("src/main.rs"));
        let response = stack.references(&scip, &uri, 1, 13, false).await;
        assert!(response["result"].is_null(), "{case}: {response}");
        assert_eq!(
            response["error"]["data"]["reason"], "server_not_running",
            "{case}: {response}"
        );
        stack.shutdown().await;
    }
}

/// An index of another project (same paths, other bytes) is refused at
/// load, not left to decline every request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_of_another_project_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, file) = small_project(dir.path());
    let other = dir.path().join("other");
    std::fs::create_dir_all(other.join("src")).expect("src");
    std::fs::write(other.join("src/main.rs"), "fn main() {}\nfn helper() {}\n").expect("main.rs");
    std::fs::create_dir_all(other.join(".scip")).expect(".scip");
    let copied = other.join(".scip/rust.scip");
    std::fs::copy(&file, &copied).expect("copy the index");
    let sidecar = acp_lsp::scip::sidecar::path_for(&file);
    std::fs::copy(&sidecar, acp_lsp::scip::sidecar::path_for(&copied)).expect("copy the sidecar");
    let stack = Stack::open(&other.canonicalize().expect("canonical"), true);
    let scip = settled_entry(&stack).await;
    assert_eq!(scip["state"], "not_running", "{scip}");
    assert!(scip.to_string().contains("does not match"), "{scip}");
    stack.shutdown().await;
}

/// Documents of an index outside the session's roots — a path with `..`,
/// a symlink inside the project to a file outside it (with the right hash)
/// — are never answered: the references leave them out and say why, and a
/// request about the outside file is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_outside_the_roots_are_never_answered() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().join("project");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(root.join("src")).expect("src");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(root.join("src/main.rs"), MAIN_RS).expect("main.rs");
    std::fs::write(outside.join("secret.rs"), "fn f() { helper(); }\n").expect("secret.rs");
    std::os::unix::fs::symlink(outside.join("secret.rs"), root.join("src/link.rs"))
        .expect("symlink");
    write_index(
        &root.join(".scip/rust.scip"),
        &root,
        &[
            ("src/main.rs", 0, 3, 6, HELPER, true),
            ("src/main.rs", 1, 12, 6, HELPER, false),
            ("../outside/secret.rs", 0, 9, 6, HELPER, false),
            ("src/link.rs", 0, 9, 6, HELPER, false),
        ],
    );
    let root = root.canonicalize().expect("canonical root");
    let (stack, scip) = running_index(&root).await;
    let uri = file_uri(&root.join("src/main.rs"));
    let response = stack.references(&scip, &uri, 1, 13, false).await;
    let expected: BTreeSet<String> = [format!("{uri}:0:3-0:9"), format!("{uri}:1:12-1:18")].into();
    assert_eq!(
        locations(&response["result"]["lspResult"]),
        expected,
        "{response}"
    );
    let not_covered = response["result"]["_meta"]["acp-lsp"]["notCovered"].to_string();
    assert!(
        not_covered.contains("link.rs") && not_covered.contains("outside_roots"),
        "{response}"
    );
    assert!(!response.to_string().contains("secret.rs"), "{response}");
    for uri in [
        file_uri(&outside.join("secret.rs")),
        file_uri(&root.join("src/link.rs")),
    ] {
        let response = stack.references(&scip, &uri, 0, 10, false).await;
        assert!(
            response["result"].is_null(),
            "answered outside the roots: {response}"
        );
    }
    stack.shutdown().await;
}

/// An index over the occurrence limit (10 million by default; this one has
/// 10,001,000, written with the scip crate's types) is refused with the
/// limit and the key that sets it; the first pass counts without keeping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_over_the_occurrence_limit_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().join("project");
    std::fs::create_dir_all(root.join("src")).expect("src");
    std::fs::write(root.join("src/f0.rs"), "fn s0() {}\n").expect("f0.rs");
    let file = root.join(".scip/rust.scip");
    std::fs::create_dir_all(file.parent().expect("a parent")).expect(".scip");
    acp_lsp::scip::load::write_synthetic(&file, 10_001, 1_000).expect("the synthetic index");
    write_index(
        &root.join(".scip/small.scip"),
        &root,
        &[("src/f0.rs", 0, 3, 2, "s . . . f0/s0.", true)],
    );
    // The synthetic index's sidecar: the small one's hashes, its own bytes.
    std::fs::copy(
        acp_lsp::scip::sidecar::path_for(&root.join(".scip/small.scip")),
        acp_lsp::scip::sidecar::path_for(&file),
    )
    .expect("a sidecar");
    std::fs::remove_file(root.join(".scip/small.scip")).expect("remove the small index");
    std::fs::remove_file(acp_lsp::scip::sidecar::path_for(
        &root.join(".scip/small.scip"),
    ))
    .expect("remove its sidecar");
    describe_again(&file);
    let stack = Stack::open(&root.canonicalize().expect("canonical"), true);
    let scip = settled_entry(&stack).await;
    assert_eq!(scip["state"], "not_running", "{scip}");
    assert!(
        scip.to_string().contains(
            "10001000 occurrences is over the limit of 10000000 ([indexes] max_occurrences)"
        ),
        "{scip}"
    );
    stack.shutdown().await;
}

/// While the live server is starting (rust-analyzer held before it starts
/// by a FIFO the test opens later), `lsp/servers` lists the index as
/// `running`, and an agent that knows only the RFD (it picks a running
/// server by its entry and sends a plain `lsp/request`) gets its answer from
/// the index through the real proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rfd_agent_gets_answers_from_the_index_while_the_live_server_starts() {
    use support::proxy::{ProxyBuilder, ASKING_AGENT};
    require("rust-analyzer", "rustup component add rust-analyzer");
    let project = registry_crate("percent-encoding");
    let root = project.path().canonicalize().expect("canonical root");
    index(&root);
    let held = tempfile::tempdir().expect("a temporary directory");
    let fifo = held.path().join("go");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo failed");
    let config = held.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.rust-analyzer]\ncommand = \"sh\"\nargs = [\"-c\", \"read go < '{}' && exec rust-analyzer\"]\n",
            fifo.display()
        ),
    )
    .expect("the config");
    let mut proxy = ProxyBuilder::new(&root, ASKING_AGENT)
        .config(&config)
        .spawn();
    let session = proxy.editor.start_session(&root).await;
    let listing = proxy
        .editor
        .ask("lsp/servers", json!({"sessionId": session}))
        .await;
    let servers = support::gate::servers_of(&listing);
    let live = support::gate::named(&servers, "rust-analyzer");
    assert_eq!(live["state"], "starting", "{listing}");
    // What an RFD agent reads: a running server for `.rs` files.
    let scip = servers
        .iter()
        .find(|s| s["state"] == "running" && s["fileExtensions"].to_string().contains("\"rs\""))
        .unwrap_or_else(|| panic!("no running server for .rs: {listing}"));
    assert_eq!(scip["name"], "scip", "{scip}");
    assert_eq!(scip["capabilities"]["referencesProvider"], true, "{scip}");
    let (uri, line, character) = position_of(
        &root,
        "src/lib.rs",
        "pub fn percent_encode_byte",
        "percent_encode_byte",
    );
    let response = proxy
        .editor
        .ask(
            "lsp/request",
            json!({
                "sessionId": session,
                "serverId": scip["serverId"],
                "method": "textDocument/references",
                "params": references_params(&uri, line, character),
            }),
        )
        .await;
    assert!(source_of(&response).starts_with("scip@"), "{response}");
    let found = locations(&response["result"]["lspResult"]);
    assert!(found.len() >= 2, "{response}");
    assert!(
        found.iter().all(|l| l.starts_with(&file_uri(&root))),
        "{response}"
    );
    // Still held: the proxy's shutdown ends the held server's process group.
    let terminated = Command::new("kill")
        .args(["-TERM", &proxy.pid().to_string()])
        .status()
        .expect("kill runs");
    assert!(terminated.success());
    proxy.exited().await;
}
