//! Server definitions: built-ins, the user file and trusted project files.
//!
//! This file holds [`Config`], the file format and the merge of a file over
//! a configuration; `config/server.rs` one `[servers.NAME]` entry and its patch,
//! `project_code.rs` the `project_code` setting, `span.rs` error locations,
//! `paths.rs` path expansion. The built-in table is `builtins.toml`
//! ([`BUILTIN_TOML`]), read by the same parser as a user file.
//!
//! # Where configuration comes from
//!
//! 1. The built-in server table ([`Config::builtin`]). A built-in only runs when its binary
//!    is on `PATH` (decided by the caller with [`crate::lsp::detect::find_on_path`]).
//! 2. The user file: `$XDG_CONFIG_HOME/acp-lsp/config.toml` (or `~/.config/acp-lsp/config.toml`)
//!    when it exists, or the file given explicitly on the command line (which must exist).
//! 3. A project file `.acp-lsp.toml` in a session root, read only when that root lies under one
//!    of the `trusted_projects` (a project file can name programs to run, so an untrusted
//!    checkout never gets to choose them). A project file may not set `trusted_projects`.
//!
//! Each file is merged over the result of the previous step.
//!
//! # File format
//!
//! ```toml
//! # acp-lsp config
//! read_only_roots = ["~/.rustup/toolchains"]     # ~ expanded; relative paths are relative to this file
//! allowed_uri_schemes = []
//! skip_dirs = ["target", "node_modules"]          # replaces the default list (directory names)
//! idle_grace_ms = 30000
//! trusted_projects = ["~/src/work"]
//!
//! [servers.rust-analyzer]                          # overrides fields of the built-in of that name (only the given keys)
//! settings = { "rust-analyzer" = { checkOnSave = false } }
//!
//! [servers.pyright]
//! enabled = false
//!
//! [servers.ruff]                                   # a new server: command, language_ids, file_extensions required
//! command = "ruff"
//! args = ["server"]
//! language_ids = ["python"]
//! file_extensions = ["py"]
//! root_markers = ["pyproject.toml", "ruff.toml"]
//! ```
//!
//! Top-level keys: `read_only_roots`, `discover_read_only_roots` (default `true`: add the
//! toolchain's source roots, see `lsp::toolchain`), `allowed_uri_schemes`, `skip_dirs`, `idle_grace_ms`,
//! `trusted_projects`, `project_code` (`"run"` or `"off"`, see [`ProjectCode`]),
//! `max_requests_per_session`, `max_requests_total` (the gate's quotas), `mcp_http`
//! (a table: `max_body_bytes`, `max_concurrent`, `read_timeout_ms`), `servers`,
//! `shared` (`true`: `acp-lsp proxy` acts as with `--shared`, see `crate::daemon`),
//! `indexes` (a table: `paths`, `conventional`, `max_occurrences`, `max_bytes`; see `crate::scip::config`),
//! `auto_install` (`true`: a session installs a needed server it lacks, see
//! `lsp::registry`), and `[install.NAME]` tables: how `acp-lsp install NAME`
//! gets the server NAME (`crate::install::RecipePatch`; a `version` given
//! outside the built-in table pins it).
//! A list given in a file replaces the list it is merged over.
//!
//! Keys of a `[servers.NAME]` table (all optional when NAME is an existing server):
//!
//! | key | type | default for a new server |
//! |---|---|---|
//! | `command` | string, looked up on `PATH` (`~/` expanded) | required |
//! | `args` | list of strings | `[]` |
//! | `language_ids` | list of strings, the first is the primary languageId | required |
//! | `file_extensions` | list of strings without dot (`"rs"`) | required |
//! | `root_markers` | list of file or directory names (`"Cargo.toml"`) | `[]` |
//! | `initialization_options` | any value, sent in `initialize` | none |
//! | `settings` | table, answered to `workspace/configuration` by section path | `{}` |
//! | `env` | table of strings, extra environment for the server | `{}` |
//! | `env_passthrough` | list of variable names (or `PREFIX*`) inherited beyond the allowlist of `lsp::process` | `[]` |
//! | `request_timeout_ms` | integer > 0 | `30000` |
//! | `first_load_wait_ms` | integer: how long the first load may report work before the server is taken as `running` anyway (`stateReason`) | `60000` |
//! | `execute_commands` | list of `workspace/executeCommand` commands allowed | `[]` |
//! | `extension_methods` | list of the server's own request methods forwarded to it (`rust-analyzer/expandMacro`) | `[]` |
//! | `position_encodings` | list of `"utf-8"`, `"utf-16"`, `"utf-32"` offered | `["utf-16"]` |
//! | `language_id_by_extension` | table, extension → languageId | `{}` |
//! | `watch_globs` | list of static `didChangeWatchedFiles` globs | `[]` |
//! | `ready_when_quiescent` | boolean: `ready` only after `experimental/serverStatus` says quiescent | `false` |
//! | `ready_after_log` | list of shell-style patterns: `ready` only after a `window/logMessage` matching one (bounded by `first_load_wait_ms`) | `[]` (pyright, basedpyright: `["Found * source file*", "No source files found*"]`) |
//! | `project_code` | `"run"` or `"off"`: overrides the global [`ProjectCode`] for this server | unset |
//! | `probe_args` | list of strings: the arguments of `acp-lsp servers`' start check (`lsp::probe`) | `["--version"]` (pyright, basedpyright: `["--stdio"]`) |
//! | `enabled` | boolean | `true` |
//! | `connect` | `"tcp://host:port"`, `"unix:/path"`, `"ws://…"` or `"wss://…"`: reach a running server instead of starting `command` (`lsp::remote`) | unset |
//! | `token_env`, `token_via`, `subprotocol`, `tls_ca_file`, `path_map` | see docs/configuration.md "Remote servers" | unset |
//! | `secondary` | boolean: run even when another installed server of the same primary language comes first (`lsp::primary`) | `false` |
//!
//! Over an existing server, a given key replaces the old value, except `settings`,
//! `initialization_options` (tables are merged recursively, other values replace) and `env`,
//! `language_id_by_extension` (merged by key). Unknown keys are errors. Errors name the file,
//! the 1-based line and column and the key path, e.g.
//! `~/.config/acp-lsp/config.toml:7:1: servers.ruff: missing field `command``.
//!
//! In `settings`, VS Code style dotted keys (`"python.analysis.typeCheckingMode" = "basic"`)
//! are read as nested tables when a section is looked up.

