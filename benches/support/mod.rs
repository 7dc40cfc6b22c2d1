//! Shared parts of the benchmark suite: the result table, statistics, a fake
//! server behind a registry and a gate ("acp-lsp"), the same fake server over
//! a plain LSP connection ("direct"), and a recorder whose lines arrive through
//! a FIFO as they are written (no polling of a file).

pub mod acp;
#[path = "../../examples/support/cargo_build.rs"]
pub mod cargo_build;
pub mod freshness;
pub mod mcp;
pub mod real_servers;
#[path = "../../tests/support/registry.rs"]
pub mod registry;
pub mod relay;
pub mod requests;
pub mod scale;
pub mod scip;
pub mod shared;
pub mod value;

use std::ffi::CString;
use std::io::BufRead;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use acp_lsp::lsp::config::{Config, ServerConfig};
use acp_lsp::lsp::connection::{Connection, Reply, ServerMessages};
use acp_lsp::lsp::handshake::initialize_params;
use acp_lsp::lsp::registry::{Registry, RegistryOptions};
use acp_lsp::record::{Direction, Recorder};
use acp_lsp_core::gate::{Gate, GateConfig, GateMethod};
use acp_lsp_core::jsonrpc::{ErrorObject, Limits, RequestId};
use anyhow::{bail, Context, Result};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// The session every gate stack opens.
pub const SESSION: &str = "s";
/// Longest wait for a server's handshake or first answer.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait for one request in a measurement loop (a broken build must
/// not hang the suite; the watchdog in `suite.rs` bounds everything else).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait for a server to exit after `shutdown`/`exit`.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(5);

pub fn acp_lsp_bin() -> &'static str {
    env!("CARGO_BIN_EXE_acp-lsp")
}

/// The fake language server (the workspace's `acp-lsp-fake-server`
/// package), built once with the bench's profile: cargo gives a package's
/// benches only that package's own executables.
pub fn fake_bin() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let built = cargo_build::build_in_workspace(&["acp-lsp-fake-server"], &[], false)
            .expect("BUG: building acp-lsp-fake-server failed");
        built["acp-lsp-fake-server"].display().to_string()
    })
}

// ---------------------------------------------------------------- table

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    /// Reported, no target.
    Info,
    Skipped,
}

impl Verdict {
    pub fn of(pass: bool) -> Verdict {
        if pass {
            Verdict::Pass
        } else {
            Verdict::Fail
        }
    }

    fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Info => "info",
            Verdict::Skipped => "skipped",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Row {
    pub figure: String,
    pub ours: String,
    pub direct: String,
    pub ratio: String,
    pub target: String,
    pub verdict: Verdict,
}

/// The rows so far; shared with the watchdog, which prints what there is.
#[derive(Clone, Default)]
pub struct Table {
    rows: Arc<Mutex<Vec<Row>>>,
}

impl Table {
    pub fn push(&self, row: Row) {
        eprintln!(
            "  {} | {} | {} | {} | {} | {}",
            row.figure,
            row.ours,
            row.direct,
            row.ratio,
            row.target,
            row.verdict.label()
        );
        self.rows.lock().expect("table lock").push(row);
    }

    /// Adds a row; `ratio` is acp-lsp / direct of the row's main number.
    pub fn row(
        &self,
        figure: impl Into<String>,
        ours: impl Into<String>,
        direct: impl Into<String>,
        ratio: Option<f64>,
        target: impl Into<String>,
        verdict: Verdict,
    ) {
        self.push(Row {
            figure: figure.into(),
            ours: ours.into(),
            direct: direct.into(),
            ratio: ratio.map_or_else(|| "—".to_string(), |r| format!("{r:.2}×")),
            target: target.into(),
            verdict,
        });
    }

    pub fn skipped(&self, figure: impl Into<String>, why: impl Into<String>) {
        self.push(Row {
            figure: figure.into(),
            ours: why.into(),
            direct: "—".into(),
            ratio: "—".into(),
            target: "—".into(),
            verdict: Verdict::Skipped,
        });
    }

