//! The conformance runner's connections: ndjson (editor, agent) or
//! Content-Length (a server stand-in) over a child's pipes or a Unix socket,
//! with an inbox of everything received and a bridge process that joins a
//! child's stdio to a socket.

use crate::jsonrpc::content_length::{ContentLengthCodec, LspFrame};
use crate::jsonrpc::Limits;
use futures::StreamExt;
use std::path::Path;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Mutex};
use tokio::time::Instant;
use tokio_util::codec::FramedRead;
use tokio_util::task::AbortOnDropHandle;

/// How messages are framed on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Lines,
    ContentLength,
}

/// One received message, and whether a line of the recording has claimed it.
#[derive(Debug, Clone)]
pub struct Received {
    pub text: String,
    pub consumed: bool,
}

/// Everything a connection has received so far.
pub struct Inbox {
    rx: mpsc::UnboundedReceiver<String>,
    pub received: Vec<Received>,
    pub closed: bool,
}

impl Inbox {
    /// Waits for one more message; false at the deadline or end of stream.
    pub async fn more(&mut self, deadline: Instant) -> bool {
        if self.closed {
            return false;
        }
        match tokio::time::timeout_at(deadline, self.rx.recv()).await {
            Ok(Some(text)) => {
                self.received.push(Received {
                    text,
                    consumed: false,
                });
                true
            }
            Ok(None) => {
                self.closed = true;
                false
            }
            Err(_) => false,
        }
    }

    /// Takes in what has already arrived, without waiting.
    pub fn drain(&mut self) {
        while let Ok(text) = self.rx.try_recv() {
            self.received.push(Received {
                text,
                consumed: false,
            });
        }
    }

    pub(crate) fn unconsumed(&self) -> impl Iterator<Item = (usize, &Received)> {
        self.received
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.consumed)
    }
}

type Writer = Arc<Mutex<Option<Box<dyn AsyncWrite + Unpin + Send>>>>;

/// A connection: a writer and the inbox its reader task fills.
pub struct Peer {
    framing: Framing,
    /// The task filling the inbox: nobody reads it once the peer is gone.
    _reader: AbortOnDropHandle<()>,
    writer: Writer,
    pub inbox: Inbox,
}

impl Peer {
    /// Starts reading. With `close_on_eof`, the writer is closed as soon as
    /// the other side closes (an agent whose input ended exits).
    pub fn start<R, W>(read: R, write: W, framing: Framing, close_on_eof: bool) -> Peer
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        let writer: Writer = Arc::new(Mutex::new(Some(Box::new(write))));
        let on_eof = close_on_eof.then(|| Arc::clone(&writer));
        let reader = match framing {
            Framing::Lines => tokio::spawn(read_lines(read, tx, on_eof)),
            Framing::ContentLength => tokio::spawn(read_frames(read, tx, on_eof)),
        };
        Peer {
            framing,
            _reader: AbortOnDropHandle::new(reader),
            writer,
            inbox: Inbox {
                rx,
                received: Vec::new(),
                closed: false,
            },
        }
    }

    /// Sends one message (its text without framing).
    pub async fn send(&self, text: &str) -> std::io::Result<()> {
        let mut guard = self.writer.lock().await;
        let Some(writer) = guard.as_mut() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "connection closed",
            ));
        };
        let mut bytes = Vec::with_capacity(text.len() + 32);
        match self.framing {
            Framing::Lines => {
                bytes.extend_from_slice(text.as_bytes());
                bytes.push(b'\n');
            }
            Framing::ContentLength => {
                bytes.extend_from_slice(
                    format!("Content-Length: {}\r\n\r\n", text.len()).as_bytes(),
                );
                bytes.extend_from_slice(text.as_bytes());
            }
        }
        writer.write_all(&bytes).await?;
        writer.flush().await
    }

    /// Closes the writing side.
    pub async fn close(&self) {
        if let Some(mut writer) = self.writer.lock().await.take() {
            let _ = writer.shutdown().await;
        }
    }
}

async fn read_lines<R: AsyncRead + Unpin>(
    read: R,
    tx: mpsc::UnboundedSender<String>,
    on_eof: Option<Writer>,
) {
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if !line.trim().is_empty() && tx.send(line).is_err() {
            break;
        }
    }
    close_writer(on_eof).await;
}

async fn read_frames<R: AsyncRead + Unpin>(
    read: R,
    tx: mpsc::UnboundedSender<String>,
    on_eof: Option<Writer>,
) {
    let mut frames = FramedRead::new(read, ContentLengthCodec::new(Limits::default()));
    while let Some(Ok(frame)) = frames.next().await {
        let text = match frame {
            LspFrame::Message(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            LspFrame::Oversized { declared, .. } => {
                format!("<oversized frame of {declared} bytes>")
            }
            LspFrame::Malformed { reason, .. } => format!("<malformed frame: {reason}>"),
        };
        if tx.send(text).is_err() {
            break;
        }
    }
    close_writer(on_eof).await;
}

async fn close_writer(writer: Option<Writer>) {
    if let Some(writer) = writer {
        if let Some(mut w) = writer.lock().await.take() {
            let _ = w.shutdown().await;
        }
    }
}

/// The first line a bridge sends: who it is.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Hello {
    pub pid: u32,
    pub cwd: String,
}

/// `acp-lsp conformance bridge SOCKET`: joins this process's stdin/stdout to
/// the socket, after a [`Hello`] line. Ends when the socket closes (the
/// stand-in "exits"); stdin's end half-closes the socket.
pub async fn bridge(socket: &Path) -> std::io::Result<()> {
    let stream = tokio::net::UnixStream::connect(socket).await?;
    let (mut from_socket, mut to_socket) = stream.into_split();
    let hello = Hello {
        pid: std::process::id(),
        cwd: std::env::current_dir()?.to_string_lossy().into_owned(),
    };
    let mut line = serde_json::to_vec(&hello).map_err(std::io::Error::other)?;
    line.push(b'\n');
    to_socket.write_all(&line).await?;
    let upstream = async move {
        let mut stdin = tokio::io::stdin();
        let _ = tokio::io::copy(&mut stdin, &mut to_socket).await;
        let _ = to_socket.shutdown().await;
        // Keep the write half alive until the other direction ends.
        std::future::pending::<()>().await;
    };
    let downstream = async move {
        let mut stdout = tokio::io::stdout();
        let copied = tokio::io::copy(&mut from_socket, &mut stdout).await;
        let _ = stdout.flush().await;
        copied.map(|_| ())
    };
    tokio::select! {
        _ = upstream => Ok(()),
        result = downstream => result,
    }
}

/// Accepts one bridge connection and reads its [`Hello`].
pub(crate) async fn accept_bridge(
    listener: &tokio::net::UnixListener,
    framing: Framing,
    close_on_eof: bool,
    deadline: Instant,
) -> std::io::Result<(Hello, Peer)> {
    let timed_out = || std::io::Error::new(std::io::ErrorKind::TimedOut, "no connection");
    let (stream, _) = tokio::time::timeout_at(deadline, listener.accept())
        .await
        .map_err(|_| timed_out())??;
    let (read, write) = stream.into_split();
    let mut read = BufReader::new(read);
    let mut first = String::new();
    tokio::time::timeout_at(deadline, read.read_line(&mut first))
        .await
        .map_err(|_| timed_out())??;
    let hello: Hello = serde_json::from_str(first.trim()).map_err(std::io::Error::other)?;
    Ok((hello, Peer::start(read, write, framing, close_on_eof)))
}
