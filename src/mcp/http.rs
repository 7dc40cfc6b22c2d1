//! The MCP server over streamable HTTP on 127.0.0.1, for agents whose
//! `initialize` answer advertises `agentCapabilities.mcpCapabilities.http`.
//!
//! Each request must carry `Authorization: Bearer <token>`, the token the
//! relay put in the injected entry's `headers`; the token picks the session,
//! as on the socket. One rmcp `StreamableHttpService` serves each token (its
//! MCP sessions share the token's binding); requests without a live token get
//! 401 before rmcp sees them. The listener only binds the loopback address,
//! and rmcp's DNS-rebinding check keeps to loopback host names.
//!
//! Before rmcp, [`Guard`] bounds what one peer can cost ([`McpHttpLimits`],
//! configurable under `[mcp_http]`): a browser `Origin` other than a loopback
//! one gets 403 (a web page cannot drive the tools); past the concurrency
//! limit (requests and open response streams) 429; a body over the size
//! limit 413; a body not complete within the read timeout 408 (and a header
//! block not complete within it ends the connection).
//!
//! No SSE event is sent without data: rmcp by default opens each SSE stream
//! with a "priming" event (an id and `retry:`, empty `data:`), and Gemini
//! CLI's MCP client `JSON.parse`s every event's data and drops the server on
//! the empty one. Priming only serves clients that resume a stream with
//! `Last-Event-ID`, which needs an event store this server does not keep.

use super::editor::EditorFs;
use super::isolated::Isolated;
use super::tokens::TokenTable;
use super::tools::LspTools;
use crate::gate::Gate;
use crate::lsp::config::McpHttpLimits;
use crate::proxy_host::ProxyHost;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

type Service = StreamableHttpService<Isolated<LspTools>, LocalSessionManager>;

/// The listening HTTP server; stops when dropped.
pub struct McpHttp {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

struct Shared {
    gate: Arc<Gate<ProxyHost>>,
    tokens: Arc<TokenTable>,
    editor: Option<Arc<EditorFs>>,
    ready_wait: Duration,
    /// Token → its service, made on first use.
    services: Mutex<HashMap<String, Service>>,
    guard: Guard,
}

impl McpHttp {
    /// Binds 127.0.0.1 on a free port and serves until dropped, with the
    /// default [`McpHttpLimits`].
    pub async fn bind(
        gate: Arc<Gate<ProxyHost>>,
        tokens: Arc<TokenTable>,
        editor: Option<Arc<EditorFs>>,
        ready_wait: Duration,
    ) -> std::io::Result<McpHttp> {
        Self::bind_with_limits(gate, tokens, editor, ready_wait, McpHttpLimits::default()).await
    }

    /// [`McpHttp::bind`] with the given limits.
    pub async fn bind_with_limits(
        gate: Arc<Gate<ProxyHost>>,
        tokens: Arc<TokenTable>,
        editor: Option<Arc<EditorFs>>,
        ready_wait: Duration,
        limits: McpHttpLimits,
    ) -> std::io::Result<McpHttp> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            gate,
            tokens,
            editor,
            ready_wait,
            services: Mutex::new(HashMap::new()),
            guard: Guard::new(limits),
        });
        let task = tokio::spawn(accept_loop(listener, shared));
        Ok(McpHttp { addr, task })
    }

    /// The URL the injected entry names.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for McpHttp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    // Every connection's task, ended with this loop (the endpoint dropped).
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "MCP http accept failed");
                continue;
            }
        };
        let shared = Arc::clone(&shared);
        connections.spawn(async move {
            let for_service = Arc::clone(&shared);
            let service = hyper::service::service_fn(move |request| {
                let shared = Arc::clone(&for_service);
                async move { Ok::<_, Infallible>(shared.handle(request).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let read_timeout = shared.guard.limits.read_timeout;
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(read_timeout)
                .serve_connection(io, service)
                .await
            {
                tracing::debug!(error = %e, "MCP http connection ended");
            }
        });
    }
}

impl Shared {
    async fn handle(&self, request: Request<Incoming>) -> Response<BoxBody<Bytes, Infallible>> {
        if let Err(status) = check_origin(&request) {
            return status_response(status);
        }
        let token = request
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .map(str::to_string);
        match token.and_then(|token| self.service(&token)) {
            Some(service) => match self.guard.admit(request).await {
                Ok((request, permit)) => holding(service.handle(request).await, permit),
                Err(status) => status_response(status),
            },
            None => status_response(StatusCode::UNAUTHORIZED),
        }
    }

    /// The service of a live token (a revoked token's service is dropped).
    fn service(&self, token: &str) -> Option<Service> {
        let mut services = self
            .services
            .lock()
            .expect("BUG: http services lock poisoned");
        if self.tokens.watch(token).is_err() {
            services.remove(token);
            return None;
        }
        if let Some(service) = services.get(token) {
            return Some(service.clone());
        }
        let (gate, tokens, editor, ready_wait, token_owned) = (
            Arc::clone(&self.gate),
            Arc::clone(&self.tokens),
            self.editor.clone(),
            self.ready_wait,
            token.to_string(),
        );
        let service = StreamableHttpService::new(
            move || {
                let lease = tokens
                    .watch(&token_owned)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e))?;
                tracing::info!(transport = "http", "MCP connection admitted");
                // A tool that panics is answered, not left waiting.
                Ok(Isolated(LspTools::new(
                    Arc::clone(&gate),
                    lease,
                    editor.clone(),
                    ready_wait,
                )))
            },
            Arc::new(session_manager()),
            StreamableHttpServerConfig::default().with_sse_retry(None),
        );
        services.insert(token.to_string(), service.clone());
        Some(service)
    }
}

