//! Figures 7 and 8: the MCP tools as an agent pays for them, side by side
//! with mcpls 0.6.0 on the same rust-analyzer and the same crate (a copy of
//! `tests/projects/rust-three-files`), in the same run.
//!
//! acp-lsp side: the real `acp-lsp proxy` with a scripted agent (a few lines
//! of Python that hands back the `mcpServers` entry it received in
//! `session/new`); the bench starts that entry as an agent would (the
//! `acp-lsp mcp --connect …` bridge process, rmcp's child-process client).
//! mcpls side: `mcpls --config FILE` over stdio, the same rmcp client.
//! Both are warm (a first correct answer) before timing; calls alternate
//! ABBA, median of [`ROUNDS`].
//!
//! Figure 8: resident memory of the proxy process alone (not its agent,
//! servers or the bridge) and of the mcpls process alone (not its
//! rust-analyzer), once warm and after [`MEMORY_CALLS`] tool calls.
//!
//! mcpls is taken from [`tools_dir`]`/bin/mcpls`, installed there with
//! `cargo install --locked mcpls@0.6.0` when missing (bounded by
//! [`INSTALL_TIMEOUT`]); when it cannot be had, the rows say skipped and why.

use super::acp::AcpProxy;
use super::{acp_lsp_bin, copy_tree, median, Table, Verdict};
use anyhow::{bail, ensure, Context, Result};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MCPLS_VERSION: &str = "0.6.0";
/// Longest a missing mcpls may take to build (2 cores: about 10 minutes
/// from nothing; a killed build resumes from its target dir next time).
const INSTALL_TIMEOUT: Duration = Duration::from_secs(240);
/// Longest wait for a server to give its first correct answer.
const WARM_TIMEOUT: Duration = Duration::from_secs(180);
/// Longest wait for one timed tool call.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait for an ACP line from the proxy.
const ACP_TIMEOUT: Duration = Duration::from_secs(30);
const WARMUP: usize = 3;
const ROUNDS: usize = 50;
/// Tool calls per server before the second memory reading (all calls counted).
const MEMORY_CALLS: usize = 1000;
const TARGET_RATIO: f64 = 1.0;

/// The agent: answers `initialize` and `session/new`, the latter with the
/// `mcpServers` it received under `_meta.bench` (the relay passes the
/// answer on unchanged).
const AGENT: &str = r#"
import json, sys
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if "method" not in msg or "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {"protocolVersion": 1, "agentCapabilities": {}}
    elif msg["method"] == "session/new":
        result = {"sessionId": "s", "_meta": {"bench": {"mcpServers": msg["params"].get("mcpServers", [])}}}
    else:
        result = None
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
"#;

/// Where the bench keeps tools it installs (`~/.cache/acp-lsp-bench-tools`).
pub fn tools_dir() -> PathBuf {
    super::registry::user_cache_dir().join("acp-lsp-bench-tools")
}

