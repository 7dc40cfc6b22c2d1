//! End to end with real ACP peers built on the official TypeScript SDK
//! (`@agentclientprotocol/sdk`, see `tests/peers/`), driving the real
//! `acp-lsp proxy` binary:
//!
//! editor = `tests/peers/client.mjs` ⇄ `acp-lsp proxy --mcp off --record …` ⇄ `tests/peers/agent.mjs`
//!
//! Both peers tap the raw bytes of their side of the wire (`PEER_TAP_CLIENT`,
//! `PEER_TAP_AGENT`), so the test can check that the proxy relays every line
//! byte for byte, except the two things it is meant to change: the
//! `initialize` request (gains `clientCapabilities.lsp` and
//! `clientCapabilities._meta.lsp`) and the agent's `lsp/servers` request (answered
//! by the proxy, never forwarded).
//!
//! Needs `node` and `npm ci --prefix tests/peers`; without them the tests fail
//! (they never skip).
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Upper bound for one whole client run (proxy and agent included).
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// Name of the file the agent reads and rewrites, inside the session cwd.
const FILE_NAME: &str = "hello.txt";
const ORIGINAL_CONTENT: &str = "original line — ünïcödé 🦀\n";
/// What `agent.mjs` appends when it writes the file back.
const AGENT_SUFFIX: &str = "edited by the agent ✅\n";

/// Every spelling of the LSP methods the proxy answers itself.
const LSP_METHODS: [&str; 6] = [
    "lsp/servers",
    "_lsp/servers",
    "_zed.dev/lsp/servers",
    "lsp/request",
    "_lsp/request",
    "_zed.dev/lsp/request",
];

/// The `dir` values of `--record` lines; all four must appear.
const RECORD_DIRS: [&str; 4] = ["editor→proxy", "proxy→agent", "agent→proxy", "proxy→editor"];

/// Set to run the scenarios against another build of the binary (e.g. a
/// release build); defaults to the one cargo built for this test.
const BIN_OVERRIDE_ENV: &str = "E2E_ACP_LSP_BIN";

fn acp_lsp_bin() -> String {
    std::env::var(BIN_OVERRIDE_ENV).unwrap_or_else(|_| env!("CARGO_BIN_EXE_acp-lsp").to_owned())
}

const NPM_HINT: &str = "run `npm ci --prefix tests/peers` (needs node ≥ 20 and npm)";

fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("peers")
}

/// Fails (never skips) when the JS peers cannot run.
fn require_node_peers() {
    match Command::new("node").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "`node --version` failed ({}): {}\nThe e2e_sdk tests need Node.js: {NPM_HINT}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("cannot run `node` ({e}). The e2e_sdk tests need Node.js: {NPM_HINT}"),
    }
    let sdk = peers_dir().join("node_modules/@agentclientprotocol/sdk/package.json");
    assert!(
        sdk.is_file(),
        "{} is missing: the SDK peers are not installed; {NPM_HINT}",
        sdk.display()
    );
}

#[derive(Debug)]
struct TapLine {
    dir: String,
    line: String,
}

fn read_tap(path: &Path, who: &str) -> Vec<TapLine> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{who} tap {} not written ({e}); for the agent this means the proxy did not pass \
             PEER_TAP_AGENT through to it or never started it",
            path.display()
        )
    });
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("tap line is JSON");
            assert!(
                v.get("unterminated").is_none(),
                "{who} saw a line without a trailing newline: {}",
                short(v["line"].as_str().unwrap_or_default())
            );
            TapLine {
                dir: v["dir"].as_str().expect("tap dir").to_owned(),
                line: v["line"].as_str().expect("tap line").to_owned(),
            }
        })
        .collect()
}

fn lines(tap: &[TapLine], dir: &str) -> Vec<String> {
    tap.iter()
        .filter(|t| t.dir == dir)
        .map(|t| t.line.clone())
        .collect()
}

fn parse(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {}", short(line)))
}

