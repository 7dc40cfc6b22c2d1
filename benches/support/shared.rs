//! Figure 6: three agents on one Rust project, each behind its own
//! `acp-lsp proxy`, with and without `--shared`, in the same run: how many
//! rust-analyzers run, the RSS of the whole tree (proxies, daemon, servers;
//! not the agents), and the time from the second agent's `session/new` to
//! its first references answer equal to the first agent's.
//!
//! The agent is a few lines of Python that relays the bench's
//! `_test/ask {method, params}` to the proxy as its own request (the same
//! agent as `tests/daemon.rs`).

use super::acp::AcpProxy;
use super::{acp_lsp_bin, copy_tree, Table, Verdict};
use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The second agent must have its answer within this (the target).
const SECOND_AGENT_TARGET: Duration = Duration::from_millis(200);
/// Shared RSS at most this times one plain agent's.
const RSS_TARGET_RATIO: f64 = 1.2;
/// Longest wait for the first agent's rust-analyzer to load the project.
const READY_WAIT_MS: u64 = 120_000;
/// How much longer than a request's own wait its answer may take to come.
const ANSWER_MARGIN: Duration = Duration::from_secs(30);

/// The agent of `tests/daemon.rs`.
const AGENT: &str = include_str!("../../tests/shared-bench/agent.py");

/// One `acp-lsp proxy` with the relaying agent behind it.
fn start_proxy(world: &World, shared: bool, name: &str) -> Result<AcpProxy> {
    let log = std::fs::File::create(world.dir.join(format!("{name}.log")))?;
    let mut command = Command::new(acp_lsp_bin());
    command.args(["proxy", "--mcp", "off", "--config"]);
    command.arg(&world.config);
    if shared {
        command.arg("--shared");
    }
    command
        .arg("--")
        .arg("python3")
        .arg(&world.agent)
        .env("XDG_RUNTIME_DIR", &world.runtime)
        .current_dir(&world.project)
        .stderr(log);
    // Above the references' waitUntilReady: that wait answers first.
    AcpProxy::spawn(
        command,
        Duration::from_millis(READY_WAIT_MS) + ANSWER_MARGIN,
    )
}

/// The agent relays `_test/ask {method, params}` as its own request.
fn ask(proxy: &mut AcpProxy, method: &str, params: Value) -> Result<Value> {
    let answer = proxy.call("_test/ask", json!({"method": method, "params": params}))?;
    Ok(answer["result"]["response"].clone())
}

/// `initialize` and `session/new` (the agent always names its session "s").
fn open(proxy: &mut AcpProxy, project: &Path) -> Result<()> {
    let session = proxy.open(project)?;
    ensure!(session["result"]["sessionId"] == "s", "{session}");
    Ok(())
}

/// The references of `area` (its declaration included), waiting for
/// rust-analyzer to be ready.
fn references(proxy: &mut AcpProxy, project: &Path) -> Result<Value> {
    let servers = ask(proxy, "lsp/servers", json!({"sessionId": "s"}))?;
    let server_id = servers["result"]["servers"]
        .as_array()
        .and_then(|list| list.iter().find(|s| s["name"] == "rust-analyzer"))
        .map(|s| s["serverId"].clone())
        .with_context(|| format!("no rust-analyzer in {servers}"))?;
    let uri = super::file_uri(&project.join("src/geometry.rs"));
    let answer = ask(
        proxy,
        "lsp/request",
        json!({
            "sessionId": "s",
            "serverId": server_id,
            "method": "textDocument/references",
            "params": {
                "textDocument": {"uri": uri},
                "position": {"line": 1, "character": 7},
                "context": {"includeDeclaration": true}
            },
            "_meta": {"waitUntilReady": READY_WAIT_MS}
        }),
    )?;
    let result = answer["result"]["lspResult"].clone();
    ensure!(
        result.as_array().is_some_and(|r| !r.is_empty()),
        "no references: {answer}"
    );
    Ok(result)
}

/// A private runtime dir (the daemon's socket), config, agent and project.
struct World {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    runtime: PathBuf,
    config: PathBuf,
    agent: PathBuf,
    project: PathBuf,
}

impl World {
    fn new() -> Result<World> {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().to_path_buf();
        let runtime = dir.join("run");
        std::fs::create_dir(&runtime)?;
        let project = dir.join("project");
        copy_tree(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/rust-three-files"),
            &project,
        )?;
        let project = project.canonicalize()?;
        let config = dir.join("config.toml");
        std::fs::write(&config, "idle_grace_ms = 1000\n")?;
        let agent = dir.join("agent.py");
        std::fs::write(&agent, AGENT)?;
        Ok(World {
            _tmp: tmp,
            dir,
            runtime,
            config,
            agent,
            project,
        })
    }

