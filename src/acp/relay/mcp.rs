//! The agent's `mcp/connect`, `mcp/message` and `mcp/disconnect` for the MCP
//! server acp-lsp offers over the ACP connection (`mcp::acp_transport`):
//! answered or delivered here; those for anyone else's server pass through.

use super::{Action, Relay, Side};
use crate::gate::LspHost;
use crate::jsonrpc::{self, RequestId};
use crate::mcp::acp_transport::{target_of, AcpTransport, Target};
use futures::FutureExt;
use serde_json::value::RawValue;
use std::sync::Arc;

impl<H: LspHost> Relay<H> {
    fn acp_transport(&self) -> Option<&Arc<AcpTransport>> {
        self.options.mcp.as_ref()?.acp.as_ref()
    }

    /// Whether a run of lines that [`crate::jsonrpc::shallow::plainly_not_ours`]
    /// passes may still hold an `mcp/message` notification for our server:
    /// only from the agent, and only once an ACP-transport entry was
    /// injected (otherwise no line pays for the search).
    pub(super) fn may_carry_our_mcp(&self, side: Side, bytes: &[u8]) -> bool {
        side == Side::Agent
            && self.acp_transport().is_some_and(|acp| acp.is_live())
            && memchr::memmem::find(bytes, b"mcp/").is_some()
    }

    /// An agent request `mcp/*` addressed to our server or one of its
    /// connections: answered here. `None`: not ours, forwarded.
    pub(super) fn our_mcp_request(
        &self,
        id: &RequestId,
        method: &str,
        params: Option<&RawValue>,
    ) -> Option<Action> {
        if !method.starts_with("mcp/") {
            return None;
        }
        let acp = Arc::clone(self.acp_transport()?);
        let target = target_of(params)?;
        if !acp.owns(&target) {
            return None;
        }
        let params = params.map(ToOwned::to_owned);
        let answer = match (method, target) {
            ("mcp/connect", Target::Server(server)) => {
                async move { acp.connect(&server).await }.boxed()
            }
            ("mcp/message", target) => {
                async move { acp.request(target, params.as_deref()).await }.boxed()
            }
            ("mcp/disconnect", Target::Connection(connection)) => {
                let done = acp.disconnect(&connection);
                async move { Ok(done) }.boxed()
            }
            _ => return None,
        };
        let id = id.clone();
        Some(Action::Answer(
            async move {
                match answer.await {
                    Ok(result) => jsonrpc::encode_result(&id, &result),
                    Err(error) => jsonrpc::encode_error(Some(&id), &error),
                }
            }
            .boxed(),
        ))
    }

    /// An agent notification `mcp/message` for one of our connections:
    /// delivered to its MCP session. `None`: not ours, forwarded.
    pub(super) fn our_mcp_notification(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Option<Action> {
        if method != "mcp/message" {
            return None;
        }
        let acp = self.acp_transport()?;
        let target = target_of(params)?;
        if !acp.owns(&target) {
            return None;
        }
        acp.notify(target, params);
        Some(Action::Swallow)
    }
}
