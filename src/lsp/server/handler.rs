//! The server→client side: answering the server's requests
//! (`workspace/configuration`, registrations, progress creation) and taking
//! its notifications (progress, diagnostics, logs), within the caps.

use super::{
    registration_size, Live, Published, Server, MAX_DIAGNOSTIC_BYTES, MAX_DIAGNOSTIC_DOCUMENTS,
    MAX_PROGRESS_TEXT, MAX_PROGRESS_TOKENS, MAX_PROGRESS_TOKEN_BYTES, MAX_REGISTRATIONS,
    MAX_REGISTRATION_BYTES,
};
use crate::gate::{Progress, StateReason};
use crate::jsonrpc::ErrorObject;
use crate::lsp::connection::ServerMessages;
use crate::lsp::handshake;
use crate::lsp::ratelimit::Verdict;
use crate::lsp::registration::{raw_json, Registration};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::sync::Weak;

/// Counts one drop and logs it within the rate limit.
fn note_drop(live: &mut Live, server: &str, what: &str) {
    match live.drop_warnings.check() {
        Verdict::Log { suppressed_before } => tracing::warn!(
            server,
            progress_tokens = live.dropped.progress_tokens,
            registrations = live.dropped.registrations,
            diagnostics = live.dropped.diagnostics,
            suppressed = suppressed_before,
            "{what} (counted in lsp/servers _meta[\"acp-lsp\"].dropped)"
        ),
        Verdict::Suppress => live.dropped.suppressed_warnings += 1,
    }
}

/// `text` cut to [`MAX_PROGRESS_TEXT`] characters.
fn cut_progress_text(mut text: String) -> String {
    if let Some((at, _)) = text.char_indices().nth(MAX_PROGRESS_TEXT) {
        text.truncate(at);
    }
    text
}

/// LSP says a uinteger; some servers send fractions.
fn whole_percent(p: f64) -> u32 {
    p.clamp(0.0, 100.0) as u32
}

/// `$/progress` params of work-done progress.
#[derive(serde::Deserialize)]
struct ProgressParams {
    token: Value,
    value: WorkDone,
}

#[derive(serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum WorkDone {
    Begin {
        #[serde(default)]
        title: String,
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        percentage: Option<f64>,
    },
    Report {
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        percentage: Option<f64>,
    },
    End {},
}

/// Answers the server's requests and takes its notifications.
pub(super) struct Handler {
    pub(super) server: Weak<Server>,
}

