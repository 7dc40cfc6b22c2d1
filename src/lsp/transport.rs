//! How acp-lsp reaches a language server: a [`Link`] is either a child
//! process (`lsp::process`) or a connection to a server that is already
//! running (`connect = tcp:// | unix: | ws:// | wss://`, `lsp::remote`). Both
//! give the byte streams `lsp::connection` speaks Content-Length JSON-RPC
//! over; for a connection, a pump task between those streams and the socket
//! applies `path_map` to every message and, over WebSocket, carries one
//! message per text frame.

use super::path_map::PathMap;
use super::process::{ServerProcess, SpawnSpec, Termination};
use super::remote::{Endpoint, Remote, TokenVia};
use crate::jsonrpc::content_length::{ContentLengthCodec, LspFrame};
use crate::jsonrpc::{shallow, Limits};
use futures::{SinkExt, StreamExt};
use std::fmt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest, http, Message};
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;

/// Longest wait for a remote server's connection (TCP, TLS and the
/// WebSocket upgrade together).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// TCP keepalive on a remote server's connection: probes start after this
/// much silence, so that a peer that vanished without closing (a dropped
/// VPN, a suspended host) ends the connection and the server is restarted,
/// instead of every request waiting out its deadline. With
/// [`KEEPALIVE_INTERVAL`] and [`KEEPALIVE_RETRIES`]: noticed within about a minute.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
/// Pause between two keepalive probes.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// Unanswered probes before the connection is declared dead.
pub const KEEPALIVE_RETRIES: u32 = 3;

/// Bytes in flight between `lsp::connection` and a remote link's pump.
const PIPE_BYTES: usize = 256 * 1024;

/// Ends an error that restarting cannot fix (a refused token, a token
/// variable that is not set): the supervisor marks the server failed at once.
pub const NOT_RETRIED: &str = "(not retried)";

/// Whether the supervisor should not restart after `error`.
pub fn not_retried(error: &str) -> bool {
    error.contains(NOT_RETRIED)
}

/// The streams a [`Link`] gives `lsp::connection` (named as a child's).
pub struct LinkIo {
    pub stdout: Box<dyn AsyncRead + Send + Unpin>,
    pub stdin: Box<dyn AsyncWrite + Send + Unpin>,
}

/// How a link ended.
#[derive(Debug, Clone)]
pub enum LinkStatus {
    Exited(ExitStatus),
    /// A remote connection ended; why.
    Closed(String),
}

impl fmt::Display for LinkStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkStatus::Exited(status) => status.fmt(f),
            LinkStatus::Closed(why) => f.write_str(why),
        }
    }
}

/// How [`Link::terminate`] ended a link.
#[derive(Debug)]
pub enum LinkEnd {
    Process(Termination),
    Closed(String),
}

impl LinkEnd {
    pub fn exit_status(&self) -> Option<LinkStatus> {
        match self {
            LinkEnd::Process(t) => t.exit_status().map(LinkStatus::Exited),
            LinkEnd::Closed(why) => Some(LinkStatus::Closed(why.clone())),
        }
    }
}

/// A running server as the supervisor holds it.
// tokio's Windows `Child` is large; there is one `Link` per server.
#[cfg_attr(windows, allow(clippy::large_enum_variant))]
pub enum Link {
    Process(ServerProcess),
    Remote(RemoteLink),
}

/// A connection's pump and why it ended.
pub struct RemoteLink {
    pump: Option<JoinHandle<String>>,
    ended: Option<String>,
    cancel: CancellationToken,
}

impl RemoteLink {
    async fn wait(&mut self) -> String {
        if let Some(pump) = self.pump.take() {
            let why = pump
                .await
                .unwrap_or_else(|e| format!("connection task failed: {e}"));
            self.ended = Some(why);
        }
        self.ended.clone().unwrap_or_default()
    }
}

impl Link {
    /// Starts the child, or connects to `remote`.
    pub async fn open(
        name: &str,
        remote: Option<&Remote>,
        spawn: &SpawnSpec,
        limits: Limits,
    ) -> Result<(Link, LinkIo), String> {
        let Some(remote) = remote else {
            let (process, io) = ServerProcess::spawn(name, spawn).map_err(|e| e.to_string())?;
            let io = LinkIo {
                stdout: Box::new(io.stdout),
                stdin: Box::new(io.stdin),
            };
            return Ok((Link::Process(process), io));
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, connect(remote, limits)).await {
            Ok(Ok((link, io))) => {
                tracing::info!(server = %name, connect = %remote.connect, "connected to the remote server");
                Ok((Link::Remote(link), io))
            }
            Ok(Err(e)) => Err(format!("cannot connect to {}: {e}", remote.connect)),
            Err(_) => Err(format!(
                "cannot connect to {}: no connection within {} s",
                remote.connect,
                CONNECT_TIMEOUT.as_secs()
            )),
        }
    }

