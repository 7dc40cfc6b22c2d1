//! The shared per-user daemon: one set of language servers for every
//! `acp-lsp proxy --shared` of a user (issue 17, part 1).
//!
//! `acp-lsp daemon run` owns one [`Registry`](crate::lsp::registry::Registry)
//! and serves it on a Unix socket in a private 0700 directory
//! ([`paths::Paths`]); each shared proxy's gate talks to it through
//! [`client::RemoteHost`], an [`LspHost`](crate::gate::LspHost) that forwards
//! the trait's calls over newline-delimited JSON ([`wire`]). Servers are keyed
//! as in a proxy, by serverId = UUIDv5(name, root), so every proxy sees the
//! same ids. The gate in each proxy still does the checks, limits and
//! confinement of its own sessions.

pub mod client;
pub mod paths;
pub mod serve;
pub mod status;
pub mod wire;

use std::time::Duration;

/// How long a proxy waits for a daemon it started to accept connections.
pub const DAEMON_START_TIMEOUT: Duration = Duration::from_secs(10);
/// First pause between connection attempts while a daemon starts (doubled up
/// to [`CONNECT_RETRY_MAX_PAUSE`]).
pub const CONNECT_RETRY_PAUSE: Duration = Duration::from_millis(10);
/// Longest pause between connection attempts.
pub const CONNECT_RETRY_MAX_PAUSE: Duration = Duration::from_millis(200);
/// How long the first exchange (`hello`, `status`) may take.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the daemon checks whether it has neither clients nor servers.
pub const IDLE_CHECK_INTERVAL: Duration = Duration::from_millis(500);
/// A daemon nobody has connected to yet stays this long (the proxy that
/// started it is connecting).
pub const STARTUP_GRACE: Duration = DAEMON_START_TIMEOUT;
/// Most clients (proxies) one daemon serves at once; one more is refused.
pub const MAX_CLIENTS: usize = 64;
/// Most sessions one client may have open in the daemon.
pub const MAX_SESSIONS_PER_CLIENT: usize = 1024;
/// Most requests one client may have in flight in the daemon (above the
/// gate's own total, so the gate's quota is what an agent meets).
pub const MAX_IN_FLIGHT_PER_CLIENT: usize = 2 * crate::gate::DEFAULT_MAX_REQUESTS_TOTAL;
/// Longest line on the daemon socket, either way (the gate's params limit
/// plus room; a confirmed write carries a whole document).
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;
/// The daemon's log file is started anew when a daemon starts and finds it
/// this large.
pub const MAX_LOG_BYTES: u64 = 16 * 1024 * 1024;
