//! Figure 9: what the `references` tool is worth to a model next to a text
//! search, on real projects nobody here wrote, fetched at bench time from
//! their registries into a cache kept across runs (never committed,
//! `tests/support/registry.rs`): a crate from
//! the Rust package registry (semver, through `cargo fetch`), a Python sdist
//! from PyPI (packaging, through `pip download`), a TypeScript package from
//! npm (zod, through `npm pack`; it ships its `src/`).
//!
//! For 25 symbols of each (picked evenly from the outlines of its main
//! sources), acp-lsp's MCP `references` (every page) and `rg -w -n NAME`
//! over the language's files are compared against the truth the server
//! itself gives: an occurrence found by either is a true reference when the
//! server's `definition` there is the symbol's own. Precision and recall
//! are summed over the symbols; bytes are what each puts in front of the
//! model (the tool's text, every page; rg's output). Without ripgrep a word
//! search with `rg -w`'s rules stands in (and the row says so); `apt-get
//! install ripgrep` gives the real one.

use super::mcp::{connect_entry, injected_entry, start_proxy, text, Client};
use super::registry;
use super::{Table, Verdict};
use anyhow::{bail, ensure, Context, Result};
use rmcp::model::CallToolRequestParams;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Symbols measured per project.
const SYMBOLS: usize = 25;
/// Occurrences judged per symbol (the rest are counted, and the row says so).
const MAX_JUDGED: usize = 400;
/// Longest wait for one tool call (the first waits for the server to load).
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// A project fetched from a registry.
struct Project {
    label: &'static str,
    /// The server that must be on PATH, and how to install it.
    server: (&'static str, &'static str),
    /// Its language's extensions, and ripgrep's type for them.
    extensions: &'static [&'static str],
    rg_type: &'static str,
    /// Where the measured symbols are picked (relative to the project).
    sources: &'static str,
    fetch: fn() -> Result<PathBuf>,
}

const PROJECTS: &[Project] = &[
    Project {
        label: "semver 1.0.23 (Rust, crates.io)",
        server: ("rust-analyzer", "rustup component add rust-analyzer"),
        extensions: &["rs"],
        rg_type: "rust",
        sources: "src",
        fetch: || registry::fetch_crate("semver", "1.0.23"),
    },
    Project {
        label: "packaging 24.2 (Python sdist, PyPI)",
        server: ("pyright-langserver", "npm install -g pyright"),
        extensions: &["py", "pyi"],
        rg_type: "py",
        sources: "src/packaging",
        fetch: || registry::fetch_sdist("packaging", "24.2"),
    },
    Project {
        label: "zod 4.1.12 (TypeScript, npm)",
        server: (
            "typescript-language-server",
            "npm install -g typescript-language-server typescript@6",
        ),
        extensions: &["ts", "tsx", "mts", "cts"],
        rg_type: "ts",
        sources: "src/v4/classic",
        fetch: || registry::fetch_npm(&registry::ZOD),
    },
];

/// A place in a file: (file as the tool shows it, 1-based line, 1-based column in characters).
type Spot = (String, u64, u64);

async fn call(client: &Client, tool: &str, arguments: Value) -> Result<(String, Value)> {
    let arguments = arguments.as_object().context("an object")?.clone();
    let result = tokio::time::timeout(
        CALL_TIMEOUT,
        client.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments)),
    )
    .await
    .with_context(|| format!("{tool}: no answer within {CALL_TIMEOUT:?}"))??;
    let text = text(&result);
    ensure!(result.is_error != Some(true), "{tool} failed: {text}");
    Ok((text, result.structured_content.unwrap_or(Value::Null)))
}

/// Every page of a paged answer: the items of `member`, and the bytes of
/// each page's text.
async fn pages(
    client: &Client,
    tool: &str,
    arguments: Value,
    member: &str,
) -> Result<(Vec<Value>, Vec<usize>)> {
    let mut items = Vec::new();
    let mut bytes = Vec::new();
    let mut offset = 0;
    loop {
        let mut args = arguments.clone();
        args["offset"] = json!(offset);
        let (text, structured) = call(client, tool, args).await?;
        bytes.push(text.len());
        items.extend(structured[member].as_array().cloned().unwrap_or_default());
        match structured["nextOffset"].as_u64() {
            Some(next) if next as usize > offset => offset = next as usize,
            _ => return Ok((items, bytes)),
        }
    }
}

fn spot(item: &Value) -> Option<Spot> {
    Some((
        item["file"].as_str()?.to_string(),
        item["line"].as_u64()?,
        item["column"].as_u64()?,
    ))
}

/// Where the server says the name at `at` is defined: (file, line).
async fn definition(client: &Client, at: &Spot) -> Result<Option<(String, u64)>> {
    let (_, structured) = call(
        client,
        "definition",
        json!({"file": at.0, "line": at.1, "column": at.2}),
    )
    .await?;
    Ok(structured["locations"]
        .get(0)
        .and_then(|l| Some((l["file"].as_str()?.to_string(), l["line"].as_u64()?))))
}

