//! Newline-delimited framing, as ACP uses toward the editor and the agent.
//!
//! The reader hands out whole lines up to a limit; a longer line is handed out
//! in fragments so it can be streamed through without being held in memory.
//! [`LineReader::next_batch`] hands out every whole line a read brought in as
//! one piece, so a relay pays per read, not per line, on plain traffic.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

const READ_CHUNK: usize = 64 * 1024;

/// One piece of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineChunk {
    /// A whole line, without its `\n`. `terminated` is false only for a last
    /// line that ended at end of input without a newline.
    Line {
        /// The line.
        bytes: Bytes,
        /// Whether a newline ended it.
        terminated: bool,
    },
    /// Part of a line longer than the inspection limit. `last` marks the piece
    /// that ends the line; `terminated` as for `Line`.
    Fragment {
        /// This piece.
        bytes: Bytes,
        /// The piece ends the line.
        last: bool,
        /// Whether a newline ended the line.
        terminated: bool,
    },
    /// One or more whole lines, each with its `\n` (from
    /// [`LineReader::next_batch`] only).
    Lines(Bytes),
}

/// Reads newline-delimited frames.
pub struct LineReader<R> {
    inner: R,
    buf: BytesMut,
    /// Bytes of `buf` already searched for a newline.
    scanned: usize,
    max_line: usize,
    /// Inside a line that is being streamed as fragments.
    streaming: bool,
    eof: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Reads lines of `inner`; lines longer than `max_line` come in fragments.
    pub fn new(inner: R, max_line: usize) -> Self {
        LineReader {
            inner,
            buf: BytesMut::with_capacity(READ_CHUNK),
            scanned: 0,
            max_line: max_line.max(1),
            streaming: false,
            eof: false,
        }
    }

    /// The next line or fragment; `None` at end of input.
    pub async fn next(&mut self) -> std::io::Result<Option<LineChunk>> {
        self.read_chunk(false).await
    }

    /// As [`LineReader::next`], but every whole line already read is handed
    /// out at once as [`LineChunk::Lines`]. Lines are the same as `next`
    /// would give: a line too long to inspect still comes in fragments, a
    /// last line without a newline as a `Line`.
    pub async fn next_batch(&mut self) -> std::io::Result<Option<LineChunk>> {
        self.read_chunk(true).await
    }

