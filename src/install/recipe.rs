//! Install recipes: which package of which registry provides a server's
//! binary, pinned to a version and, where the registry gives one, a
//! checksum (`[install.NAME]` tables in the built-in table, the user file
//! or a trusted project's `.acp-lsp.toml`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Where a recipe's package comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The npm registry, with `npm` into a private `node_modules`.
    Npm,
    /// PyPI, with `pip` into a private virtualenv.
    Pypi,
    /// A rustup component of the active toolchain.
    Rustup,
    /// The Go module proxy, with `go install` into a private `GOBIN`.
    Go,
    /// The Rust package registry, with `cargo install --locked` into a private root.
    Cargo,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Npm => "npm",
            Source::Pypi => "pypi",
            Source::Rustup => "rustup",
            Source::Go => "go",
            Source::Cargo => "cargo",
        }
    }

    /// The program the recipe runs, as people know it.
    pub fn tool(self) -> &'static str {
        match self {
            Source::Npm => "npm",
            Source::Pypi => "python3",
            Source::Rustup => "rustup",
            Source::Go => "go",
            Source::Cargo => "cargo",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One package of a recipe at one version.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Package {
    pub name: String,
    /// `None`: what the source gives (rustup: the toolchain's component).
    pub version: Option<String>,
    /// npm: the tarball's `integrity` (`sha512-…`), as the registry lists it.
    pub integrity: Option<String>,
    /// PyPI: file name → sha256 (hex) of the package's own files; a file
    /// not listed is checked against the registry's hash only.
    pub sha256: BTreeMap<String, String>,
}

impl Package {
    /// `name@version` (npm, go), `name==version` (PyPI), or `name`.
    pub fn spec(&self, source: Source) -> String {
        match (&self.version, source) {
            (None, _) => self.name.clone(),
            (Some(v), Source::Pypi) => format!("{}=={v}", self.name),
            (Some(v), Source::Cargo) => format!("{}@{v}", self.name),
            (Some(v), _) => format!("{}@{v}", self.name),
        }
    }
}

/// How to install one server.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Recipe {
    /// The server it is for (the `[install.NAME]` key).
    pub server: String,
    pub source: Source,
    /// The package that provides the server's command, then any installed
    /// beside it (typescript beside typescript-language-server).
    pub packages: Vec<Package>,
    /// cargo: features to turn on (`lsp` for taplo).
    pub features: Vec<String>,
    /// The version was chosen by a user or project file (not the built-in
    /// table): only that version runs. Otherwise any installed version of
    /// the package does, the recipe's first.
    #[serde(default)]
    pub pinned: bool,
}

impl Recipe {
    /// The main package.
    pub fn package(&self) -> &Package {
        &self.packages[0]
    }

    /// The main package's version, or `"toolchain"` (rustup).
    pub fn version_label(&self) -> &str {
        self.package().version.as_deref().unwrap_or("toolchain")
    }

    /// "npm pyright@1.1.414 + typescript@6.0.3".
    pub fn describe(&self) -> String {
        let specs: Vec<String> = self.packages.iter().map(|p| p.spec(self.source)).collect();
        format!("{} {}", self.source, specs.join(" + "))
    }

    /// A short stable hash of everything that decides what gets installed
    /// (source, packages, versions, checksums, features): two recipes that
    /// would install the same thing share one directory.
    pub fn key(&self) -> String {
        // A fixed layout of the fields, not a serialization whose order
        // could change.
        let mut text = String::new();
        text.push_str(self.source.as_str());
        for p in &self.packages {
            text.push('\0');
            text.push_str(&p.name);
            text.push('\0');
            text.push_str(p.version.as_deref().unwrap_or(""));
            text.push('\0');
            text.push_str(p.integrity.as_deref().unwrap_or(""));
            for (file, hash) in &p.sha256 {
                text.push('\0');
                text.push_str(file);
                text.push('=');
                text.push_str(hash);
            }
        }
        for f in &self.features {
            text.push('\0');
            text.push_str(f);
        }
        let hash = uuid::Uuid::new_v5(&KEY_NAMESPACE, text.as_bytes())
            .simple()
            .to_string();
        hash[..12].to_string()
    }