mod paths;
mod project_code;
mod server;
mod span;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use crate::install::{Recipe, RecipePatch};

pub(crate) use paths::display_path;
use paths::resolve_path;
pub use project_code::{project_code_brief, project_code_switch, ProjectCode, ProjectCodeSource};
pub use server::ServerConfig;
use server::{apply_patch, deep_merge, empty_object, strings, ServerPatch};
use span::{join_key, key_from_display, line_col, refine_key, SpanIndex};

/// Name of the per-project file looked for in a trusted session root.
pub const PROJECT_FILE: &str = ".acp-lsp.toml";

/// Default for [`ServerConfig::request_timeout_ms`].
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 30_000;
/// How long a server's first load may report work before it is taken as
/// `running` anyway (`first_load_wait_ms`; `lsp::server::FIRST_LOAD_WAIT`).
pub const DEFAULT_FIRST_LOAD_WAIT_MS: u64 = 60_000;

/// Default for [`Config::idle_grace_ms`].
pub const DEFAULT_IDLE_GRACE_MS: u64 = 30_000;

/// Default for [`Config::max_running_servers`]: language servers running at
/// once over all sessions (rust-analyzer alone takes ~580 MiB).
pub const DEFAULT_MAX_RUNNING_SERVERS: usize = 8;

/// Default for [`Config::nested_idle_stop_ms`]: a nested root's server that
/// served no request for this long is stopped (it starts again on use).
pub const DEFAULT_NESTED_IDLE_STOP_MS: u64 = 5 * 60 * 1000;

/// Defaults of the MCP HTTP transport's limits (`[mcp_http]` in the file).
pub const DEFAULT_MCP_HTTP_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
pub const DEFAULT_MCP_HTTP_MAX_CONCURRENT: usize = 16;
pub const DEFAULT_MCP_HTTP_READ_TIMEOUT_MS: u64 = 10_000;

