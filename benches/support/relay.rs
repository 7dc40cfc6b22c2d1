//! Figure 1: the relay, process level. `acp-lsp proxy -- AGENT` against the
//! plain pipe an editor would otherwise have to the agent.
//!
//! - Throughput: the agent is `cat FILE` streaming `session/update`
//!   notification lines; the baseline is `sh -c 'cat FILE | cat'` (one extra
//!   process copying a pipe, as the proxy does). The rate is the stream's
//!   own, from the first bytes out to the end of output (best of
//!   alternating runs); the time from spawn to the first bytes out is a row
//!   of its own (start-up: the proxy starts its runtime, MCP socket and
//!   agent before it relays anything).
//! - Round trips: the agent is the fake server's `echo_agent` mode. Editor →
//!   agent → editor (the suite sends a request, the agent answers) and agent →
//!   editor → agent (`bench/pingBack`: the agent sends requests one at a time;
//!   the time from our answer to its next request is one round trip). The
//!   ratio and target are against the same agent behind `cat | agent | cat`
//!   (what any relay process costs here, issue 16); the same agent on plain
//!   pipes is shown too.

use super::{acp_lsp_bin, fake_bin, median, micros, percentile, Table, Verdict};
use anyhow::{bail, ensure, Context, Result};
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Lines of the small-message stream (~200 B each: 100 MB).
const SMALL_LINES: usize = 500_000;
const SMALL_LINE: usize = 200;
/// Lines of the medium-message stream (1 KiB each: 100 MiB).
const MEDIUM_LINES: usize = 102_400;
const MEDIUM_LINE: usize = 1024;
/// Lines of the large-message stream (64 KiB each: 200 MiB).
const LARGE_LINES: usize = 3_200;
const LARGE_LINE: usize = 64 * 1024;
/// Alternating runs per stream and path; the best of each counts (a
/// throughput is a capacity: noise from other jobs only ever lowers it).
const STREAM_RUNS: usize = 5;
/// Round trips per block; blocks alternate between the peers.
const RTT_BLOCK: usize = 100;
const RTT_BLOCKS: usize = 30;
/// Warm-up round trips per peer (not measured).
const RTT_WARMUP: usize = 200;
/// Most lines read while waiting for one answer (the agent sends nothing else).
const MAX_STRAY_LINES: usize = 16;

/// Targets (issue 16): the proxy's throughput at least this fraction of the
/// plain pipe's, for 200 B lines and for longer ones.
const SMALL_THROUGHPUT_TARGET: f64 = 0.8;
const THROUGHPUT_TARGET: f64 = 0.9;
/// Target: the proxy's median round trip at most this multiple of the same
/// agent behind a `cat` relay (any relay process adds the pipe hops and
/// wakeups; this is what acp-lsp may add on top).
const RTT_TARGET_VS_CAT: f64 = 1.2;

pub fn run(table: &Table) -> Result<()> {
    let dir = tempfile::tempdir()?;
    // An empty config home: the user's config file must not matter.
    let config_home = dir.path().join("config");
    std::fs::create_dir_all(&config_home)?;
    // Round trips first, before the throughput runs load the machine.
    round_trips(table, &config_home)?;
    throughput(
        table,
        dir.path(),
        &config_home,
        "small (200 B)",
        SMALL_LINE,
        SMALL_LINES,
        SMALL_THROUGHPUT_TARGET,
    )?
    .row(table);
    throughput(
        table,
        dir.path(),
        &config_home,
        "1 KiB",
        MEDIUM_LINE,
        MEDIUM_LINES,
        THROUGHPUT_TARGET,
    )?;
    throughput(
        table,
        dir.path(),
        &config_home,
        "64 KiB",
        LARGE_LINE,
        LARGE_LINES,
        THROUGHPUT_TARGET,
    )?;
    Ok(())
}

/// One `session/update` line of exactly `len` bytes, newline included.
fn session_update_line(len: usize) -> Vec<u8> {
    let head: &[u8] = br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":""#;
    let tail: &[u8] = b"\"}}}}\n";
    let mut line = Vec::with_capacity(len);
    line.extend_from_slice(head);
    line.resize(len - tail.len(), b'x');
    line.extend_from_slice(tail);
    line
}

fn proxy_command(config_home: &Path, agent: &[&str]) -> Command {
    let mut command = Command::new(acp_lsp_bin());
    command
        .arg("proxy")
        .arg("--")
        .args(agent)
        .env("XDG_CONFIG_HOME", config_home)
        .stderr(Stdio::inherit());
    command
}

struct Streamed {
    /// From spawn to the first bytes out (start-up, both processes).
    start_up: Duration,
    /// From the first bytes out to the end of output, and the bytes that
    /// came after the first read (the stream's own rate, start-up apart).
    streaming: Duration,
    streamed_bytes: u64,
    bytes: u64,
    lines: u64,
}

