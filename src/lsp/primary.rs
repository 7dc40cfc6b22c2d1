//! Several servers per language, by capability: for each language (the
//! first of a server's `language_ids`) one **primary** — the first
//! installed server of that language in configuration order that is not a
//! companion (the built-in table is in order of preference) — and any
//! number of **companions** (`secondary = true`: ruff beside pyright,
//! ESLint beside typescript-language-server), which run beside it. Other
//! installed servers of the language are **shadowed** and do not run: two
//! Python servers on one tree double the memory and the CPU for the same
//! answers. Navigation comes from the primary; diagnostics and code actions
//! from all (`crate::mcp::tools`).
//!
//! A language with no installed primary has its first enabled server
//! **not installed**: that is the one `acp-lsp install --for` installs and
//! the one `lsp/servers` lists with the install command, as it lists a
//! companion that is enabled but not installed.

use std::collections::BTreeMap;
use std::fmt;

use crate::lsp::config::{Config, ServerConfig};

/// What an enabled server does for its language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// The first installed non-companion server of its language: it runs,
    /// and answers navigation.
    Primary,
    /// `secondary = true` and installed: it runs beside the primary (if any).
    Companion { primary: Option<String> },
    /// Installed, but another comes first: it does not run.
    Shadowed { primary: String },
    /// Needed but not installed: the would-be primary of a language with
    /// none installed, or an enabled companion.
    NotInstalled { companion: bool },
}

impl Role {
    /// Whether the server runs (it is installed and not shadowed).
    pub fn runs(&self) -> bool {
        matches!(self, Role::Primary | Role::Companion { .. })
    }

    /// Whether it is a companion (installed or not).
    pub fn is_companion(&self) -> bool {
        matches!(
            self,
            Role::Companion { .. } | Role::NotInstalled { companion: true }
        )
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Primary => write!(f, "primary"),
            Role::Companion {
                primary: Some(primary),
            } => write!(f, "companion of {primary} (secondary = true)"),
            Role::Companion { primary: None } => {
                write!(f, "companion (secondary = true); no primary installed")
            }
            Role::Shadowed { primary } => write!(
                f,
                "not run: {primary} comes first for its language (set secondary = true to run both)"
            ),
            Role::NotInstalled { companion: false } => write!(f, "primary, not installed"),
            Role::NotInstalled { companion: true } => write!(f, "companion, not installed"),
        }
    }
}

/// The language a server is grouped by: the first of its `language_ids`.
pub fn language_of(server: &ServerConfig) -> &str {
    server.language_ids.first().map_or("", String::as_str)
}

/// The role of every enabled server that is installed (`installed`) or
/// needed, by name. Servers are taken in configuration order.
pub fn roles(config: &Config, installed: impl Fn(&ServerConfig) -> bool) -> BTreeMap<String, Role> {
    let enabled: Vec<(&ServerConfig, bool)> = config
        .enabled_servers()
        .map(|s| (s, installed(s)))
        .collect();
    let mut primary: BTreeMap<&str, &str> = BTreeMap::new();
    for (server, found) in &enabled {
        if *found && !server.secondary {
            primary.entry(language_of(server)).or_insert(&server.name);
        }
    }
    let mut wanted: BTreeMap<&str, &str> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for (server, found) in &enabled {
        let language = language_of(server);
        let first = primary.get(language).copied();
        let role = match (found, server.secondary, first) {
            (true, true, first) => Role::Companion {
                primary: first.map(str::to_string),
            },
            (true, false, Some(p)) if p == server.name => Role::Primary,
            (true, false, Some(p)) => Role::Shadowed {
                primary: p.to_string(),
            },
            (false, true, _) => Role::NotInstalled { companion: true },
            (false, false, None) if !wanted.contains_key(language) => {
                wanted.insert(language, &server.name);
                Role::NotInstalled { companion: false }
            }
            _ => continue,
        };
        out.insert(server.name.clone(), role);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn installed(names: &'static [&'static str]) -> impl Fn(&ServerConfig) -> bool {
        move |s| names.contains(&s.name.as_str())
    }

    fn config(text: &str) -> Config {
        Config::from_toml_str(
            text,
            std::path::Path::new("/cfg/config.toml"),
            Config::builtin(),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_first_installed_server_of_a_language_is_primary() {
        let config = Config::builtin();
        let all = roles(
            &config,
            installed(&["pyright", "basedpyright", "pylsp", "rust-analyzer"]),
        );
        assert_eq!(all["pyright"], Role::Primary);
        assert_eq!(
            all["basedpyright"],
            Role::Shadowed {
                primary: "pyright".into()
            }
        );
        assert_eq!(
            all["pylsp"],
            Role::Shadowed {
                primary: "pyright".into()
            }
        );
        assert_eq!(all["rust-analyzer"], Role::Primary);
        // Not installed: clangd is the first (only) C server, so needed.
        assert_eq!(all["clangd"], Role::NotInstalled { companion: false });

        // Without pyright, basedpyright comes first; then pylsp.
        let some = roles(&config, installed(&["basedpyright", "pylsp"]));
        assert_eq!(some["basedpyright"], Role::Primary);
        assert!(!some["pylsp"].runs());
        assert!(!some.contains_key("pyright"), "not installed, not needed");
        let last = roles(&config, installed(&["pylsp"]));
        assert_eq!(last["pylsp"], Role::Primary);
        // Nothing installed: the first of the language is the one needed.
        let none = roles(&config, installed(&[]));
        assert_eq!(none["pyright"], Role::NotInstalled { companion: false });
        assert!(!none.contains_key("basedpyright"));
    }

    #[test]
    fn companions_run_beside_the_primary() {
        let with_ruff = config("[servers.ruff]\nenabled = true\n");
        let all = roles(&with_ruff, installed(&["pyright", "ruff"]));
        assert_eq!(all["pyright"], Role::Primary);
        assert_eq!(
            all["ruff"],
            Role::Companion {
                primary: Some("pyright".into())
            }
        );
        // A companion alone is never made the primary.
        let alone = roles(&with_ruff, installed(&["ruff"]));
        assert_eq!(alone["ruff"], Role::Companion { primary: None });
        assert_eq!(alone["pyright"], Role::NotInstalled { companion: false });
        // Enabled but not installed: needed, as a companion.
        let missing = roles(&with_ruff, installed(&["pyright"]));
        assert_eq!(missing["ruff"], Role::NotInstalled { companion: true });
        // Off by default.
        assert!(!roles(&Config::builtin(), installed(&["pyright", "ruff"])).contains_key("ruff"));
    }

    #[test]
    fn secondary_and_disabled_servers() {
        let config =
            config("[servers.pyright]\nenabled = false\n[servers.pylsp]\nsecondary = true\n");
        let all = roles(&config, installed(&["pyright", "basedpyright", "pylsp"]));
        assert!(!all.contains_key("pyright"), "disabled: no role");
        assert_eq!(all["basedpyright"], Role::Primary);
        assert_eq!(
            all["pylsp"],
            Role::Companion {
                primary: Some("basedpyright".into())
            }
        );
        assert!(all["pylsp"].runs());
    }
}