/// Limits of the MCP server over HTTP (`src/mcp/http.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpHttpLimits {
    /// Larger request bodies get 413.
    pub max_body_bytes: usize,
    /// Requests (and open response streams) at once; one more gets 429.
    pub max_concurrent: usize,
    /// A request whose body has not fully arrived by then gets 408.
    pub read_timeout: Duration,
}

impl Default for McpHttpLimits {
    fn default() -> Self {
        McpHttpLimits {
            max_body_bytes: DEFAULT_MCP_HTTP_MAX_BODY_BYTES,
            max_concurrent: DEFAULT_MCP_HTTP_MAX_CONCURRENT,
            read_timeout: Duration::from_millis(DEFAULT_MCP_HTTP_READ_TIMEOUT_MS),
        }
    }
}

/// Position encodings a server entry may offer.
pub const KNOWN_POSITION_ENCODINGS: &[&str] = &["utf-8", "utf-16", "utf-32"];

/// Directory names never walked during detection, whatever `skip_dirs` says.
pub const ALWAYS_SKIPPED_DIRS: &[&str] = &[".git"];

/// Default [`Config::skip_dirs`]: VCS metadata, build outputs, dependency and tool caches.
pub const DEFAULT_SKIP_DIRS: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    "target",
    "node_modules",
    ".cache",
    "__pycache__",
    ".venv",
    "venv",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".tox",
    ".nox",
    ".direnv",
    "dist",
    "build",
    ".zig-cache",
    "zig-out",
    ".idea",
    ".vscode",
];

/// One read-only root found by `lsp::toolchain`, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredRoot {
    pub path: PathBuf,
    /// e.g. "Rust standard library sources (rustc --print sysroot)".
    pub why: String,
}

/// The merged configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Built-ins, then servers added by files in the order they appear. Disabled entries stay
    /// here; [`Config::enabled_servers`] leaves them out.
    pub servers: Vec<ServerConfig>,
    pub read_only_roots: Vec<PathBuf>,
    /// Whether `lsp::toolchain::add_discovered_roots` adds the toolchain's
    /// roots; the file key `discover_read_only_roots`.
    pub discover_read_only_roots: bool,
    /// What discovery added to `read_only_roots`, and why (for `acp-lsp servers`).
    pub discovered_read_only_roots: Vec<DiscoveredRoot>,
    pub allowed_uri_schemes: Vec<String>,
    /// Directory names (any depth) skipped when walking a session root.
    pub skip_dirs: Vec<String>,
    pub idle_grace_ms: u64,
    /// Start no server on `session/new`, not even the session roots' own
    /// (the file key `lazy`, like `acp-lsp proxy --lazy`).
    pub lazy: bool,
    /// Most servers running at once ([`DEFAULT_MAX_RUNNING_SERVERS`]).
    pub max_running_servers: usize,
    /// Idle time after which a nested root's server is stopped
    /// ([`DEFAULT_NESTED_IDLE_STOP_MS`]); 0: never.
    pub nested_idle_stop_ms: u64,
    pub trusted_projects: Vec<PathBuf>,
    /// The global [`ProjectCode`]; `None`: by trust.
    pub project_code: Option<ProjectCode>,
    /// The gate's quotas (`crate::gate::DEFAULT_MAX_REQUESTS_*`).
    pub max_requests_per_session: usize,
    pub max_requests_total: usize,
    pub mcp_http: McpHttpLimits,
    /// `proxy` uses the shared per-user daemon (as with `--shared`).
    pub shared: bool,
    /// A session whose project needs a server that is not installed
    /// installs it (the file key `auto_install`, like `--auto-install`).
    pub auto_install: bool,
    /// Where SCIP indexes are found and what loading one may take (`[indexes]`, `crate::scip`).
    pub indexes: crate::scip::IndexesConfig,
    /// How to install each server, by server name (`[install.NAME]`).
    pub install: BTreeMap<String, Recipe>,
    /// Files that were read, in order.
    pub sources: Vec<PathBuf>,
}

impl Default for Config {
    fn default() -> Config {
        Config::builtin()
    }
}

