//! The `acp-lsp` command line.

use acp_lsp::acp::relay::{self, LspMode, RelayOptions};
use acp_lsp::agent_process::{self, AgentProcess, Signals};
use acp_lsp::cli::progress::Progress;
use acp_lsp::cli::UsageError;
use acp_lsp::conformance;
use acp_lsp::daemon::client::RemoteHost;
use acp_lsp::lsp::config::Config;
use acp_lsp::lsp::registry::{Registry, RegistryOptions};
use acp_lsp::mcp::McpMode;
use acp_lsp::proxy_host::ProxyHost;
use acp_lsp::record::Recorder;
use acp_lsp::session_facade::{
    params_file, FacadeError, RenameError, RenameOutcome, SessionFacade,
};
use acp_lsp_core::gate::Gate;
use anyhow::Context;
use clap::Parser;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[path = "main/args.rs"]
mod args;
#[path = "main/chain.rs"]
mod chain;
#[path = "main/index.rs"]
mod index;
#[path = "main/install.rs"]
mod install;

use args::{
    Cli, Command, ConformanceAction, ConformanceArgs, DaemonAction, LogArgs, LogFormat, RenameArgs,
    ReportFormat,
};

fn init_logging(log: &LogArgs) -> anyhow::Result<()> {
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    // A bare level is acp-lsp's story; the libraries it uses stay at `warn`
    // unless named (`info,rmcp=info`).
    let directives = match log.log_level.parse::<tracing::Level>() {
        Ok(level) => format!("warn,acp_lsp={level}"),
        Err(_) => log.log_level.clone(),
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&directives).map_err(|e| {
        UsageError::new(format!(
            "--log-level {:?} is not a level or filter ({e}); try `info` or `acp_lsp=debug`",
            log.log_level
        ))
    })?;
    let (writer, ansi) = match &log.log_file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log file {}", path.display()))?;
            (BoxMakeWriter::new(std::sync::Mutex::new(file)), false)
        }
        // Never stdout: stdout carries the protocol.
        None => (
            BoxMakeWriter::new(std::io::stderr),
            std::io::stderr().is_terminal(),
        ),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    match log.log_format {
        LogFormat::Text => builder.with_ansi(ansi).init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .init(),
    }
    Ok(())
}

/// The config file: the one given (which must exist), else the user's.
fn load_config(explicit: Option<&Path>) -> anyhow::Result<Config> {
    let mut config = load_config_file(explicit)?;
    discover_roots(&mut config);
    Ok(config)
}

/// The config file alone, without the toolchain discovery (which runs
/// `rustc`: the proxy runs it while its agent starts).
fn load_config_file(explicit: Option<&Path>) -> anyhow::Result<Config> {
    if let Some(path) = explicit.filter(|p| !p.is_file()) {
        return Err(UsageError::new(format!(
            "--config {}: no such file (the default is $XDG_CONFIG_HOME/acp-lsp/config.toml)",
            path.display()
        ))
        .into());
    }
    Ok(Config::load(explicit)?)
}

/// Definitions in the toolchain's sources (std, registry crates,
/// site-packages) can then be followed.
fn discover_roots(config: &mut Config) {
    if let Ok(cwd) = std::env::current_dir() {
        acp_lsp::lsp::toolchain::add_discovered_roots(config, &cwd);
    }
}

/// Exit code 2: the command was called wrongly (as clap's own usage errors).
const EXIT_USAGE: u8 = 2;
/// Exit code 1: something failed.
const EXIT_FAILURE: u8 = 1;

