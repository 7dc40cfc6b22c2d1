//! The `libc` calls of Linux and macOS, behind safe wrappers: signals to
//! processes and process groups, the parent-death signal of a child (Linux),
//! descriptor flags, the page size, the effective uid, descriptors passed
//! over a Unix socket, where an open descriptor really is, a process's
//! resident memory.

use super::Signal;
use std::io;
use std::os::fd::RawFd;
use tokio::process::Command;

/// A process or process-group id.
pub type Pid = libc::pid_t;

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
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn is_nonblocking(fd: RawFd) -> Option<bool> {
    // SAFETY: F_GETFL only reads the descriptor's flags; a descriptor that is
    // not open gives -1 (EBADF).
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    (flags != -1).then_some(flags & libc::O_NONBLOCK != 0)
}

/// The size of a memory page in bytes.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
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

/// A name for this user in file names: the effective uid.
pub(crate) fn user_tag() -> String {
    effective_uid().to_string()
}

/// Where the open `file` really is: its `/proc/self/fd` link on Linux, the
/// kernel's name for the descriptor (`fcntl(F_GETPATH)`) on macOS; `None`
/// where neither answers (the caller then checks another way).
pub(crate) fn real_path_of(file: &std::fs::File) -> Option<std::path::PathBuf> {
    use std::os::fd::AsRawFd;
    #[cfg(target_os = "linux")]
    {
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
    }
    #[cfg(target_os = "macos")]
    {
        use std::ffi::{CStr, OsStr};
        use std::os::unix::ffi::OsStrExt;
        let mut buffer = [0 as libc::c_char; libc::PATH_MAX as usize];
        // SAFETY: F_GETPATH writes at most MAXPATHLEN (== PATH_MAX) bytes,
        // NUL-terminated, into the buffer it is given, which has that size;
        // the descriptor is borrowed for the call.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETPATH, buffer.as_mut_ptr()) };
        if rc == -1 {
            return None;
        }
        // SAFETY: on success the kernel wrote a NUL-terminated string into `buffer`.
        let name = unsafe { CStr::from_ptr(buffer.as_ptr()) };
        let bytes = name.to_bytes();
        bytes
            .starts_with(b"/")
            .then(|| std::path::PathBuf::from(OsStr::from_bytes(bytes)))
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = file.as_raw_fd();
        None
    }
}

/// The resident memory of process `pid` in bytes: `/proc/<pid>/statm` on
/// Linux, `proc_pidinfo(PROC_PIDTASKINFO)` on macOS.
pub(crate) fn resident_memory(pid: u32) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
        let pages: u64 = statm.split_ascii_whitespace().nth(1)?.parse().ok()?;
        Some(pages.saturating_mul(page_size()?))
    }
    #[cfg(target_os = "macos")]
    {
        let pid = libc::c_int::try_from(pid).ok()?;
        // SAFETY: proc_taskinfo is plain integers; zeroed is a valid value.
        let mut info: libc::proc_taskinfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::proc_taskinfo>() as libc::c_int;
        // SAFETY: the pointer and size describe `info`, which the call fills.
        let n = unsafe {
            libc::proc_pidinfo(
                pid,
                libc::PROC_PIDTASKINFO,
                0,
                (&mut info as *mut libc::proc_taskinfo).cast(),
                size,
            )
        };
        (n == size).then_some(info.pti_resident_size)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = pid;
        None
    }
}

/// Arranges for the child `command` starts to get `signal` when the thread
/// that spawned it exits (Linux's `PR_SET_PDEATHSIG`). macOS has no such
/// thing: there the orphan guardian (`lsp::process::guardian`), which kills
/// every listed group leader included, is what ends a killed proxy's children.
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

/// Most descriptors [`recv_with_fds`] takes from one message.
pub(crate) const MAX_PASSED_FDS: usize = 2;

/// Sends `bytes` on the Unix stream socket `socket` with the descriptors
/// `fds` attached (`SCM_RIGHTS`): the receiver gets its own duplicates.
/// Returns the bytes sent (all or nothing of the descriptors go with them).
pub(crate) fn send_with_fds(
    socket: std::os::fd::BorrowedFd<'_>,
    bytes: &[u8],
    fds: &[std::os::fd::BorrowedFd<'_>],
) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    if fds.is_empty() || fds.len() > MAX_PASSED_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "1 to MAX_PASSED_FDS descriptors",
        ));
    }
    let raw: Vec<RawFd> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
    let data_len = std::mem::size_of_val(raw.as_slice());
    // u64 words: aligned for the cmsghdr that starts the buffer.
    let mut control = [0u64; 8];
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(data_len as u32) } as usize;
    if space > std::mem::size_of_val(&control) {
        return Err(io::Error::other("control buffer too small"));
    }
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: msghdr is plain data; zeroed is its empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: msg_control points at `space` writable, aligned bytes, so
    // CMSG_FIRSTHDR is that buffer's start and CMSG_DATA lies inside it with
    // room for `data_len` bytes (CMSG_SPACE said so); `iov` describes
    // `bytes`, which sendmsg only reads; the descriptors are borrowed, valid
    // for the call.
    let sent = unsafe {
        let header = libc::CMSG_FIRSTHDR(&msg);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(data_len as u32) as _;
        std::ptr::copy_nonoverlapping(raw.as_ptr().cast::<u8>(), libc::CMSG_DATA(header), data_len);
        // No MSG_NOSIGNAL (not everywhere): Rust binaries ignore SIGPIPE.
        libc::sendmsg(socket.as_raw_fd(), &msg, 0)
    };
    if sent < 0 {
        let error = io::Error::last_os_error();
        if error.kind() == io::ErrorKind::Interrupted {
            // Nothing was sent: send again.
            return send_with_fds(socket, bytes, fds);
        }
        return Err(error);
    }
    Ok(sent as usize)
}

