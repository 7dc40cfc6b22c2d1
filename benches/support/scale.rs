//! Figure 4: scale. A generated tree of 100,000 files in 10,000 folders
//! (`dNN/eNN/fN.fake`, 10 files a folder).
//!
//! - Watching it: `RootWatch::start` (ignore-aware walk, one inotify watch per
//!   folder) against a plain recursive `notify` watcher, each in a fresh child
//!   process (this same binary, `--scale-child`) so that its RSS delta is its
//!   own: time until watching is complete, VmRSS after − before.
//! - A burst rewriting 20,000 files: how fast each watcher reports them
//!   (distinct files seen per second, from the burst's start to the last one).
//! - No event lost for open documents: a registry with the fake server over
//!   the tree, 100 documents opened by one request each, the burst; each of
//!   the 100 must get its `didChange`.

use super::{
    fake_config, file_uri, rss_kib, FifoRecorder, GateStack, Table, Verdict, START_TIMEOUT,
};
use acp_lsp::lsp::registry::RegistryOptions;
use acp_lsp::lsp::watch::{RootWatch, WatchBatch, WatchOptions};
use anyhow::{bail, ensure, Context, Result};
use notify::Watcher as _;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TOP: usize = 100;
const SUB: usize = 100;
const FILES_PER_FOLDER: usize = 10;
const FILES: usize = TOP * SUB * FILES_PER_FOLDER;
/// Files rewritten by the burst (the first ones, 2,000 folders).
const BURST: usize = 20_000;
/// Open documents checked, spread over the burst.
const OPEN: usize = 100;
/// Longest wait for a burst to be reported.
const BURST_TIMEOUT: Duration = Duration::from_secs(60);
/// After an overflow, how long without news ends the wait for a burst.
const QUIET: Duration = Duration::from_secs(2);
/// Longest a child may take.
const CHILD_TIMEOUT: Duration = Duration::from_secs(150);

const TARGET_RSS_MIB: f64 = 64.0;

fn file(root: &Path, i: usize) -> PathBuf {
    let folder = i / FILES_PER_FOLDER;
    root.join(format!("d{:02}", folder / SUB))
        .join(format!("e{:02}", folder % SUB))
        .join(format!("f{}.fake", i % FILES_PER_FOLDER))
}

