//! Language servers reached over the network (`connect`): a real pyright
//! behind a small bridge written here, which serves it on a TCP port, a
//! Unix socket or a WebSocket, running in *another copy* of the project so
//! that `path_map` has to translate every URI. Driven through the gate as
//! an agent would; a missing pyright fails the test, nothing skips.
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]
#![cfg(target_os = "linux")]

mod support;

use support::recorded::{file_uri, fixture_copy, request_params, uri_path, SESSION_ID};
use support::require;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use acp_lsp::lsp::config::Config;
use acp_lsp::lsp::registry::{Registry, RegistryOptions};
use acp_lsp_core::gate::{Gate, GateConfig, GateMethod, ServerState};
use acp_lsp_core::jsonrpc::content_length::{ContentLengthCodec, LspFrame};
use acp_lsp_core::jsonrpc::{Limits, RequestId};
use futures::{SinkExt, StreamExt};
use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::process::{Child, Command};
use tokio_rustls::rustls;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::{http, Message};
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;

const PYRIGHT: &str = "pyright-langserver";
const INSTALL: &str = "npm i -g pyright";
/// Upper bound on one gate call (above the gate's own deadline).
const CALL_TIMEOUT: Duration = Duration::from_secs(150);
/// Longest wait for a server state.
const STATE_TIMEOUT: Duration = Duration::from_secs(120);
/// `waitUntilReady` of a first request, in milliseconds.
const WAIT_UNTIL_READY_MS: u64 = 60_000;

/// How the bridge serves pyright.
#[derive(Clone)]
enum Serve {
    Tcp,
    Unix,
    /// `token`: what `Authorization: Bearer` (or, with `subprotocol`, an
    /// offered subprotocol) must carry.
    WebSocket {
        token: Option<String>,
        subprotocol: Option<String>,
        /// `wss://`: TLS with this server configuration.
        tls: Option<Arc<rustls::ServerConfig>>,
    },
}

/// What the bridge's connections share.
struct Shared {
    /// Where pyright runs (the remote copy).
    dir: PathBuf,
    serve: Serve,
    /// One per open connection: cancelling it ends the connection and its pyright.
    live: Mutex<Vec<CancellationToken>>,
    accepted: AtomicU64,
    /// Connections refused (token, TLS) before any LSP traffic.
    refused: AtomicU64,
}

/// A real pyright per accepted connection, started in the remote copy.
struct Bridge {
    /// `tcp://…`, `unix:…`, `ws://…` or `wss://…`.
    connect: String,
    shared: Arc<Shared>,
    stop: CancellationToken,
    _socket_dir: tempfile::TempDir,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.stop.cancel();
        self.drop_connections();
    }
}

impl Bridge {
    async fn start(serve: Serve, dir: &Path) -> Bridge {
        let socket_dir = tempfile::tempdir().expect("socket dir");
        let stop = CancellationToken::new();
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            serve: serve.clone(),
            live: Mutex::new(Vec::new()),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        });
        let connect = match &serve {
            Serve::Unix => {
                let path = socket_dir.path().join("pyright.sock");
                let listener = tokio::net::UnixListener::bind(&path).expect("bind unix socket");
                let (shared, stop) = (Arc::clone(&shared), stop.clone());
                tokio::spawn(async move {
                    loop {
                        let (stream, _) = tokio::select! {
                            a = listener.accept() => a.expect("accept"),
                            _ = stop.cancelled() => return,
                        };
                        serve_bytes(stream, &shared);
                    }
                });
                format!("unix:{}", path.display())
            }
            Serve::Tcp | Serve::WebSocket { .. } => {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind");
                let port = listener.local_addr().expect("address").port();
                let (shared, stop) = (Arc::clone(&shared), stop.clone());
                tokio::spawn(async move {
                    loop {
                        let (stream, _) = tokio::select! {
                            a = listener.accept() => a.expect("accept"),
                            _ = stop.cancelled() => return,
                        };
                        match &shared.serve {
                            Serve::WebSocket { .. } => serve_websocket(stream, &shared),
                            _ => serve_bytes(stream, &shared),
                        }
                    }
                });
                match serve {
                    Serve::Tcp => format!("tcp://127.0.0.1:{port}"),
                    Serve::WebSocket { tls: Some(_), .. } => format!("wss://localhost:{port}/lsp"),
                    _ => format!("ws://127.0.0.1:{port}/lsp"),
                }
            }
        };
        Bridge {
            connect,
            shared,
            stop,
            _socket_dir: socket_dir,
        }
    }

    fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    fn refused(&self) -> u64 {
        self.shared.refused.load(Ordering::SeqCst)
    }

    /// Ends every open connection (and its pyright), as a network failure would.
    fn drop_connections(&self) {
        for c in self.shared.live.lock().drain(..) {
            c.cancel();
        }
    }
}

