//! What one live session produced, as the driver recorded it and the
//! normative checks read it (its own file so that neither of the two needs
//! the other's internals).

use super::normalize::Bindings;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

/// What one live run produced.
pub struct Session {
    /// The agent's requests (JSON id text → (method, message text)).
    pub agent_requests: Vec<(String, String, String)>,
    /// Responses the agent received, by JSON id text, in arrival order.
    pub agent_answers: Vec<(String, String)>,
    /// The `initialize` the agent received.
    pub agent_initialize: Option<String>,
    /// The editor's buffers after the session (fs/write_text_file).
    pub buffers: BTreeMap<PathBuf, String>,
    pub bindings: Bindings,
    /// The workspace copy the session ran in.
    pub root: PathBuf,
    pub cancelled: HashSet<String>,
}
