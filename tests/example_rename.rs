//! The README's "try it" example end to end, through the real proxy and rust-analyzer.
//!
//! editor = `examples/try-rename.rs` ⇄ `acp-lsp proxy --record …` ⇄
//! `examples/rename-agent.rs`, both peers on the official ACP Rust SDK.
//!
//! Checks that the files on disk are exactly what the server's
//! `WorkspaceEdit` said (replayed here with the library's planner, and
//! against the checked-in `examples/sample-project-expected/`), and that the
//! agent wrote them through the relay: every change arrived as an
//! `fs/write_text_file` the proxy forwarded to the editor and the editor
//! served, and the `lsp/*` calls never reached the editor.
//!
//! Needs rust-analyzer on `PATH`; without it the test fails (never skips).

#[path = "../examples/support/cargo_build.rs"]
mod cargo_build;

use acp_lsp::edit::{plan, Decisions, Entry, FileOperation, PlanContext, PositionEncoding};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Upper bound for the editor's whole run (proxy, agent, rust-analyzer);
/// above the editor's own session timeout, so that one reports first.
const RUN_TIMEOUT: Duration = Duration::from_secs(240);

/// What the editor's default prompt (`examples/try-rename.rs`) renames in.
const RENAMED_FILES: [&str; 3] = ["src/greet.rs", "src/lib.rs", "src/main.rs"];

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// Files under `root` by relative path, without the directories cargo and
/// rust-analyzer generate.
fn tree(root: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let entry = entry.expect("dir entry");
            let path = entry.path();
            if entry.file_type().expect("file type").is_dir() {
                if entry.file_name() != "target" {
                    walk(root, &path, out);
                }
            } else {
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
                out.insert(path.strip_prefix(root).expect("under root").into(), text);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

struct Run {
    stdout: String,
    stderr: String,
    workdir: PathBuf,
    report: Value,
    record: Vec<(String, Value)>,
    _tmp: tempfile::TempDir,
}

/// Runs the example editor with the proxy cargo built for this test and the
/// example agent on the sample project and the default prompt, killing it
/// after `RUN_TIMEOUT`.
fn run_example() -> Run {
    run_example_on(&examples_dir().join("sample-project"), None)
}

/// [`run_example`] on a copy of `project`, with `prompt` instead of the default.
fn run_example_on(project: &Path, prompt: Option<&str>) -> Run {
    run_example_in(project, prompt, Topology::Direct)
}

/// Where the example editor puts acp-lsp.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Topology {
    /// `acp-lsp proxy -- rename-agent`.
    Direct,
    /// One proxy of a chain under the real conductor, with a second proxy
    /// of the tests' own (`tests/peers/chain-proxy.rs`), before the agent.
    Chain,
}

/// [`run_example_on`] with acp-lsp placed as `topology` says.
fn run_example_in(project: &Path, prompt: Option<&str>, topology: Topology) -> Run {
    let built = cargo_build::build(&[], &["try-rename", "rename-agent", "chain-proxy"], false)
        .expect("building the examples");
    let tmp = tempfile::tempdir().expect("tempdir");
    let workdir = tmp.path().join("project");
    let (report, record) = (
        tmp.path().join("report.json"),
        tmp.path().join("record.jsonl"),
    );
    let (out_path, err_path) = (tmp.path().join("stdout"), tmp.path().join("stderr"));
    let mut command = Command::new(&built["try-rename"]);
    command.arg("--project").arg(project);
    if let Some(prompt) = prompt {
        command.arg("--prompt").arg(prompt);
    }
    if topology == Topology::Chain {
        let conductor = acp_lsp::lsp::detect::find_on_path("agent-client-protocol-conductor")
            .expect(
                "agent-client-protocol-conductor is not on PATH; install it with \
                 `cargo install --locked agent-client-protocol-conductor` (or run .ci/run)",
            );
        command
            .arg("--conductor")
            .arg(conductor)
            .arg("--chain-proxy")
            .arg(&built["chain-proxy"]);
    }
    let mut child = command
        .arg("--acp-lsp")
        .arg(env!("CARGO_BIN_EXE_acp-lsp"))
        .arg("--agent")
        .arg(&built["rename-agent"])
        .arg("--workdir")
        .arg(&workdir)
        .arg("--report")
        .arg(&report)
        .arg("--record")
        .arg(&record)
        .stdin(Stdio::null())
        // Files, not pipes: nothing to drain while waiting.
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("starting the example editor");
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    match status {
        None => panic!(
            "the example did not finish within {RUN_TIMEOUT:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        ),
        Some(s) if !s.success() => {
            panic!("the example failed ({s})\nstdout:\n{stdout}\nstderr:\n{stderr}")
        }
        Some(_) => {}
    }
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report written"))
            .expect("report is JSON");
    let record = std::fs::read_to_string(&record)
        .expect("record written")
        .lines()
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).expect("record line is JSON");
            Some((v["dir"].as_str()?.to_string(), v.get("msg")?.clone()))
        })
        .collect();
    let workdir = workdir.canonicalize().expect("workdir");
    Run {
        stdout,
        stderr,
        workdir,
        report,
        record,
        _tmp: tmp,
    }
}