/// Runs `command`, reads its whole stdout; its stdin stays open until then.
fn stream(command: &mut Command) -> Result<Streamed> {
    let start = Instant::now();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut out = child.stdout.take().context("piped stdout")?;
    let mut buf = vec![0u8; 1 << 20];
    let (mut bytes, mut lines) = (0u64, 0u64);
    let mut first: Option<(Instant, u64)> = None;
    loop {
        let n = out.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if first.is_none() {
            first = Some((Instant::now(), n as u64));
        }
        bytes += n as u64;
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
    }
    let end = Instant::now();
    let (first_at, first_bytes) = first.context("no output")?;
    drop(child.stdin.take());
    let status = child.wait()?;
    ensure!(
        status.success() || status.code() == Some(0),
        "exited with {status}"
    );
    Ok(Streamed {
        start_up: first_at - start,
        streaming: end - first_at,
        streamed_bytes: bytes - first_bytes,
        bytes,
        lines,
    })
}

fn throughput(
    table: &Table,
    dir: &Path,
    config_home: &Path,
    label: &str,
    line_len: usize,
    count: usize,
    target: f64,
) -> Result<StartUp> {
    let file = dir.join(format!("stream-{line_len}.ndjson"));
    {
        let line = session_update_line(line_len);
        let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&file)?);
        for _ in 0..count {
            out.write_all(&line)?;
        }
        out.flush()?;
    }
    let total = (line_len * count) as u64;
    let file_arg = file.to_str().context("utf-8 temp path")?;
    let pipe_script = format!("cat '{file_arg}' | cat");
    let (mut ours, mut direct) = (Vec::new(), Vec::new());
    for _ in 0..STREAM_RUNS {
        for (via_proxy, samples) in [(true, &mut ours), (false, &mut direct)] {
            let streamed = if via_proxy {
                stream(&mut proxy_command(config_home, &["cat", file_arg]))?
            } else {
                stream(Command::new("sh").args(["-c", &pipe_script]))?
            };
            ensure!(
                streamed.bytes == total && streamed.lines == count as u64,
                "{label}: got {} bytes / {} lines of {total} / {count} (via proxy: {via_proxy})",
                streamed.bytes,
                streamed.lines
            );
            samples.push(streamed);
        }
    }
    // Best of the runs (a capacity: noise only ever lowers it); the rate is
    // the stream's own, from the first bytes out to the last, so the
    // proxy's start-up (its own row) does not count against it.
    let best_rate = |v: &[Streamed]| {
        v.iter()
            .map(|s| s.streamed_bytes as f64 / s.streaming.as_secs_f64())
            .fold(0.0, f64::max)
    };
    let (r_ours, r_direct) = (best_rate(&ours), best_rate(&direct));
    let ratio = r_ours / r_direct;
    let line_rate = |r: f64| r / line_len as f64;
    let describe = |r: f64| format!("{:.0} MB/s, {:.0} msg/s", r / 1e6, line_rate(r));
    table.row(
        format!("1 relay throughput, {label} session/update lines"),
        describe(r_ours),
        format!("{} (cat FILE piped to cat)", describe(r_direct)),
        Some(ratio),
        format!("≥ {target}× pipe"),
        Verdict::of(ratio >= target),
    );
    let best_start = |v: &[Streamed]| v.iter().map(|s| s.start_up).min().unwrap_or_default();
    let start_up = StartUp {
        ours: best_start(&ours),
        direct: best_start(&direct),
    };
    std::fs::remove_file(&file)?;
    Ok(start_up)
}

/// The best time from spawn to the first bytes out, of the proxy and of
/// `cat FILE | cat`.
struct StartUp {
    ours: Duration,
    direct: Duration,
}

impl StartUp {
    fn row(&self, table: &Table) {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        table.row(
            "1 relay start-up: spawn → first line out, best",
            format!("{:.1} ms", ms(self.ours)),
            format!("{:.1} ms (cat FILE piped to cat)", ms(self.direct)),
            Some(ms(self.ours) / ms(self.direct).max(1e-6)),
            "—",
            Verdict::Info,
        );
    }
}

// ---------------------------------------------------------------- round trips

/// Where the echo agent runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    Proxy,
    /// Plain pipes, no relay: the direct baseline.
    Direct,
    /// `cat | agent | cat`: a relay that does nothing but copy, with the same
    /// number of pipe hops as the proxy (to tell the cost of any extra hop on
    /// this machine from acp-lsp's own).
    Cat,
}

/// An echo agent, behind the proxy, a plain `cat` relay, or on plain pipes.
struct Peer {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    line: String,
    next_id: u64,
}