/// Whether an error is a usage error: the user called the command wrongly.
fn is_usage(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause.is::<UsageError>()
            || cause
                .downcast_ref::<RenameError>()
                .is_some_and(RenameError::is_usage)
            || cause
                .downcast_ref::<FacadeError>()
                .is_some_and(FacadeError::is_usage)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = run(cli);
    acp_lsp::lsp::process::release_orphan_guardian();
    match outcome {
        Ok(code) => code,
        // The one place errors reach people: each cause once, no backtrace.
        Err(error) => {
            eprint!("{}", acp_lsp::cli::render(error.as_ref()));
            ExitCode::from(if is_usage(&error) {
                EXIT_USAGE
            } else {
                EXIT_FAILURE
            })
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Proxy {
            config,
            record,
            lsp,
            lazy,
            mcp,
            shared,
            auto_install,
            log,
            chain,
            agent,
        } => run_proxy(
            config,
            record,
            lsp,
            (lazy, auto_install),
            mcp,
            shared,
            &log,
            chain,
            agent,
        ),
        Command::Daemon { action } => run_daemon(action),
        Command::Request {
            method,
            params_json,
            root,
            server,
            shared,
            config,
            log,
        } => run_request(method, &params_json, root, (server, shared), config, &log),
        Command::Rename {
            location,
            new_name,
            root,
            dry_run,
            yes,
            server,
            shared,
            config,
            log,
        } => run_rename(RenameArgs {
            location,
            new_name,
            root,
            dry_run,
            yes,
            server,
            shared,
            config,
            log,
        }),
        Command::Conformance {
            action,
            fixtures,
            scenarios,
            format,
            report,
            replay,
            record_fixtures,
            command,
        } => run_conformance(ConformanceArgs {
            action,
            fixtures,
            scenarios,
            format,
            report,
            replay,
            record_fixtures,
            command,
        }),
        Command::Mcp { connect, log } => run_mcp(&connect, &log),
        Command::Servers {
            print_builtins: true,
            ..
        } => {
            print!("{}", acp_lsp::lsp::config::BUILTIN_TOML);
            Ok(ExitCode::SUCCESS)
        }
        Command::Servers {
            dir,
            config,
            verbose,
            json,
            ..
        } => run_servers(dir, config, verbose, json),
        Command::Install {
            servers,
            for_path,
            config,
            log,
        } => install::run_install(servers, for_path, config, &log),
        Command::Uninstall {
            servers,
            all,
            config,
            log,
        } => install::run_uninstall(servers, all, config, &log),
        Command::Index(args) => index::run(args),
    }
}

/// `acp-lsp proxy`.
#[allow(clippy::too_many_arguments)] // one per flag of the subcommand
fn run_proxy(
    config: Option<PathBuf>,
    record: Option<PathBuf>,
    lsp: LspMode,
    (lazy, auto_install): (bool, bool),
    mcp: McpMode,
    shared: bool,
    log: &LogArgs,
    chain: bool,
    agent: Vec<String>,
) -> anyhow::Result<ExitCode> {
    init_logging(log)?;
    let config_file = config;
    let config = load_config_file(config_file.as_deref())?;
    let recorder = record
        .map(|path| {
            Recorder::create(&path)
                .with_context(|| format!("cannot create record file {}", path.display()))
        })
        .transpose()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let shared = if shared || config.shared {
        if lazy {
            tracing::info!("--shared: --lazy is the daemon's choice");
        }
        Some((
            acp_lsp::daemon::paths::Paths::for_config(config_file.as_deref())?,
            acp_lsp::daemon::client::Launcher {
                program: std::env::current_exe().context("cannot find the acp-lsp executable")?,
                log_level: log.log_level.clone(),
            },
        ))
    } else {
        None
    };
    let code = if chain {
        runtime.block_on(chain::chain_proxy(
            config,
            shared,
            recorder,
            lsp,
            (lazy, auto_install),
            mcp,
        ))?
    } else {
        runtime.block_on(proxy(
            config,
            shared,
            recorder,
            lsp,
            (lazy, auto_install),
            mcp,
            agent,
        ))?
    };
    acp_lsp::lsp::process::release_orphan_guardian();
    std::process::exit(code);
}

/// `acp-lsp daemon run|status` (`acp_lsp::daemon`).
fn run_daemon(action: DaemonAction) -> anyhow::Result<ExitCode> {
    match action {
        DaemonAction::Run { config, log } => {
            init_logging(&log)?;
            let paths = acp_lsp::daemon::paths::Paths::for_config(config.as_deref())?;
            let config = load_config(config.as_deref())?;
            let runtime = tokio::runtime::Runtime::new()?;
            let outcome = runtime.block_on(acp_lsp::daemon::serve::run(config, paths))?;
            tracing::info!(?outcome, "daemon over");
            Ok(ExitCode::SUCCESS)
        }
        DaemonAction::Status { config, json } => {
            let paths = acp_lsp::daemon::paths::Paths::for_config(config.as_deref())?;
            let runtime = tokio::runtime::Runtime::new()?;
            let status = runtime.block_on(acp_lsp::daemon::status::query(&paths))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print!("{}", acp_lsp::daemon::status::render(&status));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `acp-lsp request`.
fn run_request(
    method: String,
    params_json: &str,
    root: Option<PathBuf>,
    (server, shared): (Option<String>, bool),
    config_file: Option<PathBuf>,
    log: &LogArgs,
) -> anyhow::Result<ExitCode> {
    init_logging(log)?;
    let config = load_config(config_file.as_deref())?;
    let params: serde_json::Value = serde_json::from_str(params_json)
        .map_err(|e| UsageError::new(format!("PARAMS_JSON is not valid JSON: {e}")))?;
    let root = existing_dir(root, "--root")?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let tool = cli_session(&root, config, shared, config_file.as_deref(), log)?;
        let progress = Progress::start(method.clone(), tool.registry().cloned());
        let file = params_file(&params);
        let outcome = async {
            let entry = tool.pick_server(server.as_deref(), file.as_deref()).await?;
            tool.request(&entry.server_id, &method, params).await
        }
        .await;
        // The answer as soon as it is there; the servers stop after.
        if let Ok(result) = &outcome {
            progress.set_activity("stopping the language server");
            println!("{}", result.get());
        }
        tool.finish().await;
        progress.finish().await;
        outcome?;
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The command line's session: on the shared daemon when asked (`--shared`,
/// `shared = true`) or when it runs already, else with servers of its own.
fn cli_session(
    root: &Path,
    config: Config,
    shared: bool,
    config_file: Option<&Path>,
    log: &LogArgs,
) -> anyhow::Result<SessionFacade> {
    let paths = acp_lsp::daemon::paths::Paths::for_config(config_file)?;
    if acp_lsp::session_facade::use_shared_daemon(shared || config.shared, &paths) {
        tracing::info!(shared = %paths.socket.display(), "servers of the shared daemon");
        let launcher = acp_lsp::daemon::client::Launcher {
            program: std::env::current_exe().context("cannot find the acp-lsp executable")?,
            log_level: log.log_level.clone(),
        };
        return Ok(SessionFacade::start_shared(root, &config, paths, launcher));
    }
    Ok(SessionFacade::start(root, config))
}

/// `acp-lsp rename`.
fn run_rename(args: RenameArgs) -> anyhow::Result<ExitCode> {
    let RenameArgs {
        location,
        new_name,
        root,
        dry_run,
        yes,
        server,
        shared,
        config,
        log,
    } = args;
    init_logging(&log)?;
    let config_file = config;
    let config = load_config(config_file.as_deref())?;
    let root = existing_dir(root, "--root")?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let tool = cli_session(&root, config, shared, config_file.as_deref(), &log)?;
        let progress = Progress::start(
            format!("rename {location} → {new_name}"),
            tool.registry().cloned(),
        );
        let outcome = tool
            .rename(&location, &new_name, server.as_deref(), dry_run, yes)
            .await;
        // What was done as soon as it is done; the servers stop after.
        if let Ok(outcome) = &outcome {
            progress.set_activity("stopping the language server");
            print_rename(outcome, &location, &new_name);
        }
        tool.finish().await;
        progress.finish().await;
        outcome?;
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// What `rename` did, on stdout (the unchanged case on stderr).
fn print_rename(
    outcome: &RenameOutcome,
    location: &acp_lsp::session_facade::FileLocation,
    new_name: &str,
) {
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
        RenameOutcome::Unchanged => {
            eprintln!("nothing to change: the symbol at {location} is already named {new_name}");
        }
    }
}

/// `acp-lsp conformance`.
fn run_conformance(args: ConformanceArgs) -> anyhow::Result<ExitCode> {
    let ConformanceArgs {
        action,
        fixtures,
        scenarios,
        format,
        report,
        replay,
        record_fixtures,
        command,
    } = args;
    let runtime = tokio::runtime::Runtime::new()?;
    match action {
        Some(ConformanceAction::Bridge { socket }) => {
            runtime
                .block_on(acp_lsp::conformance::wire::bridge(&socket))
                .with_context(|| format!("bridge to {}", socket.display()))?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(ConformanceAction::Agent {
            fixtures,
            scenarios,
            report,
        }) => return conformance_agent(&runtime, &fixtures, &scenarios, report),
        None => {}
    }
    let exe = std::env::current_exe().context("cannot find this executable")?;
    if !fixtures.is_dir() {
        return Err(UsageError::new(format!(
            "--fixtures {}: no such folder (run from the acp-lsp checkout, or pass --fixtures)",
            fixtures.display()
        ))
        .into());
    }
    let selected = conformance::suite::select(&fixtures, &scenarios)?;
    let total = selected.len();
    let mut done = 0;
    // One line per scenario as it finishes: a run takes seconds per scenario.
    let finished = |outcome: &conformance::report::Outcome| {
        done += 1;
        eprintln!(
            "conformance [{done}/{total}] {outcome} in {:.1} s",
            outcome.millis as f64 / 1000.0
        );
    };
    let outcomes = runtime.block_on(async {
        if record_fixtures {
            conformance::suite::record_all(&selected, &exe, finished).await
        } else if replay {
            conformance::suite::replay_all(&selected, &exe, finished).await
        } else {
            conformance::suite::normative_all(&selected, &exe, command, finished).await
        }
    })?;
    let json = serde_json::to_string_pretty(&outcomes)?;
    if let Some(path) = &report {
        std::fs::write(path, &json).with_context(|| format!("cannot write {}", path.display()))?;
    }
    match format {
        ReportFormat::Table => print!("{}", conformance::report::table(&outcomes)),
        ReportFormat::Json => println!("{json}"),
    }
    Ok(if outcomes.iter().all(|o| o.passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `acp-lsp mcp --connect`.
fn run_mcp(connect: &std::path::Path, log: &LogArgs) -> anyhow::Result<ExitCode> {
    init_logging(log)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(acp_lsp::mcp::bridge::run(connect));
    // The blocked read of stdin would hold a plain drop of the runtime
    // until the agent closes our stdin; the proxy's side is gone already.
    runtime.shutdown_background();
    outcome?;
    Ok(ExitCode::SUCCESS)
}

/// `acp-lsp servers`.
fn run_servers(
    dir: Option<PathBuf>,
    config: Option<PathBuf>,
    verbose: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let config = load_config(config.as_deref())?;
    let dir = existing_dir(dir, "the folder")?;
    let dir = dir.canonicalize().unwrap_or(dir);
    let runtime = tokio::runtime::Runtime::new()?;
    // Detection walks the folder: a big tree takes a while.
    let report = runtime.block_on(async {
        let progress = Progress::start(format!("looking for projects in {}", dir.display()), None);
        let scan = tokio::task::spawn_blocking(move || {
            use acp_lsp::lsp::health;
            let survey = health::survey(&dir, &config);
            if json {
                format!("{:#}\n", health::json(&survey))
            } else if verbose {
                health::verbose(&survey)
            } else {
                health::brief(&survey)
            }
        })
        .await;
        progress.finish().await;
        scan
    })?;
    print!("{report}");
    Ok(ExitCode::SUCCESS)
}

/// A folder argument that must exist (`what` names it in the error), or the
/// current folder when it is absent.
fn existing_dir(dir: Option<PathBuf>, what: &str) -> anyhow::Result<PathBuf> {
    let Some(dir) = dir else {
        return Ok(std::env::current_dir()?);
    };
    match std::fs::metadata(&dir) {
        Ok(meta) if meta.is_dir() => Ok(dir),
        Ok(_) => Err(UsageError::new(format!(
            "{what} {} is a file, not a folder; give the project's folder",
            dir.display()
        ))
        .into()),
        Err(e) => Err(UsageError::new(format!("{what} {}: {e}", dir.display())).into()),
    }
}

/// `acp-lsp conformance agent`: stdout is the ACP connection to the host.
fn conformance_agent(
    runtime: &tokio::runtime::Runtime,
    fixtures: &std::path::Path,
    names: &[String],
    report: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let selected = conformance::suite::select(fixtures, names)?;
    let mut report_error = None;
    let outcomes = runtime.block_on(conformance::drive::serve_host(
        &selected,
        |outcomes, skipped| {
            let mut text = conformance::report::table(outcomes);
            for (name, why) in skipped {
                text.push_str(&format!("not run: {name}: {why}\n"));
            }
            // The report first: whoever reads the table on stderr may then
            // read the report.
            if let Some(path) = &report {
                let json = serde_json::to_string_pretty(outcomes).unwrap_or_default();
                if let Err(e) = std::fs::write(path, json) {
                    report_error = Some(format!("cannot write {}: {e}", path.display()));
                }
            }
            eprint!("{text}");
            text
        },
    ));
    if let Some(e) = report_error {
        anyhow::bail!(e);
    }
    Ok(if outcomes.iter().all(|o| o.passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn proxy(
    config: Config,
    shared: Option<(
        acp_lsp::daemon::paths::Paths,
        acp_lsp::daemon::client::Launcher,
    )>,
    recorder: Option<Recorder>,
    lsp_mode: LspMode,
    (lazy, auto_install): (bool, bool),
    mcp_mode: McpMode,
    agent: Vec<String>,
) -> anyhow::Result<i32> {
    let (program, args) = agent.split_first().context("no agent command given")?;
    // From before the agent starts to the very end: a signal never kills the
    // proxy half-way, it ends the agent (agent_process).
    let mut signals = Signals::install().context("cannot install signal handlers")?;
    let (mut child, agent_in, agent_out) = AgentProcess::spawn(program, args)
        .with_context(|| format!("cannot start agent {program:?}"))?;
    tracing::info!(command = %agent.join(" "), pid = child.pid(), "agent spawned");
    // While the agent starts: `rustc --print sysroot` alone takes 50-100 ms,
    // which came before the agent's own start-up.
    let config = tokio::task::spawn_blocking(move || {
        let mut config = config;
        discover_roots(&mut config);
        config
    })
    .await
    .context("toolchain discovery failed")?;

    let gate_config = config.gate_config();
    let mcp_http = config.mcp_http;
    // Held to the end: shutdown begins at the first signal (below).
    let (host, _closing_on_signal) = match shared {
        // The servers are the daemon's (reached, or started, at the first
        // session); this proxy keeps the relay, the gate and the MCP tools.
        Some((paths, launcher)) => {
            tracing::info!(shared = %paths.socket.display(), "servers shared through the daemon");
            (ProxyHost::Shared(RemoteHost::new(paths, launcher)), None)
        }
        None => {
            let registry = Registry::new(
                config,
                RegistryOptions {
                    lazy,
                    start_when_listed: true,
                    recorder: recorder.clone(),
                    max_watches: None,
                    auto_install,
                },
            );
            // Shutdown begins at the first signal, while the agent is being
            // ended: a client that signals the whole process tree (acpx)
            // stops the servers too, and they must not be restarted.
            let closing = registry
                .begin_shutdown_on_signal()
                .context("cannot install signal handlers")?;
            (ProxyHost::Local(registry), Some(closing))
        }
    };
    let gate = Gate::new(Arc::new(host), gate_config);
    // Kept to the end: dropping it removes the socket and its directory.
    let (mcp_relay, _mcp_listeners) = match mcp_mode {
        McpMode::Off => (None, None),
        McpMode::Stdio | McpMode::Auto => {
            let (relay, listeners) =
                acp_lsp::mcp::start::start(&gate, mcp_mode == McpMode::Auto, mcp_http)
                    .await
                    .context("cannot start the MCP server")?;
            (Some(relay), Some(listeners))
        }
    };
    let (eof_tx, eof_rx) = tokio::sync::oneshot::channel::<()>();
    let sessions = Arc::clone(&gate);
    // A task of its own: polled inside `block_on`, the relay ran on the
    // main thread, and every line from the agent woke that thread from the
    // worker that read it (and polled the signal futures again).
    let relay = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(relay::run(
        gate,
        acp_lsp::acp::stdio::editor_input(),
        acp_lsp::acp::stdio::editor_output(),
        agent_in.output(),
        agent_out,
        RelayOptions {
            lsp_mode,
            recorder: recorder.clone(),
            mcp: mcp_relay,
        },
        move || {
            let _ = eof_tx.send(());
        },
    )));
    let relay = async move {
        match relay.await {
            Ok(end) => end,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Only aborted by dropping this future, which then awaits no more.
            Err(_) => relay::RelayEnd::EditorGone,
        }
    };
    let outcome = agent_process::supervise(&mut child, &mut signals, relay, eof_rx).await;
    tracing::debug!(stop = ?outcome.stop, relay = ?outcome.relay_end, "relay over");
    // Sessions the editor never closed end with the proxy (their log line says so).
    for session in sessions.sessions().all() {
        sessions.close_session(session.id());
    }
    // A further signal stops waiting for the language servers: the orphan
    // guardian ends their groups when this process exits. Shared servers
    // stay with the daemon (the other proxies, then its idle grace).
    tokio::select! {
        _ = sessions.host().shutdown() => {}
        name = signals.recv() => {
            tracing::warn!(signal = name, "not waiting for the language servers to shut down");
        }
    }
    if let Some(recorder) = &recorder {
        recorder.sync();
    }
    let status = outcome.status;
    match &status {
        Some(status) => tracing::info!(%status, "agent exited"),
        None => tracing::warn!("agent killed: it did not exit in time"),
    }
    Ok(status.and_then(|s| s.code()).unwrap_or(1))
}
