//! The `acp-lsp` command line.

use acp_lsp::acp::relay::{self, LspMode, RelayOptions};
use acp_lsp::agent_process::{self, AgentProcess, Signals};
use acp_lsp::conformance;
use acp_lsp::gate::Gate;
use acp_lsp::lsp::config::Config;
use acp_lsp::lsp::registry::{Registry, RegistryOptions};
use acp_lsp::mcp::McpMode;
use acp_lsp::oneshot::{params_file, FileLocation, OneShot, RenameOutcome};
use acp_lsp::record::Recorder;
use anyhow::Context;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "acp-lsp",
    version,
    about = "Gives ACP coding agents real language-server intelligence"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct LogArgs {
    /// Log level or filter (tracing EnvFilter syntax), e.g. `info`, `acp_lsp=debug`.
    #[arg(long, default_value = "warn", global = true)]
    log_level: String,
    /// Write logs to this file instead of stderr.
    #[arg(long, global = true)]
    log_file: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Run in front of an ACP agent: `acp-lsp proxy -- AGENT [ARGS…]`.
    Proxy {
        /// Config file (default: $XDG_CONFIG_HOME/acp-lsp/config.toml).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Record every message to this file (JSON lines).
        #[arg(long)]
        record: Option<PathBuf>,
        /// Who answers lsp/* when the editor advertises `lsp` itself.
        #[arg(long, value_enum, default_value_t = LspMode::Auto)]
        lsp: LspMode,
        /// Start language servers on first use instead of on session/new.
        #[arg(long)]
        lazy: bool,
        /// Add acp-lsp's MCP server (language-server tools) to every session's mcpServers.
        #[arg(long, value_enum, default_value_t = McpMode::Auto)]
        mcp: McpMode,
        #[command(flatten)]
        log: LogArgs,
        /// The agent command and its arguments.
        #[arg(required = true, last = true)]
        agent: Vec<String>,
    },
    /// Send one LSP request through the gate and print the server's raw result.
    ///
    /// PARAMS_JSON is the LSP params; positions in it are zero-based, in the
    /// server's position encoding (UTF-16 unless configured), as in LSP.
    Request {
        /// An LSP client-to-server request method, e.g. `textDocument/hover`.
        method: String,
        /// The params as JSON, e.g. '{"textDocument":{"uri":"file:///…"},"position":{"line":0,"character":3}}'.
        params_json: String,
        /// The session root (default: the current folder).
        #[arg(long)]
        root: Option<PathBuf>,
        /// The server to ask, by name (default: the one for the file the params name).
        #[arg(long)]
        server: Option<String>,
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        log: LogArgs,
    },
    /// Rename the symbol at FILE:LINE:COL to NEW_NAME in every file, with the
    /// file's language server, and write the changes (atomically, all or nothing).
    ///
    /// LINE and COL are 1-based and COL counts characters, as editors show
    /// them; they are converted to the server's position encoding (UTF-16
    /// unless configured) before asking the server.
    Rename {
        /// Where the symbol is: FILE:LINE:COL.
        location: FileLocation,
        new_name: String,
        /// The session root; edits outside it are refused (default: the current folder).
        #[arg(long)]
        root: Option<PathBuf>,
        /// Print the unified diff instead of writing.
        #[arg(long)]
        dry_run: bool,
        /// Accept changes the server marks as needing confirmation.
        #[arg(long)]
        yes: bool,
        /// The server to ask, by name (default: the one for the file).
        #[arg(long)]
        server: Option<String>,
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        log: LogArgs,
    },
    /// The conformance suite of fixtures/: by default, play the normative
    /// scenarios as the agent and the editor against acp-lsp itself, or
    /// against the implementation given after `--` (`{agent}` marks where
    /// its agent command goes).
    #[command(args_conflicts_with_subcommands = true)]
    Conformance {
        #[command(subcommand)]
        action: Option<ConformanceAction>,
        /// The fixtures folder.
        #[arg(long, default_value = "fixtures")]
        fixtures: PathBuf,
        /// Only this scenario (repeatable).
        #[arg(long = "scenario")]
        scenarios: Vec<String>,
        #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
        format: ReportFormat,
        /// Also write the JSON report to this file.
        #[arg(long)]
        report: Option<PathBuf>,
        /// Replay the recordings against acp-lsp with stand-in servers (no
        /// language server needed; what `cargo test` runs).
        #[arg(long, conflicts_with = "record_fixtures")]
        replay: bool,
        /// Re-record every selected fixture against acp-lsp and the real
        /// language servers (rewrites session.jsonl and expect/).
        #[arg(long)]
        record_fixtures: bool,
        /// The implementation under test, e.g. `other-proxy --stdio -- {agent}`.
        #[arg(last = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// The MCP server the proxy adds to each session, as the agent starts it:
    /// bridges stdin/stdout to the running proxy. Not for use by hand.
    Mcp {
        /// The proxy's socket.
        #[arg(long)]
        connect: PathBuf,
        #[command(flatten)]
        log: LogArgs,
    },
    /// Show which language servers would run for a folder, and whether each is installed.
    Servers {
        /// The folder (default: the current one).
        dir: Option<PathBuf>,
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum ConformanceAction {
    /// Join stdin/stdout to a Unix socket (the runner's stand-in agent and servers).
    #[command(hide = true)]
    Bridge { socket: PathBuf },
    /// Be the ACP agent of an editor host that implements the `lsp` client
    /// capability: once the host opens a session on a copy of a scenario's
    /// workspace, play the normative scenarios for that folder against it.
    /// The verdict goes to stderr, to --report and to the reply to any prompt.
    Agent {
        /// The fixtures folder.
        #[arg(long)]
        fixtures: PathBuf,
        /// Only this scenario (repeatable).
        #[arg(long = "scenario")]
        scenarios: Vec<String>,
        /// Write the JSON report here.
        #[arg(long)]
        report: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ReportFormat {
    Table,
    Json,
}

/// A folder argument, or the current folder when it is absent.
fn or_current_dir(dir: Option<PathBuf>) -> std::io::Result<PathBuf> {
    dir.map_or_else(std::env::current_dir, Ok)
}

fn init_logging(log: &LogArgs) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(&log.log_level)
        .with_context(|| format!("invalid --log-level {:?}", log.log_level))?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match &log.log_file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log file {}", path.display()))?;
            builder
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .init();
        }
        // Never stdout: stdout carries the protocol.
        None => builder.with_writer(std::io::stderr).init(),
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Proxy {
            config,
            record,
            lsp,
            lazy,
            mcp,
            log,
            agent,
        } => {
            init_logging(&log)?;
            let config = Config::load(config.as_deref())?;
            let recorder = record
                .map(|path| {
                    Recorder::create(&path)
                        .with_context(|| format!("cannot create record file {}", path.display()))
                })
                .transpose()?;
            let runtime = tokio::runtime::Runtime::new()?;
            let code = runtime.block_on(proxy(config, recorder, lsp, lazy, mcp, agent))?;
            std::process::exit(code);
        }
        Command::Request {
            method,
            params_json,
            root,
            server,
            config,
            log,
        } => {
            init_logging(&log)?;
            let config = Config::load(config.as_deref())?;
            let params: serde_json::Value =
                serde_json::from_str(&params_json).context("PARAMS_JSON is not valid JSON")?;
            let root = or_current_dir(root)?;
            let runtime = tokio::runtime::Runtime::new()?;
            let result = runtime.block_on(async {
                let tool = OneShot::start(&root, config);
                let file = params_file(&params);
                let outcome = async {
                    let entry = tool.pick_server(server.as_deref(), file.as_deref()).await?;
                    let id = entry["serverId"].as_str().unwrap_or_default().to_string();
                    tool.request(&id, &method, params).await
                }
                .await;
                tool.shutdown().await;
                outcome
            })?;
            println!("{}", result.get());
            Ok(())
        }
        Command::Rename {
            location,
            new_name,
            root,
            dry_run,
            yes,
            server,
            config,
            log,
        } => {
            init_logging(&log)?;
            let config = Config::load(config.as_deref())?;
            let root = or_current_dir(root)?;
            let runtime = tokio::runtime::Runtime::new()?;
            let outcome = runtime.block_on(async {
                let tool = OneShot::start(&root, config);
                let outcome = tool
                    .rename(&location, &new_name, server.as_deref(), dry_run, yes)
                    .await;
                tool.shutdown().await;
                outcome
            })?;
            match outcome {
                RenameOutcome::DryRun(diff) => print!("{diff}"),
                RenameOutcome::Applied(report) => {
                    for path in &report.written {
                        println!("changed {}", path.display());
                    }
                    for path in &report.created {
                        println!("created {}", path.display());
                    }
                    for (from, to) in &report.renamed {
                        println!("renamed {} -> {}", from.display(), to.display());
                    }
                    for path in &report.deleted {
                        println!("deleted {}", path.display());
                    }
                }
            }
            Ok(())
        }
        Command::Conformance {
            action,
            fixtures,
            scenarios,
            format,
            report,
            replay,
            record_fixtures,
            command,
        } => {
            let runtime = tokio::runtime::Runtime::new()?;
            match action {
                Some(ConformanceAction::Bridge { socket }) => {
                    runtime
                        .block_on(acp_lsp::conformance::wire::bridge(&socket))
                        .with_context(|| format!("bridge to {}", socket.display()))?;
                    return Ok(());
                }
                Some(ConformanceAction::Agent {
                    fixtures,
                    scenarios,
                    report,
                }) => return conformance_agent(&runtime, &fixtures, &scenarios, report),
                None => {}
            }
            let exe = std::env::current_exe().context("cannot find this executable")?;
            let selected = conformance::suite::select(&fixtures, &scenarios)?;
            let outcomes = runtime.block_on(async {
                if record_fixtures {
                    conformance::suite::record_all(&selected, &exe).await
                } else if replay {
                    conformance::suite::replay_all(&selected, &exe).await
                } else {
                    conformance::suite::normative_all(&selected, &exe, command).await
                }
            })?;
            let json = serde_json::to_string_pretty(&outcomes)?;
            if let Some(path) = &report {
                std::fs::write(path, &json)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            match format {
                ReportFormat::Table => print!("{}", conformance::report::table(&outcomes)),
                ReportFormat::Json => println!("{json}"),
            }
            std::process::exit(if outcomes.iter().all(|o| o.passed) {
                0
            } else {
                1
            });
        }
        Command::Mcp { connect, log } => {
            init_logging(&log)?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let outcome = runtime.block_on(acp_lsp::mcp::bridge::run(&connect));
            // The blocked read of stdin would hold a plain drop of the runtime
            // until the agent closes our stdin; the proxy's side is gone already.
            runtime.shutdown_background();
            outcome?;
            Ok(())
        }
        Command::Servers { dir, config } => {
            let config = Config::load(config.as_deref())?;
            let dir = or_current_dir(dir)?;
            print!("{}", acp_lsp::lsp::detect::health_report(&dir, &config));
            Ok(())
        }
    }
}

/// `acp-lsp conformance agent`: stdout is the ACP connection to the host.
fn conformance_agent(
    runtime: &tokio::runtime::Runtime,
    fixtures: &std::path::Path,
    names: &[String],
    report: Option<PathBuf>,
) -> anyhow::Result<()> {
    let selected = conformance::suite::select(fixtures, names)?;
    let mut report_error = None;
    let outcomes = runtime.block_on(conformance::drive::serve_host(
        &selected,
        |outcomes, skipped| {
            let mut text = conformance::report::table(outcomes);
            for (name, why) in skipped {
                text.push_str(&format!("not run: {name}: {why}\n"));
            }
            eprint!("{text}");
            if let Some(path) = &report {
                let json = serde_json::to_string_pretty(outcomes).unwrap_or_default();
                if let Err(e) = std::fs::write(path, json) {
                    report_error = Some(format!("cannot write {}: {e}", path.display()));
                }
            }
            text
        },
    ));
    if let Some(e) = report_error {
        anyhow::bail!(e);
    }
    std::process::exit(if outcomes.iter().all(|o| o.passed) {
        0
    } else {
        1
    });
}

async fn proxy(
    config: Config,
    recorder: Option<Recorder>,
    lsp_mode: LspMode,
    lazy: bool,
    mcp_mode: McpMode,
    agent: Vec<String>,
) -> anyhow::Result<i32> {
    let (program, args) = agent.split_first().context("no agent command given")?;
    // From before the agent starts to the very end: a signal never kills the
    // proxy half-way, it ends the agent (agent_process).
    let mut signals = Signals::install().context("cannot install signal handlers")?;
    let (mut child, agent_in, agent_out) = AgentProcess::spawn(program, args)
        .with_context(|| format!("cannot start agent {program:?}"))?;

    let gate_config = config.gate_config();
    let registry = Registry::new(
        config,
        RegistryOptions {
            lazy,
            recorder: recorder.clone(),
            max_watches: None,
        },
    );
    let gate = Gate::new(Arc::clone(&registry), gate_config);
    // Kept to the end: dropping it removes the socket and its directory.
    let (mcp_relay, _mcp_listeners) = match mcp_mode {
        McpMode::Off => (None, None),
        McpMode::Stdio | McpMode::Auto => {
            let (relay, listeners) = start_mcp(&gate, mcp_mode == McpMode::Auto)
                .await
                .context("cannot start the MCP server")?;
            (Some(relay), Some(listeners))
        }
    };
    let (eof_tx, eof_rx) = tokio::sync::oneshot::channel::<()>();
    let relay = relay::run(
        gate,
        tokio::io::stdin(),
        tokio::io::stdout(),
        agent_in,
        agent_out,
        RelayOptions {
            lsp_mode,
            recorder: recorder.clone(),
            mcp: mcp_relay,
        },
        move || {
            let _ = eof_tx.send(());
        },
    );
    let outcome = agent_process::supervise(&mut child, &mut signals, relay, eof_rx).await;
    tracing::debug!(stop = ?outcome.stop, relay = ?outcome.relay_end, "relay over");
    // A further signal stops waiting for the language servers: the orphan
    // guardian ends their groups when this process exits.
    tokio::select! {
        _ = registry.shutdown() => {}
        name = signals.recv() => {
            tracing::warn!(signal = name, "not waiting for the language servers to shut down");
        }
    }
    if let Some(recorder) = &recorder {
        recorder.sync();
    }
    let status = outcome.status;
    Ok(status.and_then(|s| s.code()).unwrap_or(1))
}

/// The listeners the injected MCP entries connect to (the private socket, and
/// with `http` the loopback HTTP server), and what the relay needs to inject
/// them. Dropping the listeners stops them and removes the socket.
async fn start_mcp(
    gate: &Arc<Gate<Registry>>,
    http: bool,
) -> anyhow::Result<(
    acp_lsp::mcp::McpRelay,
    (
        acp_lsp::mcp::socket::McpSocket,
        Option<acp_lsp::mcp::http::McpHttp>,
    ),
)> {
    use acp_lsp::mcp::{
        editor::EditorFs,
        inject::{HttpEntry, StdioEntry},
        tokens::TokenTable,
    };
    let random = acp_lsp::mcp::random_hex()?;
    let tokens = Arc::new(TokenTable::new());
    let editor = Arc::new(EditorFs::new(&random));
    let socket = acp_lsp::mcp::socket::McpSocket::bind(
        Arc::clone(gate),
        Arc::clone(&tokens),
        Some(Arc::clone(&editor)),
        &random,
        acp_lsp::mcp::tools::READY_WAIT,
    )?;
    let entry = StdioEntry {
        command: std::env::current_exe().context("cannot find the acp-lsp executable")?,
        socket: socket.path().to_path_buf(),
    };
    let http_server = if http {
        Some(
            acp_lsp::mcp::http::McpHttp::bind(
                Arc::clone(gate),
                Arc::clone(&tokens),
                Some(Arc::clone(&editor)),
                acp_lsp::mcp::tools::READY_WAIT,
            )
            .await?,
        )
    } else {
        None
    };
    let http = http_server
        .as_ref()
        .map(|server| HttpEntry { url: server.url() });
    Ok((
        acp_lsp::mcp::McpRelay {
            tokens,
            entry,
            http,
            editor,
        },
        (socket, http_server),
    ))
}
