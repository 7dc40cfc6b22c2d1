//! Panic isolation for the MCP tools, as the gate has for its requests:
//! rmcp runs each request's handler on a task of its own and, if that task
//! panics (a bug in a tool), never answers it, so the agent's model waits on
//! its call until its own timeout. [`Isolated`] wraps the tools' handler
//! (the methods they implement: calling and listing tools, and their info),
//! catches a panic and answers the request -32603 (internal error); the
//! connection serves on. Both transports take it (the socket's `serve`, the
//! HTTP service's `ServerHandler`).

use futures::FutureExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use std::future::Future;
use std::panic::AssertUnwindSafe;

/// The tools' handler with its requests isolated from panics.
pub struct Isolated<S>(pub S);

/// Runs one request's handler; a panic becomes an internal error.
async fn caught<T>(
    what: &'static str,
    handler: impl Future<Output = Result<T, ErrorData>>,
) -> Result<T, ErrorData> {
    // Unwind safety: the tools' state is their session's gate (its tables
    // behind locks that do not poison, left by drop guards) and caches of
    // file texts checked against the disk; nothing half-updated is read
    // afterwards.
    match AssertUnwindSafe(handler).catch_unwind().await {
        Ok(answer) => answer,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            tracing::error!(request = what, panic = %message, "an MCP request panicked");
            Err(ErrorData::internal_error(
                format!("acp-lsp's {what} handler panicked: {message}"),
                None,
            ))
        }
    }
}

impl<S: ServerHandler> ServerHandler for Isolated<S> {
    fn get_info(&self) -> ServerConfig {
        self.0.get_info()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        caught("tools/call", self.0.call_tool(request, context)).await
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        caught("tools/list", self.0.list_tools(request, context)).await
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.0.get_tool(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ServerCapabilities;
    use rmcp::ServiceExt;
    use std::time::Duration;

    /// A server whose one tool panics.
    struct Panicking;

    impl ServerHandler for Panicking {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn call_tool(
            &self,
            request: CallToolRequestParams,
            _context: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            panic!("a bug in {}", request.name);
        }
    }

    #[tokio::test]
    async fn a_panicking_tool_is_answered_internal_error_and_the_server_serves_on() {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let server = tokio::spawn(async move {
            let running = Isolated(Panicking).serve(theirs).await.expect("serve");
            let _ = running.waiting().await;
        });
        let client = ().serve(ours).await.expect("client");
        for _ in 0..2 {
            let answer = tokio::time::timeout(
                Duration::from_secs(10),
                client.call_tool(CallToolRequestParams::new("boom")),
            )
            .await
            .expect("the call is answered");
            let error = format!("{:?}", answer.expect_err("an error"));
            assert!(
                error.contains("-32603") || error.contains("INTERNAL_ERROR"),
                "{error}"
            );
            assert!(error.contains("a bug in boom"), "{error}");
        }
        drop(client);
        server.abort();
    }
}
