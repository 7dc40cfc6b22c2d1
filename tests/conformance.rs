//! The conformance suite of fixtures/: every recording replays against
//! acp-lsp with stand-in servers (no language server needed); the runner
//! catches a gate broken on purpose, with a readable diff; and the normative
//! half passes against acp-lsp run as a separate process with real servers.
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]

use acp_lsp::conformance::replay::{replay, ReplayOptions};
use acp_lsp::conformance::suite::{normative_all, replay_all, select};
use acp_lsp::conformance::{report, Outcome, Scenario, STEP_TIMEOUT};
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn acp_lsp() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_acp-lsp"))
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn scenario(name: &str) -> Scenario {
    Scenario::load(&fixtures().join(name)).unwrap()
}

/// An `acp-lsp` stand-in that runs the real one, except that the agent's
/// bridge (or a server's) goes through `filter` (a shell pipeline stage).
/// This is how a test breaks acp-lsp on purpose without changing it.
fn shim(dir: &Path, agent_filter: Option<&str>, server_filter: Option<&str>) -> PathBuf {
    let path = dir.join("acp-lsp-shim");
    let agent = agent_filter.unwrap_or("cat");
    let server = server_filter.unwrap_or("cat");
    let script = format!(
        "#!/bin/sh\n\
         REAL='{real}'\n\
         export PATH='{path}'\n\
         if [ \"$1\" = conformance ] && [ \"$2\" = bridge ]; then\n\
           case \"$3\" in\n\
             */agent.sock) {agent} | \"$REAL\" \"$@\" ;;\n\
             *) {server} | \"$REAL\" \"$@\" ;;\n\
           esac\n\
         else\n\
           exec \"$REAL\" \"$@\"\n\
         fi\n",
        real = acp_lsp().display(),
        // A replay runs acp-lsp with an empty PATH; the filters need theirs.
        path = std::env::var("PATH").unwrap_or_default()
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn assert_all_passed(outcomes: &[Outcome]) {
    assert!(
        outcomes.iter().all(|o| o.passed),
        "{}",
        report::table(outcomes)
    );
}

#[tokio::test]
async fn every_fixture_replays_against_acp_lsp_without_language_servers() {
    let scenarios = select(&fixtures(), &[]).unwrap();
    assert!(scenarios.len() >= 17, "{} scenarios", scenarios.len());
    for s in &scenarios {
        assert!(s.is_recorded(), "{} is a script, not a recording", s.name);
    }
    // The stand-ins are the only servers: the replay runs acp-lsp with an
    // empty PATH, so no real server could start.
    let outcomes = replay_all(&scenarios, &acp_lsp(), |_| {}).await.unwrap();
    assert_all_passed(&outcomes);
    let lines: usize = outcomes.iter().map(|o| o.checked).sum();
    assert!(lines > 1000, "only {lines} lines replayed");
}

#[tokio::test]
async fn a_changed_error_code_fails_a_named_scenario_with_a_diff() {
    let temp = tempfile::tempdir().unwrap();
    // What the agent receives: every -32602 becomes -32601, the code
    // acp-lsp gave refused methods before the RFD said -32602.
    let broken = shim(
        temp.path(),
        Some("sed -u 's/\"code\":-32602,/\"code\":-32601,/g'"),
        None,
    );
    let options = ReplayOptions {
        acp_lsp: broken,
        step_timeout: STEP_TIMEOUT,
    };
    let outcome = replay(&scenario("refused-categories"), &options)
        .await
        .unwrap();
    assert!(!outcome.passed, "{outcome}");
    let failure = outcome.failure.as_ref().unwrap();
    let text = outcome.to_string();
    assert!(
        text.starts_with("refused-categories: FAIL at session.jsonl:"),
        "{text}"
    );
    assert!(failure.message.contains("$.error.code"), "{text}");
    let diff = failure.diff.as_deref().unwrap();
    assert!(diff.contains("-    \"code\": -32602"), "{diff}");
    assert!(diff.contains("+    \"code\": -32601"), "{diff}");

    // The same shim passing everything through changes nothing: the failure
    // above is the sabotage, not the shim.
    let honest = shim(temp.path(), None, None);
    let options = ReplayOptions {
        acp_lsp: honest,
        step_timeout: STEP_TIMEOUT,
    };
    let outcome = replay(&scenario("refused-categories"), &options)
        .await
        .unwrap();
    assert!(outcome.passed, "{outcome}");
}

/// Frames from acp-lsp to the server pass through, with one
/// `textDocument/didOpen` the recording never had, after `initialized`.
const INJECT_DID_OPEN: &str = r#"python3 -u -c '
import sys
out = sys.stdout.buffer
inp = sys.stdin.buffer
def frame(body):
    out.write(b"Content-Length: %d\r\n\r\n" % len(body) + body); out.flush()
while True:
    header = b""
    while not header.endswith(b"\r\n\r\n"):
        c = inp.read(1)
        if not c: sys.exit(0)
        header += c
    n = int([l for l in header.split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1])
    body = inp.read(n)
    frame(body)
    if b"\"initialized\"" in body:
        frame(b"{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didOpen\",\"params\":{\"textDocument\":{\"uri\":\"file:///x.py\",\"languageId\":\"python\",\"version\":1,\"text\":\"\"}}}")
'"#;

#[tokio::test]
async fn a_forwarded_did_open_fails_a_named_scenario_with_a_diff() {
    let temp = tempfile::tempdir().unwrap();
    let broken = shim(temp.path(), None, Some(INJECT_DID_OPEN));
    let options = ReplayOptions {
        acp_lsp: broken,
        step_timeout: STEP_TIMEOUT,
    };
    let outcome = replay(&scenario("python-navigation"), &options)
        .await
        .unwrap();
    assert!(!outcome.passed, "{outcome}");
    let text = outcome.to_string();
    assert!(text.starts_with("python-navigation: FAIL"), "{text}");
    assert!(
        text.contains("a message no remaining line of the recording has"),
        "{text}"
    );
    assert!(text.contains("textDocument/didOpen"), "{text}");
    assert!(text.contains("file:///x.py"), "{text}");
}

#[tokio::test]
async fn a_script_is_refused_until_it_is_recorded() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("only-a-script");
    std::fs::create_dir_all(dir.join("workspace")).unwrap();
    std::fs::write(
        dir.join("session.jsonl"),
        "{\"dir\":\"editor→proxy\",\"msg\":{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}}\n",
    )
    .unwrap();
    let scenarios = select(temp.path(), &[]).unwrap();
    let err = replay_all(&scenarios, &acp_lsp(), |_| {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("record it first"), "{err}");
    assert!(select(temp.path(), &["missing".to_string()]).is_err());
}

/// The normative half, against acp-lsp as a separate process with the real
/// language servers. Run through the shim with an explicit command, so the
/// runner treats it as any other implementation: serverIds come only from
/// its `lsp/servers` answers.
#[tokio::test]
async fn the_normative_suite_passes_against_acp_lsp_as_another_implementation() {
    let temp = tempfile::tempdir().unwrap();
    let honest = shim(temp.path(), None, None);
    let names: Vec<String> = [
        "handshake-v1",
        "handshake-v2",
        "refused-categories",
        "uri-outside-roots",
        "unknown-and-foreign-server",
        "write-text-file-then-query",
        "c-navigation",
        "rust-navigation",
        "servers-starting-ready",
        "cancellation",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let scenarios = select(&fixtures(), &names).unwrap();
    let command: Vec<OsString> = vec![
        honest.clone().into(),
        "proxy".into(),
        "--".into(),
        "{agent}".into(),
    ];
    let outcomes = normative_all(&scenarios, &honest, command, |_| {})
        .await
        .unwrap();
    assert_eq!(outcomes.len(), names.len(), "{}", report::table(&outcomes));
    assert_all_passed(&outcomes);

    // Every MUST and SHOULD of the RFD is checked, and met: the client-side
    // ones by these scenarios, the two only the servers' side shows by the
    // replay of the recordings.
    let replayed = replay_all(
        &select(
            &fixtures(),
            &["servers-starting-ready".into(), "rust-navigation".into()],
        )
        .unwrap(),
        &acp_lsp(),
        |_| {},
    )
    .await
    .unwrap();
    assert_all_passed(&replayed);
    let all: Vec<Outcome> = outcomes.iter().chain(&replayed).cloned().collect();
    let checklist = report::checklist(&all);
    let table = acp_lsp::conformance::rfd::checklist_table(&checklist);
    for row in &checklist {
        assert_eq!(row.verdict, "pass", "{} is not met:\n{table}", row.id);
    }
    assert!(table.contains("MUST   server-not-running"), "{table}");

    // Broken on purpose, the same implementation fails the scenario about it,
    // and the checklist names the requirement.
    let broken = shim(
        temp.path(),
        Some("sed -u 's/\"reason\":\"method_not_forwarded\"/\"reason\":\"lifecycle_method\"/g'"),
        None,
    );
    let scenarios = select(&fixtures(), &["refused-categories".to_string()]).unwrap();
    let command: Vec<OsString> = vec![
        broken.clone().into(),
        "proxy".into(),
        "--".into(),
        "{agent}".into(),
    ];
    let outcomes = normative_all(&scenarios, &broken, command, |_| {})
        .await
        .unwrap();
    assert!(!outcomes[0].passed, "{}", report::table(&outcomes));
    let text = outcomes[0].to_string();
    assert!(text.contains("method_not_forwarded"), "{text}");
    let checklist = report::checklist(&outcomes);
    let lifecycle = checklist
        .iter()
        .find(|r| r.id == "refuse-lifecycle")
        .unwrap();
    assert_eq!(lifecycle.verdict, "fail", "{}", report::table(&outcomes));
}

#[test]
fn the_cli_reports_every_normative_scenario_as_json() {
    let temp = tempfile::tempdir().unwrap();
    let report_path = temp.path().join("report.json");
    let out = std::process::Command::new(acp_lsp())
        .args([
            "conformance",
            "--format",
            "json",
            "--scenario",
            "handshake-v1",
            "--scenario",
            "method-spellings",
            "--report",
        ])
        .arg(&report_path)
        .arg("--fixtures")
        .arg(fixtures())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    assert_eq!(printed, written);
    let names: Vec<&str> = printed
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["handshake-v1", "method-spellings"]);
    assert!(printed
        .as_array()
        .unwrap()
        .iter()
        .all(|o| o["passed"] == true));
}

/// An editor host (here: an editor on stdin/stdout of `acp-lsp proxy`, which
/// implements the `lsp` capability) launches `acp-lsp conformance agent` as
/// its agent; the verdict comes back in the reply to a prompt and in the report.
#[tokio::test]
async fn an_editor_host_runs_the_suite_with_the_conformance_agent() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().canonicalize().unwrap().join("ws");
    acp_lsp::conformance::fixture::copy_workspace(
        &fixtures().join("python-navigation/workspace"),
        &root,
        &root.to_string_lossy(),
    )
    .unwrap();
    let report_path = temp.path().join("report.json");
    let mut child = tokio::process::Command::new(acp_lsp())
        .arg("proxy")
        .arg("--")
        .arg(acp_lsp())
        .args(["conformance", "agent", "--fixtures"])
        .arg(fixtures())
        .args([
            "--scenario",
            "python-navigation",
            "--scenario",
            "refused-categories",
            "--scenario",
            "write-text-file-then-query",
            "--scenario",
            "v2-batch",
            "--scenario",
            "rust-navigation",
            "--report",
        ])
        .arg(&report_path)
        .current_dir(&root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let send = |v: serde_json::Value| format!("{v}\n");
    stdin
        .write_all(send(serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}}}})).as_bytes())
        .await
        .unwrap();
    stdin
        .write_all(
            send(
                serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
            "params": {"cwd": root, "mcpServers": []}}),
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    stdin
        .write_all(send(serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
            "params": {"sessionId": "acp-lsp-conformance", "prompt": [{"type": "text", "text": "run"}]}})).as_bytes())
        .await
        .unwrap();
    let mut verdict = String::new();
    loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the host's agent ended early");
        let msg: serde_json::Value = serde_json::from_str(&line).unwrap();
        // The editor's side of the host: the agent's writes land in its buffers.
        if msg["method"] == "fs/write_text_file" {
            let reply = serde_json::json!({"jsonrpc": "2.0", "id": msg["id"], "result": null});
            stdin.write_all(send(reply).as_bytes()).await.unwrap();
        } else if msg["method"] == "session/update" {
            verdict.push_str(
                msg["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap_or(""),
            );
        } else if msg["id"] == 2 {
            assert_eq!(msg["result"]["stopReason"], "end_turn", "{line}");
            break;
        }
    }
    drop(stdin);
    let status = child.wait().await.unwrap();
    assert!(verdict.contains("4 of 4 scenarios passed"), "{verdict}");
    // Scenarios that need what a host cannot give are listed, not failed.
    assert!(verdict.contains("not run: rust-navigation"), "{verdict}");
    assert!(status.success(), "{verdict}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let names: Vec<&str> = report
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["scenario"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"write-text-file-then-query"), "{names:?}");
}