impl Peer {
    fn start(via: Via, config_home: &Path) -> Result<Peer> {
        let mut command = match via {
            Via::Proxy => proxy_command(config_home, &[fake_bin()]),
            Via::Direct => Command::new(fake_bin()),
            Via::Cat => {
                let mut c = Command::new("sh");
                c.args(["-c", "cat | \"$0\" | cat", fake_bin()]);
                c
            }
        };
        command.stderr(Stdio::inherit());
        let mut child = command
            .env("FAKE_LSP_MODE", "echo_agent")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let input = child.stdin.take().context("piped stdin")?;
        let output = BufReader::new(child.stdout.take().context("piped stdout")?);
        Ok(Peer {
            child,
            input,
            output,
            line: String::new(),
            next_id: 1,
        })
    }

    fn read_line(&mut self) -> Result<&str> {
        self.line.clear();
        if self.output.read_line(&mut self.line)? == 0 {
            bail!("the agent's output ended");
        }
        Ok(&self.line)
    }

    /// Editor → agent → editor, `n` times; µs each.
    fn editor_round_trips(&mut self, n: usize) -> Result<Vec<f64>> {
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let id = self.next_id;
            self.next_id += 1;
            let request = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"bench/echo\",\"params\":{{}}}}\n"
            );
            let expected = format!("\"id\":{id},");
            let start = Instant::now();
            self.input.write_all(request.as_bytes())?;
            let mut answered = false;
            for _ in 0..MAX_STRAY_LINES {
                if self.read_line()?.contains(&expected) {
                    answered = true;
                    break;
                }
            }
            samples.push(micros(start.elapsed()));
            ensure!(answered, "no answer to request {id}");
        }
        Ok(samples)
    }

    /// Agent → editor → agent, `n` times; µs each (from our answer to the
    /// agent's next message).
    fn agent_round_trips(&mut self, n: usize) -> Result<Vec<f64>> {
        let id = self.next_id;
        self.next_id += 1;
        let request = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"bench/pingBack\",\"params\":{{\"count\":{n}}}}}\n"
        );
        let done = format!("\"id\":{id},");
        self.input.write_all(request.as_bytes())?;
        let mut samples = Vec::with_capacity(n);
        let mut answered_at: Option<Instant> = None;
        for _ in 0..n + MAX_STRAY_LINES {
            let line = self.read_line()?.to_string();
            let now = Instant::now();
            if let Some(at) = answered_at.take() {
                samples.push(micros(now - at));
            }
            if line.contains(&done) {
                ensure!(samples.len() == n, "{} of {n} pings", samples.len());
                return Ok(samples);
            }
            let value: serde_json::Value = serde_json::from_str(&line)?;
            ensure!(value["method"] == "bench/ping", "unexpected line {line}");
            let answer = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{}}}}\n",
                value["id"]
            );
            // Before the write: the agent may answer before `write` returns.
            answered_at = Some(Instant::now());
            self.input.write_all(answer.as_bytes())?;
        }
        bail!("bench/pingBack did not finish")
    }

    fn stop(mut self) -> Result<()> {
        drop(self.input);
        let status = self.child.wait()?;
        ensure!(status.success(), "echo agent exited with {status}");
        Ok(())
    }
}

fn round_trips(table: &Table, config_home: &Path) -> Result<()> {
    let mut peers = [
        Peer::start(Via::Proxy, config_home)?,
        Peer::start(Via::Direct, config_home)?,
        Peer::start(Via::Cat, config_home)?,
    ];
    for peer in &mut peers {
        peer.editor_round_trips(RTT_WARMUP)?;
        peer.agent_round_trips(RTT_WARMUP)?;
    }
    // [peer][editor-initiated, agent-initiated]
    let mut samples: [[Vec<f64>; 2]; 3] = Default::default();
    for _ in 0..RTT_BLOCKS {
        for (peer, samples) in peers.iter_mut().zip(samples.iter_mut()) {
            samples[0].extend(peer.editor_round_trips(RTT_BLOCK)?);
            samples[1].extend(peer.agent_round_trips(RTT_BLOCK)?);
        }
    }
    for peer in peers {
        peer.stop()?;
    }
    for (k, label) in ["editor→agent→editor", "agent→editor→agent"]
        .into_iter()
        .enumerate()
    {
        let [ours, base, cat] = [&samples[0][k], &samples[1][k], &samples[2][k]];
        let (m_ours, m_base, m_cat) = (median(ours), median(base), median(cat));
        let added = m_ours - m_base;
        table.row(
            format!("1 round trip {label}, median (p99)"),
            format!(
                "{m_ours:.1} µs ({:.0}); {added:+.1} µs",
                percentile(ours, 99.0)
            ),
            format!(
                "{m_base:.1} µs ({:.0}) plain pipes; {m_cat:.1} µs ({:.0}) via cat relay",
                percentile(base, 99.0),
                percentile(cat, 99.0)
            ),
            Some(m_ours / m_cat),
            format!("≤ {RTT_TARGET_VS_CAT}× cat relay"),
            Verdict::of(m_ours <= RTT_TARGET_VS_CAT * m_cat),
        );
    }
    Ok(())
}
