//! A server whose program is not installed: listed `not_installed` with the
//! command that installs it, or, with `auto_install`, `installing` (its
//! progress in the entry) until the registry's install is done; then `idle`,
//! and started if someone asked for it meanwhile.

use super::Server;
use crate::gate::{Progress, ServerState};

impl Server {
    /// The program is not installed; `install_command` installs it.
    pub fn mark_not_installed(&self, install_command: Option<String>) {
        let hint = match &install_command {
            Some(command) => format!("not installed: run `{command}`"),
            None => format!(
                "not installed: no install recipe; put `{}` on PATH",
                self.spec.config.command
            ),
        };
        self.live().install_command = install_command;
        self.status.send_modify(|s| {
            s.state = ServerState::NotInstalled;
            s.last_error = Some(hint);
            s.progress = None;
        });
    }

    /// The program is being installed (`what`: the recipe).
    pub fn mark_installing(&self, install_command: String, what: &str) {
        self.live().install_command = Some(install_command);
        self.status.send_modify(|s| {
            s.state = ServerState::Installing;
            s.last_error = None;
            s.progress = Some(Progress {
                title: format!("installing {what}"),
                message: None,
                percentage: None,
            });
        });
    }

    /// What the install does now.
    pub fn install_progress(&self, step: &str) {
        self.status.send_if_modified(|s| {
            let Some(progress) = s
                .progress
                .as_mut()
                .filter(|_| s.state == ServerState::Installing)
            else {
                return false;
            };
            progress.message = Some(step.chars().take(super::MAX_PROGRESS_TEXT).collect());
            true
        });
    }

    /// The install is done: the server is `idle`. Returns whether someone
    /// asked for it while it was installing (the registry then starts it).
    pub fn installed(&self) -> bool {
        let wanted = {
            let mut live = self.live();
            live.install_command = None;
            std::mem::take(&mut live.start_when_installed)
        };
        self.status.send_modify(|s| {
            s.state = ServerState::Idle;
            s.progress = None;
            s.last_error = None;
        });
        wanted
    }

    /// The install failed: the server is `failed`, with why.
    pub fn install_failed(&self, error: String) {
        self.status.send_modify(|s| {
            s.state = ServerState::Failed;
            s.progress = None;
            s.last_error = Some(error);
        });
    }

    /// A start was asked for while installing; returns whether it is
    /// installing (then it starts when done).
    pub fn start_when_installed(&self) -> bool {
        if self.state() != ServerState::Installing {
            return false;
        }
        self.live().start_when_installed = true;
        true
    }
}
