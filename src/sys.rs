//! Every call into `libc`, behind safe wrappers: signals to processes and
//! process groups, the parent-death signal of a child, descriptor flags,
//! the page size, the effective uid, kernel randomness. Nothing else in the
//! library names `libc` (`tests/tidy.rs` checks), so each `unsafe` block
//! and its `// SAFETY:` reasoning lives here, once.

use std::io;
use std::os::fd::RawFd;
use tokio::process::Command;

/// A process or process-group id.
pub type Pid = libc::pid_t;

/// The signals acp-lsp sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    Term,
    Kill,
}

impl Signal {
    fn raw(self) -> libc::c_int {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        }
    }
}

/// Flags for opening a file to read whatever it is: no blocking on a FIFO
/// or device, no controlling terminal, closed on exec.
pub(crate) const OPEN_READ_ANYTHING: i32 = libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;

/// A pid as a [`Pid`], if it fits.
pub fn pid(pid: u32) -> Option<Pid> {
    Pid::try_from(pid).ok()
}

/// Whether an error says the process (or group) does not exist.
pub(crate) fn is_no_such_process(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ESRCH)
}

/// Sends `signal` to every process of group `pgid`.
pub(crate) fn kill_group(pgid: Pid, signal: Signal) -> io::Result<()> {
    // SAFETY: killpg only sends a signal; it has no memory-safety preconditions.
    let rc = unsafe { libc::killpg(pgid, signal.raw()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends `signal` to process `pid`.
pub fn kill(pid: Pid, signal: Signal) -> io::Result<()> {
    // SAFETY: kill(2) only sends a signal; it has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid, signal.raw()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether a process with this pid exists (of any user: `EPERM` means it does).
pub(crate) fn process_exists(pid: Pid) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || !is_no_such_process(&io::Error::last_os_error())
}

/// Makes a descriptor non-blocking; `false` if it could not be.
pub(crate) fn set_nonblocking(fd: RawFd) -> bool {
    // SAFETY: fcntl with F_GETFL/F_SETFL changes only the descriptor's flags;
    // a descriptor that is not open gives -1 (EBADF), not undefined behaviour.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags != -1 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) != -1
    }
}

/// Whether a descriptor's open file description is non-blocking (`None`
/// if the descriptor is not open).
#[cfg(test)]
pub(crate) fn is_nonblocking(fd: RawFd) -> Option<bool> {
    // SAFETY: F_GETFL only reads the descriptor's flags; a descriptor that is
    // not open gives -1 (EBADF).
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    (flags != -1).then_some(flags & libc::O_NONBLOCK != 0)
}

/// The size of a memory page in bytes.
pub(crate) fn page_size() -> Option<u64> {
    // SAFETY: sysconf has no preconditions and touches no memory of ours.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|size| *size > 0)
}

/// This process's effective user id.
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Fills `bytes` from the kernel's random source (`getrandom(2)`).
pub(crate) fn fill_random(bytes: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < bytes.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `bytes`.
        let n = unsafe {
            libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0)
        };
        if n < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        filled += n as usize;
    }
    Ok(())
}

/// Arranges for the child `command` starts to get `signal` when the thread
/// that spawned it exits (Linux's `PR_SET_PDEATHSIG`; nothing elsewhere).
/// If this process is already gone by the time the child has set it, the
/// child does not run: the spawn fails with `ESRCH`.
pub(crate) fn set_parent_death_signal(command: &mut Command, signal: Signal) {
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id();
        let signal = signal.raw() as libc::c_ulong;
        // SAFETY: the closure runs in the forked child before exec, where only
        // async-signal-safe functions may be called. It calls prctl and getppid
        // (both async-signal-safe system calls), reads errno, and builds
        // io::Errors from raw OS codes, which does not allocate. It captures
        // only a u32 and a c_ulong.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, signal, 0, 0, 0) == -1 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died between fork and prctl, in which case the
                // death signal will never come: give up instead of running orphaned.
                if u32::try_from(libc::getppid()).ok() != Some(parent) {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (command, signal);
}

/// Makes the child `command` starts the leader of a new session (`setsid`),
/// so it outlives this process's terminal and process group: the shared
/// daemon is meant to outlive the proxy that started it.
pub(crate) fn start_new_session(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec; setsid is
    // async-signal-safe and touches only the child, and the error is built
    // from errno without allocating.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Takes an exclusive advisory lock (`flock`) on `file` without waiting;
/// `false` if another open file description holds it.
pub(crate) fn try_lock_exclusive(file: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor `file` owns for the duration of the call.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_exists_and_a_free_pid_does_not() {
        assert!(process_exists(pid(std::process::id()).unwrap()));
        // Past pid_max (at most 2^22 on Linux): no such process.
        assert!(!process_exists(Pid::MAX));
        assert!(is_no_such_process(
            &kill(Pid::MAX, Signal::Term).unwrap_err()
        ));
    }

    #[test]
    fn random_bytes_differ() {
        let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
        fill_random(&mut a).unwrap();
        fill_random(&mut b).unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn a_page_is_a_power_of_two() {
        assert!(page_size().is_some_and(u64::is_power_of_two));
    }
}
