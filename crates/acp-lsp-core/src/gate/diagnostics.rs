//! **[acp-lsp]** `_acp-lsp/diagnostics`: one document's diagnostics from one
//! server as a typed value ([`PublishedDiagnostics`]), the server's own
//! payload kept raw, rendered to JSON only at the wire.

use super::ids::ServerId;
use crate::jsonrpc::object::RawObject;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// How a requested document's diagnostics were obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagnosticsMode {
    /// Asked for: `textDocument/diagnostic` (servers with `diagnosticProvider`).
    Pull,
    /// Waited for: a `textDocument/publishDiagnostics` reflecting the text.
    Push,
}

impl DiagnosticsMode {
    /// The wire's word: `pull` or `push`.
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticsMode::Pull => "pull",
            DiagnosticsMode::Push => "push",
        }
    }
}

/// For a document asked for by name: how its diagnostics were fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fetched {
    /// Pulled or pushed.
    pub mode: DiagnosticsMode,
    /// The wait (push) or the pull's deadline ran out before an answer for
    /// the document's current text: what there is may be stale or empty.
    pub timed_out: bool,
}

/// One document's diagnostics from one server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PublishedDiagnostics {
    /// The server that published them.
    pub server_id: ServerId,
    /// The document.
    pub uri: String,
    /// The server's `textDocument/publishDiagnostics` params verbatim
    /// (`uri`, `version`, `diagnostics`), or, pulled or when nothing was
    /// published, the same members built from what there is.
    pub params: Box<RawValue>,
    /// Published after the server last got the document's text.
    pub fresh: bool,
    /// Set for a document asked for by name.
    pub fetched: Option<Fetched>,
}

impl PublishedDiagnostics {
    /// The `diagnostics` array of [`PublishedDiagnostics::params`], raw;
    /// `None` when the server published none (or something unreadable).
    pub fn items(&self) -> Option<&RawValue> {
        #[derive(Deserialize)]
        struct Items<'a> {
            #[serde(borrow, default)]
            diagnostics: Option<&'a RawValue>,
        }
        serde_json::from_str::<Items<'_>>(self.params.get())
            .ok()
            .and_then(|items| items.diagnostics)
    }

    /// The entry as `_acp-lsp/diagnostics` lists it: the params with
    /// `serverId` and `fresh` added (and, when fetched, `timedOut` and
    /// `mode`); every other member keeps its bytes. Params that are not an
    /// object go out as they came.
    pub fn to_json(&self) -> String {
        let Ok(mut object) = RawObject::parse(&self.params) else {
            return self.params.get().to_string();
        };
        object.set("serverId", json_string(&self.server_id));
        object.set("fresh", self.fresh.to_string());
        if let Some(fetched) = self.fetched {
            object.set("timedOut", fetched.timed_out.to_string());
            object.set("mode", json_string(fetched.mode.as_str()));
        }
        object.to_json()
    }
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("BUG: a string always serializes")
}

/// The `_acp-lsp/diagnostics` result: `{"diagnostics": [entry, …]}`.
pub(crate) fn render(entries: &[PublishedDiagnostics]) -> String {
    let mut text = String::from("{\"diagnostics\":[");
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&entry.to_json());
    }
    text.push_str("]}");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(params: &str, fresh: bool, fetched: Option<Fetched>) -> PublishedDiagnostics {
        PublishedDiagnostics {
            server_id: "srv".into(),
            uri: "file:///a.py".into(),
            params: RawValue::from_string(params.into()).unwrap(),
            fresh,
            fetched,
        }
    }

    #[test]
    fn renders_the_servers_bytes_with_what_acp_lsp_adds() {
        let published = entry(
            r#"{"diagnostics": [{"message":"x"}],"uri":"file:\/\/\/a.py","version":3}"#,
            false,
            None,
        );
        assert_eq!(
            published.to_json(),
            r#"{"diagnostics":[{"message":"x"}],"uri":"file:\/\/\/a.py","version":3,"serverId":"srv","fresh":false}"#
        );
        assert_eq!(published.items().unwrap().get(), r#"[{"message":"x"}]"#);
        let pulled = entry(
            r#"{"uri":"file:///a.py","diagnostics":[]}"#,
            true,
            Some(Fetched {
                mode: DiagnosticsMode::Pull,
                timed_out: false,
            }),
        );
        assert_eq!(
            pulled.to_json(),
            r#"{"uri":"file:///a.py","diagnostics":[],"serverId":"srv","fresh":true,"timedOut":false,"mode":"pull"}"#
        );
        assert_eq!(
            render(&[published, pulled]).matches("serverId").count(),
            2,
            "one entry each"
        );
    }

    #[test]
    fn params_that_are_no_object_go_out_as_they_came() {
        let odd = entry("[1, 2]", true, None);
        assert_eq!(odd.to_json(), "[1, 2]");
        assert!(odd.items().is_none());
    }
}