fn messages<'a>(
    record: &'a [(String, Value)],
    dir: &'a str,
    method: &'a str,
) -> impl Iterator<Item = &'a Value> + 'a {
    record
        .iter()
        .filter(move |(d, m)| d == dir && m["method"] == method)
        .map(|(_, m)| m)
}

/// The `result` of the response to request `request` in direction `dir`.
fn response<'a>(record: &'a [(String, Value)], dir: &str, request: &Value) -> &'a Value {
    record
        .iter()
        .find(|(d, m)| d == dir && m["id"] == request["id"] && m.get("method").is_none())
        .map(|(_, m)| &m["result"])
        .unwrap_or_else(|| panic!("no response ({dir}) to {request}"))
}

#[test]
fn the_example_editor_and_agent_rename_through_the_proxy() {
    let run = run_example();
    let context = format!("stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let sample = examples_dir().join("sample-project");
    let original = tree(&sample);
    let after = tree(&run.workdir);

    // The agent asked the proxy, which answered without the editor.
    let servers_request = messages(&run.record, "agent→proxy", "lsp/servers")
        .next()
        .unwrap_or_else(|| panic!("the agent never sent lsp/servers\n{context}"));
    let servers = response(&run.record, "proxy→agent", servers_request);
    let rename_request = messages(&run.record, "agent→proxy", "lsp/request")
        .find(|m| m["params"]["method"] == "textDocument/rename")
        .unwrap_or_else(|| panic!("the agent never asked for a rename\n{context}"));
    let server_id = &rename_request["params"]["serverId"];
    let server = servers["servers"]
        .as_array()
        .and_then(|list| list.iter().find(|s| &s["serverId"] == server_id))
        .unwrap_or_else(|| panic!("{server_id} is not in {servers}"));
    assert_eq!(server["name"], "rust-analyzer", "{context}");
    for method in ["lsp/servers", "lsp/request"] {
        assert_eq!(
            messages(&run.record, "proxy→editor", method).count(),
            0,
            "{method} reached the editor"
        );
    }

    // Replaying the server's edit on the original files gives the disk.
    let edit = &response(&run.record, "proxy→agent", rename_request)["lspResult"];
    let encoding = server["_meta"]["acp-lsp"]["positionEncoding"]
        .as_str()
        .and_then(PositionEncoding::from_lsp)
        .expect("positionEncoding");
    let in_workdir = |p: &Path| p.strip_prefix(&run.workdir).ok().map(Path::to_path_buf);
    let current = |p: &Path| {
        in_workdir(p)
            .and_then(|rel| original.get(&rel))
            .map(Entry::text)
    };
    let writable = |p: &Path| in_workdir(p).is_some();
    let planned = plan(
        edit,
        &PlanContext {
            encoding,
            current: &current,
            writable: &writable,
            decisions: &Decisions::default(),
        },
    )
    .unwrap_or_else(|e| panic!("the server's edit does not plan: {e}\n{edit}"));
    let mut replayed = original.clone();
    for op in planned.operations {
        let FileOperation::Write { path, new, .. } = op else {
            panic!("a rename of a function should only edit text: {op:?}");
        };
        replayed.insert(in_workdir(&path).expect("in workdir"), new);
    }
    assert_eq!(
        after, replayed,
        "the disk is not what the server's edit said\n{context}"
    );

    // … and what the checked-in expectation says.
    let expected_dir = examples_dir().join("sample-project-expected");
    let mut expected = original.clone();
    expected.extend(tree(&expected_dir));
    assert_eq!(
        after,
        expected,
        "compare with {}\n{context}",
        expected_dir.display()
    );

    // Every change went through fs/write_text_file: forwarded by the
    // proxy, served by the editor, once per file, with the final text.
    let changed: BTreeSet<PathBuf> = original
        .keys()
        .filter(|k| original.get(*k) != after.get(*k))
        .cloned()
        .collect();
    let expected_changed: BTreeSet<PathBuf> = RENAMED_FILES.iter().map(PathBuf::from).collect();
    assert_eq!(changed, expected_changed, "{context}");
    let mut forwarded = BTreeMap::new();
    for write in messages(&run.record, "proxy→editor", "fs/write_text_file") {
        let path = Path::new(write["params"]["path"].as_str().expect("path"));
        let rel = in_workdir(path).expect("a write inside the project");
        let content = write["params"]["content"].as_str().expect("content");
        assert!(
            forwarded.insert(rel, content.to_string()).is_none(),
            "{} written twice",
            path.display()
        );
    }
    let changed_texts: BTreeMap<PathBuf, String> = changed
        .iter()
        .map(|k| (k.clone(), after[k].clone()))
        .collect();
    assert_eq!(forwarded, changed_texts, "forwarded writes vs the disk");
    let served: BTreeSet<PathBuf> = run.report["writes"]
        .as_array()
        .expect("writes")
        .iter()
        .map(|w| PathBuf::from(w["path"].as_str().expect("path")))
        .collect();
    assert_eq!(served, expected_changed, "writes the editor served");
    assert_eq!(run.report["stopReason"], "end_turn", "{context}");

    // What a user sees: the agent's messages, the served writes, the diff.
    for needle in [
        "agent │ Using rust-analyzer",
        "editor │ served fs/write_text_file src/main.rs",
        "agent │ Renamed to `welcome` in 3 file(s).",
        "stop reason: end_turn",
        "+++ b/src/greet.rs",
        "+pub fn welcome(name: &str) -> String {",
        "+    println!(\"👋 {}\", sample::welcome(\"wörld\"));",
    ] {
        assert!(run.stdout.contains(needle), "missing {needle:?}\n{context}");
    }
}

/// Every `line:column` (1-based, in characters) where `word` stands as a
/// whole identifier in `text`, outside comment lines (servers rename code,
/// not prose).
fn word_positions(text: &str, word: &str) -> Vec<(usize, usize)> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") || code.starts_with('#') {
            continue;
        }
        for (at, _) in line.match_indices(word) {
            let before = line[..at].chars().next_back();
            let after = line[at + word.len()..].chars().next();
            if !before.is_some_and(ident) && !after.is_some_and(ident) {
                found.push((n + 1, line[..at].chars().count() + 1));
            }
        }
    }
    found
}