fn method(line: &str) -> Option<String> {
    parse(line)
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn short(s: &str) -> String {
    if s.len() <= 400 {
        s.to_owned()
    } else {
        let mut end = 400;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}… ({} bytes)", &s[..end], s.len())
    }
}

/// Exact, ordered, byte-for-byte equality of two line sequences, with a useful
/// message at the first difference.
fn assert_same_lines(what: &str, expected: &[String], actual: &[String]) {
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        assert!(
            e == a,
            "{what}: line {i} differs\n  expected ({} bytes): {}\n  actual   ({} bytes): {}",
            e.len(),
            short(e),
            a.len(),
            short(a)
        );
    }
    assert_eq!(
        expected.len(),
        actual.len(),
        "{what}: {} lines expected, {} seen; extra: {:?}",
        expected.len(),
        actual.len(),
        if expected.len() > actual.len() {
            expected[actual.len()..]
                .iter()
                .map(|l| short(l))
                .collect::<Vec<_>>()
        } else {
            actual[expected.len()..]
                .iter()
                .map(|l| short(l))
                .collect::<Vec<_>>()
        }
    );
}

struct Run {
    /// The client's one-line JSON summary.
    out: Value,
    client_tap: Vec<TapLine>,
    agent_tap: Vec<TapLine>,
    workdir: PathBuf,
    /// Everything the client, proxy and agent wrote to stderr.
    stderr: String,
    _tmp: tempfile::TempDir,
}

/// Runs `node client.mjs <proxy> <workdir> agent.mjs` (or `--direct`), with a
/// timeout; returns what the client printed and both taps.
fn run_peers(proxy: Option<&str>, env: &[(&str, &str)]) -> Run {
    require_node_peers();
    let tmp = tempfile::tempdir().expect("tempdir");
    let workdir = tmp.path().join("ws");
    std::fs::create_dir(&workdir).unwrap();
    std::fs::write(workdir.join(FILE_NAME), ORIGINAL_CONTENT).unwrap();
    let client_tap_path = tmp.path().join("tap-client.jsonl");
    let agent_tap_path = tmp.path().join("tap-agent.jsonl");

    let peers = peers_dir();
    let mut cmd = Command::new("node");
    cmd.arg(peers.join("client.mjs"))
        .arg(proxy.unwrap_or("--direct"))
        .arg(&workdir)
        .arg(peers.join("agent.mjs"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PEER_TAP_CLIENT", &client_tap_path)
        .env("PEER_TAP_AGENT", &agent_tap_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Own process group, so a timeout can kill client, proxy and agent.
        .process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn node client.mjs");
    let pgid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_reader = thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).map(|_| s)
    });
    let err_reader = thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        String::from_utf8_lossy(&b).into_owned()
    });

    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    // Whatever is left of the group (nothing, normally) goes now, so that the
    // pipe readers see EOF.
    // SAFETY: plain kill(2) on the process group we created.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    if status.is_none() {
        let _ = child.wait();
    }
    let stdout = out_reader.join().unwrap().unwrap_or_default();
    let stderr = err_reader.join().unwrap();
    let Some(status) = status else {
        panic!(
            "client.mjs did not finish within {RUN_TIMEOUT:?}\n--- stdout ---\n{}\n--- stderr ---\n{stderr}",
            short(&stdout)
        );
    };
    let out: Value = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "client.mjs ({status}) printed no JSON summary\n--- stdout ---\n{}\n--- stderr ---\n{stderr}",
                short(&stdout)
            )
        });
    if !(status.success() && out["error"].is_null()) {
        let mut summary = out.clone();
        summary["updates"] = json!(format!(
            "<{} updates>",
            out["updates"].as_array().map_or(0, Vec::len)
        ));
        panic!(
            "client.mjs failed ({status}): {}\nchild (proxy or agent) exit code {}, signal {}, timed out {}\n\
             --- client summary ---\n{}\n--- stderr ---\n{stderr}",
            out["error"].as_str().unwrap_or_default(),
            out["childExitCode"],
            out["childSignal"],
            out["childExitTimedOut"],
            short(&summary.to_string())
        );
    }
    Run {
        client_tap: read_tap(&client_tap_path, "client"),
        agent_tap: read_tap(&agent_tap_path, "agent"),
        out,
        workdir,
        stderr,
        _tmp: tmp,
    }
}

