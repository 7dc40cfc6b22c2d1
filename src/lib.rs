//! acp-lsp: an ACP relay that gives agents language-server intelligence.
//!
//! See ARCHITECTURE.md for the data flow and the code map.

pub mod acp;
pub mod agent_process;
pub mod cli;
pub mod conformance;
pub mod daemon;
pub mod edit;
pub mod gate;
pub mod jsonrpc;
pub mod lsp;
pub mod mcp;
pub mod oneshot;
pub mod read;
pub mod record;