/// mcpls 0.6.0, installing it when missing; `Err` says why it cannot be had.
fn mcpls() -> Result<PathBuf> {
    let dir = tools_dir();
    let bin = dir.join("bin/mcpls");
    let version_ok = |bin: &Path| {
        Command::new(bin)
            .arg("--version")
            .stderr(Stdio::null())
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(MCPLS_VERSION))
    };
    if version_ok(&bin) {
        return Ok(bin);
    }
    std::fs::create_dir_all(&dir)?;
    let log_path = dir.join("mcpls-install.log");
    let log = std::fs::File::create(&log_path)?;
    eprintln!(
        "  installing mcpls {MCPLS_VERSION} into {} (log: {})",
        dir.display(),
        log_path.display()
    );
    let mut install = Command::new("cargo")
        .args([
            "install",
            "--locked",
            &format!("mcpls@{MCPLS_VERSION}"),
            "--root",
        ])
        .arg(&dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .context("cannot run cargo install")?;
    let deadline = Instant::now() + INSTALL_TIMEOUT;
    let status = loop {
        if let Some(status) = install.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = install.kill();
            let _ = install.wait();
            bail!(
                "cargo install --locked mcpls@{MCPLS_VERSION} did not finish within {} s \
                 (it resumes next run; see {})",
                INSTALL_TIMEOUT.as_secs(),
                log_path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    ensure!(
        status.success(),
        "cargo install --locked mcpls@{MCPLS_VERSION} failed ({status}; see {})",
        log_path.display()
    );
    ensure!(
        version_ok(&bin),
        "{} is not mcpls {MCPLS_VERSION}",
        bin.display()
    );
    Ok(bin)
}

pub(super) type Client = RunningService<RoleClient, ()>;

/// One MCP server with its client and the pid whose RSS figure 8 reports.
struct Mcp {
    client: Client,
    /// Tool names: definition, hover, references.
    tools: [&'static str; 3],
    /// Arguments for a position in `file`, 1-based.
    position: fn(&Path, u32, u32) -> Value,
    calls: usize,
}

impl Mcp {
    async fn call(&mut self, tool: &str, arguments: &Value) -> Result<CallToolResult> {
        let arguments = arguments.as_object().context("an object")?.clone();
        self.calls += 1;
        let result = tokio::time::timeout(
            CALL_TIMEOUT,
            self.client
                .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments)),
        )
        .await
        .with_context(|| format!("{tool}: no answer within {CALL_TIMEOUT:?}"))??;
        Ok(result)
    }

    /// A call that must succeed; returns its text.
    async fn call_ok(&mut self, tool: &str, arguments: &Value) -> Result<String> {
        let result = self.call(tool, arguments).await?;
        let text = text(&result);
        ensure!(result.is_error != Some(true), "{tool} failed: {text}");
        Ok(text)
    }
}

pub(super) fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The proxy with the scripted agent; `--mcp stdio`, so the agent gets the
/// entry an agent without `mcpCapabilities.http` gets.
pub(super) fn start_proxy(dir: &Path, project: &Path) -> Result<AcpProxy> {
    let agent = dir.join("agent.py");
    std::fs::write(&agent, AGENT)?;
    let config = dir.join("config.toml");
    std::fs::write(&config, "idle_grace_ms = 1000\n")?;
    let log = std::fs::File::create(dir.join("proxy.log"))?;
    let mut command = Command::new(acp_lsp_bin());
    command
        .args(["proxy", "--mcp", "stdio", "--config"])
        .arg(&config)
        .arg("--")
        .arg("python3")
        .arg(&agent)
        .env("XDG_RUNTIME_DIR", dir)
        .current_dir(project)
        .stderr(log);
    AcpProxy::spawn(command, ACP_TIMEOUT)
}

/// `initialize` and `session/new`; returns the injected entry the agent got.
pub(super) fn injected_entry(proxy: &mut AcpProxy, project: &Path) -> Result<Value> {
    let session = proxy.open(project)?;
    session["result"]["_meta"]["bench"]["mcpServers"]
        .as_array()
        .and_then(|servers| servers.iter().find(|s| s["name"] == "acp-lsp"))
        .cloned()
        .with_context(|| format!("no acp-lsp entry in the agent's session/new: {session}"))
}

/// The entry's command, started as an agent does; returns the client and
/// the bridge's pid.
pub(super) async fn connect_entry(entry: &Value) -> Result<(Client, Option<u32>)> {
    let command = entry["command"].as_str().context("command")?.to_string();
    let args: Vec<String> = entry["args"]
        .as_array()
        .context("args")?
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    let env: Vec<(String, String)> = entry["env"]
        .as_array()
        .context("env")?
        .iter()
        .filter_map(|v| Some((v["name"].as_str()?.into(), v["value"].as_str()?.into())))
        .collect();
    let transport = TokioChildProcess::new(tokio::process::Command::new(command).configure(|c| {
        c.args(&args);
        for (name, value) in &env {
            c.env(name, value);
        }
    }))?;
    let pid = transport.id();
    let client = tokio::time::timeout(ACP_TIMEOUT, ().serve(transport))
        .await
        .context("MCP initialize with the bridge timed out")??;
    Ok((client, pid))
}

/// An rmcp client straight on the proxy's socket (token line first, as the
/// bridge sends it), without the bridge process.
async fn connect_socket(entry: &Value) -> Result<Client> {
    use tokio::io::AsyncWriteExt;
    let socket = entry["args"][2].as_str().context("the socket in args")?;
    let token = entry["env"][0]["value"].as_str().context("the token")?;
    let mut stream = tokio::net::UnixStream::connect(socket).await?;
    stream.write_all(format!("{token}\n").as_bytes()).await?;
    let client = tokio::time::timeout(ACP_TIMEOUT, ().serve(stream))
        .await
        .context("MCP initialize on the socket timed out")??;
    Ok(client)
}

/// Definition, hover and references at the same position, ABBA between the
/// two servers, [`WARMUP`] then [`ROUNDS`] rounds: (tool, our median ms,
/// their median ms, (our text bytes, theirs)).
async fn timed(
    ours: &mut Mcp,
    theirs: &mut Mcp,
    file: &Path,
) -> Result<Vec<(&'static str, f64, f64, (usize, usize))>> {
    let wants = ["geometry.rs", "area", "report.rs"];
    let mut rows = Vec::new();
    for (i, want) in wants.iter().enumerate() {
        let (tool_ours, tool_theirs) = (ours.tools[i], theirs.tools[i]);
        let (args_ours, args_theirs) =
            ((ours.position)(file, 5, 27), (theirs.position)(file, 5, 27));
        let (mut t_ours, mut t_theirs) = (Vec::new(), Vec::new());
        let mut sizes = (0, 0);
        for round in 0..WARMUP + ROUNDS {
            // ABBA order: neither server always goes first.
            let (mut took_ours, mut took_theirs) = (0.0, 0.0);
            for our_turn in [round % 2 == 0, round % 2 != 0] {
                let t = Instant::now();
                if our_turn {
                    let text = ours.call_ok(tool_ours, &args_ours).await?;
                    took_ours = t.elapsed().as_secs_f64() * 1e3;
                    ensure!(text.contains(want), "acp-lsp {tool_ours}: {text}");
                    sizes.0 = text.len();
                } else {
                    let text = theirs.call_ok(tool_theirs, &args_theirs).await?;
                    took_theirs = t.elapsed().as_secs_f64() * 1e3;
                    ensure!(text.contains(want), "mcpls {tool_theirs}: {text}");
                    sizes.1 = text.len();
                }
            }
            if round >= WARMUP {
                t_ours.push(took_ours);
                t_theirs.push(took_theirs);
            }
        }
        rows.push((tool_ours, median(&t_ours), median(&t_theirs), sizes));
    }
    Ok(rows)
}

/// mcpls over stdio for `project` with rust-analyzer; returns the client and its pid.
async fn connect_mcpls(bin: &Path, dir: &Path, project: &Path) -> Result<(Client, Option<u32>)> {
    let config = dir.join("mcpls.toml");
    // The same switches acp-lsp gives rust-analyzer for a project it does
    // not trust (no build scripts, no proc macros); nothing to check on save.
    std::fs::write(
        &config,
        format!(
            r#"[workspace]
roots = [{root:?}]

[[lsp_servers]]
language_id = "rust"
command = "rust-analyzer"
file_patterns = ["**/*.rs"]

[lsp_servers.initialization_options]
checkOnSave = false
cargo = {{ buildScripts = {{ enable = false }} }}
procMacro = {{ enable = false }}
"#,
            root = project.display().to_string()
        ),
    )?;
    let log = std::fs::File::create(dir.join("mcpls.log"))?;
    let (transport, _) =
        TokioChildProcess::builder(tokio::process::Command::new(bin).configure(|c| {
            c.arg("--config")
                .arg(&config)
                .arg("--log-level")
                .arg("warn")
                .current_dir(project)
                .env("XDG_CONFIG_HOME", dir);
        }))
        .stderr(Stdio::from(log))
        .spawn()?;
    let pid = transport.id();
    let client = tokio::time::timeout(ACP_TIMEOUT, ().serve(transport))
        .await
        .context("MCP initialize with mcpls timed out")??;
    Ok((client, pid))
}

/// CPU time (user + system, all threads) of `pid` so far, in ms.
fn cpu_ms(pid: Option<u32>) -> f64 {
    // SAFETY: sysconf reads a constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    pid.and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .and_then(|stat| {
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            // After the command: state is field 3, utime 14 and stime 15.
            let user: f64 = fields.get(11)?.parse().ok()?;
            let system: f64 = fields.get(12)?.parse().ok()?;
            Some((user + system) * 1e3 / ticks)
        })
        .unwrap_or(0.0)
}

