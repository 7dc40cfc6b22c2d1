//! Rate limits for warnings a language server can trigger at will (garbage on
//! stdout, floods of progress or registrations): a few lines per window, then a
//! count, so a hostile or broken server cannot fill the operator's log.

use std::time::{Duration, Instant};

/// Length of one rate-limit window.
pub const WARN_WINDOW: Duration = Duration::from_secs(60);
/// Warnings of one kind logged per server per [`WARN_WINDOW`]; the rest are
/// counted and reported in one line when the next window opens.
pub const MAX_WARNINGS_PER_WINDOW: u32 = 5;

/// One kind of warning's budget.
#[derive(Debug)]
pub struct WarnBudget {
    window_start: Option<Instant>,
    logged: u32,
    suppressed: u64,
    suppressed_total: u64,
}

impl Default for WarnBudget {
    fn default() -> Self {
        WarnBudget::new()
    }
}

/// What to do with one warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Log it. `suppressed_before` warnings of the last window were not
    /// logged: say so in the same line.
    Log { suppressed_before: u64 },
    /// Do not log it (it was counted).
    Suppress,
}

impl WarnBudget {
    pub const fn new() -> Self {
        WarnBudget {
            window_start: None,
            logged: 0,
            suppressed: 0,
            suppressed_total: 0,
        }
    }

    /// Decides about one warning happening now.
    pub fn check(&mut self) -> Verdict {
        self.check_at(Instant::now())
    }

    /// [`WarnBudget::check`] at a given instant (for tests).
    pub fn check_at(&mut self, now: Instant) -> Verdict {
        let mut suppressed_before = 0;
        let expired = self
            .window_start
            .is_none_or(|start| now.duration_since(start) >= WARN_WINDOW);
        if expired {
            self.window_start = Some(now);
            self.logged = 0;
            suppressed_before = std::mem::take(&mut self.suppressed);
        }
        if self.logged < MAX_WARNINGS_PER_WINDOW {
            self.logged += 1;
            Verdict::Log { suppressed_before }
        } else {
            self.suppressed += 1;
            self.suppressed_total += 1;
            Verdict::Suppress
        }
    }

    /// Warnings not logged so far, over the budget's whole life.
    pub fn suppressed_total(&self) -> u64 {
        self.suppressed_total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_a_few_per_window_then_counts_and_reports_the_count() {
        let mut budget = WarnBudget::new();
        let start = Instant::now();
        let verdicts: Vec<Verdict> = (0..1000).map(|_| budget.check_at(start)).collect();
        let logged = verdicts
            .iter()
            .filter(|v| matches!(v, Verdict::Log { .. }))
            .count();
        assert_eq!(logged, MAX_WARNINGS_PER_WINDOW as usize);
        assert_eq!(
            budget.suppressed_total(),
            1000 - u64::from(MAX_WARNINGS_PER_WINDOW)
        );
        assert_eq!(
            budget.check_at(start + WARN_WINDOW),
            Verdict::Log {
                suppressed_before: 1000 - u64::from(MAX_WARNINGS_PER_WINDOW)
            }
        );
        assert_eq!(
            budget.check_at(start + WARN_WINDOW),
            Verdict::Log {
                suppressed_before: 0
            }
        );
    }
}
