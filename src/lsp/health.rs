//! `acp-lsp servers [DIR]`: what would run for a folder and why — the
//! servers detection picks (`lsp::detect`), where each binary comes from
//! (`lsp::program`: PATH or acp-lsp's installs) and whether it starts
//! (`lsp::probe`), each server's role for its language (`lsp::primary`:
//! primary, companion, not run, not installed), when it starts (a session
//! root's own at session start, a nested root's on first use), the
//! project-code policy, and the read-only roots.
//!
//! One [`Survey`] of the folder, shown three ways: [`brief`] (one line per
//! server, at most [`BRIEF_WIDTH`] columns), [`verbose`] (one row per
//! server and root) and [`json`].

mod brief;
mod verbose;

pub use brief::{brief, BRIEF_WIDTH};
pub use verbose::verbose;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::lsp::config::{project_code_switch, Config, ProjectCode, ProjectCodeSource};
use crate::lsp::detect::{detect_scan, Detected};
use crate::lsp::primary::{self, Role};
use crate::lsp::probe::Probe;
use crate::lsp::program::{find_program, install_command, Origin, Program};

/// What `acp-lsp servers` found for one folder.
pub struct Survey<'a> {
    pub dir: PathBuf,
    pub config: &'a Config,
    /// What detection picked, sorted by (server, root).
    pub detected: Vec<Detected>,
    /// The detection walk stopped at its bound.
    pub truncated: bool,
    /// Each enabled server's role (installed or needed ones only).
    pub roles: BTreeMap<String, Role>,
    /// Each detected server's program, when found.
    pub programs: BTreeMap<String, Program>,
    /// Each detected local program's start check.
    pub probes: BTreeMap<String, Probe>,
}

/// Detects, finds and probes (each binary once, all at once) for `dir`.
pub fn survey<'a>(dir: &Path, config: &'a Config) -> Survey<'a> {
    let (detected, truncated) = detect_scan(dir, config);
    let mut programs = BTreeMap::new();
    for server in config.enabled_servers() {
        if let Some(program) = find_program(config, server) {
            programs.insert(server.name.clone(), program);
        }
    }
    let roles = primary::roles(config, |s| programs.contains_key(&s.name));
    let used: Vec<&str> = {
        let mut names: Vec<&str> = detected.iter().map(|d| d.server.as_str()).collect();
        names.dedup();
        names
    };
    programs.retain(|name, _| used.contains(&name.as_str()));
    let local: Vec<(String, PathBuf)> = programs
        .iter()
        .filter(|(_, p)| !matches!(p.origin, Origin::Remote))
        .map(|(name, p)| (name.clone(), p.path.clone()))
        .collect();
    let items: Vec<(PathBuf, &crate::lsp::config::ServerConfig)> = local
        .iter()
        .filter_map(|(name, path)| config.server(name).map(|s| (path.clone(), s)))
        .collect();
    let results = crate::lsp::probe::probe_all(&items);
    let probes = local
        .into_iter()
        .map(|(name, _)| name)
        .zip(results)
        .collect();
    Survey {
        dir: dir.to_path_buf(),
        config,
        detected,
        truncated,
        roles,
        programs,
        probes,
    }
}

/// The brief view of `dir` (what `acp-lsp servers DIR` prints).
pub fn health_report(dir: &Path, config: &Config) -> String {
    brief(&survey(dir, config))
}

