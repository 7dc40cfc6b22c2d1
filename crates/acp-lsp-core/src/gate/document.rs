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

    /// The path to read the document from: [`NamedDocument::path`] when the
    /// gate checked it, else the path its `file:` URI spells (none for
    /// another scheme).
    pub fn file_path(&self) -> Option<std::path::PathBuf> {
        self.path.clone().or_else(|| {
            url::Url::parse(&self.uri)
                .ok()
                .filter(|url| url.scheme() == "file")?
                .to_file_path()
                .ok()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_to_read_is_the_checked_one_else_the_file_uris() {
        let checked = NamedDocument {
            path: Some("/checked/a.rs".into()),
            ..NamedDocument::from_uri("file:///spelled/a.rs".into())
        };
        assert_eq!(checked.file_path(), Some("/checked/a.rs".into()));
        if cfg!(unix) {
            let unchecked = NamedDocument::from_uri("file:///spelled/a%20b.rs".into());
            assert_eq!(unchecked.file_path(), Some("/spelled/a b.rs".into()));
        }
        // Another scheme names no file, even one `url` could read as a path.
        let other = NamedDocument::from_uri("https://localhost/etc/passwd".into());
        assert_eq!(other.file_path(), None);
        assert_eq!(
            NamedDocument::from_uri("untitled:x".into()).file_path(),
            None
        );
    }
}
