//! ACP side: the relay between editor and agent, and the translation that
//! runs it as one proxy of a conductor's chain (`chain`).

pub mod chain;
pub mod initialize;
pub mod relay;
pub mod sessions;
pub mod stdio;
pub mod writer;