    /// The directory name of this recipe's package in the store:
    /// `npm-pyright`, `pypi-python-lsp-server`.
    pub fn store_name(&self) -> String {
        let name: String = self
            .package()
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{}-{}", self.source, name.trim_start_matches('_'))
    }

    /// The install's directory name under [`Recipe::store_name`]:
    /// `<version>-<key>`.
    pub fn install_name(&self) -> String {
        let version: String = self
            .version_label()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.+".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{version}-{}", self.key())
    }
}

/// Namespace of recipe keys (UUIDv5).
const KEY_NAMESPACE: uuid::Uuid = uuid::Uuid::from_bytes([
    0x51, 0x0c, 0x7e, 0x2a, 0x93, 0x4b, 0x4d, 0x2e, 0x8f, 0x61, 0x0a, 0xd3, 0x5b, 0x77, 0x19, 0xc2,
]);

/// One `[install.NAME]` table as a file writes it (every key optional: a
/// table over an existing recipe changes only what it gives).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipePatch {
    pub npm: Option<String>,
    pub pypi: Option<String>,
    pub rustup: Option<String>,
    pub go: Option<String>,
    pub cargo: Option<String>,
    pub version: Option<String>,
    pub integrity: Option<String>,
    pub sha256: Option<BTreeMap<String, String>>,
    /// Packages installed beside the main one (npm only).
    pub with: Option<Vec<WithPackage>>,
    pub features: Option<Vec<String>>,
}

/// A package installed beside a recipe's main one.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WithPackage {
    pub npm: String,
    pub version: String,
    pub integrity: Option<String>,
}

/// What is wrong with an `[install.NAME]` table: (key under it, message).
pub type PatchError = (&'static str, String);

impl RecipePatch {
    /// This table over `base` (the recipe of the same server from an earlier
    /// file, if any). Changing the package or its version without giving a
    /// checksum drops the old checksum: it was the old version's.
    /// `pinning`: a `version` given here pins it ([`Recipe::pinned`]).
    pub fn apply(
        self,
        server: &str,
        base: Option<&Recipe>,
        pinning: bool,
    ) -> Result<Recipe, PatchError> {
        let sources = [
            (Source::Npm, self.npm),
            (Source::Pypi, self.pypi),
            (Source::Rustup, self.rustup),
            (Source::Go, self.go),
            (Source::Cargo, self.cargo),
        ];
        let given: Vec<(Source, String)> = sources
            .into_iter()
            .filter_map(|(s, name)| name.map(|n| (s, n)))
            .collect();
        if given.len() > 1 {
            return Err((
                "",
                "give one of `npm`, `pypi`, `rustup`, `go`, `cargo`".to_string(),
            ));
        }
        let mut recipe = match (given.into_iter().next(), base) {
            (Some((source, name)), base) => {
                if name.trim().is_empty() {
                    return Err((source.as_str(), "must name a package".to_string()));
                }
                let same = base.filter(|b| b.source == source && b.package().name == name);
                match same {
                    Some(b) => b.clone(),
                    None => Recipe {
                        server: server.to_string(),
                        source,
                        packages: vec![Package {
                            name,
                            version: None,
                            integrity: None,
                            sha256: BTreeMap::new(),
                        }],
                        features: Vec::new(),
                        pinned: false,
                    },
                }
            }
            (None, Some(b)) => b.clone(),
            (None, None) => return Err((
                "",
                "a new recipe needs one of `npm`, `pypi`, `rustup`, `go`, `cargo` (the package)"
                    .to_string(),
            )),
        };
        let main = &mut recipe.packages[0];
        if let Some(version) = self.version {
            recipe.pinned |= pinning;
            if version.trim().is_empty() || version.contains(char::is_whitespace) {
                return Err(("version", format!("{version:?} is not a version")));
            }
            if main.version.as_deref() != Some(version.as_str()) {
                main.integrity = None;
                main.sha256.clear();
            }
            main.version = Some(version);
        }
        if let Some(integrity) = self.integrity {
            if recipe.source != Source::Npm {
                return Err(("integrity", "only npm packages have an `integrity`".into()));
            }
            check_integrity(&integrity).map_err(|m| ("integrity", m))?;
            recipe.packages[0].integrity = Some(integrity);
        }
        if let Some(sha256) = self.sha256 {
            if recipe.source != Source::Pypi {
                return Err(("sha256", "only PyPI packages have `sha256` digests".into()));
            }
            for (file, hash) in &sha256 {
                if hash.len() != 64 || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(("sha256", format!("{file}: {hash:?} is not a sha256 in hex")));
                }
            }
            recipe.packages[0].sha256 = sha256
                .into_iter()
                .map(|(f, h)| (f, h.to_ascii_lowercase()))
                .collect();
        }
        if let Some(with) = self.with {
            if recipe.source != Source::Npm {
                return Err(("with", "only npm recipes install packages beside".into()));
            }
            recipe.packages.truncate(1);
            for w in with {
                if let Some(i) = &w.integrity {
                    check_integrity(i).map_err(|m| ("with", m))?;
                }
                recipe.packages.push(Package {
                    name: w.npm,
                    version: Some(w.version),
                    integrity: w.integrity,
                    sha256: BTreeMap::new(),
                });
            }
        }
        if let Some(features) = self.features {
            if recipe.source != Source::Cargo {
                return Err(("features", "only cargo recipes have features".into()));
            }
            recipe.features = features;
        }
        if recipe.package().version.is_none() && recipe.source != Source::Rustup {
            return Err((
                "version",
                format!("a {} recipe must pin a version", recipe.source),
            ));
        }
        recipe.server = server.to_string();
        Ok(recipe)
    }
}

