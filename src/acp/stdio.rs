//! The proxy's own stdin and stdout (the editor's side of the relay) as
//! non-blocking pipes on tokio's reactor, so that a line from the editor is
//! read, and a line to it written, by the task that handles it.
//!
//! `tokio::io::stdin()`/`stdout()` run every `read` and `write` on the
//! blocking pool: a thread handoff in each direction of every round trip
//! (docs/benchmark-history.md, issue 16). When a descriptor is a pipe, it is opened again
//! through `/proc/self/fd/N`, which gives a new open file description of the
//! same pipe: only that one is made non-blocking, so the description the
//! editor (or a shell) may share with us keeps its flags. Anything else (a
//! terminal, a file, a socket, no `/proc`) keeps tokio's standard streams.
//! macOS has no `/proc/self/fd`: there `/dev/fd/N` would `dup` the
//! descriptor (the same open file description), so stdin and stdout stay
//! on the blocking pool. So does Windows, whose anonymous pipes do no
//! overlapped I/O.

use super::writer::Output;
#[cfg(target_os = "linux")]
use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::RawFd;
#[cfg(target_os = "linux")]
use std::path::Path;
#[cfg(target_os = "linux")]
use std::sync::Arc;
#[cfg(target_os = "linux")]
use tokio::net::unix::pipe;
use tokio_util::either::Either;

/// What the relay reads the editor from.
#[cfg(target_os = "linux")]
pub type EditorInput = Either<pipe::Receiver, tokio::io::Stdin>;
/// What the relay reads the editor from (the blocking pool's stdin).
#[cfg(not(target_os = "linux"))]
pub type EditorInput = Either<tokio::io::Stdin, tokio::io::Stdin>;

/// Standard input, on the reactor when it is a pipe. Call inside a runtime.
pub fn editor_input() -> EditorInput {
    #[cfg(target_os = "linux")]
    if let Some(pipe) = pipe_receiver(0) {
        return Either::Left(pipe);
    }
    Either::Right(tokio::io::stdin())
}

/// Standard output: a pipe on the reactor, written directly by the task
/// that has a line for the editor when nothing is queued before it
/// ([`super::writer`]). Call inside a runtime.
pub fn editor_output() -> Output {
    #[cfg(target_os = "linux")]
    if let Some(pipe) = pipe_sender(1) {
        return Output::shared(Arc::new(pipe));
    }
    Output::new(tokio::io::stdout())
}

/// Opens `fd` anew through `/proc/self/fd/N` with `open` (tokio's pipe
/// options: non-blocking, and refusing anything but a FIFO); `None` if it
/// is not a pipe or cannot be reopened.
#[cfg(target_os = "linux")]
fn reopen<T>(fd: RawFd, open: impl FnOnce(&Path) -> io::Result<T>) -> Option<T> {
    open(Path::new(&format!("/proc/self/fd/{fd}")))
        .inspect_err(|e| tracing::debug!(fd, error = %e, "not a pipe: on the blocking pool"))
        .ok()
}

/// The read end `fd` opened anew, non-blocking.
#[cfg(target_os = "linux")]
fn pipe_receiver(fd: RawFd) -> Option<pipe::Receiver> {
    reopen(fd, |path| pipe::OpenOptions::new().open_receiver(path))
}

/// The write end `fd` opened anew, non-blocking.
#[cfg(target_os = "linux")]
fn pipe_sender(fd: RawFd) -> Option<pipe::Sender> {
    reopen(fd, |path| pipe::OpenOptions::new().open_sender(path))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_pipe_is_reopened_without_touching_the_shared_description() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let mut input = pipe_receiver(reader.as_raw_fd()).expect("a pipe is reopened");
        writer.write_all(b"line\n").unwrap();
        let mut got = [0u8; 5];
        input.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"line\n");
        // The descriptor the process was given stays blocking: a shell or an
        // editor sharing it sees no change.
        assert_eq!(crate::sys::is_nonblocking(reader.as_raw_fd()), Some(false));

        let (mut back, out) = std::io::pipe().unwrap();
        let mut output = pipe_sender(out.as_raw_fd()).expect("a pipe is reopened");
        output.write_all(b"answer\n").await.unwrap();
        output.flush().await.unwrap();
        let mut got = [0u8; 7];
        std::io::Read::read_exact(&mut back, &mut got).unwrap();
        assert_eq!(&got, b"answer\n");
        assert_eq!(crate::sys::is_nonblocking(out.as_raw_fd()), Some(false));
    }

    #[tokio::test]
    async fn anything_but_a_pipe_keeps_the_standard_streams() {
        let file = tempfile::tempfile().unwrap();
        assert!(pipe_receiver(file.as_raw_fd()).is_none());
        assert!(pipe_sender(file.as_raw_fd()).is_none());
        let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(pipe_receiver(ours.as_raw_fd()).is_none());
    }
}
