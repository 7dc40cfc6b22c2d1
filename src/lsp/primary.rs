//! One primary server per language: when several installed servers serve
//! the same primary language id (pyright, basedpyright and pylsp for
//! `python`), only the first in configuration order runs (the built-in
//! table is in order of preference); the others run only with
//! `secondary = true`. Two Python servers on one tree double the memory and
//! the CPU for the same answers.

use std::collections::BTreeMap;
use std::fmt;

use crate::lsp::config::{Config, ServerConfig};

/// What an enabled, installed server does for its language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// The first installed server of its language: it runs.
    Primary,
    /// Not the first, but `secondary = true`: it runs beside the primary.
    Secondary { primary: String },
    /// Not the first: it does not run.
    Shadowed { primary: String },
}

impl Role {
    pub fn runs(&self) -> bool {
        !matches!(self, Role::Shadowed { .. })
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Primary => write!(f, "primary"),
            Role::Secondary { primary } => write!(f, "secondary to {primary} (secondary = true)"),
            Role::Shadowed { primary } => write!(
                f,
                "not run: {primary} comes first for its language (set secondary = true to run both)"
            ),
        }
    }
}

/// The role of every enabled server for which `installed` holds, by name.
/// Servers are taken in configuration order; the language is the first of
/// `language_ids`.
pub fn roles(config: &Config, installed: impl Fn(&ServerConfig) -> bool) -> BTreeMap<String, Role> {
    let mut first: BTreeMap<&str, &str> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for server in config.enabled_servers().filter(|s| installed(s)) {
        let language = server.language_ids.first().map_or("", String::as_str);
        let role = match first.get(language) {
            None => {
                first.insert(language, &server.name);
                Role::Primary
            }
            Some(primary) if server.secondary => Role::Secondary {
                primary: (*primary).to_string(),
            },
            Some(primary) => Role::Shadowed {
                primary: (*primary).to_string(),
            },
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
        assert!(!all.contains_key("clangd"), "not installed: no role");

        // Without pyright, basedpyright comes first; then pylsp.
        let some = roles(&config, installed(&["basedpyright", "pylsp"]));
        assert_eq!(some["basedpyright"], Role::Primary);
        assert!(!some["pylsp"].runs());
        let last = roles(&config, installed(&["pylsp"]));
        assert_eq!(last["pylsp"], Role::Primary);
    }

    #[test]
    fn secondary_and_disabled_servers() {
        let config = Config::from_toml_str(
            "[servers.pyright]\nenabled = false\n[servers.pylsp]\nsecondary = true\n",
            std::path::Path::new("/cfg/config.toml"),
            Config::builtin(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let all = roles(&config, installed(&["pyright", "basedpyright", "pylsp"]));
        assert!(!all.contains_key("pyright"), "disabled: no role");
        assert_eq!(all["basedpyright"], Role::Primary);
        assert_eq!(
            all["pylsp"],
            Role::Secondary {
                primary: "basedpyright".into()
            }
        );
        assert!(all["pylsp"].runs());
    }
}
