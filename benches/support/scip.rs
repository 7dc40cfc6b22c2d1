//! Figure 10: precomputed SCIP indexes (issue 29). On real projects from
//! their registries (serde_json, the version this package builds with; the
//! packaging 24.2 sdist from PyPI; immer 10.1.1 from npm), each copied
//! twice: the time from the session's opening to the first correct
//! `textDocument/references` of a much-used symbol, the live server alone
//! (the request waits until it is ready), against the index `acp-lsp index`
//! built beforehand (not timed in the ratio; its build time is its own row)
//! beside a live server starting at the same moment. "Correct": every
//! location the index gives is one the live server gives once ready. Then
//! the index's memory per million occurrences: a synthetic index (the scip
//! crate's types) loaded in this process, RSS and table bytes.

use super::{acp_lsp_bin, copy_tree, file_uri, registry, rss_kib, GateStack, Table, Verdict};
use acp_lsp::lsp::config::Config;
use acp_lsp::lsp::detect::find_on_path;
use acp_lsp::lsp::registry::RegistryOptions;
use acp_lsp::scip::load::{load, write_synthetic, LoadLimits};
use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Longest wait for a live server to be ready on its project.
const READY_TIMEOUT: Duration = Duration::from_secs(300);
/// The goal of issue 29 for the first correct answer with an index.
const TARGET_MS: f64 = 200.0;
/// Occurrences of the synthetic index of the memory row.
const SYNTHETIC_DOCUMENTS: u32 = 2_000;
const SYNTHETIC_PER_DOCUMENT: u32 = 1_000;

/// A measured project: where it comes from, its live server, and the
/// symbol asked about.
struct Project {
    label: &'static str,
    /// `acp-lsp index --language` and the built-in live server.
    language: &'static str,
    live: &'static str,
    /// The live server's command, which must be on PATH.
    command: &'static str,
    fetch: fn() -> Result<PathBuf>,
    /// The file, a text on the definition's line, and the name in it.
    file: &'static str,
    line_text: &'static str,
    name: &'static str,
}

const PROJECTS: &[Project] = &[
    Project {
        label: "serde_json from_str",
        language: "rust",
        live: "rust-analyzer",
        command: "rust-analyzer",
        fetch: || registry_crate("serde_json"),
        file: "src/de.rs",
        line_text: "pub fn from_str<",
        name: "from_str",
    },
    Project {
        label: "packaging 24.2 canonicalize_name",
        language: "python",
        live: "pyright",
        command: "pyright-langserver",
        fetch: || registry::fetch_sdist("packaging", "24.2"),
        file: "src/packaging/utils.py",
        line_text: "def canonicalize_name(",
        name: "canonicalize_name",
    },
    Project {
        label: "immer 10.1.1 die",
        language: "typescript",
        live: "typescript-language-server",
        command: "typescript-language-server",
        fetch: || registry::fetch_npm(&registry::IMMER),
        file: "src/utils/errors.ts",
        line_text: "export function die(",
        name: "die",
    },
];

/// The source directory of `name` as this package builds it.
fn registry_crate(name: &str) -> Result<PathBuf> {
    let out = Command::new(env!("CARGO"))
        // Not --offline: the resolve holds crates of other platforms
        // (redox's, through `directories`) that a Linux build never fetched.
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()?;
    ensure!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout)?;
    let manifest = metadata["packages"]
        .as_array()
        .context("packages")?
        .iter()
        .find(|p| p["name"] == name)
        .and_then(|p| p["manifest_path"].as_str())
        .with_context(|| format!("{name} is not a dependency"))?;
    Ok(Path::new(manifest)
        .parent()
        .context("a crate dir")?
        .to_path_buf())
}

/// Where `name` is in the first line of `path` holding `line_text`.
fn position_of(path: &Path, line_text: &str, name: &str) -> Result<(usize, usize)> {
    let text = std::fs::read_to_string(path)?;
    for (n, line) in text.lines().enumerate() {
        if line.contains(line_text) {
            return Ok((n, line.find(name).context("name in its line")?));
        }
    }
    bail!("{line_text:?} not in {}", path.display())
}

