//! Session lifecycle as seen on the wire: which editor requests open, reopen or
//! close a session, with which roots. Roots are committed only when the agent
//! answers with success.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::path::{Path, PathBuf};

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
struct Params<'a> {
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    /// Read item by item ([`Params::roots`]): the schema skips an item that
    /// is not a path and keeps the session, and so must we.
    #[serde(borrow, default)]
    additional_directories: Option<&'a RawValue>,
}

impl Params<'_> {
    fn roots(&self) -> Option<Vec<PathBuf>> {
        let cwd = self.cwd.as_ref()?;
        let mut roots = vec![PathBuf::from(cwd)];
        roots.extend(additional_directories(self.additional_directories));
        Some(roots)
    }
}

/// The usable items of `additionalDirectories`, as the ACP schema reads the
/// field (`DefaultOnError<VecSkipError<_>>`): not an array reads as none, and
/// an item that is not a string is skipped, not the whole session. An empty
/// or relative path is skipped too (the RFD says agents reject them): a root
/// acp-lsp does not keep only narrows what the session's servers may see.
fn additional_directories(field: Option<&RawValue>) -> Vec<PathBuf> {
    let Some(items) = field.and_then(|f| serde_json::from_str::<Vec<&RawValue>>(f.get()).ok())
    else {
        return Vec::new();
    };
    let mut roots = Vec::new();
    for item in items {
        match serde_json::from_str::<String>(item.get()) {
            Ok(path) if Path::new(&path).is_absolute() => roots.push(PathBuf::from(path)),
            _ => tracing::info!(
                item = %item.get().chars().take(200).collect::<String>(),
                "additionalDirectories: not an absolute path; skipped"
            ),
        }
    }
    roots
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
    use crate::test_paths::{os_json, os_pathbuf};

    fn raw(text: &str) -> &RawValue {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn new_session_roots_are_cwd_then_additional_directories() {
        let op = session_op(
            "session/new",
            Some(raw(&format!(
                r#"{{"cwd":{},"additionalDirectories":[{}],"mcpServers":[]}}"#,
                os_json("/ws/a"),
                os_json("/ws/b")
            ))),
        );
        assert_eq!(
            op,
            Some(SessionOp::New {
                roots: vec![os_pathbuf("/ws/a"), os_pathbuf("/ws/b")]
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
    fn a_malformed_additional_directory_is_skipped_not_the_session() {
        // The schema's VecSkipError: the agent skips the item and accepts the
        // session, so the session's roots are the others.
        let (a, b, c) = (os_json("/ws/a"), os_json("/ws/b"), os_json("/ws/c"));
        for params in [
            format!(
                r#"{{"cwd":{a},"additionalDirectories":[7,{b},null,{{"p":1}},"","rel/dir",{c}]}}"#
            ),
            format!(
                r#"{{"cwd":{a},"additionalDirectories":[[{}],{b},{c}]}}"#,
                os_json("/x")
            ),
        ] {
            for method in ["session/new", "session/load"] {
                let mut params = params.to_string();
                if method == "session/load" {
                    params = params.replacen('{', r#"{"sessionId":"s","#, 1);
                }
                let roots = match session_op(method, Some(raw(&params))) {
                    Some(SessionOp::New { roots }) => roots,
                    Some(SessionOp::Reopen {
                        roots: Some(roots), ..
                    }) => roots,
                    other => panic!("{method} {params}: {other:?}"),
                };
                let expected = vec![
                    os_pathbuf("/ws/a"),
                    os_pathbuf("/ws/b"),
                    os_pathbuf("/ws/c"),
                ];
                assert_eq!(roots, expected, "{method} {params}");
            }
        }
        // Not an array at all: no additional roots (DefaultOnError), the session kept.
        assert_eq!(
            session_op(
                "session/new",
                Some(raw(&format!(
                    r#"{{"cwd":{a},"additionalDirectories":{b}}}"#
                )))
            ),
            Some(SessionOp::New {
                roots: vec![os_pathbuf("/ws/a")]
            })
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
