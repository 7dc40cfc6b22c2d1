//! Content-Length framing, as LSP uses toward language servers.
//!
//! The decoder never fails the stream: a malformed header, an oversized body or
//! garbage between frames becomes a [`LspFrame`] item that reports it, and the
//! decoder resynchronises on the next `Content-Length` header. An oversized body
//! is drained as it arrives and never held whole.

use super::limits::{Limits, DRAIN_CHUNK};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

const HEADER_END: &[u8] = b"\r\n\r\n";
const LENGTH_HEADER: &[u8] = b"content-length";
/// How much of an oversized body is kept to find its `id` in.
const OVERSIZED_PREFIX: usize = 4096;

/// One decoded item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LspFrame {
    /// A whole message body.
    Message(Bytes),
    /// A body over the frame limit, drained and dropped.
    Oversized {
        /// Its `Content-Length`.
        declared: usize,
        /// Its first bytes (enough to find the `id` of a response in).
        prefix: Bytes,
    },
    /// Bytes that were not a valid frame were skipped.
    Malformed {
        /// How many.
        skipped: usize,
        /// Why.
        reason: FrameError,
    },
}

/// Why bytes were skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The header block is longer than the limit (bytes).
    #[error("header block over {0} bytes")]
    HeaderTooLarge(usize),
    /// More header lines than the limit.
    #[error("more than {0} header lines")]
    TooManyHeaderLines(usize),
    /// No `Content-Length` header.
    #[error("missing Content-Length header")]
    MissingLength,
    /// A `Content-Length` that is not a number.
    #[error("invalid Content-Length {0:?}")]
    InvalidLength(String),
    /// A header line without a colon.
    #[error("header line without a colon")]
    InvalidHeaderLine,
    /// The input ended inside a frame.
    #[error("stream ended inside a frame")]
    Truncated,
}

#[derive(Debug)]
enum State {
    Header,
    Body {
        len: usize,
    },
    Drain {
        remaining: usize,
        declared: usize,
        prefix: BytesMut,
    },
}

/// Decoder and encoder for Content-Length frames.
#[derive(Debug)]
pub struct ContentLengthCodec {
    limits: Limits,
    state: State,
}

impl ContentLengthCodec {
    /// A codec reading and writing frames within `limits`.
    pub fn new(limits: Limits) -> Self {
        ContentLengthCodec {
            limits,
            state: State::Header,
        }
    }

    /// Skips ahead to the next plausible header start after a bad one.
    fn resync(&mut self, buf: &mut BytesMut, reason: FrameError) -> LspFrame {
        let skip = find_header_start(&buf[1.min(buf.len())..])
            .map(|at| at + 1)
            .unwrap_or_else(|| buf.len().saturating_sub(LENGTH_HEADER.len()));
        let skip = skip.max(1).min(buf.len());
        buf.advance(skip);
        self.state = State::Header;
        LspFrame::Malformed {
            skipped: skip,
            reason,
        }
    }

    fn parse_header(&self, header: &[u8]) -> Result<usize, FrameError> {
        let mut length = None;
        let mut lines = 0;
        for line in header.split(|b| *b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            lines += 1;
            if lines > self.limits.max_header_lines {
                return Err(FrameError::TooManyHeaderLines(self.limits.max_header_lines));
            }
            let colon = memchr::memchr(b':', line).ok_or(FrameError::InvalidHeaderLine)?;
            let (name, value) = (&line[..colon], &line[colon + 1..]);
            if name.trim_ascii().eq_ignore_ascii_case(LENGTH_HEADER) {
                let value = value.trim_ascii();
                let text = String::from_utf8_lossy(value).into_owned();
                // Digits only: no sign, no exponent, and few enough to fit a usize.
                if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
                    return Err(FrameError::InvalidLength(text));
                }
                length = Some(
                    text.parse::<usize>()
                        .map_err(|_| FrameError::InvalidLength(text))?,
                );
            }
        }
        length.ok_or(FrameError::MissingLength)
    }
}

/// Position of the next `Content-Length` (any case) in `bytes`.
fn find_header_start(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(LENGTH_HEADER.len())
        .position(|w| w.eq_ignore_ascii_case(LENGTH_HEADER))
}

