//! `acp-lsp servers --verbose`: one row per (server, root) with why it was
//! picked, when it runs, its project-code setting and its binary, then the
//! fixes, read-only roots, servers not run, not applicable and disabled.

use super::{read_only_roots, Survey};
use crate::lsp::config::{project_code_switch, ProjectCode};
use crate::lsp::detect::MAX_ENTRIES;
use crate::lsp::primary::Role;
use crate::lsp::program::Origin;

/// The full table.
pub fn verbose(survey: &Survey<'_>) -> String {
    let mut rows: Vec<[String; 6]> = vec![[
        "SERVER".into(),
        "ROOT".into(),
        "WHY".into(),
        "RUNS".into(),
        "PROJECT CODE".into(),
        "BINARY".into(),
    ]];
    for d in &survey.detected {
        rows.push([
            d.server.clone(),
            survey.relative(&d.root),
            d.reason.to_string(),
            runs(survey, &d.server, d.root == survey.dir),
            project_code(survey, &d.server, &d.root),
            binary(survey, &d.server),
        ]);
    }
    let mut out = format!("Language servers for {}\n", survey.dir.display());
    if survey.detected.is_empty() {
        out.push_str("  (no server applies)\n");
    } else {
        out.push_str(&table(&rows));
    }
    out.push_str(&notes(survey));
    out
}

/// Rows as aligned columns (the last one unpadded).
fn table(rows: &[[String; 6]]) -> String {
    let widths: Vec<usize> = (0..5)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::from(" ");
        for (c, cell) in r.iter().enumerate() {
            line.push(' ');
            if c < 5 {
                line.push_str(&format!("{cell:w$} ", w = widths[c]));
            } else {
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// When the server runs at a root: at session start (the folder's own),
/// on first use (nested), or why not.
fn runs(survey: &Survey<'_>, server: &str, top: bool) -> String {
    let when = if top {
        "at session start"
    } else {
        "on first use"
    };
    match survey.roles.get(server) {
        None => "-".to_string(),
        Some(Role::Shadowed { primary }) => format!("no ({primary} first)"),
        Some(Role::NotInstalled { .. }) => "no (not installed)".to_string(),
        Some(Role::Companion { .. }) => format!("{when}, companion"),
        Some(Role::Primary) => when.to_string(),
    }
}

fn project_code(survey: &Survey<'_>, server: &str, root: &std::path::Path) -> String {
    match survey.project_code(server, root) {
        Some((ProjectCode::Run, source)) => format!("run ({})", source.as_str()),
        Some((ProjectCode::Off, source)) => {
            format!("off ({}): {}", source.as_str(), project_code_switch(server))
        }
        None => String::new(),
    }
}

/// The binary, its start check and where it came from.
fn binary(survey: &Survey<'_>, server: &str) -> String {
    let Some(program) = survey.programs.get(server) else {
        return match crate::lsp::program::install_command(survey.config, server) {
            Some(cmd) => format!("not installed ({cmd})"),
            None => "not installed".to_string(),
        };
    };
    if let Some(remote) = survey.config.server(server).and_then(|s| s.remote.as_ref()) {
        return format!("connect {} (not probed)", remote.connect);
    }
    let check = survey
        .probes
        .get(server)
        .map(|p| p.summary())
        .unwrap_or_default();
    match &program.origin {
        Origin::Installed(installed) => format!(
            "{} {check} [installed: {}]",
            program.path.display(),
            installed.describe()
        ),
        _ => format!("{} {check}", program.path.display()),
    }
}

/// What follows the table: fixes, read-only roots, servers not run, the
/// walk's bound, servers that do not apply, disabled ones.
fn notes(survey: &Survey<'_>) -> String {
    let mut out = String::new();
    for (name, probe) in &survey.probes {
        if let (Some(fix), Some(program)) = (probe.fix(), survey.programs.get(name)) {
            out.push_str(&format!(
                "To fix {name} ({}): {fix}\n",
                program.path.display()
            ));
        }
    }
    let roots = read_only_roots(survey.config);
    if !roots.is_empty() {
        out.push_str("Read-only roots (requests may name files there; never written):\n");
        for (root, why) in roots {
            out.push_str(&format!("  {}  {why}\n", root.display()));
        }
    }
    for (primary, names) in survey.shadowed() {
        for name in names {
            out.push_str(&format!(
                "Not run: {name} ({primary} comes first for the same language; \
                 `secondary = true` in [servers.{name}] runs both)\n"
            ));
        }
    }
    if survey.truncated {
        out.push_str(&format!(
            "Note: the scan stopped after {MAX_ENTRIES} entries; deeper markers were not seen.\n"
        ));
    }
    let (not_applicable, disabled) = survey.unused();
    if !not_applicable.is_empty() {
        out.push_str(&format!(
            "Not applicable here (no marker or file of theirs): {}\n",
            not_applicable.join(", ")
        ));
    }
    if !disabled.is_empty() {
        out.push_str(&format!(
            "Disabled by configuration: {}\n",
            disabled.join(", ")
        ));
    }
    out
}
