//! The single writer of one newline-delimited output (editor's stdin or the
//! agent's): forwarded lines and the proxy's own messages leave in the order
//! they were queued, and never inside a line being streamed through.
//!
//! When the output is a pipe ([`Output::shared`]) and nothing is queued,
//! buffered or half-written before it, a whole line leaves at once from the
//! task that produced it ([`Sink::send`]): one non-blocking `write` and no
//! handoff to the writer task, which costs a wakeup (often of the other
//! worker thread) per message. Everything else, and whatever a full pipe
//! leaves over, goes through the writer task as before, behind a count of
//! what it still holds, so the order is the same either way.

use crate::record::{Direction, Recorder};
use bytes::Bytes;
use std::collections::VecDeque;
use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
#[cfg(unix)]
use tokio::net::unix::pipe;
use tokio::sync::mpsc;

/// Capacity of each output queue, in messages. Bounded so a slow reader slows
/// the writer's producers (backpressure) instead of growing memory.
pub const OUTPUT_QUEUE: usize = 64;
const WRITE_BUFFER: usize = 64 * 1024;

/// One item for a writer.
#[derive(Debug)]
pub enum Outgoing {
    /// A whole line; `terminated` is false only for a last line that had no newline.
    Line { bytes: Bytes, terminated: bool },
    /// Whole lines forwarded as read, each with its `\n` (one message per
    /// read instead of one per line).
    Lines(Bytes),
    /// Part of a line streamed through uninspected.
    Fragment {
        bytes: Bytes,
        last: bool,
        terminated: bool,
    },
    /// Ends the output after everything queued before it, while other
    /// senders may still be alive (the editor left: the agent must see end of
    /// input to exit). Anything queued later is dropped.
    Close,
    /// What a full pipe left of a line written from its producer's task
    /// (already recorded); written first, as is.
    Rest(Bytes),
}

impl Outgoing {
    pub fn line(bytes: impl Into<Bytes>) -> Outgoing {
        Outgoing::Line {
            bytes: bytes.into(),
            terminated: true,
        }
    }
}

/// An output several tasks may write to without owning it: a pipe, written
/// with non-blocking calls.
pub trait SharedWrite: Send + Sync + 'static {
    /// Ready when a write may make progress (registers the waker otherwise).
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    /// Writes what fits now; `WouldBlock` if nothing does.
    fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;
    /// Ends the output (the reader sees end of input once no one else holds it).
    fn close(&self) {}
}

#[cfg(unix)]
impl SharedWrite for pipe::Sender {
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        pipe::Sender::poll_write_ready(self, cx)
    }

    fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        pipe::Sender::try_write_vectored(self, bufs)
    }
}

/// A [`SharedWrite`] as the writer task's `AsyncWrite`.
struct SharedWriter(Arc<dyn SharedWrite>);

impl AsyncWrite for SharedWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.0.poll_write_ready(cx))?;
            match self.0.try_write_vectored(bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                result => return Poll::Ready(result),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.close();
        Poll::Ready(Ok(()))
    }
}

/// Where a relay writes one side.
pub struct Output {
    write: Pin<Box<dyn AsyncWrite + Send>>,
    shared: Option<Arc<dyn SharedWrite>>,
}

impl Output {
    /// Any writer: every item goes through the writer task.
    pub fn new(write: impl AsyncWrite + Send + 'static) -> Output {
        Output {
            write: Box::pin(write),
            shared: None,
        }
    }

    /// A pipe: lines may also leave from their producer's task.
    pub fn shared(write: Arc<dyn SharedWrite>) -> Output {
        Output {
            write: Box::pin(SharedWriter(Arc::clone(&write))),
            shared: Some(write),
        }
    }
}

impl<W: AsyncWrite + Send + 'static> From<W> for Output {
    fn from(write: W) -> Output {
        Output::new(write)
    }
}

/// The sending end of an output, cloned by every producer.
#[derive(Clone)]
pub struct Sink {
    tx: mpsc::Sender<Outgoing>,
    direct: Option<Arc<Direct>>,
}

/// The output is gone (the writer ended).
#[derive(Debug)]
pub struct Closed;