/// pyright for one connection, and the token that ends both.
fn pyright(shared: &Shared) -> (Child, CancellationToken) {
    let child = Command::new(PYRIGHT)
        .arg("--stdio")
        .current_dir(&shared.dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start pyright-langserver");
    shared.accepted.fetch_add(1, Ordering::SeqCst);
    let cancel = CancellationToken::new();
    shared.live.lock().push(cancel.clone());
    (child, cancel)
}

/// The connection's bytes to and from pyright's stdio, unchanged.
fn serve_bytes<S>(stream: S, shared: &Shared)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut child, cancel) = pyright(shared);
    let stdio = tokio::io::join(
        child.stdout.take().expect("stdout"),
        child.stdin.take().expect("stdin"),
    );
    tokio::spawn(async move {
        let mut stream = stream;
        let mut stdio = stdio;
        tokio::select! {
            _ = tokio::io::copy_bidirectional(&mut stream, &mut stdio) => {}
            _ = cancel.cancelled() => {}
        }
        let _ = child.kill().await;
    });
}

/// TLS first for `wss://`, then [`websocket_session`].
fn serve_websocket(stream: tokio::net::TcpStream, shared: &Arc<Shared>) {
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        let Serve::WebSocket { tls, .. } = &shared.serve else {
            return;
        };
        match tls {
            None => websocket_session(stream, &shared).await,
            Some(config) => {
                match tokio_rustls::TlsAcceptor::from(Arc::clone(config))
                    .accept(stream)
                    .await
                {
                    Ok(stream) => websocket_session(stream, &shared).await,
                    Err(_) => {
                        shared.refused.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }
    });
}

/// A WebSocket that checks the token, then one text message per LSP message.
async fn websocket_session<S>(stream: S, shared: &Shared)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let Serve::WebSocket {
        token, subprotocol, ..
    } = &shared.serve
    else {
        return;
    };
    // The callback's type is tungstenite's (`Callback`): its error is an HTTP response.
    #[allow(clippy::result_large_err)]
    let check = |request: &Request, mut response: Response| -> Result<Response, ErrorResponse> {
        let header = |name: http::header::HeaderName| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        let offered = header(http::header::SEC_WEBSOCKET_PROTOCOL);
        let offered: Vec<&str> = offered.split(',').map(str::trim).collect();
        let allowed = match (token, subprotocol) {
            (None, _) => true,
            (Some(t), None) => header(http::header::AUTHORIZATION) == format!("Bearer {t}"),
            (Some(t), Some(_)) => offered.contains(&t.as_str()),
        };
        if !allowed {
            // Counted here, before tungstenite writes the 401: the client may see
            // the refusal (and the test read the count) before accept returns.
            shared.refused.fetch_add(1, Ordering::SeqCst);
            let mut refusal = ErrorResponse::new(Some("unauthorized".to_string()));
            *refusal.status_mut() = http::StatusCode::UNAUTHORIZED;
            return Err(refusal);
        }
        if let Some(sub) = subprotocol {
            assert!(offered.contains(&sub.as_str()), "{offered:?}");
            response.headers_mut().insert(
                http::header::SEC_WEBSOCKET_PROTOCOL,
                http::HeaderValue::from_str(sub).expect("a header value"),
            );
        }
        Ok(response)
    };
    // A refusal was counted in `check`; a broken handshake is not a refusal.
    let Ok(socket) = tokio_tungstenite::accept_hdr_async(stream, check).await else {
        return;
    };
    let (mut child, cancel) = pyright(shared);
    let mut to_pyright = FramedWrite::new(
        child.stdin.take().expect("stdin"),
        ContentLengthCodec::new(Limits::default()),
    );
    let mut from_pyright = FramedRead::new(
        child.stdout.take().expect("stdout"),
        ContentLengthCodec::new(Limits::default()),
    );
    let (mut ws_out, mut ws_in) = socket.split();
    let up = async {
        while let Some(Ok(message)) = ws_in.next().await {
            if let Message::Text(text) = message {
                if to_pyright.send(text.as_bytes()).await.is_err() {
                    break;
                }
            }
        }
    };
    let down = async {
        while let Some(Ok(LspFrame::Message(body))) = from_pyright.next().await {
            let text = String::from_utf8(body.to_vec()).expect("pyright writes UTF-8");
            if ws_out.send(Message::text(text)).await.is_err() {
                break;
            }
        }
    };
    tokio::select! {
        _ = up => {}
        _ = down => {}
        _ = cancel.cancelled() => {}
    }
    let _ = child.kill().await;
}

