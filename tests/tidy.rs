//! Tidy: the rules ARCHITECTURE.md states, checked on the source text (in
//! the manner of rust-analyzer's `tidy` tests), so a new circle, a layer
//! reaching upward, a detached task or a wall of a function fails CI instead
//! of waiting for a reviewer.
//!
//! Each library file of the two crates with library code, `src/` (the
//! proxy; `main.rs` is another crate and reaches the library only through
//! its public API) and `crates/acp-lsp-core/src/` (the core), is read with
//! comments and string literals blanked; every path through `crate::`,
//! `super::`, `self::` or a child module's name (in `use` trees, braces
//! expanded, and inline in code) is resolved to the file of the module it
//! names, and a name a module imports (`use`, `pub use`) is followed to the
//! file that defines it: `super::Launch`, re-exported by `lsp/caches.rs`
//! from `lsp/launch.rs`, is an edge to `lsp/launch.rs`. In the proxy, the
//! core's modules (`crate::gate`, `crate::jsonrpc`, `acp_lsp_core::…`) are
//! nodes of their own. Code inside a `#[cfg(test)]` module (inline, or a
//! file of its own such as `foo/tests.rs`) is left out: tests may reach
//! anywhere. Module files (`mod.rs`) naming their own children are not
//! edges back.
//!
//! The rules:
//! - Every top-level module of each crate has a layer rule ([`CORE_LAYERS`],
//!   [`PROXY_LAYERS`]): the modules it may use, and only those.
//! - No two files of one directory use each other, directly or round a
//!   longer circle; a subdirectory counts as one file (`lsp/server/` is one
//!   entry of `lsp/`), and a file may use its own directory's `mod.rs`.
//! - No two top-level modules use each other, directly or round a circle.
//! - Only each crate's `sys.rs` names `libc` (every `unsafe` system call in
//!   one place per crate).
//! - Every task is owned: no `tokio::spawn`, `tokio::task::spawn`,
//!   `spawn_blocking`, `std::thread::spawn` or a runtime handle's `spawn`
//!   whose handle is dropped, but those [`DETACHED_ALLOWED`] lists with the
//!   reason.
//! - No function is longer than [`MAX_FUNCTION_LINES`], but those
//!   [`LONG_ALLOWED`] lists.
//!
//! Each checker has a self-test that plants what it must find.

// The checker's parts (a test crate's modules sit beside its root file).
#[path = "tidy/checks.rs"]
mod checks;
#[path = "tidy/graph.rs"]
mod graph;
#[path = "tidy/source.rs"]
mod source;

use checks::{detached_spawns, function_lengths};
use graph::{circles_of, named_paths, resolve, Crate, Target};
use source::{
    code_only, library_files, product_code, read, source_files, test_module_files,
    without_test_modules,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path from the crate root (`["lsp", "server"]`).
type ModPath = Vec<String>;

/// One top-level module's layer: the top-level modules it may use.
struct Layer {
    module: &'static str,
    may_use: &'static [&'static str],
}

