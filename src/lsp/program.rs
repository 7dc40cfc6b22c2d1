//! Where a server's program comes from: the user's `PATH`, or acp-lsp's own
//! installed servers (`crate::install`). A version pinned in a user or
//! project file (`[install.NAME] version = …`) means that install only; else
//! the program on `PATH` comes first (the user chose it), then any
//! installed version.

use std::fmt;
use std::path::PathBuf;

use crate::install::{Installed, Store};
use crate::lsp::config::{Config, ServerConfig};
use crate::lsp::detect::find_on_path;

/// Where a found program came from.
#[derive(Debug, Clone)]
pub enum Origin {
    /// Found on `PATH` (or the configured path).
    Path,
    /// acp-lsp's install (`acp-lsp install NAME`).
    Installed(Box<Installed>),
    /// Reached over the network (`connect`): nothing runs here.
    Remote,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Path => f.write_str("PATH"),
            Origin::Installed(installed) => write!(f, "acp-lsp install ({})", installed.describe()),
            Origin::Remote => f.write_str("remote"),
        }
    }
}

/// A server's program and where it came from.
#[derive(Debug, Clone)]
pub struct Program {
    /// Empty for a remote server.
    pub path: PathBuf,
    pub origin: Origin,
}

/// The program `server` runs, if it is found.
pub fn find_program(config: &Config, server: &ServerConfig) -> Option<Program> {
    find_program_in(config, server, Store::user().as_ref())
}

/// [`find_program`] with the installed servers of `store`.
pub fn find_program_in(
    config: &Config,
    server: &ServerConfig,
    store: Option<&Store>,
) -> Option<Program> {
    if server.remote.is_some() {
        return Some(Program {
            path: PathBuf::new(),
            origin: Origin::Remote,
        });
    }
    let recipe = config.recipe(&server.name);
    let installed = || {
        let (path, installed) = store?.resolve(recipe?, &server.command)?;
        Some(Program {
            path,
            origin: Origin::Installed(Box::new(installed)),
        })
    };
    if recipe.is_some_and(|r| r.pinned) {
        return installed();
    }
    find_on_path(&server.command)
        .map(|path| Program {
            path,
            origin: Origin::Path,
        })
        .or_else(installed)
}

/// Whether `server` can run here (found, or remote).
pub fn is_available(config: &Config, server: &ServerConfig) -> bool {
    find_program(config, server).is_some()
}

/// The command that installs `server`, when acp-lsp has a recipe for it.
pub fn install_command(config: &Config, server: &str) -> Option<String> {
    config
        .recipe(server)
        .map(|_| format!("acp-lsp install {server}"))
}

/// `command` on `PATH`, else the program of that name in acp-lsp's install
/// of a built-in server that runs it (what a session would run).
pub fn find_command(command: &str) -> Option<PathBuf> {
    if let Some(path) = find_on_path(command) {
        return Some(path);
    }
    let config = Config::builtin();
    let store = Store::user()?;
    config
        .servers
        .iter()
        .filter(|s| s.command == command)
        .find_map(|s| store.resolve(config.recipe(&s.name)?, command))
        .map(|(path, _)| path)
}
