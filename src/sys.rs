//! Every system call of the proxy, behind safe wrappers, one file per kind
//! of OS: `unix` (Linux and macOS, `libc`) and `windows` (`windows_sys`).
//! Nothing else in this crate names `libc` or `windows_sys` (`tests/tidy.rs`
//! checks; the gate's path lookups are in `acp_lsp_core`'s own `sys`), so
//! each `unsafe` block and its `// SAFETY:` reasoning lives here, once.
//!
//! Beside them, what is written once for every OS: the local sockets of
//! the MCP bridge, the shared daemon and the conformance runner
//! ([`local_socket`]: Unix sockets, or named pipes only this user may
//! open) and where acp-lsp keeps its files ([`places`]).
//!
//! The mechanisms per OS (ARCHITECTURE.md, "Platforms"):
//!
//! | what | Linux | macOS | Windows |
//! |---|---|---|---|
//! | a child's tree | its process group | its process group | a Job Object |
//! | a killed proxy's children | parent-death signal + orphan guardian | orphan guardian | `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE` |
//! | the proxy's own end | SIGTERM, SIGINT, SIGHUP | the same | Ctrl-C, Ctrl-Break, console close |
//! | local sockets | Unix sockets in a 0700 directory | the same | named pipes with a DACL for this user |
//! | where an open file is | `/proc/self/fd` | `fcntl(F_GETPATH)` | `GetFinalPathNameByHandleW` |

use std::io;

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use self::unix::*;
#[cfg(unix)]
pub use self::unix::{kill, pid, Pid};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use self::windows::*;
#[cfg(windows)]
pub use self::windows::{kill, pid, Pid};

pub(crate) mod local_socket;
pub(crate) mod places;
pub mod signals;

/// The signals acp-lsp sends. On Windows there is no way to ask a process
/// without a console of ours to end: `Term` ends its tree as `Kill` does,
/// after the graceful steps (LSP `exit`, stdin closed) had their time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    Term,
    Kill,
}

/// Fills `bytes` from the OS's random source (`getrandom(2)`, `getentropy`,
/// `ProcessPrng`).
pub(crate) fn fill_random(bytes: &mut [u8]) -> io::Result<()> {
    getrandom::fill(bytes).map_err(|error| io::Error::other(error.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_bytes_differ() {
        let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
        fill_random(&mut a).unwrap();
        fill_random(&mut b).unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn this_process_exists_and_a_free_pid_does_not() {
        assert!(process_exists(pid(std::process::id()).unwrap()));
        // Past any pid the OS hands out: no such process.
        assert!(!process_exists(Pid::MAX - 1));
    }
}
