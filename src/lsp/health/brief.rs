//! `acp-lsp servers DIR`: one line per server that would run (its roots
//! folded: `12 nested roots, first on use`; its binary and version), the
//! project-code policy once per group of roots that share it, then the
//! servers not installed with the command that installs them, at most
//! [`BRIEF_WIDTH`] columns.

use std::collections::BTreeMap;

use super::Survey;
use crate::lsp::config::{display_path, project_code_brief, ProjectCode, ProjectCodeSource};
use crate::lsp::detect::MAX_ENTRIES;
use crate::lsp::primary::Role;
use crate::lsp::program::Origin;

/// The widest line of the brief view.
pub const BRIEF_WIDTH: usize = 100;

/// The brief view.
pub fn brief(survey: &Survey<'_>) -> String {
    let mut out = String::new();
    push_wrapped(
        &mut out,
        &format!("Language servers for {}", display_path(&survey.dir)),
    );
    let rows = rows(survey);
    if rows.is_empty() {
        out.push_str("  (no server runs here)\n");
    } else {
        out.push_str(&table(&rows));
    }
    for line in project_code_lines(survey) {
        push_wrapped(&mut out, &line);
    }
    for line in footer(survey) {
        push_wrapped(&mut out, &line);
    }
    out
}

/// One row per server that runs: name, roots, binary.
fn rows(survey: &Survey<'_>) -> Vec<[String; 3]> {
    survey
        .servers()
        .into_iter()
        .filter(|name| survey.runs(name))
        .map(|name| {
            let label = match survey.roles.get(name) {
                Some(Role::Companion { .. }) => format!("{name} (companion)"),
                _ => name.to_string(),
            };
            [label, roots(survey, name), binary(survey, name)]
        })
        .collect()
}

/// The server's roots, folded: the folder itself starts with the session,
/// nested roots on first use.
fn roots(survey: &Survey<'_>, server: &str) -> String {
    let roots = survey.roots_of(server);
    let top = roots.iter().any(|d| d.root == survey.dir);
    let nested: Vec<_> = roots.iter().filter(|d| d.root != survey.dir).collect();
    match (top, nested.len()) {
        (true, 0) => ". at session start".to_string(),
        (true, 1) => ". at session start + 1 nested root".to_string(),
        (true, n) => format!(". at session start + {n} nested roots"),
        (false, 1) => format!(
            "{} on first use",
            cut_left(&survey.relative(&nested[0].root), 28)
        ),
        (false, n) => format!("{n} nested roots, first on use"),
    }
}

/// The binary and its version (or why it does not start); an install of
/// acp-lsp's by what it is rather than its long path.
fn binary(survey: &Survey<'_>, server: &str) -> String {
    let Some(program) = survey.programs.get(server) else {
        return "not installed".to_string();
    };
    if let Some(remote) = survey.config.server(server).and_then(|s| s.remote.as_ref()) {
        return format!("connect {} (not probed)", remote.connect);
    }
    let check = match survey.probes.get(server) {
        Some(probe) if probe.starts() => short_version(&probe.summary()),
        Some(probe) => {
            let summary = probe.summary();
            let first = summary.split(';').next().unwrap_or_default().to_string();
            first
        }
        None => String::new(),
    };
    let what = match &program.origin {
        Origin::Installed(installed) => format!("acp-lsp install: {}", installed.describe()),
        _ => display_path(&program.path),
    };
    if check.is_empty() || what.contains(&check) {
        what
    } else {
        format!("{what} {check}")
    }
}

/// The first word of a version line that looks like a version (`1.95.0`).
fn short_version(summary: &str) -> String {
    summary
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
        .map(|w| w.trim_start_matches('v'))
        .find(|w| w.contains('.') && w.starts_with(|c: char| c.is_ascii_digit()))
        .map(str::to_string)
        .unwrap_or_default()
}