/// Receives bytes from the Unix stream socket `socket` into `buffer`, with
/// the descriptors attached to them (at most [`MAX_PASSED_FDS`], close-on-exec;
/// any beyond are closed by the kernel). Non-blocking if `socket` is.
pub(crate) fn recv_with_fds(
    socket: std::os::fd::BorrowedFd<'_>,
    buffer: &mut [u8],
) -> io::Result<(usize, Vec<std::os::fd::OwnedFd>)> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buffer.as_mut_ptr().cast(),
        iov_len: buffer.len(),
    };
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE((MAX_PASSED_FDS * std::mem::size_of::<RawFd>()) as u32) }
        as usize;
    // SAFETY: msghdr is plain data; zeroed is its empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space.min(std::mem::size_of_val(&control)) as _;
    // Close-on-exec from the start where the kernel can (Linux); elsewhere
    // set right after (a child spawned in between could inherit them).
    #[cfg(target_os = "linux")]
    let flags = libc::MSG_CMSG_CLOEXEC;
    #[cfg(not(target_os = "linux"))]
    let flags = 0;
    // SAFETY: `iov` describes `buffer`, writable for its length; the control
    // buffer is aligned and `msg_controllen` bytes long.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: the kernel filled msg_control with msg_controllen bytes of
    // well-formed cmsghdrs; CMSG_FIRSTHDR/NXTHDR walk them within it, and
    // each SCM_RIGHTS payload holds (cmsg_len - CMSG_LEN(0)) / 4 descriptors
    // that the kernel just installed in this process, owned by no one else.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&msg);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(header).cast::<RawFd>();
                for i in 0..bytes / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.add(i));
                    #[cfg(not(target_os = "linux"))]
                    libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            header = libc::CMSG_NXTHDR(&msg, header);
        }
    }
    Ok((n as usize, fds))
}

/// Whether `fd` is a pipe (FIFO) or a socket: what the MCP socket can serve
/// directly (`crate::mcp::socket`), as opposed to a terminal or a file.
pub(crate) fn fd_kind(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<FdKind> {
    use std::os::fd::AsRawFd;
    // SAFETY: stat is plain data (zeroed is a valid value); fstat fills it
    // for a descriptor borrowed for the call.
    let rc = unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        let rc = libc::fstat(fd.as_raw_fd(), &mut stat);
        (rc, stat.st_mode)
    };
    let (rc, mode) = rc;
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(match mode & libc::S_IFMT {
        libc::S_IFIFO => FdKind::Pipe,
        libc::S_IFSOCK => FdKind::Socket,
        _ => FdKind::Other,
    })
}

/// What [`fd_kind`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FdKind {
    Pipe,
    Socket,
    Other,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &std::path::Path) {
        let made = std::process::Command::new("mkfifo").arg(path).status();
        assert!(made.unwrap().success(), "mkfifo {}", path.display());
    }

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
    fn a_page_is_a_power_of_two() {
        assert!(page_size().is_some_and(u64::is_power_of_two));
    }

    #[test]
    fn descriptors_sent_with_bytes_arrive_as_working_duplicates() {
        use std::io::{Read, Write};
        use std::os::fd::AsFd;
        use std::os::unix::fs::OpenOptionsExt;
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        let reader = std::fs::File::options()
            .read(true)
            .custom_flags(OPEN_READ_ANYTHING)
            .open(&fifo)
            .unwrap();
        let mut writer = std::fs::File::options().write(true).open(&fifo).unwrap();
        let file = std::fs::File::open(dir.path()).unwrap();
        assert_eq!(fd_kind(reader.as_fd()).unwrap(), FdKind::Pipe);
        assert_eq!(fd_kind(a.as_fd()).unwrap(), FdKind::Socket);
        assert_eq!(fd_kind(file.as_fd()).unwrap(), FdKind::Other);

        let sent = send_with_fds(a.as_fd(), b"token\n", &[reader.as_fd(), a.as_fd()]).unwrap();
        assert_eq!(sent, 6);
        let mut buffer = [0u8; 16];
        let (n, fds) = recv_with_fds(b.as_fd(), &mut buffer).unwrap();
        assert_eq!(&buffer[..n], b"token\n");
        assert_eq!(fds.len(), 2);
        // The received pipe end reads what is written into the pipe.
        drop(reader);
        writer.write_all(b"through").unwrap();
        drop(writer);
        let mut got = String::new();
        std::fs::File::from(fds.into_iter().next().unwrap())
            .read_to_string(&mut got)
            .unwrap();
        assert_eq!(got, "through");
        // Plain bytes carry none.
        (&a).write_all(b"plain").unwrap();
        let (n, fds) = recv_with_fds(b.as_fd(), &mut buffer).unwrap();
        assert_eq!((&buffer[..n], fds.len()), (&b"plain"[..], 0));
    }
}
