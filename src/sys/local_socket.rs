//! A local socket named by a path, on every OS: what the shared daemon,
//! the MCP bridge and the conformance runner listen on and connect to.
//!
//! On Unix it is a Unix stream socket at the path (inside a private 0700
//! directory: the directory is the access control). On Windows it is a
//! named pipe, `\\.\pipe\acp-lsp-<hash of the path>`, whose DACL grants
//! this user alone (not the default, which lets everyone read), refusing
//! remote clients; the first instance must be new (a pipe of that name
//! made by someone else makes `bind` fail), and a client checks that the
//! process serving the pipe is this user's before it sends a byte (another
//! user could have made the name first). What crosses it is the same.

use std::io;
use std::path::Path;

#[cfg(unix)]
pub(crate) use self::unix::*;
#[cfg(windows)]
pub(crate) use self::windows::*;

#[cfg(unix)]
mod unix {
    use super::*;

    /// A connected local socket.
    pub(crate) type Stream = tokio::net::UnixStream;
    /// Its reading half (`Stream::into_split`).
    pub(crate) type ReadHalf = tokio::net::unix::OwnedReadHalf;
    /// Its writing half.
    pub(crate) type WriteHalf = tokio::net::unix::OwnedWriteHalf;

    /// A listening local socket.
    pub(crate) struct Listener(tokio::net::UnixListener);

    impl Listener {
        /// Listens at `path` (which must not exist).
        pub(crate) fn bind(path: impl AsRef<Path>) -> io::Result<Listener> {
            tokio::net::UnixListener::bind(path).map(Listener)
        }

        /// Listens at `path`, replacing what a dead listener left there,
        /// readable and writable by this user only (0600).
        pub(crate) fn bind_private(path: &Path) -> io::Result<Listener> {
            use std::os::unix::fs::PermissionsExt;
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let listener = Listener::bind(path)?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
            Ok(listener)
        }

        /// The next connection (cancel-safe).
        pub(crate) async fn accept(&self) -> io::Result<Stream> {
            self.0.accept().await.map(|(stream, _)| stream)
        }
    }

    /// Connects to the listener at `path`.
    pub(crate) async fn connect(path: impl AsRef<Path>) -> io::Result<Stream> {
        tokio::net::UnixStream::connect(path).await
    }

    /// Removes what a listener left at `path` once it is done.
    pub(crate) fn remove(path: &Path) {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(windows)]
mod windows {
    use super::*;
    use crate::sys::PipeSecurity;
    use std::os::windows::io::AsRawHandle;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::Duration;
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
    use tokio::net::windows::named_pipe::{
        ClientOptions, NamedPipeClient, NamedPipeServer, ServerOptions,
    };

    /// How long [`connect`] waits for a free instance of a busy pipe
    /// (every instance connected, the listener about to make the next).
    const PIPE_BUSY_WAIT: Duration = Duration::from_secs(5);
    /// The pause between two tries while it is busy.
    const PIPE_BUSY_PAUSE: Duration = Duration::from_millis(20);
    /// `ERROR_PIPE_BUSY`.
    const ERROR_PIPE_BUSY: i32 = 231;

    /// The pipe's name for `path`: the path's bytes hashed (UUIDv5), so any
    /// path maps to a valid, fixed-length name.
    fn pipe_name(path: &Path) -> String {
        const NAMESPACE: uuid::Uuid = uuid::Uuid::from_bytes([
            0x6a, 0x1f, 0x0e, 0x52, 0x93, 0x2b, 0x4c, 0x7d, 0x8e, 0x40, 0x15, 0xd2, 0xa7, 0x3c,
            0x58, 0xe1,
        ]);
        let key = uuid::Uuid::new_v5(&NAMESPACE, path.as_os_str().as_encoded_bytes());
        format!(r"\\.\pipe\acp-lsp-{}", key.simple())
    }

    /// A connected local socket: our end of a named pipe.
    pub enum Stream {
        Served(NamedPipeServer),
        Connected(NamedPipeClient),
    }
    /// Its reading half (`Stream::into_split`).
    pub type ReadHalf = tokio::io::ReadHalf<Stream>;
    /// Its writing half.
    pub type WriteHalf = tokio::io::WriteHalf<Stream>;

    impl Stream {
        /// Reading and writing halves, usable from two tasks.
        pub(crate) fn into_split(self) -> (ReadHalf, WriteHalf) {
            tokio::io::split(self)
        }
    }

    impl AsyncRead for Stream {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            match self.get_mut() {
                Stream::Served(pipe) => Pin::new(pipe).poll_read(cx, buf),
                Stream::Connected(pipe) => Pin::new(pipe).poll_read(cx, buf),
            }
        }
    }