/// A configuration error. Display reads `FILE:LINE:COLUMN: KEY: MESSAGE`, with `~` for the
/// home directory.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: {source}", display_path(path))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}:{column}: {}{message}", display_path(path), key_prefix(key.as_deref()))]
    Parse {
        path: PathBuf,
        /// 1-based.
        line: usize,
        /// 1-based, in characters.
        column: usize,
        /// Key path such as `servers.ruff.args`, when known.
        key: Option<String>,
        message: String,
    },
    #[error("{}{}: {key}: {message}", display_path(path), display_location(*location))]
    Invalid {
        path: PathBuf,
        /// Key path such as `servers.ruff`.
        key: String,
        message: String,
        /// 1-based (line, column) of the key in the file, when known.
        location: Option<(usize, usize)>,
    },
}

impl ConfigError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ConfigError::Io { path, .. }
            | ConfigError::Parse { path, .. }
            | ConfigError::Invalid { path, .. } => path,
        }
    }

    /// The key path the error is about, when known.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Io { .. } => None,
            ConfigError::Parse { key, .. } => key.as_deref(),
            ConfigError::Invalid { key, .. } => Some(key),
        }
    }

    /// 1-based (line, column), when known.
    pub fn location(&self) -> Option<(usize, usize)> {
        match self {
            ConfigError::Io { .. } => None,
            ConfigError::Parse { line, column, .. } => Some((*line, *column)),
            ConfigError::Invalid { location, .. } => *location,
        }
    }
}

fn key_prefix(key: Option<&str>) -> String {
    match key {
        Some(k) if !k.is_empty() => format!("{k}: "),
        _ => String::new(),
    }
}

fn display_location(location: Option<(usize, usize)>) -> String {
    match location {
        Some((line, column)) => format!(":{line}:{column}"),
        None => String::new(),
    }
}

/// The shape of one file (every key optional).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    read_only_roots: Option<Vec<String>>,
    discover_read_only_roots: Option<bool>,
    allowed_uri_schemes: Option<Vec<String>>,
    skip_dirs: Option<Vec<String>>,
    idle_grace_ms: Option<u64>,
    lazy: Option<bool>,
    max_running_servers: Option<usize>,
    nested_idle_stop_ms: Option<u64>,
    trusted_projects: Option<Vec<String>>,
    project_code: Option<ProjectCode>,
    max_requests_per_session: Option<usize>,
    max_requests_total: Option<usize>,
    mcp_http: Option<McpHttpPatch>,
    shared: Option<bool>,
    auto_install: Option<bool>,
    indexes: Option<crate::scip::IndexesPatch>,
    #[serde(default)]
    servers: BTreeMap<String, ServerPatch>,
    /// `[install.NAME]`: how to install the server NAME (`crate::install`).
    #[serde(default)]
    install: BTreeMap<String, RecipePatch>,
}

/// The `[mcp_http]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct McpHttpPatch {
    max_body_bytes: Option<usize>,
    max_concurrent: Option<usize>,
    read_timeout_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    User,
    Project,
}

/// The built-in server table: TOML in the user file's format, read by the
/// same parser (`acp-lsp servers --print-builtins` prints it as it is).
pub const BUILTIN_TOML: &str = include_str!("builtins.toml");

/// The name [`BUILTIN_TOML`] goes by in errors.
const BUILTIN_ORIGIN: &str = "<built-in servers>";

/// The servers and install recipes of [`BUILTIN_TOML`], parsed once.
fn builtin_servers() -> (Vec<ServerConfig>, BTreeMap<String, Recipe>) {
    static PARSED: std::sync::OnceLock<(Vec<ServerConfig>, BTreeMap<String, Recipe>)> =
        std::sync::OnceLock::new();
    PARSED
        .get_or_init(|| {
            let base = Config::without_servers();
            match merge_text(
                BUILTIN_TOML,
                Path::new(BUILTIN_ORIGIN),
                base,
                FileKind::User,
            ) {
                Ok(config) => (config.servers, config.install),
                Err(e) => panic!("BUG: the built-in server table does not parse: {e}"),
            }
        })
        .clone()
}

impl Config {
    /// The built-in servers and defaults only.
    pub fn builtin() -> Config {
        let (servers, install) = builtin_servers();
        Config {
            servers,
            install,
            ..Config::without_servers()
        }
    }

