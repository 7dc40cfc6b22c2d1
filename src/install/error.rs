//! What can go wrong installing a server, each with the fix people need.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The server has no recipe (acp-lsp does not know where to get it).
    #[error("{server} has no install recipe; install it yourself so that `{command}` is on PATH, or add an [install.{server}] table (docs/configuration.md \"Installing servers\")")]
    NoRecipe { server: String, command: String },
    /// The program a recipe runs is not there.
    #[error("installing {server} needs `{tool}`, which is not on PATH: {fix}")]
    MissingTool {
        server: String,
        tool: &'static str,
        fix: &'static str,
    },
    /// The registry could not be reached.
    #[error("installing {server}: the {source_name} registry could not be reached ({detail}); check the network or the registry setting ({setting})")]
    RegistryUnreachable {
        server: String,
        source_name: &'static str,
        setting: &'static str,
        detail: String,
    },
    /// The pinned version is not in the registry.
    #[error("installing {server}: {package} is not in the {source_name} registry ({detail})")]
    NoSuchVersion {
        server: String,
        package: String,
        source_name: &'static str,
        detail: String,
    },
    /// What was downloaded is not what the recipe pins.
    #[error("installing {server}: checksum mismatch for {file}: the recipe pins {expected}, the registry gave {actual}; nothing was installed")]
    ChecksumMismatch {
        server: String,
        file: String,
        expected: String,
        actual: String,
    },
    /// A step of the recipe failed.
    #[error("installing {server}: `{step}` failed: {detail}")]
    StepFailed {
        server: String,
        step: String,
        detail: String,
    },
    /// A step ran past its deadline.
    #[error("installing {server}: `{step}` did not finish within {secs} s")]
    StepTimedOut {
        server: String,
        step: String,
        secs: u64,
    },
    /// The install finished but the server's command is not in it.
    #[error("installing {server}: the package installed, but it has no `{command}` (looked in {})", dir.display())]
    CommandMissing {
        server: String,
        command: String,
        dir: PathBuf,
    },
    /// Another process held the install lock for too long.
    #[error("installing {server}: another acp-lsp (pid {holder}) has been installing it for over {secs} s; try again later")]
    LockTimedOut {
        server: String,
        holder: String,
        secs: u64,
    },
    #[error(
        "no data directory for installed servers: set {} to an absolute path",
        super::paths::DATA_DIR_ENV
    )]
    NoDataDir,
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl InstallError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> InstallError {
        let path = path.into();
        move |source| InstallError::Io { path, source }
    }

    /// A short machine-readable name (logs, `_meta["acp-lsp"].lastError` readers, tests).
    pub fn reason(&self) -> &'static str {
        match self {
            InstallError::NoRecipe { .. } => "no_recipe",
            InstallError::MissingTool { .. } => "missing_tool",
            InstallError::RegistryUnreachable { .. } => "registry_unreachable",
            InstallError::NoSuchVersion { .. } => "no_such_version",
            InstallError::ChecksumMismatch { .. } => "checksum_mismatch",
            InstallError::StepFailed { .. } => "step_failed",
            InstallError::StepTimedOut { .. } => "step_timed_out",
            InstallError::CommandMissing { .. } => "command_missing",
            InstallError::LockTimedOut { .. } => "lock_timed_out",
            InstallError::NoDataDir => "no_data_dir",
            InstallError::Io { .. } => "io",
        }
    }
}
