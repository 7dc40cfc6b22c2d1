//! SCIP indexes beside the live servers, end to end: `acp-lsp index` runs the
//! real indexers (rust-analyzer scip, scip-python, scip-typescript), a
//! registry and a gate serve the index as a server of its own, and its
//! answers are compared with the real live server's once that is ready.
//! Also what must never be answered from an index (edited files, paths
//! outside the roots, another project's index) and what must be refused
//! (a truncated or corrupt index, one over the occurrence limit).
//!
//! A missing indexer or server fails the test with its install command.

mod support;

use acp_lsp::lsp::config::Config;
use acp_lsp::lsp::registry::{Registry, RegistryOptions};
use acp_lsp_core::gate::{Gate, GateConfig, GateMethod};
use acp_lsp_core::jsonrpc::RequestId;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use support::{copy_tree, require};

const SESSION: &str = "scip-session";
/// Longest wait for a live server to be ready (2 cores shared with others).
const READY_MS: u64 = 240_000;
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
        let registry = Registry::new(
            Config::builtin(),
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
        let id = RequestId::from_u64(self.next.fetch_add(1, Ordering::Relaxed));
        let params = serde_json::value::to_raw_value(&params).expect("params");
        let bytes = self.gate.call(id, method, Some(params)).await;
        serde_json::from_slice(&bytes).expect("a JSON response")
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
        .args(["metadata", "--format-version", "1", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
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
    copy_tree(Path::new(&manifest).parent().expect("a crate dir"), dir.path());
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
                acp_lsp::scip::index::Encoding::Utf8 => {
                    acp_lsp::scip::verify::convert(
                        line,
                        start.character,
                        acp_lsp::scip::index::Encoding::Utf8,
                        acp_lsp::scip::index::Encoding::Utf16,
                    )
                }
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

/// How the index's references compare with the live server's.
#[derive(Debug, Default)]
struct Comparison {
    symbols: usize,
    equal: usize,
    /// Locations the index gave that the live server did not: wrong answers.
    wrong: Vec<String>,
    /// Locations the live server gave in the project that the index did not.
    missing: Vec<String>,
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
        let response = stack
            .request(&scip, "textDocument/references", references_params(uri, *line, *character), false)
            .await;
        let source = response["result"]["_meta"]["acp-lsp"]["source"].as_str().unwrap_or("");
        assert!(
            source.starts_with("scip@"),
            "not answered from the index: {response}"
        );
        from_index.push(locations(&response["result"]["lspResult"]));
    }
    let live = stack.entry(live_name).await;
    let mut comparison = Comparison {
        symbols: symbols.len(),
        ..Comparison::default()
    };
    for ((uri, line, character), index) in symbols.iter().zip(from_index) {
        let response = stack
            .request(&live, "textDocument/references", references_params(uri, *line, *character), true)
            .await;
        assert!(response["result"].is_object(), "{live_name}: {response}");
        let (server, outside): (BTreeSet<String>, BTreeSet<String>) =
            locations(&response["result"]["lspResult"])
                .into_iter()
                .partition(|l| l.starts_with(&project));
        comparison.outside += outside.len();
        if server == index {
            comparison.equal += 1;
        }
        comparison.wrong.extend(index.difference(&server).cloned());
        comparison.missing.extend(server.difference(&index).cloned());
    }
    comparison
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
    assert!(comparison.symbols >= 50, "{comparison:#?}");
    assert!(comparison.wrong.is_empty(), "wrong locations: {comparison:#?}");
    assert!(comparison.missing.is_empty(), "missing locations: {comparison:#?}");
}

/// The same for scip-python beside pyright and scip-typescript beside
/// typescript-language-server, on the test projects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_from_python_and_typescript_indexes_are_the_servers() {
    require("scip-python", NPM_INDEXERS);
    require("scip-typescript", NPM_INDEXERS);
    require("pyright-langserver", "npm install -g pyright");
    require(
        "typescript-language-server",
        "npm install -g typescript-language-server typescript@6",
    );
    for (project, language, live) in [
        ("python-project", "python", "pyright"),
        ("ts-project", "typescript", "typescript-language-server"),
    ] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        copy_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects").join(project), dir.path());
        let root = dir.path().canonicalize().expect("canonical root");
        let files = index(&root);
        assert_eq!(files, vec![root.join(format!(".scip/{language}.scip"))]);
        let symbols = defined_symbols(&files[0], &root, 80);
        assert!(symbols.len() >= 3, "{project}: only {} symbols", symbols.len());
        let stack = Stack::open(&root, false);
        let comparison = compare(&stack, &root, live, &symbols).await;
        stack.shutdown().await;
        eprintln!("{project}: {comparison:#?}");
        assert!(comparison.wrong.is_empty(), "{project}: wrong locations: {comparison:#?}");
        assert!(comparison.symbols >= 3, "{project}: {comparison:#?}");
    }
}
