//! The `lsp/servers` entry: the RFD's fields at the top, acp-lsp's own under
//! `_meta["acp-lsp"]` (ACP reserves every other name at the root of its types).
//!
//! One struct serves the wire, the MCP tools and the CLI, so a field or a
//! state renamed here is renamed everywhere, checked by the compiler.

use super::ids::ServerId;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The key under an entry's `_meta` that holds acp-lsp's additions.
pub const META_KEY: &str = "acp-lsp";

/// A server's state in the RFD's vocabulary. Agents treat anything but
/// `running` as not accepting requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Starting,
    Running,
    NotRunning,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Running => "running",
            State::NotRunning => "not_running",
        }
    }
}

/// acp-lsp's finer lifecycle of a server (`_meta["acp-lsp"].status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    /// Spawned, handshake not finished.
    Starting,
    /// Answering, but still loading the project: answers may be incomplete.
    Indexing,
    /// Loaded: answers are complete.
    Ready,
    /// Exited unexpectedly; a new process is on its way.
    Restarting,
    /// Gave up after repeated crashes, or could not be started.
    Failed,
    /// Stopped (session closed and idle grace passed, or proxy exiting).
    Stopped,
    /// Not started yet: a nested root's server (or any, with `--lazy`)
    /// waits for a request naming its id or a file under its root; also a
    /// nested server stopped after idling or to make room under
    /// `max_running_servers`. Starts on use.
    Idle,
    /// Its program is being installed (`auto_install`); it starts when
    /// the install is done. `progress` says what the install does.
    Installing,
    /// Its program is not installed; `installCommand` installs it.
    NotInstalled,
}

impl ServerState {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Starting => "starting",
            ServerState::Indexing => "indexing",
            ServerState::Ready => "ready",
            ServerState::Restarting => "restarting",
            ServerState::Failed => "failed",
            ServerState::Stopped => "stopped",
            ServerState::Idle => "idle",
            ServerState::Installing => "installing",
            ServerState::NotInstalled => "not_installed",
        }
    }

    /// The RFD's `state`: `running` only when answers are complete, so an
    /// agent reading `state` alone never takes a loading server's empty
    /// answer for "nothing there".
    pub fn wire(self) -> State {
        match self {
            ServerState::Ready => State::Running,
            ServerState::Starting
            | ServerState::Indexing
            | ServerState::Restarting
            | ServerState::Installing => State::Starting,
            ServerState::Failed
            | ServerState::Stopped
            | ServerState::Idle
            | ServerState::NotInstalled => State::NotRunning,
        }
    }

    /// Whether an agent may expect the same request to work later without
    /// anyone stepping in.
    pub fn will_run(self) -> bool {
        !matches!(self, ServerState::Failed | ServerState::NotInstalled)
    }
}

/// Progress of a loading server (from its work-done progress).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<u32>,
}

/// A live dynamic registration (`client/registerCapability`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationEntry {
    pub id: String,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub register_options: Option<Box<RawValue>>,
}

/// One entry of `lsp/servers`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerEntry {
    pub server_id: ServerId,
    pub name: String,
    /// The absolute workspace root the server was started for.
    pub workspace_path: String,
    /// The primary language id.
    pub language_id: String,
    /// Without the dot.
    pub file_extensions: Vec<String>,
    pub state: State,
    /// The server's `initialize` result `capabilities`, verbatim (`{}` before
    /// the handshake).
    pub capabilities: Box<RawValue>,
    #[serde(rename = "_meta")]
    pub meta: EntryMeta,
}

/// An entry's `_meta`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EntryMeta {
    #[serde(rename = "acp-lsp")]
    pub acp_lsp: AcpLspEntry,
}

/// acp-lsp's additions to a server entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AcpLspEntry {
    pub status: ServerState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Every language id the server handles.
    pub language_ids: Vec<String>,
    /// `serverInfo.version` from the server's initialize result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The encoding positions are in (`capabilities.positionEncoding`, or
    /// `utf-16` when the server names none).
    pub position_encoding: String,
    /// Commands `workspace/executeCommand` may run on this server.
    pub execute_commands: Vec<String>,
    /// Server extension methods forwarded to this server (its `extension_methods`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extension_methods: Vec<String>,
    /// Live dynamic registrations, apart from the verbatim `capabilities`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registrations: Vec<RegistrationEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Restarts since the server was first started.
    pub restarts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Roots whose file watching is degraded (watch limit hit).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded_roots: Vec<String>,
    /// What acp-lsp dropped from this server to stay bounded; absent while
    /// nothing was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<Dropped>,
    /// A companion (`secondary = true`: ruff beside pyright) runs beside its
    /// language's primary; navigation is the primary's, diagnostics and code
    /// actions come from both.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub companion: bool,
    /// The command that installs the server (`acp-lsp install pyright`),
    /// while it is `not_installed`, `installing` or failed to install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_command: Option<String>,
}

/// What acp-lsp dropped from one server's output because a table was at its
/// cap (`lsp::server::MAX_*`) or the bytes were not protocol; counted since
/// the server was first started (garbage and invalid messages: since its last
/// start).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dropped {
    /// `$/progress` begins beyond `MAX_PROGRESS_TOKENS` live tokens.
    pub progress_tokens: u64,
    /// `client/registerCapability` registrations beyond `MAX_REGISTRATIONS`
    /// or `MAX_REGISTRATION_BYTES` (refused with an error to the server).
    pub registrations: u64,
    /// Documents' diagnostics evicted beyond `MAX_DIAGNOSTIC_DOCUMENTS` or
    /// `MAX_DIAGNOSTIC_BYTES`.
    pub diagnostics: u64,
    /// Bytes of stdout that were not an LSP frame.
    pub garbage_bytes: u64,
    /// Frames that were not JSON-RPC.
    pub invalid_messages: u64,
    /// Warnings about this server counted instead of logged (rate limit).
    pub suppressed_warnings: u64,
}

impl Dropped {
    /// `None` when nothing was dropped.
    pub fn any(self) -> Option<Dropped> {
        (self != Dropped::default()).then_some(self)
    }
}

impl ServerEntry {
    /// acp-lsp's additions.
    pub fn ours(&self) -> &AcpLspEntry {
        &self.meta.acp_lsp
    }

    /// The finer status.
    pub fn status(&self) -> ServerState {
        self.meta.acp_lsp.status
    }

    /// The short form error data lists servers in.
    pub fn summary(&self) -> ServerSummary {
        ServerSummary {
            server_id: self.server_id.clone(),
            name: self.name.clone(),
            workspace_path: self.workspace_path.clone(),
            state: self.state,
        }
    }
}

/// A server as error `data.servers` lists it (the RFD: errors SHOULD include
/// the current server list).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerSummary {
    pub server_id: ServerId,
    pub name: String,
    pub workspace_path: String,
    pub state: State,
}

/// The `lsp/servers` result.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServersResult {
    pub servers: Vec<ServerEntry>,
    pub available_methods: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ready_is_running() {
        assert_eq!(ServerState::Ready.wire(), State::Running);
        for s in [
            ServerState::Starting,
            ServerState::Indexing,
            ServerState::Restarting,
        ] {
            assert_eq!(s.wire(), State::Starting, "{s:?}");
        }
        assert_eq!(ServerState::Installing.wire(), State::Starting);
        for s in [
            ServerState::Failed,
            ServerState::Stopped,
            ServerState::Idle,
            ServerState::NotInstalled,
        ] {
            assert_eq!(s.wire(), State::NotRunning, "{s:?}");
        }
    }
}
