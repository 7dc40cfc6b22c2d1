//! The single writer of one newline-delimited output (editor's stdin or the
//! agent's): forwarded lines and the proxy's own messages leave in the order
//! they were queued, and never inside a line being streamed through.

use crate::record::{Direction, Recorder};
use bytes::Bytes;
use std::collections::VecDeque;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
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
}

impl Outgoing {
    pub fn line(bytes: impl Into<Bytes>) -> Outgoing {
        Outgoing::Line {
            bytes: bytes.into(),
            terminated: true,
        }
    }
}

/// Writes queued items until every sender is gone, then flushes and shuts the
/// output down (the reader sees end of input).
pub async fn write_lines<W: AsyncWrite + Unpin>(
    output: W,
    mut rx: mpsc::Receiver<Outgoing>,
    recorder: Option<(Recorder, Direction)>,
) -> std::io::Result<()> {
    let mut out = BufWriter::with_capacity(WRITE_BUFFER, output);
    let mut mid_line = false;
    // Lines queued while a streamed line was unfinished, with whether a
    // newline must follow (a `Lines` batch carries its own).
    let mut deferred: VecDeque<(Bytes, bool)> = VecDeque::new();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(item) = next.take() {
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
    }
    out.flush().await?;
    out.shutdown().await
}

async fn write_line<W: AsyncWrite + Unpin>(
    out: &mut BufWriter<W>,
    bytes: &[u8],
    terminated: bool,
    recorder: &Option<(Recorder, Direction)>,
) -> std::io::Result<()> {
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
) -> std::io::Result<()> {
    if out.buffer().is_empty() {
        // Nothing is waiting before it: a batch (up to a read's worth) goes
        // straight out instead of being copied into the buffer first.
        out.get_mut().write_all(bytes).await?;
    } else {
        out.write_all(bytes).await?;
    }
    if let Some((rec, dir)) = recorder {
        for line in bytes
            .strip_suffix(b"\n")
            .unwrap_or(bytes)
            .split(|b| *b == b'\n')
        {
            rec.message(dir, line);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn own_messages_never_land_inside_a_streamed_line() {
        let (tx, rx) = mpsc::channel(OUTPUT_QUEUE);
        let (out, mut reader) = tokio::io::duplex(1 << 20);
        let writer = tokio::spawn(write_lines(out, rx, None));
        tx.send(Outgoing::Fragment {
            bytes: Bytes::from_static(b"AAAA"),
            last: false,
            terminated: false,
        })
        .await
        .unwrap();
        tx.send(Outgoing::line(&b"{\"own\":1}"[..])).await.unwrap();
        tx.send(Outgoing::Lines(Bytes::from_static(b"b1\nb2\n")))
            .await
            .unwrap();
        tx.send(Outgoing::Fragment {
            bytes: Bytes::from_static(b"BBBB"),
            last: true,
            terminated: true,
        })
        .await
        .unwrap();
        tx.send(Outgoing::line(&b"after"[..])).await.unwrap();
        drop(tx);
        writer.await.unwrap().unwrap();
        let mut text = String::new();
        reader.read_to_string(&mut text).await.unwrap();
        assert_eq!(text, "AAAABBBB\n{\"own\":1}\nb1\nb2\nafter\n");
    }
}
