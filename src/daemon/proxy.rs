//! `acp-lsp proxy --shared`: the relay and the gate as in a plain proxy,
//! over a [`RemoteHost`] instead of a registry of its own.

use super::client::{Launcher, RemoteHost};
use super::paths::Paths;
use crate::acp::relay::{self, LspMode, RelayOptions};
use crate::agent_process::{self, AgentProcess, Signals};
use crate::gate::{Gate, GateConfig};
use crate::record::Recorder;
use std::sync::Arc;

/// What the shared proxy needs from the command line.
pub struct SharedProxy {
    pub gate_config: GateConfig,
    pub paths: Paths,
    pub launcher: Launcher,
    pub recorder: Option<Recorder>,
    pub lsp_mode: LspMode,
    pub agent: Vec<String>,
}

/// Why the shared proxy could not run.
#[derive(Debug, thiserror::Error)]
pub enum SharedProxyError {
    #[error("no agent command given")]
    NoAgent,
    #[error("cannot install signal handlers: {0}")]
    Signals(#[source] std::io::Error),
    #[error("cannot start agent {program:?}: {source}")]
    Agent {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// Runs the relay in front of the agent until it ends; returns the agent's
/// exit code. The daemon is reached (started if need be) at the first
/// session; the MCP tools are not offered in this mode (README).
pub async fn run(options: SharedProxy) -> Result<i32, SharedProxyError> {
    let (program, args) = options
        .agent
        .split_first()
        .ok_or(SharedProxyError::NoAgent)?;
    let mut signals = Signals::install().map_err(SharedProxyError::Signals)?;
    let (mut child, agent_in, agent_out) =
        AgentProcess::spawn(program, args).map_err(|source| SharedProxyError::Agent {
            program: program.clone(),
            source,
        })?;
    tracing::info!(command = %options.agent.join(" "), pid = child.pid(), shared = %options.paths.socket.display(), "agent spawned");
    let host = RemoteHost::new(options.paths, options.launcher);
    let gate = Gate::new(Arc::clone(&host), options.gate_config);
    let (eof_tx, eof_rx) = tokio::sync::oneshot::channel::<()>();
    let sessions = Arc::clone(&gate);
    let relay = relay::run(
        gate,
        tokio::io::stdin(),
        tokio::io::stdout(),
        agent_in,
        agent_out,
        RelayOptions {
            lsp_mode: options.lsp_mode,
            recorder: options.recorder.clone(),
            mcp: None,
        },
        move || {
            let _ = eof_tx.send(());
        },
    );
    let outcome = agent_process::supervise(&mut child, &mut signals, relay, eof_rx).await;
    tracing::debug!(stop = ?outcome.stop, relay = ?outcome.relay_end, "relay over");
    // The daemon keeps the servers (for the other proxies, then the idle
    // grace); this proxy only closes its sessions.
    for session in sessions.sessions().all() {
        sessions.close_session(session.id());
    }
    if let Some(recorder) = &options.recorder {
        recorder.sync();
    }
    Ok(outcome.status.and_then(|s| s.code()).unwrap_or(1))
}