    /// The defaults, with no server at all.
    fn without_servers() -> Config {
        Config {
            servers: Vec::new(),
            read_only_roots: Vec::new(),
            discover_read_only_roots: true,
            discovered_read_only_roots: Vec::new(),
            allowed_uri_schemes: Vec::new(),
            skip_dirs: strings(DEFAULT_SKIP_DIRS),
            idle_grace_ms: DEFAULT_IDLE_GRACE_MS,
            lazy: false,
            max_running_servers: DEFAULT_MAX_RUNNING_SERVERS,
            nested_idle_stop_ms: DEFAULT_NESTED_IDLE_STOP_MS,
            trusted_projects: Vec::new(),
            project_code: None,
            max_requests_per_session: crate::gate::DEFAULT_MAX_REQUESTS_PER_SESSION,
            max_requests_total: crate::gate::DEFAULT_MAX_REQUESTS_TOTAL,
            mcp_http: McpHttpLimits::default(),
            shared: false,
            auto_install: false,
            indexes: crate::scip::IndexesConfig::default(),
            install: BTreeMap::new(),
            sources: Vec::new(),
        }
    }

    /// The default user file: `$XDG_CONFIG_HOME/acp-lsp/config.toml` when that variable holds
    /// an absolute path, else `config.toml` in the OS's configuration directory
    /// (`~/.config/acp-lsp`, `~/Library/Application Support/acp-lsp`,
    /// `%APPDATA%\acp-lsp\config`: `sys::places`).
    pub fn default_user_path() -> Option<PathBuf> {
        Some(crate::sys::places::config_dir()?.join("config.toml"))
    }

    /// Built-ins merged with `explicit` (which must exist) or, without it, the default user
    /// file when it exists.
    pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        let base = Config::builtin();
        let path = match explicit {
            Some(p) => p.to_path_buf(),
            None => match Config::default_user_path() {
                Some(p) if p.is_file() => p,
                _ => return Ok(base),
            },
        };
        let text = read_text(&path)?;
        merge_text(&text, &path, base, FileKind::User)
    }

    /// Reads `root/.acp-lsp.toml` over this configuration when `root` (canonicalized) lies
    /// under one of `trusted_projects`. Returns whether a file was read. On error `self` is
    /// left unchanged.
    pub fn load_project(&mut self, root: &Path) -> Result<bool, ConfigError> {
        if !self.is_trusted(root) {
            return Ok(false);
        }
        let path = root.join(PROJECT_FILE);
        if !path.is_file() {
            return Ok(false);
        }
        let text = read_text(&path)?;
        let merged = merge_text(&text, &path, self.clone(), FileKind::Project)?;
        *self = merged;
        Ok(true)
    }

    /// Whether `root` (canonicalized) lies under one of `trusted_projects` (canonicalized when
    /// they exist).
    pub fn is_trusted(&self, root: &Path) -> bool {
        let Ok(root) = root.canonicalize() else {
            return false;
        };
        self.trusted_projects.iter().any(|t| {
            let t = t.canonicalize().unwrap_or_else(|_| t.clone());
            root.starts_with(&t)
        })
    }

    /// Merges a user file's text over `base`; `origin` names the file in errors and in
    /// `sources`, and relative paths in it are relative to its directory.
    pub fn from_toml_str(text: &str, origin: &Path, base: Config) -> Result<Config, ConfigError> {
        merge_text(text, origin, base, FileKind::User)
    }

    /// Servers with `enabled = true`, in order.
    /// What the gate takes from the configuration (default limits).
    pub fn gate_config(&self) -> crate::gate::GateConfig {
        crate::gate::GateConfig {
            limits: Default::default(),
            read_only_roots: self.read_only_roots.clone(),
            allowed_uri_schemes: self.allowed_uri_schemes.clone(),
            max_requests_per_session: self.max_requests_per_session,
            max_requests_total: self.max_requests_total,
        }
    }

    /// The effective [`ProjectCode`] of `server` at `root`, and where it came from.
    pub fn project_code_for(
        &self,
        server: &ServerConfig,
        root: &Path,
    ) -> (ProjectCode, ProjectCodeSource) {
        if let Some(code) = server.project_code {
            (code, ProjectCodeSource::Server)
        } else if let Some(code) = self.project_code {
            (code, ProjectCodeSource::Global)
        } else if self.is_trusted(root) {
            (ProjectCode::Run, ProjectCodeSource::TrustedProject)
        } else {
            (ProjectCode::Off, ProjectCodeSource::Default)
        }
    }

    /// `server` as it runs at `root` (started from `program`): with
    /// `project_code = "off"` in effect, the server's own switches against
    /// running project code are set, over anything the configuration says.
    pub fn effective_server(
        &self,
        server: &ServerConfig,
        root: &Path,
        program: &Path,
    ) -> ServerConfig {
        let (code, _) = self.project_code_for(server, root);
        let mut server = server.clone();
        if code == ProjectCode::Off {
            turn_off_project_code(&mut server, program);
        }
        server
    }
    pub fn enabled_servers(&self) -> impl Iterator<Item = &ServerConfig> {
        self.servers.iter().filter(|s| s.enabled)
    }

    /// The server of that name, enabled or not.
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// How to install the server `name`, if acp-lsp knows.
    pub fn recipe(&self, name: &str) -> Option<&Recipe> {
        self.install.get(name)
    }
}

