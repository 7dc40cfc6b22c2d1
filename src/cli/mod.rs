//! What the command line shows people: errors rendered once each, without
//! repetition or backtraces ([`render`]), the usage/failure split of exit
//! codes, and progress on stderr while a command waits ([`progress`]).

pub mod install;
pub mod progress;
pub mod render;

pub use render::{render, UsageError};
