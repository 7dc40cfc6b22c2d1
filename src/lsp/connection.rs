//! One JSON-RPC connection to a language server over its stdin/stdout
//! (Content-Length framing): a typed pending-request table (outgoing id →
//! waiting caller), one ordered writer, and a reader that routes responses,
//! answers the server's requests and hands its notifications on.

use super::ratelimit::{Verdict, WarnBudget};
use crate::jsonrpc::content_length::{ContentLengthCodec, LspFrame};
use crate::jsonrpc::{self, shallow, Envelope, ErrorObject, Kind, Limits, Outcome, RequestId};
use crate::record::{Direction, Recorder};
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use parking_lot::Mutex;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

/// How a request to the server ended.
#[derive(Debug)]
pub enum Reply {
    Result(Box<RawValue>),
    /// The server's error object, verbatim.
    Error(Box<RawValue>),
    /// The response was over the frame limit and was dropped.
    TooLarge {
        declared: usize,
    },
    /// The connection closed (the server exited) before a response.
    Closed,
}

/// What the connection asks of its owner for server-initiated traffic.
pub trait ServerMessages: Send + Sync + 'static {
    /// Answers a server→client request.
    fn on_request(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Box<RawValue>, ErrorObject>;
    /// Takes a server→client notification.
    fn on_notification(&self, method: &str, params: Option<&RawValue>);
}

type Pending = Mutex<HashMap<u64, oneshot::Sender<Reply>>>;

/// What a connection's reader dropped from the server's output, for the
/// `lsp/servers` entry: bytes that were no frame, bodies that were no JSON-RPC,
/// and the warnings about them that the rate limit kept out of the log.
#[derive(Debug, Default)]
pub struct ReadStats {
    garbage_bytes: AtomicU64,
    invalid_messages: AtomicU64,
    suppressed_warnings: AtomicU64,
    logged_warnings: AtomicU64,
}

impl ReadStats {
    /// Bytes skipped because they were not an LSP frame.
    pub fn garbage_bytes(&self) -> u64 {
        self.garbage_bytes.load(Ordering::Relaxed)
    }

    /// Frames whose body was not a JSON-RPC message (dropped).
    pub fn invalid_messages(&self) -> u64 {
        self.invalid_messages.load(Ordering::Relaxed)
    }

    /// Warnings about the server's output that were counted, not logged.
    pub fn suppressed_warnings(&self) -> u64 {
        self.suppressed_warnings.load(Ordering::Relaxed)
    }

    /// Warnings about the server's output that were logged.
    pub fn logged_warnings(&self) -> u64 {
        self.logged_warnings.load(Ordering::Relaxed)
    }
}

/// A live connection. Dropping every handle ends its reader and writer
/// tasks (which closes the server's stdin) and marks it closed.
pub struct Connection {
    writer: mpsc::UnboundedSender<Vec<u8>>,
    pending: Arc<Pending>,
    next_id: AtomicU64,
    closed: CancellationToken,
    /// Ends the server's stdin once what is queued has been written.
    input_done: CancellationToken,
    stats: Arc<ReadStats>,
    /// The reader and writer tasks, owned: nobody can send or wait on a
    /// connection whose last handle is gone, and a server that never closes
    /// its stdout must not keep a reader (and the handler it holds) alive.
    _tasks: [AbortOnDropHandle<()>; 2],
}

impl Drop for Connection {
    fn drop(&mut self) {
        // The reader that would have said so is aborted with its handle.
        self.closed.cancel();
    }
}

