//! Figure 3: freshness.
//!
//! - Disk write → `didChange`: an open document is rewritten on disk; the time
//!   until acp-lsp's `didChange` for it leaves for the server, from the
//!   recorder's timestamps. Baseline: the first raw inotify event (a plain
//!   `notify` watcher on the same folder, same run): what any watcher gets at
//!   the earliest, before acp-lsp's coalescing window and disk check.
//! - `LspHost::text_written` → next `lsp/request` forwarded: the relay's hook
//!   for a confirmed `fs/write_text_file` (the editor confirms without touching
//!   the disk), then the agent's next request naming that document; time from
//!   the hook until the request leaves for the server. Baseline: the same
//!   request with no write before it.

use super::{
    fake_config, fake_workspace, file_uri, median, percentile, FifoRecorder, GateStack, Table,
    Verdict, START_TIMEOUT,
};
use acp_lsp::lsp::registry::RegistryOptions;
use acp_lsp_core::gate::{GateMethod, LspHost as _};
use anyhow::{ensure, Context, Result};
use notify::Watcher as _;
use serde_json::json;
use std::time::{Duration, Instant};

const WRITES: usize = 100;
/// The pause before each write: over two coalescing windows.
const QUIET: Duration = Duration::from_millis(50);
const HOOK_ROUNDS: usize = 300;
/// Longest wait for one forwarded message or raw event.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);

/// Issue 16: the median was 21 ms with fixed 20 ms windows.
const TARGET_MEDIAN_MS: f64 = 5.0;
const TARGET_P99_MS: f64 = 60.0;
/// The burst: rewrites of one file, this far apart, in rounds.
const BURST_WRITES: usize = 100;
const BURST_GAP: Duration = Duration::from_millis(2);
const BURST_ROUNDS: usize = 3;

pub async fn run(table: &Table) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let root = fake_workspace(
        dir.path(),
        "ws",
        &[("doc.fake", "revision 0\n"), ("hook.fake", "hook 0\n")],
    )?;
    let mut fifo = FifoRecorder::create(dir.path()).await?;
    let stack = GateStack::start(
        vec![fake_config("fake", "", &[])],
        &root,
        RegistryOptions {
            recorder: Some(fifo.recorder.clone()),
            ..RegistryOptions::default()
        },
    )
    .await?;
    let outcome = measure(table, &stack, &mut fifo, &root).await;
    stack.shutdown().await;
    outcome?;
    measure_burst(table, dir.path()).await
}

/// A burst of rewrites of one file, seen by two watches of the same folder
/// at once: the adaptive one (acp-lsp's) and one with fixed windows (what
/// it did before issue 16). Each batch naming the file is one `didChange`
/// for an open document, so the counts are the notifications a burst makes.
async fn measure_burst(table: &Table, parent: &std::path::Path) -> Result<()> {
    use acp_lsp::lsp::watch::{RootWatch, WatchBatch, WatchOptions};
    let root = parent.join("burst").canonicalize().or_else(|_| {
        std::fs::create_dir_all(parent.join("burst"))?;
        parent.join("burst").canonicalize()
    })?;
    let file = root.join("burst.fake");
    std::fs::write(&file, "0")?;
    let count = |adaptive: bool| -> Result<(RootWatch, tokio::task::JoinHandle<(usize, usize)>)> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let options = WatchOptions {
            adaptive,
            ..WatchOptions::default()
        };
        let watch = RootWatch::start(&root, options, tx)?;
        let file = file.clone();
        let sentinel = root.join("sentinel.fake");
        // (batches naming the file, sentinels seen)
        let task = tokio::spawn(async move {
            let (mut batches, mut sentinels) = (0, 0);
            while let Some(delivery) = rx.recv().await {
                if let WatchBatch::Changes(changes) = &delivery.batch {
                    batches += changes.iter().filter(|(p, _)| *p == file).count();
                    if changes.iter().any(|(p, _)| *p == sentinel) {
                        sentinels += 1;
                        if sentinels == BURST_ROUNDS {
                            break;
                        }
                    }
                }
            }
            (batches, sentinels)
        });
        Ok((watch, task))
    };
    let (adaptive_watch, adaptive) = count(true)?;
    let (fixed_watch, fixed) = count(false)?;
    let sentinel = root.join("sentinel.fake");
    for round in 0..BURST_ROUNDS {
        for i in 0..BURST_WRITES {
            std::fs::write(&file, format!("{round} {i}"))?;
            tokio::time::sleep(BURST_GAP).await;
        }
        // Quiet, then a marker: every batch of the round has been handed on.
        tokio::time::sleep(Duration::from_millis(200)).await;
        std::fs::write(&sentinel, format!("{round}"))?;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let adaptive = tokio::time::timeout(FORWARD_TIMEOUT, adaptive).await??;
    let fixed = tokio::time::timeout(FORWARD_TIMEOUT, fixed).await??;
    drop((adaptive_watch, fixed_watch));
    table.row(
        format!(
            "3 burst of {BURST_WRITES} rewrites {} ms apart ({BURST_ROUNDS} rounds): batches naming the file",
            BURST_GAP.as_millis()
        ),
        format!("{} (adaptive)", adaptive.0),
        format!("{} (fixed 20 ms windows, same events)", fixed.0),
        Some(adaptive.0 as f64 / fixed.0.max(1) as f64),
        "≤ fixed",
        Verdict::of(adaptive.0 <= fixed.0),
    );
    Ok(())
}