const fn layer(module: &'static str, may_use: &'static [&'static str]) -> Layer {
    Layer { module, may_use }
}

/// The core's layers (ARCHITECTURE, "Layers"). That the core uses nothing
/// of the proxy is the crate boundary's: it does not depend on it.
const CORE_LAYERS: &[Layer] = &[
    layer("jsonrpc", &[]),
    layer("sys", &[]),
    // `sys` for the kernel's resolution of a path in URI confinement.
    layer("gate", &["jsonrpc", "sys"]),
];

/// The proxy's layers, bottom up (ARCHITECTURE, "Layers"). `gate` and
/// `jsonrpc` are the core's modules, below them all.
const PROXY_LAYERS: &[Layer] = &[
    layer("sys", &[]),
    layer("record", &["sys"]),
    layer("read", &["sys"]),
    // The planner is pure; applying reads and writes files.
    layer("edit", &["gate", "jsonrpc", "read", "record", "sys"]),
    // SCIP indexes answer below the servers; the registry serves them
    // beside its live servers (`lsp::registry::indexes`).
    layer("scip", &["gate", "jsonrpc", "read", "sys"]),
    // Recipes, the store and the registries' tools: nothing above the kernel.
    layer("install", &["sys"]),
    // `install`: a missing server's recipe, installs on first use; `scip`:
    // the indexes served beside the live servers.
    layer(
        "lsp",
        &[
            "gate", "install", "jsonrpc", "read", "record", "scip", "sys",
        ],
    ),
    // What the command line shows people, about servers (progress, the
    // servers view, install's plan).
    layer(
        "cli",
        &["gate", "install", "jsonrpc", "lsp", "read", "record", "sys"],
    ),
    layer(
        "daemon",
        &["gate", "jsonrpc", "lsp", "read", "record", "sys"],
    ),
    // The proxy's one LspHost: a registry or the daemon.
    layer("proxy_host", &["daemon", "gate", "jsonrpc", "lsp", "sys"]),
    layer(
        "session_facade",
        &[
            "cli",
            // The command line's warm servers: the shared daemon's socket
            // (`daemon::paths`) and its launcher (`daemon::client`).
            "daemon",
            "edit",
            "gate",
            "jsonrpc",
            "lsp",
            "proxy_host",
            "read",
            "record",
            "sys",
        ],
    ),
    layer(
        "mcp",
        &[
            "edit",
            "gate",
            "jsonrpc",
            "lsp",
            "proxy_host",
            "read",
            "record",
            "scip",
            "session_facade",
            "sys",
        ],
    ),
    // The relay injects the MCP server into session requests and hands the
    // editor's answers to the MCP tools' requests (`mcp::inject`,
    // `mcp::McpRelay`); it reaches no server but through the gate.
    layer("acp", &["gate", "jsonrpc", "mcp", "record", "sys"]),
    // The agent child writes into the relay's writer (`acp::writer`) and is
    // registered with the servers' orphan guardian (`lsp::process`).
    layer("agent_process", &["acp", "lsp", "sys"]),
    // The runner drives the binary from outside; it names servers as
    // acp-lsp does (`lsp::registry::server_id`) and reads server tables.
    layer("conformance", &["gate", "jsonrpc", "lsp", "record", "sys"]),
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn core_src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/acp-lsp-core/src")
}

/// Each crate with library code, with its layer rules.
fn crates() -> [(PathBuf, &'static [Layer]); 2] {
    [(src_dir(), PROXY_LAYERS), (core_src_dir(), CORE_LAYERS)]
}

/// A file's name in the repository, `/`-separated on every OS, as the
/// allow lists name files.
fn repo_name(root: &Path, file: &Path) -> String {
    let names: Vec<String> = file
        .strip_prefix(root)
        .expect("under the repository")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    names.join("/")
}

fn show(module: &ModPath) -> String {
    module.join("::")
}

// ---------------------------------------------------------------------------
// The layers and circles
// ---------------------------------------------------------------------------

/// The edges against `layers` in a crate's graph.
fn layer_violations(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>, layers: &[Layer]) -> Vec<String> {
    let mut broken = Vec::new();
    for (from, targets) in graph {
        let Some(top) = from.first() else { continue };
        let Some(layer) = layers.iter().find(|l| l.module == top) else {
            continue;
        };
        for to in targets {
            if to[0] != *top && !layer.may_use.contains(&to[0].as_str()) {
                broken.push(format!("{} uses {}", show(from), show(to)));
            }
        }
    }
    broken
}

#[test]
fn layers_use_only_what_is_below_them() {
    let mut broken = Vec::new();
    for (src, layers) in crates() {
        broken.extend(layer_violations(&Crate::read(&src).graph(), layers));
    }
    assert!(
        broken.is_empty(),
        "imports against ARCHITECTURE's layers:\n  {}",
        broken.join("\n  ")
    );
}

#[test]
fn every_top_level_module_has_a_layer_rule() {
    for (src, layers) in crates() {
        let modules: BTreeSet<String> = library_files(&src)
            .into_keys()
            .filter_map(|m| m.first().cloned())
            .collect();
        let ruled: BTreeSet<String> = layers.iter().map(|l| l.module.to_string()).collect();
        assert_eq!(
            modules,
            ruled,
            "{}: every top-level module needs a layer rule (and every rule a module)",
            src.display()
        );
    }
}

/// The circles in every crate.
fn circles_in(keep: impl Fn(&[String]) -> bool) -> Vec<String> {
    crates()
        .iter()
        .flat_map(|(src, _)| circles_of(&Crate::read(src).graph(), &keep))
        .collect()
}

const BREAK_IT: &str = "break the circle: move what both need into its own file, or down a layer";

#[test]
fn no_circles_between_the_files_of_a_directory() {
    let found = circles_in(|dir| !dir.is_empty());
    assert!(
        found.is_empty(),
        "files that use each other ({BREAK_IT}):\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn no_circles_between_top_level_modules() {
    let found = circles_in(|dir| dir.is_empty());
    assert!(
        found.is_empty(),
        "top-level modules that use each other ({BREAK_IT}):\n  {}",
        found.join("\n  ")
    );
}

/// Every `libc` and `windows_sys` call is in its crate's `sys.rs` (or the
/// per-OS files under `sys/`), behind a safe wrapper with its `// SAFETY:`
/// reasoning; the rest of each library names neither.
#[test]
fn libc_only_in_sys() {
    // Every file of the libraries and the `acp-lsp` binary, test modules
    // included (the fake server is test support, a crate of its own).
    let mut files = Vec::new();
    let mut sys_files = Vec::new();
    for (src, _) in crates() {
        files.extend(source_files(&src, true).into_values());
        sys_files.push(src.join("sys.rs"));
        sys_files.push(src.join("sys"));
    }
    assert!(files.len() > 20, "the walk finds the sources: {files:?}");
    let found: Vec<String> = files
        .into_iter()
        .filter(|file| !sys_files.iter().any(|sys| file.starts_with(sys)))
        .filter(|file| {
            let code = code_only(&read(file));
            code.contains("libc::") || code.contains("windows_sys::")
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(
        found.is_empty(),
        "libc or windows_sys named outside a crate's sys (add a safe wrapper there):\n  {}",
        found.join("\n  ")
    );
}

// ---------------------------------------------------------------------------
// Tasks are owned
// ---------------------------------------------------------------------------

/// Spawns whose handle is dropped that are meant to be: (file under the
/// repository, a piece of the spawn's code, why it may outlive its caller).
/// An entry that matches nothing fails too.
const DETACHED_ALLOWED: &[(&str, &str, &str)] = &[(
    "src/daemon/client.rs",
    "child.wait()",
    "reaps the shared daemon, which is started detached to outlive this \
     proxy: joining would wait for the daemon, and the thread only waits",
)];

#[test]
fn every_spawn_keeps_its_handle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut detached = Vec::new();
    for (src, _) in crates() {
        for (file, code) in product_code(&src) {
            let file = repo_name(root, &file);
            detached.extend(
                detached_spawns(&code)
                    .into_iter()
                    .map(|text| (file.clone(), text)),
            );
        }
    }
    let allowed = |(file, text): &(String, String)| {
        DETACHED_ALLOWED
            .iter()
            .any(|(f, piece, _)| f == file && text.contains(&piece.replace(' ', "")))
    };
    let bare: Vec<String> = detached
        .iter()
        .filter(|d| !allowed(d))
        .map(|(file, text)| format!("{file}: {text}"))
        .collect();
    assert!(
        bare.is_empty(),
        "spawns whose handle is dropped (keep it: a TaskTracker under a cancellation, a \
         JoinSet, an AbortOnDropHandle, or awaited; or add an entry with the reason to \
         DETACHED_ALLOWED):\n  {}",
        bare.join("\n  ")
    );
    let stale: Vec<String> = DETACHED_ALLOWED
        .iter()
        .filter(|(f, piece, _)| {
            !detached
                .iter()
                .any(|(file, text)| file == f && text.contains(&piece.replace(' ', "")))
        })
        .map(|(f, piece, _)| format!("{f}: {piece}"))
        .collect();
    assert!(
        stale.is_empty(),
        "DETACHED_ALLOWED entries that match no spawn (remove them):\n  {}",
        stale.join("\n  ")
    );
}

#[test]
fn the_spawn_checker_flags_a_planted_bare_spawn() {
    let code = without_test_modules(&code_only(
        r#"
fn planted() {
    tokio::spawn(async move { work().await });
    let _ = tokio::task::spawn(async {});
    std::thread::spawn(move || child.wait());
    drop(tokio::task::spawn_blocking(|| 1));
    runtime.spawn(async move { notice().await });
    tokio::runtime::Handle::current().spawn_blocking(|| 2);
    match framing {
        Lines => tokio::spawn(read_lines(a)),
        Frames => tokio::spawn(read_frames(b)),
    };
}
fn owned() {
    let reader = match framing {
        Lines => tokio::spawn(kept_lines(a)),
        Frames => tokio::spawn(kept_frames(b)),
    };
    let task = tokio::spawn(kept());
    tasks.spawn(joined());
    let drain = runtime.spawn(drained());
    tokio::spawn(awaited()).await;
    Some(tokio::spawn(in_an_option()))
}
// tokio::spawn(in_a_comment());
const S: &str = "tokio::spawn(in_a_string());";
#[cfg(test)]
mod tests {
    fn t() { tokio::spawn(in_a_test()); }
}
"#,
    ));
    let found = detached_spawns(&code);
    assert_eq!(
        found,
        [
            "tokio::spawn(asyncmove{work().await})",
            "tokio::task::spawn(async{})",
            "std::thread::spawn(move||child.wait())",
            "tokio::task::spawn_blocking(||1)",
            "runtime.spawn(asyncmove{notice().await})",
            "tokio::runtime::Handle::current().spawn_blocking(||2)",
            "tokio::spawn(read_lines(a))",
            "tokio::spawn(read_frames(b))",
        ],
        "{code}"
    );
}

// ---------------------------------------------------------------------------
// Functions that fit on a screen or two
// ---------------------------------------------------------------------------

/// The longest a function may be, in lines from `fn` to its closing brace
/// (HELPERS.md: "a function past ~150 wants splitting").
const MAX_FUNCTION_LINES: usize = 150;

/// Functions over [`MAX_FUNCTION_LINES`] left as they are for now: (file,
/// function, why).
const LONG_ALLOWED: &[(&str, &str, &str)] = &[];

#[test]
fn no_function_is_longer_than_the_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = Vec::new();
    let mut seen_allowed = BTreeSet::new();
    for (src, _) in crates() {
        for file in source_files(&src, true).into_values() {
            let rel = repo_name(root, &file);
            for (name, lines) in function_lengths(&code_only(&read(&file))) {
                if lines <= MAX_FUNCTION_LINES {
                    continue;
                }
                if LONG_ALLOWED.iter().any(|(f, n, _)| *f == rel && *n == name) {
                    seen_allowed.insert((rel.clone(), name));
                } else {
                    long.push(format!("{rel}: fn {name} is {lines} lines"));
                }
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split them where the split has a name):\n  {}",
        long.join("\n  ")
    );
    let stale: Vec<String> = LONG_ALLOWED
        .iter()
        .filter(|(f, n, _)| !seen_allowed.contains(&(f.to_string(), n.to_string())))
        .map(|(f, n, _)| format!("{f}: {n}"))
        .collect();
    assert!(
        stale.is_empty(),
        "LONG_ALLOWED entries no longer over the limit (remove them):\n  {}",
        stale.join("\n  ")
    );
}

#[test]
fn the_length_checker_measures_a_planted_function() {
    let body = "    step();\n".repeat(MAX_FUNCTION_LINES);
    let code = code_only(&format!(
        "fn long(a: [u8; 2]) -> Result<(), String> {{\n{body}}}\n\
         trait T {{ fn declared(&self); }}\n\
         fn short() {{ let s = \"}}\"; }}\n"
    ));
    assert_eq!(
        function_lengths(&code),
        [
            ("long".to_string(), MAX_FUNCTION_LINES + 2),
            ("short".to_string(), 1),
        ]
    );
}

// ---------------------------------------------------------------------------
// The checkers themselves
// ---------------------------------------------------------------------------

/// The checker itself: it sees the edges it must see.
#[test]
fn the_checker_reads_use_trees_inline_paths_and_test_modules() {
    let code = code_only(
        r##"
use super::config::ServerConfig;
use crate::{gate::{self, GateError}, jsonrpc::*};
pub(crate) use super::watch::{
    FileChange as Change,
};
// use crate::mcp::Hidden;
const S: &str = "crate::acp::InAString";
const R: &str = r#"use crate::cli::InARawString;"#;
const B: &[u8] = br#"{"use crate::cli::InAByteRawString": "\"}"#;
fn f<'a>(x: &'a str) -> char { let _ = crate::record::Recorder::new; 'x' }
#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::OnlyInTests;
}
mod inner {
    use super::super::documents::DocumentTable;
}
"##,
    );
    let module: ModPath = vec!["lsp".into(), "server".into()];
    let named: BTreeSet<ModPath> = named_paths(&module, &code)
        .paths
        .iter()
        .filter_map(
            |(written_in, path)| match resolve(written_in, path, &|_| false) {
                Some(Target::Ours(path)) => Some(path),
                _ => None,
            },
        )
        .collect();
    let expect = |path: &str| -> ModPath { path.split("::").map(String::from).collect() };
    for path in [
        "lsp::config::ServerConfig",
        "gate",
        "gate::GateError",
        "jsonrpc",
        "lsp::watch::FileChange",
        "record::Recorder::new",
        "lsp::documents::DocumentTable",
    ] {
        assert!(
            named.contains(&expect(path)),
            "{path} not seen in {named:?}"
        );
    }
    for module in ["mcp", "acp", "cli", "conformance"] {
        assert!(
            !named.iter().any(|p| p[0] == module),
            "{module} seen in a comment, a string or a test module: {named:?}"
        );
    }
    assert_eq!(
        test_module_files(&code_only(
            "#[cfg(test)]\nmod tests;\nmod real;\n#[cfg(test)]\nmod inline {}"
        )),
        ["tests"],
        "an out-of-line test module is seen, and only that"
    );
}

/// A crate planted from (file, text) pairs: `lib.rs`, `a.rs`, `dir/mod.rs`…
fn planted(files: &[(&str, &str)]) -> Crate {
    Crate::from_texts(
        files
            .iter()
            .map(|(file, text)| {
                let mut parts: Vec<String> = file.split('/').map(String::from).collect();
                let last = parts.pop().expect("a file name");
                match last.as_str() {
                    "lib.rs" | "mod.rs" => {}
                    name => parts.push(name.trim_end_matches(".rs").to_string()),
                }
                (parts, PathBuf::from(file), text.to_string())
            })
            .collect(),
    )
}

#[test]
fn the_checker_follows_re_exports_and_finds_a_planted_circle() {
    // `b` reaches `a` only through the name `store/mod.rs` re-exports: the
    // circle a → b → a is there only if the re-export is followed.
    let krate = planted(&[
        (
            "lib.rs",
            "pub mod store;\npub(crate) use acp_lsp_core::gate;\n",
        ),
        (
            "store/mod.rs",
            "mod a;\nmod b;\npub use self::a::Table;\npub use b::{Key as PublicKey};\n",
        ),
        ("store/a.rs", "use super::b::Key;\npub struct Table(Key);\n"),
        (
            "store/b.rs",
            "pub struct Key;\nfn f(t: &super::Table) { let _ = crate::gate::Gate::new; }\n",
        ),
    ]);
    let graph = krate.graph();
    let node = |path: &str| -> ModPath { path.split("::").map(String::from).collect() };
    assert_eq!(
        graph[&node("store::b")],
        BTreeSet::from([node("store::a"), node("gate")]),
        "the re-exported Table is a's; crate::gate is the core's gate: {graph:?}"
    );
    assert_eq!(
        circles_of(&graph, &|dir| !dir.is_empty()),
        ["store::a → store::b → store::a"],
        "{graph:?}"
    );
    // The same names reached from outside the directory, and an upward edge.
    let upward = planted(&[
        ("lib.rs", "pub mod low;\npub mod high;\n"),
        ("low.rs", "use crate::high::Thing;\n"),
        ("high.rs", "pub struct Thing;\nuse crate::low;\n"),
    ]);
    let graph = upward.graph();
    assert_eq!(
        circles_of(&graph, &|dir| dir.is_empty()),
        ["high → low → high"],
        "{graph:?}"
    );
    assert_eq!(
        layer_violations(&graph, &[layer("low", &[]), layer("high", &["low"])]),
        ["low uses high"]
    );
}
