//! Language servers: configuration, processes, connections, supervision and the registry.

pub mod config;
pub mod connection;
pub mod detect;
pub mod documents;
pub mod handshake;
pub mod path_map;
pub mod probe;
pub mod process;
pub mod ratelimit;
pub mod registration;
pub mod registry;
pub mod remote;
pub mod server;
pub mod toolchain;
pub mod transport;
pub mod watch;
pub mod watchers;