fn rss_kib(pid: Option<u32>) -> u64 {
    pid.map_or(0, super::rss_kib_of)
}

/// Calls `tool` until its text contains `want` or [`WARM_TIMEOUT`] passes.
async fn warm(server: &mut Mcp, tool: &str, arguments: &Value, want: &str) -> Result<()> {
    let deadline = Instant::now() + WARM_TIMEOUT;
    loop {
        // Protocol errors too: mcpls answers one while its server loads.
        let text = match server.call(tool, arguments).await {
            Ok(result) if result.is_error != Some(true) && text(&result).contains(want) => {
                return Ok(())
            }
            Ok(result) => text(&result),
            Err(e) => format!("{e:#}"),
        };
        if Instant::now() > deadline {
            bail!("{tool} never answered with {want:?} within {WARM_TIMEOUT:?}; last: {text}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn run(table: &Table, figures: &[u32]) -> Result<()> {
    let want7 = figures.contains(&7);
    let want8 = figures.contains(&8);
    let skip_all = |why: String| {
        if want7 {
            table.skipped("7 MCP tools against mcpls", why.clone());
        }
        if want8 {
            table.skipped("8 MCP memory against mcpls", why);
        }
    };
    if acp_lsp::lsp::detect::find_on_path("rust-analyzer").is_none() {
        bail!("rust-analyzer is not installed (rustup component add rust-analyzer)");
    }
    let bin = match tokio::task::spawn_blocking(mcpls).await? {
        Ok(bin) => bin,
        Err(e) => {
            skip_all(format!("skipped: mcpls not available ({e:#})"));
            return Ok(());
        }
    };

    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().canonicalize()?;
    let project = dir.join("project");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/projects/rust-three-files"),
        &project,
    )?;
    let project = project.canonicalize()?;
    let mcpls_dir = dir.join("mcpls");
    std::fs::create_dir_all(&mcpls_dir)?;

    let mut proxy = start_proxy(&dir, &project)?;
    let outcome = async {
        let entry = injected_entry(&mut proxy, &project)?;
        let proxy_idle_before_tools = rss_kib(Some(proxy.pid()));
        let (ours, bridge_pid) = connect_entry(&entry).await?;
        let (theirs, mcpls_pid) = connect_mcpls(&bin, &mcpls_dir, &project).await?;
        let mut ours = Mcp {
            client: ours,
            tools: ["definition", "hover", "references"],
            position: |file, line, column| json!({"file": file, "line": line, "column": column}),
            calls: 0,
        };
        let mut theirs = Mcp {
            client: theirs,
            tools: ["get_definition", "get_hover", "get_references"],
            position: |file, line, character| {
                json!({"file_path": file, "line": line, "character": character,
                       "include_declaration": true})
            },
            calls: 0,
        };
        // `geometry::area` in stats.rs:5:27 (1-based); its definition is in
        // geometry.rs, its other uses in report.rs.
        let file = project.join("src/stats.rs");
        let started = Instant::now();
        let (first_ours, first_theirs) = (
            (ours.position)(&file, 5, 27),
            (theirs.position)(&file, 5, 27),
        );
        let (a, b) = tokio::join!(
            warm(&mut ours, "references", &first_ours, "report.rs"),
            warm(&mut theirs, "get_references", &first_theirs, "report.rs")
        );
        a.context("acp-lsp")?;
        b.context("mcpls")?;
        eprintln!(
            "  (both servers warm after {:.1} s)",
            started.elapsed().as_secs_f64()
        );
        let proxy_pid = Some(proxy.pid());
        let warm_rss = (rss_kib(proxy_pid), rss_kib(bridge_pid), rss_kib(mcpls_pid));

        if want7 {
            for (tool, m_ours, m_theirs, sizes) in timed(&mut ours, &mut theirs, &file).await? {
                let ratio = m_ours / m_theirs;
                table.row(
                    format!("7 MCP {tool}, median of {ROUNDS}"),
                    format!("{m_ours:.2} ms ({} B text)", sizes.0),
                    format!(
                        "{m_theirs:.2} ms mcpls {MCPLS_VERSION} ({} B text)",
                        sizes.1
                    ),
                    Some(ratio),
                    format!("≤ {TARGET_RATIO:.1}×"),
                    Verdict::of(ratio <= TARGET_RATIO),
                );
            }
        }

        // Up to MEMORY_CALLS calls each (the timed ones count), cycling the three tools.
        let mut loop_ms = (0.0, 0.0);
        // CPU time per call in the loop: the proxy and the bridge (ours), mcpls (theirs).
        let mut cpu_us = (0.0, 0.0, 0.0);
        for (server, took) in [(&mut ours, &mut loop_ms.0), (&mut theirs, &mut loop_ms.1)] {
            let t = Instant::now();
            let done_before = server.calls;
            let cpu_before = (cpu_ms(proxy_pid), cpu_ms(bridge_pid), cpu_ms(mcpls_pid));
            let mut n = 0;
            while server.calls < MEMORY_CALLS {
                let tool = server.tools[n % 3];
                let args = (server.position)(&file, 5, 27);
                server.call_ok(tool, &args).await?;
                n += 1;
            }
            let n = (server.calls - done_before).max(1) as f64;
            *took = t.elapsed().as_secs_f64() * 1e3 / n;
            if server.tools[0] == "definition" {
                cpu_us.0 = (cpu_ms(proxy_pid) - cpu_before.0) * 1e3 / n;
                cpu_us.1 = (cpu_ms(bridge_pid) - cpu_before.1) * 1e3 / n;
            } else {
                cpu_us.2 = (cpu_ms(mcpls_pid) - cpu_before.2) * 1e3 / n;
            }
        }
        let after_rss = (rss_kib(proxy_pid), rss_kib(bridge_pid), rss_kib(mcpls_pid));
        if want8 {
            let mib = |k: u64| k as f64 / 1024.0;
            table.row(
                "8 RSS of the proxy process alone (mcpls alone), warm",
                format!(
                    "{:.1} MiB (before any tool call {:.1}; bridge +{:.1})",
                    mib(warm_rss.0),
                    mib(proxy_idle_before_tools),
                    mib(warm_rss.1)
                ),
                format!("{:.1} MiB mcpls", mib(warm_rss.2)),
                Some(warm_rss.0 as f64 / warm_rss.2.max(1) as f64),
                "info",
                Verdict::Info,
            );
            table.row(
                format!("8 RSS of the proxy alone (mcpls alone), after {MEMORY_CALLS} tool calls"),
                format!(
                    "{:.1} MiB (bridge +{:.1}; {:.2} ms a call)",
                    mib(after_rss.0),
                    mib(after_rss.1),
                    loop_ms.0
                ),
                format!(
                    "{:.1} MiB mcpls ({:.2} ms a call)",
                    mib(after_rss.2),
                    loop_ms.1
                ),
                Some(after_rss.0 as f64 / after_rss.2.max(1) as f64),
                "info",
                Verdict::Info,
            );
            table.row(
                "8 CPU time per tool call in that loop (utime+stime, 10 ms ticks)",
                format!("{:.0} µs proxy + {:.0} µs bridge", cpu_us.0, cpu_us.1),
                format!("{:.0} µs mcpls", cpu_us.2),
                Some((cpu_us.0 + cpu_us.1) / cpu_us.2.max(1.0)),
                "info",
                Verdict::Info,
            );
        }
        // Where the time goes, part one: the same calls without the bridge
        // process (an rmcp client on the proxy's socket, as tests/mcp.rs
        // does). A token admits one connection at a time: the bridge's ends first.
        let _ = ours.client.cancel().await;
        if want7 {
            ours.client = connect_socket(&entry).await?;
            for (tool, m_ours, m_theirs, _) in timed(&mut ours, &mut theirs, &file).await? {
                table.row(
                    format!("7 MCP {tool} without the bridge process (rmcp on the socket)"),
                    format!("{m_ours:.2} ms"),
                    format!("{m_theirs:.2} ms mcpls {MCPLS_VERSION}"),
                    Some(m_ours / m_theirs),
                    "info",
                    Verdict::Info,
                );
            }
            let _ = ours.client.cancel().await;
        }
        let _ = theirs.client.cancel().await;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    proxy.end();
    outcome
}
