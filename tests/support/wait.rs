//! Bounded waits for something the test can only observe by looking again
//! (a file a server writes, a process list): each look is a poll, the wait
//! has a limit and fails saying what it waited for.

use std::time::{Duration, Instant};

/// Pause between two looks.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Looks every [`POLL_INTERVAL`] until `look` yields something; panics
/// after `timeout` naming `what`.
pub async fn until<T>(what: &str, timeout: Duration, mut look: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = look() {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}