/// The symbols measured: of the outlines of the files under `sources`,
/// functions, methods, types and constants at the top two levels, one per
/// name, [`SYMBOLS`] of them taken evenly.
async fn pick_symbols(
    client: &Client,
    project: &Path,
    spec: &Project,
) -> Result<Vec<(String, Spot)>> {
    let mut files: Vec<PathBuf> = ignore::WalkBuilder::new(project.join(spec.sources))
        .build()
        .flatten()
        .map(|e| e.into_path())
        .filter(|p| {
            let ext = p.extension().and_then(|e| e.to_str()).unwrap_or_default();
            let name = p.strip_prefix(project).unwrap_or(p).to_string_lossy();
            spec.extensions.contains(&ext)
                && !name.contains("test")
                && !name.contains("bench")
                && !name.ends_with(".d.ts")
        })
        .collect();
    files.sort();
    let wanted = [
        "function",
        "method",
        "class",
        "struct",
        "enum",
        "interface",
        "constant",
        "trait",
        "enum-member",
    ];
    let mut found: Vec<(String, Spot)> = Vec::new();
    let mut names = BTreeSet::new();
    for file in files {
        let relative = file.strip_prefix(project)?.display().to_string();
        let (symbols, _) = pages(
            client,
            "document_symbols",
            json!({"file": relative}),
            "symbols",
        )
        .await?;
        for s in symbols {
            let (Some(name), Some(kind), Some(at)) =
                (s["name"].as_str(), s["kind"].as_str(), spot(&s))
            else {
                continue;
            };
            if s["depth"].as_u64().unwrap_or(0) > 1
                || !wanted.contains(&kind)
                || name.chars().count() < 3
                || !name.chars().all(|c| c.is_alphanumeric() || c == '_')
                || !names.insert(name.to_string())
            {
                continue;
            }
            found.push((name.to_string(), at));
        }
    }
    ensure!(
        found.len() >= SYMBOLS,
        "only {} symbols in the outlines",
        found.len()
    );
    let step = found.len() as f64 / SYMBOLS as f64;
    Ok((0..SYMBOLS)
        .map(|i| found[(i as f64 * step) as usize].clone())
        .collect())
}