fn read_text(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// A file being merged: its text, name and key locations, for errors.
struct Located<'a> {
    text: &'a str,
    origin: &'a Path,
    index: SpanIndex,
}

impl Located<'_> {
    fn invalid(&self, key: String, message: String) -> ConfigError {
        ConfigError::Invalid {
            path: self.origin.to_path_buf(),
            location: self.index.location_of(self.text, &key),
            key,
            message,
        }
    }
}

/// Merges one file's text over `base`: parse, then the top-level keys, the
/// `[servers.*]` tables in the order written, the `[install.*]` recipes.
fn merge_text(
    text: &str,
    origin: &Path,
    base: Config,
    kind: FileKind,
) -> Result<Config, ConfigError> {
    let at = Located {
        text,
        origin,
        index: SpanIndex::build(text),
    };
    let file = parse_file(&at)?;
    let mut config = base;
    let FileConfig {
        servers, install, ..
    } = apply_top_level(&mut config, file, &at, kind)?;
    apply_servers(&mut config, servers, &at)?;
    apply_install(&mut config, install, &at)?;
    config.sources.push(origin.to_path_buf());
    Ok(config)
}

/// The file's text as [`FileConfig`], or a parse error with its line,
/// column and key.
fn parse_file(at: &Located<'_>) -> Result<FileConfig, ConfigError> {
    toml::from_str(at.text).map_err(|err| {
        let message = err
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        let (line, column, key) = match err.span() {
            Some(span) => {
                let (line, column) = line_col(at.text, span.start);
                let key = at.index.key_at(&span).or_else(|| key_from_display(&err));
                (line, column, key)
            }
            None => (1, 1, key_from_display(&err)),
        };
        let key = refine_key(key.clone(), &message).or(key);
        ConfigError::Parse {
            path: at.origin.to_path_buf(),
            line,
            column,
            key,
            message,
        }
    })
}

/// The top-level keys; returns the file with what is left to apply.
fn apply_top_level(
    config: &mut Config,
    mut file: FileConfig,
    at: &Located<'_>,
    kind: FileKind,
) -> Result<FileConfig, ConfigError> {
    apply_paths_and_names(config, &mut file, at)?;
    if let Some(discover) = file.discover_read_only_roots.take() {
        config.discover_read_only_roots = discover;
    }
    if let Some(ms) = file.idle_grace_ms.take() {
        config.idle_grace_ms = ms;
    }
    if let Some(shared) = file.shared.take() {
        config.shared = shared;
    }
    if let Some(lazy) = file.lazy.take() {
        config.lazy = lazy;
    }
    if let Some(auto) = file.auto_install.take() {
        config.auto_install = auto;
    }
    if let Some(ms) = file.nested_idle_stop_ms.take() {
        config.nested_idle_stop_ms = ms;
    }
    if let Some(code) = file.project_code.take() {
        config.project_code = Some(code);
    }
    apply_limits(config, &mut file, at)?;
    if let Some(indexes) = file.indexes.take() {
        config
            .indexes
            .apply(indexes, |p| resolve_path(p, at.origin))
            .map_err(|(key, message)| at.invalid(key, message))?;
    }
    if let Some(trusted) = file.trusted_projects.take() {
        if kind == FileKind::Project {
            return Err(at.invalid(
                "trusted_projects".to_string(),
                "a project file cannot extend the trusted projects".to_string(),
            ));
        }
        config.trusted_projects = trusted.iter().map(|t| resolve_path(t, at.origin)).collect();
    }
    Ok(file)
}