impl ServerMessages for Handler {
    fn on_request(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Box<RawValue>, ErrorObject> {
        let Some(server) = self.server.upgrade() else {
            return Ok(raw_json(&Value::Null));
        };
        let params: Value = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let config = &server.spec.config;
        let result = match method {
            "workspace/configuration" => {
                let items = params
                    .get("items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                Value::Array(
                    items
                        .iter()
                        .map(|item| {
                            config.settings_section(item.get("section").and_then(Value::as_str))
                        })
                        .collect(),
                )
            }
            "workspace/workspaceFolders" => handshake::workspace_folders(&server.spec.root),
            "client/registerCapability" => {
                let regs = params
                    .get("registrations")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut live = server.live();
                let mut refused = 0u64;
                for reg in regs {
                    let (Some(id), Some(method)) = (
                        reg.get("id").and_then(Value::as_str),
                        reg.get("method").and_then(Value::as_str),
                    ) else {
                        continue;
                    };
                    // Same id again replaces (rust-analyzer re-registers its watchers).
                    live.registrations.retain(|r| r.id != id);
                    let registration = Registration {
                        id: id.to_string(),
                        method: method.to_string(),
                        register_options: reg.get("registerOptions").map(raw_json),
                    };
                    let bytes = live
                        .registrations
                        .iter()
                        .map(registration_size)
                        .sum::<usize>();
                    let size = registration_size(&registration);
                    if live.registrations.len() >= MAX_REGISTRATIONS
                        || bytes + size > MAX_REGISTRATION_BYTES
                    {
                        refused += 1;
                        live.registration_bytes = bytes;
                        continue;
                    }
                    live.registrations.push(registration);
                    live.registration_bytes = bytes + size;
                }
                if refused > 0 {
                    live.dropped.registrations += refused;
                    note_drop(
                        &mut live,
                        &config.name,
                        "refused dynamic registrations over the cap",
                    );
                    return Err(ErrorObject {
                        code: crate::gate::error::INTERNAL_ERROR,
                        message: format!(
                            "acp-lsp keeps at most {MAX_REGISTRATIONS} registrations \
                             ({MAX_REGISTRATION_BYTES} bytes); {refused} refused"
                        ),
                        data: None,
                    });
                }
                Value::Null
            }
            "client/unregisterCapability" => {
                // The spec's field is misspelled `unregisterations`; accept both.
                let regs = params
                    .get("unregisterations")
                    .or_else(|| params.get("unregistrations"))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut live = server.live();
                for reg in regs {
                    if let Some(id) = reg.get("id").and_then(Value::as_str) {
                        live.registrations.retain(|r| r.id != id);
                    }
                }
                live.registration_bytes = live.registrations.iter().map(registration_size).sum();
                Value::Null
            }
            "window/workDoneProgress/create" | "window/showMessageRequest" => Value::Null,
            "window/showDocument" => json!({ "success": false }),
            "workspace/applyEdit" => json!({
                "applied": false,
                "failureReason": "acp-lsp does not apply server-initiated edits; the agent applies edits it asked for"
            }),
            m if m.ends_with("/refresh") => Value::Null,
            _ => {
                return Err(ErrorObject {
                    code: crate::gate::error::METHOD_NOT_FOUND,
                    message: format!("acp-lsp does not handle {method}"),
                    data: None,
                })
            }
        };
        Ok(raw_json(&result))
    }

    fn on_notification(&self, method: &str, params: Option<&RawValue>) {
        let Some(server) = self.server.upgrade() else {
            return;
        };
        match method {
            "$/progress" => {
                // Partial results also travel as $/progress, without a `kind`;
                // they say nothing of readiness and do not parse here.
                let Some(ProgressParams { token, value }) =
                    params.and_then(|p| serde_json::from_str(p.get()).ok())
                else {
                    return;
                };
                // clangd's background index: its first end is when clangd's
                // answers cover the project (Live::awaiting_index).
                let index = token.as_str() == Some(crate::lsp::clangd::BACKGROUND_INDEX_TOKEN);
                let token = token.to_string();
                {
                    let mut live = server.live();
                    if index {
                        match value {
                            WorkDone::Begin { .. } => live.index_began = true,
                            WorkDone::End {} => live.awaiting_index = false,
                            WorkDone::Report { .. } => {}
                        }
                    }
                    match value {
                        WorkDone::Begin {
                            title,
                            message,
                            percentage,
                        } => {
                            let full = !live.progress.contains_key(&token)
                                && live.progress.len() >= MAX_PROGRESS_TOKENS;
                            if full || token.len() > MAX_PROGRESS_TOKEN_BYTES {
                                live.dropped.progress_tokens += 1;
                                let name = &server.spec.config.name;
                                note_drop(
                                    &mut live,
                                    name,
                                    "dropped work-done progress over the cap",
                                );
                                drop(live);
                                // Past the cap the end of the load cannot be
                                // known: it no longer holds the server.
                                if full {
                                    server.assume_loaded(StateReason::ProgressOverCap {
                                        limit: MAX_PROGRESS_TOKENS,
                                    });
                                }
                                return;
                            }
                            live.progress.insert(
                                token,
                                Progress {
                                    title: cut_progress_text(title),
                                    message: message.map(cut_progress_text),
                                    percentage: percentage.map(whole_percent),
                                },
                            );
                        }
                        WorkDone::Report {
                            message,
                            percentage,
                        } => {
                            if let Some(progress) = live.progress.get_mut(&token) {
                                progress.message =
                                    message.map(cut_progress_text).or(progress.message.take());
                                progress.percentage =
                                    percentage.map(whole_percent).or(progress.percentage);
                            }
                        }
                        WorkDone::End {} => {
                            live.progress.remove(&token);
                        }
                    }
                }
                server.update_readiness();
            }
            "experimental/serverStatus" => {
                let quiescent = params
                    .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                    .and_then(|v| v.get("quiescent").and_then(Value::as_bool));
                server.live().quiescent = quiescent;
                server.update_readiness();
            }
            "textDocument/publishDiagnostics" => {
                let Some(params) = params else { return };
                #[derive(serde::Deserialize)]
                struct Target {
                    uri: String,
                    #[serde(default)]
                    version: Option<i32>,
                }
                let Ok(Target { uri, version }) = serde_json::from_str(params.get()) else {
                    return;
                };
                {
                    let mut live = server.live();
                    live.sequence += 1;
                    let published = Published {
                        params: params.to_owned(),
                        version,
                        sequence: live.sequence,
                    };
                    live.diagnostics_bytes += params.get().len();
                    match live.diagnostics.insert(uri.clone(), published) {
                        Some(old) => live.diagnostics_bytes -= old.params.get().len(),
                        None => live.diagnostics_order.push_back(uri),
                    }
                    let mut evicted = 0u64;
                    while live.diagnostics_order.len() > MAX_DIAGNOSTIC_DOCUMENTS
                        || live.diagnostics_bytes > MAX_DIAGNOSTIC_BYTES
                    {
                        let Some(old) = live.diagnostics_order.pop_front() else {
                            break;
                        };
                        if let Some(old) = live.diagnostics.remove(&old) {
                            live.diagnostics_bytes -= old.params.get().len();
                        }
                        evicted += 1;
                    }
                    if evicted > 0 {
                        live.dropped.diagnostics += evicted;
                        let name = &server.spec.config.name;
                        note_drop(&mut live, name, "evicted diagnostics over the cap");
                    }
                }
                server.published.send_modify(|n| *n += 1);
            }
            "window/logMessage" | "window/showMessage" => {
                tracing::debug!(server = %server.spec.config.name, message = params.map(RawValue::get).unwrap_or(""), "{method}");
                if method == "window/logMessage" && server.live().awaiting_log.is_some() {
                    server.note_log(params);
                }
            }
            _ => {}
        }
    }
}
