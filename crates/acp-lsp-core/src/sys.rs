//! Every system call the gate makes: the kernel's resolution of a path for
//! URI confinement (`lookup_without_symlinks`, `real_path`). Nothing else in
//! this crate names `libc` or `windows_sys` (`tests/tidy.rs` checks), so
//! each `unsafe` block and its `// SAFETY:` reasoning lives here, once.
//!
//! Per OS: Linux answers both with one or two system calls at any depth
//! (`openat2(RESOLVE_NO_SYMLINKS)`; `open(O_PATH)` and the `/proc/self/fd`
//! link). macOS has no `openat2` and no `/proc`: `real_path` opens the path
//! and asks the kernel where the descriptor is (`fcntl(F_GETPATH)`).
//! Windows opens a handle that reads nothing and asks for its final,
//! normalized name (`GetFinalPathNameByHandleW`: symlinks and junctions
//! followed, 8.3 short names expanded, the on-disk case). Where a lookup
//! is not answered, confinement walks the path one component at a time.

use std::io;

/// How the kernel's lookup of a path ends when it may follow no symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
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
    lookup_without_symlinks_then(path, |_| ()).0
}

/// [`lookup_without_symlinks`], and when the path exists, the metadata of
/// what it names, read from the descriptor the lookup opened (one `statx`
/// on it, where a `stat` of the path would walk it again).
#[cfg(target_os = "linux")]
pub(crate) fn lookup_without_symlinks_with_metadata(
    path: &std::path::Path,
) -> (PlainLookup, Option<std::fs::Metadata>) {
    let (lookup, metadata) = lookup_without_symlinks_then(path, |fd| {
        // An `O_PATH` descriptor: std's `File::metadata` is a `statx` with
        // `AT_EMPTY_PATH`, which such a descriptor allows; nothing is read.
        std::fs::File::from(fd).metadata().ok()
    });
    (lookup, metadata.flatten())
}

/// Elsewhere (no `openat2`): unknown, and no metadata.
#[cfg(not(target_os = "linux"))]
pub(crate) fn lookup_without_symlinks_with_metadata(
    _path: &std::path::Path,
) -> (PlainLookup, Option<std::fs::Metadata>) {
    (PlainLookup::Unknown, None)
}

/// The `openat2` of [`lookup_without_symlinks`]; `then` gets the descriptor
/// when the path exists (and closes it by dropping it).
#[cfg(target_os = "linux")]
fn lookup_without_symlinks_then<T>(
    path: &std::path::Path,
    then: impl FnOnce(std::os::fd::OwnedFd) -> T,
) -> (PlainLookup, Option<T>) {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
        return (PlainLookup::Unknown, None);
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
        let then = libc::c_int::try_from(raw).ok().map(|fd| {
            // SAFETY: a descriptor openat2 just returned, owned by nothing else.
            then(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
        });
        return (PlainLookup::Exists, then);
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => (PlainLookup::Missing, None),
        _ => (PlainLookup::Unknown, None),
    }
}

/// Elsewhere (no `openat2`): unknown, callers resolve some other way.
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