async fn measure(
    table: &Table,
    stack: &GateStack,
    fifo: &mut FifoRecorder,
    root: &std::path::Path,
) -> Result<()> {
    let server_id = stack.server_id("fake", root)?;
    let doc = root.join("doc.fake");
    let hook = root.join("hook.fake");
    let (doc_uri, hook_uri) = (file_uri(&doc), file_uri(&hook));
    let hover = |uri: &str, wait: Option<u64>| {
        stack.request_params(
            &server_id,
            "textDocument/hover",
            &json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}),
            wait,
        )
    };
    // Open both documents with one request each.
    for uri in [&doc_uri, &hook_uri] {
        stack
            .request_ok(hover(uri, Some(START_TIMEOUT.as_millis() as u64)))
            .await?;
        fifo.until(FORWARD_TIMEOUT, |r| r.is("textDocument/didOpen", uri))
            .await
            .context("no didOpen")?;
    }

    // The baseline watcher.
    let (raw_tx, mut raw_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let _ = raw_tx.send((Instant::now(), event));
    })?;
    watcher.watch(root, notify::RecursiveMode::NonRecursive)?;

    let (mut ours, mut direct) = (Vec::new(), Vec::new());
    for i in 1..=WRITES {
        // Each write after quiet (issue 16: the first event after quiet
        // goes on at once; back-to-back writes are a burst, which the
        // burst row below measures).
        tokio::time::sleep(QUIET).await;
        fifo.drain();
        while raw_rx.try_recv().is_ok() {}
        let text = format!("revision {i}\n");
        let written = Instant::now();
        std::fs::write(&doc, &text)?;
        let change = fifo
            .until(FORWARD_TIMEOUT, |r| {
                r.is("textDocument/didChange", &doc_uri)
            })
            .await
            .with_context(|| format!("no didChange after write {i}"))?;
        ours.push((change.t_ns - fifo.at(written)) as f64 / 1e6);
        let deadline = tokio::time::Instant::now() + FORWARD_TIMEOUT;
        loop {
            let (at, event) = tokio::time::timeout_at(deadline, raw_rx.recv())
                .await
                .ok()
                .flatten()
                .context("no raw event")?;
            if event.is_ok_and(|e| e.paths.iter().any(|p| p == &doc)) {
                direct.push((at - written).as_secs_f64() * 1e3);
                break;
            }
        }
    }
    drop(watcher);
    let (m_ours, m_direct) = (median(&ours), median(&direct));
    let (p_ours, p_direct) = (percentile(&ours, 99.0), percentile(&direct, 99.0));
    table.row(
        format!("3 disk write after quiet → didChange sent, median ({WRITES} writes)"),
        format!("{m_ours:.1} ms"),
        format!("{m_direct:.2} ms (first raw inotify event)"),
        Some(m_ours / m_direct),
        format!("≤ {TARGET_MEDIAN_MS} ms"),
        Verdict::of(m_ours <= TARGET_MEDIAN_MS),
    );
    table.row(
        "3 disk write → didChange sent, p99",
        format!("{p_ours:.1} ms"),
        format!("{p_direct:.2} ms"),
        Some(p_ours / p_direct),
        format!("≤ {TARGET_P99_MS} ms"),
        Verdict::of(p_ours <= TARGET_P99_MS),
    );

    // text_written → the next request forwarded.
    let session = stack
        .gate
        .sessions()
        .get(super::SESSION)
        .context("the session is open")?;
    let params = hover(&hook_uri, None);
    let (mut with_hook, mut without) = (Vec::new(), Vec::new());
    for i in 1..=HOOK_ROUNDS {
        for write in [true, false] {
            fifo.drain();
            let start = Instant::now();
            if write {
                stack
                    .registry
                    .text_written(&session, &hook, &format!("hook {i}\n"));
            }
            let response = stack.call_raw(GateMethod::Request, params.clone()).await?;
            ensure!(super::is_success(&response), "hover failed");
            let (seen, found) = fifo
                .collect_until(FORWARD_TIMEOUT, |r| {
                    r.to_server() && r.method.as_deref() == Some("textDocument/hover")
                })
                .await;
            ensure!(found, "the hover never left");
            let changed = seen
                .iter()
                .any(|r| r.is("textDocument/didChange", &hook_uri));
            ensure!(
                changed == write,
                "didChange before the hover: {changed}, expected {write}"
            );
            let request = seen.last().expect("found");
            let took = (request.t_ns - fifo.at(start)) as f64 / 1e3;
            if write {
                with_hook.push(took);
            } else {
                without.push(took);
            }
        }
    }
    let (m_hook, m_plain) = (median(&with_hook), median(&without));
    table.row(
        "3 text_written → next lsp/request sent, median (p99)",
        format!(
            "{m_hook:.1} µs ({:.0}); {:+.1} µs",
            percentile(&with_hook, 99.0),
            m_hook - m_plain
        ),
        format!(
            "{m_plain:.1} µs ({:.0}) same request, no write",
            percentile(&without, 99.0)
        ),
        Some(m_hook / m_plain),
        "—",
        Verdict::Info,
    );
    Ok(())
}
