//! A server's stderr: drained continuously into a bounded ring, forwarded
//! to `tracing` line by line, truncated and rate-limited.

use super::*;

/// Bytes of stderr kept per server by default.
pub const DEFAULT_STDERR_CAPACITY: usize = 64 * 1024;
/// `tracing` target under which server stderr lines are logged (at `DEBUG`).
pub const STDERR_TARGET: &str = "acp_lsp::server_stderr";
/// Longest stderr line forwarded to `tracing`; the rest of the line is dropped.
pub const MAX_STDERR_LINE: usize = 1024;
/// Most stderr lines forwarded to `tracing` per server per second; the others
/// are counted and reported as suppressed.
pub const MAX_STDERR_LINES_PER_SEC: u32 = 50;
/// Read size of the stderr drain.
const STDERR_READ_CHUNK: usize = 16 * 1024;
/// A bounded byte ring keeping the last `capacity` bytes pushed into it.
#[derive(Debug, Clone)]
pub struct StderrRing {
    buf: Vec<u8>,
    /// Index of the oldest byte.
    start: usize,
    len: usize,
    total: u64,
}

impl StderrRing {
    pub fn new(capacity: usize) -> Self {
        StderrRing {
            buf: vec![0; capacity],
            start: 0,
            len: 0,
            total: 0,
        }
    }

    /// Appends `data`, overwriting the oldest bytes once full.
    pub fn push(&mut self, data: &[u8]) {
        self.total = self.total.saturating_add(data.len() as u64);
        let cap = self.buf.len();
        if cap == 0 || data.is_empty() {
            return;
        }
        if data.len() >= cap {
            self.buf.copy_from_slice(&data[data.len() - cap..]);
            self.start = 0;
            self.len = cap;
            return;
        }
        let end = (self.start + self.len) % cap;
        let first = data.len().min(cap - end);
        self.buf[end..end + first].copy_from_slice(&data[..first]);
        let rest = data.len() - first;
        self.buf[..rest].copy_from_slice(&data[first..]);
        let new_len = self.len + data.len();
        if new_len > cap {
            self.start = (self.start + new_len - cap) % cap;
            self.len = cap;
        } else {
            self.len = new_len;
        }
    }

    /// The kept bytes, oldest first.
    pub fn bytes(&self) -> Vec<u8> {
        let cap = self.buf.len();
        let mut out = Vec::with_capacity(self.len);
        if self.len == 0 {
            return out;
        }
        let first = self.len.min(cap - self.start);
        out.extend_from_slice(&self.buf[self.start..self.start + first]);
        out.extend_from_slice(&self.buf[..self.len - first]);
        out
    }

    /// The kept bytes as text (lossy UTF-8). When older bytes were dropped, a
    /// character cut in half at the start is skipped rather than shown as `�`.
    pub fn snapshot(&self) -> String {
        let bytes = self.bytes();
        let mut from = 0;
        if self.dropped_bytes() > 0 {
            while from < bytes.len().min(3) && bytes[from] & 0xC0 == 0x80 {
                from += 1;
            }
        }
        String::from_utf8_lossy(&bytes[from..]).into_owned()
    }

    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Bytes currently kept.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes ever pushed.
    pub(crate) fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Bytes pushed but no longer kept.
    pub(crate) fn dropped_bytes(&self) -> u64 {
        self.total - self.len as u64
    }
}

/// Reads the server's stderr until end-of-file into `ring`, forwarding lines to `tracing`.
pub(super) async fn drain_stderr(
    name: Arc<str>,
    mut stderr: ChildStderr,
    ring: Arc<Mutex<StderrRing>>,
) {
    let mut buf = vec![0u8; STDERR_READ_CHUNK];
    let mut lines = LineForwarder::new(Arc::clone(&name));
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => {
                let chunk = &buf[..n];
                ring.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(chunk);
                lines.feed(chunk);
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => {
                tracing::debug!(server = %name, %error, "reading language server stderr failed");
                break;
            }
        }
    }
    lines.finish();
}

/// Splits stderr into lines for `tracing`, truncating long lines and limiting the rate.
pub(super) struct LineForwarder {
    name: Arc<str>,
    line: Vec<u8>,
    /// Bytes of the current line dropped for exceeding [`MAX_STDERR_LINE`].
    cut: usize,
    window_start: Instant,
    emitted: u32,
    suppressed: u64,
}

impl LineForwarder {
    pub(super) fn new(name: Arc<str>) -> Self {
        LineForwarder {
            name,
            line: Vec::new(),
            cut: 0,
            window_start: Instant::now(),
            emitted: 0,
            suppressed: 0,
        }
    }

    pub(super) fn feed(&mut self, chunk: &[u8]) {
        if !tracing::enabled!(target: STDERR_TARGET, tracing::Level::DEBUG) {
            self.line.clear();
            self.cut = 0;
            return;
        }
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            let (content, complete) = match piece.strip_suffix(b"\n") {
                Some(content) => (content, true),
                None => (piece, false),
            };
            let room = MAX_STDERR_LINE.saturating_sub(self.line.len());
            let keep = content.len().min(room);
            self.line.extend_from_slice(&content[..keep]);
            self.cut += content.len() - keep;
            if complete {
                self.emit();
            }
        }
    }

    pub(super) fn finish(&mut self) {
        if !self.line.is_empty() || self.cut > 0 {
            self.emit();
        }
        self.report_suppressed();
    }

    fn emit(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.window_start) >= Duration::from_secs(1) {
            self.report_suppressed();
            self.window_start = now;
            self.emitted = 0;
        }
        if self.emitted < MAX_STDERR_LINES_PER_SEC {
            self.emitted += 1;
            let text = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
            let text = String::from_utf8_lossy(text);
            if self.cut > 0 {
                tracing::debug!(target: STDERR_TARGET, server = %self.name, truncated_bytes = self.cut, "{text}");
            } else {
                tracing::debug!(target: STDERR_TARGET, server = %self.name, "{text}");
            }
        } else {
            self.suppressed += 1;
        }
        self.line.clear();
        self.cut = 0;
    }

    fn report_suppressed(&mut self) {
        if self.suppressed > 0 {
            tracing::debug!(
                target: STDERR_TARGET,
                server = %self.name,
                suppressed = self.suppressed,
                "stderr lines suppressed (rate limit)"
            );
            self.suppressed = 0;
        }
    }
}
