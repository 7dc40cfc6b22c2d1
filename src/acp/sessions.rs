//! Session lifecycle as seen on the wire: which editor requests open, reopen or
//! close a session, with which roots. Roots are committed only when the agent
//! answers with success.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::path::PathBuf;

/// A pending session lifecycle request, keyed by the editor's request id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionOp {
    /// `session/new`: the id comes in the response.
    New { roots: Vec<PathBuf> },
    /// `session/fork`: a new id comes in the response; roots default to the source's.
    Fork {
        source: String,
        roots: Option<Vec<PathBuf>>,
    },
    /// `session/load` and `session/resume`: the full root list is resent.
    Reopen {
        session_id: String,
        roots: Option<Vec<PathBuf>>,
    },
    /// `session/close` and `session/delete`.
    Close { session_id: String },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Params {
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    additional_directories: Option<Vec<String>>,
}

impl Params {
    fn roots(&self) -> Option<Vec<PathBuf>> {
        let cwd = self.cwd.as_ref()?;
        let mut roots = vec![PathBuf::from(cwd)];
        roots.extend(
            self.additional_directories
                .iter()
                .flatten()
                .map(PathBuf::from),
        );
        Some(roots)
    }
}

/// Recognises a session lifecycle request.
pub fn session_op(method: &str, params: Option<&RawValue>) -> Option<SessionOp> {
    if !method.starts_with("session/") {
        return None;
    }
    let params: Params = serde_json::from_str(params?.get()).ok()?;
    match method {
        "session/new" => Some(SessionOp::New {
            roots: params.roots()?,
        }),
        "session/fork" => Some(SessionOp::Fork {
            roots: params.roots(),
            source: params.session_id?,
        }),
        "session/load" | "session/resume" => Some(SessionOp::Reopen {
            roots: params.roots(),
            session_id: params.session_id?,
        }),
        "session/close" | "session/delete" => Some(SessionOp::Close {
            session_id: params.session_id?,
        }),
        _ => None,
    }
}

/// The `sessionId` of a `session/new` or `session/fork` result.
pub fn result_session_id(result: &RawValue) -> Option<String> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct WithId {
        session_id: String,
    }
    serde_json::from_str::<WithId>(result.get())
        .ok()
        .map(|r| r.session_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> &RawValue {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn new_session_roots_are_cwd_then_additional_directories() {
        let op = session_op(
            "session/new",
            Some(raw(
                r#"{"cwd":"/ws/a","additionalDirectories":["/ws/b"],"mcpServers":[]}"#,
            )),
        );
        assert_eq!(
            op,
            Some(SessionOp::New {
                roots: vec!["/ws/a".into(), "/ws/b".into()]
            })
        );
    }

    #[test]
    fn recognises_every_lifecycle_request() {
        assert!(matches!(
            session_op("session/load", Some(raw(r#"{"sessionId":"s","cwd":"/x"}"#))),
            Some(SessionOp::Reopen { .. })
        ));
        assert!(matches!(
            session_op("session/resume", Some(raw(r#"{"sessionId":"s"}"#))),
            Some(SessionOp::Reopen { roots: None, .. })
        ));
        assert!(matches!(
            session_op("session/fork", Some(raw(r#"{"sessionId":"s","cwd":"/x"}"#))),
            Some(SessionOp::Fork { .. })
        ));
        assert!(matches!(
            session_op("session/close", Some(raw(r#"{"sessionId":"s"}"#))),
            Some(SessionOp::Close { .. })
        ));
        assert_eq!(
            session_op("session/prompt", Some(raw(r#"{"sessionId":"s"}"#))),
            None
        );
        assert_eq!(
            session_op("session/new", Some(raw(r#"{"mcpServers":[]}"#))),
            None
        );
    }

    #[test]
    fn reads_the_session_id_of_a_result() {
        assert_eq!(
            result_session_id(raw(r#"{"sessionId":"abc","modes":null}"#)),
            Some("abc".into())
        );
        assert_eq!(result_session_id(raw("null")), None);
    }
}