    /// The table as Markdown.
    pub fn render(&self) -> String {
        let rows = self.rows.lock().expect("table lock").clone();
        let header = [
            "figure",
            "acp-lsp",
            "direct baseline",
            "ratio",
            "target",
            "pass/fail",
        ];
        let cells: Vec<[String; 6]> = rows
            .iter()
            .map(|r| {
                [
                    r.figure.clone(),
                    r.ours.clone(),
                    r.direct.clone(),
                    r.ratio.clone(),
                    r.target.clone(),
                    r.verdict.label().to_string(),
                ]
            })
            .collect();
        let mut widths = header.map(|h| h.chars().count());
        for row in &cells {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut out = String::from("|");
            for (cell, w) in cells.iter().zip(widths) {
                let pad = w - cell.chars().count();
                out.push_str(&format!(" {cell}{} |", " ".repeat(pad)));
            }
            out.push('\n');
            out
        };
        let mut out = line(&header.map(String::from));
        out.push('|');
        for w in widths {
            out.push_str(&format!("{}|", "-".repeat(w + 2)));
        }
        out.push('\n');
        for row in &cells {
            out.push_str(&line(row));
        }
        out
    }

    pub fn failures(&self) -> usize {
        self.rows
            .lock()
            .expect("table lock")
            .iter()
            .filter(|r| r.verdict == Verdict::Fail)
            .count()
    }
}

// ---------------------------------------------------------------- statistics

/// Nearest-rank percentile (`p` in 0..=100) of `samples`.
pub fn percentile(samples: &[f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn median(samples: &[f64]) -> f64 {
    percentile(samples, 50.0)
}

pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// CPU time (user and system, every thread) this process has used so
/// far, in seconds; NaN where `getrusage` is not there.
pub fn cpu_seconds() -> f64 {
    #[cfg(unix)]
    {
        // SAFETY: `rusage` is plain integers, for which all zeroes is valid;
        // getrusage only writes it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to one `rusage`, for the call only.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
            return f64::NAN;
        }
        let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
    #[cfg(not(unix))]
    {
        f64::NAN
    }
}

/// Resident set size of this process, in KiB.
pub fn rss_kib() -> u64 {
    rss_kib_of(std::process::id())
}

/// Resident set size of process `pid`, in KiB (0 once it is gone).
pub fn rss_kib_of(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

// ---------------------------------------------------------------- files

/// Copies the tree `from` to `to` (a test project into a temp dir).
pub fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

pub fn file_uri(path: &Path) -> String {
    url::Url::from_file_path(path)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| format!("file://{}", path.display()))
}

/// Sets a file's modification time an hour back: acp-lsp re-reads a document
/// whose stamp is younger than two seconds on every request (same-second
/// writes are ambiguous), which a freshly generated fixture would otherwise be.
pub fn age(path: &Path) -> Result<()> {
    let file = std::fs::File::options().write(true).open(path)?;
    file.set_modified(SystemTime::now() - Duration::from_secs(3600))?;
    Ok(())
}

/// A workspace for the fake server: `fake.toml` (its root marker) and the
/// given documents, aged. Returns the canonical root.
pub fn fake_workspace(parent: &Path, name: &str, documents: &[(&str, &str)]) -> Result<PathBuf> {
    let root = parent.join(name);
    std::fs::create_dir_all(&root)?;
    let root = root.canonicalize()?;
    std::fs::write(root.join("fake.toml"), "")?;
    for (file, text) in documents {
        let path = root.join(file);
        std::fs::write(&path, text)?;
        age(&path)?;
    }
    Ok(root)
}

pub fn raw(value: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("a Value serializes")
}

// ---------------------------------------------------------------- fake server config

/// The fake server as acp-lsp would run it, in `mode` with `env` added.
pub fn fake_config(name: &str, mode: &str, env: &[(&str, &str)]) -> ServerConfig {
    let mut config = ServerConfig::new(name, fake_bin(), &[], &["fake"], &["fake"], &["fake.toml"]);
    config.env.insert("FAKE_LSP_MODE".into(), mode.into());
    for (k, v) in env {
        config.env.insert((*k).into(), (*v).into());
    }
    config.request_timeout_ms = CALL_TIMEOUT.as_millis() as u64;
    config
}

// ---------------------------------------------------------------- acp-lsp: registry + gate

/// A registry and a gate with one open session over `root`.
/// The gate's in-flight quota in the bench (per session and in all).
pub const BENCH_MAX_IN_FLIGHT: usize = 256;

pub struct GateStack {
    pub registry: Arc<Registry>,
    pub gate: Arc<Gate<Registry>>,
    next_id: AtomicU64,
    /// `lsp/servers` entries.
    pub servers: Vec<Value>,
}

impl GateStack {
    pub async fn start(
        servers: Vec<ServerConfig>,
        root: &Path,
        options: RegistryOptions,
    ) -> Result<GateStack> {
        let config = Config {
            servers,
            ..Config::builtin()
        };
        let registry = Registry::new(config, options);
        // Figure 2 keeps 64 requests of one session in flight: above the
        // default quota (32 per session), which would refuse half of them.
        let gate = Gate::new(
            Arc::clone(&registry),
            GateConfig {
                max_requests_per_session: BENCH_MAX_IN_FLIGHT,
                max_requests_total: BENCH_MAX_IN_FLIGHT,
                ..GateConfig::default()
            },
        );
        gate.open_session(SESSION, vec![root.to_path_buf()]);
        let mut stack = GateStack {
            registry,
            gate,
            next_id: AtomicU64::new(1),
            servers: Vec::new(),
        };
        let listed = stack
            .call(GateMethod::Servers, &json!({ "sessionId": SESSION }))
            .await?;
        stack.servers = listed["result"]["servers"]
            .as_array()
            .cloned()
            .with_context(|| format!("lsp/servers answered {listed}"))?;
        Ok(stack)
    }

    /// The id of the server `name` whose root is `root`.
    pub fn server_id(&self, name: &str, root: &Path) -> Result<String> {
        self.servers
            .iter()
            .find(|s| s["name"] == name && s["workspacePath"] == root.display().to_string())
            .and_then(|s| s["serverId"].as_str())
            .map(str::to_string)
            .with_context(|| format!("no server {name} at {}: {:?}", root.display(), self.servers))
    }

    pub fn next_id(&self) -> RequestId {
        RequestId::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// `lsp/request` params.
    pub fn request_params(
        &self,
        server_id: &str,
        method: &str,
        params: &Value,
        wait_until_ready_ms: Option<u64>,
    ) -> Box<RawValue> {
        let mut p = json!({
            "sessionId": SESSION,
            "serverId": server_id,
            "method": method,
            "params": params,
        });
        if let Some(ms) = wait_until_ready_ms {
            p["waitUntilReady"] = json!(ms);
        }
        raw(&p)
    }

    /// One gate call, its response decoded.
    pub async fn call(&self, method: GateMethod, params: &Value) -> Result<Value> {
        let bytes = self.call_raw(method, raw(params)).await?;
        Ok(serde_json::from_slice(&bytes)?)
    }

    /// One gate call, its response as encoded.
    pub async fn call_raw(&self, method: GateMethod, params: Box<RawValue>) -> Result<Vec<u8>> {
        tokio::time::timeout(
            CALL_TIMEOUT,
            self.gate.call(self.next_id(), method, Some(params)),
        )
        .await
        .context("a gate call took longer than CALL_TIMEOUT")
    }

    /// An `lsp/request` that must succeed; returns `lspResult`'s response.
    pub async fn request_ok(&self, params: Box<RawValue>) -> Result<Value> {
        let response: Value =
            serde_json::from_slice(&self.call_raw(GateMethod::Request, params).await?)?;
        if response["result"].get("lspResult").is_none() {
            bail!("lsp/request failed: {response}");
        }
        Ok(response)
    }

    pub async fn shutdown(&self) {
        self.gate.close_session(SESSION);
        let _ = tokio::time::timeout(Duration::from_secs(20), self.registry.shutdown()).await;
    }
}

/// Whether an encoded gate response is a success (cheap: no parse).
pub fn is_success(response: &[u8]) -> bool {
    memchr::memmem::find(response, b"\"lspResult\"").is_some()
}

// ---------------------------------------------------------------- direct: plain LSP connection

/// Answers nothing interesting: `null` to every server request.
pub struct NullHandler;

impl ServerMessages for NullHandler {
    fn on_request(&self, _: &str, _: Option<&RawValue>) -> Result<Box<RawValue>, ErrorObject> {
        Ok(raw(&Value::Null))
    }
    fn on_notification(&self, _: &str, _: Option<&RawValue>) {}
}

/// A language server spoken to directly: what an agent with its own LSP
/// client would do (same handshake params as acp-lsp).
pub struct Direct {
    pub connection: Arc<Connection>,
    child: tokio::process::Child,
}

impl Direct {
    pub async fn start(
        config: &ServerConfig,
        root: &Path,
        handler: Arc<dyn ServerMessages>,
    ) -> Result<Direct> {
        let program = acp_lsp::lsp::detect::find_on_path(&config.command)
            .with_context(|| format!("{} is not on PATH", config.command))?;
        let mut child = tokio::process::Command::new(program)
            .args(&config.args)
            .envs(&config.env)
            .current_dir(root)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", config.command))?;
        let stdin = child.stdin.take().context("piped stdin")?;
        let stdout = child.stdout.take().context("piped stdout")?;
        let connection =
            Connection::start("direct", stdout, stdin, Limits::default(), handler, None);
        let init = initialize_params(config, root);
        match tokio::time::timeout(START_TIMEOUT, connection.request("initialize", Some(&init)))
            .await
        {
            Ok(Reply::Result(_)) => {}
            Ok(other) => bail!("initialize failed: {other:?}"),
            Err(_) => bail!("initialize timed out"),
        }
        connection.notify("initialized", Some(&raw(&json!({}))));
        Ok(Direct { connection, child })
    }

    pub fn did_open(&self, path: &Path, language_id: &str) -> Result<()> {
        let text = std::fs::read_to_string(path)?;
        let params = json!({"textDocument": {
            "uri": file_uri(path), "languageId": language_id, "version": 1, "text": text}});
        self.connection
            .notify("textDocument/didOpen", Some(&raw(&params)));
        Ok(())
    }

    /// One request that must succeed.
    pub async fn request_ok(&self, method: &str, params: &RawValue) -> Result<Box<RawValue>> {
        match tokio::time::timeout(CALL_TIMEOUT, self.connection.request(method, Some(params)))
            .await
        {
            Ok(Reply::Result(result)) => Ok(result),
            Ok(other) => bail!("{method} failed: {other:?}"),
            Err(_) => bail!("{method} timed out"),
        }
    }

    pub async fn shutdown(mut self) {
        let _ = tokio::time::timeout(EXIT_TIMEOUT, self.connection.request("shutdown", None)).await;
        self.connection.notify("exit", None);
        self.connection.close_input();
        if tokio::time::timeout(EXIT_TIMEOUT, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

// ---------------------------------------------------------------- recorder through a FIFO

/// One recorded message, the parts the suite looks at.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Nanoseconds since the recorder was created.
    pub t_ns: i128,
    pub dir: String,
    pub method: Option<String>,
    pub uri: Option<String>,
}

impl Recorded {
    pub fn to_server(&self) -> bool {
        self.dir.starts_with("proxy→server")
    }

    pub fn is(&self, method: &str, uri: &str) -> bool {
        self.to_server()
            && self.method.as_deref() == Some(method)
            && self.uri.as_deref() == Some(uri)
    }
}

/// An `acp_lsp::record::Recorder` writing into a FIFO that a thread of ours
/// reads: each message arrives here as soon as the recorder flushes it.
pub struct FifoRecorder {
    pub recorder: Recorder,
    rx: mpsc::UnboundedReceiver<Recorded>,
    /// `base` on our clock is `base_t_ns` on the recorder's.
    base: Instant,
    base_t_ns: i128,
}

impl FifoRecorder {
    pub async fn create(dir: &Path) -> Result<FifoRecorder> {
        let path = dir.join("record.fifo");
        let c_path = CString::new(path.as_os_str().as_bytes())?;
        // SAFETY: a valid NUL-terminated path; mkfifo touches nothing else.
        if unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) } != 0 {
            bail!("mkfifo: {}", std::io::Error::last_os_error());
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let reader_path = path.clone();
        std::thread::Builder::new()
            .name("bench-record-reader".into())
            .spawn(move || read_records(&reader_path, tx))?;
        // Opening the FIFO for writing waits for the reader's open (and vice versa).
        let recorder = tokio::task::spawn_blocking(move || Recorder::create(&path)).await??;
        let base = Instant::now();
        recorder.message(
            &Direction::EditorToProxy,
            br#"{"method":"bench/calibrate"}"#,
        );
        let mut fifo = FifoRecorder {
            recorder,
            rx,
            base,
            base_t_ns: 0,
        };
        let calibration = fifo
            .until(Duration::from_secs(10), |r| {
                r.method.as_deref() == Some("bench/calibrate")
            })
            .await
            .context("the recorder's calibration line never arrived")?;
        fifo.base_t_ns = calibration.t_ns;
        Ok(fifo)
    }

    /// `instant` on the recorder's clock, in ns.
    pub fn at(&self, instant: Instant) -> i128 {
        if instant >= self.base {
            self.base_t_ns + (instant - self.base).as_nanos() as i128
        } else {
            self.base_t_ns - (self.base - instant).as_nanos() as i128
        }
    }

    /// The next recorded message that satisfies `wanted`, skipping others.
    pub async fn until(
        &mut self,
        timeout: Duration,
        wanted: impl Fn(&Recorded) -> bool,
    ) -> Option<Recorded> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(r)) if wanted(&r) => return Some(r),
                Ok(Some(_)) => continue,
                _ => return None,
            }
        }
    }

    /// Messages until one satisfies `last` (included), or the timeout.
    pub async fn collect_until(
        &mut self,
        timeout: Duration,
        last: impl Fn(&Recorded) -> bool,
    ) -> (Vec<Recorded>, bool) {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut seen = Vec::new();
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(r)) => {
                    let done = last(&r);
                    seen.push(r);
                    if done {
                        return (seen, true);
                    }
                }
                _ => return (seen, false),
            }
        }
    }

    /// Drops whatever has arrived.
    pub fn drain(&mut self) {
        while self.rx.try_recv().is_ok() {}
    }
}

fn read_records(path: &Path, tx: mpsc::UnboundedSender<Recorded>) {
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    // Ends when every Recorder handle is gone (the writer closes the FIFO).
    for line in std::io::BufReader::with_capacity(1 << 20, file).lines() {
        let Ok(line) = line else { return };
        let Ok(value) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let msg = &value["msg"];
        let record = Recorded {
            t_ns: value["t"].as_u64().unwrap_or(0) as i128,
            dir: value["dir"].as_str().unwrap_or_default().to_string(),
            method: msg["method"].as_str().map(str::to_string),
            uri: msg["params"]["textDocument"]["uri"]
                .as_str()
                .map(str::to_string),
        };
        if tx.send(record).is_err() {
            return;
        }
    }
}
