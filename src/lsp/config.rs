//! Server definitions: built-ins, the user file and trusted project files.
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
//! `shared` (`true`: `acp-lsp proxy` acts as with `--shared`, see `crate::daemon`).
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
//! | `execute_commands` | list of `workspace/executeCommand` commands allowed | `[]` |
//! | `extension_methods` | list of the server's own request methods forwarded to it (`rust-analyzer/expandMacro`) | `[]` |
//! | `position_encodings` | list of `"utf-8"`, `"utf-16"`, `"utf-32"` offered | `["utf-16"]` |
//! | `language_id_by_extension` | table, extension → languageId | `{}` |
//! | `watch_globs` | list of static `didChangeWatchedFiles` globs | `[]` |
//! | `ready_when_quiescent` | boolean: `ready` only after `experimental/serverStatus` says quiescent | `false` |
//! | `project_code` | `"run"` or `"off"`: overrides the global [`ProjectCode`] for this server | unset |
//! | `probe_args` | list of strings: the arguments of `acp-lsp servers`' start check (`lsp::probe`) | `["--version"]` (pyright, basedpyright: `["--stdio"]`) |
//! | `enabled` | boolean | `true` |
//! | `connect` | `"tcp://host:port"`, `"unix:/path"`, `"ws://…"` or `"wss://…"`: reach a running server instead of starting `command` (`lsp::remote`) | unset |
//! | `token_env`, `token_via`, `subprotocol`, `tls_ca_file`, `path_map` | see README "Remote servers" | unset |
//!
//! Over an existing server, a given key replaces the old value, except `settings`,
//! `initialization_options` (tables are merged recursively, other values replace) and `env`,
//! `language_id_by_extension` (merged by key). Unknown keys are errors. Errors name the file,
//! the 1-based line and column and the key path, e.g.
//! `~/.config/acp-lsp/config.toml:7:1: servers.ruff: missing field `command``.
//!
//! In `settings`, VS Code style dotted keys (`"python.analysis.typeCheckingMode" = "basic"`)
//! are read as nested tables when a section is looked up.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Map, Value};

/// Name of the per-project file looked for in a trusted session root.
pub const PROJECT_FILE: &str = ".acp-lsp.toml";

/// Default for [`ServerConfig::request_timeout_ms`].
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 30_000;

/// Default for [`Config::idle_grace_ms`].
pub const DEFAULT_IDLE_GRACE_MS: u64 = 30_000;

/// Whether language servers may run code the project brings (rust-analyzer's
/// build scripts and proc macros, a workspace's own TypeScript, a go.mod's
/// toolchain). The effective value for a server at a root is, first found:
/// the server's `project_code`, the global `project_code`, else `run` when the
/// root lies under `trusted_projects` and `off` otherwise. Off by default
/// because the agent, not a person, decides what a session opens and writes:
/// a `build.rs` it writes (or a checkout it is pointed at) would otherwise run
/// on the next `session/new` with no one asking. See ARCHITECTURE.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProjectCode {
    Run,
    Off,
}

impl ProjectCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ProjectCode::Run => "run",
            ProjectCode::Off => "off",
        }
    }
}

/// Where an effective [`ProjectCode`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectCodeSource {
    Server,
    Global,
    TrustedProject,
    Default,
}

impl ProjectCodeSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ProjectCodeSource::Server => "server setting",
            ProjectCodeSource::Global => "global setting",
            ProjectCodeSource::TrustedProject => "trusted project",
            ProjectCodeSource::Default => "default",
        }
    }
}

/// What `project_code = "off"` changes for a server: how, or why it cannot.
pub fn project_code_switch(server: &str) -> &'static str {
    match server {
        "rust-analyzer" => "build scripts and proc macros disabled",
        "typescript-language-server" => {
            "no global plugins; tsserver pinned to the TypeScript installed beside the server"
        }
        "gopls" => "GOTOOLCHAIN=local (a go.mod cannot pick a toolchain to run)",
        "clangd" => "runs no project code (no --query-driver)",
        "pyright" | "basedpyright" | "pylsp" => {
            "no switch: it may run the project's configured Python interpreter"
        }
        "zls" => "no switch: it runs the project's build.zig",
        _ => "no switch known",
    }
}

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

/// One language server definition.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Registry name, e.g. `rust-analyzer`.
    pub name: String,
    /// Program, looked up on `PATH` unless it contains a slash.
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// The first one is the primary languageId.
    pub language_ids: Vec<String>,
    /// Without dot: `rs`.
    pub file_extensions: Vec<String>,
    /// File or directory names marking a project root: `Cargo.toml`.
    #[serde(default)]
    pub root_markers: Vec<String>,
    #[serde(default)]
    pub initialization_options: Option<Value>,
    /// Answered to `workspace/configuration` by section path.
    #[serde(default = "empty_object")]
    pub settings: Value,
    /// Extra environment for the server.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables of the proxy's environment inherited beyond the allowlist
    /// (`lsp::process::ENV_ALLOWED`…): exact names, or `PREFIX*`.
    #[serde(default)]
    pub env_passthrough: Vec<String>,
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// `workspace/executeCommand` allowlist.
    #[serde(default)]
    pub execute_commands: Vec<String>,
    /// The server's own request methods (outside LSP) forwarded to it; they
    /// join `availableMethods`. Nothing else outside LSP is forwarded.
    #[serde(default)]
    pub extension_methods: Vec<String>,
    /// Offered position encodings.
    #[serde(default = "default_position_encodings")]
    pub position_encodings: Vec<String>,
    /// Extension (no dot) → languageId, e.g. `tsx` → `typescriptreact`.
    #[serde(default)]
    pub language_id_by_extension: BTreeMap<String, String>,
    /// Static `workspace/didChangeWatchedFiles` globs.
    #[serde(default)]
    pub watch_globs: Vec<String>,
    /// The server reports readiness with `experimental/serverStatus` (rust-analyzer): it
    /// is `indexing` until a status says `quiescent`, since it answers empty while loading.
    #[serde(default)]
    pub ready_when_quiescent: bool,
    /// Overrides the global [`ProjectCode`] for this server.
    #[serde(default)]
    pub project_code: Option<ProjectCode>,
    /// Arguments of the start check `acp-lsp servers` runs (`lsp::probe`):
    /// the binary starts when it exits 0 or answers in LSP framing.
    #[serde(default = "default_probe_args")]
    pub probe_args: Vec<String>,
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Reached over the network instead of run (`connect`, `lsp::remote`).
    #[serde(default)]
    pub remote: Option<crate::lsp::remote::Remote>,
}