/// Checks that hold with or without the proxy: the prompt turn, the
/// permission round trip, the fs calls, the streamed updates.
fn check_turn(run: &Run) {
    let out = &run.out;
    let ctx = format!("\n--- stderr ---\n{}", run.stderr);
    assert_eq!(out["stopReason"], "end_turn", "stopReason{ctx}");
    assert_eq!(
        out["initializeResponse"]["protocolVersion"], 1,
        "initialize answer{ctx}"
    );
    let report = &out["agentReport"];
    assert!(report.is_object(), "no agent report{ctx}");

    // Permission request: reached the client, its answer reached the agent.
    let perms = out["permissionRequests"].as_array().unwrap();
    assert_eq!(
        perms.len(),
        1,
        "permission requests seen by the client: {perms:?}"
    );
    assert_eq!(perms[0]["toolCall"]["toolCallId"], "call-1");
    assert_eq!(
        report["permissionOutcome"],
        json!({"outcome": "selected", "optionId": "allow-once"}),
        "permission outcome seen by the agent: {report}"
    );

    // fs/read_text_file and fs/write_text_file went through, for real.
    let file = run.workdir.join(FILE_NAME);
    let file_str = file.to_str().unwrap();
    assert_eq!(out["fsReads"], json!([file_str]));
    assert_eq!(out["fsWrites"], json!([file_str]));
    assert_eq!(report["readContent"], ORIGINAL_CONTENT);
    assert_eq!(report["writeOk"], true, "fs write: {report}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!("{ORIGINAL_CONTENT}{AGENT_SUFFIX}"),
        "file on disk after fs/write_text_file"
    );

    // session/update notifications, in order, content intact.
    let session_id = out["sessionId"].as_str().expect("sessionId");
    let updates = out["updates"].as_array().unwrap();
    let texts: Vec<&str> = updates
        .iter()
        .map(|u| {
            assert_eq!(u["sessionId"], session_id);
            assert_eq!(u["update"]["sessionUpdate"], "agent_message_chunk");
            u["update"]["content"]["text"].as_str().expect("text chunk")
        })
        .collect();
    assert_eq!(
        texts.len(),
        5,
        "updates: {:?}",
        texts.iter().map(|t| short(t)).collect::<Vec<_>>()
    );
    assert_eq!(texts[0], "Hello from the SDK agent.");
    for needle in [
        "héllo wörld",
        "你好",
        "👋🏽🦀🎉",
        "e\u{301}",
        "[\u{2028}]",
        "[\u{2029}]",
        "\t",
        "\n end",
    ] {
        assert!(
            texts[1].contains(needle),
            "unicode update lost {needle:?}: {:?}",
            texts[1]
        );
    }
    let big = report["bigTextBytes"].as_u64().unwrap() as usize;
    assert!(big >= 64 * 1024);
    assert_eq!(texts[2].len(), big, "the ~64 KiB update arrived whole");
    assert_eq!(texts[3], "Asking for permission next.");
    assert_eq!(serde_json::from_str::<Value>(texts[4]).unwrap(), *report);
}

