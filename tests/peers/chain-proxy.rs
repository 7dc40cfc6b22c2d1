//! The other proxy of the proxy-chain tests (`tests/chain.rs`): a proxy on
//! the official ACP Rust SDK that handles nothing and forwards everything
//! (the SDK's default), run by `agent-client-protocol-conductor` next to
//! `acp-lsp proxy --chain`. Its only addition: with `CHAIN_PROXY_MARK` set,
//! it writes that file when it starts, so a test can see it was in the chain.

use agent_client_protocol::{Proxy, Stdio};

#[tokio::main]
async fn main() -> Result<(), agent_client_protocol::Error> {
    if let Some(mark) = std::env::var_os("CHAIN_PROXY_MARK") {
        std::fs::write(mark, "started\n")
            .map_err(agent_client_protocol::Error::into_internal_error)?;
    }
    Proxy
        .v1()
        .name("acp-lsp-test-chain-proxy")
        .connect_to(Stdio::new())
        .await
}
