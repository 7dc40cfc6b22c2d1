//! acp-lsp: an ACP relay that gives agents language-server intelligence.

pub mod jsonrpc;