/// Everything specific to a run through `acp-lsp proxy`.
fn check_proxied(run: &Run, lsp_method: &str, client_meta: Option<&Value>) {
    let out = &run.out;
    let report = &out["agentReport"];
    let ctx = format!("\n--- stderr ---\n{}", run.stderr);

    assert_eq!(report["lspMethod"], lsp_method);

    // The agent saw the LSP capability, in both places.
    assert_eq!(
        report["sawLspCapability"], true,
        "clientCapabilities at the agent: {}",
        report["clientCapabilities"]
    );
    assert_eq!(
        report["sawMetaLsp"], true,
        "clientCapabilities at the agent: {}",
        report["clientCapabilities"]
    );
    assert_eq!(report["clientCapabilities"]["lsp"], json!({}));
    assert_eq!(report["clientCapabilities"]["_meta"]["lsp"], json!({}));

    // The proxy answered lsp/servers itself, with the documented shape.
    let lsp = &report["lspServers"];
    assert!(
        lsp.get("error").is_none(),
        "{lsp_method} answered with an error: {lsp}{ctx}"
    );
    let result = &lsp["result"];
    let servers = result["servers"]
        .as_array()
        .unwrap_or_else(|| panic!("{lsp_method} result has no `servers` array: {result}"));
    assert!(servers.iter().all(Value::is_object), "servers: {result}");
    assert!(
        result["availableMethods"].is_array(),
        "{lsp_method} result has no `availableMethods` array: {result}"
    );
    assert_eq!(
        out["unexpected"],
        json!([]),
        "the client got requests it should not have"
    );

    // --- byte identity of everything relayed ---
    let client_out = lines(&run.client_tap, "out");
    let client_in = lines(&run.client_tap, "in");
    let agent_in = lines(&run.agent_tap, "in");
    let agent_out = lines(&run.agent_tap, "out");

    // initialize: the only client line the proxy may change.
    assert_eq!(method(&client_out[0]).as_deref(), Some("initialize"));
    assert_eq!(
        method(&agent_in[0]).as_deref(),
        Some("initialize"),
        "first line at the agent"
    );
    let sent_init = parse(&client_out[0]);
    let mut got_init = parse(&agent_in[0]);
    let caps = &mut got_init["params"]["clientCapabilities"];
    assert_eq!(
        caps["lsp"],
        json!({}),
        "initialize at the agent: {}",
        agent_in[0]
    );
    assert_eq!(
        caps["_meta"]["lsp"],
        json!({}),
        "initialize at the agent: {}",
        agent_in[0]
    );
    caps.as_object_mut().unwrap().remove("lsp");
    caps["_meta"].as_object_mut().unwrap().remove("lsp");
    let sent_meta = &sent_init["params"]["clientCapabilities"]["_meta"];
    if sent_meta.is_null() {
        assert_eq!(caps["_meta"], json!({}), "_meta gained more than lsp");
        caps.as_object_mut().unwrap().remove("_meta");
    } else {
        assert_eq!(
            Some(sent_meta),
            client_meta,
            "the client sent the _meta it was given"
        );
    }
    assert_eq!(
        got_init, sent_init,
        "initialize differs by more than the lsp capability"
    );

    // The agent's lsp/servers requests and the proxy's answers to them.
    let lsp_request_ids: Vec<Value> = agent_out
        .iter()
        .map(|l| parse(l))
        .filter(|v| {
            v["method"]
                .as_str()
                .is_some_and(|m| LSP_METHODS.contains(&m))
        })
        .map(|v| v["id"].clone())
        .collect();
    assert_eq!(
        lsp_request_ids.len(),
        1,
        "the agent sent one {lsp_method} request"
    );
    let is_lsp_answer = |l: &String| {
        let v = parse(l);
        v.get("method").is_none() && lsp_request_ids.contains(&v["id"])
    };
    assert_eq!(
        agent_in.iter().filter(|l| is_lsp_answer(l)).count(),
        1,
        "one answer to {lsp_method} at the agent"
    );

    // editor → agent: all but initialize, unchanged and in order; the agent
    // additionally got only the proxy's answer to its lsp/servers request.
    let expect_at_agent: Vec<String> = client_out[1..].to_vec();
    let seen_at_agent: Vec<String> = agent_in[1..]
        .iter()
        .filter(|l| !is_lsp_answer(l))
        .cloned()
        .collect();
    assert_same_lines("editor→agent relay", &expect_at_agent, &seen_at_agent);

    // agent → editor: everything but the lsp/servers request, unchanged and in order.
    assert!(
        client_in
            .iter()
            .all(|l| !method(l).is_some_and(|m| LSP_METHODS.contains(&m.as_str()))),
        "an lsp/* request reached the editor"
    );
    let expect_at_client: Vec<String> = agent_out
        .iter()
        .filter(|l| !method(l).is_some_and(|m| LSP_METHODS.contains(&m.as_str())))
        .cloned()
        .collect();
    assert_same_lines("agent→editor relay", &expect_at_client, &client_in);

    // --record wrote all four directions.
    let record_path = run.workdir.join("record.jsonl");
    let record = std::fs::read_to_string(&record_path)
        .unwrap_or_else(|e| panic!("{} not written: {e}", record_path.display()));
    let mut per_dir: BTreeMap<String, usize> = BTreeMap::new();
    for l in record.lines() {
        let v: Value = serde_json::from_str(l)
            .unwrap_or_else(|e| panic!("record line not JSON ({e}): {}", short(l)));
        assert!(
            v["t"].is_u64(),
            "record line without integer `t`: {}",
            short(l)
        );
        assert!(
            v.get("msg").is_some() || v["text"].is_string() || v["event"].is_string(),
            "record line without `msg`/`text`/`event`: {}",
            short(l)
        );
        *per_dir
            .entry(v["dir"].as_str().unwrap_or("<none>").to_owned())
            .or_default() += 1;
    }
    for dir in RECORD_DIRS {
        assert!(
            per_dir.get(dir).copied().unwrap_or(0) >= 1,
            "record.jsonl has no `{dir}` line: {per_dir:?}"
        );
    }

    // Last, so that a relay problem shows first: after the editor closed its
    // output, the proxy closed the agent's input, the agent exited, and the
    // proxy exited 0.
    assert_eq!(
        out["childExitTimedOut"], false,
        "proxy did not exit after stdin EOF{ctx}"
    );
    assert_eq!(
        out["childExitCode"], 0,
        "proxy exit code (signal {}){ctx}",
        out["childSignal"]
    );
}

