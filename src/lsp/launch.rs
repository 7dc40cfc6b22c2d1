//! What a spawn adds to a server's configured command line and what its
//! readiness waits for: made by `caches` and `clangd` before each spawn,
//! read by the supervisor (its own file: both makers use it).

use std::path::PathBuf;

/// What a spawn adds to a server's command line, and what its readiness waits for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Launch {
    /// Appended to the configured arguments.
    pub extra_args: Vec<String>,
    /// clangd: `running` waits for the end of its first background index.
    pub awaits_background_index: bool,
    /// A source file to open after the handshake when nothing is open:
    /// clangd loads its compilation database, and starts indexing, only
    /// once a first file is open.
    pub first_source: Option<PathBuf>,
    /// The compilation database acp-lsp generated for this spawn, if it did.
    pub generated_database: Option<PathBuf>,
    /// The sources it lists.
    pub sources: Vec<PathBuf>,
}