/// `read_only_roots`, `allowed_uri_schemes`, `skip_dirs`.
fn apply_paths_and_names(
    config: &mut Config,
    file: &mut FileConfig,
    at: &Located<'_>,
) -> Result<(), ConfigError> {
    if let Some(roots) = file.read_only_roots.take() {
        config.read_only_roots = roots.iter().map(|r| resolve_path(r, at.origin)).collect();
    }
    if let Some(schemes) = file.allowed_uri_schemes.take() {
        for (i, s) in schemes.iter().enumerate() {
            let valid = s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.');
            if !valid {
                return Err(at.invalid(
                    format!("allowed_uri_schemes[{i}]"),
                    format!("`{s}` is not a URI scheme (write it without `:`)"),
                ));
            }
        }
        config.allowed_uri_schemes = schemes.iter().map(|s| s.to_ascii_lowercase()).collect();
    }
    if let Some(dirs) = file.skip_dirs.take() {
        for (i, d) in dirs.iter().enumerate() {
            if d.is_empty() || d.contains('/') || d == "." || d == ".." {
                return Err(at.invalid(
                    format!("skip_dirs[{i}]"),
                    format!("`{d}` must be a plain directory name"),
                ));
            }
        }
        config.skip_dirs = dirs;
    }
    Ok(())
}

/// The quotas, `max_running_servers` and `[mcp_http]`: each greater than 0.
fn apply_limits(
    config: &mut Config,
    file: &mut FileConfig,
    at: &Located<'_>,
) -> Result<(), ConfigError> {
    for (key, value, slot) in [
        (
            "max_requests_per_session",
            file.max_requests_per_session.take(),
            &mut config.max_requests_per_session,
        ),
        (
            "max_requests_total",
            file.max_requests_total.take(),
            &mut config.max_requests_total,
        ),
        (
            "max_running_servers",
            file.max_running_servers.take(),
            &mut config.max_running_servers,
        ),
    ] {
        if let Some(n) = value {
            if n == 0 {
                return Err(at.invalid(key.to_string(), "must be greater than 0".into()));
            }
            *slot = n;
        }
    }
    if let Some(http) = file.mcp_http.take() {
        if http.max_body_bytes == Some(0) || http.max_concurrent == Some(0) {
            return Err(at.invalid(
                "mcp_http".to_string(),
                "limits must be greater than 0".into(),
            ));
        }
        if http.read_timeout_ms == Some(0) {
            return Err(at.invalid(
                "mcp_http.read_timeout_ms".to_string(),
                "must be greater than 0".into(),
            ));
        }
        let limits = &mut config.mcp_http;
        limits.max_body_bytes = http.max_body_bytes.unwrap_or(limits.max_body_bytes);
        limits.max_concurrent = http.max_concurrent.unwrap_or(limits.max_concurrent);
        if let Some(ms) = http.read_timeout_ms {
            limits.read_timeout = Duration::from_millis(ms);
        }
    }
    Ok(())
}