/// A registry whose pyright is the remote one, with a session on `root`.
struct Harness {
    root: PathBuf,
    registry: Arc<Registry>,
    gate: Arc<Gate<Registry>>,
    next_id: AtomicU64,
    _config_dir: tempfile::TempDir,
}

impl Harness {
    /// `pyright_keys`: TOML lines of `[servers.pyright]`.
    fn start(root: &Path, pyright_keys: &str) -> Harness {
        let config_dir = tempfile::tempdir().expect("config dir");
        let path = config_dir.path().join("config.toml");
        std::fs::write(&path, format!("[servers.pyright]\n{pyright_keys}\n"))
            .expect("write config");
        let config = Config::load(Some(&path)).expect("the config loads");
        let registry = Registry::new(config, RegistryOptions::default());
        let gate = Gate::new(Arc::clone(&registry), GateConfig::default());
        gate.open_session(SESSION_ID, vec![root.to_path_buf()]);
        Harness {
            root: root.to_path_buf(),
            registry,
            gate,
            next_id: AtomicU64::new(1),
            _config_dir: config_dir,
        }
    }

    async fn response(&self, method: GateMethod, params: Value) -> Value {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let id = RawValue::from_string(n.to_string()).expect("JSON");
        let raw = RawValue::from_string(params.to_string()).expect("JSON");
        let bytes = tokio::time::timeout(
            CALL_TIMEOUT,
            self.gate.call(RequestId::from_raw(&id), method, Some(raw)),
        )
        .await
        .unwrap_or_else(|_| panic!("no answer to {params}"));
        serde_json::from_slice(&bytes).expect("JSON answer")
    }

    /// The pyright entry of `lsp/servers`.
    async fn entry(&self) -> Value {
        let response = self
            .response(GateMethod::Servers, json!({ "sessionId": SESSION_ID }))
            .await;
        response["result"]["servers"]
            .as_array()
            .and_then(|s| s.iter().find(|e| e["name"] == "pyright"))
            .cloned()
            .unwrap_or_else(|| panic!("no pyright entry: {response}"))
    }

    async fn request(&self, server_id: &str, method: &str, params: Value, wait: bool) -> Value {
        let wait = wait.then_some(WAIT_UNTIL_READY_MS);
        self.response(
            GateMethod::Request,
            request_params(server_id, method, params, wait),
        )
        .await
    }

    /// A definition request without waiting is refused: the server is not running.
    async fn assert_refused_not_running(&self, server_id: &str) {
        let answer = self
            .request(
                server_id,
                "textDocument/definition",
                self.at("shapes/report.py", 4, "rect_area"),
                false,
            )
            .await;
        assert_eq!(
            answer["error"]["data"]["reason"], "server_not_running",
            "{answer}"
        );
    }

    fn at(&self, file: &str, line: u32, needle: &str) -> Value {
        let text = std::fs::read_to_string(self.root.join(file)).expect("read fixture");
        let character = text
            .lines()
            .nth(line as usize)
            .and_then(|l| l.find(needle))
            .unwrap_or_else(|| panic!("{file}:{line} has no {needle}"));
        json!({
            "textDocument": { "uri": file_uri(&self.root.join(file)) },
            "position": { "line": line, "character": character },
        })
    }

    /// (file relative to the local root, line) of each location; panics on
    /// a URI outside the local root (a remote path that was not mapped back).
    fn locations(&self, result: &Value) -> Vec<(String, u64)> {
        let items = match result {
            Value::Array(items) => items.clone(),
            other => vec![other.clone()],
        };
        let mut out: Vec<(String, u64)> = items
            .iter()
            .map(|item| {
                let uri = item["uri"]
                    .as_str()
                    .unwrap_or_else(|| panic!("no uri: {item}"));
                let path = uri_path(uri);
                let relative = path.strip_prefix(&self.root).unwrap_or_else(|_| {
                    panic!("{uri} is not under the local root {}", self.root.display())
                });
                (
                    relative.to_string_lossy().into_owned(),
                    item["range"]["start"]["line"].as_u64().expect("a line"),
                )
            })
            .collect();
        out.sort();
        out
    }

