//! Language servers: configuration, processes, connections, supervision and the registry.

pub mod caches;
pub mod clangd;
pub mod config;
pub mod connection;
pub mod detect;
pub mod documents;
pub mod handshake;
pub mod launch;
pub mod probe;
pub mod process;
pub mod ratelimit;
pub mod registration;
pub mod registry;
pub mod server;
pub mod toolchain;
pub mod watch;
pub mod watchers;
