//! Helpers shared by the integration tests. Each test crate uses a subset.
#![allow(dead_code)]

pub mod procfs;