/// The peers alone, no proxy: proves the peers and their taps, and that
/// without acp-lsp an `lsp/servers` request is just an unknown method.
#[test]
fn sdk_peers_direct_without_proxy() {
    let run = run_peers(None, &[]);
    check_turn(&run);
    let report = &run.out["agentReport"];
    assert_eq!(report["sawLspCapability"], false);
    assert_eq!(report["lspServers"]["error"]["code"], -32601, "{report}");
    assert_eq!(run.out["unexpected"][0]["method"], "lsp/servers");
    assert_eq!(run.out["childExitCode"], 0);
    assert_same_lines(
        "client out = agent in",
        &lines(&run.client_tap, "out"),
        &lines(&run.agent_tap, "in"),
    );
    assert_same_lines(
        "agent out = client in",
        &lines(&run.agent_tap, "out"),
        &lines(&run.client_tap, "in"),
    );
}

/// The main scenario: canonical `lsp/servers`, no `_meta` from the editor.
#[test]
fn sdk_peers_through_proxy() {
    let run = run_peers(Some(&acp_lsp_bin()), &[]);
    check_turn(&run);
    check_proxied(&run, "lsp/servers", None);
}

/// The `_`-prefixed spelling, and an editor `_meta` that must be kept.
#[test]
fn sdk_peers_through_proxy_underscore_method_and_existing_meta() {
    let meta = json!({"example.com/editor": {"keep": true}});
    let meta_str = meta.to_string();
    let run = run_peers(
        Some(&acp_lsp_bin()),
        &[
            ("PEER_LSP_METHOD", "_lsp/servers"),
            ("PEER_CLIENT_META", &meta_str),
        ],
    );
    check_turn(&run);
    check_proxied(&run, "_lsp/servers", Some(&meta));
    assert_eq!(
        run.out["agentReport"]["clientCapabilities"]["_meta"]["example.com/editor"],
        meta["example.com/editor"]
    );
}
