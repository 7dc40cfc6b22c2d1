//! The command line's arguments (clap): every command, flag and value type
//! of the `acp-lsp` binary; `main.rs` runs them.

use acp_lsp::acp::relay::LspMode;
use acp_lsp::mcp::McpMode;
use acp_lsp::session_facade::FileLocation;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// What `--version` says: this program, and the protocols it speaks.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\nACP protocol versions: 1, and 2 (draft)",
    "\nRFD: LSP over ACP, `lsp/servers` and `lsp/request` (rfd/lsp-over-acp.md, from the ACP RFD \"LSP proxy methods\"); also as _lsp/* and _zed.dev/lsp/*",
    "\nMCP: streamable HTTP and stdio (tools over the same gate)",
);

#[derive(Parser)]
#[command(
    name = "acp-lsp",
    version = VERSION,
    about = "Gives ACP coding agents real language-server intelligence"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(clap::Args)]
pub(crate) struct LogArgs {
    /// Log level or filter (tracing EnvFilter syntax), e.g. `info`, `acp_lsp=debug`.
    /// A bare level is for acp-lsp's own lines; other crates stay at `warn`
    /// unless named (`info,rmcp=debug`).
    #[arg(long, default_value = "warn", global = true)]
    pub(crate) log_level: String,
    /// Write logs to this file instead of stderr.
    #[arg(long, global = true)]
    pub(crate) log_file: Option<PathBuf>,
    /// `text`: one line per event for people; `json`: one JSON object per
    /// event (fields and spans as members) for machines.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub(crate) log_format: LogFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
pub(crate) enum DaemonAction {
    /// Run the daemon (`proxy --shared` starts it; it exits when it has
    /// neither clients nor servers).
    Run {
        /// Config file (default: $XDG_CONFIG_HOME/acp-lsp/config.toml).
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        log: LogArgs,
    },
    /// List the running daemon's clients, servers, memory and uptime.
    Status {
        /// The config file the proxies were given (one daemon per config).
        #[arg(long)]
        config: Option<PathBuf>,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// The shared per-user daemon behind `proxy --shared`.
    Daemon {
        #[command(subcommand)]
        action: DaemonAction,
    },
    /// Run in front of an ACP agent: `acp-lsp proxy -- AGENT [ARGS…]`; or,
    /// with `--chain`, as one proxy of a conductor's chain.
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
        /// Share language servers with other proxies of this user through
        /// one daemon, started on first use (also the config key `shared`).
        #[arg(long)]
        shared: bool,
        /// Install a server a session needs that is not installed, in the
        /// background (also the config key `auto_install`; see `acp-lsp install`).
        #[arg(long)]
        auto_install: bool,
        #[command(flatten)]
        log: LogArgs,
        /// Be one proxy of a proxy chain: the conductor (e.g.
        /// agent-client-protocol-conductor) is on stdin/stdout and sends
        /// proxy/initialize; no agent is started.
        #[arg(long, conflicts_with = "agent")]
        chain: bool,
        /// The agent command and its arguments.
        #[arg(required_unless_present = "chain", last = true)]
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
        /// Use the shared daemon's servers (started if needed; also the
        /// config key `shared`). Without it, a daemon that runs is used.
        #[arg(long)]
        shared: bool,
        /// Config file (default: $XDG_CONFIG_HOME/acp-lsp/config.toml).
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
        /// The symbol's new name, as it should appear in the code.
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
        /// Use the shared daemon's servers (as for `request`).
        #[arg(long)]
        shared: bool,
        /// Config file (default: $XDG_CONFIG_HOME/acp-lsp/config.toml).
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
        /// Config file (default: $XDG_CONFIG_HOME/acp-lsp/config.toml).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Print the built-in server table as TOML (the config file's format) and exit.
        #[arg(long)]
        print_builtins: bool,
        /// One row per server and root, with why each was picked, its
        /// project-code setting and the read-only roots.
        #[arg(long, conflicts_with = "json")]
        verbose: bool,
        /// Everything as one JSON object (for scripts).
        #[arg(long)]
        json: bool,
    },
    /// Install language servers into acp-lsp's own prefix (under your data
    /// directory; never system-wide, never with sudo), each pinned to a
    /// version with its checksum: `acp-lsp install pyright ruff`, or what
    /// the projects under a folder need (`--for .`, the default with no
    /// names; a trusted project's `.acp-lsp.toml` pins servers and versions).
    Install {
        /// Servers by name, as `acp-lsp servers` names them.
        servers: Vec<String>,
        /// Install what the projects under this folder need.
        #[arg(long = "for", value_name = "PATH", conflicts_with = "servers")]
        for_path: Option<PathBuf>,
        /// Config file (default: $XDG_CONFIG_HOME/acp-lsp/config.toml).
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        log: LogArgs,
    },
    /// Remove servers `acp-lsp install` installed (by name, or `--all`).
    Uninstall {
        /// Servers by name.
        servers: Vec<String>,
        /// Every server acp-lsp installed.
        #[arg(long, conflicts_with = "servers")]
        all: bool,
        /// Config file (default: $XDG_CONFIG_HOME/acp-lsp/config.toml).
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        log: LogArgs,
    },
    /// Build SCIP indexes of a project (rust-analyzer scip, scip-python,
    /// scip-typescript) where a session on it finds them, with the sidecar
    /// that lets acp-lsp answer from them before the live servers are ready.
    Index(crate::index::IndexArgs),
}

#[derive(Subcommand)]
pub(crate) enum ConformanceAction {
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
pub(crate) enum ReportFormat {
    Table,
    Json,
}

pub(crate) struct RenameArgs {
    pub(crate) location: FileLocation,
    pub(crate) new_name: String,
    pub(crate) root: Option<PathBuf>,
    pub(crate) dry_run: bool,
    pub(crate) yes: bool,
    pub(crate) server: Option<String>,
    pub(crate) shared: bool,
    pub(crate) config: Option<PathBuf>,
    pub(crate) log: LogArgs,
}

pub(crate) struct ConformanceArgs {
    pub(crate) action: Option<ConformanceAction>,
    pub(crate) fixtures: PathBuf,
    pub(crate) scenarios: Vec<String>,
    pub(crate) format: ReportFormat,
    pub(crate) report: Option<PathBuf>,
    pub(crate) replay: bool,
    pub(crate) record_fixtures: bool,
    pub(crate) command: Vec<std::ffi::OsString>,
}