    /// Definition of `rect_area` at its use in report.py: geometry.py at
    /// `line` (1 in the remote copy, see [`two_copies`]).
    async fn assert_definition(&self, server_id: &str, line: u64, wait: bool) {
        let answer = self
            .request(
                server_id,
                "textDocument/definition",
                self.at("shapes/report.py", 4, "rect_area"),
                wait,
            )
            .await;
        let result = answer
            .get("result")
            .unwrap_or_else(|| panic!("definition failed: {answer}"));
        assert_eq!(
            self.locations(&result["lspResult"]),
            vec![("shapes/geometry.py".to_string(), line)],
            "{answer}"
        );
    }

    async fn wait_state(&self, server_id: &str, f: impl Fn(ServerState) -> bool) -> ServerState {
        let server = self.registry.server(server_id).expect("the server");
        tokio::time::timeout(STATE_TIMEOUT, server.wait_for_state(f))
            .await
            .unwrap_or_else(|_| panic!("state not reached: {:?}", server.status()))
    }
}

/// Two copies of the Python fixture: the session's (local) and the bridge's
/// (remote), and the `path_map` line between them. The remote copy's
/// `geometry.py` has one more line at the top, so an answer about it shows
/// where it came from: line 1 is the remote copy (read by the remote
/// server), line 0 would be the local one (a server given local paths,
/// which on this machine it could read).
fn two_copies() -> (
    (tempfile::TempDir, PathBuf),
    (tempfile::TempDir, PathBuf),
    String,
) {
    let local = fixture_copy("python-project", "acp-lsp-local-", |_| {});
    let remote = fixture_copy("python-project", "acp-lsp-remote-", |root| {
        let file = root.join("shapes/geometry.py");
        let text = std::fs::read_to_string(&file).expect("read geometry.py");
        std::fs::write(&file, format!("# the remote copy\n{text}")).expect("write geometry.py");
    });
    let map = format!(
        "path_map = [{{ local = \"{}\", remote = \"{}\" }}]",
        local.1.display(),
        remote.1.display()
    );
    (local, remote, map)
}

