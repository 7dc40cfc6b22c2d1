//! The project `cargo run --example try-rename` renames in: the function
//! declared in `greet.rs` is used here and in `main.rs`, so renaming it
//! edits three files.

mod greet;

pub use greet::welcome;
