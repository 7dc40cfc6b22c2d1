//! Which servers may keep running: each server's use (a session root's own
//! server or a nested root's, its last use, its requests in flight), the
//! server to stop when `max_running_servers` is reached (the least recently
//! used one that serves nothing right now: a nested one, or a session
//! root's own that nothing used for the idle time), and how long a nested
//! server has left before its idle stop. Pure bookkeeping: the registry
//! starts and stops.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Least pause between two idle checks of a server serving a request (a
/// tiny `nested_idle_stop_ms` must not make the timer spin).
pub const MIN_IDLE_CHECK: Duration = Duration::from_millis(100);

/// One server's use.
#[derive(Debug, Clone, Copy)]
struct Usage {
    /// Its root is a session root (for some session): never stopped for
    /// idleness or to make room.
    top_level: bool,
    last_used: Instant,
    /// Order of last uses (a logical clock: two uses in the same clock
    /// tick still have an order); 0 until the first.
    order: u64,
    in_flight: usize,
}

/// Use of every server the registry knows, by server id.
#[derive(Debug, Default)]
pub struct Running {
    usage: HashMap<String, Usage>,
    clock: u64,
}

impl Running {
    /// Notes a server a session attached; `top_level` once makes it so for good.
    pub fn attached(&mut self, id: &str, top_level: bool) {
        // Never used yet: before every server that was (order 0).
        let usage = self.usage.entry(id.to_string()).or_insert(Usage {
            top_level,
            last_used: Instant::now(),
            order: 0,
            in_flight: 0,
        });
        usage.top_level |= top_level;
    }

    /// Forgets a server (removed from the registry).
    pub fn forget(&mut self, id: &str) {
        self.usage.remove(id);
    }

    pub fn is_top_level(&self, id: &str) -> bool {
        self.usage.get(id).is_some_and(|u| u.top_level)
    }

    /// A use of the server now (a start, a request naming it).
    pub fn touch(&mut self, id: &str) {
        self.clock += 1;
        if let Some(usage) = self.usage.get_mut(id) {
            usage.last_used = Instant::now();
            usage.order = self.clock;
        }
    }

    /// A request to the server begins.
    pub fn begin(&mut self, id: &str) {
        self.touch(id);
        if let Some(usage) = self.usage.get_mut(id) {
            usage.in_flight += 1;
        }
    }

    /// A request to the server ended.
    pub fn end(&mut self, id: &str) {
        self.touch(id);
        if let Some(usage) = self.usage.get_mut(id) {
            usage.in_flight = usage.in_flight.saturating_sub(1);
        }
    }