fn server_id(entry: &Value) -> String {
    entry["serverId"].as_str().expect("serverId").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tcp_path_map_gives_local_uris_and_a_dropped_connection_reconnects() {
    require(PYRIGHT, INSTALL);
    let (local, remote, map) = two_copies();
    let bridge = Bridge::start(Serve::Tcp, &remote.1).await;
    let h = Harness::start(
        &local.1,
        &format!("connect = \"{}\"\n{map}", bridge.connect),
    );
    let entry = h.entry().await;
    let id = server_id(&entry);
    assert_eq!(entry["workspacePath"], json!(local.1.display().to_string()));

    h.assert_definition(&id, 1, true).await;
    // references: every use, all under the local root.
    let mut params = h.at("shapes/report.py", 8, "rect_area");
    params["context"] = json!({ "includeDeclaration": true });
    let answer = h
        .request(&id, "textDocument/references", params, false)
        .await;
    assert_eq!(
        h.locations(&answer["result"]["lspResult"]),
        vec![
            ("shapes/geometry.py".to_string(), 1),
            ("shapes/report.py".to_string(), 0),
            ("shapes/report.py".to_string(), 4),
            ("shapes/report.py".to_string(), 8),
        ],
        "{answer}"
    );
    // Diagnostics come back under the local URI, about the local text: the
    // error is only in the local copy, sent in full from the local disk.
    let report = h.root.join("shapes/report.py");
    let text = std::fs::read_to_string(&report).expect("read report.py");
    std::fs::write(&report, format!("{text}\nbroken: int = \"text\"\n")).expect("write");
    let uri = file_uri(&report);
    let answer = h
        .response(
            GateMethod::Diagnostics,
            json!({ "sessionId": SESSION_ID, "uris": [uri], "waitMs": WAIT_UNTIL_READY_MS }),
        )
        .await;
    let entries = answer["result"]["diagnostics"]
        .as_array()
        .unwrap_or_else(|| panic!("no diagnostics: {answer}"));
    assert_eq!(entries.len(), 1, "{answer}");
    assert_eq!(entries[0]["uri"], json!(uri), "{answer}");
    assert_eq!(entries[0]["fresh"], true, "{answer}");
    let messages: Vec<&str> = entries[0]["diagnostics"]
        .as_array()
        .map(|d| d.iter().filter_map(|d| d["message"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        messages.iter().any(|m| m.contains("Literal['text']")),
        "{answer}"
    );

    let entry = h.entry().await;
    assert_eq!(entry["state"], "running", "{entry}");
    assert_eq!(entry["_meta"]["acp-lsp"]["pid"], Value::Null, "{entry}");
    assert_eq!(bridge.accepted(), 1);

    // The network drops: like a crash, the server restarts (reconnects).
    bridge.drop_connections();
    h.wait_state(&id, |s| s != ServerState::Ready).await;
    h.assert_definition(&id, 1, true).await;
    let entry = h.entry().await;
    assert_eq!(entry["_meta"]["acp-lsp"]["restarts"], 1, "{entry}");
    let last_error = entry["_meta"]["acp-lsp"]["lastError"]
        .as_str()
        .unwrap_or_default();
    assert!(
        last_error.contains("connection closed by the remote server"),
        "{entry}"
    );
    assert_eq!(bridge.accepted(), 2);
    h.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_a_unix_socket_without_path_map() {
    require(PYRIGHT, INSTALL);
    let (_dir, root) = fixture_copy("python-project", "acp-lsp-unix-", |_| {});
    let bridge = Bridge::start(Serve::Unix, &root).await;
    let h = Harness::start(&root, &format!("connect = \"{}\"", bridge.connect));
    let id = server_id(&h.entry().await);
    h.assert_definition(&id, 0, true).await;
    h.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_websocket_a_bearer_token_is_accepted_and_a_wrong_one_refused() {
    require(PYRIGHT, INSTALL);
    let (local, remote, map) = two_copies();
    let bridge = Bridge::start(
        Serve::WebSocket {
            token: Some("s3cret-token".into()),
            subprotocol: None,
            tls: None,
        },
        &remote.1,
    )
    .await;
    std::env::set_var("ACP_LSP_TEST_TOKEN_RIGHT", "s3cret-token");
    std::env::set_var("ACP_LSP_TEST_TOKEN_WRONG", "guess");

    let keys = format!(
        "connect = \"{}\"\ntoken_env = \"ACP_LSP_TEST_TOKEN_RIGHT\"\n{map}",
        bridge.connect
    );
    let h = Harness::start(&local.1, &keys);
    let id = server_id(&h.entry().await);
    h.assert_definition(&id, 1, true).await;
    h.registry.shutdown().await;
    assert_eq!(bridge.refused(), 0);

    // The wrong token: refused (401), failed at once, and lastError says why.
    let keys = format!(
        "connect = \"{}\"\ntoken_env = \"ACP_LSP_TEST_TOKEN_WRONG\"\n{map}",
        bridge.connect
    );
    let h = Harness::start(&local.1, &keys);
    let id = server_id(&h.entry().await);
    let state = h.wait_state(&id, |s| s == ServerState::Failed).await;
    assert_eq!(state, ServerState::Failed);
    let entry = h.entry().await;
    assert_eq!(entry["state"], "not_running", "{entry}");
    let last_error = entry["_meta"]["acp-lsp"]["lastError"]
        .as_str()
        .unwrap_or_default();
    assert!(last_error.contains("401"), "{entry}");
    assert!(last_error.contains("not retried"), "{entry}");
    assert_eq!(bridge.refused(), 1, "no retry after a refusal");
    h.assert_refused_not_running(&id).await;
    h.registry.shutdown().await;

    // A token variable that is not set: failed before connecting.
    let keys = format!(
        "connect = \"{}\"\ntoken_env = \"ACP_LSP_TEST_TOKEN_UNSET\"",
        bridge.connect
    );
    let h = Harness::start(&local.1, &keys);
    let id = server_id(&h.entry().await);
    h.wait_state(&id, |s| s == ServerState::Failed).await;
    let entry = h.entry().await;
    let last_error = entry["_meta"]["acp-lsp"]["lastError"]
        .as_str()
        .unwrap_or_default();
    assert!(last_error.contains("ACP_LSP_TEST_TOKEN_UNSET"), "{entry}");
    assert_eq!(bridge.refused(), 1);
    h.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_websocket_the_token_as_a_subprotocol() {
    require(PYRIGHT, INSTALL);
    let (local, remote, map) = two_copies();
    let bridge = Bridge::start(
        Serve::WebSocket {
            token: Some("proto-token".into()),
            subprotocol: Some("lsp".into()),
            tls: None,
        },
        &remote.1,
    )
    .await;
    std::env::set_var("ACP_LSP_TEST_TOKEN_PROTO", "proto-token");
    let keys = format!(
        "connect = \"{}\"\ntoken_env = \"ACP_LSP_TEST_TOKEN_PROTO\"\ntoken_via = \"subprotocol\"\nsubprotocol = \"lsp\"\n{map}",
        bridge.connect
    );
    let h = Harness::start(&local.1, &keys);
    let id = server_id(&h.entry().await);
    h.assert_definition(&id, 1, true).await;
    assert_eq!(bridge.refused(), 0);
    h.registry.shutdown().await;
}

/// A CA, and a certificate for `localhost` it signed: (the CA in PEM, the
/// server's TLS configuration).
fn certificates() -> (String, Arc<rustls::ServerConfig>) {
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let issuer = rcgen::Issuer::from_params(&ca, &ca_key);
    let key = rcgen::KeyPair::generate().expect("server key");
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .expect("server params")
        .signed_by(&key, &issuer)
        .expect("server certificate");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .expect("server TLS configuration");
    (ca_cert.pem(), Arc::new(config))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_wss_with_the_servers_own_ca() {
    require(PYRIGHT, INSTALL);
    let (local, remote, map) = two_copies();
    let (ca_pem, tls) = certificates();
    let bridge = Bridge::start(
        Serve::WebSocket {
            token: Some("tls-token".into()),
            subprotocol: None,
            tls: Some(tls),
        },
        &remote.1,
    )
    .await;
    std::env::set_var("ACP_LSP_TEST_TOKEN_TLS", "tls-token");

    // Without the CA the certificate is not trusted: the handshake fails.
    let keys = format!(
        "connect = \"{}\"\ntoken_env = \"ACP_LSP_TEST_TOKEN_TLS\"\n{map}",
        bridge.connect
    );
    let h = Harness::start(&local.1, &keys);
    let id = server_id(&h.entry().await);
    h.wait_state(&id, |s| {
        matches!(s, ServerState::Restarting | ServerState::Failed)
    })
    .await;
    let entry = h.entry().await;
    let last_error = entry["_meta"]["acp-lsp"]["lastError"]
        .as_str()
        .unwrap_or_default();
    assert!(last_error.contains("certificate"), "{entry}");
    eprintln!("wss without the CA: {last_error}");
    assert_eq!(bridge.accepted(), 0);
    h.registry.shutdown().await;

    // With it (`tls_ca_file`), the same answers as over ws://.
    let ca_dir = tempfile::tempdir().expect("CA dir");
    let ca_file = ca_dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca_pem).expect("write the CA");
    let keys = format!("{keys}\ntls_ca_file = \"{}\"", ca_file.display());
    let h = Harness::start(&local.1, &keys);
    let id = server_id(&h.entry().await);
    h.assert_definition(&id, 1, true).await;
    assert_eq!(bridge.accepted(), 1);
    h.registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_listening_is_restarting_with_the_reason() {
    let (_dir, root) = fixture_copy("python-project", "acp-lsp-refused-", |_| {});
    // A port that was free a moment ago: nothing listens there now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let h = Harness::start(&root, &format!("connect = \"tcp://127.0.0.1:{port}\""));
    let id = server_id(&h.entry().await);
    h.wait_state(&id, |s| {
        matches!(s, ServerState::Restarting | ServerState::Failed)
    })
    .await;
    let entry = h.entry().await;
    // `restarting` is `starting` on the wire, `failed` is `not_running`.
    let status = entry["_meta"]["acp-lsp"]["status"].clone();
    let wire = if status == "failed" {
        "not_running"
    } else {
        "starting"
    };
    assert_eq!(entry["state"], wire, "{entry}");
    let last_error = entry["_meta"]["acp-lsp"]["lastError"]
        .as_str()
        .unwrap_or_default();
    assert!(
        last_error.contains(&format!("cannot connect to tcp://127.0.0.1:{port}"))
            && last_error.contains("refused"),
        "{entry}"
    );
    h.assert_refused_not_running(&id).await;
    h.registry.shutdown().await;
}
