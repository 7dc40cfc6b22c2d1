//! Every call into `libc`, behind safe wrappers: signals to processes and
//! process groups, the parent-death signal of a child, descriptor flags,
//! the page size, the effective uid, kernel randomness, the kernel's
//! resolution of a path (`lookup_without_symlinks`, `real_path`). Nothing
//! else in the
//! library names `libc` (`tests/tidy.rs` checks), so each `unsafe` block
//! and its `// SAFETY:` reasoning lives here, once.

use std::io;
use std::os::fd::RawFd;
#[cfg(feature = "proxy")]
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

#[cfg(feature = "proxy")]
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

/// How the kernel's lookup of a path ends when it may follow no symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PlainLookup {
    /// The path exists and no component of it, the last included, is a
    /// symlink: where `open()` lands is the path itself, its `..` taken
    /// lexically (each one pops a real directory).
    Exists,
    /// A component is missing, or is not a directory but has more after
    /// it, before any symlink was met.
    Missing,
    /// Anything else: a symlink on the way, no permission, a kernel
    /// without `openat2` (before Linux 5.6).
    Unknown,
}

/// Looks `path` up the way `open()` would, but refusing to follow any
/// symlink (`openat2` with `RESOLVE_NO_SYMLINKS`, and `O_PATH`: nothing
/// is read, a FIFO does not block). One system call and a `close`, at any
/// depth.
#[cfg(target_os = "linux")]
pub(crate) fn lookup_without_symlinks(path: &std::path::Path) -> PlainLookup {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
        return PlainLookup::Unknown;
    };
    // SAFETY: `open_how` is plain integers, for which all zeroes is valid
    // (and means "no flags": the kernel wants unused fields zero).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: `c_path` is NUL-terminated and `how` is a valid `open_how`
    // whose size is passed with it; both outlive the call, which only
    // reads them.
    let raw = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c_path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if raw >= 0 {
        if let Ok(fd) = libc::c_int::try_from(raw) {
            // SAFETY: a descriptor openat2 just returned, owned by nothing else.
            drop(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
        }
        return PlainLookup::Exists;
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => PlainLookup::Missing,
        _ => PlainLookup::Unknown,
    }
}

/// Elsewhere: unknown, callers resolve some other way.
#[cfg(not(target_os = "linux"))]
pub(crate) fn lookup_without_symlinks(_path: &std::path::Path) -> PlainLookup {
    PlainLookup::Unknown
}

/// Where `path` really is, as the kernel resolves it for `open()`: every
/// symlink followed (the last one too), `..` taken physically after them.
/// One `open(O_PATH)` and one `readlink` of its `/proc/self/fd` entry, at
/// any depth, instead of one `lstat` per component.
///
/// Only for a path that exists: a missing file, a dangling link, a loop, a
/// non-directory in the middle, or a file the kernel names oddly (deleted,
/// not a path, `/proc` not mounted) is an error, and the caller resolves it
/// some other way. Opening with `O_PATH` reads nothing and does not block
/// on a FIFO or a device.
#[cfg(target_os = "linux")]
pub(crate) fn real_path(path: &std::path::Path) -> io::Result<std::path::PathBuf> {
    use std::ffi::{CString, OsString};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::sync::OnceLock;

    /// `/proc/self/fd`, opened once: `/proc/self` is this process at
    /// open time, and its descriptor table is every thread's.
    static PROC_FDS: OnceLock<Option<OwnedFd>> = OnceLock::new();
    let unsupported = || io::Error::from(io::ErrorKind::Unsupported);

    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c_path` is a NUL-terminated string that outlives the call;
    // open only reads it.
    let raw = unsafe { libc::open(c_path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` was just returned by open and is owned by nothing else.
    let file = unsafe { OwnedFd::from_raw_fd(raw) };

    let proc_fds = PROC_FDS
        .get_or_init(|| {
            // SAFETY: a NUL-terminated literal; open only reads it.
            let raw = unsafe {
                libc::open(
                    c"/proc/self/fd".as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                )
            };
            // SAFETY: as above, a fresh descriptor nothing else owns.
            (raw >= 0).then(|| unsafe { OwnedFd::from_raw_fd(raw) })
        })
        .as_ref()
        .ok_or_else(unsupported)?;
    // The entry's name: the descriptor's number, NUL-terminated.
    let mut name = [0u8; 16];
    let mut len = 0;
    let mut number = u32::try_from(file.as_raw_fd()).map_err(|_| unsupported())?;
    loop {
        name[len] = b'0' + (number % 10) as u8;
        len += 1;
        number /= 10;
        if number == 0 {
            break;
        }
    }
    name[..len].reverse();

    let mut target = [0u8; libc::PATH_MAX as usize];
    // SAFETY: `name` is NUL-terminated (a u32 has at most 10 digits),
    // and the buffer pointer and length describe `target`, which readlinkat
    // writes at most that many bytes into.
    let n = unsafe {
        libc::readlinkat(
            proc_fds.as_raw_fd(),
            name.as_ptr().cast(),
            target.as_mut_ptr().cast(),
            target.len(),
        )
    };
    drop(file);
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    if n >= target.len() {
        // Possibly cut short: never trust a truncated path.
        return Err(unsupported());
    }
    let target = &target[..n];
    // Not a plain absolute path: a deleted file ("… (deleted)"), a place
    // outside this process's root ("(unreachable)…"), or no path at all.
    if !target.starts_with(b"/") || target.ends_with(b" (deleted)") {
        return Err(unsupported());
    }
    Ok(std::path::PathBuf::from(OsString::from_vec(
        target.to_vec(),
    )))
}