impl Connection {
    /// Starts the reader and writer tasks.
    pub fn start<R, W>(
        server_id: &str,
        stdout: R,
        stdin: W,
        limits: Limits,
        handler: Arc<dyn ServerMessages>,
        recorder: Option<Recorder>,
    ) -> Arc<Connection>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        // Unbounded so that deciding a notification never awaits: order is the
        // order of `send` calls. A server that stops reading is caught by the
        // request deadlines.
        let (writer, rx) = mpsc::unbounded_channel();
        let pending: Arc<Pending> = Arc::default();
        let closed = CancellationToken::new();
        let input_done = CancellationToken::new();
        let stats = Arc::new(ReadStats::default());
        let to_server = recorder
            .clone()
            .map(|r| (r, Direction::ProxyToServer(server_id.to_string())));
        let from_server = recorder.map(|r| (r, Direction::ServerToProxy(server_id.to_string())));
        let writing = tokio::spawn(write_frames(
            stdin,
            rx,
            input_done.clone(),
            limits,
            to_server,
        ));
        let reading = tokio::spawn(read_frames(
            Reader {
                server_id: server_id.to_string(),
                writer: writer.clone(),
                pending: Arc::clone(&pending),
                stats: Arc::clone(&stats),
                budget: WarnBudget::new(),
            },
            stdout,
            limits,
            handler,
            closed.clone(),
            from_server,
        ));
        Arc::new(Connection {
            writer,
            pending,
            next_id: AtomicU64::new(1),
            closed,
            input_done,
            stats,
            _tasks: [
                AbortOnDropHandle::new(reading),
                AbortOnDropHandle::new(writing),
            ],
        })
    }

    /// What the reader dropped from the server's output so far.
    pub fn read_stats(&self) -> &ReadStats {
        &self.stats
    }

    /// Sends a notification. Returns false when the connection is closed.
    pub fn notify(&self, method: &str, params: Option<&RawValue>) -> bool {
        self.writer
            .send(jsonrpc::encode_request(None, method, params))
            .is_ok()
    }

    /// Sends a request. Dropping the returned handle before it resolves
    /// sends the server `$/cancelRequest` and forgets the request.
    pub fn request(self: &Arc<Self>, method: &str, params: Option<&RawValue>) -> PendingRequest {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock();
            // Once the reader has ended nothing would ever answer: a request
            // entered now would wait for its deadline. The reader marks the
            // connection closed before clearing the table under this lock, so
            // a request either sees `closed` here or is cleared by the reader.
            // Dropping `tx` resolves the request at once with `Closed`.
            if self.closed.is_cancelled() {
                drop(tx);
            } else {
                pending.insert(id, tx);
            }
        }
        let sent = self
            .writer
            .send(jsonrpc::encode_request(
                Some(&RequestId::from_u64(id)),
                method,
                params,
            ))
            .is_ok();
        if !sent {
            self.pending.lock().remove(&id);
        }
        PendingRequest {
            id,
            rx,
            connection: Arc::clone(self),
            done: false,
            cancel_sent: false,
        }
    }

    /// Closes the server's stdin after everything already queued (e.g. `exit`):
    /// servers that stop on end of input need not wait for a signal. The
    /// reader's own handle on the queue would otherwise keep stdin open.
    pub fn close_input(&self) {
        self.input_done.cancel();
    }

    /// Tells the server to stop working on request `id`.
    pub fn cancel(&self, id: u64) {
        let params = format!("{{\"id\":{id}}}");
        if let Ok(raw) = serde_json::from_str::<&RawValue>(&params) {
            self.notify("$/cancelRequest", Some(raw));
        }
    }

    /// Resolves when the server's output has ended.
    pub fn closed(&self) -> impl Future<Output = ()> + Send + 'static {
        let token = self.closed.clone();
        async move { token.cancelled().await }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Requests awaiting an answer.
    pub fn in_flight(&self) -> usize {
        self.pending.lock().len()
    }
}

/// A request in flight; resolves to its [`Reply`].
pub struct PendingRequest {
    id: u64,
    rx: oneshot::Receiver<Reply>,
    connection: Arc<Connection>,
    done: bool,
    cancel_sent: bool,
}

impl PendingRequest {
    /// The id the server sees.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Sends `$/cancelRequest` (once) and keeps waiting for the server's answer.
    pub fn cancel(&mut self) {
        if !self.cancel_sent && !self.done {
            self.cancel_sent = true;
            self.connection.cancel(self.id);
        }
    }
}

