//! One server definition (`[servers.NAME]`): its fields and defaults, the
//! settings answered to `workspace/configuration`, and applying a file's
//! table over it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::paths::{expand_tilde, resolve_path};
use super::project_code::ProjectCode;
use super::{DEFAULT_FIRST_LOAD_WAIT_MS, DEFAULT_REQUEST_TIMEOUT_MS, KNOWN_POSITION_ENCODINGS};

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
    /// How long the server's first load may report work before it is taken
    /// as `running` anyway (`DEFAULT_FIRST_LOAD_WAIT_MS` by default).
    #[serde(default = "default_first_load_wait_ms")]
    pub first_load_wait_ms: u64,
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
    /// `window/logMessage` texts (shell-style patterns: `*`, `?`, `[…]`) one
    /// of which ends the server's first load: it is `indexing` until one
    /// arrives. pyright answers from its open files alone until it has
    /// enumerated the project, which it does on a timer after `initialized`
    /// and says only in its log (`Found 3 source files`).
    #[serde(default)]
    pub ready_after_log: Vec<String>,
    /// Overrides the global [`ProjectCode`] for this server.
    #[serde(default)]
    pub project_code: Option<ProjectCode>,
    /// Arguments of the start check `acp-lsp servers` runs (`lsp::probe`):
    /// the binary starts when it exits 0 or answers in LSP framing.
    #[serde(default = "default_probe_args")]
    pub probe_args: Vec<String>,
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Run even when another installed server of the same primary language
    /// comes first (`lsp::primary`): by default one server per language.
    #[serde(default)]
    pub secondary: bool,
    /// Reached over the network instead of run (`connect`, `lsp::remote`).
    #[serde(default)]
    pub remote: Option<crate::lsp::remote::Remote>,
}

pub(super) fn default_probe_args() -> Vec<String> {
    vec!["--version".to_string()]
}

pub(super) fn empty_object() -> Value {
    Value::Object(Map::new())
}

pub(super) fn default_request_timeout_ms() -> u64 {
    DEFAULT_REQUEST_TIMEOUT_MS
}

pub(super) fn default_first_load_wait_ms() -> u64 {
    DEFAULT_FIRST_LOAD_WAIT_MS
}

pub(super) fn default_position_encodings() -> Vec<String> {
    vec!["utf-16".to_string()]
}

pub(super) fn default_true() -> bool {
    true
}