fn default_probe_args() -> Vec<String> {
    vec!["--version".to_string()]
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

fn default_request_timeout_ms() -> u64 {
    DEFAULT_REQUEST_TIMEOUT_MS
}

fn default_position_encodings() -> Vec<String> {
    vec!["utf-16".to_string()]
}

fn default_true() -> bool {
    true
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_string()).collect()
}

impl ServerConfig {
    /// A server with the given essentials and every other field at its default.
    pub fn new(
        name: &str,
        command: &str,
        args: &[&str],
        language_ids: &[&str],
        file_extensions: &[&str],
        root_markers: &[&str],
    ) -> ServerConfig {
        ServerConfig {
            name: name.to_string(),
            command: command.to_string(),
            args: strings(args),
            language_ids: strings(language_ids),
            file_extensions: strings(file_extensions),
            root_markers: strings(root_markers),
            initialization_options: None,
            settings: empty_object(),
            env: BTreeMap::new(),
            env_passthrough: Vec::new(),
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            execute_commands: Vec::new(),
            extension_methods: Vec::new(),
            position_encodings: default_position_encodings(),
            language_id_by_extension: BTreeMap::new(),
            watch_globs: Vec::new(),
            ready_when_quiescent: false,
            project_code: None,
            probe_args: default_probe_args(),
            enabled: true,
            remote: None,
        }
    }

    /// The value answered to `workspace/configuration` for `section`:
    /// `"rust-analyzer.cargo"` → `settings["rust-analyzer"]["cargo"]`; `None` or `""` → the
    /// whole settings; a missing section → `null`. Dotted keys inside `settings`
    /// (`"python.analysis" = {...}`) count as nested tables.
    pub fn settings_section(&self, section: Option<&str>) -> Value {
        let mut current = expand_dotted(&self.settings);
        let Some(section) = section.filter(|s| !s.is_empty()) else {
            return current;
        };
        for part in section.split('.') {
            current = match current {
                Value::Object(mut map) => match map.remove(part) {
                    Some(v) => v,
                    None => return Value::Null,
                },
                _ => return Value::Null,
            };
        }
        current
    }

    /// The languageId for `path`: from `language_id_by_extension` (exact extension, then
    /// lower-cased), else the primary language id (`plaintext` if there is none).
    pub fn language_id_for(&self, path: &Path) -> &str {
        if let Some(ext) = path.extension().and_then(|e| e.to_str()) {
            if let Some(id) = self.language_id_by_extension.get(ext) {
                return id;
            }
            let lower = ext.to_ascii_lowercase();
            if let Some(id) = self.language_id_by_extension.get(&lower) {
                return id;
            }
        }
        self.language_ids
            .first()
            .map(String::as_str)
            .unwrap_or("plaintext")
    }

    /// `request_timeout_ms` as a duration.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    /// Whether `path`'s extension is one this server handles.
    pub fn handles_extension(&self, ext: &str) -> bool {
        self.file_extensions.iter().any(|e| e == ext)
            || self
                .file_extensions
                .iter()
                .any(|e| e.eq_ignore_ascii_case(ext))
    }
}

/// Turns every object key containing dots into nested objects (deep-merged), recursively.
fn expand_dotted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Value::Object(Map::new());
            for (key, v) in map {
                let mut nested = expand_dotted(v);
                for part in key.split('.').rev() {
                    let mut m = Map::new();
                    m.insert(part.to_string(), nested);
                    nested = Value::Object(m);
                }
                deep_merge(&mut out, nested);
            }
            out
        }
        other => other.clone(),
    }
}

/// Merges `over` into `base`: objects recursively, anything else replaces.
fn deep_merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(existing) => deep_merge(existing, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, over) => *slot = over,
    }
}

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
    pub trusted_projects: Vec<PathBuf>,
    /// The global [`ProjectCode`]; `None`: by trust.
    pub project_code: Option<ProjectCode>,
    /// The gate's quotas (`crate::gate::DEFAULT_MAX_REQUESTS_*`).
    pub max_requests_per_session: usize,
    pub max_requests_total: usize,
    pub mcp_http: McpHttpLimits,
    /// `proxy` uses the shared per-user daemon (as with `--shared`).
    pub shared: bool,
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

fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `path` with a leading home directory shown as `~`.
fn display_path(path: &Path) -> String {
    if let Some(home) = home_dir() {
        if home != Path::new("/") {
            if let Ok(rest) = path.strip_prefix(&home) {
                if rest.as_os_str().is_empty() {
                    return "~".to_string();
                }
                return format!("~/{}", rest.display());
            }
        }
    }
    path.display().to_string()
}

/// Expands a leading `~` or `~/`.
fn expand_tilde(text: &str) -> PathBuf {
    if text == "~" {
        if let Some(home) = home_dir() {
            return home;
        }
    } else if let Some(rest) = text.strip_prefix("~/") {
        if let Some(home) = home_dir() {
            return home.join(rest);
        }
    }
    PathBuf::from(text)
}

/// `~` expanded; a relative path is taken relative to the directory of `origin`.
fn resolve_path(text: &str, origin: &Path) -> PathBuf {
    let p = expand_tilde(text);
    if p.is_absolute() {
        return normalize(&p);
    }
    let base = origin.parent().unwrap_or(Path::new(""));
    normalize(&base.join(p))
}

/// Lexically removes `.` and `..` components.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
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
    trusted_projects: Option<Vec<String>>,
    project_code: Option<ProjectCode>,
    max_requests_per_session: Option<usize>,
    max_requests_total: Option<usize>,
    mcp_http: Option<McpHttpPatch>,
    shared: Option<bool>,
    #[serde(default)]
    servers: BTreeMap<String, ServerPatch>,
}

/// The `[mcp_http]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct McpHttpPatch {
    max_body_bytes: Option<usize>,
    max_concurrent: Option<usize>,
    read_timeout_ms: Option<u64>,
}

