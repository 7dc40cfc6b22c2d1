//! Fixture paths of the unit tests, spelled for the OS the tests run on.
//!
//! A fixture written the Unix way (`/ws/proj`, `file:///ws/proj/a.rs`) is no
//! absolute path on Windows, where the gate rightly refuses it ("the path
//! does not start with a drive letter"). These put such fixtures on drive C
//! there (`C:\ws\proj`, `file:///C:/ws/proj/a.rs`), so the same assertions
//! run on both (on Windows under wine in CI).

use std::path::PathBuf;

/// `/ws/proj` on Unix, `C:\ws\proj` on Windows.
pub(crate) fn os_path(unix: &str) -> String {
    if cfg!(windows) {
        format!("C:{}", unix.replace('/', "\\"))
    } else {
        unix.to_string()
    }
}

/// [`os_path`] as a `PathBuf`.
pub(crate) fn os_pathbuf(unix: &str) -> PathBuf {
    PathBuf::from(os_path(unix))
}

/// The file URI of [`os_path`]: `file:///ws/proj/a.rs`, or
/// `file:///C:/ws/proj/a.rs` on Windows.
pub(crate) fn os_uri(unix: &str) -> String {
    if cfg!(windows) {
        format!("file:///C:{unix}")
    } else {
        format!("file://{unix}")
    }
}

/// [`os_path`] as a JSON string (quoted, its backslashes escaped), for
/// fixtures written as JSON text.
pub(crate) fn os_json(unix: &str) -> String {
    serde_json::Value::from(os_path(unix)).to_string()
}
