//! acp-lsp: an ACP relay that gives agents language-server intelligence.
//!
//! See ARCHITECTURE.md for the data flow and the code map. With only the
//! `gate` feature the crate is the embeddable core (`gate`, `jsonrpc`): an
//! editor host implements [`gate::LspHost`] over servers it owns. The
//! `proxy` feature (on by default) adds the rest.

pub mod gate;
pub mod jsonrpc;

#[cfg(feature = "proxy")]
pub mod acp;
#[cfg(feature = "proxy")]
pub mod agent_process;
#[cfg(feature = "proxy")]
pub mod cli;
#[cfg(feature = "proxy")]
pub mod conformance;
#[cfg(feature = "proxy")]
pub mod daemon;
#[cfg(feature = "proxy")]
pub mod edit;
#[cfg(feature = "proxy")]
pub mod host;
#[cfg(feature = "proxy")]
pub mod lsp;
#[cfg(feature = "proxy")]
pub mod mcp;
#[cfg(feature = "proxy")]
pub mod oneshot;
#[cfg(feature = "proxy")]
pub(crate) mod read;
#[cfg(feature = "proxy")]
pub mod record;
// The gate's confinement uses the kernel's path lookup; the rest is the proxy's.
#[cfg_attr(not(feature = "proxy"), allow(dead_code))]
pub(crate) mod sys;