/// The limits checked before rmcp sees a request (see the module doc).
struct Guard {
    limits: McpHttpLimits,
    permits: Arc<Semaphore>,
}

impl Guard {
    fn new(limits: McpHttpLimits) -> Guard {
        Guard {
            limits,
            permits: Arc::new(Semaphore::new(limits.max_concurrent)),
        }
    }

    /// Takes a place (429 when none is free) and reads the whole body within
    /// the size limit (413) and the read timeout (408).
    async fn admit(
        &self,
        request: Request<Incoming>,
    ) -> Result<(Request<Full<Bytes>>, OwnedSemaphorePermit), StatusCode> {
        let permit = Arc::clone(&self.permits)
            .try_acquire_owned()
            .map_err(|_| StatusCode::TOO_MANY_REQUESTS)?;
        let declared = request
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.limits.max_body_bytes as u64) {
            return Err(StatusCode::PAYLOAD_TOO_LARGE);
        }
        let (parts, body) = request.into_parts();
        let read = Limited::new(body, self.limits.max_body_bytes).collect();
        let body = match tokio::time::timeout(self.limits.read_timeout, read).await {
            Err(_elapsed) => return Err(StatusCode::REQUEST_TIMEOUT),
            Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
                return Err(StatusCode::PAYLOAD_TOO_LARGE)
            }
            Ok(Err(_)) => return Err(StatusCode::BAD_REQUEST),
            Ok(Ok(collected)) => collected.to_bytes(),
        };
        Ok((Request::from_parts(parts, Full::new(body)), permit))
    }
}

/// 403 for a browser request from anywhere but a loopback origin. Requests
/// without `Origin` (every non-browser client) pass.
fn check_origin<B>(request: &Request<B>) -> Result<(), StatusCode> {
    let Some(origin) = request.headers().get(hyper::header::ORIGIN) else {
        return Ok(());
    };
    let loopback = origin
        .to_str()
        .ok()
        .and_then(|o| url::Url::parse(o).ok())
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .is_some_and(|u| match u.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        });
    if loopback {
        Ok(())
    } else {
        Err(StatusCode::FORBIDDEN)
    }
}

fn status_response(status: StatusCode) -> Response<BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(Empty::new().boxed());
    *response.status_mut() = status;
    response
}

/// `response` with its body holding `permit` until the body is dropped: an
/// open event stream keeps its place.
fn holding(
    response: Response<BoxBody<Bytes, Infallible>>,
    permit: OwnedSemaphorePermit,
) -> Response<BoxBody<Bytes, Infallible>> {
    response.map(|body| {
        body.map_frame(move |frame| {
            let _held = &permit;
            frame
        })
        .boxed()
    })
}

/// rmcp's session manager with no priming event on request-wise streams (the
/// session layer adds its own, beside the service's; see the module comment).
fn session_manager() -> LocalSessionManager {
    let mut manager = LocalSessionManager::default();
    manager.session_config.sse_retry = None;
    manager
}
