//! Precomputed SCIP indexes beside the live servers: answers before a
//! server is ready, and on projects no laptop can index.
//!
//! - `config`: the `[indexes]` table and where indexes are found
//!   (`index.scip`, `.scip/*.scip` in a session root, configured paths).
//! - `load`: the file streamed into compact tables (`index`), bounded
//!   (`max_occurrences`, `max_bytes`), wire errors as errors.
//! - `sidecar`: the per-document SHA-256s (and commit) `acp-lsp index`
//!   writes beside an index: how a document is known to be unchanged.
//! - `verify`: which documents may be answered now (confined reads, hashes).
//! - `answer`: LSP results from the tables.
//! - `host`: the indexes as servers of a session (`lsp/servers`,
//!   `lsp/request`, merging with the live server).
//! - `produce`: `acp-lsp index`, running the indexers.
//!
//! Uses `gate` and `read`; never `lsp` (which uses it) or anything above.

pub mod answer;
pub mod config;
pub mod host;
pub mod index;
pub mod load;
pub mod produce;
pub mod sidecar;
pub mod verify;

#[cfg(test)]
mod fixture;

pub use config::{IndexesConfig, IndexesPatch};
pub use host::{index_server_id, Indexes, Live, LiveServer, SERVER_NAME};
