//! Reading a file on behalf of a language server or an MCP tool: confined to
//! the session roots at the moment of the read, regular files only, under a
//! size cap, and never waiting on a FIFO or a device.
//!
//! Checking a path and then opening it leaves a window: a directory swapped
//! for a symlink in between makes the open land outside the roots. So the
//! file is opened first and the check is made on what was opened: the real
//! path of the open descriptor (`/proc/self/fd/N` on Linux, `F_GETPATH` on
//! macOS, `GetFinalPathNameByHandleW` on Windows; failing those, the
//! canonical path whose device and inode must be those of the descriptor).
//! The open is non-blocking (a FIFO with no writer would block it forever),
//! and the descriptor's own `fstat` decides whether it is a regular file
//! before a byte is read. On Windows a file is opened sharing every access
//! (an editor writing it is not locked out), and a named pipe or device
//! path never reaches the open: confinement refused it.
//!
//! Not `O_NOFOLLOW` or `openat2(RESOLVE_BENEATH)`: a symlink inside a root to
//! a file inside a root is a legitimate document, and the check of where the
//! descriptor landed refuses every way out (a link in any component, `..`
//! after a link, a swap between a check and the open) with one rule, the
//! gate's confinement.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Why a file was not read. The reason strings go to agents (`skipped` in
/// `_meta.documents`); [`ReadError::OutsideRoots`] is said the same way
/// whether or not the file exists.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("it is outside the session roots")]
    OutsideRoots,
    #[error("it does not exist")]
    NotFound,
    #[error("it is not a regular file")]
    NotAFile,
    #[error("it is larger than {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("it cannot be read: {0}")]
    Unreadable(io::Error),
}

impl ReadError {
    /// The machine-readable reason (`_meta.documents[].skipped`).
    pub fn reason(&self) -> &'static str {
        match self {
            ReadError::OutsideRoots => "outside_roots",
            ReadError::NotFound => "not_found",
            ReadError::NotAFile => "not_a_file",
            ReadError::TooLarge { .. } => "too_large",
            ReadError::Unreadable(_) => "unreadable",
        }
    }
}

/// What the disk says about a file, cheaply (size and modification time):
/// what a read saw, and what document sync compares with the disk later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub size: u64,
    pub modified: Option<std::time::SystemTime>,
}

/// A file's content as read, with the stamp of what was read.
#[derive(Debug)]
pub struct ReadText {
    /// The content, invalid UTF-8 replaced.
    pub text: String,
    pub stamp: Stamp,
}

/// Reads `path` if what it opens is a regular file of at most `limit` bytes
/// whose real path `allowed` accepts. Blocking (bounded: no FIFO waits, at
/// most `limit` bytes): call it from [`read_confined`] or a blocking thread.
pub fn read_confined_blocking(
    path: &Path,
    allowed: &dyn Fn(&Path) -> bool,
    limit: u64,
) -> Result<ReadText, ReadError> {
    // Not even opened when it is plainly not a regular file: opening a FIFO
    // or a device can have effects of its own. (The check that counts is the
    // one on the opened descriptor below; this one can be raced.)
    if let Ok(metadata) = std::fs::metadata(path) {
        if !metadata.is_file() {
            let inside = path.canonicalize().is_ok_and(|real| allowed(&real));
            return Err(if inside {
                ReadError::NotAFile
            } else {
                ReadError::OutsideRoots
            });
        }
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, crate::sys::OPEN_READ_ANYTHING);
    #[cfg(windows)]
    {
        use windows_share::*;
        std::os::windows::fs::OpenOptionsExt::share_mode(
            &mut options,
            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
        );
    }
    let file = match options.open(path) {
        Ok(file) => file,
        Err(e) => return Err(open_failed(path, allowed, e)),
    };
    let real_path = real_path_of(&file, path).ok_or(ReadError::OutsideRoots)?;
    if !allowed(&real_path) {
        return Err(ReadError::OutsideRoots);
    }
    let metadata = file.metadata().map_err(ReadError::Unreadable)?;
    if !metadata.is_file() {
        return Err(ReadError::NotAFile);
    }
    if metadata.len() > limit {
        return Err(ReadError::TooLarge { limit });
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    // The file may grow between the fstat and the read: never past the cap.
    (&file)
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Unreadable)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit });
    }
    Ok(ReadText {
        text: String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        stamp: Stamp {
            size: metadata.len(),
            modified: metadata.modified().ok(),
        },
    })
}

