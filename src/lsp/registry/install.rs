//! Servers a session needs whose program is not installed: each is listed
//! (`not_installed`, with the command that installs it, and a `warn` line
//! naming it at once), or, with `auto_install`, installed in the background
//! (`installing`, its progress in the entry), then started as if it had
//! been there. Only recipes of the configuration the session reads are
//! used — the built-in table, the user's file and a trusted project's
//! file; an untrusted project's `.acp-lsp.toml` is never read.

use super::*;
use crate::install::{Recipe, Store};

/// A missing server found by detection, until its `Server` is made.
pub(super) struct Missing {
    recipe: Option<Recipe>,
    command: String,
    auto: bool,
}

/// A server to install now.
pub(super) struct Fresh {
    server: Arc<Server>,
    recipe: Recipe,
    command: String,
}

impl Registry {
    /// Notes the missing `server` at `root`; the program path its `Server`
    /// gets (where an install will put it, or the bare command).
    pub(super) fn missing_server(
        &self,
        config: &Config,
        server: &ServerConfig,
        root: &Path,
    ) -> PathBuf {
        let recipe = config.recipe(&server.name).cloned();
        let store = Store::user();
        let program = match (&recipe, &store) {
            (Some(recipe), Some(store)) => store.planned_program(recipe, &server.command),
            _ => PathBuf::from(&server.command),
        };
        let auto = self.options.auto_install && recipe.is_some() && store.is_some();
        self.missing.lock().insert(
            server_id(&server.name, root),
            Missing {
                recipe,
                command: server.command.clone(),
                auto,
            },
        );
        program
    }

    /// For a server just found missing: marks it `installing` (and returns
    /// what to install) or `not_installed` (and warns), once per `Server`.
    pub(super) fn take_missing(
        &self,
        server: &Arc<Server>,
        config: &Config,
        server_config: &ServerConfig,
    ) -> Option<Fresh> {
        let missing = self.missing.lock().remove(server.id())?;
        let install_command = crate::lsp::program::install_command(config, &server_config.name);
        let name = &server_config.name;
        let root = server.spec().root.display().to_string();
        match server.state() {
            ServerState::Idle if missing.auto => {
                let recipe = missing.recipe?;
                let command = install_command.unwrap_or_else(|| format!("acp-lsp install {name}"));
                server.mark_installing(command, &recipe.describe());
                tracing::info!(server = %name, %root, recipe = %recipe.describe(), "installing (auto_install)");
                Some(Fresh {
                    server: Arc::clone(server),
                    recipe,
                    command: missing.command,
                })
            }
            ServerState::Idle => {
                let fix = match &install_command {
                    Some(command) => format!("run `{command}` (or set auto_install = true)"),
                    None => format!("no install recipe: put `{}` on PATH", missing.command),
                };
                tracing::warn!(
                    server = %name,
                    %root,
                    fix = %fix,
                    "language server not installed: {fix}"
                );
                server.mark_not_installed(install_command);
                None
            }
            ServerState::NotInstalled => {
                tracing::warn!(server = %name, %root, "language server not installed (see above)");
                None
            }
            _ => None,
        }
    }

    /// Installs `fresh` in the background; when done, the server is idle
    /// and starts if it is a session root's or someone asked for it.
    pub(super) fn begin_install(&self, fresh: Fresh) {
        let Fresh {
            server,
            recipe,
            command,
        } = fresh;
        let me = self.me.clone();
        let id = server.id().to_string();
        let task_id = id.clone();
        let task = tokio::spawn(async move {
            let Some(store) = Store::user() else {
                server.install_failed(crate::install::InstallError::NoDataDir.to_string());
                return;
            };
            let progress = Arc::downgrade(&server);
            let sink = move |_: &str, step: &str| {
                if let Some(server) = progress.upgrade() {
                    server.install_progress(step);
                }
            };
            let started = std::time::Instant::now();
            let outcome = crate::install::install(&store, &recipe, &command, &sink).await;
            let name = server.spec().config.name.clone();
            match outcome {
                Ok(_) if crate::install::run::is_executable(&server.spec().program) => {
                    tracing::info!(
                        server = %name,
                        recipe = %recipe.describe(),
                        after_ms = started.elapsed().as_millis() as u64,
                        "installed"
                    );
                    let wanted = server.installed();
                    if let Some(registry) = me.upgrade() {
                        registry.installs.lock().remove(&task_id);
                        // A session root's server starts with its session
                        // (unless lazy); any other when asked for.
                        let top = registry.running.lock().is_top_level(&task_id)
                            && !registry.options.lazy;
                        if wanted || top {
                            if let Err(e) = registry.start_server(&task_id) {
                                tracing::warn!(error = %e, "installed server not started");
                            }
                        }
                    }
                }
                Ok(outcome) => server.install_failed(format!(
                    "installed {}, but not where this session looks ({}); open the session again",
                    outcome.program.display(),
                    server.spec().program.display()
                )),
                Err(error) => {
                    tracing::warn!(server = %name, reason = error.reason(), %error, "install failed");
                    server.install_failed(error.to_string());
                }
            }
        });
        self.installs.lock().insert(id, task);
    }
}
