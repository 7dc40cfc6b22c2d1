//! The greeting, in its own module so that a rename crosses files.

/// What to say to `name`.
pub fn greeting(name: &str) -> String {
    format!("Hello, {name}!")
}