/// Writes from the producer's task, and what the writer task still holds.
struct Direct {
    out: Arc<dyn SharedWrite>,
    recorder: Option<(Recorder, Direction)>,
    /// Items handed to the writer task and not yet written out by it. While
    /// it is not zero, every item goes behind them; `Close` is never
    /// counted off, so nothing leaves directly after it.
    held: Mutex<usize>,
}

impl Direct {
    fn held(&self) -> std::sync::MutexGuard<'_, usize> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `item` now if nothing is held and it is a whole line; else
    /// counts it as held and gives it back to be queued.
    fn try_now(&self, item: Outgoing, tx: &mpsc::Sender<Outgoing>) -> Result<(), Outgoing> {
        let mut held = self.held();
        let (bytes, newline): (&Bytes, &[u8]) = match &item {
            Outgoing::Line { bytes, terminated } if *held == 0 => {
                (bytes, if *terminated { b"\n" } else { b"" })
            }
            Outgoing::Lines(bytes) if *held == 0 => (bytes, b""),
            _ => {
                *held += 1;
                return Err(item);
            }
        };
        let total = bytes.len() + newline.len();
        let written = match self
            .out
            .try_write_vectored(&[IoSlice::new(bytes), IoSlice::new(newline)])
        {
            Ok(written) => written,
            Err(_) => {
                // Full, or broken: the writer task waits for room, or
                // meets the same error and ends the output.
                *held += 1;
                return Err(item);
            }
        };
        self.record(&item);
        if written < total {
            // The rest must leave before anything else: the queue is empty
            // (nothing is held), so it goes in first, without waiting.
            // Slices, not copies: the rest of the line, then its newline.
            let mut rests = [None, None];
            if written < bytes.len() {
                rests[0] = Some(bytes.slice(written..));
            }
            if !newline.is_empty() {
                rests[1] = Some(Bytes::from_static(b"\n"));
            }
            for rest in rests.into_iter().flatten() {
                *held += 1;
                if tx.try_send(Outgoing::Rest(rest)).is_err() {
                    // Only a writer that ended refuses now (nothing is
                    // queued, so there is room): the output is gone anyway.
                    tracing::debug!("output closed with a line half-written");
                }
            }
        }
        Ok(())
    }

    fn record(&self, item: &Outgoing) {
        if let Some((rec, dir)) = &self.recorder {
            match item {
                Outgoing::Line { bytes, .. } => rec.message(dir, bytes),
                Outgoing::Lines(bytes) => record_lines(rec, dir, bytes),
                _ => {}
            }
        }
    }

    /// The writer task has written out `count` more items.
    fn release(&self, count: usize) {
        if count > 0 {
            let mut held = self.held();
            *held = held.saturating_sub(count);
        }
    }
}

/// Counts a held item off again if it never reaches the queue (the send was
/// cancelled or refused).
struct HeldGuard<'a>(Option<&'a Direct>);

impl Drop for HeldGuard<'_> {
    fn drop(&mut self) {
        if let Some(direct) = self.0 {
            direct.release(1);
        }
    }
}

impl Sink {
    /// Queues `item` (waiting for room), or writes it at once when it can.
    pub async fn send(&self, item: Outgoing) -> Result<(), Closed> {
        let (item, mut guard) = match &self.direct {
            Some(direct) => match direct.try_now(item, &self.tx) {
                Ok(()) => return Ok(()),
                Err(item) => (item, HeldGuard(Some(direct))),
            },
            None => (item, HeldGuard(None)),
        };
        let sent = self.tx.send(item).await;
        if sent.is_ok() {
            // Counted off by the writer task once written.
            guard.0 = None;
        }
        sent.map_err(|_| Closed)
    }
}

/// The output's sending end and its writer task (to spawn): it writes queued
/// items until every [`Sink`] is gone, then flushes and shuts the output
/// down (the reader sees end of input).
pub fn output(
    output: Output,
    recorder: Option<(Recorder, Direction)>,
) -> (Sink, impl Future<Output = io::Result<()>> + Send) {
    let (tx, rx) = mpsc::channel(OUTPUT_QUEUE);
    let direct = output.shared.map(|out| {
        Arc::new(Direct {
            out,
            recorder: recorder.clone(),
            held: Mutex::new(0),
        })
    });
    let sink = Sink {
        tx,
        direct: direct.clone(),
    };
    (sink, write_lines(output.write, rx, recorder, direct))
}