/// The locations of a references result inside `project`, as keys.
fn locations(response: &Value, project: &str) -> BTreeSet<String> {
    response["result"]["lspResult"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|l| {
                    let uri = l["uri"].as_str()?;
                    uri.starts_with(project).then(|| {
                        let r = &l["range"];
                        format!(
                            "{}:{}:{}",
                            uri.trim_start_matches(project),
                            r["start"]["line"],
                            r["start"]["character"]
                        )
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A session over `root` with `live` (rust-analyzer without its checks);
/// the first references answer from `server` (`None`: `live`, waiting
/// until it is ready), its time since the session opened and the stack
/// (still running).
async fn first_references(
    root: &Path,
    live: &str,
    server: Option<&str>,
    params: &Value,
) -> Result<(Duration, Value, GateStack)> {
    let mut config = Config::builtin()
        .server(live)
        .cloned()
        .with_context(|| format!("built-in {live}"))?;
    if live == "rust-analyzer" {
        config.settings =
            json!({"rust-analyzer": {"checkOnSave": false, "cargo": {"targetDir": true}}});
    }
    let started = Instant::now();
    let stack = GateStack::start(vec![config], root, RegistryOptions::default()).await?;
    let (id, wait) = match server {
        Some(name) => (stack.server_id(name, root)?, None),
        None => (
            stack.server_id(live, root)?,
            Some(READY_TIMEOUT.as_millis() as u64),
        ),
    };
    let request = stack.request_params(&id, "textDocument/references", params, wait);
    let response = stack.request_ok(request).await?;
    Ok((started.elapsed(), response, stack))
}

pub async fn run(table: &Table) -> Result<()> {
    let work = tempfile::tempdir()?;
    for project in PROJECTS {
        let row = format!(
            "10 SCIP: session → first correct references ({})",
            project.label
        );
        if find_on_path(project.command).is_none() {
            table.skipped(row, format!("{} is not on PATH", project.command));
            continue;
        }
        if let Err(e) = measure(table, project, work.path()).await {
            table.skipped(row, format!("failed: {e:#}"));
        }
    }

    // Memory per million occurrences.
    let synthetic = work.path().join("synthetic.scip");
    write_synthetic(&synthetic, SYNTHETIC_DOCUMENTS, SYNTHETIC_PER_DOCUMENT)?;
    let before = rss_kib();
    let loaded_at = Instant::now();
    let loaded = load(&synthetic, LoadLimits::default(), None)?;
    let load_time = loaded_at.elapsed();
    let after = rss_kib();
    let millions = f64::from(SYNTHETIC_DOCUMENTS * SYNTHETIC_PER_DOCUMENT) / 1e6;
    let rss_per_million = after.saturating_sub(before) as f64 / 1024.0 / millions;
    let tables_per_million = loaded.index.heap_bytes() as f64 / 1024.0 / 1024.0 / millions;
    table.row(
        "10 SCIP: index memory per million occurrences (synthetic, 2 M)",
        format!(
            "{rss_per_million:.1} MiB RSS, {tables_per_million:.1} MiB tables, loaded in {:.0} ms per million",
            load_time.as_secs_f64() * 1e3 / millions
        ),
        "—",
        None,
        "stated",
        Verdict::Info,
    );
    drop(loaded);
    Ok(())
}

/// The index's locations that the live server's references left out,
/// judged by the live server itself: a true reference when its definition
/// there is the asked symbol's (rust-analyzer's references skip some uses
/// inside macro calls that its `scip` records), wrong when it names another
/// symbol, unconfirmed when it names none.
async fn judge(
    stack: &GateStack,
    live_id: &str,
    root: &Path,
    project: &Project,
    index_set: &BTreeSet<String>,
    truth_set: &BTreeSet<String>,
) -> Result<Judged> {
    let file = root.join(project.file);
    let (def_line, def_character) = position_of(&file, project.line_text, project.name)?;
    let def_key = format!("{}:{def_line}:", project.file);
    let (mut wrong, mut only_index, mut unconfirmed) = (0, 0, 0);
    for key in index_set.difference(truth_set) {
        let mut parts = key.rsplitn(3, ':');
        let (character, line, path) = (parts.next(), parts.next(), parts.next());
        let (Some(character), Some(line), Some(path)) = (character, line, path) else {
            bail!("not a location key: {key}");
        };
        let params = json!({"textDocument": {"uri": file_uri(&root.join(path))},
                            "position": {"line": line.parse::<u64>()?, "character": character.parse::<u64>()?}});
        let response = stack
            .request_ok(stack.request_params(live_id, "textDocument/definition", &params, None))
            .await?;
        let targets = definition_starts(&response, &format!("{}/", file_uri(root)));
        let answered = response["result"]["lspResult"]
            .as_array()
            .map_or(!response["result"]["lspResult"].is_null(), |a| {
                !a.is_empty()
            });
        let names_it = targets.iter().any(|(start, end)| {
            start.starts_with(&def_key)
                && start
                    .rsplit(':')
                    .next()
                    .and_then(|c| c.parse::<usize>().ok())
                    .is_some_and(|c| c <= def_character && def_character <= *end)
        });
        if names_it {
            only_index += 1;
        } else if answered {
            eprintln!(
                "  {}: wrong: {key} (the live server's definition there: {targets:?})",
                project.label
            );
            wrong += 1;
        } else {
            eprintln!(
                "  {}: unconfirmed: {key} (no definition there from the live server)",
                project.label
            );
            unconfirmed += 1;
        }
    }
    Ok(Judged {
        wrong,
        only_index,
        unconfirmed,
    })
}

/// How the index's extra locations were judged.
struct Judged {
    /// The live server's definition there is another symbol's.
    wrong: usize,
    /// The live server's definition there is the symbol's: true references
    /// its own list left out.
    only_index: usize,
    /// The live server gives no definition there.
    unconfirmed: usize,
}

/// A definition answer's targets inside `project`: the start as a
/// [`locations`] key and the end character.
fn definition_starts(response: &Value, project: &str) -> Vec<(String, usize)> {
    let result = &response["result"]["lspResult"];
    let items = match result {
        Value::Array(items) => items.clone(),
        Value::Object(_) => vec![result.clone()],
        _ => Vec::new(),
    };
    items
        .iter()
        .filter_map(|l| {
            let uri = l["uri"].as_str().or(l["targetUri"].as_str())?;
            let range = if l["range"].is_null() {
                &l["targetSelectionRange"]
            } else {
                &l["range"]
            };
            let path = uri.strip_prefix(project)?;
            Some((
                format!(
                    "{path}:{}:{}",
                    range["start"]["line"], range["start"]["character"]
                ),
                range["end"]["character"].as_u64()? as usize,
            ))
        })
        .collect()
}

/// One project's rows: the index beside the starting live server, then
/// the live server alone on a second copy.
async fn measure(table: &Table, project: &Project, work: &Path) -> Result<()> {
    let source = tokio::task::spawn_blocking(project.fetch).await??;
    let indexed = work.join(format!("{}-indexed", project.language));
    let live_only = work.join(format!("{}-live", project.language));
    copy_tree(&source, &indexed)?;
    copy_tree(&source, &live_only)?;
    let (indexed, live_only) = (indexed.canonicalize()?, live_only.canonicalize()?);
    let built = Instant::now();
    let out = Command::new(acp_lsp_bin())
        .args(["index", "--language", project.language])
        .arg(&indexed)
        .output()?;
    ensure!(
        out.status.success(),
        "acp-lsp index: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let build_time = built.elapsed();
    let index_file = indexed.join(format!(".scip/{}.scip", project.language));
    let index_bytes = std::fs::metadata(&index_file)?.len();

    let params_in = |root: &Path| -> Result<Value> {
        let file = root.join(project.file);
        let (line, character) = position_of(&file, project.line_text, project.name)?;
        Ok(
            json!({"textDocument": {"uri": file_uri(&file)}, "position": {"line": line, "character": character},
                  "context": {"includeDeclaration": true}}),
        )
    };

    // The index beside a starting live server, then that server once
    // ready (the truth).
    let (index_time, from_index, stack) =
        first_references(&indexed, project.live, Some("scip"), &params_in(&indexed)?).await?;
    let source_meta = from_index["result"]["_meta"]["acp-lsp"]["source"].clone();
    let live_id = stack.server_id(project.live, &indexed)?;
    let truth = stack
        .request_ok(stack.request_params(
            &live_id,
            "textDocument/references",
            &params_in(&indexed)?,
            Some(READY_TIMEOUT.as_millis() as u64),
        ))
        .await;
    let prefix = format!("{}/", file_uri(&indexed));
    let judged = match truth {
        Ok(truth) => {
            let (index_set, truth_set) =
                (locations(&from_index, &prefix), locations(&truth, &prefix));
            judge(&stack, &live_id, &indexed, project, &index_set, &truth_set)
                .await
                .map(|judged| (index_set, truth_set, judged))
        }
        Err(e) => Err(e),
    };
    stack.shutdown().await;
    let (index_set, truth_set, judged) = judged?;
    let Judged {
        wrong,
        only_index,
        unconfirmed,
    } = judged;
    let missing = truth_set.difference(&index_set).count();
    ensure!(
        source_meta.as_str().is_some_and(|s| s.starts_with("scip@")),
        "the index did not answer: {from_index}"
    );

    // The live server alone.
    let (live_time, from_live, stack) =
        first_references(&live_only, project.live, None, &params_in(&live_only)?).await?;
    stack.shutdown().await;
    let live_set = locations(&from_live, &format!("{}/", file_uri(&live_only)));
    ensure!(
        live_set.len() == truth_set.len(),
        "{}'s answers differ between the copies: {} and {}",
        project.live,
        live_set.len(),
        truth_set.len()
    );

    let index_ms = index_time.as_secs_f64() * 1e3;
    let live_ms = live_time.as_secs_f64() * 1e3;
    table.row(
        format!(
            "10 SCIP: session → first correct references ({})",
            project.label
        ),
        format!(
            "{index_ms:.0} ms from the index ({} locations, {wrong} wrong, {missing} only live, \
             {only_index} true only in the index, {unconfirmed} unconfirmed)",
            index_set.len()
        ),
        format!(
            "{live_ms:.0} ms {} alone ({} locations)",
            project.live,
            live_set.len()
        ),
        Some(index_ms / live_ms),
        format!("≤ {TARGET_MS:.0} ms, 0 wrong"),
        Verdict::of(index_ms <= TARGET_MS && wrong == 0 && !index_set.is_empty()),
    );
    table.row(
        format!(
            "10 SCIP: acp-lsp index ({}) on {}",
            project.language, project.label
        ),
        format!("{:.1} s, {index_bytes} B index", build_time.as_secs_f64()),
        "—",
        None,
        "—",
        Verdict::Info,
    );
    Ok(())
}