/// Writes the tree with two threads.
fn generate(root: &Path) -> Result<()> {
    std::fs::write(root.join("fake.toml"), "")?;
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let root = root.to_path_buf();
            std::thread::spawn(move || -> std::io::Result<()> {
                for top in (t..TOP).step_by(2) {
                    for sub in 0..SUB {
                        let folder = root.join(format!("d{top:02}/e{sub:02}"));
                        std::fs::create_dir_all(&folder)?;
                        for f in 0..FILES_PER_FOLDER {
                            std::fs::write(folder.join(format!("f{f}.fake")), b"x\n")?;
                        }
                    }
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join()
            .map_err(|_| anyhow::anyhow!("generator panicked"))??;
    }
    Ok(())
}

/// Rewrites the burst's files; returns how long the writing took.
fn rewrite(root: &Path, round: usize) -> std::io::Result<Duration> {
    let start = Instant::now();
    let text = format!("burst {round}\n");
    for i in 0..BURST {
        std::fs::write(file(root, i), &text)?;
    }
    Ok(start.elapsed())
}

fn read_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

pub async fn run(table: &Table) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("tree");
    std::fs::create_dir(&root)?;
    let root = root.canonicalize()?;
    let started = Instant::now();
    tokio::task::spawn_blocking({
        let root = root.clone();
        move || generate(&root)
    })
    .await??;
    eprintln!(
        "  (generated {FILES} files in {} folders in {:.1} s)",
        TOP * SUB,
        started.elapsed().as_secs_f64()
    );
    let max_watches = read_u64("/proc/sys/fs/inotify/max_user_watches").unwrap_or(0);
    let max_queued = read_u64("/proc/sys/fs/inotify/max_queued_events").unwrap_or(0);
    let folders = 1 + TOP + TOP * SUB;

    let ours = child("acp", &root).await?;
    let direct = child("notify", &root).await?;
    let start_of = |v: &Value| v["start_ms"].as_f64().unwrap_or(f64::NAN);
    let rss_of = |v: &Value| {
        (v["rss_after_kib"].as_f64().unwrap_or(0.0) - v["rss_before_kib"].as_f64().unwrap_or(0.0))
            / 1024.0
    };
    table.row(
        "4 watch 100k files / 10k folders: until watching",
        format!(
            "{:.0} ms ({} folders watched)",
            start_of(&ours),
            ours["watched"]
        ),
        format!("{:.0} ms (notify, recursive)", start_of(&direct)),
        Some(start_of(&ours) / start_of(&direct)),
        "—",
        Verdict::Info,
    );
    let (rss_ours, rss_direct) = (rss_of(&ours), rss_of(&direct));
    table.row(
        "4 watch 100k files: RSS delta (no servers)",
        format!("{rss_ours:.1} MiB"),
        format!("{rss_direct:.1} MiB (notify, recursive)"),
        Some(rss_ours / rss_direct),
        format!("≤ {TARGET_RSS_MIB} MiB"),
        Verdict::of(rss_ours <= TARGET_RSS_MIB),
    );
    table.row(
        "4 inotify max_user_watches / max_queued_events",
        format!("{max_watches} / {max_queued}"),
        format!("{folders} folders needed"),
        None,
        "not limiting",
        Verdict::of(max_watches as usize > folders && ours["degraded"] == false),
    );
    let rate = |v: &Value| {
        let seen = v["seen"].as_f64().unwrap_or(0.0);
        seen / (v["burst_ms"].as_f64().unwrap_or(f64::NAN) / 1e3)
    };
    // The writer sets the pace (its speed varies a lot between runs on a
    // shared disk), so each watcher is also shown by how far behind the
    // writer its last report came.
    let describe = |v: &Value, unit: &str| {
        let burst = v["burst_ms"].as_f64().unwrap_or(f64::NAN);
        let write = v["write_ms"].as_f64().unwrap_or(f64::NAN);
        format!(
            "{:.0} files/s, last {:.0} ms after the last write ({}/{BURST} seen, {} {unit}, {} overflows)",
            rate(v),
            burst - write,
            v["seen"],
            v["events"],
            v["rescans"],
        )
    };
    table.row(
        format!("4 burst rewriting {BURST} files: files reported/s"),
        describe(&ours, "changes"),
        describe(&direct, "raw events"),
        Some(rate(&ours) / rate(&direct)),
        "—",
        Verdict::Info,
    );

    open_documents(table, dir.path(), &root).await
}

/// Runs this binary as `--scale-child KIND ROOT` and reads its one JSON line.
async fn child(kind: &str, root: &Path) -> Result<Value> {
    let exe = std::env::current_exe()?;
    let output = tokio::process::Command::new(exe)
        .arg("--scale-child")
        .arg(kind)
        .arg(root)
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(CHILD_TIMEOUT, output)
        .await
        .with_context(|| format!("scale child {kind} took longer than {CHILD_TIMEOUT:?}"))??;
    ensure!(output.status.success(), "scale child {kind} failed");
    let text = String::from_utf8(output.stdout)?;
    let line = text.lines().last().context("no output")?;
    Ok(serde_json::from_str(line)?)
}

/// The child: watches `root` one way, measures, prints one JSON line.
pub fn child_main(kind: &str, root: &Path) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let rss_before = rss_kib();
        let start = Instant::now();
        let wanted: HashSet<PathBuf> = (0..BURST).map(|i| file(root, i)).collect();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<PathBuf>>();
        // Keeps the watcher alive; reports (paths seen, events counted, overflows).
        let (watched, degraded, _keep): (usize, bool, Box<dyn std::any::Any + Send>) = match kind {
            "acp" => {
                let (batch_tx, mut batch_rx) = tokio::sync::mpsc::unbounded_channel();
                let watch = RootWatch::start(root, WatchOptions::default(), batch_tx)?;
                let tx = tx.clone();
                tokio::spawn(async move {
                    while let Some(delivery) = batch_rx.recv().await {
                        // Dropping the delivery (and its `done`) marks it handled.
                        let paths = match delivery.batch {
                            WatchBatch::Changes(changes) => {
                                changes.into_iter().map(|(p, _)| p).collect()
                            }
                            // An overflow: an empty list marks it.
                            WatchBatch::Rescan => Vec::new(),
                        };
                        if tx.send(paths).is_err() {
                            return;
                        }
                    }
                });
                (
                    watch.watched_directories(),
                    watch.degraded(),
                    Box::new(watch),
                )
            }
            "notify" => {
                let tx = tx.clone();
                let mut watcher =
                    notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                        let paths = match event {
                            Ok(e) if !e.need_rescan() => e.paths,
                            _ => Vec::new(),
                        };
                        let _ = tx.send(paths);
                    })?;
                watcher.watch(root, notify::RecursiveMode::Recursive)?;
                (0, false, Box::new(watcher))
            }
            other => bail!("unknown scale child kind {other}"),
        };
        let start_ms = start.elapsed().as_secs_f64() * 1e3;
        let rss_after = rss_kib();

        let burst_root = root.to_path_buf();
        let burst_start = Instant::now();
        let writer = tokio::task::spawn_blocking(move || rewrite(&burst_root, 1));
        let mut seen: HashSet<PathBuf> = HashSet::new();
        let (mut events, mut rescans) = (0usize, 0usize);
        let mut last = burst_start;
        let deadline = tokio::time::Instant::now() + BURST_TIMEOUT;
        while seen.len() < BURST {
            // After an overflow some files are never reported: stop once quiet.
            let until = if rescans > 0 {
                deadline.min(tokio::time::Instant::now() + QUIET)
            } else {
                deadline
            };
            let Ok(Some(paths)) = tokio::time::timeout_at(until, rx.recv()).await else {
                break;
            };
            last = Instant::now();
            if paths.is_empty() {
                rescans += 1;
                continue;
            }
            events += 1;
            for path in paths {
                if wanted.contains(&path) {
                    seen.insert(path);
                }
            }
        }
        let write_ms = writer.await??.as_secs_f64() * 1e3;
        // For acp, `events` counts batches; the changes are what was seen.
        let events = if kind == "acp" { seen.len() } else { events };
        Ok::<Value, anyhow::Error>(json!({
            "start_ms": start_ms,
            "rss_before_kib": rss_before,
            "rss_after_kib": rss_after,
            "watched": watched,
            "degraded": degraded,
            "burst_ms": (last - burst_start).as_secs_f64() * 1e3,
            "write_ms": write_ms,
            "seen": seen.len(),
            "events": events,
            "rescans": rescans,
        }))
    })?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{result}")?;
    out.flush()?;
    // The watcher threads need not be joined.
    std::process::exit(0);
}

