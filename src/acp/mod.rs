//! ACP side: the relay between editor and agent.

pub mod initialize;
pub mod relay;
pub mod sessions;
pub mod stdio;
pub mod writer;