/// The agent's line starting with `prefix`, split into its locations.
fn reported_locations(run: &Run, prefix: &str) -> BTreeSet<String> {
    let messages = run.report["messages"].as_array().expect("messages");
    let line = messages
        .iter()
        .filter_map(Value::as_str)
        .flat_map(str::lines)
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line\nstdout:\n{}", run.stdout));
    line[prefix.len()..]
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// An agent that reads only the RFD's fields (`examples/rename-agent.rs`:
/// `workspacePath`, `fileExtensions`, `state` polled until `running`,
/// `availableMethods`, `capabilities`) asks for a definition, references and a
/// rename through the real proxy and `server`, and gets right answers.
fn rfd_agent_navigates_and_renames(
    project: &str,
    definition_file: &str,
    use_file: &str,
    old: &str,
    new: &str,
    server: &str,
) {
    rfd_agent_navigates_and_renames_in(
        project,
        definition_file,
        use_file,
        old,
        new,
        server,
        Topology::Direct,
    );
}

/// [`rfd_agent_navigates_and_renames`] with acp-lsp placed as `topology` says.
fn rfd_agent_navigates_and_renames_in(
    project: &str,
    definition_file: &str,
    use_file: &str,
    old: &str,
    new: &str,
    server: &str,
    topology: Topology,
) {
    let project = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/projects")
        .join(project);
    let original = tree(&project);
    let text = |file: &str| &original[Path::new(file)];
    let (def_line, def_column) = word_positions(text(definition_file), old)[0];
    let (use_line, use_column) = *word_positions(text(use_file), old)
        .last()
        .expect("a use of the symbol");
    let prompt = format!(
        "definition {use_file}:{use_line}:{use_column}; \
         references {definition_file}:{def_line}:{def_column}; \
         rename {definition_file}:{def_line}:{def_column} {new}"
    );
    let run = run_example_in(&project, Some(&prompt), topology);
    let context = format!("stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert_eq!(run.report["stopReason"], "end_turn", "{context}");
    assert!(
        run.stdout
            .contains(&format!("agent │ Using {server} (state running")),
        "{context}"
    );

    // The definition is where the symbol is defined.
    let definition = reported_locations(&run, "definition: ");
    assert_eq!(
        definition,
        BTreeSet::from([format!("{definition_file}:{def_line}:{def_column}")]),
        "{context}"
    );
    // Every place the symbol is called is a reference.
    let references = reported_locations(&run, "references: ");
    for (file, text) in &original {
        for (line, column) in word_positions(text, old) {
            let rest = &text.lines().nth(line - 1).expect("line")[column - 1 + old.len()..];
            if rest.starts_with('(') || (line, column) == (def_line, def_column) {
                let at = format!("{}:{line}:{column}", file.display());
                assert!(
                    references.contains(&at),
                    "{at} missing from {references:?}\n{context}"
                );
            }
        }
    }
    // The rename left no use of the old name and put the new one everywhere.
    let after = tree(&run.workdir);
    for (file, before) in &original {
        let now = &after[file];
        assert!(
            word_positions(now, old).is_empty(),
            "{} still says {old}:\n{now}",
            file.display()
        );
        assert_eq!(
            word_positions(now, new).len(),
            word_positions(before, old).len(),
            "{}:\n{now}",
            file.display()
        );
    }
    // Nothing but the RFD's forms: no waitUntilReady, no _meta asked for.
    for request in messages(&run.record, "agent→proxy", "lsp/request") {
        let params = request["params"].as_object().expect("params");
        let mut keys: Vec<&str> = params.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["method", "params", "serverId", "sessionId"]);
    }
}

#[test]
fn an_agent_written_to_the_rfd_text_works_on_rust() {
    rfd_agent_navigates_and_renames(
        "rust-three-files",
        "src/geometry.rs",
        "src/stats.rs",
        "area",
        "surface",
        "rust-analyzer",
    );
}

#[test]
fn an_agent_written_to_the_rfd_text_works_on_python() {
    support_require_pyright();
    rfd_agent_navigates_and_renames(
        "python-project",
        "shapes/geometry.py",
        "shapes/report.py",
        "rect_area",
        "surface",
        "pyright",
    );
}

/// Issue 27, 1: a monorepo of separate projects, no marker at the top:
/// the agent, which polls `lsp/servers` until the server for its file is
/// `running`, reaches the nested project's server without any extension.
#[test]
fn an_agent_written_to_the_rfd_text_reaches_a_nested_project_of_a_monorepo() {
    support_require_pyright();
    rfd_agent_navigates_and_renames(
        "python-monorepo",
        "p2/shapes/geometry.py",
        "p2/shapes/report.py",
        "rect_area",
        "surface",
        "pyright",
    );
}

/// Issue 27, proxy chains: the same agent, with acp-lsp one proxy of a
/// chain under the real conductor, next to another proxy: `lsp/*` crosses
/// the conductor to acp-lsp's gate and back, `fs/*` on to the editor.
#[test]
fn an_agent_written_to_the_rfd_text_works_inside_a_proxy_chain() {
    support_require_pyright();
    rfd_agent_navigates_and_renames_in(
        "python-project",
        "shapes/geometry.py",
        "shapes/report.py",
        "rect_area",
        "surface",
        "pyright",
        Topology::Chain,
    );
}

/// Fails, never skips, without pyright.
fn support_require_pyright() {
    assert!(
        acp_lsp::lsp::detect::find_on_path("pyright-langserver").is_some(),
        "`pyright-langserver` is not on PATH; install it with `npm install -g pyright`"
    );
}