/// macOS: the path opened (symlinks followed) and the kernel asked where
/// the descriptor is (`fcntl(F_GETPATH)`), which names it as the file
/// system stores it. Only directories and regular files are opened (a
/// device's `open` may act); anything else, and a path that does not
/// exist, is an error and the caller walks.
#[cfg(target_os = "macos")]
pub(crate) fn real_path(path: &std::path::Path) -> io::Result<std::path::PathBuf> {
    use std::ffi::{CStr, CString, OsStr};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;

    let meta = std::fs::metadata(path)?;
    if !(meta.is_dir() || meta.is_file()) {
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    }
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c_path` is NUL-terminated and outlives the call, which only
    // reads it. O_EVTONLY needs no read permission; O_NONBLOCK keeps a FIFO
    // swapped in since the stat from blocking.
    let raw = unsafe {
        libc::open(
            c_path.as_ptr(),
            libc::O_EVTONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor open just returned, owned by nothing else.
    let file = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut buffer = [0 as libc::c_char; libc::PATH_MAX as usize];
    // SAFETY: F_GETPATH writes at most MAXPATHLEN (== PATH_MAX) bytes,
    // NUL-terminated, into the buffer it is given, which has that size.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETPATH, buffer.as_mut_ptr()) };
    if rc == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: on success the kernel wrote a NUL-terminated string into `buffer`.
    let name = unsafe { CStr::from_ptr(buffer.as_ptr()) };
    let bytes = name.to_bytes();
    if !bytes.starts_with(b"/") {
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    }
    Ok(std::path::PathBuf::from(OsStr::from_bytes(bytes)))
}

/// Windows: a handle opened for no access at all (nothing is read; a
/// directory needs `FILE_FLAG_BACKUP_SEMANTICS`), asked for its final name
/// (`GetFinalPathNameByHandleW`, normalized, with its drive letter):
/// symlinks and junctions followed, 8.3 short names expanded, each name in
/// the case the file system stores. The `\\?\` the answer starts with is
/// taken off (`C:\…`, `\\server\share\…`), so it compares with roots
/// spelled the usual way.
#[cfg(windows)]
pub(crate) fn real_path(path: &std::path::Path) -> io::Result<std::path::PathBuf> {
    use std::os::windows::ffi::{OsStrExt, OsStringExt};
    use std::os::windows::io::{FromRawHandle, OwnedHandle};
    use windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE;
    use windows_sys::Win32::Storage::FileSystem::{
        CreateFileW, GetFinalPathNameByHandleW, FILE_FLAG_BACKUP_SEMANTICS, FILE_NAME_NORMALIZED,
        FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE, OPEN_EXISTING, VOLUME_NAME_DOS,
    };

    let mut wide: Vec<u16> = path.as_os_str().encode_wide().collect();
    if wide.contains(&0) {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    wide.push(0);
    // SAFETY: `wide` is NUL-terminated and outlives the call; access 0 asks
    // for no rights (the name only), every sharing mode is allowed, and no
    // security attributes or template are passed.
    let raw = unsafe {
        CreateFileW(
            wide.as_ptr(),
            0,
            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
            std::ptr::null(),
            OPEN_EXISTING,
            FILE_FLAG_BACKUP_SEMANTICS,
            std::ptr::null_mut(),
        )
    };
    if raw == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a handle CreateFileW just returned, owned by nothing else.
    let handle = unsafe { OwnedHandle::from_raw_handle(raw) };
    let mut buffer = vec![0u16; 1024];
    loop {
        // SAFETY: the handle is open for the call; the pointer and length
        // describe `buffer`, which the call writes at most that many units into.
        let n = unsafe {
            GetFinalPathNameByHandleW(
                std::os::windows::io::AsRawHandle::as_raw_handle(&handle),
                buffer.as_mut_ptr(),
                buffer.len() as u32,
                FILE_NAME_NORMALIZED | VOLUME_NAME_DOS,
            )
        } as usize;
        if n == 0 {
            return Err(io::Error::last_os_error());
        }
        if n < buffer.len() {
            buffer.truncate(n);
            break;
        }
        // Too small: `n` is the size needed, with the NUL.
        if n > 32 * 1024 {
            return Err(io::Error::from(io::ErrorKind::Unsupported));
        }
        buffer = vec![0u16; n];
    }
    plain_windows_path(std::ffi::OsString::from_wide(&buffer))
        .ok_or_else(|| io::Error::from(io::ErrorKind::Unsupported))
}

/// `\\?\C:\x` as `C:\x` and `\\?\UNC\server\share\x` as
/// `\\server\share\x`; `None` for any other verbatim or device path.
#[cfg(windows)]
fn plain_windows_path(name: std::ffi::OsString) -> Option<std::path::PathBuf> {
    let text = name.into_string().ok()?;
    if let Some(rest) = text.strip_prefix(r"\\?\UNC\") {
        return Some(std::path::PathBuf::from(format!(r"\\{rest}")));
    }
    let rest = text.strip_prefix(r"\\?\")?;
    let bytes = rest.as_bytes();
    (bytes.len() >= 3 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' && bytes[2] == b'\\')
        .then(|| std::path::PathBuf::from(rest))
}

/// Elsewhere: callers resolve some other way.
#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
pub(crate) fn real_path(_path: &std::path::Path) -> io::Result<std::path::PathBuf> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    fn mkfifo(path: &std::path::Path) {
        let made = std::process::Command::new("mkfifo").arg(path).status();
        assert!(made.unwrap().success(), "mkfifo {}", path.display());
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

    /// Linux only: macOS opens only directories and regular files.
    #[cfg(target_os = "linux")]
    #[test]
    fn real_path_does_not_block_on_a_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let fifo = base.join("fifo");
        mkfifo(&fifo);
        // No writer ever comes: a plain open for reading would hang here.
        assert_eq!(real_path(&fifo).unwrap(), fifo);
    }

    /// Linux only: elsewhere there is no `openat2`, the lookup is `Unknown`.
    #[cfg(target_os = "linux")]
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
}