/// [`read_confined_blocking`] on the blocking pool, so that no runtime thread
/// waits on the disk.
pub async fn read_confined(
    path: PathBuf,
    allowed: impl Fn(&Path) -> bool + Send + 'static,
    limit: u64,
) -> Result<ReadText, ReadError> {
    tokio::task::spawn_blocking(move || read_confined_blocking(&path, &allowed, limit))
        .await
        .unwrap_or_else(|e| Err(ReadError::Unreadable(io::Error::other(e))))
}

/// A failed open: outside the roots when the directory it would be in is
/// (a swapped directory), so that the answer does not say whether an
/// outside file exists; else what the error says.
fn open_failed(path: &Path, allowed: &dyn Fn(&Path) -> bool, error: io::Error) -> ReadError {
    let parent_outside = path
        .parent()
        .and_then(|parent| parent.canonicalize().ok())
        .is_some_and(|parent| !allowed(&parent.join(path.file_name().unwrap_or_default())));
    if parent_outside {
        return ReadError::OutsideRoots;
    }
    match error.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => ReadError::NotFound,
        _ => ReadError::Unreadable(error),
    }
}

/// Where the open descriptor's file really is. `None` when that cannot be
/// established (the read is then refused).
fn real_path_of(file: &File, opened: &Path) -> Option<PathBuf> {
    if let Some(real) = crate::sys::real_path_of(file) {
        return Some(real);
    }
    // The kernel did not say: the canonical path counts only if it names
    // the same inode.
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let canonical = opened.canonicalize().ok()?;
        let (held, named) = (file.metadata().ok()?, std::fs::metadata(&canonical).ok()?);
        (held.dev() == named.dev() && held.ino() == named.ino()).then_some(canonical)
    }
    #[cfg(not(unix))]
    {
        let _ = opened;
        None
    }
}

/// The share modes of `FILE_SHARE_*` (the values are fixed by the Windows API).
#[cfg(windows)]
mod windows_share {
    pub(super) const FILE_SHARE_READ: u32 = 0x1;
    pub(super) const FILE_SHARE_WRITE: u32 = 0x2;
    pub(super) const FILE_SHARE_DELETE: u32 = 0x4;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inside(root: &Path) -> impl Fn(&Path) -> bool + '_ {
        move |p: &Path| p.starts_with(root)
    }

    #[test]
    fn reads_regular_files_inside_and_refuses_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/a.rs"), "fn a() {}\n").unwrap();
        // The root as the OS names it (macOS: /private/var; Windows: C:\…).
        let file = std::fs::File::open(dir.path().join("src/a.rs")).unwrap();
        let real = crate::sys::real_path_of(&file).unwrap_or(dir.path().join("src/a.rs"));
        let root = real.parent().unwrap().parent().unwrap().to_path_buf();
        let read = read_confined_blocking(&root.join("src/a.rs"), &inside(&root), 100).unwrap();
        assert_eq!(read.text, "fn a() {}\n");
        let elsewhere = root.join("src");
        assert!(matches!(
            read_confined_blocking(
                &root.join("src/a.rs"),
                &|p: &Path| !p.starts_with(&elsewhere),
                100
            ),
            Err(ReadError::OutsideRoots)
        ));
    }

    #[cfg(unix)]
    #[test]
    fn a_swapped_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("src/a.rs"), "fn a() {}\n").unwrap();
        std::fs::write(outside.join("a.rs"), "SECRET\n").unwrap();
        let allowed = inside(&root);

        let read = read_confined_blocking(&root.join("src/a.rs"), &allowed, 100).unwrap();
        assert_eq!(read.text, "fn a() {}\n");
        assert_eq!(read.stamp.size, 10);
        assert!(matches!(
            read_confined_blocking(&root.join("src/a.rs"), &allowed, 5),
            Err(ReadError::TooLarge { limit: 5 })
        ));
        assert!(matches!(
            read_confined_blocking(&root.join("src/none.rs"), &allowed, 100),
            Err(ReadError::NotFound)
        ));
        assert!(matches!(
            read_confined_blocking(&root.join("src"), &allowed, 100),
            Err(ReadError::NotAFile)
        ));

        // The directory swapped for a link to the outside: the same path now
        // opens the outside file, which is refused, existing or not.
        std::fs::remove_dir_all(root.join("src")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("src")).unwrap();
        for name in ["a.rs", "missing.rs"] {
            let refused = read_confined_blocking(&root.join("src").join(name), &allowed, 100);
            assert!(
                matches!(refused, Err(ReadError::OutsideRoots)),
                "{refused:?}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let fifo = root.join("pipe.rs");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let refused = read_confined_blocking(&fifo, &inside(&root), 100);
        assert!(matches!(refused, Err(ReadError::NotAFile)), "{refused:?}");
    }
}