async fn write_lines(
    output: Pin<Box<dyn AsyncWrite + Send>>,
    mut rx: mpsc::Receiver<Outgoing>,
    recorder: Option<(Recorder, Direction)>,
    direct: Option<Arc<Direct>>,
) -> io::Result<()> {
    let mut out = BufWriter::with_capacity(WRITE_BUFFER, output);
    let mut mid_line = false;
    // Lines queued while a streamed line was unfinished, with whether a
    // newline must follow (a `Lines` batch carries its own).
    let mut deferred: VecDeque<(Bytes, bool)> = VecDeque::new();
    // Items taken from the queue and not yet counted off (see `Direct`).
    let mut taken = 0usize;
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(item) = next.take() {
            taken += 1;
            match item {
                Outgoing::Line { bytes, terminated } => {
                    if mid_line {
                        deferred.push_back((bytes, true));
                    } else {
                        write_line(&mut out, &bytes, terminated, &recorder).await?;
                    }
                }
                Outgoing::Lines(bytes) => {
                    if mid_line {
                        deferred.push_back((bytes, false));
                    } else {
                        write_lines_batch(&mut out, &bytes, &recorder).await?;
                    }
                }
                Outgoing::Rest(bytes) => out.write_all(&bytes).await?,
                Outgoing::Fragment {
                    bytes,
                    last,
                    terminated,
                } => {
                    out.write_all(&bytes).await?;
                    if let Some((rec, dir)) = &recorder {
                        rec.fragment(dir, &bytes);
                    }
                    mid_line = !last;
                    if last {
                        if terminated {
                            out.write_all(b"\n").await?;
                        }
                        while let Some((line, newline)) = deferred.pop_front() {
                            if newline {
                                write_line(&mut out, &line, true, &recorder).await?;
                            } else {
                                write_lines_batch(&mut out, &line, &recorder).await?;
                            }
                        }
                    }
                }
                Outgoing::Close => {
                    // Lines deferred behind an unfinished streamed line stay
                    // unwritten: appending them would corrupt that line.
                    out.flush().await?;
                    return out.shutdown().await;
                }
            }
            next = rx.try_recv().ok();
        }
        out.flush().await?;
        // Everything taken is out (none is half a line): a producer may
        // write directly again once nothing else is queued.
        if !mid_line {
            if let Some(direct) = &direct {
                direct.release(std::mem::take(&mut taken));
            }
        }
    }
    out.flush().await?;
    out.shutdown().await
}

async fn write_line<W: AsyncWrite + Unpin>(
    out: &mut BufWriter<W>,
    bytes: &[u8],
    terminated: bool,
    recorder: &Option<(Recorder, Direction)>,
) -> io::Result<()> {
    out.write_all(bytes).await?;
    if terminated {
        out.write_all(b"\n").await?;
    }
    if let Some((rec, dir)) = recorder {
        rec.message(dir, bytes);
    }
    Ok(())
}

/// Writes a batch of whole lines (each ending in `\n`); the recorder still
/// sees one message per line.
async fn write_lines_batch<W: AsyncWrite + Unpin>(
    out: &mut BufWriter<W>,
    bytes: &[u8],
    recorder: &Option<(Recorder, Direction)>,
) -> io::Result<()> {
    if out.buffer().is_empty() {
        // Nothing is waiting before it: a batch (up to a read's worth) goes
        // straight out instead of being copied into the buffer first.
        out.get_mut().write_all(bytes).await?;
    } else {
        out.write_all(bytes).await?;
    }
    if let Some((rec, dir)) = recorder {
        record_lines(rec, dir, bytes);
    }
    Ok(())
}

fn record_lines(rec: &Recorder, dir: &Direction, bytes: &[u8]) {
    for line in bytes
        .strip_suffix(b"\n")
        .unwrap_or(bytes)
        .split(|b| *b == b'\n')
    {
        rec.message(dir, line);
    }
}