    pub fn pid(&self) -> Option<u32> {
        match self {
            Link::Process(p) => p.pid(),
            Link::Remote(_) => None,
        }
    }

    /// Resolves when the process exits or the connection ends.
    pub async fn wait(&mut self) -> std::io::Result<LinkStatus> {
        match self {
            Link::Process(p) => p.wait().await.map(LinkStatus::Exited),
            Link::Remote(r) => Ok(LinkStatus::Closed(r.wait().await)),
        }
    }

    pub fn kill_group_now(&mut self) {
        match self {
            Link::Process(p) => p.kill_group_now(),
            Link::Remote(r) => r.cancel.cancel(),
        }
    }

    /// A remote link has no stderr.
    pub fn stderr_tail(&self) -> String {
        match self {
            Link::Process(p) => p.stderr_tail(),
            Link::Remote(_) => String::new(),
        }
    }

    /// After the input was closed: the child is given `grace` to exit, then
    /// signalled; the connection `grace` to deliver what is queued, then
    /// dropped.
    pub async fn terminate(&mut self, grace: Duration) -> LinkEnd {
        match self {
            Link::Process(p) => LinkEnd::Process(p.terminate(grace).await),
            Link::Remote(r) => {
                let why = match tokio::time::timeout(grace, r.wait()).await {
                    Ok(why) => why,
                    Err(_) => {
                        r.cancel.cancel();
                        r.wait().await
                    }
                };
                LinkEnd::Closed(why)
            }
        }
    }
}

/// Connects, then starts the pump; the returned streams are its other end.
async fn connect(remote: &Remote, limits: Limits) -> Result<(RemoteLink, LinkIo), String> {
    let endpoint = remote.endpoint()?;
    let map = PathMap::new(&remote.path_map);
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    let cancel = CancellationToken::new();
    let pump = match endpoint {
        Endpoint::Tcp(address) => {
            let stream = tokio::net::TcpStream::connect(&address)
                .await
                .map_err(|e| e.to_string())?;
            let _ = stream.set_nodelay(true);
            keep_alive(&stream);
            tokio::spawn(pump_bytes(stream, theirs, map, limits, cancel.clone()))
        }
        #[cfg(unix)]
        Endpoint::Unix(path) => {
            let stream = tokio::net::UnixStream::connect(&path)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(pump_bytes(stream, theirs, map, limits, cancel.clone()))
        }
        // tokio has no AF_UNIX on Windows.
        #[cfg(windows)]
        Endpoint::Unix(path) => {
            return Err(format!(
                "unix:{} : Unix sockets are not supported on Windows; use tcp:// or ws://",
                path.display()
            ))
        }
        Endpoint::WebSocket(url) => {
            let request = upgrade_request(remote, &url)?;
            let config = tungstenite::protocol::WebSocketConfig::default()
                .max_message_size(Some(limits.max_lsp_frame))
                .max_frame_size(Some(limits.max_lsp_frame));
            let connector = match &remote.tls_ca_file {
                None => None,
                Some(file) => Some(tokio_tungstenite::Connector::Rustls(Arc::new(tls_config(
                    file,
                )?))),
            };
            let (socket, _) = tokio_tungstenite::connect_async_tls_with_config(
                request,
                Some(config),
                true,
                connector,
            )
            .await
            .map_err(refusal)?;
            match socket.get_ref() {
                tokio_tungstenite::MaybeTlsStream::Plain(tcp) => keep_alive(tcp),
                tokio_tungstenite::MaybeTlsStream::Rustls(tls) => keep_alive(tls.get_ref().0),
                _ => {}
            }
            tokio::spawn(pump_websocket(socket, theirs, map, limits, cancel.clone()))
        }
    };
    let (stdout, stdin) = tokio::io::split(ours);
    Ok((
        RemoteLink {
            pump: Some(pump),
            ended: None,
            cancel,
        },
        LinkIo {
            stdout: Box::new(stdout),
            stdin: Box::new(stdin),
        },
    ))
}