/// A `[servers.NAME]` table: the keys given.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerPatch {
    command: Option<String>,
    args: Option<Vec<String>>,
    language_ids: Option<Vec<String>>,
    file_extensions: Option<Vec<String>>,
    root_markers: Option<Vec<String>>,
    initialization_options: Option<Value>,
    settings: Option<Value>,
    env: Option<BTreeMap<String, String>>,
    env_passthrough: Option<Vec<String>>,
    request_timeout_ms: Option<u64>,
    execute_commands: Option<Vec<String>>,
    extension_methods: Option<Vec<String>>,
    position_encodings: Option<Vec<String>>,
    language_id_by_extension: Option<BTreeMap<String, String>>,
    watch_globs: Option<Vec<String>>,
    ready_when_quiescent: Option<bool>,
    project_code: Option<ProjectCode>,
    probe_args: Option<Vec<String>>,
    enabled: Option<bool>,
    connect: Option<String>,
    token_env: Option<String>,
    token_via: Option<crate::lsp::remote::TokenVia>,
    subprotocol: Option<String>,
    tls_ca_file: Option<PathBuf>,
    path_map: Option<Vec<crate::lsp::path_map::PathMapping>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    User,
    Project,
}

impl Config {
    /// The built-in servers and defaults only.
    pub fn builtin() -> Config {
        Config {
            servers: builtin_servers(),
            read_only_roots: Vec::new(),
            discover_read_only_roots: true,
            discovered_read_only_roots: Vec::new(),
            allowed_uri_schemes: Vec::new(),
            skip_dirs: strings(DEFAULT_SKIP_DIRS),
            idle_grace_ms: DEFAULT_IDLE_GRACE_MS,
            trusted_projects: Vec::new(),
            project_code: None,
            max_requests_per_session: crate::gate::DEFAULT_MAX_REQUESTS_PER_SESSION,
            max_requests_total: crate::gate::DEFAULT_MAX_REQUESTS_TOTAL,
            mcp_http: McpHttpLimits::default(),
            shared: false,
            sources: Vec::new(),
        }
    }

    /// The default user file: `$XDG_CONFIG_HOME/acp-lsp/config.toml` when that variable holds
    /// an absolute path, else `~/.config/acp-lsp/config.toml`.
    pub fn default_user_path() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| home_dir().map(|h| h.join(".config")))?;
        Some(base.join("acp-lsp").join("config.toml"))
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
}

fn read_text(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// One key path of a document with the span of its key and of its value (or table header).
type SpanEntry = (String, Option<Range<usize>>, Option<Range<usize>>);

/// Spans of every key path of a document, for turning error offsets into key paths.
struct SpanIndex {
    entries: Vec<SpanEntry>,
    /// Order of `[servers.NAME]` tables as written.
    server_order: Vec<String>,
}

fn is_bare_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn join_key(prefix: &str, key: &str) -> String {
    let key = if is_bare_key(key) {
        key.to_string()
    } else {
        format!("{key:?}")
    };
    if prefix.is_empty() {
        key
    } else {
        format!("{prefix}.{key}")
    }
}

impl SpanIndex {
    fn build(text: &str) -> SpanIndex {
        let mut index = SpanIndex {
            entries: Vec::new(),
            server_order: Vec::new(),
        };
        if let Ok(doc) = toml_edit::ImDocument::parse(text) {
            index.add_table(doc.as_table(), "");
            if let Some(servers) = doc.as_table().get("servers") {
                if let Some(t) = servers.as_table_like() {
                    index.server_order = t.iter().map(|(k, _)| k.to_string()).collect();
                }
            }
        }
        index
    }

    fn add_item(&mut self, path: &str, key_span: Option<Range<usize>>, item: &toml_edit::Item) {
        match item {
            toml_edit::Item::Table(t) => {
                self.entries.push((path.to_string(), key_span, t.span()));
                self.add_table(t, path);
            }
            toml_edit::Item::Value(v) => {
                self.entries.push((path.to_string(), key_span, v.span()));
                self.add_value(path, v);
            }
            toml_edit::Item::ArrayOfTables(a) => {
                self.entries.push((path.to_string(), key_span, a.span()));
                for (i, t) in a.iter().enumerate() {
                    let p = format!("{path}[{i}]");
                    self.entries.push((p.clone(), None, t.span()));
                    self.add_table(t, &p);
                }
            }
            toml_edit::Item::None => {}
        }
    }

    fn add_table(&mut self, table: &toml_edit::Table, prefix: &str) {
        for (k, _) in table.iter() {
            if let Some((key, item)) = table.get_key_value(k) {
                let path = join_key(prefix, k);
                self.add_item(&path, key.span(), item);
            }
        }
    }

    fn add_value(&mut self, path: &str, value: &toml_edit::Value) {
        match value {
            toml_edit::Value::InlineTable(t) => {
                for (k, _) in t.iter() {
                    if let Some((key, item)) = t.get_key_value(k) {
                        let p = join_key(path, k);
                        self.add_item(&p, key.span(), item);
                    }
                }
            }
            toml_edit::Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    let p = format!("{path}[{i}]");
                    self.entries.push((p.clone(), None, v.span()));
                    self.add_value(&p, v);
                }
            }
            _ => {}
        }
    }

    /// The most specific key path whose key or value span contains `span.start`.
    fn key_at(&self, span: &Range<usize>) -> Option<String> {
        let offset = span.start;
        let mut best: Option<(usize, &str)> = None;
        for (path, key_span, value_span) in &self.entries {
            for s in [key_span, value_span].into_iter().flatten() {
                let contains =
                    (s.start <= offset && offset < s.end) || (s.start == offset && s.is_empty());
                if !contains {
                    continue;
                }
                let len = s.end - s.start;
                let better = match best {
                    None => true,
                    Some((best_len, best_path)) => {
                        len < best_len || (len == best_len && path.len() > best_path.len())
                    }
                };
                if better {
                    best = Some((len, path));
                }
            }
        }
        best.map(|(_, p)| p.to_string())
    }

    /// Where a key path is written (its key, else its value or table header).
    fn location_of(&self, text: &str, path: &str) -> Option<(usize, usize)> {
        self.entries
            .iter()
            .find(|(p, _, _)| p == path)
            .and_then(|(_, k, v)| {
                // The earlier of the key and its value: for `[a.b]` that is the header's `[`.
                [k, v].into_iter().flatten().map(|s| s.start).min()
            })
            .map(|start| line_col(text, start))
    }
}

/// The `in `a.b`` line toml prints when an error has no span.
fn key_from_display(err: &toml::de::Error) -> Option<String> {
    let shown = err.to_string();
    shown.lines().rev().find_map(|l| {
        l.strip_prefix("in `")
            .and_then(|r| r.strip_suffix('`'))
            .map(str::to_string)
    })
}

