//! [`NamedDocument`]: a document an `lsp/request` names, as the gate's
//! checks leave it for the host (a leaf: confinement fills it in, the
//! host's [`Forward`](super::Forward) carries it).

/// A document a request names, as the gate's checks left it.
#[derive(Debug, Clone)]
pub struct NamedDocument {
    /// Its URI, as the agent wrote it.
    pub uri: String,
    /// For a `file:` URI the gate confined: the path the URI spells
    /// (`url::Url::to_file_path`), the one to read it from.
    pub path: Option<std::path::PathBuf>,
    /// The file's metadata, read by the confinement check's own lookup of
    /// the path, when that lookup could give it (Linux: no symlink on the
    /// way, from the descriptor it opened) and the URI has no dot segments.
    /// Read after the request arrived: a host that syncs the document
    /// without waiting first may take it for its own `stat` of the path.
    pub metadata: Option<std::fs::Metadata>,
}

impl NamedDocument {
    /// A document known by its URI alone (a request the gate did not
    /// check here: a daemon's, checked by its client's gate).
    pub fn from_uri(uri: String) -> NamedDocument {
        NamedDocument {
            uri,
            path: None,
            metadata: None,
        }
    }
}