    /// Among `live` (running server ids), the least recently used one that
    /// may stop to make room, other than `except`: none serving a request;
    /// a nested server at once; a session root's own once no request named
    /// it for `idle` (`None`: never), so that more session roots than the
    /// cap take turns instead of the later ones never starting.
    pub fn victim<'a>(
        &self,
        live: impl IntoIterator<Item = &'a str>,
        except: &str,
        idle: Option<Duration>,
    ) -> Option<String> {
        self.least_recent(live, except, |u| {
            !u.top_level || idle.is_some_and(|idle| u.last_used.elapsed() >= idle)
        })
    }

    /// [`Running::victim`] for a start no request asked for (an agent's
    /// listing): only a server unused for `idle`, whatever its kind, so that
    /// servers started for one listing never stop each other.
    pub fn idle_victim<'a>(
        &self,
        live: impl IntoIterator<Item = &'a str>,
        except: &str,
        idle: Option<Duration>,
    ) -> Option<String> {
        let idle = idle?;
        self.least_recent(live, except, |u| u.last_used.elapsed() >= idle)
    }

    fn least_recent<'a>(
        &self,
        live: impl IntoIterator<Item = &'a str>,
        except: &str,
        may_stop: impl Fn(&Usage) -> bool,
    ) -> Option<String> {
        live.into_iter()
            .filter(|id| *id != except)
            .filter_map(|id| self.usage.get(id).map(|u| (id, u)))
            .filter(|(_, u)| u.in_flight == 0 && may_stop(u))
            .min_by_key(|(_, u)| u.order)
            .map(|(id, _)| id.to_string())
    }

    /// `ids` with the most recently used first (never used: as given).
    pub fn most_recent_first(&self, ids: &[String]) -> Vec<String> {
        let mut ordered: Vec<(u64, usize, &String)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (self.usage.get(id).map_or(0, |u| u.order), i, id))
            .collect();
        ordered.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        ordered.into_iter().map(|(_, _, id)| id.clone()).collect()
    }

    /// How long until a nested server has idled for `idle`: `None` when it
    /// has (no request in flight and none for `idle`), so it may stop now.
    /// A server serving a request has `idle` left (at least [`MIN_IDLE_CHECK`]).
    pub fn idle_left(&self, id: &str, idle: Duration) -> Option<Duration> {
        let usage = self.usage.get(id)?;
        if usage.in_flight > 0 {
            return Some(idle.max(MIN_IDLE_CHECK));
        }
        idle.checked_sub(usage.last_used.elapsed())
            .filter(|left| !left.is_zero())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_victim_is_the_least_recently_used_idle_nested_server() {
        let mut running = Running::default();
        running.attached("top", true);
        running.attached("a", false);
        running.attached("b", false);
        running.attached("c", false);
        // Used in the order a, b, c: a is the least recently used.
        running.touch("a");
        running.touch("b");
        running.touch("c");
        let live = ["top", "a", "b", "c"];
        let idle = Some(Duration::from_secs(3600));
        assert_eq!(running.victim(live, "x", idle).as_deref(), Some("a"));
        // Never the one being started, never one serving a request.
        assert_eq!(running.victim(live, "a", idle).as_deref(), Some("b"));
        running.begin("a");
        assert_eq!(running.victim(live, "x", idle).as_deref(), Some("b"));
        running.end("a");
        // a was used last now.
        assert_eq!(running.victim(live, "x", idle).as_deref(), Some("b"));
        // A session root's server used within the idle time is no victim,
        // nor one not live.
        assert_eq!(running.victim(["top", "c"], "c", idle), None);
        // Top-level once, top-level for good.
        running.attached("c", true);
        assert!(running.is_top_level("c"));
        running.attached("c", false);
        assert!(running.is_top_level("c"));
    }

    #[test]
    fn a_session_roots_server_idle_for_the_idle_time_may_make_room() {
        let mut running = Running::default();
        running.attached("top1", true);
        running.attached("top2", true);
        running.touch("top1");
        running.touch("top2");
        let live = ["top1", "top2"];
        // Used just now: neither may stop; without an idle time, never.
        assert_eq!(
            running.victim(live, "new", Some(Duration::from_secs(60))),
            None
        );
        assert_eq!(running.victim(live, "new", None), None);
        // Idle for the idle time (zero here): the least recently used stops.
        assert_eq!(
            running.victim(live, "new", Some(Duration::ZERO)).as_deref(),
            Some("top1")
        );
        // Not while it serves a request.
        running.begin("top1");
        assert_eq!(
            running.victim(live, "new", Some(Duration::ZERO)).as_deref(),
            Some("top2")
        );
    }

    #[test]
    fn a_listing_stops_only_servers_idle_for_the_idle_time() {
        let mut running = Running::default();
        running.attached("a", false);
        running.attached("b", false);
        running.touch("a");
        // A nested server just used is a victim for a request, not for a listing.
        assert_eq!(
            running
                .victim(["a"], "b", Some(Duration::from_secs(60)))
                .as_deref(),
            Some("a")
        );
        assert_eq!(
            running.idle_victim(["a"], "b", Some(Duration::from_secs(60))),
            None
        );
        assert_eq!(running.idle_victim(["a"], "b", None), None);
        assert_eq!(
            running
                .idle_victim(["a"], "b", Some(Duration::ZERO))
                .as_deref(),
            Some("a")
        );
        // Most recently used first; never used keeps the given order.
        running.attached("c", false);
        running.attached("d", false);
        let ids: Vec<String> = ["c", "a", "d", "b"].iter().map(|s| s.to_string()).collect();
        running.touch("b");
        assert_eq!(running.most_recent_first(&ids), ["b", "a", "c", "d"]);
    }

    #[test]
    fn idle_left_counts_from_the_last_use_and_pauses_while_serving() {
        let mut running = Running::default();
        running.attached("n", false);
        assert!(running.idle_left("n", Duration::from_secs(60)).is_some());
        assert_eq!(running.idle_left("n", Duration::ZERO), None);
        running.begin("n");
        assert_eq!(running.idle_left("n", Duration::ZERO), Some(MIN_IDLE_CHECK));
        running.end("n");
        assert_eq!(running.idle_left("n", Duration::ZERO), None);
        assert_eq!(running.idle_left("unknown", Duration::ZERO), None);
    }
}
