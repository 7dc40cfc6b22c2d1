//! Starting and stopping the registry's servers: a start within
//! `max_running_servers` (the least recently used nested server serving
//! nothing makes room, or the start is refused with `server_limit`), a
//! retired server's fresh idle successor, the nested idle stop, and the
//! registry's shutdown (begun at the proxy's first signal, so that a server
//! the same signal ended is not restarted).

use super::*;

impl Registry {
    /// Shutdown has begun: no server starts or restarts from now on (one
    /// that exits is left stopped), and the background tasks end. The
    /// servers still running are stopped by [`Registry::shutdown`].
    pub fn begin_shutdown(&self) {
        if !self.closing.is_cancelled() {
            tracing::debug!("registry shutting down: no more server starts");
        }
        self.closing.cancel();
    }

    /// Begins the shutdown at the first SIGTERM, SIGINT or SIGHUP, until
    /// the returned handle is dropped. For a process that already handles
    /// these signals (the proxy ends its agent on them): a client that ends
    /// the whole process tree (acpx) signals the servers at the same time,
    /// and they must not be restarted.
    pub fn begin_shutdown_on_signal(self: &Arc<Self>) -> std::io::Result<AbortOnDropHandle<()>> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut hangup = signal(SignalKind::hangup())?;
        let registry = Arc::downgrade(self);
        Ok(AbortOnDropHandle::new(tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = interrupt.recv() => {}
                _ = hangup.recv() => {}
            }
            if let Some(registry) = registry.upgrade() {
                registry.begin_shutdown();
            }
        })))
    }

    /// Stops every server and waits for them (and for the background tasks).
    pub async fn shutdown(&self) {
        self.begin_shutdown();
        for (_, timer) in self.nested_timers.lock().drain() {
            timer.abort();
        }
        for (_, timer) in self.idle.lock().drain() {
            timer.abort();
        }
        for (_, install) in self.installs.lock().drain() {
            install.abort();
        }
        let servers = self.all_servers();
        futures::future::join_all(servers.iter().map(|s| s.stop())).await;
        let retiring: Vec<_> = self.retiring.lock().drain(..).collect();
        futures::future::join_all(retiring).await;
        self.tasks.close();
        self.tasks.wait().await;
    }

    /// Runs `work` in [`Registry::tasks`], until it ends or shutdown begins.
    pub(super) fn spawn_tracked(
        &self,
        work: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let closing = self.closing.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                _ = closing.cancelled() => {}
                _ = work => {}
            }
        });
    }

    /// Servers running (or starting) now.
    pub fn running_servers(&self) -> Vec<Arc<Server>> {
        self.all_servers()
            .into_iter()
            .filter(|s| is_live(s.status().state))
            .collect()
    }

    /// Starts the server `id` if it is idle, within `max_running_servers`:
    /// when the cap is reached, the least recently used nested server
    /// serving nothing is stopped first; when there is none, the start is
    /// refused with [`GateError::ServerLimit`]. A server already live is
    /// only noted as used.
    pub fn start_server(&self, id: &str) -> Result<(), GateError> {
        let _deciding = self.starting.lock();
        let server = self.server(id).ok_or_else(|| GateError::UnknownServer {
            server_id: id.into(),
            servers: Vec::new(),
        })?;
        self.running.lock().touch(id);
        if server.status().state != ServerState::Idle {
            // Being installed: it starts when the install is done.
            server.start_when_installed();
            return Ok(());
        }
        let cap = self.config.max_running_servers;
        loop {
            let live = self.running_servers();
            if live.len() < cap {
                break;
            }
            let victim = self.running.lock().victim(live.iter().map(|s| s.id()), id);
            let Some(victim) = victim else {
                tracing::warn!(
                    limit = "max_running_servers",
                    value = cap,
                    server = %server.spec().config.name,
                    root = %server.spec().root.display(),
                    "limit hit: server not started"
                );
                return Err(GateError::ServerLimit {
                    server_id: id.to_string(),
                    server: format!(
                        "{} at {}",
                        server.spec().config.name,
                        server.spec().root.display()
                    ),
                    limit: cap,
                });
            };
            tracing::info!(
                limit = "max_running_servers",
                value = cap,
                "stopping the least recently used nested server to make room"
            );
            self.retire(&victim);
        }
        server.ensure_started();
        if !self.running.lock().is_top_level(id) {
            self.arm_idle_stop(id);
        }
        Ok(())
    }

    /// Stops the server `id` and puts a fresh, idle one with the same spec
    /// (and sessions) in its place: its id stays listed and it starts again
    /// on use.
    fn retire(&self, id: &str) {
        let old = {
            let mut tables = self.write();
            let Some(old) = tables.servers.get(id).cloned() else {
                return;
            };
            let fresh = Server::new(old.spec().clone());
            for session in tables.users.get(id).into_iter().flatten() {
                if let Some(session) = tables.handles.get(session) {
                    fresh.attach_session(session);
                }
            }
            tables.servers.insert(id.to_string(), fresh);
            old
        };
        tracing::info!(
            server = %old.spec().config.name,
            root = %old.spec().root.display(),
            "stopping nested server; idle until used again"
        );
        let mut retiring = self.retiring.lock();
        retiring.retain(|stop| !stop.is_finished());
        retiring.push(tokio::spawn(async move { old.stop().await }));
    }

    /// Starts the idle-stop timer of the nested server `id` (once).
    fn arm_idle_stop(&self, id: &str) {
        let idle = Duration::from_millis(self.config.nested_idle_stop_ms);
        if idle.is_zero() {
            return;
        }
        let mut timers = self.nested_timers.lock();
        if timers.get(id).is_some_and(|t| !t.is_finished()) {
            return;
        }
        let me = self.me.clone();
        let server_id = id.to_string();
        let timer = tokio::spawn(async move {
            loop {
                let left = {
                    let Some(registry) = me.upgrade() else {
                        return;
                    };
                    let _deciding = registry.starting.lock();
                    let live = registry
                        .server(&server_id)
                        .is_some_and(|s| is_live(s.status().state));
                    if !live {
                        return;
                    }
                    let left = registry.running.lock().idle_left(&server_id, idle);
                    match left {
                        Some(left) => left,
                        None => {
                            registry.nested_timers.lock().remove(&server_id);
                            registry.retire(&server_id);
                            return;
                        }
                    }
                };
                tokio::time::sleep(left).await;
            }
        });
        timers.insert(id.to_string(), timer);
    }
}

impl Drop for Registry {
    /// A registry dropped without [`Registry::shutdown`] (a test, a command
    /// that ends) still ends its background tasks.
    fn drop(&mut self) {
        self.closing.cancel();
    }
}