impl Survey<'_> {
    /// The detected servers, in order, each once.
    pub fn servers(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.detected.iter().map(|d| d.server.as_str()).collect();
        names.dedup();
        names
    }

    /// The roots `server` was detected at.
    pub fn roots_of(&self, server: &str) -> Vec<&Detected> {
        self.detected
            .iter()
            .filter(|d| d.server == server)
            .collect()
    }

    /// `root` relative to the folder (`.` for the folder itself).
    pub fn relative(&self, root: &Path) -> String {
        match root.strip_prefix(&self.dir) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => root.display().to_string(),
        }
    }

    /// Whether `server` runs here (found, starts or is remote, not shadowed).
    pub fn runs(&self, server: &str) -> bool {
        self.roles.get(server).is_some_and(Role::runs)
    }

    /// The project-code policy of `server` at `root`, and the words for it.
    pub fn project_code(
        &self,
        server: &str,
        root: &Path,
    ) -> Option<(ProjectCode, ProjectCodeSource)> {
        let config = self.config.server(server)?;
        Some(self.config.project_code_for(config, root))
    }

    /// Servers detected but not installed, with the command that installs
    /// each (`None`: no recipe) and whether a project marker of theirs asks
    /// for them (`needed`: sessions list them and warn; else only files of
    /// their extensions are here).
    pub fn not_installed(&self) -> Vec<(&str, Option<String>, bool)> {
        self.servers()
            .into_iter()
            .filter(|name| matches!(self.roles.get(*name), Some(Role::NotInstalled { .. })))
            .map(|name| {
                let needed = self
                    .roots_of(name)
                    .iter()
                    .any(|d| matches!(d.reason, crate::lsp::detect::DetectReason::Marker(_)));
                (name, install_command(self.config, name), needed)
            })
            .collect()
    }

    /// Servers detected and installed that do not run, by the primary that
    /// comes first.
    pub fn shadowed(&self) -> BTreeMap<&str, Vec<&str>> {
        let mut out: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for name in self.servers() {
            if let Some(Role::Shadowed { primary }) = self.roles.get(name) {
                out.entry(primary.as_str()).or_default().push(name);
            }
        }
        out
    }

    /// Enabled servers detection did not pick, and disabled ones.
    pub fn unused(&self) -> (Vec<&str>, Vec<&str>) {
        let used = self.servers();
        let not_applicable = self
            .config
            .enabled_servers()
            .map(|s| s.name.as_str())
            .filter(|n| !used.contains(n))
            .collect();
        let disabled = self
            .config
            .servers
            .iter()
            .filter(|s| !s.enabled)
            .map(|s| s.name.as_str())
            .collect();
        (not_applicable, disabled)
    }
}

/// The `--json` view: every fact of the survey, for scripts.
pub fn json(survey: &Survey<'_>) -> Value {
    let servers: Vec<Value> = survey
        .servers()
        .into_iter()
        .map(|name| {
            let roots: Vec<Value> = survey
                .roots_of(name)
                .into_iter()
                .map(|d| {
                    let code = survey.project_code(name, &d.root);
                    json!({
                        "path": d.root.display().to_string(),
                        "relative": survey.relative(&d.root),
                        "reason": d.reason.to_string(),
                        "starts": if d.root == survey.dir { "session_start" } else { "first_use" },
                        "projectCode": code.map(|(code, source)| json!({
                            "policy": code.as_str(),
                            "source": source.as_str(),
                            "effect": (code == ProjectCode::Off).then(|| project_code_switch(name)),
                        })),
                    })
                })
                .collect();
            let program = survey.programs.get(name).map(|p| {
                json!({
                    "path": p.path.display().to_string(),
                    "origin": match &p.origin {
                        Origin::Path => "path",
                        Origin::Installed(_) => "installed",
                        Origin::Remote => "remote",
                    },
                    "installed": match &p.origin {
                        Origin::Installed(i) => Some(json!({
                            "dir": i.dir.display().to_string(),
                            "source": i.marker.source.as_str(),
                            "packages": i.marker.packages,
                        })),
                        _ => None,
                    },
                })
            });
            let check = survey
                .probes
                .get(name)
                .map(|p| json!({ "starts": p.starts(), "summary": p.summary(), "fix": p.fix() }));
            json!({
                "name": name,
                "role": survey.roles.get(name).map(role_name),
                "roots": roots,
                "program": program,
                "check": check,
                "install": install_command(survey.config, name),
            })
        })
        .collect();
    let (not_applicable, disabled) = survey.unused();
    json!({
        "folder": survey.dir.display().to_string(),
        "servers": servers,
        "notInstalled": survey.not_installed().into_iter().map(|(name, install, needed)| json!({"name": name, "install": install, "needed": needed})).collect::<Vec<_>>(),
        "readOnlyRoots": read_only_roots(survey.config).into_iter().map(|(path, why)| json!({"path": path.display().to_string(), "why": why})).collect::<Vec<_>>(),
        "notApplicable": not_applicable,
        "disabled": disabled,
        "truncated": survey.truncated,
    })
}

/// A role's name in `--json`.
fn role_name(role: &Role) -> &'static str {
    match role {
        Role::Primary => "primary",
        Role::Companion { .. } => "companion",
        Role::Shadowed { .. } => "not_run",
        Role::NotInstalled { .. } => "not_installed",
    }
}

/// The read-only roots and why each is there.
fn read_only_roots(config: &Config) -> Vec<(&Path, &str)> {
    config
        .read_only_roots
        .iter()
        .map(|root| {
            let why = config
                .discovered_read_only_roots
                .iter()
                .find(|d| d.path == *root)
                .map_or("configured", |d| d.why.as_str());
            (root.as_path(), why)
        })
        .collect()
}

// Its stand-in servers are shell scripts.
#[cfg(all(test, unix))]
mod tests;