/// Turns on TCP keepalive ([`KEEPALIVE_IDLE`]); a failure only costs the
/// early notice of a dead peer.
fn keep_alive(stream: &tokio::net::TcpStream) {
    let params = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_RETRIES);
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_keepalive(&params) {
        tracing::debug!(error = %e, "TCP keepalive not set");
    }
}

/// The WebSocket upgrade request, with the token where `token_via` says.
fn upgrade_request(remote: &Remote, url: &str) -> Result<http::Request<()>, String> {
    let mut request = url.into_client_request().map_err(|e| e.to_string())?;
    let token = match &remote.token_env {
        None => None,
        Some(name) => match std::env::var(name) {
            Ok(token) if !token.is_empty() => Some(token),
            _ => {
                return Err(format!(
                    "the token variable {name} (token_env) is not set {NOT_RETRIED}"
                ))
            }
        },
    };
    let mut protocols: Vec<String> = remote.subprotocol.iter().cloned().collect();
    if let Some(token) = token {
        match remote.token_via {
            TokenVia::Header => {
                let value =
                    http::HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                        format!(
                            "the token in {} is not a valid header value {NOT_RETRIED}",
                            remote.token_env.as_deref().unwrap_or_default()
                        )
                    })?;
                request
                    .headers_mut()
                    .insert(http::header::AUTHORIZATION, value);
            }
            TokenVia::Subprotocol => protocols.push(token),
        }
    }
    if !protocols.is_empty() {
        let value = http::HeaderValue::from_str(&protocols.join(", "))
            .map_err(|_| format!("the token is not a valid subprotocol value {NOT_RETRIED}"))?;
        request
            .headers_mut()
            .insert(http::header::SEC_WEBSOCKET_PROTOCOL, value);
    }
    Ok(request)
}

/// The public roots and the certificates of `tls_ca_file`.
fn tls_config(file: &Path) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let unreadable = |e: &dyn fmt::Display| {
        format!(
            "tls_ca_file {} is not readable as PEM certificates: {e} {NOT_RETRIED}",
            file.display()
        )
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let mut added = 0;
    for cert in CertificateDer::pem_file_iter(file).map_err(|e| unreadable(&e))? {
        let cert = cert.map_err(|e| unreadable(&e))?;
        roots.add(cert).map_err(|e| unreadable(&e))?;
        added += 1;
    }
    if added == 0 {
        return Err(unreadable(&"no certificate in the file"));
    }
    // The provider named, not inferred: another crate turning on a second
    // provider would make the inferred default panic.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// A failed upgrade, saying so plainly when the server refused the token.
fn refusal(error: tungstenite::Error) -> String {
    match error {
        tungstenite::Error::Http(response) => {
            let status = response.status();
            if status == http::StatusCode::UNAUTHORIZED || status == http::StatusCode::FORBIDDEN {
                format!("the server refused the connection: HTTP {status} (check token_env and token_via) {NOT_RETRIED}")
            } else {
                format!("the WebSocket upgrade was answered HTTP {status}")
            }
        }
        other => other.to_string(),
    }
}

/// The answer to a request whose response was over the frame limit: the
/// pump cannot pass the frame on, so the request fails now, not at its deadline.
fn too_large(prefix: &[u8], declared: usize) -> Option<Vec<u8>> {
    let id = shallow::top_level_scalar(prefix, "id")?;
    Some(
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32603,"message":"the server's response of {declared} bytes is over the frame limit"}}}}"#
        )
        .into_bytes(),
    )
}

