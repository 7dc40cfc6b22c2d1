//! The MCP tools as a model uses them, end to end through the injected
//! server (the real `acp-lsp mcp --connect` bridge, rmcp's client) on real
//! language servers: symbols named by name (qualified, in a file, on a
//! line), ambiguous names answered with candidates, columns off a name
//! snapped, `implementation`, `type_definition`, `call_hierarchy` across
//! files on rust-analyzer, pyright and clangd, `rename` as a dry run and
//! what it leaves, answers cut to the budget with offsets, `diagnostics
//! {since: "last_edit"}` after the agent's own writes, partial answers
//! named; and bad input (unknown names, regex metacharacters, a symbol only
//! outside the roots, 10,000 `workspace/symbol` results from the fake
//! server).
//!
//! Needs rust-analyzer, pyright-langserver, clangd and
//! typescript-language-server on `PATH`; without them the tests fail.
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]

mod mcp_support;
mod support;

use acp_lsp::lsp::config::{Config, ServerConfig};
use mcp_support::*;
use serde_json::{json, Value};
use std::path::Path;

fn write(root: &Path, file: &str, text: &str) {
    let path = root.join(file);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// A tool's failure text (it must fail).
fn failed(tool: &str, result: &rmcp::model::CallToolResult) -> String {
    assert_eq!(
        result.is_error,
        Some(true),
        "{tool} succeeded: {}",
        text(result)
    );
    text(result)
}

const LIB: &str = "pub mod ledger;
pub mod many;
pub mod many_more;
pub mod other;

/// Sum of a ledger.
///
/// ```
/// let l = ledgers::ledger::Ledger::default();
/// assert_eq!(l.tally(), 0);
/// ```
pub fn total(l: &ledger::Ledger) -> i64 {
    l.tally() + other::tally(3)
}
";

const LEDGER: &str = "#[derive(Default)]
pub struct Ledger {
    pub entries: Vec<i64>,
}

impl Ledger {
    pub fn tally(&self) -> i64 {
        self.entries.iter().sum()
    }
}

pub trait Summable {
    fn tally(&self) -> i64;
}

pub struct Pair(pub i64, pub i64);

impl Summable for Pair {
    fn tally(&self) -> i64 {
        self.0 + self.1
    }
}
";

const OTHER: &str = "/// Twice `x`.
pub fn tally(x: i64) -> i64 {
    x * 2
}

pub fn uses() -> i64 {
    tally(1) + tally(2)
}
";

/// Uses of `one` in two files: more than one answer shows.
const USES: usize = 150;

fn ledgers(root: &Path) {
    write(
        root,
        "Cargo.toml",
        "[package]\nname = \"ledgers\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(root, "src/lib.rs", LIB);
    write(root, "src/ledger.rs", LEDGER);
    write(root, "src/other.rs", OTHER);
    let mut many = String::from("pub fn one() -> i64 {\n    1\n}\n");
    let mut more = String::new();
    for i in 0..USES {
        many.push_str(&format!("pub fn a{i}() -> i64 {{\n    one()\n}}\n"));
        more.push_str(&format!(
            "pub fn b{i}() -> i64 {{\n    crate::many::one()\n}}\n"
        ));
    }
    write(root, "src/many.rs", &many);
    write(root, "src/many_more.rs", &more);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_position_tool_takes_a_symbol_by_name_on_rust_analyzer() {
    let mut proxy =
        Proxy::start_with(Config::builtin(), ledgers, acp_lsp::mcp::tools::READY_WAIT).await;
    proxy.initialize(false).await;
    let entry = proxy.new_session("s1").await;
    let client = connect(&entry).await;

    // An ambiguous name: every candidate, no guess.
    let (answer, structured) = success(
        "references",
        &call(&client, "references", json!({"symbol": "tally"})).await,
    );
    assert!(
        answer.contains("`tally` is ambiguous: 4 symbols match"),
        "{answer}"
    );
    for candidate in [
        "src/ledger.rs:7:12",
        "src/ledger.rs:13:8",
        "src/ledger.rs:19:8",
        "src/other.rs:2:8",
    ] {
        assert!(answer.contains(candidate), "{candidate} not in\n{answer}");
    }
    assert_eq!(structured["ambiguous"], true, "{structured}");
    assert!(!answer.contains("references:"), "it guessed:\n{answer}");

    // A qualified name picks one; its references span files.
    let (answer, _) = success(
        "references",
        &call(&client, "references", json!({"symbol": "Ledger::tally"})).await,
    );
    assert!(
        answer.starts_with("`Ledger::tally` → src/ledger.rs:7:12"),
        "{answer}"
    );
    assert!(
        answer.contains("src/lib.rs:13:7: l.tally() + other::tally(3)"),
        "{answer}"
    );
    assert!(!answer.contains("src/other.rs"), "{answer}");

    // A name in a file; on a line with two of them, the choice is said.
    let (answer, _) = success(
        "references",
        &call(
            &client,
            "references",
            json!({"symbol": "tally", "file": "src/other.rs"}),
        )
        .await,
    );
    assert!(answer.contains("src/lib.rs:13:24:"), "{answer}");
    assert!(
        answer.contains("src/other.rs:7:5: tally(1) + tally(2)"),
        "{answer}"
    );
    assert!(!answer.contains("src/ledger.rs"), "{answer}");
    let (answer, _) = success(
        "references",
        &call(
            &client,
            "references",
            json!({"symbol": "tally", "file": "src/other.rs", "line": 7}),
        )
        .await,
    );
    assert!(
        answer.contains("occurs 2 times on src/other.rs:7"),
        "{answer}"
    );
    assert!(answer.contains("src/lib.rs:13:24:"), "{answer}");

    // A column on a keyword snaps to the name, saying so.
    let (answer, _) = success(
        "hover",
        &call(
            &client,
            "hover",
            json!({"file": "src/other.rs", "line": 2, "column": 1}),
        )
        .await,
    );
    assert!(
        answer.starts_with("src/other.rs:2:1 is not on a name; used `tally` at column 8"),
        "{answer}"
    );
    assert!(answer.contains("fn tally(x: i64) -> i64"), "{answer}");

    let (answer, _) = success(
        "definition",
        &call(&client, "definition", json!({"symbol": "total"})).await,
    );
    assert!(answer.contains("src/lib.rs:12:8: pub fn total"), "{answer}");

    let (answer, _) = success(
        "implementation",
        &call(&client, "implementation", json!({"symbol": "Summable"})).await,
    );
    assert!(answer.contains("src/ledger.rs:18:"), "{answer}");

    let (answer, _) = success(
        "type_definition",
        &call(
            &client,
            "type_definition",
            json!({"symbol": "l", "file": "src/lib.rs", "line": 12}),
        )
        .await,
    );
    assert!(
        answer.contains("src/ledger.rs:2:12: pub struct Ledger {"),
        "{answer}"
    );

    // Callers across files, and callees.
    let (answer, _) = success(
        "call_hierarchy",
        &call(
            &client,
            "call_hierarchy",
            json!({"symbol": "tally", "file": "src/other.rs", "depth": 2}),
        )
        .await,
    );
    assert!(
        answer.contains("src/lib.rs:12:8 function total"),
        "{answer}"
    );
    assert!(
        answer.contains("src/other.rs:6:8 function uses"),
        "{answer}"
    );
    let (answer, _) = success(
        "call_hierarchy",
        &call(
            &client,
            "call_hierarchy",
            json!({"symbol": "total", "direction": "outgoing"}),
        )
        .await,
    );
    assert!(
        answer.contains("src/other.rs:2:8 function tally"),
        "{answer}"
    );
    assert!(
        answer.contains("src/ledger.rs:7:12 function tally"),
        "{answer}"
    );

    // A long answer is cut at the budget, says what is left and how to see
    // it; the pages together are the whole answer.
    let (first, structured) = success(
        "references",
        &call(&client, "references", json!({"symbol": "one"})).await,
    );
    let total = structured["total"].as_u64().expect("total") as usize;
    assert_eq!(total, 2 * USES + 1, "{first}");
    assert!(
        first.len() < acp_lsp::mcp::tools::DEFAULT_BUDGET + 400,
        "{}",
        first.len()
    );
    assert!(
        first.contains("more in 2 files; ask again with offset="),
        "{first}"
    );
    let mut seen = structured["locations"].as_array().expect("locations").len();
    let mut next = structured["nextOffset"].as_u64();
    while let Some(offset) = next {
        let (_, page) = success(
            "references",
            &call(
                &client,
                "references",
                json!({"symbol": "one", "offset": offset}),
            )
            .await,
        );
        assert_eq!(page["offset"].as_u64(), Some(offset));
        seen += page["locations"].as_array().expect("locations").len();
        next = page["nextOffset"].as_u64();
    }
    assert_eq!(seen, total);

    // Bad names: clear errors, regex metacharacters taken literally.
    let unknown = call(&client, "references", json!({"symbol": "no_such_fn"})).await;
    assert!(failed("references", &unknown).contains("no symbol named `no_such_fn`"));
    for literal in ["ta.*", "t[a-z]+y", "(tally)"] {
        let result = call(&client, "definition", json!({"symbol": literal})).await;
        let message = failed("definition", &result);
        assert!(message.contains(&format!("`{literal}`")), "{message}");
        assert!(
            !message.contains("src/other.rs"),
            "{literal} matched as a pattern: {message}"
        );
    }
    let none = call(&client, "hover", json!({"line": 3})).await;
    assert!(failed("hover", &none).contains("`symbol`"));

    // A dry run: the diff, nothing written, and the doc-test example the
    // server's rename leaves (rust-analyzer does not rename inside it).
    let (answer, structured) = success(
        "rename",
        &call(
            &client,
            "rename",
            json!({"symbol": "Ledger::tally", "new_name": "sum", "dry_run": true}),
        )
        .await,
    );
    assert!(answer.contains("dry run, nothing written"), "{answer}");
    assert!(
        answer.contains("+    pub fn sum(&self) -> i64 {"),
        "{answer}"
    );
    assert!(
        answer.contains("+    l.sum() + other::tally(3)"),
        "{answer}"
    );
    assert!(
        answer.contains("src/lib.rs:10:18: /// assert_eq!(l.tally(), 0); (doc comment)"),
        "{answer}"
    );
    // Other symbols named `tally` are not reported as left by this rename.
    assert!(!answer.contains("src/other.rs:2:8"), "{answer}");
    assert!(answer.contains("name another symbol"), "{answer}");
    assert_eq!(structured["dryRun"], true);
    assert_eq!(
        std::fs::read_to_string(proxy.root.join("src/ledger.rs")).unwrap(),
        LEDGER
    );

    // The rename for real, then its own writes are the last edit.
    let (answer, _) = success(
        "rename",
        &call(
            &client,
            "rename",
            json!({"symbol": "tally", "file": "src/other.rs", "new_name": "double"}),
        )
        .await,
    );
    assert!(answer.contains("changed src/other.rs"), "{answer}");
    let other = std::fs::read_to_string(proxy.root.join("src/other.rs")).unwrap();
    assert!(other.contains("double(1) + double(2)"), "{other}");
    let (answer, structured) = success(
        "diagnostics",
        &call(&client, "diagnostics", json!({"since": "last_edit"})).await,
    );
    assert!(
        answer.starts_with("since the last edit (1 rename:"),
        "{answer}"
    );
    assert_eq!(structured["new"], 0, "{answer}");
    assert!(answer.ends_with("left out: nothing\n"), "{answer}");

    client.cancel().await.expect("close the MCP client");
    proxy.registry.shutdown().await;
}

/// rust-three-files with a caller of `report::square` in a fourth file.
fn three_files_and_a_caller(root: &Path) {
    support::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/rust-three-files"),
        root,
    );
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("lib.rs");
    write(root, "src/lib.rs", &format!("{lib}pub mod summary;\n"));
    write(
        root,
        "src/summary.rs",
        "/// Twice a square.\npub fn twice() -> u32 {\n    crate::report::square(2) * 2\n}\n",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostics_since_the_last_edit_are_the_new_error_then_one_fixed() {
    let mut proxy = Proxy::start_with(
        Config::builtin(),
        three_files_and_a_caller,
        acp_lsp::mcp::tools::READY_WAIT,
    )
    .await;
    proxy.initialize(true).await;
    let entry = proxy.new_session("d1").await;
    let client = connect(&entry).await;

    let nothing = call(&client, "diagnostics", json!({"since": "last_edit"})).await;
    assert!(failed("diagnostics", &nothing).contains("no file was written through this session"));
    // Warm: the server has the project before the edit.
    success(
        "references",
        &call(&client, "references", json!({"symbol": "square"})).await,
    );

    // The agent changes `square`'s signature: its caller in another file breaks.
    let broken = "use crate::geometry::area;\n\n/// Area of a square of side `side`, scaled.\n\
                  pub fn square(side: u32, scale: u32) -> u32 {\n    area(side, side) * scale\n}\n";
    proxy.agent_writes("d1", "src/report.rs", broken).await;
    let (answer, structured) = success(
        "diagnostics",
        &call(&client, "diagnostics", json!({"since": "last_edit"})).await,
    );
    assert_eq!(structured["new"], 1, "{answer}");
    assert_eq!(structured["fixed"], 0, "{answer}");
    let changes = structured["changes"].as_array().expect("changes");
    assert_eq!(changes.len(), 1, "{answer}");
    assert_eq!(changes[0]["change"], "new");
    assert_eq!(changes[0]["file"], "src/summary.rs");
    assert_eq!(changes[0]["severity"], "error");
    assert_eq!(changes[0]["server"], "rust-analyzer");
    assert!(
        answer.starts_with("since the last edit (1 write by the agent: src/report.rs): 1 new"),
        "{answer}"
    );
    assert!(answer.contains("new: src/summary.rs:3:"), "{answer}");
    // Asked again without a write: the same delta.
    let (_, again) = success(
        "diagnostics",
        &call(&client, "diagnostics", json!({"since": "last_edit"})).await,
    );
    assert_eq!(again["new"], 1);

    // The fix: exactly one fixed entry.
    proxy
        .agent_writes(
            "d1",
            "src/summary.rs",
            "/// Twice a square.\npub fn twice() -> u32 {\n    crate::report::square(2, 1) * 2\n}\n",
        )
        .await;
    let (answer, structured) = success(
        "diagnostics",
        &call(&client, "diagnostics", json!({"since": "last_edit"})).await,
    );
    assert_eq!(structured["new"], 0, "{answer}");
    assert_eq!(structured["fixed"], 1, "{answer}");
    let changes = structured["changes"].as_array().expect("changes");
    assert_eq!(changes.len(), 1, "{answer}");
    assert_eq!(changes[0]["change"], "fixed");
    assert_eq!(changes[0]["file"], "src/summary.rs");
    assert!(answer.ends_with("left out: nothing\n"), "{answer}");

    client.cancel().await.expect("close the MCP client");
    proxy.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_hierarchy_finds_callers_across_files_on_pyright_and_clangd() {
    support::require("pyright-langserver", "npm install -g pyright");
    support::require("clangd", "apt-get install -y clangd");
    let mut proxy = Proxy::start_with(
        Config::builtin(),
        |root| {
            write(
                root,
                "py/pyproject.toml",
                "[project]\nname = \"probe\"\nversion = \"0\"\n",
            );
            write(root, "py/pkg/__init__.py", "");
            write(
                root,
                "py/pkg/ledger.py",
                "class Ledger:\n    def tally(self) -> int:\n        return 0\n\n\n\
                 def tally(x: int) -> int:\n    return x * 2\n",
            );
            write(
                root,
                "py/pkg/use.py",
                "from pkg.ledger import Ledger, tally\n\n\ndef total(l: Ledger) -> int:\n    \
                 return l.tally() + tally(3)\n",
            );
            write(root, "c/compile_flags.txt", "-I.\n");
            write(
                root,
                "c/ledger.h",
                "int tally(int x);\nint ledger_sum(int n);\n",
            );
            write(
                root,
                "c/ledger.c",
                "#include \"ledger.h\"\nint tally(int x) { return x * 2; }\n\
                 int ledger_sum(int n) { return tally(n); }\n",
            );
            write(
                root,
                "c/main.c",
                "#include \"ledger.h\"\nint main(void) { return tally(1) + ledger_sum(2); }\n",
            );
        },
        acp_lsp::mcp::tools::READY_WAIT,
    )
    .await;
    proxy.initialize(false).await;
    let entry = proxy.new_session("h1").await;
    let client = connect(&entry).await;

    // pyright: the module function, not the method of the same name.
    let (answer, _) = success(
        "call_hierarchy",
        &call(
            &client,
            "call_hierarchy",
            json!({"symbol": "tally", "file": "py/pkg/ledger.py", "line": 6}),
        )
        .await,
    );
    assert!(
        answer.contains("py/pkg/use.py:4:5 function total — calls it at 5:24"),
        "{answer}"
    );
    let (answer, _) = success(
        "call_hierarchy",
        &call(
            &client,
            "call_hierarchy",
            json!({"symbol": "Ledger.tally", "file": "py/pkg/ledger.py"}),
        )
        .await,
    );
    assert!(
        answer.contains("py/pkg/use.py:4:5 function total — calls it at 5:14"),
        "{answer}"
    );

    // clangd: callers in the same file and in another one.
    let (answer, _) = success(
        "call_hierarchy",
        &call(
            &client,
            "call_hierarchy",
            json!({"symbol": "tally", "file": "c/ledger.c"}),
        )
        .await,
    );
    assert!(
        answer.contains("c/ledger.c:3:5 function ledger_sum"),
        "{answer}"
    );
    assert!(answer.contains("c/main.c:2:5 function main"), "{answer}");

    client.cancel().await.expect("close the MCP client");
    proxy.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_references_answer_from_a_partial_view_says_so_and_what_fixes_it() {
    support::require(
        "typescript-language-server",
        "npm install -g typescript-language-server typescript@6",
    );
    support::require("clangd", "apt-get install -y clangd");
    let mut proxy = Proxy::start_with(
        Config::builtin(),
        |root| {
            // JavaScript without a jsconfig.json: tsserver sees open files only.
            write(root, "js/package.json", "{\"name\": \"js\", \"version\": \"0.0.0\"}\n");
            write(root, "js/util.js", "function helper(x) {\n  return x + 1;\n}\nmodule.exports = { helper };\n");
            write(root, "js/main.js", "const { helper } = require(\"./util\");\nconsole.log(helper(1));\n");
            // A C file the project's own database does not list.
            write(
                root,
                "c/compile_commands.json",
                "[{\"directory\": \".\", \"file\": \"listed.c\", \"arguments\": [\"cc\", \"-c\", \"listed.c\"]}]\n",
            );
            write(root, "c/listed.c", "int listed(void) { return 1; }\n");
            write(root, "c/stray.c", "int stray(void) { return 2; }\n");
        },
        acp_lsp::mcp::tools::READY_WAIT,
    )
    .await;
    proxy.initialize(false).await;
    let entry = proxy.new_session("p1").await;
    let client = connect(&entry).await;
    let (answer, structured) = success(
        "references",
        &call(
            &client,
            "references",
            json!({"symbol": "helper", "file": "js/util.js", "line": 1}),
        )
        .await,
    );
    assert!(
        answer.contains("partial: no tsconfig.json or jsconfig.json covers this file"),
        "{answer}"
    );
    assert!(answer.contains("Add a jsconfig.json"), "{answer}");
    assert!(structured["partial"].is_string(), "{structured}");
    let (answer, _) = success(
        "references",
        &call(
            &client,
            "references",
            json!({"symbol": "stray", "file": "c/stray.c"}),
        )
        .await,
    );
    assert!(
        answer.contains("partial: stray.c is not in the compilation database"),
        "{answer}"
    );
    let (answer, _) = success(
        "references",
        &call(
            &client,
            "references",
            json!({"symbol": "listed", "file": "c/listed.c"}),
        )
        .await,
    );
    assert!(!answer.contains("partial:"), "{answer}");
    client.cancel().await.expect("close the MCP client");
    proxy.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_and_outside_workspace_symbol_answers_are_bounded_and_never_read() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let outside = tmp
        .path()
        .canonicalize()
        .expect("canonical")
        .join("secret.fake");
    std::fs::write(&outside, "the SECRET line\n").expect("write the outside file");
    let log = tmp.path().join("fake.log");
    let mut server = ServerConfig::new(
        "fake",
        support::fake::fake_server(),
        &[],
        &["fake"],
        &["fake"],
        &["fake.toml"],
    );
    server
        .env
        .insert("FAKE_LSP_MODE".into(), "workspace_symbols=10000".into());
    server.env.insert(
        "FAKE_LSP_SYMBOL_OUTSIDE".into(),
        outside.display().to_string(),
    );
    server
        .env
        .insert("FAKE_LSP_LOG".into(), log.display().to_string());
    let config = Config {
        servers: vec![server],
        ..Config::builtin()
    };
    // The fake places its symbols in the root, where only s0.fake exists.
    let mut proxy = Proxy::start_with(
        config,
        |root| {
            write(root, "fake.toml", "");
            write(root, "s0.fake", "fn alpha\n");
        },
        acp_lsp::mcp::tools::READY_WAIT,
    )
    .await;
    proxy.initialize(false).await;
    let entry = proxy.new_session("b1").await;
    let client = connect(&entry).await;

    let (answer, structured) = success(
        "references",
        &call(&client, "references", json!({"symbol": "alpha"})).await,
    );
    assert!(
        answer.contains("`alpha` is ambiguous: 10000 symbols match"),
        "{answer}"
    );
    assert!(answer.contains("more in 100 files"), "{answer}");
    assert!(
        answer.contains("1 more outside the session's roots left out"),
        "{answer}"
    );
    assert!(
        answer.len() < 2 * acp_lsp::mcp::tools::DEFAULT_BUDGET,
        "{}",
        answer.len()
    );
    assert!(
        !answer.contains("SECRET") && !answer.contains("secret.fake"),
        "{answer}"
    );
    assert_eq!(structured["outsideRoots"], 1);

    let (answer, structured) = success(
        "workspace_symbols",
        &call(&client, "workspace_symbols", json!({"query": "alpha"})).await,
    );
    assert!(
        answer.len() < 2 * acp_lsp::mcp::tools::DEFAULT_BUDGET,
        "{}",
        answer.len()
    );
    assert!(answer.contains("ask again with offset="), "{answer}");
    assert!(
        answer.contains("1 symbol outside the session's roots left out"),
        "{answer}"
    );
    assert_eq!(structured["total"], 10000);

    // A symbol only outside the roots: a clear error, the file never opened.
    let result = call(&client, "definition", json!({"symbol": "outside_only"})).await;
    let message = failed("definition", &result);
    assert!(
        message.contains("no symbol named `outside_only`"),
        "{message}"
    );
    assert!(
        message.contains("1 match outside the session's roots left out"),
        "{message}"
    );
    let opened: Vec<Value> = support::fake::read_log(&log)
        .into_iter()
        .filter(|m| m.to_string().contains("secret.fake") && m["method"] != "workspace/symbol")
        .collect();
    assert!(
        opened.is_empty(),
        "the outside file reached the server: {opened:?}"
    );

    client.cancel().await.expect("close the MCP client");
    proxy.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostics_of_a_file_two_servers_serve_come_from_both_each_tagged() {
    let fake = |name: &str| {
        let mut server = ServerConfig::new(
            name,
            support::fake::fake_server(),
            &[],
            &["fake"],
            &["fake"],
            &["fake.toml"],
        );
        server
            .env
            .insert("FAKE_LSP_MODE".into(), "diagnostics".into());
        server
    };
    let mut companion = fake("fake-companion");
    companion.secondary = true;
    let config = Config {
        servers: vec![fake("fake-primary"), companion],
        ..Config::builtin()
    };
    let mut proxy = Proxy::start_with(
        config,
        |root| {
            write(root, "fake.toml", "");
            write(root, "a.fake", "fine\nan error here\n");
        },
        acp_lsp::mcp::tools::READY_WAIT,
    )
    .await;
    proxy.initialize(false).await;
    let entry = proxy.new_session("t1").await;
    let client = connect(&entry).await;
    let (answer, structured) = success(
        "diagnostics",
        &call(&client, "diagnostics", json!({"files": ["a.fake"]})).await,
    );
    assert!(
        answer.contains("a.fake:2:1: error [fake-primary]: an error here"),
        "{answer}"
    );
    assert!(
        answer.contains("a.fake:2:1: error [fake-companion]: an error here"),
        "{answer}"
    );
    assert_eq!(
        structured["diagnostics"].as_array().map(Vec::len),
        Some(2),
        "{structured}"
    );
    assert!(answer.ends_with("left out: nothing\n"), "{answer}");
    client.cancel().await.expect("close the MCP client");
    proxy.registry.shutdown().await;
}
