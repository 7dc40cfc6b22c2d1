//! `acp-lsp servers [DIR]`: what would run for a folder and why — the
//! servers detection picks (`lsp::detect`), whether each is installed and
//! starts (`lsp::probe`), which is primary for its language
//! (`lsp::primary`), when it starts (a session root's own at session start,
//! a nested root's on first use), its project-code setting, and the
//! read-only roots.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::lsp::config::{project_code_switch, Config, ProjectCode, ServerConfig};
use crate::lsp::detect::{detect_scan, find_on_path, MAX_ENTRIES};
use crate::lsp::primary::{self, Role};

/// For `acp-lsp servers [DIR]`: a table of the servers detection picks for `dir` (server,
/// root relative to `dir`, why, when it runs, project code, binary path or `not installed`),
/// then the servers not run because another comes first for their language, the enabled
/// servers that do not apply and the disabled ones.
pub fn health_report(dir: &Path, config: &Config) -> String {
    let (detected, truncated) = detect_scan(dir, config);
    let roles = primary::roles(config, |s| {
        s.remote.is_some() || find_on_path(&s.command).is_some()
    });
    let mut rows: Vec<[String; 6]> = vec![[
        "SERVER".to_string(),
        "ROOT".to_string(),
        "WHY".to_string(),
        "RUNS".to_string(),
        "PROJECT CODE".to_string(),
        "BINARY".to_string(),
    ]];
    // Each distinct server binary is run once, all at once (`lsp::probe`).
    let mut binaries: Vec<(&str, PathBuf, &ServerConfig)> = Vec::new();
    for d in &detected {
        if binaries.iter().any(|(name, _, _)| *name == d.server) {
            continue;
        }
        if let Some(server) = config.server(&d.server).filter(|s| s.remote.is_none()) {
            if let Some(path) = find_on_path(&server.command) {
                binaries.push((d.server.as_str(), path, server));
            }
        }
    }
    let probes = crate::lsp::probe::probe_all(
        &binaries
            .iter()
            .map(|(_, path, server)| (path.clone(), *server))
            .collect::<Vec<_>>(),
    );
    let probe_of = |name: &str| {
        binaries
            .iter()
            .position(|(n, _, _)| *n == name)
            .map(|i| (&binaries[i].1, &probes[i]))
    };
    for d in &detected {
        let root = match d.root.strip_prefix(dir) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => d.root.display().to_string(),
        };
        let binary = probe_of(&d.server)
            .map(|(path, probe)| format!("{} {}", path.display(), probe.summary()))
            .unwrap_or_else(|| "not installed".to_string());
        // A remote server (`connect`) runs nothing here: say where it is.
        let binary = match config.server(&d.server).and_then(|s| s.remote.as_ref()) {
            Some(remote) => format!("connect {} (not probed)", remote.connect),
            None => binary,
        };
        let project_code = match config.server(&d.server) {
            Some(server) => {
                let (code, source) = config.project_code_for(server, &d.root);
                match code {
                    ProjectCode::Run => format!("run ({})", source.as_str()),
                    ProjectCode::Off => format!(
                        "off ({}): {}",
                        source.as_str(),
                        project_code_switch(&d.server)
                    ),
                }
            }
            None => String::new(),
        };
        // Lazy roots: a session root's own servers start with the session,
        // nested ones on first use (lsp::registry).
        let runs = match roles.get(&d.server) {
            None => "-".to_string(),
            Some(Role::Shadowed { primary }) => format!("no ({primary} first)"),
            Some(role) => {
                let when = if d.root == dir {
                    "at session start"
                } else {
                    "on first use"
                };
                match role {
                    Role::Secondary { .. } => format!("{when}, secondary"),
                    _ => when.to_string(),
                }
            }
        };
        rows.push([
            d.server.clone(),
            root,
            d.reason.to_string(),
            runs,
            project_code,
            binary,
        ]);
    }

    let mut out = format!("Language servers for {}\n", dir.display());
    if detected.is_empty() {
        out.push_str("  (no server applies)\n");
    } else {
        let widths: Vec<usize> = (0..5)
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        for r in &rows {
            let line = format!(
                "  {:w0$}  {:w1$}  {:w2$}  {:w3$}  {:w4$}  {}",
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
                w3 = widths[3],
                w4 = widths[4],
            );
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    for ((name, path, _), probe) in binaries.iter().zip(&probes) {
        if let Some(fix) = probe.fix() {
            out.push_str(&format!("To fix {name} ({}): {fix}\n", path.display()));
        }
    }
    if !config.read_only_roots.is_empty() {
        out.push_str("Read-only roots (requests may name files there; never written):\n");
        for root in &config.read_only_roots {
            let why = config
                .discovered_read_only_roots
                .iter()
                .find(|d| d.path == *root)
                .map_or("configured", |d| d.why.as_str());
            out.push_str(&format!("  {}  {why}\n", root.display()));
        }
    }
    let used: BTreeSet<&str> = detected.iter().map(|d| d.server.as_str()).collect();
    for (name, role) in &roles {
        if let Role::Shadowed { primary } = role {
            if used.contains(name.as_str()) {
                out.push_str(&format!(
                    "Not run: {name} ({primary} comes first for the same language; \
                     `secondary = true` in [servers.{name}] runs both)\n"
                ));
            }
        }
    }
    if truncated {
        out.push_str(&format!(
            "Note: the scan stopped after {MAX_ENTRIES} entries; deeper markers were not seen.\n"
        ));
    }
    let not_applicable: Vec<&str> = config
        .enabled_servers()
        .map(|s| s.name.as_str())
        .filter(|n| !used.contains(n))
        .collect();
    if !not_applicable.is_empty() {
        out.push_str(&format!(
            "Not applicable here (no marker or file of theirs): {}\n",
            not_applicable.join(", ")
        ));
    }
    let disabled: Vec<&str> = config
        .servers
        .iter()
        .filter(|s| !s.enabled)
        .map(|s| s.name.as_str())
        .collect();
    if !disabled.is_empty() {
        out.push_str(&format!(
            "Disabled by configuration: {}\n",
            disabled.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for (path, content) in files {
            let p = dir.path().join(path);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
            }
            std::fs::write(&p, content).unwrap_or_else(|e| panic!("{e}"));
        }
        dir
    }

    const PKG: &str = "[package]\nname = \"x\"\nversion = \"0.1.0\"\n";

    #[test]
    fn health_report_lists_servers() {
        let dir = tree(&[("Cargo.toml", PKG), ("src/main.rs", ""), ("tools/x.py", "")]);
        let mut cfg = Config::builtin();
        for s in &mut cfg.servers {
            if s.name == "pylsp" {
                s.enabled = false;
            }
        }
        let report = health_report(dir.path(), &cfg);
        let line = report
            .lines()
            .find(|l| l.trim_start().starts_with("rust-analyzer"))
            .unwrap_or_else(|| panic!("{report}"));
        assert!(line.contains(" . "), "{report}");
        assert!(line.contains("marker Cargo.toml"), "{report}");
        assert!(
            line.contains("off (default): build scripts and proc macros disabled"),
            "{report}"
        );
        cfg.trusted_projects = vec![dir.path().to_path_buf()];
        let trusted = health_report(dir.path(), &cfg);
        assert!(
            trusted
                .lines()
                .any(|l| l.trim_start().starts_with("rust-analyzer")
                    && l.contains("run (trusted project)")),
            "{trusted}"
        );
        let py = report
            .lines()
            .find(|l| l.trim_start().starts_with("pyright "))
            .unwrap_or_else(|| panic!("{report}"));
        assert!(py.contains("*.py files"), "{report}");
        assert!(
            report
                .lines()
                .any(|l| l.starts_with("Not applicable") && l.contains("gopls")),
            "{report}"
        );
        assert!(
            report
                .lines()
                .any(|l| l.starts_with("Disabled") && l.contains("pylsp")),
            "{report}"
        );
        assert!(report
            .lines()
            .next()
            .is_some_and(|l| l.contains("SERVER") || l.starts_with("Language servers")));
        assert!(
            report
                .lines()
                .any(|l| l.contains("SERVER") && l.contains("RUNS")),
            "{report}"
        );
    }
}
