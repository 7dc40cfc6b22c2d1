//! The conformance suite: recorded sessions in `fixtures/` replayed against
//! acp-lsp with stand-in servers ([`replay`]), played as the agent (and
//! editor) against any implementation ([`drive`], normative checks), and
//! re-recorded against real servers.

pub mod drive;
pub mod fixture;
pub mod normalize;
pub mod normative;
pub mod record;
pub mod replay;
pub mod report;
pub mod rfd;
pub mod suite;
pub(crate) mod transcript;
pub mod wire;

pub use fixture::{Scenario, ScenarioMeta};
pub use normalize::ROOT;
pub use report::{Failure, Outcome};

use std::time::Duration;

/// How long one line of a replay may wait for acp-lsp (above every timer of
/// acp-lsp a scenario relies on, such as restart backoff).
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the proxy may take to exit once the editor closed its input.
pub(crate) const PROXY_EXIT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a live session (recording, normative run) waits for one answer
/// from a real server, which may be indexing.
pub(crate) const LIVE_ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a scenario could not be run at all (a failing scenario is an
/// [`Outcome`], not an error).
#[derive(Debug, thiserror::Error)]
pub enum ConformanceError {
    #[error("fixture {scenario}: {what}")]
    Fixture { scenario: String, what: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl ConformanceError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ConformanceError {
        let what = what.into();
        move |source| ConformanceError::Io { what, source }
    }
}

/// A fresh temp dir and its canonical path (socket and workspace paths are
/// compared as text, so symlinks in the temp path must be resolved).
pub(crate) fn scratch_dir() -> Result<(tempfile::TempDir, std::path::PathBuf), ConformanceError> {
    let temp = tempfile::tempdir().map_err(ConformanceError::io("creating a temp dir"))?;
    let base = temp
        .path()
        .canonicalize()
        .map_err(ConformanceError::io("resolving the temp dir"))?;
    Ok((temp, base))
}