/// Rows as columns: the first two padded, the last cut to fit.
fn table(rows: &[[String; 3]]) -> String {
    let w0 = rows.iter().map(|r| r[0].chars().count()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r[1].chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for r in rows {
        let head = format!("  {:w0$}  {:w1$}  ", r[0], r[1]);
        let room = BRIEF_WIDTH.saturating_sub(head.chars().count()).max(12);
        let line = format!("{head}{}", cut_left(&r[2], room));
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The project-code policy, once per group of roots that share it, with
/// what `off` does for each server that runs there.
fn project_code_lines(survey: &Survey<'_>) -> Vec<String> {
    // (policy, source) → (roots, servers) that share it.
    type Group<'s> = (Vec<String>, Vec<&'s str>);
    let mut groups: BTreeMap<(&'static str, &'static str), Group<'_>> = BTreeMap::new();
    for d in &survey.detected {
        if !survey.runs(&d.server) {
            continue;
        }
        let Some((code, source)) = survey.project_code(&d.server, &d.root) else {
            continue;
        };
        let (roots, servers) = groups.entry((code.as_str(), source.as_str())).or_default();
        let rel = survey.relative(&d.root);
        if !roots.contains(&rel) {
            roots.push(rel);
        }
        if !servers.contains(&d.server.as_str()) {
            servers.push(&d.server);
        }
    }
    let several = groups.len() > 1;
    groups
        .into_iter()
        .map(|((code, source), (roots, servers))| {
            let whose = if several {
                format!(" for {}", fold_list(&roots, 3))
            } else {
                String::new()
            };
            if code == ProjectCode::Run.as_str() {
                return format!(
                    "Project code: run ({source}){whose}: servers may run the project's build \
                     scripts, macros and tools"
                );
            }
            let hint = if source == ProjectCodeSource::Default.as_str() {
                "; trusted_projects turns it on"
            } else {
                ""
            };
            let mut effects: Vec<String> = servers
                .iter()
                .filter_map(|s| project_code_brief(s).map(|b| format!("{s}: {b}")))
                .collect();
            let none: Vec<&str> = servers
                .iter()
                .copied()
                .filter(|s| project_code_brief(s).is_none())
                .collect();
            if !none.is_empty() {
                effects.push(format!("{} run none", none.join(", ")));
            }
            format!(
                "Project code: off ({source}{hint}){whose}. {}.",
                effects.join("; ")
            )
        })
        .collect()
}

/// What does not run, and why: fixes, servers not installed (with the
/// command), servers another comes first for, the walk's bound, the
/// read-only roots.
fn footer(survey: &Survey<'_>) -> Vec<String> {
    let mut lines = Vec::new();
    for (name, probe) in &survey.probes {
        if let Some(fix) = probe.fix() {
            lines.push(format!("To fix {name}: {fix}"));
        }
    }
    let missing = survey.not_installed();
    let needed_with: Vec<&str> = missing
        .iter()
        .filter(|(_, cmd, needed)| *needed && cmd.is_some())
        .map(|(n, _, _)| *n)
        .collect();
    let needed_without: Vec<&str> = missing
        .iter()
        .filter(|(_, cmd, needed)| *needed && cmd.is_none())
        .map(|(n, _, _)| *n)
        .collect();
    let optional: Vec<String> = missing
        .iter()
        .filter(|(_, _, needed)| !needed)
        .map(|(n, cmd, _)| match cmd {
            Some(_) => n.to_string(),
            None => format!("{n} (no recipe)"),
        })
        .collect();
    if !needed_with.is_empty() {
        lines.push(format!(
            "Not installed: {}: acp-lsp install {}",
            needed_with.join(", "),
            needed_with.join(" ")
        ));
    }
    if !needed_without.is_empty() {
        lines.push(format!(
            "Not installed, no recipe (put them on PATH yourself): {}",
            needed_without.join(", ")
        ));
    }
    if !optional.is_empty() {
        lines.push(format!(
            "Also for files here, not installed: {} (`acp-lsp install NAME`)",
            optional.join(", ")
        ));
    }
    for (primary, names) in survey.shadowed() {
        lines.push(format!(
            "Not run: {} ({primary} comes first for the same language; `secondary = true` in \
             [servers.NAME] runs both)",
            names.join(", ")
        ));
    }
    if survey.truncated {
        lines.push(format!(
            "Note: the scan stopped after {MAX_ENTRIES} entries; deeper markers were not seen."
        ));
    }
    let read_only = survey.config.read_only_roots.len();
    if read_only > 0 {
        lines.push(format!(
            "Read-only roots: {read_only} (requests may name files there; --verbose lists them)"
        ));
    }
    lines
}

/// `a, b, c` or `a, b, c and 4 more`.
fn fold_list(items: &[String], shown: usize) -> String {
    if items.len() <= shown {
        return items.join(", ");
    }
    format!(
        "{} and {} more",
        items[..shown].join(", "),
        items.len() - shown
    )
}

/// `text` cut from the left to at most `max` characters (`…` first).
fn cut_left(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_string();
    }
    let keep: String = text.chars().skip(count - max + 1).collect();
    format!("…{keep}")
}

/// Appends `line`, wrapped at word boundaries to [`BRIEF_WIDTH`] columns
/// (continuation lines indented by 2).
fn push_wrapped(out: &mut String, line: &str) {
    let mut current = String::new();
    for word in line.split(' ') {
        let width = current.chars().count() + 1 + word.chars().count();
        if !current.trim().is_empty() && width > BRIEF_WIDTH {
            out.push_str(current.trim_end());
            out.push('\n');
            current = String::from("  ");
        } else if !current.is_empty() && !current.ends_with("  ") {
            current.push(' ');
        }
        current.push_str(&cut_left(word, BRIEF_WIDTH - 2));
    }
    out.push_str(current.trim_end());
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_word_within_the_width() {
        let mut out = String::new();
        let long = "word ".repeat(60);
        push_wrapped(&mut out, long.trim());
        assert!(out.lines().count() > 1);
        assert!(
            out.lines().all(|l| l.chars().count() <= BRIEF_WIDTH),
            "{out}"
        );
        assert_eq!(out.split_whitespace().count(), 60);
        assert_eq!(
            short_version("starts (rust-analyzer 1.95.0 (5980 2026-04-14))"),
            "1.95.0"
        );
        assert_eq!(
            short_version("starts (Debian clangd version 14.0.6)"),
            "14.0.6"
        );
        assert_eq!(cut_left("abcdef", 4), "…def");
    }
}