fn check_integrity(integrity: &str) -> Result<(), String> {
    let ok = ["sha512-", "sha384-", "sha256-", "sha1-"]
        .iter()
        .any(|p| integrity.starts_with(p) && integrity.len() > p.len());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{integrity:?} is not an npm integrity (`sha512-…`, as `npm view PKG@VERSION dist.integrity` prints it)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(toml_text: &str) -> RecipePatch {
        toml::from_str(toml_text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_new_version_drops_the_old_checksum() {
        let base = patch("npm = \"pyright\"\nversion = \"1.0.0\"\nintegrity = \"sha512-abc\"\n")
            .apply("pyright", None, false)
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(base.package().integrity.as_deref(), Some("sha512-abc"));
        let pinned = patch("version = \"1.0.1\"\n")
            .apply("pyright", Some(&base), true)
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(pinned.package().version.as_deref(), Some("1.0.1"));
        assert_eq!(pinned.package().integrity, None);
        assert!(pinned.pinned && !base.pinned);
        assert_ne!(pinned.key(), base.key());
        // The same version keeps it.
        let same = patch("version = \"1.0.0\"\n")
            .apply("pyright", Some(&base), false)
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(same, base);
    }

    #[test]
    fn bad_tables_say_which_key() {
        assert_eq!(
            patch("npm = \"a\"\npypi = \"b\"\nversion = \"1\"\n")
                .apply("x", None, false)
                .map_err(|e| e.0),
            Err("")
        );
        assert_eq!(
            patch("npm = \"a\"\n")
                .apply("x", None, false)
                .map_err(|e| e.0),
            Err("version")
        );
        assert_eq!(
            patch("npm = \"a\"\nversion = \"1\"\nintegrity = \"abc\"\n")
                .apply("x", None, false)
                .map_err(|e| e.0),
            Err("integrity")
        );
        assert_eq!(
            patch("pypi = \"a\"\nversion = \"1\"\nsha256 = { \"a.whl\" = \"zz\" }\n")
                .apply("x", None, false)
                .map_err(|e| e.0),
            Err("sha256")
        );
        let rustup = patch("rustup = \"rust-analyzer\"\n")
            .apply("rust-analyzer", None, false)
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(rustup.version_label(), "toolchain");
    }

    #[test]
    fn store_names_are_plain() {
        let r = patch("npm = \"@taplo/cli\"\nversion = \"0.7.0\"\n")
            .apply("taplo", None, false)
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(r.store_name(), "npm-taplo_cli");
        assert!(r.install_name().starts_with("0.7.0-"));
    }
}
