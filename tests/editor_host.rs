//! `crates/acp-lsp-core/examples/editor-host.rs` end to end: an editor host that embeds only the
//! gate, over pyright it starts itself. This test is its agent (on the
//! example's stdin/stdout): it answers the host's `initialize` and
//! `session/new`, then asks `lsp/servers` and `lsp/request` and checks that
//! pyright's real answer comes back through the gate, and that the gate's
//! own refusals (not the host's) answer a method that is not forwarded.
//! Then the example hosts `acp-lsp conformance agent`, which plays the RFD's
//! normative scenarios for a Python workspace against it.

#[path = "../examples/support/cargo_build.rs"]
mod cargo_build;

use serde_json::{json, Value};
use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long any one message from the host may take (pyright's first answer
/// waits for its analysis of the workspace).
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the host may take to exit once its agent closes the connection.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the conformance agent may take to play its scenarios.
const VERDICT_TIMEOUT: Duration = Duration::from_secs(300);
/// The normative scenarios over the Python workspace that an editor host
/// with only the gate can pass: not `v2-batch` (the example reads no JSON
/// arrays) nor `write-text-file-then-query` (it serves no `fs/*`).
const SCENARIOS: &[&str] = &[
    "python-navigation",
    "refused-categories",
    "method-spellings",
    "uri-outside-roots",
    "cancellation",
    "handshake-v1",
    "handshake-v2",
];

struct Agent {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Agent {
    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").expect("writing to the host");
        self.stdin.flush().expect("flushing to the host");
    }

    fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(MESSAGE_TIMEOUT)
            .expect("a message from the host");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not JSON from the host ({e}): {line}"))
    }

    /// The response to request `id` (the host sends nothing else unasked).
    fn response(&self, id: &str) -> Value {
        let message = self.next();
        assert_eq!(message["id"], id, "the response to {id}: {message}");
        message
    }
}

fn start(root: &std::path::Path) -> Agent {
    let built = cargo_build::build_in_workspace(&[], &["editor-host"], false)
        .expect("building the example");
    let mut child = Command::new(&built["editor-host"])
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting examples/editor-host");
    let stdin = child.stdin.take().expect("its stdin");
    let stdout = child.stdout.take().expect("its stdout");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Agent {
        child,
        stdin,
        lines,
    }
}

#[test]
fn an_editor_host_answers_lsp_requests_from_its_own_pyright_through_the_gate() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(tmp.path()).expect("canonical tempdir");
    std::fs::write(
        root.join("greeting.py"),
        "def greet(name: str) -> str:\n    return 'hello ' + name\n",
    )
    .expect("writing greeting.py");
    std::fs::write(
        root.join("main.py"),
        "from greeting import greet\n\nprint(greet('world'))\n",
    )
    .expect("writing main.py");
    let main_uri = format!("file://{}/main.py", root.display());

    let mut agent = start(&root);

    // The host is the ACP client: initialize with the lsp capability, then a session.
    let initialize = agent.next();
    assert_eq!(initialize["method"], "initialize", "{initialize}");
    assert_eq!(
        initialize["params"]["clientCapabilities"]["lsp"],
        json!({}),
        "the host advertises lsp: {initialize}"
    );
    agent.send(json!({"jsonrpc": "2.0", "id": initialize["id"], "result": {
        "protocolVersion": 1, "agentCapabilities": {},
    }}));
    let new = agent.next();
    assert_eq!(new["method"], "session/new", "{new}");
    assert_eq!(new["params"]["cwd"], root.display().to_string(), "{new}");
    agent.send(json!({"jsonrpc": "2.0", "id": new["id"], "result": {"sessionId": "s-1"}}));

    agent.send(
        json!({"jsonrpc": "2.0", "id": "servers", "method": "lsp/servers",
        "params": {"sessionId": "s-1"}}),
    );
    let servers = agent.response("servers");
    let entry = &servers["result"]["servers"][0];
    assert_eq!(entry["state"], "running", "{servers}");
    assert_eq!(
        entry["workspacePath"],
        root.display().to_string(),
        "{servers}"
    );
    assert!(
        entry["capabilities"]["definitionProvider"].is_boolean()
            || entry["capabilities"]["definitionProvider"].is_object(),
        "pyright's own capabilities: {servers}"
    );
    let methods = servers["result"]["availableMethods"].to_string();
    assert!(methods.contains("textDocument/definition"), "{servers}");
    let server_id = entry["serverId"].clone();

    // `greet` in `print(greet('world'))`, line 2 (0-based), character 6.
    agent.send(json!({"jsonrpc": "2.0", "id": "definition", "method": "lsp/request",
        "params": {"sessionId": "s-1", "serverId": server_id, "method": "textDocument/definition",
            "params": {"textDocument": {"uri": main_uri}, "position": {"line": 2, "character": 6}}}}));
    let definition = agent.response("definition");
    let result = &definition["result"]["lspResult"];
    let first = result
        .as_array()
        .and_then(|a| a.first())
        .unwrap_or_else(|| panic!("a definition: {definition}"));
    let uri = first["uri"].as_str().or(first["targetUri"].as_str());
    assert_eq!(
        uri,
        Some(format!("file://{}/greeting.py", root.display()).as_str()),
        "{definition}"
    );
    let range = if first["range"].is_object() {
        &first["range"]
    } else {
        &first["targetSelectionRange"]
    };
    assert_eq!(range["start"]["line"], 0, "the def line: {definition}");

    // The gate refuses document sync before the host sees it.
    agent.send(
        json!({"jsonrpc": "2.0", "id": "refused", "method": "lsp/request",
        "params": {"sessionId": "s-1", "serverId": server_id, "method": "textDocument/didOpen",
            "params": {}}}),
    );
    let refused = agent.response("refused");
    assert_eq!(
        refused["error"]["data"]["reason"], "method_not_forwarded",
        "{refused}"
    );

    // Closing the connection ends the host (and its pyright).
    let Agent {
        mut child, stdin, ..
    } = agent;
    drop(stdin);
    let pid = child.id();
    let (tx, exited) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    match exited.recv_timeout(EXIT_TIMEOUT) {
        Ok(status) => {
            let status = status.expect("waiting for the host");
            assert!(status.success(), "the host exited with {status}");
        }
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("the host did not exit within {EXIT_TIMEOUT:?} of its agent going away");
        }
    }
}