/// Content-Length frames both ways (TCP, Unix socket).
async fn pump_bytes<S>(
    socket: S,
    pipe: DuplexStream,
    map: PathMap,
    limits: Limits,
    cancel: CancellationToken,
) -> String
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (socket_in, socket_out) = tokio::io::split(socket);
    let (pipe_in, pipe_out) = tokio::io::split(pipe);
    let mut from_server = FramedRead::new(socket_in, ContentLengthCodec::new(limits));
    let mut to_server = FramedWrite::new(socket_out, ContentLengthCodec::new(limits));
    let mut from_us = FramedRead::new(pipe_in, ContentLengthCodec::new(limits));
    let mut to_us = FramedWrite::new(pipe_out, ContentLengthCodec::new(limits));
    let up = async {
        while let Some(frame) = from_us.next().await {
            if let Ok(LspFrame::Message(body)) = frame {
                if let Err(e) = to_server.send(map.to_remote(&body)).await {
                    return format!("connection lost: {e}");
                }
            }
        }
        let _ = SinkExt::<&[u8]>::close(&mut to_server).await;
        "connection closed by acp-lsp".to_string()
    };
    let down = async {
        while let Some(frame) = from_server.next().await {
            let body = match frame {
                Ok(LspFrame::Message(body)) => map.to_local(&body).into_owned(),
                Ok(LspFrame::Oversized { declared, prefix }) => {
                    match too_large(&prefix, declared) {
                        Some(answer) => answer,
                        None => continue,
                    }
                }
                // What is not a frame is skipped here, as a child's garbage is.
                Ok(LspFrame::Malformed { .. }) => continue,
                Err(e) => return format!("connection lost: {e}"),
            };
            if to_us.send(body).await.is_err() {
                return "connection closed by acp-lsp".to_string();
            }
        }
        "connection closed by the remote server".to_string()
    };
    tokio::select! {
        why = up => why,
        why = down => why,
        _ = cancel.cancelled() => "connection dropped by acp-lsp".to_string(),
    }
}