    impl AsyncWrite for Stream {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            match self.get_mut() {
                Stream::Served(pipe) => Pin::new(pipe).poll_write(cx, buf),
                Stream::Connected(pipe) => Pin::new(pipe).poll_write(cx, buf),
            }
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            match self.get_mut() {
                Stream::Served(pipe) => Pin::new(pipe).poll_flush(cx),
                Stream::Connected(pipe) => Pin::new(pipe).poll_flush(cx),
            }
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            match self.get_mut() {
                // A named pipe has no half close: the server end disconnects.
                Stream::Served(pipe) => {
                    let _ = pipe.disconnect();
                    Poll::Ready(Ok(()))
                }
                Stream::Connected(pipe) => Pin::new(pipe).poll_shutdown(cx),
            }
        }
    }

    /// A listening named pipe: always one instance waiting for a client.
    pub(crate) struct Listener {
        name: String,
        security: PipeSecurity,
        waiting: tokio::sync::Mutex<NamedPipeServer>,
    }

    impl Listener {
        /// Listens on the pipe named for `path`; fails if that pipe exists.
        pub(crate) fn bind(path: impl AsRef<Path>) -> io::Result<Listener> {
            let name = pipe_name(path.as_ref());
            let security = PipeSecurity::for_this_user()?;
            let first = create(&name, &security, true)?;
            Ok(Listener {
                name,
                security,
                waiting: tokio::sync::Mutex::new(first),
            })
        }

        /// The same (a pipe has no file to replace, and is this user's alone).
        pub(crate) fn bind_private(path: &Path) -> io::Result<Listener> {
            Listener::bind(path)
        }

        /// The next connection. Cancel-safe: the waiting instance stays
        /// in place until a client has connected to it.
        pub(crate) async fn accept(&self) -> io::Result<Stream> {
            let mut waiting = self.waiting.lock().await;
            waiting.connect().await?;
            let next = create(&self.name, &self.security, false)?;
            Ok(Stream::Served(std::mem::replace(&mut *waiting, next)))
        }
    }

    fn create(name: &str, security: &PipeSecurity, first: bool) -> io::Result<NamedPipeServer> {
        let mut options = ServerOptions::new();
        options
            .first_pipe_instance(first)
            .reject_remote_clients(true);
        // SAFETY: the attributes hold a valid security descriptor that lives
        // in `security`, which outlives the call (the pipe keeps its own copy).
        unsafe { options.create_with_security_attributes_raw(name, security.attributes()) }
    }

    /// Connects to the pipe named for `path`, waiting out a busy pipe up to
    /// [`PIPE_BUSY_WAIT`]; refused if another user serves it.
    pub(crate) async fn connect(path: impl AsRef<Path>) -> io::Result<Stream> {
        let name = pipe_name(path.as_ref());
        let deadline = tokio::time::Instant::now() + PIPE_BUSY_WAIT;
        let client = loop {
            match ClientOptions::new().open(&name) {
                Ok(client) => break client,
                Err(e)
                    if e.raw_os_error() == Some(ERROR_PIPE_BUSY)
                        && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(PIPE_BUSY_PAUSE).await;
                }
                Err(e) => return Err(e),
            }
        };
        if !crate::sys::pipe_served_by_this_user(client.as_raw_handle()) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{name} is not served by a process of this user"),
            ));
        }
        Ok(Stream::Connected(client))
    }

    /// Nothing is left at a path by a pipe.
    pub(crate) fn remove(_path: &Path) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn bytes_cross_both_ways_and_a_second_client_is_served_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("test.sock");
        let listener = Listener::bind_private(&path).unwrap();
        for round in 0..2u8 {
            let (client, served) = tokio::join!(connect(&path), listener.accept());
            let (mut client, mut served) = (client.unwrap(), served.unwrap());
            client.write_all(&[b'a' + round, b'\n']).await.unwrap();
            let mut got = [0u8; 2];
            served.read_exact(&mut got).await.unwrap();
            assert_eq!(got, [b'a' + round, b'\n']);
            let (mut read, mut write) = served.into_split();
            write.write_all(b"ok").await.unwrap();
            let mut back = [0u8; 2];
            client.read_exact(&mut back).await.unwrap();
            assert_eq!(&back, b"ok");
            drop(write);
            drop(client);
            let mut rest = Vec::new();
            let _ = read.read_to_end(&mut rest).await;
        }
        drop(listener);
        remove(&path);
    }

    /// A second listener on the same name is refused while the first lives
    /// (Unix: the path exists; Windows: not the first instance). Not built
    /// for Windows because the only Windows it runs on in CI is wine 8.0,
    /// which does not refuse a second pipe created with
    /// FILE_FLAG_FIRST_PIPE_INSTANCE (docs/testing.md, what cannot run under
    /// wine).
    #[cfg(not(windows))]
    #[tokio::test]
    async fn a_second_listener_on_the_same_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("test.sock");
        let listener = Listener::bind_private(&path).unwrap();
        assert!(Listener::bind(&path).is_err());
        drop(listener);
        remove(&path);
    }

    #[tokio::test]
    async fn nothing_listening_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(connect(&dir.path().join("none.sock")).await.is_err());
    }
}
