//! `cargo bench --bench suite`: what acp-lsp costs, side by side with going
//! direct, every figure measured against its direct baseline in the same run
//! (shared machines are noisy; absolute numbers are not comparable across
//! runs, ratios mostly are). See BENCHMARKS.md.
//!
//! 1. Relay throughput and round-trip latency (process level, `support::relay`).
//! 2. `lsp/request` overhead against a plain LSP connection (`support::requests`).
//! 3. Freshness: disk write → `didChange`, `text_written` → next request (`support::freshness`).
//! 4. Scale: 100,000 files in 10,000 folders (`support::scale`).
//! 5. rust-analyzer on this repository (`support::real_servers`).
//! 6. Three agents on one project with and without `--shared` (`support::shared`).
//! 7. The MCP tools against mcpls 0.6.0 on the same rust-analyzer (`support::mcp`).
//! 8. Memory: the proxy's RSS against mcpls's, warm and after 1,000 tool calls (`support::mcp`).
//! 9. What `references` is worth against `rg -w` on fetched real projects (`support::value`).
//! 10. SCIP indexes: session → first correct references with an index and without, on serde_json; index RSS per million occurrences (`support::scip`).
//!
//! Environment: `BENCH_FIGURES=1,2,…` runs only those figures (default all;
//! 7 and 8 come from one run of `support::mcp`).
//! Prints progress to stderr and the table (Markdown) to stdout at the end.
//! The whole suite is bounded by [`SUITE_LIMIT`]: past it, a watchdog prints
//! the table so far and exits with an error.

#[cfg(unix)]
mod support;

#[cfg(unix)]
use std::sync::mpsc;
#[cfg(unix)]
use std::time::{Duration, Instant};
#[cfg(unix)]
use support::{Table, Verdict};

#[cfg(unix)]
/// Longest the whole suite may run.
const SUITE_LIMIT: Duration = Duration::from_secs(9 * 60 + 30);
#[cfg(unix)]
/// Figure 5 only starts with at least this much of the limit left.
const REAL_SERVER_BUDGET: Duration = Duration::from_secs(200);

#[cfg(unix)]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--scale-child") {
        let (Some(kind), Some(root)) = (args.get(at + 1), args.get(at + 2)) else {
            eprintln!("usage: suite --scale-child KIND ROOT");
            std::process::exit(2);
        };
        if let Err(e) = support::scale::child_main(kind, std::path::Path::new(root)) {
            eprintln!("scale child {kind}: {e:#}");
            std::process::exit(1);
        }
        return;
    }
    // `cargo bench -- --list` and similar harness probes: nothing to list.
    if args.iter().any(|a| a == "--list") {
        return;
    }

    let figures: Vec<u32> = std::env::var("BENCH_FIGURES")
        .ok()
        .map(|v| v.split(',').filter_map(|f| f.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let suite_start = Instant::now();
    let table = Table::default();

    // The watchdog: no figure may hang the suite.
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let watchdog_table = table.clone();
    std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = done_rx.recv_timeout(SUITE_LIMIT) {
            eprintln!("suite: over {SUITE_LIMIT:?}; the table so far:");
            print!("{}", watchdog_table.render());
            std::process::exit(3);
        }
    });

    eprintln!("{}", machine());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    for &figure in &figures {
        let start = Instant::now();
        eprintln!("figure {figure}…");
        let outcome = match figure {
            1 => support::relay::run(&table),
            2 => runtime.block_on(support::requests::run(&table)),
            3 => runtime.block_on(support::freshness::run(&table)),
            4 => runtime.block_on(support::scale::run(&table)),
            5 => {
                let left = SUITE_LIMIT.saturating_sub(suite_start.elapsed());
                if left < REAL_SERVER_BUDGET {
                    table.skipped(
                        "5 rust-analyzer",
                        format!(
                            "not started: {:.0} s of the suite's limit left",
                            left.as_secs_f64()
                        ),
                    );
                    Ok(())
                } else {
                    runtime.block_on(support::real_servers::run(&table))
                }
            }
            6 => support::shared::run(&table),
            // One run measures both; figure 8 alone runs it too.
            7 => runtime.block_on(support::mcp::run(&table, &figures)),
            8 if figures.contains(&7) => continue,
            8 => runtime.block_on(support::mcp::run(&table, &figures)),
            9 => runtime.block_on(support::value::run(&table)),
            10 => runtime.block_on(support::scip::run(&table)),
            other => {
                eprintln!("no figure {other}");
                Ok(())
            }
        };
        if let Err(e) = outcome {
            table.row(
                format!("{figure} (error)"),
                format!("{e:#}"),
                "—",
                None,
                "—",
                Verdict::Fail,
            );
        }
        eprintln!(
            "figure {figure} took {:.1} s",
            start.elapsed().as_secs_f64()
        );
    }
    runtime.shutdown_timeout(Duration::from_secs(5));
    let _ = done_tx.send(());
    println!();
    println!("{}", machine());
    println!(
        "suite took {:.0} s; ratio = acp-lsp / direct of the row's first number\n",
        suite_start.elapsed().as_secs_f64()
    );
    print!("{}", table.render());
    let failures = table.failures();
    if failures > 0 {
        println!("\n{failures} target(s) missed");
    }
}

#[cfg(unix)]
/// One line about the machine: cores, CPU model, memory.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU", str::trim)
        .to_string();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("machine: {cores} cores, {model}, {mem_gib:.1} GiB memory")
}

/// The suite measures process-level costs (pipes, process groups, /proc):
/// Unix only. On Windows `cargo bench` builds, and says so.
#[cfg(not(unix))]
fn main() {
    eprintln!("cargo bench --bench suite runs on Linux and macOS only (BENCHMARKS.md)");
}