// Unix pipes; the writer over any `AsyncWrite` runs on every OS in tests/relay.rs.
#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::OwnedFd;
    use tokio::io::AsyncReadExt;

    /// A real pipe as a shared output, and its read end. Once the reactor
    /// has seen it writable (as it has after any first write), a direct
    /// write needs no wakeup.
    async fn pipe_output() -> (Output, std::io::PipeReader) {
        let (reader, writer) = std::io::pipe().unwrap();
        let sender = pipe::Sender::from_owned_fd(OwnedFd::from(writer)).unwrap();
        sender.writable().await.unwrap();
        (Output::shared(Arc::new(sender)), reader)
    }

    fn fragment(bytes: &'static [u8], last: bool) -> Outgoing {
        Outgoing::Fragment {
            bytes: Bytes::from_static(bytes),
            last,
            terminated: last,
        }
    }

    async fn interleave(sink: Sink) {
        sink.send(fragment(b"AAAA", false)).await.unwrap();
        sink.send(Outgoing::line(&b"{\"own\":1}"[..]))
            .await
            .unwrap();
        sink.send(Outgoing::Lines(Bytes::from_static(b"b1\nb2\n")))
            .await
            .unwrap();
        sink.send(fragment(b"BBBB", true)).await.unwrap();
        sink.send(Outgoing::line(&b"after"[..])).await.unwrap();
    }

    #[tokio::test]
    async fn own_messages_never_land_inside_a_streamed_line() {
        let (out, mut reader) = tokio::io::duplex(1 << 20);
        let (sink, writer) = output(Output::new(out), None);
        let writer = tokio::spawn(writer);
        interleave(sink).await;
        writer.await.unwrap().unwrap();
        let mut text = String::new();
        reader.read_to_string(&mut text).await.unwrap();
        assert_eq!(text, "AAAABBBB\n{\"own\":1}\nb1\nb2\nafter\n");
    }

    #[tokio::test]
    async fn on_a_pipe_too_nothing_overtakes_a_streamed_line() {
        let (out, mut reader) = pipe_output().await;
        let (sink, writer) = output(out, None);
        let writer = tokio::spawn(writer);
        interleave(sink).await;
        writer.await.unwrap().unwrap();
        let mut text = String::new();
        reader.read_to_string(&mut text).unwrap();
        assert_eq!(text, "AAAABBBB\n{\"own\":1}\nb1\nb2\nafter\n");
    }

    #[tokio::test]
    async fn a_line_leaves_from_its_producer_when_nothing_is_queued() {
        let (out, mut reader) = pipe_output().await;
        // The writer task is never run: only a direct write can deliver.
        let (sink, _writer) = output(out, None);
        sink.send(Outgoing::line(&b"now"[..])).await.unwrap();
        sink.send(Outgoing::Lines(Bytes::from_static(b"x\ny\n")))
            .await
            .unwrap();
        // Already in the pipe when `send` returned: a read that must not
        // wait finds it.
        use std::os::fd::AsRawFd;
        assert!(crate::sys::set_nonblocking(reader.as_raw_fd()));
        let mut got = [0u8; 16];
        let n = reader.read(&mut got).unwrap();
        assert_eq!(&got[..n], b"now\nx\ny\n");
    }

    #[tokio::test]
    async fn what_a_full_pipe_leaves_of_a_line_goes_out_before_the_next() {
        let (out, mut reader) = pipe_output().await;
        let (sink, writer) = output(out, None);
        // Larger than the pipe (64 KiB): the direct write is partial.
        let big = vec![b'a'; 200 * 1024];
        sink.send(Outgoing::line(big.clone())).await.unwrap();
        let writer = tokio::spawn(writer);
        let reading = std::thread::spawn(move || {
            let mut all = Vec::new();
            reader.read_to_end(&mut all).unwrap();
            all
        });
        sink.send(Outgoing::line(&b"next"[..])).await.unwrap();
        drop(sink);
        writer.await.unwrap().unwrap();
        let all = reading.join().unwrap();
        let mut expected = big;
        expected.extend_from_slice(b"\nnext\n");
        assert_eq!(all.len(), expected.len());
        assert!(
            all == expected,
            "the rest of the first line came after the second"
        );
    }
}
