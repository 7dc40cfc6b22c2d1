//! `acp-lsp proxy --chain`: one proxy of a proxy chain under a conductor
//! (`acp_lsp::acp::chain`), with the same servers, gate and MCP tools as
//! `acp-lsp proxy -- AGENT`, and no agent of its own to start.

use acp_lsp::acp::chain;
use acp_lsp::acp::relay::{LspMode, RelayOptions};
use acp_lsp::agent_process::Signals;
use acp_lsp::daemon::client::{Launcher, RemoteHost};
use acp_lsp::daemon::paths::Paths;
use acp_lsp::lsp::config::Config;
use acp_lsp::lsp::registry::{Registry, RegistryOptions};
use acp_lsp::mcp::McpMode;
use acp_lsp::proxy_host::ProxyHost;
use acp_lsp::record::Recorder;
use acp_lsp_core::gate::Gate;
use anyhow::Context;
use std::sync::Arc;

/// Runs until the conductor closes our input or a signal arrives; the exit code.
pub(crate) async fn chain_proxy(
    config: Config,
    shared: Option<(Paths, Launcher)>,
    recorder: Option<Recorder>,
    lsp_mode: LspMode,
    (lazy, auto_install): (bool, bool),
    mcp_mode: McpMode,
) -> anyhow::Result<i32> {
    let mut signals = Signals::install().context("cannot install signal handlers")?;
    let config = tokio::task::spawn_blocking(move || {
        let mut config = config;
        super::discover_roots(&mut config);
        config
    })
    .await
    .context("toolchain discovery failed")?;
    let gate_config = config.gate_config();
    let mcp_http = config.mcp_http;
    let host = match shared {
        Some((paths, launcher)) => ProxyHost::Shared(RemoteHost::new(paths, launcher)),
        None => ProxyHost::Local(Registry::new(
            config,
            RegistryOptions {
                lazy,
                auto_install,
                start_when_listed: true,
                recorder: recorder.clone(),
                max_watches: None,
            },
        )),
    };
    let gate = Gate::new(Arc::new(host), gate_config);
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
    tracing::info!("running as a proxy-chain component (proxy/initialize, proxy/successor)");
    let sessions = Arc::clone(&gate);
    let relay = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(chain::run(
        gate,
        acp_lsp::acp::stdio::editor_input(),
        acp_lsp::acp::stdio::editor_output(),
        RelayOptions {
            lsp_mode,
            recorder: recorder.clone(),
            mcp: mcp_relay,
        },
    )));
    let code = tokio::select! {
        end = relay => {
            tracing::debug!(?end, "the conductor closed the chain");
            0
        }
        name = signals.recv() => {
            tracing::info!(signal = name, "stopping");
            1
        }
    };
    for session in sessions.sessions().all() {
        sessions.close_session(session.id());
    }
    tokio::select! {
        _ = sessions.host().shutdown() => {}
        name = signals.recv() => {
            tracing::warn!(signal = name, "not waiting for the language servers to shut down");
        }
    }
    if let Some(recorder) = &recorder {
        recorder.sync();
    }
    Ok(code)
}
