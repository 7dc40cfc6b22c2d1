//! Log lines captured as JSON by a subscriber of the test's own, for tests of
//! what an operator reads. Use it alone in a test binary: `tracing` caches
//! whether a call site is enabled, and another test's thread without a
//! subscriber racing the capture could have the cache say "off".

use serde_json::Value;
use std::sync::{Arc, Mutex};

/// Log lines written while it is alive, as JSON objects (one per event).
#[derive(Clone, Default)]
pub struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLog {
    /// Captures every event up to `level` on this thread while the guard lives.
    pub fn install(level: tracing::Level) -> (CapturedLog, tracing::subscriber::DefaultGuard) {
        let log = CapturedLog::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_max_level(level)
            .with_writer(move || writer.clone())
            .finish();
        (log, tracing::subscriber::set_default(subscriber))
    }

    /// The events so far.
    pub fn events(&self) -> Vec<Value> {
        let bytes = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
            })
            .collect()
    }
}
