//! The one place errors are turned into text for people.
//!
//! An error and its sources are shown once each: a source whose text the
//! message above it already contains is left out (the "Caused by:" lists of
//! `anyhow` repeat `io::Error`s that a `thiserror` message already embeds).
//! No backtrace is ever shown: these are the user's errors, not bugs.

use std::error::Error;

/// A mistake in how the command was called (exit code 2, as clap's own
/// usage errors): a path that is not there, a name that is not one of the
/// choices, an argument that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl UsageError {
    pub fn new(message: impl Into<String>) -> UsageError {
        UsageError(message.into())
    }
}

/// `error: <message>[: <source>…]` plus a newline: each source that adds
/// something, in order.
pub fn render(error: &(dyn Error + 'static)) -> String {
    let mut shown: Vec<String> = Vec::new();
    let mut next: Option<&(dyn Error + 'static)> = Some(error);
    while let Some(current) = next {
        let text = current.to_string();
        let text = text.trim();
        if !text.is_empty() && !shown.iter().any(|earlier| earlier.contains(text)) {
            shown.push(text.to_string());
        }
        next = current.source();
    }
    format!("error: {}\n", shown.join(": "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read config {path}: {source}")]
    struct Embeds {
        path: String,
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("loading the settings")]
    struct Wraps {
        source: std::io::Error,
    }

    #[test]
    fn a_source_already_in_the_message_is_not_repeated() {
        let error = Embeds {
            path: "nope.toml".into(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "No such file"),
        };
        assert_eq!(
            render(&error),
            "error: cannot read config nope.toml: No such file\n"
        );
    }

    #[test]
    fn a_source_that_adds_something_is_appended() {
        let error = Wraps {
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "No such file"),
        };
        assert_eq!(
            render(&error),
            "error: loading the settings: No such file\n"
        );
    }
}
