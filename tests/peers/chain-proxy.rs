//! The other proxy of the proxy-chain tests (`tests/chain.rs`): a proxy on
//! the official ACP Rust SDK that handles nothing and forwards everything
//! (the SDK's default), run by `agent-client-protocol-conductor` next to
//! `acp-lsp proxy --chain`. Its only addition is a line on stderr per
//! initialization, so a test can see that it was part of the chain.

use agent_client_protocol::{Proxy, Stdio};

#[tokio::main]
async fn main() -> Result<(), agent_client_protocol::Error> {
    eprintln!("chain-proxy: started");
    Proxy
        .v1()
        .name("acp-lsp-test-chain-proxy")
        .connect_to(Stdio::new())
        .await
}