pub(super) fn strings(items: &[&str]) -> Vec<String> {
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
            first_load_wait_ms: default_first_load_wait_ms(),
            execute_commands: Vec::new(),
            extension_methods: Vec::new(),
            position_encodings: default_position_encodings(),
            language_id_by_extension: BTreeMap::new(),
            watch_globs: Vec::new(),
            ready_when_quiescent: false,
            ready_after_log: Vec::new(),
            project_code: None,
            probe_args: default_probe_args(),
            enabled: true,
            secondary: false,
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

    /// The matcher of `ready_after_log`, `None` when it is empty (or, past
    /// the config's own check, does not compile).
    pub fn ready_log_matcher(&self) -> Option<globset::GlobSet> {
        if self.ready_after_log.is_empty() {
            return None;
        }
        ready_log_matcher(&self.ready_after_log).ok()
    }

    /// `first_load_wait_ms` as a duration.
    pub fn first_load_wait(&self) -> Duration {
        Duration::from_millis(self.first_load_wait_ms)
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
pub(super) fn expand_dotted(value: &Value) -> Value {
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
pub(super) fn deep_merge(base: &mut Value, over: Value) {
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

/// A `[servers.NAME]` table: the keys given.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ServerPatch {
    pub(super) command: Option<String>,
    args: Option<Vec<String>>,
    pub(super) language_ids: Option<Vec<String>>,
    pub(super) file_extensions: Option<Vec<String>>,
    root_markers: Option<Vec<String>>,
    initialization_options: Option<Value>,
    settings: Option<Value>,
    env: Option<BTreeMap<String, String>>,
    env_passthrough: Option<Vec<String>>,
    request_timeout_ms: Option<u64>,
    first_load_wait_ms: Option<u64>,
    execute_commands: Option<Vec<String>>,
    extension_methods: Option<Vec<String>>,
    position_encodings: Option<Vec<String>>,
    language_id_by_extension: Option<BTreeMap<String, String>>,
    watch_globs: Option<Vec<String>>,
    ready_when_quiescent: Option<bool>,
    ready_after_log: Option<Vec<String>>,
    project_code: Option<ProjectCode>,
    probe_args: Option<Vec<String>>,
    enabled: Option<bool>,
    secondary: Option<bool>,
    pub(super) connect: Option<String>,
    token_env: Option<String>,
    token_via: Option<crate::lsp::remote::TokenVia>,
    subprotocol: Option<String>,
    tls_ca_file: Option<std::path::PathBuf>,
    path_map: Option<Vec<crate::lsp::path_map::PathMapping>>,
}

/// A key's error: (field, message).
type KeyError = (&'static str, String);

/// Applies the given keys; on failure returns (field, message). Keys are
/// checked and applied in this order (the first bad one is reported).
pub(super) fn apply_patch(
    server: &mut ServerConfig,
    patch: ServerPatch,
    origin: &Path,
) -> Result<(), KeyError> {
    if let Some(command) = patch.command {
        server.command = checked_command(command, origin)?;
    }
    if let Some(args) = patch.args {
        server.args = args;
    }
    if let Some(ids) = patch.language_ids {
        server.language_ids = checked_language_ids(ids)?;
    }
    if let Some(exts) = patch.file_extensions {
        server.file_extensions = checked_file_extensions(exts)?;
    }
    if let Some(markers) = patch.root_markers {
        server.root_markers = checked_root_markers(markers)?;
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
    if let Some(ms) = patch.first_load_wait_ms {
        server.first_load_wait_ms = ms;
    }
    if let Some(cmds) = patch.execute_commands {
        server.execute_commands = cmds;
    }
    if let Some(methods) = patch.extension_methods {
        server.extension_methods = checked_extension_methods(methods)?;
    }
    if let Some(encodings) = patch.position_encodings {
        server.position_encodings = checked_position_encodings(encodings)?;
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
    if let Some(patterns) = patch.ready_after_log {
        ready_log_matcher(&patterns).map_err(|e| ("ready_after_log", e))?;
        server.ready_after_log = patterns;
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
    if let Some(secondary) = patch.secondary {
        server.secondary = secondary;
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

/// `command`: not empty; `~/` expanded, a relative path with a `/` taken
/// from the file that names it, a bare name left for PATH.
fn checked_command(command: String, origin: &Path) -> Result<String, KeyError> {
    if command.trim().is_empty() {
        return Err(("command", "must not be empty".to_string()));
    }
    Ok(if command.starts_with("~/") {
        expand_tilde(&command).to_string_lossy().into_owned()
    } else if command.contains('/') && !Path::new(&command).is_absolute() {
        resolve_path(&command, origin)
            .to_string_lossy()
            .into_owned()
    } else {
        command
    })
}

/// `language_ids`: at least one, none empty.
fn checked_language_ids(ids: Vec<String>) -> Result<Vec<String>, KeyError> {
    if ids.is_empty() || ids.iter().any(|i| i.is_empty()) {
        return Err((
            "language_ids",
            "must list at least one non-empty language id".to_string(),
        ));
    }
    Ok(ids)
}

/// `file_extensions`: at least one, without dot (a leading dot is
/// tolerated: ".rs" means "rs").
fn checked_file_extensions(exts: Vec<String>) -> Result<Vec<String>, KeyError> {
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
    Ok(exts)
}

/// `root_markers`: plain file or directory names.
fn checked_root_markers(markers: Vec<String>) -> Result<Vec<String>, KeyError> {
    if markers
        .iter()
        .any(|m| m.is_empty() || m.contains('/') || m == "." || m == "..")
    {
        return Err((
            "root_markers",
            "markers must be plain file or directory names".to_string(),
        ));
    }
    Ok(markers)
}

/// `extension_methods`: none the RFD refuses.
fn checked_extension_methods(methods: Vec<String>) -> Result<Vec<String>, KeyError> {
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
    Ok(methods)
}

/// `patterns` as one matcher of whole log messages (`*` also matches `/`).
fn ready_log_matcher(patterns: &[String]) -> Result<globset::GlobSet, String> {
    let mut set = globset::GlobSetBuilder::new();
    for pattern in patterns {
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(false)
            .backslash_escape(true)
            .build()
            .map_err(|e| format!("`{pattern}`: {e}"))?;
        set.add(glob);
    }
    set.build().map_err(|e| e.to_string())
}

/// `position_encodings`: at least one, each one LSP knows.
fn checked_position_encodings(encodings: Vec<String>) -> Result<Vec<String>, KeyError> {
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
    Ok(encodings)
}
