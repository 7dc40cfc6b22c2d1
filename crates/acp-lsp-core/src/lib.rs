//! The embeddable core of acp-lsp: the gate that answers an ACP agent's
//! `lsp/servers` and `lsp/request` (the ACP RFD "Language Server Proxy"),
//! and the JSON-RPC pieces it and any relay in front of it need.
//!
//! An editor host that owns language servers implements [`gate::LspHost`]
//! over them and hands its agent's `lsp/*` requests to [`gate::Gate::call`]:
//! the gate checks the parameters and limits, refuses what the RFD refuses,
//! confines every URI to the session's roots, applies deadlines and
//! cancellation, and maps every failure to one JSON-RPC error with a
//! machine-readable `data.reason`. `examples/editor-host.rs` is a whole host
//! over a pyright it starts itself.
//!
//! The `acp-lsp` proxy is built on the same API.
// What is `pub` is the embedder's API (ARCHITECTURE.md, "Crates"): nothing
// public without a reason to be, nothing public undocumented.
#![warn(unreachable_pub)]
#![deny(missing_docs)]

pub mod gate;
pub mod jsonrpc;
mod sys;