/// For an unknown-field message inside a key path, the path of the unknown key itself.
fn refine_key(key: Option<String>, message: &str) -> Option<String> {
    let field = message
        .strip_prefix("unknown field `")
        .and_then(|r| r.split('`').next())?;
    match key {
        Some(k) if k.ends_with(&format!(".{field}")) || k == field => Some(k),
        Some(k) => Some(join_key(&k, field)),
        None => Some(field.to_string()),
    }
}

fn merge_text(
    text: &str,
    origin: &Path,
    base: Config,
    kind: FileKind,
) -> Result<Config, ConfigError> {
    let index = SpanIndex::build(text);
    let file: FileConfig = match toml::from_str(text) {
        Ok(f) => f,
        Err(err) => {
            let message = err
                .message()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("; ");
            let (line, column, key) = match err.span() {
                Some(span) => {
                    let (line, column) = line_col(text, span.start);
                    let key = index.key_at(&span).or_else(|| key_from_display(&err));
                    (line, column, key)
                }
                None => (1, 1, key_from_display(&err)),
            };
            let key = refine_key(key.clone(), &message).or(key);
            return Err(ConfigError::Parse {
                path: origin.to_path_buf(),
                line,
                column,
                key,
                message,
            });
        }
    };
    let invalid = |key: String, message: String| ConfigError::Invalid {
        path: origin.to_path_buf(),
        location: index.location_of(text, &key),
        key,
        message,
    };

    let mut config = base;
    if let Some(roots) = file.read_only_roots {
        config.read_only_roots = roots.iter().map(|r| resolve_path(r, origin)).collect();
    }
    if let Some(discover) = file.discover_read_only_roots {
        config.discover_read_only_roots = discover;
    }
    if let Some(schemes) = file.allowed_uri_schemes {
        for (i, s) in schemes.iter().enumerate() {
            let valid = s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.');
            if !valid {
                return Err(invalid(
                    format!("allowed_uri_schemes[{i}]"),
                    format!("`{s}` is not a URI scheme (write it without `:`)"),
                ));
            }
        }
        config.allowed_uri_schemes = schemes.iter().map(|s| s.to_ascii_lowercase()).collect();
    }
    if let Some(dirs) = file.skip_dirs {
        for (i, d) in dirs.iter().enumerate() {
            if d.is_empty() || d.contains('/') || d == "." || d == ".." {
                return Err(invalid(
                    format!("skip_dirs[{i}]"),
                    format!("`{d}` must be a plain directory name"),
                ));
            }
        }
        config.skip_dirs = dirs;
    }
    if let Some(ms) = file.idle_grace_ms {
        config.idle_grace_ms = ms;
    }
    if let Some(shared) = file.shared {
        config.shared = shared;
    }
    if let Some(code) = file.project_code {
        config.project_code = Some(code);
    }
    for (key, value, slot) in [
        (
            "max_requests_per_session",
            file.max_requests_per_session,
            &mut config.max_requests_per_session,
        ),
        (
            "max_requests_total",
            file.max_requests_total,
            &mut config.max_requests_total,
        ),
    ] {
        if let Some(n) = value {
            if n == 0 {
                return Err(invalid(key.to_string(), "must be greater than 0".into()));
            }
            *slot = n;
        }
    }
    if let Some(http) = file.mcp_http {
        if http.max_body_bytes == Some(0) || http.max_concurrent == Some(0) {
            return Err(invalid(
                "mcp_http".to_string(),
                "limits must be greater than 0".into(),
            ));
        }
        if http.read_timeout_ms == Some(0) {
            return Err(invalid(
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
    if let Some(trusted) = file.trusted_projects {
        if kind == FileKind::Project {
            return Err(invalid(
                "trusted_projects".to_string(),
                "a project file cannot extend the trusted projects".to_string(),
            ));
        }
        config.trusted_projects = trusted.iter().map(|t| resolve_path(t, origin)).collect();
    }

    // Apply server tables in the order they are written.
    let mut patches = file.servers;
    let mut order: Vec<String> = index
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
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(invalid(
                key,
                "server names may use only letters, digits, `-`, `_` and `.`".to_string(),
            ));
        }
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
                    return Err(invalid(key, format!("missing field `{field}`")));
                }
                config
                    .servers
                    .push(ServerConfig::new(&name, "", &[], &[], &[], &[]));
                let last = config.servers.len() - 1;
                &mut config.servers[last]
            }
        };
        apply_patch(server, patch, origin).map_err(|(field, msg)| {
            let k = if field.is_empty() {
                key.clone()
            } else {
                join_key(&key, field)
            };
            invalid(k, msg)
        })?;
    }

    config.sources.push(origin.to_path_buf());
    Ok(config)
}