/// Build output and caches a session left in a fixture's workspace (here
/// rust-analyzer's `target/` and `Cargo.lock`, clangd's `.cache/`) do not
/// throw the replay: the copy leaves out what the fixture does not own.
#[tokio::test]
async fn stray_build_output_in_a_fixture_does_not_throw_the_replay() {
    let temp = tempfile::tempdir().unwrap();
    let copy = temp.path().join("rename-apply");
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .arg(fixtures().join("rename-apply"))
        .arg(&copy)
        .status()
        .unwrap();
    assert!(copied.success());
    let workspace = copy.join("workspace");
    std::fs::create_dir_all(workspace.join("target/debug")).unwrap();
    std::fs::write(workspace.join("target/debug/stale"), "build output").unwrap();
    std::fs::write(workspace.join("Cargo.lock"), "# written by cargo\n").unwrap();
    std::fs::create_dir_all(workspace.join(".cache/clangd/index")).unwrap();
    std::fs::write(workspace.join(".cache/clangd/index/x.idx"), "index").unwrap();
    let options = ReplayOptions {
        acp_lsp: acp_lsp(),
        step_timeout: STEP_TIMEOUT,
    };
    let outcome = replay(&Scenario::load(&copy).unwrap(), &options)
        .await
        .unwrap();
    assert!(outcome.passed, "{outcome}");
}
