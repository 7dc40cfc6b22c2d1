//! Fixture for tests/real_servers.rs: `geometry::area` is defined in one
//! module and used from two others. Line numbers are asserted by the tests.
pub mod geometry;
pub mod report;
pub mod stats;
