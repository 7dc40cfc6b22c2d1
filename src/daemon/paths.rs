//! Where a user's daemon lives: a private 0700 directory under
//! `$XDG_RUNTIME_DIR` (or the temp dir), and in it one socket, lock file and
//! log per (acp-lsp version, config file). On Windows the directory is in
//! the user's own temp dir (`%TEMP%`, private by its ACL) and the socket
//! is a named pipe named after its path (`sys::local_socket`).

use std::io;
use std::path::{Path, PathBuf};

/// Namespace of the daemon keys (UUIDv5 over version and config path).
const KEY_NAMESPACE: uuid::Uuid = uuid::Uuid::from_bytes([
    0x2d, 0x9e, 0x41, 0x7a, 0x0b, 0x63, 0x4f, 0x88, 0xa1, 0x5c, 0x73, 0x30, 0xe2, 0x19, 0xd4, 0x6f,
]);

/// The files of one daemon.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The private directory (0700, ours).
    pub dir: PathBuf,
    pub socket: PathBuf,
    /// Held (`flock`) by the live daemon for its whole life; holds its pid.
    pub lock: PathBuf,
    /// The daemon's stderr (its log), appended to.
    pub log: PathBuf,
    /// The config file the daemon loads (`None`: the user's default).
    pub config: Option<PathBuf>,
}

impl Paths {
    /// The daemon for `config` (the proxy's `--config`, canonicalized), in
    /// the user's runtime directory. One daemon per version and config, so a
    /// proxy never talks to a daemon of another build or other servers.
    pub fn for_config(config: Option<&Path>) -> io::Result<Paths> {
        Paths::under(&crate::sys::places::runtime_base(), config)
    }

    /// The same under `base` (tests).
    pub fn under(base: &Path, config: Option<&Path>) -> io::Result<Paths> {
        let dir = base.join(format!("acp-lsp-daemon-{}", crate::sys::user_tag()));
        private_dir(&dir)?;
        let config = config.map(|c| c.canonicalize()).transpose()?;
        let mut key = Vec::from(env!("CARGO_PKG_VERSION").as_bytes());
        key.push(0);
        if let Some(config) = &config {
            key.extend_from_slice(config.as_os_str().as_encoded_bytes());
        }
        let key = uuid::Uuid::new_v5(&KEY_NAMESPACE, &key)
            .simple()
            .to_string();
        let key = &key[..16];
        Ok(Paths {
            socket: dir.join(format!("{key}.sock")),
            lock: dir.join(format!("{key}.lock")),
            log: dir.join(format!("{key}.log")),
            dir,
            config,
        })
    }
}

/// Creates `dir` 0700, or checks that the existing one is ours and private:
/// anyone who can write there could stand in for the daemon.
#[cfg(unix)]
fn private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let uid = crate::sys::effective_uid();
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() || meta.uid() != uid {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is not a directory of ours", dir.display()),
        ));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Windows: the directory in the user's own temp dir, which its ACL keeps
/// to the user; the pipe carries its own DACL (`sys::local_socket`).
#[cfg(windows)]
fn private_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    if std::fs::symlink_metadata(dir)?.file_type().is_symlink() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is not a directory of ours", dir.display()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_is_private_and_keys_differ_by_config() {
        let base = tempfile::tempdir().unwrap();
        let a = Paths::under(base.path(), None).unwrap();
        #[cfg(unix)]
        use std::os::unix::fs::PermissionsExt;
        #[cfg(unix)]
        let mode = std::fs::metadata(&a.dir).unwrap().permissions().mode();
        #[cfg(unix)]
        assert_eq!(mode & 0o777, 0o700);
        let config = base.path().join("c.toml");
        std::fs::write(&config, "").unwrap();
        let b = Paths::under(base.path(), Some(&config)).unwrap();
        assert_eq!(a.dir, b.dir);
        assert_ne!(a.socket, b.socket);
        assert_eq!(
            a.socket,
            Paths::under(base.path(), None).unwrap().socket,
            "stable"
        );
        // A directory others can enter is made private again.
        #[cfg(unix)]
        {
            std::fs::set_permissions(&a.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            Paths::under(base.path(), None).unwrap();
            let mode = std::fs::metadata(&a.dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
    }
}