/// One message per WebSocket text frame toward the server; text (or
/// binary) frames from it become Content-Length frames toward us.
async fn pump_websocket<S>(
    socket: tokio_tungstenite::WebSocketStream<S>,
    pipe: DuplexStream,
    map: PathMap,
    limits: Limits,
    cancel: CancellationToken,
) -> String
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut to_server, mut from_server) = socket.split();
    let (pipe_in, pipe_out) = tokio::io::split(pipe);
    let mut from_us = FramedRead::new(pipe_in, ContentLengthCodec::new(limits));
    let mut to_us = FramedWrite::new(pipe_out, ContentLengthCodec::new(limits));
    let up = async {
        while let Some(frame) = from_us.next().await {
            if let Ok(LspFrame::Message(body)) = frame {
                let text = String::from_utf8_lossy(&map.to_remote(&body)).into_owned();
                if let Err(e) = to_server.send(Message::text(text)).await {
                    return format!("connection lost: {e}");
                }
            }
        }
        let _ = to_server.close().await;
        "connection closed by acp-lsp".to_string()
    };
    let down = async {
        while let Some(message) = from_server.next().await {
            let body = match message {
                Ok(Message::Text(text)) => map.to_local(text.as_bytes()).into_owned(),
                Ok(Message::Binary(bytes)) => map.to_local(&bytes).into_owned(),
                Ok(Message::Close(frame)) => {
                    return match frame {
                        Some(f) if !f.reason.is_empty() => {
                            format!(
                                "connection closed by the remote server: {} ({})",
                                f.reason, f.code
                            )
                        }
                        _ => "connection closed by the remote server".to_string(),
                    }
                }
                Ok(_) => continue,
                Err(e) => return format!("connection lost: {e}"),
            };
            if to_us.send(body).await.is_err() {
                return "connection closed by acp-lsp".to_string();
            }
        }
        "connection closed by the remote server".to_string()
    };
    tokio::select! {
        why = up => why,
        why = down => why,
        _ = cancel.cancelled() => "connection dropped by acp-lsp".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsp::path_map::PathMapping;
    use crate::test_paths::{os_pathbuf, os_uri};
    use bytes::BytesMut;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_util::codec::{Decoder, Encoder};

    fn frame(body: &str) -> Vec<u8> {
        let mut out = BytesMut::new();
        ContentLengthCodec::new(Limits::default())
            .encode(body, &mut out)
            .unwrap();
        out.to_vec()
    }

    async fn next_body<R: AsyncRead + Unpin>(from: &mut R, buf: &mut BytesMut) -> String {
        let mut codec = ContentLengthCodec::new(Limits::default());
        loop {
            if let Some(LspFrame::Message(body)) = codec.decode(buf).unwrap() {
                return String::from_utf8(body.to_vec()).unwrap();
            }
            assert!(from.read_buf(buf).await.unwrap() > 0, "closed");
        }
    }

    #[tokio::test]
    async fn the_byte_pump_maps_both_ways_and_reports_the_remote_close() {
        let (socket, mut server) = tokio::io::duplex(1 << 16);
        let (mut ours, theirs) = tokio::io::duplex(1 << 16);
        let map = PathMap::new(&[PathMapping {
            local: os_pathbuf("/home/me/p"),
            remote: os_pathbuf("/srv/p"),
        }]);
        let pump = tokio::spawn(pump_bytes(
            socket,
            theirs,
            map,
            Limits::default(),
            CancellationToken::new(),
        ));
        let body = |uri: &str| format!(r#"{{"uri":"{}"}}"#, os_uri(uri));
        ours.write_all(&frame(&body("/home/me/p/a.py")))
            .await
            .unwrap();
        let mut buf = BytesMut::new();
        assert_eq!(next_body(&mut server, &mut buf).await, body("/srv/p/a.py"));
        let unmapped = r#""o":"/srv/q""#;
        let answer = |uri: &str| format!(r#"{{"uri":"{}",{unmapped}}}"#, os_uri(uri));
        server
            .write_all(&frame(&answer("/srv/p/b.py")))
            .await
            .unwrap();
        let mut buf = BytesMut::new();
        assert_eq!(
            next_body(&mut ours, &mut buf).await,
            answer("/home/me/p/b.py")
        );
        drop(server);
        assert_eq!(
            pump.await.unwrap(),
            "connection closed by the remote server"
        );
    }

    #[tokio::test]
    async fn an_oversized_answer_fails_its_request_through_the_pump() {
        let limits = Limits {
            max_lsp_frame: 64,
            ..Limits::default()
        };
        let (socket, mut server) = tokio::io::duplex(1 << 16);
        let (mut ours, theirs) = tokio::io::duplex(1 << 16);
        let _pump = tokio::spawn(pump_bytes(
            socket,
            theirs,
            PathMap::default(),
            limits,
            CancellationToken::new(),
        ));
        let huge = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":"{}"}}"#,
            "x".repeat(500)
        );
        server.write_all(&frame(&huge)).await.unwrap();
        let mut buf = BytesMut::new();
        let answer: serde_json::Value =
            serde_json::from_str(&next_body(&mut ours, &mut buf).await).unwrap();
        assert_eq!(answer["id"], 7);
        assert!(answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("over the frame limit"));
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn keepalive_is_on_with_the_named_idle_time() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let socket = socket2::SockRef::from(&stream);
        assert!(!socket.keepalive().unwrap());
        keep_alive(&stream);
        assert!(socket.keepalive().unwrap());
        assert_eq!(socket.tcp_keepalive_time().unwrap(), KEEPALIVE_IDLE);
        assert_eq!(socket.tcp_keepalive_retries().unwrap(), KEEPALIVE_RETRIES);
    }

    #[test]
    fn a_remote_server_is_given_no_process_id() {
        use crate::lsp::config::ServerConfig;
        let mut config = ServerConfig::new("p", "p", &[], &["python"], &["py"], &[]);
        let params = |c: &ServerConfig| -> serde_json::Value {
            serde_json::from_str(crate::lsp::handshake::initialize_params(c, Path::new("/w")).get())
                .unwrap()
        };
        assert_eq!(params(&config)["processId"], std::process::id());
        config.remote = Some(Remote {
            connect: "tcp://h:1".into(),
            token_env: None,
            token_via: TokenVia::Header,
            subprotocol: None,
            tls_ca_file: None,
            path_map: Vec::new(),
        });
        assert_eq!(params(&config)["processId"], serde_json::Value::Null);
    }

    #[test]
    fn the_token_goes_where_token_via_says_and_a_missing_one_is_not_retried() {
        let mut remote = Remote {
            connect: "ws://h:1/lsp".into(),
            token_env: Some("ACP_LSP_UNIT_TOKEN".into()),
            token_via: TokenVia::Header,
            subprotocol: Some("lsp".into()),
            tls_ca_file: None,
            path_map: Vec::new(),
        };
        std::env::set_var("ACP_LSP_UNIT_TOKEN", "t0k");
        let request = upgrade_request(&remote, "ws://h:1/lsp").unwrap();
        assert_eq!(request.headers()["authorization"], "Bearer t0k");
        assert_eq!(request.headers()["sec-websocket-protocol"], "lsp");
        remote.token_via = TokenVia::Subprotocol;
        let request = upgrade_request(&remote, "ws://h:1/lsp").unwrap();
        assert!(request.headers().get("authorization").is_none());
        assert_eq!(request.headers()["sec-websocket-protocol"], "lsp, t0k");
        remote.token_env = Some("ACP_LSP_UNIT_TOKEN_UNSET".into());
        let error = upgrade_request(&remote, "ws://h:1/lsp").unwrap_err();
        assert!(not_retried(&error), "{error}");
    }
}
