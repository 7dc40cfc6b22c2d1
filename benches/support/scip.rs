//! Figure 10: precomputed SCIP indexes (issue 29). On a real crate from the
//! cargo registry (serde_json, the version this package builds with, copied
//! twice), the time from the session's opening to the first correct
//! `textDocument/references` of `serde_json::from_str`: rust-analyzer alone
//! (the request waits until it is ready), against the index `acp-lsp index`
//! built beforehand (not timed in the ratio; its build time is its own row)
//! beside a rust-analyzer starting at the same moment. "Correct": every
//! location the index gives is one rust-analyzer gives once ready. Then the
//! index's memory per million occurrences: a synthetic index (the scip
//! crate's types) loaded in this process, RSS and table bytes.

use super::{acp_lsp_bin, copy_tree, file_uri, rss_kib, GateStack, Table, Verdict};
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

/// Longest wait for rust-analyzer to be ready on the crate.
const READY_TIMEOUT: Duration = Duration::from_secs(300);
/// The goal of issue 29 for the first correct answer with an index.
const TARGET_MS: f64 = 200.0;
/// Occurrences of the synthetic index of the memory row.
const SYNTHETIC_DOCUMENTS: u32 = 2_000;
const SYNTHETIC_PER_DOCUMENT: u32 = 1_000;

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

/// A session over `root` with rust-analyzer; the first references answer
/// from `server` (`None`: rust-analyzer, waiting until it is ready), its
/// time since the session opened and the stack (still running).
async fn first_references(
    root: &Path,
    server: Option<&str>,
    params: &Value,
) -> Result<(Duration, Value, GateStack)> {
    let mut config = Config::builtin()
        .server("rust-analyzer")
        .cloned()
        .context("built-in rust-analyzer")?;
    config.settings =
        json!({"rust-analyzer": {"checkOnSave": false, "cargo": {"targetDir": true}}});
    let started = Instant::now();
    let stack = GateStack::start(vec![config], root, RegistryOptions::default()).await?;
    let (id, wait) = match server {
        Some(name) => (stack.server_id(name, root)?, None),
        None => (
            stack.server_id("rust-analyzer", root)?,
            Some(READY_TIMEOUT.as_millis() as u64),
        ),
    };
    let request = stack.request_params(&id, "textDocument/references", params, wait);
    let response = stack.request_ok(request).await?;
    Ok((started.elapsed(), response, stack))
}

pub async fn run(table: &Table) -> Result<()> {
    if find_on_path("rust-analyzer").is_none() {
        table.skipped(
            "10 SCIP index",
            "rust-analyzer not on PATH (rustup component add rust-analyzer)",
        );
        return Ok(());
    }
    let source = registry_crate("serde_json")?;
    let work = tempfile::tempdir()?;
    let indexed = work.path().join("indexed");
    let live_only = work.path().join("live");
    copy_tree(&source, &indexed)?;
    copy_tree(&source, &live_only)?;
    let (indexed, live_only) = (indexed.canonicalize()?, live_only.canonicalize()?);
    let built = Instant::now();
    let out = Command::new(acp_lsp_bin())
        .args(["index", "--language", "rust"])
        .arg(&indexed)
        .output()?;
    ensure!(
        out.status.success(),
        "acp-lsp index: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let build_time = built.elapsed();
    let index_file = indexed.join(".scip/rust.scip");
    let index_bytes = std::fs::metadata(&index_file)?.len();

    let params_in = |root: &Path| -> Result<Value> {
        let file = root.join("src/de.rs");
        let (line, character) = position_of(&file, "pub fn from_str<", "from_str")?;
        Ok(
            json!({"textDocument": {"uri": file_uri(&file)}, "position": {"line": line, "character": character},
                  "context": {"includeDeclaration": true}}),
        )
    };

    // The index beside a starting rust-analyzer, then that rust-analyzer
    // once ready (the truth).
    let (index_time, from_index, stack) =
        first_references(&indexed, Some("scip"), &params_in(&indexed)?).await?;
    let source_meta = from_index["result"]["_meta"]["acp-lsp"]["source"].clone();
    let live_id = stack.server_id("rust-analyzer", &indexed)?;
    let truth = stack
        .request_ok(stack.request_params(
            &live_id,
            "textDocument/references",
            &params_in(&indexed)?,
            Some(READY_TIMEOUT.as_millis() as u64),
        ))
        .await;
    stack.shutdown().await;
    let truth = truth?;
    let project = format!("{}/", file_uri(&indexed));
    let (index_set, truth_set) = (
        locations(&from_index, &project),
        locations(&truth, &project),
    );
    let wrong = index_set.difference(&truth_set).count();
    let missing = truth_set.difference(&index_set).count();
    ensure!(
        source_meta.as_str().is_some_and(|s| s.starts_with("scip@")),
        "the index did not answer: {from_index}"
    );

    // rust-analyzer alone.
    let (live_time, from_live, stack) =
        first_references(&live_only, None, &params_in(&live_only)?).await?;
    stack.shutdown().await;
    let live_set = locations(&from_live, &format!("{}/", file_uri(&live_only)));
    ensure!(
        live_set.len() == truth_set.len(),
        "rust-analyzer's answers differ between the copies: {} and {}",
        live_set.len(),
        truth_set.len()
    );

    let index_ms = index_time.as_secs_f64() * 1e3;
    let live_ms = live_time.as_secs_f64() * 1e3;
    table.row(
        "10 SCIP: session → first correct references (serde_json from_str)",
        format!(
            "{index_ms:.0} ms from the index ({} locations, {wrong} wrong, {missing} only live)",
            index_set.len()
        ),
        format!(
            "{live_ms:.0} ms rust-analyzer alone ({} locations)",
            live_set.len()
        ),
        Some(index_ms / live_ms),
        format!("≤ {TARGET_MS:.0} ms, 0 wrong"),
        Verdict::of(index_ms <= TARGET_MS && wrong == 0 && !index_set.is_empty()),
    );
    table.row(
        "10 SCIP: acp-lsp index (rust-analyzer scip) on serde_json",
        format!("{:.1} s, {index_bytes} B index", build_time.as_secs_f64()),
        "—",
        None,
        "—",
        Verdict::Info,
    );

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