/// 100 documents open on a fake server over the tree; the burst; each must
/// get its didChange.
async fn open_documents(table: &Table, scratch: &Path, root: &Path) -> Result<()> {
    let mut fifo = FifoRecorder::create(scratch).await?;
    let start = Instant::now();
    let stack = GateStack::start(
        vec![fake_config("fake", "", &[])],
        root,
        RegistryOptions {
            recorder: Some(fifo.recorder.clone()),
            ..RegistryOptions::default()
        },
    )
    .await?;
    let outcome = async {
        let server_id = stack.server_id("fake", root)?;
        let session_ms = start.elapsed().as_secs_f64() * 1e3;
        let step = BURST / OPEN;
        let uris: Vec<String> = (0..OPEN).map(|k| file_uri(&file(root, k * step))).collect();
        for uri in &uris {
            let params = stack.request_params(
                &server_id,
                "textDocument/hover",
                &json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}),
                Some(START_TIMEOUT.as_millis() as u64),
            );
            stack.request_ok(params).await?;
        }
        // Every wait below ends by `deadline`; each turn consumes a message.
        let deadline = Instant::now() + BURST_TIMEOUT;
        let left = || deadline.saturating_duration_since(Instant::now());
        let mut opened = HashSet::new();
        while opened.len() < OPEN {
            let r = fifo
                .until(left(), |r| {
                    r.to_server() && r.method.as_deref() == Some("textDocument/didOpen")
                })
                .await
                .context("missing didOpen")?;
            opened.insert(r.uri.unwrap_or_default());
        }
        let burst_root = root.to_path_buf();
        let burst_start = Instant::now();
        let writer = tokio::task::spawn_blocking(move || rewrite(&burst_root, 2));
        let wanted: HashSet<&String> = uris.iter().collect();
        let mut changed: HashSet<String> = HashSet::new();
        let mut last = burst_start;
        let deadline = Instant::now() + BURST_TIMEOUT;
        let left = || deadline.saturating_duration_since(Instant::now());
        while changed.len() < OPEN {
            let Some(r) = fifo
                .until(left(), |r| {
                    r.to_server() && r.method.as_deref() == Some("textDocument/didChange")
                })
                .await
            else {
                break;
            };
            last = Instant::now();
            if let Some(uri) = r.uri.filter(|u| wanted.contains(u)) {
                changed.insert(uri);
            }
        }
        let writing = writer.await??;
        let last_ms = (last - burst_start).as_secs_f64() * 1e3;
        table.row(
            format!("4 {OPEN} open documents during the {BURST}-file burst: didChange each"),
            format!(
                "{}/{OPEN}; the last {last_ms:.0} ms into the burst (writing took {:.0} ms)",
                changed.len(),
                writing.as_secs_f64() * 1e3
            ),
            format!("— (session over the tree ready in {session_ms:.0} ms)"),
            None,
            format!("{OPEN}/{OPEN}"),
            Verdict::of(changed.len() == OPEN),
        );
        Ok(())
    }
    .await;
    stack.shutdown().await;
    outcome
}