    /// The daemon's pid, from `acp-lsp daemon status --json`.
    fn daemon_pid(&self) -> Result<u32> {
        let output = Command::new(acp_lsp_bin())
            .args(["daemon", "status", "--json", "--config"])
            .arg(&self.config)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .output()?;
        ensure!(output.status.success(), "no daemon answers");
        let status: Value = serde_json::from_slice(&output.stdout)?;
        status["pid"]
            .as_u64()
            .map(|p| p as u32)
            .context("no pid in the daemon's status")
    }
}

fn proc_field(pid: u32, file: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/{file}")).ok()
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = proc_field(pid, "stat")?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn program_of(pid: u32) -> String {
    proc_field(pid, "cmdline")
        .and_then(|c| c.split('\0').next().map(str::to_string))
        .unwrap_or_default()
}

fn rss_bytes(pid: u32) -> u64 {
    super::rss_kib_of(pid) * 1024
}

/// `roots` and all their descendants.
fn process_tree(roots: &[u32]) -> HashSet<u32> {
    let all: Vec<u32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let mut tree: HashSet<u32> = roots.iter().copied().collect();
    loop {
        let before = tree.len();
        for &pid in &all {
            if !tree.contains(&pid) && parent_of(pid).is_some_and(|p| tree.contains(&p)) {
                tree.insert(pid);
            }
        }
        if tree.len() == before {
            return tree;
        }
    }
}

/// What one mode measured.
struct Outcome {
    rust_analyzers: usize,
    rss: u64,
    second: Duration,
    third: Duration,
}

fn measure(shared: bool) -> Result<Outcome> {
    let world = World::new()?;
    let mut proxies = (0..3)
        .map(|i| start_proxy(&world, shared, &format!("proxy{i}")))
        .collect::<Result<Vec<_>>>()?;
    open(&mut proxies[0], &world.project)?;
    let want = references(&mut proxies[0], &world.project)?;
    let mut times = Vec::new();
    for proxy in &mut proxies[1..] {
        let start = Instant::now();
        open(proxy, &world.project)?;
        let got = references(proxy, &world.project)?;
        times.push(start.elapsed());
        ensure!(got == want, "another answer: {got} (first agent: {want})");
    }
    let mut roots: Vec<u32> = proxies.iter().map(AcpProxy::pid).collect();
    let daemon = if shared {
        Some(world.daemon_pid()?)
    } else {
        None
    };
    roots.extend(daemon);
    let counted: Vec<u32> = process_tree(&roots)
        .into_iter()
        .filter(|&pid| !program_of(pid).starts_with("python"))
        .collect();
    let rust_analyzers = counted
        .iter()
        .filter(|&&pid| program_of(pid).ends_with("rust-analyzer"))
        .count();
    let rss = counted.iter().map(|&pid| rss_bytes(pid)).sum();
    for proxy in proxies {
        proxy.end();
    }
    if let Some(pid) = daemon {
        // The daemon would exit after the idle grace; end it now.
        let _ = Command::new("kill").arg(pid.to_string()).status();
    }
    Ok(Outcome {
        rust_analyzers,
        rss,
        second: times[0],
        third: times[1],
    })
}

pub fn run(table: &Table) -> Result<()> {
    if acp_lsp::lsp::detect::find_on_path("rust-analyzer").is_none() {
        bail!("rust-analyzer is not installed (rustup component add rust-analyzer)");
    }
    let plain = measure(false).context("three plain proxies")?;
    let shared = measure(true).context("three shared proxies")?;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    table.row(
        "6 three agents on one project: rust-analyzer processes",
        format!("{} with --shared", shared.rust_analyzers),
        format!("{} without", plain.rust_analyzers),
        None,
        "1",
        Verdict::of(shared.rust_analyzers == 1),
    );
    let one_agent = plain.rss as f64 / 3.0;
    let ratio = shared.rss as f64 / one_agent;
    table.row(
        "6 three agents: RSS of proxies, daemon and servers",
        format!("{:.0} MiB with --shared", mib(shared.rss)),
        format!(
            "{:.0} MiB without; one agent's {:.0} MiB",
            mib(plain.rss),
            one_agent / (1024.0 * 1024.0)
        ),
        Some(ratio),
        format!("≤ {RSS_TARGET_RATIO}× one agent's"),
        Verdict::of(ratio <= RSS_TARGET_RATIO),
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    table.row(
        "6 second agent: session/new → first correct references",
        format!(
            "{:.0} ms with --shared (third {:.0} ms)",
            ms(shared.second),
            ms(shared.third)
        ),
        format!(
            "{:.0} ms without (third {:.0} ms)",
            ms(plain.second),
            ms(plain.third)
        ),
        None,
        format!("≤ {} ms", SECOND_AGENT_TARGET.as_millis()),
        Verdict::of(shared.second <= SECOND_AGENT_TARGET),
    );
    Ok(())
}