    async fn read_chunk(&mut self, batch: bool) -> std::io::Result<Option<LineChunk>> {
        loop {
            if let Some(pos) = memchr::memchr(b'\n', &self.buf[self.scanned..]) {
                let end = self.scanned + pos;
                if batch && !self.streaming {
                    // Every whole line in the buffer, newlines included.
                    let last = memchr::memrchr(b'\n', &self.buf[end..]).map_or(end, |p| end + p);
                    self.scanned = 0;
                    return Ok(Some(LineChunk::Lines(self.buf.split_to(last + 1).freeze())));
                }
                let bytes = self.buf.split_to(end).freeze();
                let _newline = self.buf.split_to(1);
                self.scanned = 0;
                if self.streaming {
                    self.streaming = false;
                    return Ok(Some(LineChunk::Fragment {
                        bytes,
                        last: true,
                        terminated: true,
                    }));
                }
                return Ok(Some(LineChunk::Line {
                    bytes,
                    terminated: true,
                }));
            }
            self.scanned = self.buf.len();
            if self.buf.len() >= self.max_line || (self.streaming && !self.buf.is_empty()) {
                // Too long to inspect, or already streaming: pass what we have on.
                self.streaming = true;
                self.scanned = 0;
                let bytes = self.buf.split().freeze();
                return Ok(Some(LineChunk::Fragment {
                    bytes,
                    last: false,
                    terminated: false,
                }));
            }
            if self.eof {
                self.scanned = 0;
                if self.streaming {
                    self.streaming = false;
                    return Ok(Some(LineChunk::Fragment {
                        bytes: Bytes::new(),
                        last: true,
                        terminated: false,
                    }));
                }
                if self.buf.is_empty() {
                    return Ok(None);
                }
                let bytes = self.buf.split().freeze();
                return Ok(Some(LineChunk::Line {
                    bytes,
                    terminated: false,
                }));
            }
            let want = READ_CHUNK.min(self.max_line.saturating_sub(self.buf.len()).max(1));
            self.buf.reserve(want);
            let n = (&mut self.inner)
                .take(want as u64)
                .read_buf(&mut self.buf)
                .await?;
            if n == 0 {
                self.eof = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tokio::io::AsyncWriteExt;

    async fn collect(input: Vec<Vec<u8>>, max_line: usize) -> Vec<LineChunk> {
        collect_with(input, max_line, false).await
    }

    async fn collect_with(input: Vec<Vec<u8>>, max_line: usize, batch: bool) -> Vec<LineChunk> {
        let (mut tx, rx) = tokio::io::duplex(7);
        let writer = tokio::spawn(async move {
            for chunk in input {
                tx.write_all(&chunk).await.unwrap();
            }
        });
        let mut reader = LineReader::new(rx, max_line);
        let mut out = Vec::new();
        loop {
            let chunk = if batch {
                reader.next_batch().await.unwrap()
            } else {
                reader.next().await.unwrap()
            };
            let Some(chunk) = chunk else { break };
            out.push(chunk);
        }
        writer.await.unwrap();
        out
    }

    /// Reassembles the original byte stream from what the reader produced.
    fn reassemble(chunks: &[LineChunk]) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in chunks {
            match chunk {
                LineChunk::Line { bytes, terminated } => {
                    out.extend_from_slice(bytes);
                    if *terminated {
                        out.push(b'\n');
                    }
                }
                LineChunk::Fragment {
                    bytes,
                    last,
                    terminated,
                } => {
                    out.extend_from_slice(bytes);
                    if *last && *terminated {
                        out.push(b'\n');
                    }
                }
                LineChunk::Lines(bytes) => out.extend_from_slice(bytes),
            }
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_and_keeps_an_unterminated_tail() {
        let chunks = collect(vec![b"{\"a\":1}\n\nnot json\ntail".to_vec()], 1024).await;
        let lines: Vec<_> = chunks
            .iter()
            .map(|c| match c {
                LineChunk::Line { bytes, terminated } => (bytes.to_vec(), *terminated),
                LineChunk::Lines(_) => panic!("no batches from next"),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            lines,
            vec![
                (b"{\"a\":1}".to_vec(), true),
                (b"".to_vec(), true),
                (b"not json".to_vec(), true),
                (b"tail".to_vec(), false),
            ]
        );
    }

    #[tokio::test]
    async fn streams_an_over_long_line_in_fragments() {
        let mut input = vec![b'x'; 100];
        input.extend_from_slice(b"\nshort\n");
        let chunks = collect(vec![input.clone()], 16).await;
        assert!(chunks.iter().all(|c| match c {
            LineChunk::Fragment { bytes, .. } => bytes.len() <= 100,
            LineChunk::Line { bytes, .. } => bytes.as_ref() == b"short",
            LineChunk::Lines(_) => false,
        }));
        assert!(matches!(chunks.last(), Some(LineChunk::Line { .. })));
        assert!(chunks
            .iter()
            .any(|c| matches!(c, LineChunk::Fragment { last: true, .. })));
        assert_eq!(reassemble(&chunks), input);
    }

    proptest! {
        #[test]
        fn any_chunking_yields_the_same_lines(
            lines in proptest::collection::vec("[a-z{}\":,]{0,40}", 0..20),
            cuts in proptest::collection::vec(0usize..400, 0..30),
            max_line in 8usize..64,
            batch in any::<bool>(),
        ) {
            let mut input = Vec::new();
            for line in &lines {
                input.extend_from_slice(line.as_bytes());
                input.push(b'\n');
            }
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|c| *c < input.len()).collect();
            cuts.sort_unstable();
            cuts.dedup();
            let mut pieces = Vec::new();
            let mut start = 0;
            for cut in cuts {
                pieces.push(input[start..cut].to_vec());
                start = cut;
            }
            pieces.push(input[start..].to_vec());
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let chunks = rt.block_on(collect_with(pieces, max_line, batch));
            prop_assert_eq!(reassemble(&chunks), input);
            // Every line short enough to inspect arrives whole (alone, or
            // in a batch of whole lines each ending in its newline).
            let whole: Vec<Vec<u8>> = chunks.iter().flat_map(|c| match c {
                LineChunk::Line { bytes, .. } => vec![bytes.to_vec()],
                LineChunk::Lines(bytes) => {
                    assert!(bytes.ends_with(b"\n"));
                    bytes[..bytes.len() - 1].split(|b| *b == b'\n').map(<[u8]>::to_vec).collect()
                }
                LineChunk::Fragment { .. } => vec![],
            }).collect();
            let expected: Vec<Vec<u8>> = lines.iter()
                .filter(|l| l.len() < max_line)
                .map(|l| l.as_bytes().to_vec())
                .collect();
            prop_assert_eq!(whole, expected);
        }
    }
}