/// `rg -w -n -t TYPE NAME`'s output, and every match as a spot (columns in
/// characters); or, without ripgrep, a walk with its rules.
fn grep(project: &Path, spec: &Project, name: &str) -> Result<(Vec<Spot>, usize)> {
    if which("rg") {
        let listed = Command::new("rg")
            .args(["-w", "-n", "-t", spec.rg_type, "--", name])
            .current_dir(project)
            .output()?;
        let matches = Command::new("rg")
            .args(["-w", "--vimgrep", "-t", spec.rg_type, "--", name])
            .current_dir(project)
            .output()?;
        let mut spots = Vec::new();
        let mut texts: HashMap<String, Vec<String>> = HashMap::new();
        for line in String::from_utf8_lossy(&matches.stdout).lines() {
            let mut parts = line.splitn(4, ':');
            let (Some(file), Some(n), Some(col)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let (Ok(n), Ok(col)) = (n.parse::<u64>(), col.parse::<usize>()) else {
                continue;
            };
            let lines = texts.entry(file.to_string()).or_insert_with(|| {
                std::fs::read_to_string(project.join(file))
                    .unwrap_or_default()
                    .lines()
                    .map(str::to_string)
                    .collect()
            });
            let text = lines
                .get(n as usize - 1)
                .map(String::as_str)
                .unwrap_or_default();
            let chars = text.get(..col - 1).map_or(col - 1, |t| t.chars().count());
            spots.push((file.to_string(), n, chars as u64 + 1));
        }
        return Ok((spots, listed.stdout.len()));
    }
    // rg -w: a match with no word character right before or after it.
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut spots = Vec::new();
    let mut bytes = 0;
    for entry in ignore::WalkBuilder::new(project).build().flatten() {
        let path = entry.path();
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default();
        if !spec.extensions.contains(&ext) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let file = path.strip_prefix(project)?.display().to_string();
        for (n, line) in text.lines().enumerate() {
            let mut hit = false;
            for (at, _) in line.match_indices(name) {
                let before = line[..at].chars().next_back().is_some_and(word);
                let after = line[at + name.len()..].chars().next().is_some_and(word);
                if !before && !after {
                    hit = true;
                    spots.push((
                        file.clone(),
                        n as u64 + 1,
                        line[..at].chars().count() as u64 + 1,
                    ));
                }
            }
            if hit {
                bytes += file.len() + line.len() + format!(":{}:\n", n + 1).len();
            }
        }
    }
    Ok((spots, bytes))
}

fn which(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Sums over one project's symbols.
#[derive(Default)]
struct Tally {
    symbols: usize,
    truth: usize,
    refs: usize,
    refs_true: usize,
    grep: usize,
    grep_true: usize,
    refs_bytes: usize,
    first_bytes: usize,
    grep_bytes: usize,
    not_judged: usize,
    /// Occurrences whose `definition` the tool refused (no name there).
    refused: usize,
}

async fn measure(table: &Table, spec: &Project, project: &Path) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let dir = dir.path().canonicalize()?;
    let mut proxy = start_proxy(&dir, project)?;
    let outcome = async {
        let entry = injected_entry(&mut proxy, project)?;
        let (client, _) = connect_entry(&entry).await?;
        let symbols = pick_symbols(&client, project, spec).await?;
        let mut tally = Tally::default();
        for (name, at) in symbols {
            let Some(target) = definition(&client, &at).await? else {
                continue;
            };
            let args = json!({"file": at.0, "line": at.1, "column": at.2});
            let (items, bytes) = pages(&client, "references", args, "locations").await?;
            let refs: BTreeSet<Spot> = items.iter().filter_map(spot).collect();
            let (grep_spots, grep_bytes) = grep(project, spec, &name)?;
            let grep_set: BTreeSet<Spot> = grep_spots.into_iter().collect();
            let mut truth = BTreeSet::new();
            let mut judged = 0;
            for spot in refs.union(&grep_set) {
                if judged >= MAX_JUDGED {
                    tally.not_judged += 1;
                    continue;
                }
                judged += 1;
                // A spot the tool refuses to ask about (a keyword such as
                // `default` that rg matched) is no use of the symbol; it is
                // counted, so the row says how many there were.
                match definition(&client, spot).await {
                    Ok(found) if found == Some(target.clone()) => {
                        truth.insert(spot.clone());
                    }
                    Ok(_) => {}
                    Err(e) if e.to_string().starts_with("definition failed:") => tally.refused += 1,
                    Err(e) => return Err(e),
                }
            }
            tally.symbols += 1;
            tally.truth += truth.len();
            tally.refs += refs.len();
            tally.refs_true += refs.intersection(&truth).count();
            tally.grep += grep_set.len();
            tally.grep_true += grep_set.intersection(&truth).count();
            tally.refs_bytes += bytes.iter().sum::<usize>();
            tally.first_bytes += bytes.first().copied().unwrap_or(0);
            tally.grep_bytes += grep_bytes;
        }
        let _ = client.cancel().await;
        Ok::<_, anyhow::Error>(tally)
    }
    .await;
    proxy.end();
    let t = outcome?;
    ensure!(t.symbols > 0, "no symbol had a definition");
    let ratio = |a: usize, b: usize| if b == 0 { 1.0 } else { a as f64 / b as f64 };
    let rg = if which("rg") {
        "rg -w"
    } else {
        "a word search (rg -w's rules; no ripgrep here)"
    };
    let judged = if t.not_judged > 0 {
        format!(
            "; {} occurrences past {MAX_JUDGED} a symbol not judged",
            t.not_judged
        )
    } else {
        String::new()
    };
    let judged = if t.refused > 0 {
        format!(
            "{judged}; {} occurrences with no name to ask about (not uses)",
            t.refused
        )
    } else {
        judged
    };
    table.row(
        format!(
            "9 references vs {}: {} ({} symbols, {} true uses), precision / recall",
            rg.split(' ').take(2).collect::<Vec<_>>().join(" "),
            spec.label,
            t.symbols,
            t.truth
        ),
        format!(
            "{:.2} / {:.2} ({} found)",
            ratio(t.refs_true, t.refs),
            ratio(t.refs_true, t.truth),
            t.refs
        ),
        format!(
            "{:.2} / {:.2} ({} matches, {rg} -t {}){judged}",
            ratio(t.grep_true, t.grep),
            ratio(t.grep_true, t.truth),
            t.grep,
            spec.rg_type
        ),
        None,
        "info",
        Verdict::Info,
    );
    table.row(
        format!("9 same: bytes to the model, {}", spec.label),
        format!(
            "{:.1} KB every page ({:.1} KB first answers)",
            t.refs_bytes as f64 / 1024.0,
            t.first_bytes as f64 / 1024.0
        ),
        format!("{:.1} KB of {rg} output", t.grep_bytes as f64 / 1024.0),
        Some(ratio(t.refs_bytes, t.grep_bytes)),
        "info",
        Verdict::Info,
    );
    Ok(())
}

pub async fn run(table: &Table) -> Result<()> {
    let mut failures = Vec::new();
    for spec in PROJECTS {
        if acp_lsp::lsp::detect::find_on_path(spec.server.0).is_none() {
            table.skipped(
                format!("9 {}", spec.label),
                format!(
                    "skipped: {} is not installed ({})",
                    spec.server.0, spec.server.1
                ),
            );
            continue;
        }
        let project = match tokio::task::spawn_blocking(spec.fetch).await? {
            Ok(project) => project.canonicalize()?,
            Err(e) => {
                table.skipped(
                    format!("9 {}", spec.label),
                    format!("skipped: cannot fetch it ({e:#})"),
                );
                continue;
            }
        };
        eprintln!("  {}: {}", spec.label, project.display());
        if let Err(e) = measure(table, spec, &project).await {
            failures.push(format!("{}: {e:#}", spec.label));
        }
    }
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    Ok(())
}