#[test]
fn the_conformance_agent_passes_the_editor_host() {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixtures = manifest.join("fixtures");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("workspace");
    let copied = Command::new("cp")
        .arg("-r")
        .arg(fixtures.join("python-navigation/workspace"))
        .arg(&root)
        .status()
        .expect("cp");
    assert!(copied.success(), "copying the scenario's workspace");
    let report = tmp.path().join("report.json");
    let built = cargo_build::build_in_workspace(&[], &["editor-host"], false)
        .expect("building the example");
    let mut host = Command::new(&built["editor-host"]);
    host.arg(&root)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_acp-lsp"))
        .args(["conformance", "agent", "--fixtures"])
        .arg(&fixtures)
        .arg("--report")
        .arg(&report);
    for scenario in SCENARIOS {
        host.args(["--scenario", scenario]);
    }
    let mut host = host
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting examples/editor-host");
    // The agent's verdict table ends with "N of M scenarios passed" on the
    // stderr it shares with the host (its report is written before); the
    // agent then waits for its host.
    let stderr = host.stderr.take().expect("its stderr");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let verdict = loop {
        match lines.recv_timeout(VERDICT_TIMEOUT) {
            Ok(line) if line.contains("scenarios passed") => break line,
            Ok(line) => seen.push(line),
            Err(_) => {
                let _ = host.kill();
                panic!(
                    "no verdict within {VERDICT_TIMEOUT:?}:\n{}",
                    seen.join("\n")
                );
            }
        }
    };
    // Ending the host closes the agent's stdin (it exits) and pyright's.
    let _ = host.kill();
    let _ = host.wait();
    let outcomes: Value = serde_json::from_slice(&std::fs::read(&report).expect("the report"))
        .expect("the report is JSON");
    let outcomes = outcomes.as_array().expect("one outcome per scenario");
    let played: Vec<&str> = outcomes
        .iter()
        .filter_map(|o| o["scenario"].as_str())
        .collect();
    for scenario in SCENARIOS {
        assert!(
            played.contains(scenario),
            "{scenario} was played: {verdict}\n{}",
            seen.join("\n")
        );
    }
    for outcome in outcomes {
        assert_eq!(outcome["passed"], true, "{outcome}\n{}", seen.join("\n"));
        assert!(outcome["checked"].as_u64() > Some(0), "{outcome}");
    }
}
