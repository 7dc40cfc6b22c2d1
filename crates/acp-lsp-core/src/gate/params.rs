//! The params of the gate's methods, borrowed from the request's text
//! (parsed once, after the shape scans).

use super::*;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ServersParams<'a> {
    #[serde(borrow)]
    pub(super) session_id: Cow<'a, str>,
    /// acp-lsp's extension: `_meta.startAll`.
    #[serde(default, rename = "_meta")]
    pub(super) meta: Option<ServersMeta>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ServersMeta {
    /// `true`: start every server; `false`: start none (lazy); absent: an
    /// agent that knows only the RFD ([`LspHost::start_shown`]).
    #[serde(default)]
    pub(super) start_all: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RequestParams<'a> {
    #[serde(borrow)]
    pub(super) session_id: Cow<'a, str>,
    #[serde(borrow)]
    pub(super) server_id: Cow<'a, str>,
    #[serde(borrow)]
    pub(super) method: Cow<'a, str>,
    /// Required by the RFD, `null` included: `None` only when the member is
    /// missing (checked after the method, whose refusal says more).
    #[serde(borrow, default, deserialize_with = "present")]
    pub(super) params: Option<&'a RawValue>,
    /// acp-lsp's extension, where ACP wants it: `_meta.waitUntilReady`.
    #[serde(default, rename = "_meta")]
    pub(super) meta: Option<RequestMeta>,
    /// The same at the top level, as acp-lsp 0.1 took it; still accepted.
    #[serde(default)]
    pub(super) wait_until_ready: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RequestMeta {
    #[serde(default)]
    pub(super) wait_until_ready: Option<u64>,
}

/// A member that is there, even as `null` (a plain `Option` reads `null` as absent).
pub(super) fn present<'de, D>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    <&RawValue>::deserialize(deserializer).map(Some)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DiagnosticsParams<'a> {
    #[serde(borrow)]
    pub(super) session_id: Cow<'a, str>,
    #[serde(default)]
    pub(super) uris: Option<Vec<String>>,
    #[serde(default)]
    pub(super) wait_ms: Option<u64>,
}