/// Applies the given keys; on failure returns (field, message).
fn apply_patch(
    server: &mut ServerConfig,
    patch: ServerPatch,
    origin: &Path,
) -> Result<(), (&'static str, String)> {
    if let Some(command) = patch.command {
        if command.trim().is_empty() {
            return Err(("command", "must not be empty".to_string()));
        }
        server.command = if command.starts_with("~/") {
            expand_tilde(&command).to_string_lossy().into_owned()
        } else if command.contains('/') && !Path::new(&command).is_absolute() {
            resolve_path(&command, origin)
                .to_string_lossy()
                .into_owned()
        } else {
            command
        };
    }
    if let Some(args) = patch.args {
        server.args = args;
    }
    if let Some(ids) = patch.language_ids {
        if ids.is_empty() || ids.iter().any(|i| i.is_empty()) {
            return Err((
                "language_ids",
                "must list at least one non-empty language id".to_string(),
            ));
        }
        server.language_ids = ids;
    }
    if let Some(exts) = patch.file_extensions {
        // A leading dot is tolerated: ".rs" means "rs".
        let exts: Vec<String> = exts
            .into_iter()
            .map(|e| e.strip_prefix('.').map(str::to_string).unwrap_or(e))
            .collect();
        if exts.is_empty() || exts.iter().any(|e| e.is_empty() || e.contains('/')) {
            return Err((
                "file_extensions",
                "must list at least one extension, without dot".to_string(),
            ));
        }
        server.file_extensions = exts;
    }
    if let Some(markers) = patch.root_markers {
        if markers
            .iter()
            .any(|m| m.is_empty() || m.contains('/') || m == "." || m == "..")
        {
            return Err((
                "root_markers",
                "markers must be plain file or directory names".to_string(),
            ));
        }
        server.root_markers = markers;
    }
    if let Some(opts) = patch.initialization_options {
        match server.initialization_options.as_mut() {
            Some(existing) => deep_merge(existing, opts),
            None => server.initialization_options = Some(opts),
        }
    }
    if let Some(settings) = patch.settings {
        if !settings.is_object() {
            return Err(("settings", "must be a table".to_string()));
        }
        if !server.settings.is_object() {
            server.settings = empty_object();
        }
        deep_merge(&mut server.settings, settings);
    }
    if let Some(env) = patch.env {
        server.env.extend(env);
    }
    if let Some(pass) = patch.env_passthrough {
        server.env_passthrough = pass;
    }
    if let Some(ms) = patch.request_timeout_ms {
        if ms == 0 {
            return Err(("request_timeout_ms", "must be greater than 0".to_string()));
        }
        server.request_timeout_ms = ms;
    }
    if let Some(cmds) = patch.execute_commands {
        server.execute_commands = cmds;
    }
    if let Some(methods) = patch.extension_methods {
        if let Some((method, refusal)) = methods
            .iter()
            .find_map(|m| crate::gate::methods::refusal(m).map(|r| (m, r)))
        {
            return Err((
                "extension_methods",
                format!(
                    "{method} is never forwarded (the RFD refuses {} methods)",
                    refusal.category()
                ),
            ));
        }
        server.extension_methods = methods;
    }
    if let Some(encodings) = patch.position_encodings {
        if encodings.is_empty() {
            return Err((
                "position_encodings",
                "must offer at least one encoding".to_string(),
            ));
        }
        if let Some(bad) = encodings
            .iter()
            .find(|e| !KNOWN_POSITION_ENCODINGS.contains(&e.as_str()))
        {
            return Err((
                "position_encodings",
                format!("unknown encoding `{bad}` (use utf-8, utf-16 or utf-32)"),
            ));
        }
        server.position_encodings = encodings;
    }
    if let Some(map) = patch.language_id_by_extension {
        for (ext, id) in map {
            let ext = ext.strip_prefix('.').map(str::to_string).unwrap_or(ext);
            server.language_id_by_extension.insert(ext, id);
        }
    }
    if let Some(globs) = patch.watch_globs {
        server.watch_globs = globs;
    }
    if let Some(quiescent) = patch.ready_when_quiescent {
        server.ready_when_quiescent = quiescent;
    }
    if let Some(code) = patch.project_code {
        server.project_code = Some(code);
    }
    if let Some(args) = patch.probe_args {
        server.probe_args = args;
    }
    if let Some(enabled) = patch.enabled {
        server.enabled = enabled;
    }
    crate::lsp::remote::apply(
        &mut server.remote,
        crate::lsp::remote::RemoteKeys {
            connect: patch.connect,
            token_env: patch.token_env,
            token_via: patch.token_via,
            subprotocol: patch.subprotocol,
            tls_ca_file: patch
                .tls_ca_file
                .map(|f| expand_tilde(&f.to_string_lossy())),
            path_map: patch.path_map,
        },
    )?;
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

fn python_server(name: &str, command: &str, args: &[&str]) -> ServerConfig {
    let mut server = ServerConfig::new(
        name,
        command,
        args,
        &["python"],
        &["py", "pyi"],
        &[
            "pyproject.toml",
            "setup.py",
            "setup.cfg",
            "requirements.txt",
            "pyrightconfig.json",
        ],
    );
    // pyright-langserver has no --version (it fails asking for a transport);
    // with --stdio and its input closed it logs its version in LSP framing.
    if command.ends_with("pyright-langserver") {
        server.probe_args = strings(&["--stdio"]);
    }
    server
}

fn with_ids(mut server: ServerConfig, pairs: &[(&str, &str)]) -> ServerConfig {
    server.language_id_by_extension = pairs
        .iter()
        .map(|(e, i)| ((*e).to_string(), (*i).to_string()))
        .collect();
    server
}

/// The built-in table. Several servers may serve one file type (pyright, basedpyright and
/// pylsp all take `.py`); each runs only when its binary is on `PATH`.
fn builtin_servers() -> Vec<ServerConfig> {
    let mut rust = ServerConfig::new(
        "rust-analyzer",
        "rust-analyzer",
        &[],
        &["rust"],
        &["rs"],
        &["Cargo.toml", "rust-project.json"],
    );
    // No `cargo check` on save: an agent saves often and the check competes for the CPU.
    rust.settings = json!({ "rust-analyzer": { "checkOnSave": false } });
    // It answers `null`/`[]` while loading; only `quiescent: true` means answers are whole.
    rust.ready_when_quiescent = true;

    // clangd keeps its default background index (needed for cross-file references); note
    // that it writes `.cache/clangd/index/` into the project.
    let clangd = with_ids(
        ServerConfig::new(
            "clangd",
            "clangd",
            &[],
            &["cpp", "c"],
            &["c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx"],
            &[
                "compile_commands.json",
                "compile_flags.txt",
                ".clangd",
                "CMakeLists.txt",
                "Makefile",
            ],
        ),
        &[("c", "c")],
    );

    let mut typescript = with_ids(
        ServerConfig::new(
            "typescript-language-server",
            "typescript-language-server",
            &["--stdio"],
            &[
                "typescript",
                "typescriptreact",
                "javascript",
                "javascriptreact",
            ],
            &["ts", "tsx", "js", "jsx", "mjs", "cjs", "mts", "cts"],
            &["tsconfig.json", "jsconfig.json", "package.json"],
        ),
        &[
            ("ts", "typescript"),
            ("mts", "typescript"),
            ("cts", "typescript"),
            ("tsx", "typescriptreact"),
            ("js", "javascript"),
            ("mjs", "javascript"),
            ("cjs", "javascript"),
            ("jsx", "javascriptreact"),
        ],
    );
    // By default typescript-language-server also runs a syntax-only tsserver that answers
    // while the project loads: a definition right after the first didOpen then lands on the
    // import, not the declaration. The semantic server alone waits until it can answer right.
    typescript.initialization_options = Some(json!({ "tsserver": { "useSyntaxServer": "never" } }));

    let json_server = with_ids(
        ServerConfig::new(
            "vscode-json-language-server",
            "vscode-json-language-server",
            &["--stdio"],
            &["json", "jsonc"],
            &["json", "jsonc"],
            &[],
        ),
        &[("json", "json"), ("jsonc", "jsonc")],
    );

    let css = with_ids(
        ServerConfig::new(
            "vscode-css-language-server",
            "vscode-css-language-server",
            &["--stdio"],
            &["css", "scss", "less"],
            &["css", "scss", "less"],
            &[],
        ),
        &[("css", "css"), ("scss", "scss"), ("less", "less")],
    );

    vec![
        rust,
        clangd,
        python_server("pyright", "pyright-langserver", &["--stdio"]),
        python_server("basedpyright", "basedpyright-langserver", &["--stdio"]),
        python_server("pylsp", "pylsp", &[]),
        typescript,
        ServerConfig {
            // `gopls version` is its version command.
            probe_args: strings(&["version"]),
            ..ServerConfig::new(
                "gopls",
                "gopls",
                &[],
                &["go"],
                &["go"],
                &["go.work", "go.mod"],
            )
        },
        ServerConfig::new(
            "bash-language-server",
            "bash-language-server",
            &["start"],
            &["shellscript"],
            &["sh", "bash"],
            &[],
        ),
        json_server,
        ServerConfig::new(
            "yaml-language-server",
            "yaml-language-server",
            &["--stdio"],
            &["yaml"],
            &["yaml", "yml"],
            &[],
        ),
        css,
        ServerConfig::new(
            "vscode-html-language-server",
            "vscode-html-language-server",
            &["--stdio"],
            &["html"],
            &["html", "htm"],
            &[],
        ),
        ServerConfig::new(
            "taplo",
            "taplo",
            &["lsp", "stdio"],
            &["toml"],
            &["toml"],
            &[".taplo.toml", "taplo.toml"],
        ),
        ServerConfig::new(
            "marksman",
            "marksman",
            &["server"],
            &["markdown"],
            &["md", "markdown"],
            &[".marksman.toml"],
        ),
        ServerConfig::new(
            "lua-language-server",
            "lua-language-server",
            &[],
            &["lua"],
            &["lua"],
            &[".luarc.json", ".luarc.jsonc"],
        ),
        ServerConfig::new("zls", "zls", &[], &["zig"], &["zig"], &["build.zig"]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> PathBuf {
        PathBuf::from("/etc/acp-lsp/config.toml")
    }

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_str(text, &origin(), Config::builtin())
    }

    #[test]
    fn builtins_are_well_formed() {
        let c = Config::builtin();
        let mut names: Vec<&str> = c.servers.iter().map(|s| s.name.as_str()).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "duplicate built-in names");
        for s in &c.servers {
            assert!(!s.command.is_empty(), "{}", s.name);
            assert!(!s.language_ids.is_empty(), "{}", s.name);
            assert!(!s.file_extensions.is_empty(), "{}", s.name);
            assert_eq!(s.position_encodings, vec!["utf-16".to_string()]);
        }
        let py = c
            .server("pyright")
            .map(|s| (s.command.as_str(), s.args.clone()));
        assert_eq!(
            py,
            Some(("pyright-langserver", vec!["--stdio".to_string()]))
        );
        assert!(c.server("pylsp").is_some());
        assert!(c.skip_dirs.iter().any(|d| d == "node_modules"));
        assert_eq!(c.idle_grace_ms, 30_000);
    }

    #[test]
    fn quiescence_readiness_is_on_for_rust_analyzer_and_configurable() {
        let builtin = Config::builtin();
        assert!(builtin
            .server("rust-analyzer")
            .is_some_and(|s| s.ready_when_quiescent));
        assert!(builtin
            .server("clangd")
            .is_some_and(|s| !s.ready_when_quiescent));
        let c = match parse("[servers.rust-analyzer]\nready_when_quiescent = false\n") {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        assert!(c
            .server("rust-analyzer")
            .is_some_and(|s| !s.ready_when_quiescent));
    }

    #[test]
    fn override_field_of_builtin() {
        let c = match parse(
            "[servers.rust-analyzer]\nargs = [\"--verbose\"]\nrequest_timeout_ms = 5000\n\
             settings = { \"rust-analyzer\" = { cargo = { features = \"all\" } } }\n",
        ) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        let ra = c
            .server("rust-analyzer")
            .cloned()
            .unwrap_or_else(|| panic!());
        assert_eq!(ra.args, vec!["--verbose".to_string()]);
        assert_eq!(ra.request_timeout(), Duration::from_millis(5000));
        // Untouched keys keep their built-in values; settings merge deeply.
        assert_eq!(ra.command, "rust-analyzer");
        assert_eq!(ra.root_markers[0], "Cargo.toml");
        assert_eq!(
            ra.settings,
            json!({"rust-analyzer": {"checkOnSave": false, "cargo": {"features": "all"}}})
        );
        assert_eq!(c.sources, vec![origin()]);
        assert_eq!(c.servers.len(), Config::builtin().servers.len());
    }

    #[test]
    fn disable_builtin() {
        let c = parse("[servers.pyright]\nenabled = false\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(c.server("pyright").is_some_and(|s| !s.enabled));
        assert!(c.enabled_servers().all(|s| s.name != "pyright"));
        assert!(c.enabled_servers().any(|s| s.name == "pylsp"));
    }

    #[test]
    fn add_server_and_top_level_keys() {
        let text = r#"# acp-lsp config
read_only_roots = ["~/.rustup/toolchains", "vendor"]
allowed_uri_schemes = ["jdt"]
skip_dirs = ["target", "node_modules"]
idle_grace_ms = 1000
trusted_projects = ["/src/work"]
[servers.ruff]
command = "ruff"
args = ["server"]
language_ids = ["python"]
file_extensions = ["py"]
root_markers = ["pyproject.toml", "ruff.toml"]
[servers.aaa]
command = "aaa-ls"
language_ids = ["aaa"]
file_extensions = [".aaa"]
"#;
        let c = parse(text).unwrap_or_else(|e| panic!("{e}"));
        let ruff = c
            .server("ruff")
            .cloned()
            .unwrap_or_else(|| panic!("no ruff"));
        assert_eq!(ruff.args, vec!["server".to_string()]);
        assert_eq!(ruff.root_markers.len(), 2);
        assert!(ruff.enabled);
        assert_eq!(ruff.settings, json!({}));
        assert_eq!(ruff.request_timeout_ms, 30_000);
        // New servers come after built-ins, in file order.
        let n = c.servers.len();
        assert_eq!(c.servers[n - 2].name, "ruff");
        assert_eq!(c.servers[n - 1].name, "aaa");
        assert_eq!(c.servers[n - 1].file_extensions, vec!["aaa".to_string()]);
        assert_eq!(
            c.skip_dirs,
            vec!["target".to_string(), "node_modules".to_string()]
        );
        assert_eq!(c.idle_grace_ms, 1000);
        assert_eq!(c.allowed_uri_schemes, vec!["jdt".to_string()]);
        assert_eq!(c.trusted_projects, vec![PathBuf::from("/src/work")]);
        assert_eq!(c.read_only_roots[1], PathBuf::from("/etc/acp-lsp/vendor"));
        if let Some(home) = home_dir() {
            assert_eq!(c.read_only_roots[0], home.join(".rustup/toolchains"));
        }
    }

    #[test]
    fn unknown_key_reports_line_column_and_key() {
        let text = "idle_grace_ms = 5\n\n[servers.ruff]\ncommand = \"ruff\"\nlanguage_ids = [\"python\"]\nfile_extensions = [\"py\"]\nargz = [\"server\"]\n";
        let err = parse(text).err().unwrap_or_else(|| panic!("accepted"));
        match &err {
            ConfigError::Parse {
                line, column, key, ..
            } => {
                assert_eq!(*line, 7);
                assert_eq!(*column, 1);
                assert_eq!(key.as_deref(), Some("servers.ruff.argz"));
            }
            other => panic!("wrong error {other:?}"),
        }
        let shown = err.to_string();
        assert!(
            shown.starts_with(
                "/etc/acp-lsp/config.toml:7:1: servers.ruff.argz: unknown field `argz`"
            ),
            "{shown}"
        );
    }

    #[test]
    fn unknown_top_level_key_and_wrong_type() {
        let err = parse("idle_grace_ms = 5\nbogus = 1\n").err();
        assert!(
            matches!(&err, Some(ConfigError::Parse { line: 2, key: Some(k), .. }) if k == "bogus"),
            "{err:?}"
        );
        let err = parse("[servers.ruff]\ncommand = \"ruff\"\nargs = \"server\"\n").err();
        match &err {
            Some(ConfigError::Parse {
                line, column, key, ..
            }) => {
                assert_eq!((*line, *column), (3, 8));
                assert_eq!(key.as_deref(), Some("servers.ruff.args"));
            }
            other => panic!("{other:?}"),
        }
        let err = parse(
            "[servers.rust-analyzer]\nsettings = { \"rust-analyzer\" = { x = 1, y = [1, 2 }\n",
        )
        .err();
        assert!(
            matches!(err, Some(ConfigError::Parse { line: 2, .. })),
            "{err:?}"
        );
    }

    #[test]
    fn missing_command_is_invalid_and_names_key() {
        let text = "skip_dirs = []\n\n[servers.ruff]\nargs = [\"server\"]\nlanguage_ids = [\"python\"]\nfile_extensions = [\"py\"]\n";
        let err = parse(text).err().unwrap_or_else(|| panic!("accepted"));
        match &err {
            ConfigError::Invalid {
                key,
                message,
                location,
                ..
            } => {
                assert_eq!(key, "servers.ruff");
                assert_eq!(message, "missing field `command`");
                assert_eq!(*location, Some((3, 1)));
            }
            other => panic!("wrong error {other:?}"),
        }
        assert_eq!(
            err.to_string(),
            "/etc/acp-lsp/config.toml:3:1: servers.ruff: missing field `command`"
        );
        // An override of a built-in needs no command.
        assert!(parse("[servers.clangd]\nargs = [\"--log=error\"]\n").is_ok());
        // Invalid values name the field.
        let err = parse("[servers.clangd]\nrequest_timeout_ms = 0\n").err();
        assert_eq!(
            err.as_ref().and_then(|e| e.key()),
            Some("servers.clangd.request_timeout_ms")
        );
        let err = parse("[servers.clangd]\nposition_encodings = [\"utf-7\"]\n").err();
        assert!(matches!(err, Some(ConfigError::Invalid { .. })), "{err:?}");
    }

    #[test]
    fn error_display_uses_tilde() {
        let Some(home) = home_dir() else { return };
        if home == Path::new("/") {
            return;
        }
        let path = home.join(".config/acp-lsp/config.toml");
        let err = Config::from_toml_str("[servers.x]\nargs = []\n", &path, Config::builtin())
            .err()
            .unwrap_or_else(|| panic!("accepted"));
        assert_eq!(
            err.to_string(),
            "~/.config/acp-lsp/config.toml:1:1: servers.x: missing field `command`"
        );
    }

    #[test]
    fn settings_section_paths() {
        let mut s = ServerConfig::new("x", "x", &[], &["x"], &["x"], &[]);
        s.settings = json!({
            "rust-analyzer": {"cargo": {"features": "all"}, "checkOnSave": false},
            "python.analysis": {"typeCheckingMode": "basic"},
        });
        assert_eq!(
            s.settings_section(Some("rust-analyzer.cargo")),
            json!({"features": "all"})
        );
        assert_eq!(
            s.settings_section(Some("rust-analyzer.checkOnSave")),
            json!(false)
        );
        assert_eq!(s.settings_section(Some("rust-analyzer.nope")), Value::Null);
        assert_eq!(s.settings_section(Some("nope")), Value::Null);
        assert_eq!(
            s.settings_section(Some("rust-analyzer.checkOnSave.deeper")),
            Value::Null
        );
        assert_eq!(
            s.settings_section(Some("python")),
            json!({"analysis": {"typeCheckingMode": "basic"}})
        );
        assert_eq!(
            s.settings_section(Some("python.analysis.typeCheckingMode")),
            json!("basic")
        );
        let whole = s.settings_section(None);
        assert_eq!(whole, s.settings_section(Some("")));
        assert_eq!(whole["rust-analyzer"]["checkOnSave"], json!(false));
        assert_eq!(
            whole["python"]["analysis"]["typeCheckingMode"],
            json!("basic")
        );
    }

    #[test]
    fn language_id_by_extension() {
        let c = Config::builtin();
        let ts = c
            .server("typescript-language-server")
            .unwrap_or_else(|| panic!());
        assert_eq!(ts.language_id_for(Path::new("a/b.tsx")), "typescriptreact");
        assert_eq!(ts.language_id_for(Path::new("b.js")), "javascript");
        assert_eq!(ts.language_id_for(Path::new("b.jsx")), "javascriptreact");
        assert_eq!(ts.language_id_for(Path::new("b.ts")), "typescript");
        assert_eq!(ts.language_id_for(Path::new("Makefile")), "typescript");
        let clangd = c.server("clangd").unwrap_or_else(|| panic!());
        assert_eq!(clangd.language_id_for(Path::new("x.c")), "c");
        assert_eq!(clangd.language_id_for(Path::new("x.cpp")), "cpp");
        let ra = c.server("rust-analyzer").unwrap_or_else(|| panic!());
        assert_eq!(ra.language_id_for(Path::new("src/lib.rs")), "rust");
    }

    #[test]
    fn project_config_only_when_trusted() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let trusted = home.path().join("work");
        let proj = trusted.join("proj");
        let other = home.path().join("other");
        for d in [&proj, &other] {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(d.join(PROJECT_FILE), "[servers.gopls]\nenabled = false\n")
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let user = home.path().join("config.toml");
        std::fs::write(
            &user,
            format!("trusted_projects = [{:?}]\n", trusted.display().to_string()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut c = Config::load(Some(&user)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.sources, vec![user.clone()]);

        assert!(!c.load_project(&other).unwrap_or_else(|e| panic!("{e}")));
        assert!(c.server("gopls").is_some_and(|s| s.enabled));
        assert_eq!(c.sources.len(), 1);

        assert!(c.load_project(&proj).unwrap_or_else(|e| panic!("{e}")));
        assert!(c.server("gopls").is_some_and(|s| !s.enabled));
        assert_eq!(c.sources, vec![user, proj.join(PROJECT_FILE)]);

        // A project file may not widen trust; the error leaves the config unchanged.
        std::fs::write(proj.join(PROJECT_FILE), "trusted_projects = [\"/\"]\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let before = c.clone();
        let err = c.load_project(&proj).err();
        assert_eq!(err.as_ref().and_then(|e| e.key()), Some("trusted_projects"));
        assert_eq!(c, before);
    }

    #[test]
    fn explicit_file_must_exist() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let missing = dir.path().join("nope.toml");
        let err = Config::load(Some(&missing)).err();
        assert!(matches!(err, Some(ConfigError::Io { .. })), "{err:?}");
    }

    #[test]
    fn syntax_error_message_is_one_line() {
        let err = parse("a = 1\n[servers.ruff\n").err();
        let shown = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            shown.starts_with("/etc/acp-lsp/config.toml:2:14: "),
            "{shown}"
        );
        assert!(!shown.contains('\n'), "{shown}");
    }

    #[test]
    fn line_col_counts_characters() {
        let text = "a\nbé = 1\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 2), (2, 1));
        assert_eq!(line_col(text, 6), (2, 4));
    }

    #[test]
    fn project_code_is_off_by_default_run_when_trusted_and_settings_win() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let mut config = Config::builtin();
        let rust = config.server("rust-analyzer").cloned().expect("built-in");
        assert_eq!(
            config.project_code_for(&rust, root),
            (ProjectCode::Off, ProjectCodeSource::Default)
        );
        let off = config.effective_server(&rust, root, Path::new("rust-analyzer"));
        assert_eq!(
            off.settings_section(Some("rust-analyzer.cargo.buildScripts.enable")),
            json!(false)
        );
        assert_eq!(
            off.settings_section(Some("rust-analyzer.procMacro.enable")),
            json!(false)
        );
        let options = off.initialization_options.clone().unwrap_or_default();
        assert_eq!(options["cargo"]["buildScripts"]["enable"], json!(false));
        assert_eq!(options["procMacro"]["enable"], json!(false));
        // The rest of the built-in's settings stay.
        assert_eq!(
            off.settings_section(Some("rust-analyzer.checkOnSave")),
            json!(false)
        );

        config.trusted_projects = vec![root.to_path_buf()];
        assert_eq!(
            config.project_code_for(&rust, root),
            (ProjectCode::Run, ProjectCodeSource::TrustedProject)
        );
        assert_eq!(
            config.effective_server(&rust, root, Path::new("rust-analyzer")),
            rust
        );

        let parsed = Config::from_toml_str(
            "project_code = \"off\"\n[servers.gopls]\nproject_code = \"run\"\n",
            Path::new("/x/config.toml"),
            config,
        )
        .expect("valid");
        assert_eq!(
            parsed.project_code_for(&rust, root),
            (ProjectCode::Off, ProjectCodeSource::Global)
        );
        let gopls = parsed.server("gopls").cloned().expect("built-in");
        assert_eq!(
            parsed.project_code_for(&gopls, root),
            (ProjectCode::Run, ProjectCodeSource::Server)
        );
        let mut gopls_off = gopls.clone();
        gopls_off.project_code = None;
        let effective = parsed.effective_server(&gopls_off, root, Path::new("gopls"));
        assert_eq!(
            effective.env.get("GOTOOLCHAIN").map(String::as_str),
            Some("local")
        );
    }

    #[test]
    fn quotas_and_http_limits_are_read_and_checked() {
        let parsed = Config::from_toml_str(
            "max_requests_per_session = 3\nmax_requests_total = 7\n[mcp_http]\nmax_body_bytes = 1000\nmax_concurrent = 2\nread_timeout_ms = 500\n",
            Path::new("/x/config.toml"),
            Config::builtin(),
        )
        .expect("valid");
        let gate = parsed.gate_config();
        assert_eq!(
            (gate.max_requests_per_session, gate.max_requests_total),
            (3, 7)
        );
        assert_eq!(
            parsed.mcp_http,
            McpHttpLimits {
                max_body_bytes: 1000,
                max_concurrent: 2,
                read_timeout: Duration::from_millis(500)
            }
        );
        let zero = Config::from_toml_str(
            "max_requests_total = 0\n",
            Path::new("/x/config.toml"),
            Config::builtin(),
        );
        assert!(zero.is_err());
    }

    #[test]
    fn project_code_off_pins_typescript_beside_the_server() {
        let dir = tempfile::tempdir().expect("tempdir");
        let modules = dir.path().join("lib/node_modules");
        let cli = modules.join("typescript-language-server/lib/cli.mjs");
        let tsserver = modules.join("typescript/lib/tsserver.js");
        for file in [&cli, &tsserver] {
            std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
            std::fs::write(file, "").expect("write");
        }
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        let program = bin.join("typescript-language-server");
        std::os::unix::fs::symlink(&cli, &program).expect("link");
        let config = Config::builtin();
        let ts = config
            .server("typescript-language-server")
            .cloned()
            .expect("built-in");
        let off = config.effective_server(&ts, dir.path(), &program);
        let options = off.initialization_options.expect("options");
        assert_eq!(options["plugins"], json!([]));
        let pinned = tsserver.canonicalize().expect("canonical");
        assert_eq!(
            options["tsserver"]["path"],
            json!(pinned.display().to_string())
        );
        // The built-in's own option stays.
        assert_eq!(options["tsserver"]["useSyntaxServer"], json!("never"));
    }
}
