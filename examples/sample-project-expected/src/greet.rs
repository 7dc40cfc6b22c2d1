//! The greeting, in its own module so that a rename crosses files.

/// What to say to `name`.
pub fn welcome(name: &str) -> String {
    format!("Hello, {name}!")
}
