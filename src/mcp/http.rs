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
//! No SSE event is sent without data: rmcp by default opens each SSE stream
//! with a "priming" event (an id and `retry:`, empty `data:`), and Gemini
//! CLI's MCP client `JSON.parse`s every event's data and drops the server on
//! the empty one. Priming only serves clients that resume a stream with
//! `Last-Event-ID`, which needs an event store this server does not keep.

use super::editor::EditorFs;
use super::tokens::TokenTable;
use super::tools::LspTools;
use crate::gate::Gate;
use crate::lsp::registry::Registry;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty};
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

type Service = StreamableHttpService<LspTools, LocalSessionManager>;

/// The listening HTTP server; stops when dropped.
pub struct McpHttp {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

struct Shared {
    gate: Arc<Gate<Registry>>,
    tokens: Arc<TokenTable>,
    editor: Option<Arc<EditorFs>>,
    ready_wait: Duration,
    /// Token → its service, made on first use.
    services: Mutex<HashMap<String, Service>>,
}

impl McpHttp {
    /// Binds 127.0.0.1 on a free port and serves until dropped.
    pub async fn bind(
        gate: Arc<Gate<Registry>>,
        tokens: Arc<TokenTable>,
        editor: Option<Arc<EditorFs>>,
        ready_wait: Duration,
    ) -> std::io::Result<McpHttp> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            gate,
            tokens,
            editor,
            ready_wait,
            services: Mutex::new(HashMap::new()),
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
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "MCP http accept failed");
                continue;
            }
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let shared = Arc::clone(&shared);
                async move { Ok::<_, Infallible>(shared.handle(request).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(e) = hyper::server::conn::http1::Builder::new()
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
        let token = request
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .map(str::to_string);
        match token.and_then(|token| self.service(&token)) {
            Some(service) => service.handle(request).await,
            None => {
                let mut response = Response::new(Empty::new().boxed());
                *response.status_mut() = StatusCode::UNAUTHORIZED;
                response
            }
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
                Ok(LspTools::new(
                    Arc::clone(&gate),
                    lease,
                    editor.clone(),
                    ready_wait,
                ))
            },
            Arc::new(session_manager()),
            StreamableHttpServerConfig::default().with_sse_retry(None),
        );
        services.insert(token.to_string(), service.clone());
        Some(service)
    }
}

/// rmcp's session manager with no priming event on request-wise streams (the
/// session layer adds its own, beside the service's; see the module comment).
fn session_manager() -> LocalSessionManager {
    let mut manager = LocalSessionManager::default();
    manager.session_config.sse_retry = None;
    manager
}
