//! acp-lsp: an ACP relay that gives agents language-server intelligence.
//!
//! The proxy, its language-server supervision, the MCP tools and the command
//! line, over the embeddable core in `acp_lsp_core` (the gate and JSON-RPC).
//! See ARCHITECTURE.md for the data flow, the code map and the crates.

// The core's modules under the names the proxy has always used for them:
// `crate::gate::…` and `crate::jsonrpc::…` are the core's items.
pub(crate) use acp_lsp_core::{gate, jsonrpc};

pub mod acp;
pub mod agent_process;
pub mod cli;
pub mod conformance;
pub mod daemon;
pub mod edit;
pub mod install;
pub mod lsp;
pub mod mcp;
pub mod proxy_host;
pub(crate) mod read;
pub mod record;
pub mod scip;
pub mod session_facade;
pub(crate) mod sys;
#[cfg(test)]
mod test_paths;