/// Elsewhere there is no `/proc/self/fd`: callers resolve some other way.
#[cfg(not(target_os = "linux"))]
pub(crate) fn real_path(_path: &std::path::Path) -> io::Result<std::path::PathBuf> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
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

    #[test]
    fn real_path_is_where_the_kernel_lands() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("a/deep/dir")).unwrap();
        std::fs::create_dir_all(base.join("b")).unwrap();
        std::fs::write(base.join("a/deep/f.txt"), "x").unwrap();
        std::fs::write(base.join("b/f.txt"), "x").unwrap();
        // A link in the middle, another at the end, and `..` after a link
        // (physical: the link's target's parent, not the link's).
        symlink(base.join("a/deep/dir"), base.join("b/link")).unwrap();
        symlink("../f.txt", base.join("a/deep/dir/last")).unwrap();
        assert_eq!(
            real_path(&base.join("b/link/last")).unwrap(),
            base.join("a/deep/f.txt")
        );
        assert_eq!(
            real_path(&base.join("b/link/../f.txt")).unwrap(),
            base.join("a/deep/f.txt")
        );
        assert_eq!(
            real_path(&base.join("b/./f.txt")).unwrap(),
            base.join("b/f.txt")
        );
        // What does not exist, or is no directory, is left to the caller.
        assert_eq!(
            real_path(&base.join("b/missing")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        symlink(base.join("nowhere"), base.join("b/dangling")).unwrap();
        assert!(real_path(&base.join("b/dangling")).is_err());
        assert!(real_path(&base.join("b/f.txt/..")).is_err());
        symlink("loop2", base.join("b/loop1")).unwrap();
        symlink("loop1", base.join("b/loop2")).unwrap();
        assert!(real_path(&base.join("b/loop1")).is_err());
    }

    #[test]
    fn real_path_does_not_block_on_a_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let fifo = base.join("fifo");
        mkfifo(&fifo);
        // No writer ever comes: a plain open for reading would hang here.
        assert_eq!(real_path(&fifo).unwrap(), fifo);
    }

    #[test]
    fn a_lookup_without_symlinks_tells_them_apart() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("a/b")).unwrap();
        std::fs::write(base.join("a/b/f.txt"), "x").unwrap();
        symlink(base.join("a/b"), base.join("link")).unwrap();
        symlink(base.join("a/b/f.txt"), base.join("a/last")).unwrap();
        let lookup = |p: &str| lookup_without_symlinks(&base.join(p));
        assert_eq!(lookup("a/b/f.txt"), PlainLookup::Exists);
        assert_eq!(lookup("a/b/../b/./f.txt"), PlainLookup::Exists);
        // A symlink anywhere, the last component included, is not plain.
        assert_eq!(lookup("link/f.txt"), PlainLookup::Unknown);
        assert_eq!(lookup("a/last"), PlainLookup::Unknown);
        assert_eq!(lookup("link/missing"), PlainLookup::Unknown);
        // Missing, or a file used as a directory, before any symlink.
        assert_eq!(lookup("a/b/missing"), PlainLookup::Missing);
        assert_eq!(lookup("a/missing/deeper"), PlainLookup::Missing);
        assert_eq!(lookup("a/b/f.txt/x"), PlainLookup::Missing);
        assert_eq!(lookup("a/b/f.txt/.."), PlainLookup::Missing);
        // A FIFO is looked up, not opened: no wait for a writer.
        let fifo = base.join("fifo");
        mkfifo(&fifo);
        assert_eq!(lookup_without_symlinks(&fifo), PlainLookup::Exists);
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