impl Decoder for ContentLengthCodec {
    type Item = LspFrame;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<LspFrame>, std::io::Error> {
        loop {
            match &mut self.state {
                State::Header => {
                    let window = buf
                        .len()
                        .min(self.limits.max_header_bytes + HEADER_END.len());
                    let Some(end) = memchr::memmem::find(&buf[..window], HEADER_END) else {
                        if buf.len() > self.limits.max_header_bytes {
                            let limit = self.limits.max_header_bytes;
                            return Ok(Some(self.resync(buf, FrameError::HeaderTooLarge(limit))));
                        }
                        return Ok(None);
                    };
                    match self.parse_header(&buf[..end]) {
                        Ok(len) => {
                            buf.advance(end + HEADER_END.len());
                            self.state = if len > self.limits.max_lsp_frame {
                                State::Drain {
                                    remaining: len,
                                    declared: len,
                                    prefix: BytesMut::new(),
                                }
                            } else {
                                State::Body { len }
                            };
                        }
                        Err(reason) => return Ok(Some(self.resync(buf, reason))),
                    }
                }
                State::Body { len } => {
                    if buf.len() < *len {
                        return Ok(None);
                    }
                    let body = buf.split_to(*len).freeze();
                    self.state = State::Header;
                    return Ok(Some(LspFrame::Message(body)));
                }
                State::Drain {
                    remaining,
                    declared,
                    prefix,
                } => {
                    // Drop the body a chunk at a time as it arrives; keep only its start.
                    let take = buf.len().min(*remaining).min(DRAIN_CHUNK);
                    let keep = take.min(OVERSIZED_PREFIX.saturating_sub(prefix.len()));
                    prefix.extend_from_slice(&buf[..keep]);
                    buf.advance(take);
                    *remaining -= take;
                    if *remaining > 0 {
                        if buf.is_empty() {
                            return Ok(None);
                        }
                        continue;
                    }
                    let item = LspFrame::Oversized {
                        declared: *declared,
                        prefix: std::mem::take(prefix).freeze(),
                    };
                    self.state = State::Header;
                    return Ok(Some(item));
                }
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<LspFrame>, std::io::Error> {
        if let Some(frame) = self.decode(buf)? {
            return Ok(Some(frame));
        }
        let pending = !buf.is_empty() || !matches!(self.state, State::Header);
        if pending {
            let skipped = buf.len();
            buf.clear();
            self.state = State::Header;
            return Ok(Some(LspFrame::Malformed {
                skipped,
                reason: FrameError::Truncated,
            }));
        }
        Ok(None)
    }
}

impl<T: AsRef<[u8]>> Encoder<T> for ContentLengthCodec {
    type Error = std::io::Error;

    fn encode(&mut self, body: T, dst: &mut BytesMut) -> Result<(), std::io::Error> {
        let body = body.as_ref();
        dst.reserve(body.len() + 32);
        dst.put_slice(b"Content-Length: ");
        dst.put_slice(body.len().to_string().as_bytes());
        dst.put_slice(HEADER_END);
        dst.put_slice(body);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame(body: &str) -> Vec<u8> {
        format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
    }

    fn decode_all(input: &[u8], limits: Limits, cuts: &[usize]) -> Vec<LspFrame> {
        let mut codec = ContentLengthCodec::new(limits);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut start = 0;
        let mut points: Vec<usize> = cuts.iter().copied().filter(|c| *c < input.len()).collect();
        points.sort_unstable();
        points.push(input.len());
        for cut in points {
            buf.extend_from_slice(&input[start..cut]);
            start = cut;
            while let Some(item) = codec.decode(&mut buf).unwrap() {
                out.push(item);
            }
        }
        while let Some(item) = codec.decode_eof(&mut buf).unwrap() {
            out.push(item);
        }
        out
    }

    fn messages(frames: &[LspFrame]) -> Vec<String> {
        frames
            .iter()
            .filter_map(|f| match f {
                LspFrame::Message(b) => Some(String::from_utf8(b.to_vec()).unwrap()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn decodes_frames_with_extra_headers() {
        let mut input = frame(r#"{"id":1}"#);
        input.extend_from_slice(
            b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: 2\r\n\r\n{}",
        );
        let out = decode_all(&input, Limits::default(), &[]);
        assert_eq!(messages(&out), vec![r#"{"id":1}"#, "{}"]);
    }

    #[test]
    fn rejects_bad_lengths_and_resyncs() {
        for bad in ["-5", "abc", "1e3", "99999999999999999999999", "", "+3"] {
            let mut input = format!("Content-Length: {bad}\r\n\r\n").into_bytes();
            input.extend_from_slice(&frame(r#"{"ok":true}"#));
            let out = decode_all(&input, Limits::default(), &[]);
            assert!(
                matches!(out[0], LspFrame::Malformed { .. }),
                "{bad:?} gave {out:?}"
            );
            assert_eq!(messages(&out), vec![r#"{"ok":true}"#], "{bad:?}");
        }
    }

    #[test]
    fn missing_length_and_bad_lines_are_malformed() {
        let out = decode_all(b"Content-Type: x\r\n\r\n", Limits::default(), &[]);
        assert!(matches!(
            out[0],
            LspFrame::Malformed {
                reason: FrameError::MissingLength,
                ..
            }
        ));
        let out = decode_all(b"garbage line\r\n\r\n", Limits::default(), &[]);
        assert!(matches!(
            out[0],
            LspFrame::Malformed {
                reason: FrameError::InvalidHeaderLine,
                ..
            }
        ));
    }

    #[test]
    fn garbage_before_a_frame_is_skipped() {
        let mut input = b"hello from a confused server\n".to_vec();
        input.extend_from_slice(&frame("{}"));
        let out = decode_all(&input, Limits::default(), &[]);
        assert!(matches!(out[0], LspFrame::Malformed { .. }));
        assert_eq!(messages(&out), vec!["{}"]);
    }

    #[test]
    fn header_limits_hold() {
        let limits = Limits::default();
        let mut many = String::new();
        for i in 0..40 {
            many.push_str(&format!("X-{i}: y\r\n"));
        }
        many.push_str("Content-Length: 2\r\n\r\n{}");
        let out = decode_all(many.as_bytes(), limits, &[]);
        assert!(matches!(
            out[0],
            LspFrame::Malformed {
                reason: FrameError::TooManyHeaderLines(32),
                ..
            }
        ));
        let mut huge = format!("X-Big: {}\r\n", "a".repeat(9000)).into_bytes();
        huge.extend_from_slice(&frame("{}"));
        let out = decode_all(&huge, limits, &[]);
        assert!(matches!(
            out[0],
            LspFrame::Malformed {
                reason: FrameError::HeaderTooLarge(8192),
                ..
            }
        ));
        assert_eq!(messages(&out), vec!["{}"]);
    }

    #[test]
    fn oversized_body_is_drained_and_the_stream_stays_aligned() {
        let limits = Limits {
            max_lsp_frame: 100,
            ..Limits::default()
        };
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":42,"result":"{}"}}"#,
            "x".repeat(500)
        );
        let mut input = frame(&big);
        input.extend_from_slice(&frame(r#"{"id":43}"#));
        let cuts: Vec<usize> = (0..input.len()).step_by(37).collect();
        let out = decode_all(&input, limits, &cuts);
        match &out[0] {
            LspFrame::Oversized { declared, prefix } => {
                assert_eq!(*declared, big.len());
                assert!(prefix.starts_with(br#"{"jsonrpc":"2.0","id":42"#));
            }
            other => panic!("expected oversized, got {other:?}"),
        }
        assert_eq!(messages(&out), vec![r#"{"id":43}"#]);
    }

    #[test]
    fn a_huge_declared_length_allocates_nothing_up_front() {
        let mut codec = ContentLengthCodec::new(Limits::default());
        let mut buf = BytesMut::from(&b"Content-Length: 9999999999999\r\n\r\nabc"[..]);
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
        assert!(buf.capacity() < 1024 * 1024);
    }

    #[test]
    fn truncated_stream_is_reported() {
        let out = decode_all(b"Content-Length: 10\r\n\r\n{}", Limits::default(), &[]);
        assert!(matches!(
            out[0],
            LspFrame::Malformed {
                reason: FrameError::Truncated,
                ..
            }
        ));
    }

    #[test]
    fn encoder_round_trips() {
        let mut codec = ContentLengthCodec::new(Limits::default());
        let mut buf = BytesMut::new();
        codec.encode("{\"a\":\"é\"}", &mut buf).unwrap();
        assert!(buf.starts_with(b"Content-Length: 10\r\n\r\n"));
        assert_eq!(
            codec.decode(&mut buf).unwrap(),
            Some(LspFrame::Message(Bytes::from("{\"a\":\"é\"}")))
        );
    }

    proptest! {
        #[test]
        fn any_chunking_decodes_the_same_frames(
            bodies in proptest::collection::vec("[a-z0-9{}\":,é\\r\\n]{0,60}", 1..12),
            cuts in proptest::collection::vec(0usize..1200, 0..40),
        ) {
            let mut input = Vec::new();
            for body in &bodies {
                input.extend_from_slice(&frame(body));
            }
            let out = decode_all(&input, Limits::default(), &cuts);
            prop_assert_eq!(messages(&out), bodies.clone());
            prop_assert_eq!(out.len(), bodies.len());
        }
    }
}
