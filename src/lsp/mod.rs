//! Language servers: configuration, processes, connections, supervision and the registry.

pub mod caches;
pub mod clangd;
pub mod config;
pub mod connection;
pub mod detect;
pub mod documents;
pub mod handshake;
pub mod health;
pub mod launch;
pub mod path_map;
pub mod primary;
pub mod probe;
pub mod process;
pub mod program;
pub mod ratelimit;
pub mod registration;
pub mod registry;
pub mod remote;
pub mod running;
pub mod server;
pub mod toolchain;
pub mod transport;
pub mod watch;
pub mod watchers;
