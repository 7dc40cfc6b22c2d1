//! The marker of a complete install: written last into the staging
//! directory, which is then renamed into place, so a directory with a
//! marker is whole and one without is never run.

use super::recipe::Source;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The marker's format version.
pub const MARKER_FORMAT: u32 = 1;

/// One package as installed, and the checksum it was checked against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstalledPackage {
    pub name: String,
    pub version: String,
    /// `sha512-…` (npm's integrity) or `sha256:…` (each PyPI file), as
    /// verified at install; empty when the registry gives none (rustup, go:
    /// their own checks apply).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checksums: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    pub format: u32,
    /// The server the install was made for.
    pub server: String,
    pub source: Source,
    /// The recipe's key (`Recipe::key`).
    pub key: String,
    pub packages: Vec<InstalledPackage>,
    /// Where the commands are: relative to the install's directory, or
    /// absolute (rustup's toolchain).
    pub bin_dir: PathBuf,
    /// Seconds since the Unix epoch.
    pub installed_at: u64,
    /// rustup: the component was added by this install (uninstall removes it).
    #[serde(default)]
    pub component_added: bool,
}

impl Marker {
    /// The directory holding the commands of the install at `dir`.
    pub fn bin_dir_in(&self, dir: &Path) -> PathBuf {
        if self.bin_dir.is_absolute() {
            self.bin_dir.clone()
        } else {
            dir.join(&self.bin_dir)
        }
    }

    /// The main package's installed version.
    pub fn version(&self) -> &str {
        self.packages.first().map_or("", |p| p.version.as_str())
    }

    /// Reads the marker of the install at `dir`; `None` when there is none
    /// or it does not parse (an install that is not whole).
    pub fn read(dir: &Path) -> Option<Marker> {
        let text = std::fs::read(super::paths::Store::marker(dir)).ok()?;
        let marker: Marker = serde_json::from_slice(&text).ok()?;
        (marker.format == MARKER_FORMAT).then_some(marker)
    }
}
