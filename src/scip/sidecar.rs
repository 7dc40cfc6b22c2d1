//! The sidecar: how acp-lsp knows that a document is unchanged since its
//! index was built. SCIP records no content hashes, so `acp-lsp index`
//! writes, next to each index, `<index file>.acp-lsp.json`:
//!
//! ```json
//! {"format": "acp-lsp-scip-sidecar/1", "commit": "9af6ae6…", "root": ".",
//!  "indexer": "rust-analyzer 1.95.0", "indexBytes": 41392, "indexSha256": "…",
//!  "documents": {"src/lib.rs": "<sha-256 of the file's bytes, hex>", …}}
//! ```
//!
//! `root` is the indexed project's directory relative to the directory the
//! index is found for (the directory holding `index.scip`, the parent of
//! `.scip/`, or the session root for a configured path); `commit` is the
//! version-control commit the files were at (`git rev-parse HEAD`), shown
//! in answers as `scip@<commit>`. A document of the index with no hash here
//! is never answered; an index without a sidecar answers nothing.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The `format` this version writes and reads.
pub const FORMAT: &str = "acp-lsp-scip-sidecar/1";
/// The suffix added to an index file's name.
pub const SUFFIX: &str = ".acp-lsp.json";
/// Largest sidecar read (a hash and a path per document).
pub const MAX_SIDECAR_BYTES: u64 = 256 * 1024 * 1024;

/// A SHA-256.
pub type Hash = [u8; 32];

/// The sidecar's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sidecar {
    pub format: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The project's directory relative to the base directory, `/`-separated.
    #[serde(default = "dot")]
    pub root: String,
    /// What built the index (`rust-analyzer 1.95.0`).
    #[serde(default)]
    pub indexer: String,
    /// The index file's length and SHA-256 (hex): a truncated or replaced
    /// index is refused.
    pub index_bytes: u64,
    pub index_sha256: String,
    /// Relative path → SHA-256 (hex) of the file's bytes when it was indexed.
    pub documents: BTreeMap<String, String>,
}

fn dot() -> String {
    ".".to_string()
}

/// Why a sidecar cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SidecarError {
    #[error("no sidecar {} (write one with `acp-lsp index`): no document can be checked, so none is answered", path.display())]
    Missing { path: PathBuf },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// Where the sidecar of `index` is.
pub fn path_for(index: &Path) -> PathBuf {
    let mut name = index.file_name().unwrap_or_default().to_os_string();
    name.push(SUFFIX);
    index.with_file_name(name)
}

/// What a sidecar says about its index and documents, checked.
#[derive(Debug, Clone)]
pub struct Checked {
    pub sidecar: Sidecar,
    pub index_hash: Hash,
    pub documents: BTreeMap<String, Hash>,
}

/// The sidecar of `index`, checked: its format, a root that stays inside
/// the base directory, hashes of 64 hex digits.
pub fn read(index: &Path) -> Result<Checked, SidecarError> {
    let path = path_for(index);
    let invalid = |message: String| SidecarError::Invalid {
        path: path.clone(),
        message,
    };
    let metadata = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SidecarError::Missing { path })
        }
        Err(e) => return Err(invalid(e.to_string())),
    };
    if metadata.len() > MAX_SIDECAR_BYTES {
        return Err(invalid(format!(
            "{} bytes is over the limit of {MAX_SIDECAR_BYTES}",
            metadata.len()
        )));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| invalid(e.to_string()))?;
    let sidecar: Sidecar = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    if sidecar.format != FORMAT {
        return Err(invalid(format!(
            "format {:?}, not {FORMAT:?}",
            sidecar.format
        )));
    }
    if sidecar.root != "." && !super::load::is_safe_relative_path(&sidecar.root) {
        return Err(invalid(format!(
            "root {:?} must be \".\" or a relative path without `..`",
            sidecar.root
        )));
    }
    let index_hash = parse_hex(&sidecar.index_sha256).ok_or_else(|| {
        invalid(format!(
            "indexSha256 {:?} is not a SHA-256 in hex",
            sidecar.index_sha256
        ))
    })?;
    let mut documents = BTreeMap::new();
    for (document, hex) in &sidecar.documents {
        let hash = parse_hex(hex)
            .ok_or_else(|| invalid(format!("{document}: {hex:?} is not a SHA-256 in hex")))?;
        documents.insert(document.clone(), hash);
    }
    Ok(Checked {
        sidecar,
        index_hash,
        documents,
    })
}

/// Writes `sidecar` next to `index` (atomically: a temporary file renamed).
pub fn write(index: &Path, sidecar: &Sidecar) -> std::io::Result<PathBuf> {
    let path = path_for(index);
    let text = serde_json::to_string_pretty(sidecar)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let mut temporary = path.clone().into_os_string();
    temporary.push(".tmp");
    std::fs::write(&temporary, text + "\n")?;
    std::fs::rename(&temporary, &path)?;
    Ok(path)
}

/// SHA-256 of `bytes`.
pub fn hash(bytes: &[u8]) -> Hash {
    Sha256::digest(bytes).into()
}

/// Lowercase hex.
pub fn to_hex(hash: &Hash) -> String {
    use std::fmt::Write;
    hash.iter().fold(String::with_capacity(64), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

fn parse_hex(hex: &str) -> Option<Hash> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_roots_outside() {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("index.scip");
        let mut sidecar = Sidecar {
            format: FORMAT.into(),
            commit: Some("abc".into()),
            root: ".".into(),
            indexer: "test 1".into(),
            index_bytes: 3,
            index_sha256: to_hex(&hash(b"idx")),
            documents: BTreeMap::from([("src/a.rs".to_string(), to_hex(&hash(b"a")))]),
        };
        write(&index, &sidecar).unwrap();
        assert_eq!(path_for(&index), dir.path().join("index.scip.acp-lsp.json"));
        let checked = read(&index).unwrap();
        assert_eq!(checked.sidecar, sidecar);
        assert_eq!(checked.documents["src/a.rs"], hash(b"a"));
        assert_eq!(checked.index_hash, hash(b"idx"));

        for root in ["..", "../other", "/etc", "a/../../b"] {
            sidecar.root = root.into();
            write(&index, &sidecar).unwrap();
            let refused = read(&index);
            assert!(
                matches!(refused, Err(SidecarError::Invalid { .. })),
                "{root}: {refused:?}"
            );
        }
        std::fs::write(path_for(&index), "{\"format\": \"x\", \"documents\": {}}").unwrap();
        assert!(matches!(read(&index), Err(SidecarError::Invalid { .. })));
        std::fs::remove_file(path_for(&index)).unwrap();
        assert!(matches!(read(&index), Err(SidecarError::Missing { .. })));
    }

    #[test]
    fn hex_is_sha256() {
        assert_eq!(
            to_hex(&hash(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(parse_hex(&to_hex(&hash(b"x"))), Some(hash(b"x")));
        assert_eq!(parse_hex("zz"), None);
    }
}