impl Future for PendingRequest {
    type Output = Reply;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Reply> {
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Ready(reply) => {
                self.done = true;
                Poll::Ready(reply.unwrap_or(Reply::Closed))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for PendingRequest {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let removed = self.connection.pending.lock().remove(&self.id).is_some();
        if removed && !self.cancel_sent && !self.connection.is_closed() {
            self.connection.cancel(self.id);
        }
    }
}

async fn write_frames<W: AsyncWrite + Unpin>(
    stdin: W,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    input_done: CancellationToken,
    limits: Limits,
    recorder: Option<(Recorder, Direction)>,
) {
    let mut framed = FramedWrite::new(stdin, ContentLengthCodec::new(limits));
    loop {
        // Queued messages win over the close, so `exit` leaves before end of input.
        let first = tokio::select! {
            biased;
            body = rx.recv() => match body {
                Some(body) => body,
                None => break,
            },
            _ = input_done.cancelled() => break,
        };
        let mut next = Some(first);
        let mut yielded = false;
        while let Some(body) = next.take() {
            if let Some((rec, dir)) = &recorder {
                rec.message(dir, &body);
            }
            if framed.feed(body).await.is_err() {
                return;
            }
            next = rx.try_recv().ok();
            if next.is_none() && !yielded {
                // Requests being prepared right now (the gate's checks run
                // in their callers' tasks) join this write instead of each
                // costing a write and a wake-up of the server of its own.
                yielded = true;
                tokio::task::yield_now().await;
                next = rx.try_recv().ok();
            }
        }
        if SinkExt::<Vec<u8>>::flush(&mut framed).await.is_err() {
            return;
        }
    }
    // Closing stdin tells the server we are done.
    let _ = SinkExt::<Vec<u8>>::close(&mut framed).await;
}

/// The reader task's state.
struct Reader {
    server_id: String,
    writer: mpsc::UnboundedSender<Vec<u8>>,
    pending: Arc<Pending>,
    stats: Arc<ReadStats>,
    /// One budget for every warning about the server's output: a server
    /// writing garbage produces one per 8 KiB skipped (issue 13: 6,400 WARN
    /// lines per 100 MB before this limit).
    budget: WarnBudget,
}

impl Reader {
    /// Logs a warning about the server's output within the rate limit.
    fn warn(&mut self, what: std::fmt::Arguments<'_>) {
        let verdict = self.budget.check();
        if matches!(verdict, Verdict::Log { .. }) {
            self.stats.logged_warnings.fetch_add(1, Ordering::Relaxed);
        }
        match verdict {
            Verdict::Log {
                suppressed_before: 0,
            } => tracing::warn!(server = %self.server_id, "{what}"),
            Verdict::Log { suppressed_before } => tracing::warn!(
                server = %self.server_id,
                suppressed = suppressed_before,
                garbage_bytes = self.stats.garbage_bytes(),
                "{what} (and {suppressed_before} more such warnings not logged)"
            ),
            Verdict::Suppress => {
                self.stats
                    .suppressed_warnings
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn invalid(&mut self, what: std::fmt::Arguments<'_>) {
        self.stats.invalid_messages.fetch_add(1, Ordering::Relaxed);
        self.warn(what);
    }
}

async fn read_frames<R: AsyncRead + Unpin>(
    mut reader: Reader,
    stdout: R,
    limits: Limits,
    handler: Arc<dyn ServerMessages>,
    closed: CancellationToken,
    recorder: Option<(Recorder, Direction)>,
) {
    let mut frames = FramedRead::new(stdout, ContentLengthCodec::new(limits));
    while let Some(frame) = frames.next().await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(e) => {
                tracing::warn!(server = %reader.server_id, error = %e, "reading from server failed");
                break;
            }
        };
        match frame {
            LspFrame::Message(body) => {
                if let Some((rec, dir)) = &recorder {
                    rec.message(dir, &body);
                }
                on_message(&mut reader, &body, &*handler);
            }
            LspFrame::Oversized { declared, prefix } => {
                reader.warn(format_args!(
                    "dropped an oversized message of {declared} bytes"
                ));
                if let Some(id) =
                    shallow::top_level_scalar(&prefix, "id").and_then(|t| t.parse().ok())
                {
                    complete(&reader.pending, id, Reply::TooLarge { declared });
                }
            }
            LspFrame::Malformed { skipped, reason } => {
                reader
                    .stats
                    .garbage_bytes
                    .fetch_add(skipped as u64, Ordering::Relaxed);
                reader.warn(format_args!(
                    "skipped {skipped} bytes that were not an LSP frame: {reason}"
                ));
            }
        }
    }
    // Closed first, then cleared: `Connection::request` checks `closed` under
    // the table lock, so no request can slip in after the clear and wait forever.
    closed.cancel();
    // Dropping the waiting senders answers every caller with `Closed`.
    reader.pending.lock().clear();
}

fn complete(pending: &Pending, id: u64, reply: Reply) {
    let waiter = pending.lock().remove(&id);
    if let Some(waiter) = waiter {
        let _ = waiter.send(reply);
    }
}

fn on_message(reader: &mut Reader, body: &Bytes, handler: &dyn ServerMessages) {
    let kind = match Envelope::parse(body) {
        Ok(envelope) => envelope.kind(),
        Err(e) => {
            reader.invalid(format_args!("server sent invalid JSON: {e}"));
            return;
        }
    };
    match kind {
        Some(Kind::Response { id, outcome }) => {
            let Some(id) = id.as_u64() else {
                reader.invalid(format_args!("response to an id we never sent: {id}"));
                return;
            };
            let reply = match outcome {
                Outcome::Result(result) => Reply::Result(result.to_owned()),
                Outcome::Error(error) => Reply::Error(error.to_owned()),
            };
            complete(&reader.pending, id, reply);
        }
        Some(Kind::Request { id, method, params }) => {
            let response = match handler.on_request(&method, params) {
                Ok(result) => jsonrpc::encode_result(&id, &result),
                Err(error) => jsonrpc::encode_error(Some(&id), &error),
            };
            let _ = reader.writer.send(response);
        }
        Some(Kind::Notification { method, params }) => handler.on_notification(&method, params),
        None => reader.invalid(format_args!("server sent a message that is not JSON-RPC")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
    use tokio_util::codec::{Decoder, Encoder};

    struct Answers;
    impl ServerMessages for Answers {
        fn on_request(
            &self,
            method: &str,
            _params: Option<&RawValue>,
        ) -> Result<Box<RawValue>, ErrorObject> {
            RawValue::from_string(format!("\"answered {method}\"")).map_err(|e| ErrorObject {
                code: -32603,
                message: e.to_string(),
                data: None,
            })
        }
        fn on_notification(&self, _method: &str, _params: Option<&RawValue>) {}
    }

    /// Reads frames written by the connection from the fake server's side.
    async fn next_body(server_in: &mut DuplexStream, buf: &mut BytesMut) -> String {
        let mut codec = ContentLengthCodec::new(Limits::default());
        loop {
            if let Some(LspFrame::Message(body)) = codec.decode(buf).unwrap() {
                return String::from_utf8(body.to_vec()).unwrap();
            }
            let n = server_in.read_buf(buf).await.unwrap();
            assert!(n > 0, "connection closed");
        }
    }

    async fn send(server_out: &mut DuplexStream, body: &str) {
        let mut out = BytesMut::new();
        ContentLengthCodec::new(Limits::default())
            .encode(body, &mut out)
            .unwrap();
        server_out.write_all(&out).await.unwrap();
    }

    /// A connection to a scripted server: (connection, what the server reads, where it writes).
    fn connect(limits: Limits) -> (Arc<Connection>, DuplexStream, DuplexStream) {
        let (conn_out, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, conn_in) = tokio::io::duplex(1 << 16);
        let conn = Connection::start("s", conn_in, conn_out, limits, Arc::new(Answers), None);
        (conn, server_in, server_out)
    }

    #[tokio::test]
    async fn routes_responses_and_answers_server_requests() {
        let (conn, mut server_in, mut server_out) = connect(Limits::default());
        let mut buf = BytesMut::new();
        let first = conn.request("a", None);
        let second = conn.request("b", None);
        assert!(next_body(&mut server_in, &mut buf)
            .await
            .contains(r#""id":1,"method":"a""#));
        assert!(next_body(&mut server_in, &mut buf)
            .await
            .contains(r#""id":2,"method":"b""#));
        // Answered out of order; each caller gets its own.
        send(&mut server_out, r#"{"jsonrpc":"2.0","id":2,"result":[2]}"#).await;
        send(
            &mut server_out,
            r#"{"jsonrpc":"2.0","id":7,"method":"workspace/configuration"}"#,
        )
        .await;
        send(
            &mut server_out,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32801,"message":"m"}}"#,
        )
        .await;
        match second.await {
            Reply::Result(r) => assert_eq!(r.get(), "[2]"),
            other => panic!("{other:?}"),
        }
        match first.await {
            Reply::Error(e) => assert!(e.get().contains("-32801")),
            other => panic!("{other:?}"),
        }
        let answer = next_body(&mut server_in, &mut buf).await;
        assert_eq!(
            answer,
            r#"{"jsonrpc":"2.0","id":7,"result":"answered workspace/configuration"}"#
        );
    }

    #[tokio::test]
    async fn close_input_ends_stdin_after_what_is_queued() {
        let (conn, mut server_in, _server_out) = connect(Limits::default());
        conn.notify("exit", None);
        conn.close_input();
        let mut buf = BytesMut::new();
        assert_eq!(
            next_body(&mut server_in, &mut buf).await,
            r#"{"jsonrpc":"2.0","method":"exit"}"#
        );
        // End of input follows, though the connection (and its reader) lives on.
        let eof = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            server_in.read_buf(&mut buf),
        )
        .await
        .expect("stdin was not closed");
        assert_eq!(eof.unwrap(), 0);
        assert!(buf.is_empty());
        assert!(!conn.is_closed());
    }

    #[tokio::test]
    async fn dropping_the_connection_ends_its_tasks_though_the_server_lives_on() {
        let (conn_out, mut server_in) = tokio::io::duplex(1 << 16);
        let (_server_out, conn_in) = tokio::io::duplex(1 << 16);
        let handler = Arc::new(Answers);
        let as_handler: Arc<dyn ServerMessages> = Arc::clone(&handler) as _;
        let conn = Connection::start("s", conn_in, conn_out, Limits::default(), as_handler, None);
        let closed = conn.closed();
        assert_eq!(
            Arc::strong_count(&handler),
            2,
            "the reader holds the handler"
        );
        // The server keeps its stdout open: only the owner's end can end the tasks.
        drop(conn);
        let mut buf = BytesMut::new();
        let eof = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            server_in.read_buf(&mut buf),
        )
        .await
        .expect("the writer was aborted: stdin closed");
        assert_eq!(eof.unwrap(), 0);
        tokio::time::timeout(std::time::Duration::from_secs(10), closed)
            .await
            .expect("a dropped connection reads as closed");
        // The aborted reader has let go of what it held.
        for _ in 0..100 {
            if Arc::strong_count(&handler) == 1 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(Arc::strong_count(&handler), 1, "the reader still runs");
    }

    #[tokio::test]
    async fn a_dropped_request_is_cancelled_and_eof_closes_the_rest() {
        let (conn, mut server_in, server_out) = connect(Limits::default());
        let mut buf = BytesMut::new();
        let dropped = conn.request("slow", None);
        let kept = conn.request("other", None);
        next_body(&mut server_in, &mut buf).await;
        next_body(&mut server_in, &mut buf).await;
        drop(dropped);
        assert_eq!(
            next_body(&mut server_in, &mut buf).await,
            r#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}"#
        );
        assert_eq!(conn.in_flight(), 1);
        drop(server_out);
        assert!(matches!(kept.await, Reply::Closed));
        conn.closed().await;
        assert!(conn.is_closed());
    }

    #[tokio::test]
    async fn an_oversized_response_fails_its_request_only() {
        let limits = Limits {
            max_lsp_frame: 64,
            ..Limits::default()
        };
        let (conn, mut server_in, mut server_out) = connect(limits);
        let mut buf = BytesMut::new();
        let big = conn.request("big", None);
        let small = conn.request("small", None);
        next_body(&mut server_in, &mut buf).await;
        next_body(&mut server_in, &mut buf).await;
        let huge = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":"{}"}}"#,
            "x".repeat(1000)
        );
        send(&mut server_out, &huge).await;
        send(&mut server_out, r#"{"jsonrpc":"2.0","id":2,"result":1}"#).await;
        assert!(matches!(big.await, Reply::TooLarge { declared } if declared == huge.len()));
        assert!(matches!(small.await, Reply::Result(_)));
    }

    /// The server's stdin, counting the writes that reach it.
    struct CountedWrites {
        inner: DuplexStream,
        writes: Arc<AtomicU64>,
    }

    impl AsyncWrite for CountedWrites {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            let written = Pin::new(&mut self.inner).poll_write(cx, buf);
            if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
                self.writes.fetch_add(1, Ordering::Relaxed);
            }
            written
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.inner).poll_flush(cx)
        }

        fn poll_shutdown(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.inner).poll_shutdown(cx)
        }
    }

    /// A message queued while the writer holds another (a request whose
    /// caller was still finishing the gate's checks) leaves in the same
    /// write, not in a write and a server wake-up of its own.
    #[tokio::test]
    async fn a_message_queued_while_the_writer_works_joins_its_write() {
        let (conn_out, mut server_in) = tokio::io::duplex(1 << 16);
        let (_server_out, conn_in) = tokio::io::duplex(1 << 16);
        let writes = Arc::new(AtomicU64::new(0));
        let stdin = CountedWrites {
            inner: conn_out,
            writes: Arc::clone(&writes),
        };
        let conn = Connection::start(
            "s",
            conn_in,
            stdin,
            Limits::default(),
            Arc::new(Answers),
            None,
        );
        conn.notify("a", None);
        // The writer takes `a` (this test's runtime has one thread, so it
        // runs now); `b` is queued while it holds `a`.
        tokio::task::yield_now().await;
        conn.notify("b", None);
        let mut buf = BytesMut::new();
        assert!(next_body(&mut server_in, &mut buf)
            .await
            .contains(r#""method":"a""#));
        assert!(next_body(&mut server_in, &mut buf)
            .await
            .contains(r#""method":"b""#));
        assert_eq!(writes.load(Ordering::Relaxed), 1, "a and b in one write");
    }
}