/// The `[servers.NAME]` tables, in the order they are written.
fn apply_servers(
    config: &mut Config,
    mut patches: BTreeMap<String, ServerPatch>,
    at: &Located<'_>,
) -> Result<(), ConfigError> {
    let mut order: Vec<String> = at
        .index
        .server_order
        .iter()
        .filter(|n| patches.contains_key(*n))
        .cloned()
        .collect();
    for name in patches.keys() {
        if !order.contains(name) {
            order.push(name.clone());
        }
    }
    for name in order {
        let Some(patch) = patches.remove(&name) else {
            continue;
        };
        let key = join_key("servers", &name);
        check_server_name(&name).map_err(|m| at.invalid(key.clone(), m))?;
        let server = match config.servers.iter().position(|s| s.name == name) {
            Some(i) => &mut config.servers[i],
            None => {
                let missing = [
                    (
                        "command",
                        patch.command.is_none() && patch.connect.is_none(),
                    ),
                    ("language_ids", patch.language_ids.is_none()),
                    ("file_extensions", patch.file_extensions.is_none()),
                ]
                .into_iter()
                .find(|(_, m)| *m);
                if let Some((field, _)) = missing {
                    return Err(at.invalid(key, format!("missing field `{field}`")));
                }
                config
                    .servers
                    .push(ServerConfig::new(&name, "", &[], &[], &[], &[]));
                let last = config.servers.len() - 1;
                &mut config.servers[last]
            }
        };
        apply_patch(server, patch, at.origin).map_err(|(field, msg)| {
            let k = if field.is_empty() {
                key.clone()
            } else {
                join_key(&key, field)
            };
            at.invalid(k, msg)
        })?;
    }
    Ok(())
}

/// Letters, digits, `-`, `_` and `.` only.
fn check_server_name(name: &str) -> Result<(), String> {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if plain {
        Ok(())
    } else {
        Err("server names may use only letters, digits, `-`, `_` and `.`".to_string())
    }
}

/// The `[install.NAME]` recipes: over the recipe of the same server, a
/// version given outside the built-in table pins it.
fn apply_install(
    config: &mut Config,
    patches: BTreeMap<String, RecipePatch>,
    at: &Located<'_>,
) -> Result<(), ConfigError> {
    let pinning = at.origin != Path::new(BUILTIN_ORIGIN);
    for (name, patch) in patches {
        let key = join_key("install", &name);
        check_server_name(&name).map_err(|m| at.invalid(key.clone(), m))?;
        let recipe = patch
            .apply(&name, config.install.get(&name), pinning)
            .map_err(|(field, msg)| {
                let k = if field.is_empty() {
                    key.clone()
                } else {
                    join_key(&key, field)
                };
                at.invalid(k, msg)
            })?;
        config.install.insert(name, recipe);
    }
    Ok(())
}

/// Sets the switches of [`project_code_switch`] on `server` (by name, so a
/// user's own entry for the same server gets them too).
fn turn_off_project_code(server: &mut ServerConfig, program: &Path) {
    match server.name.as_str() {
        "rust-analyzer" => {
            // Both places: rust-analyzer reads initializationOptions before it
            // asks workspace/configuration, and may load the workspace between.
            let off = json!({
                "cargo": { "buildScripts": { "enable": false } },
                "procMacro": { "enable": false }
            });
            let options = server
                .initialization_options
                .get_or_insert_with(empty_object);
            deep_merge(options, off.clone());
            if !server.settings.is_object() {
                server.settings = empty_object();
            }
            deep_merge(&mut server.settings, json!({ "rust-analyzer": off }));
        }
        "typescript-language-server" => {
            // It prefers the workspace's node_modules/typescript, whose
            // tsserver.js is then project code; pin the one installed beside
            // the server when there is one, unless the user chose a path.
            let mut off = json!({ "plugins": [] });
            let pinned = server
                .initialization_options
                .as_ref()
                .and_then(|o| o.pointer("/tsserver/path"))
                .is_some();
            if !pinned {
                if let Some(lib) = typescript_beside(program) {
                    off["tsserver"] = json!({ "path": lib.display().to_string() });
                }
            }
            let options = server
                .initialization_options
                .get_or_insert_with(empty_object);
            deep_merge(options, off);
        }
        "gopls" => {
            server
                .env
                .insert("GOTOOLCHAIN".to_string(), "local".to_string());
        }
        _ => {}
    }
}

/// `node_modules/typescript/lib/tsserver.js` next to the package `program`
/// (a typescript-language-server launcher, symlinks resolved) belongs to.
/// typescript-language-server takes `tsserver.path` over the workspace's
/// TypeScript, which it otherwise prefers to the one it was installed with.
fn typescript_beside(program: &Path) -> Option<PathBuf> {
    let real = program.canonicalize().ok()?;
    real.ancestors()
        .filter(|dir| dir.file_name().is_some_and(|n| n == "node_modules"))
        .map(|modules| modules.join("typescript").join("lib").join("tsserver.js"))
        .find(|tsserver| tsserver.is_file())
}
