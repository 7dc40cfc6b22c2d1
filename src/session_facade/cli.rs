//! The command line's part of the one-shot session (`acp-lsp request`,
//! `acp-lsp rename`): its own session over one root, and a rename planned
//! and applied on disk (or shown as a diff).

use super::{FileLocation, RenameEdit, RenameError, SessionFacade};
use crate::gate::Gate;
use crate::lsp::config::Config;
use crate::lsp::registry::{Registry, RegistryOptions};
use crate::proxy_host::ProxyHost;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The session id the tools use.
pub const SESSION: &str = "acp-lsp-cli";
/// How long a tool waits for its server to be ready before asking.
pub const READY_WAIT: Duration = Duration::from_secs(120);

/// Whether a command line session uses the shared daemon: when asked
/// (`--shared`, or `shared = true` in the config), or when the daemon for
/// this config runs already (its servers are warm).
pub fn use_shared_daemon(asked: bool, paths: &crate::daemon::paths::Paths) -> bool {
    #[cfg(unix)]
    let running = std::os::unix::net::UnixStream::connect(&paths.socket).is_ok();
    // A named pipe opens like a file while its server listens.
    #[cfg(windows)]
    let running = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&paths.socket)
        .is_ok();
    asked || running
}

/// What `rename` did.
#[derive(Debug)]
pub enum RenameOutcome {
    /// The unified diff of what would change.
    DryRun(String),
    Applied(crate::edit::ApplyReport),
    /// The server's edit changes no file (the symbol already has the name).
    Unchanged,
}

impl SessionFacade {
    /// Opens the session. Servers start on first use: only the one asked is spawned.
    pub fn start(root: &Path, config: Config) -> SessionFacade {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let gate_config = config.gate_config();
        let registry = Registry::new(
            config,
            RegistryOptions {
                lazy: true,
                ..RegistryOptions::default()
            },
        );
        let gate = Gate::new(Arc::new(ProxyHost::Local(registry)), gate_config);
        gate.open_session(SESSION, vec![root.clone()]);
        SessionFacade {
            roots: vec![root],
            session: SESSION.to_string(),
            gate,
            ready_wait: READY_WAIT,
            cancel: CancellationToken::new(),
        }
    }

    /// Opens the session on the shared daemon's servers (`--shared`): a
    /// server the daemon runs already for this root answers at once, and
    /// stays warm for the next command (the daemon's idle grace).
    pub fn start_shared(
        root: &Path,
        config: &Config,
        paths: crate::daemon::paths::Paths,
        launcher: crate::daemon::client::Launcher,
    ) -> SessionFacade {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let host = ProxyHost::Shared(crate::daemon::client::RemoteHost::new(paths, launcher));
        let gate = Gate::new(Arc::new(host), config.gate_config());
        gate.open_session(SESSION, vec![root.clone()]);
        SessionFacade {
            roots: vec![root],
            session: SESSION.to_string(),
            gate,
            ready_wait: READY_WAIT,
            cancel: CancellationToken::new(),
        }
    }

    /// Ends the command's session: its own servers stop; on the shared
    /// daemon, the session closes and the servers stay for the next one.
    pub async fn finish(&self) {
        self.gate.close_session(&self.session);
        self.shutdown().await;
    }

    /// Renames the symbol at `at` to `new_name` with the file's language
    /// server: `prepareRename` (when the server supports it), `rename`, then
    /// the WorkspaceEdit is planned against the disk and applied atomically
    /// (or shown as a diff).
    pub async fn rename(
        &self,
        at: &FileLocation,
        new_name: &str,
        server_name: Option<&str>,
        dry_run: bool,
        accept_annotations: bool,
    ) -> Result<RenameOutcome, RenameError> {
        use crate::edit::{apply_to_disk, plan_on_disk, Decisions};
        let RenameEdit { edit, encoding, .. } = self.rename_edit(at, new_name, server_name).await?;
        let writable = |path: &Path| self.is_writable(path);
        let mut plan = plan_on_disk(&edit, encoding, &writable, &Decisions::default())?;
        if plan.changes_nothing() {
            return Ok(RenameOutcome::Unchanged);
        }
        let unconfirmed: Vec<String> = plan
            .unconfirmed()
            .iter()
            .map(|a| format!("{} ({})", a.label, a.id))
            .collect();
        if !unconfirmed.is_empty() {
            if !accept_annotations && !dry_run {
                return Err(RenameError::NeedsConfirmation(unconfirmed.join(", ")));
            }
            let ids: Vec<String> = plan
                .needs_confirmation
                .iter()
                .map(|a| a.id.clone())
                .collect();
            plan.confirm(ids);
        }
        if dry_run {
            // Paths relative to the root (every edit is confined to it), as
            // `git apply` and `patch -p1` read them there.
            return Ok(RenameOutcome::DryRun(crate::edit::dry_run(
                &plan,
                self.root(),
            )));
        }
        Ok(RenameOutcome::Applied(apply_to_disk(&plan)?))
    }
}
