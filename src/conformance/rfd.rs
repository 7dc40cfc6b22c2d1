//! The ACP RFD's requirements (`docs/rfds/lsp-proxy.mdx`) as a checklist:
//! each MUST and SHOULD a client has, named, and the verdicts the normative
//! checks give them, so an implementation sees what it meets and what it
//! does not.

use serde::Serialize;
use std::collections::BTreeMap;

/// How binding a requirement is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Level {
    #[serde(rename = "MUST")]
    Must,
    #[serde(rename = "SHOULD")]
    Should,
}

/// One requirement on the client.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Requirement {
    pub id: &'static str,
    pub level: Level,
    pub text: &'static str,
}

const fn must(id: &'static str, text: &'static str) -> Requirement {
    Requirement {
        id,
        level: Level::Must,
        text,
    }
}

const fn should(id: &'static str, text: &'static str) -> Requirement {
    Requirement {
        id,
        level: Level::Should,
        text,
    }
}

/// Every client requirement of the RFD, in its order.
pub(crate) const REQUIREMENTS: &[Requirement] = &[
    must(
        "capability",
        "advertise `lsp` in initialize (clientCapabilities in v1, capabilities in v2)",
    ),
    must(
        "server-fields",
        "entries carry serverId, name, workspacePath, state (strings) and capabilities (object)",
    ),
    must(
        "server-id-stable",
        "a serverId is stable across restarts of the same server in the same root",
    ),
    must(
        "workspace-overlap",
        "list only servers whose workspacePath overlaps the session's roots",
    ),
    must(
        "capabilities-verbatim",
        "capabilities is the server's initialize result capabilities, verbatim",
    ),
    must(
        "params-required",
        "lsp/request params is required (null is a value)",
    ),
    must(
        "params-unchanged",
        "forward params without reshaping them",
    ),
    must(
        "lsp-error-passthrough",
        "a server's LSP error comes back with its code, message and data in error.data",
    ),
    must(
        "unknown-server",
        "-32602 unknown_server for a serverId not listed for the session",
    ),
    must(
        "server-not-running",
        "-32602 server_not_running, with the current state in error.data, for a listed server that is not running",
    ),
    must(
        "method-not-forwarded",
        "-32602 method_not_forwarded for a method not in availableMethods",
    ),
    should(
        "error-lists",
        "errors include the current server list (unknown_server, server_not_running) or method list (method_not_forwarded)",
    ),
    must("refuse-notifications", "refuse notifications"),
    must(
        "refuse-lifecycle",
        "refuse initialize, initialized, shutdown, exit",
    ),
    must(
        "refuse-document-sync",
        "refuse document lifecycle (didOpen, didChange, …, workspace/did*)",
    ),
    must(
        "refuse-server-to-client",
        "refuse server-to-client requests (workspace/applyEdit, client/registerCapability, …)",
    ),
    must(
        "refuse-file-lifecycle",
        "refuse workspace/willCreateFiles, willRenameFiles, willDeleteFiles",
    ),
    must(
        "refuse-editor-interaction",
        "refuse foldingRange, selectionRange, linkedEditingRange, onTypeFormatting",
    ),
    must(
        "open-for-request",
        "open a document a textDocument/* request names for the duration of the request",
    ),
    must(
        "write-propagation",
        "pass the agent's writes to the server like any change made outside the editor",
    ),
    should(
        "cancellation",
        "on $/cancel_request, send $/cancelRequest and answer with the request-cancelled error",
    ),
];

/// The requirement a refused method falls under.
pub(crate) fn refusal_requirement(category: crate::gate::Refusal) -> &'static str {
    use crate::gate::Refusal;
    match category {
        Refusal::Notification => "refuse-notifications",
        Refusal::Lifecycle => "refuse-lifecycle",
        Refusal::DocumentSync => "refuse-document-sync",
        Refusal::ServerToClient => "refuse-server-to-client",
        Refusal::FileLifecycle => "refuse-file-lifecycle",
        Refusal::EditorInteraction => "refuse-editor-interaction",
        Refusal::NotListed => "method-not-forwarded",
    }
}

/// One requirement checked once.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub requirement: &'static str,
    pub passed: bool,
    /// What was checked, or what went wrong.
    pub detail: String,
}

/// Verdicts collected while checking one scenario.
#[derive(Debug, Default)]
pub struct Verdicts(pub Vec<Verdict>);

impl Verdicts {
    pub fn pass(&mut self, requirement: &'static str, detail: impl Into<String>) {
        debug_assert!(REQUIREMENTS.iter().any(|r| r.id == requirement));
        self.0.push(Verdict {
            requirement,
            passed: true,
            detail: detail.into(),
        });
    }

    pub fn fail(&mut self, requirement: &'static str, detail: impl Into<String>) {
        debug_assert!(REQUIREMENTS.iter().any(|r| r.id == requirement));
        self.0.push(Verdict {
            requirement,
            passed: false,
            detail: detail.into(),
        });
    }

    /// Passes or fails `requirement` on `ok`.
    pub fn check(&mut self, requirement: &'static str, ok: bool, detail: impl Into<String>) {
        if ok {
            self.pass(requirement, detail);
        } else {
            self.fail(requirement, detail);
        }
    }
}

/// A requirement's verdict over a whole run.
#[derive(Debug, Clone, Serialize)]
pub struct ChecklistRow {
    pub id: &'static str,
    pub level: Level,
    pub text: &'static str,
    /// `pass`, `fail` or `not checked`.
    pub verdict: &'static str,
    /// Scenarios that checked it.
    pub scenarios: Vec<String>,
    /// The first failure, as scenario: detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// Folds every scenario's verdicts into one row per requirement.
pub fn checklist<'a>(
    per_scenario: impl IntoIterator<Item = (&'a str, &'a [Verdict])>,
) -> Vec<ChecklistRow> {
    let mut seen: BTreeMap<&str, (Vec<String>, Option<String>)> = BTreeMap::new();
    for (scenario, verdicts) in per_scenario {
        for verdict in verdicts {
            let (scenarios, failure) = seen.entry(verdict.requirement).or_default();
            if !scenarios.iter().any(|s| s == scenario) {
                scenarios.push(scenario.to_string());
            }
            if !verdict.passed && failure.is_none() {
                *failure = Some(format!("{scenario}: {}", verdict.detail));
            }
        }
    }
    REQUIREMENTS
        .iter()
        .map(|r| {
            let (scenarios, failure) = seen.remove(r.id).unwrap_or_default();
            let verdict = match (&failure, scenarios.is_empty()) {
                (Some(_), _) => "fail",
                (None, true) => "not checked",
                (None, false) => "pass",
            };
            ChecklistRow {
                id: r.id,
                level: r.level,
                text: r.text,
                verdict,
                scenarios,
                failure,
            }
        })
        .collect()
}

/// The checklist as a table for people.
pub fn checklist_table(rows: &[ChecklistRow]) -> String {
    let width = rows.iter().map(|r| r.id.len()).max().unwrap_or(0);
    let mut out = String::from("RFD requirements (docs/rfds/lsp-proxy.mdx):\n");
    for row in rows {
        let level = match row.level {
            Level::Must => "MUST  ",
            Level::Should => "SHOULD",
        };
        out.push_str(&format!(
            "  {level} {:width$}  {:11}  {}\n",
            row.id, row.verdict, row.text
        ));
        if let Some(failure) = &row.failure {
            out.push_str(&format!(
                "  {:6} {:width$}  {:11}  ↳ {failure}\n",
                "", "", ""
            ));
        }
    }
    out
}

/// The requirements only a view of the servers' side can check, from a
/// recording: `capabilities` equal to the server's initialize result's, and
/// each forwarded request's `params` equal to the agent's.
pub(crate) fn server_side_verdicts(scenario: &super::fixture::Scenario) -> Verdicts {
    use super::fixture::{Body, Dir};
    use serde_json::Value;
    let mut verdicts = Verdicts::default();
    // serverId → the capabilities of its latest initialize result.
    let mut capabilities: std::collections::HashMap<String, Value> = Default::default();
    // serverId → the ids of its pending initialize requests.
    let mut initialize_ids: std::collections::HashMap<String, Vec<Value>> = Default::default();
    let mut asked: Vec<(String, Value)> = Vec::new();
    for line in &scenario.lines {
        let Body::Message(raw) = &line.body else {
            continue;
        };
        let Ok(message) = serde_json::from_str::<Value>(raw.get()) else {
            continue;
        };
        let items = match message {
            Value::Array(items) => items,
            single => vec![single],
        };
        for m in items {
            match &line.dir {
                Dir::ProxyToServer(id) if m["method"] == "initialize" => {
                    initialize_ids
                        .entry(id.clone())
                        .or_default()
                        .push(m["id"].clone());
                }
                Dir::ServerToProxy(id)
                    if m.get("method").is_none()
                        && initialize_ids
                            .get(id)
                            .is_some_and(|ids| ids.contains(&m["id"])) =>
                {
                    capabilities.insert(id.clone(), m["result"]["capabilities"].clone());
                }
                Dir::ProxyToServer(_) if m.get("id").is_some() && m["method"].is_string() => {
                    let method = m["method"].as_str().unwrap_or_default().to_string();
                    // Refused requests never arrive, so a forwarded one is
                    // matched by method and params; one with the method of an
                    // agent's request but params no agent sent was reshaped.
                    if asked.iter().any(|(want, _)| *want == method) {
                        let forwarded = m.get("params").cloned().unwrap_or(Value::Null);
                        let same = asked
                            .iter()
                            .position(|(want, params)| *want == method && *params == forwarded);
                        if let Some(at) = same {
                            asked.remove(at);
                        }
                        verdicts.check(
                            "params-unchanged",
                            same.is_some(),
                            format!("{method} (session.jsonl:{})", line.number),
                        );
                    }
                }
                Dir::AgentToProxy
                    if m["method"]
                        .as_str()
                        .is_some_and(|x| x.ends_with("lsp/request")) =>
                {
                    if let (Some(method), Some(params)) =
                        (m["params"]["method"].as_str(), m["params"].get("params"))
                    {
                        asked.push((method.to_string(), params.clone()));
                    }
                }
                Dir::ProxyToAgent => {
                    for entry in m["result"]["servers"].as_array().into_iter().flatten() {
                        let id = entry["serverId"].as_str().unwrap_or_default();
                        if let Some(initial) = capabilities.get(id) {
                            verdicts.check(
                                "capabilities-verbatim",
                                &entry["capabilities"] == initial,
                                format!("{} (session.jsonl:{})", entry["name"], line.number),
                            );
                        }
                    }
                }
                _ => {}
            }
        }
    }
    verdicts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_anywhere_fails_the_requirement_and_silence_is_not_a_pass() {
        let mut a = Verdicts::default();
        a.pass("unknown-server", "ok");
        let mut b = Verdicts::default();
        b.fail("unknown-server", "got -32601");
        let rows = checklist([("a", a.0.as_slice()), ("b", b.0.as_slice())]);
        let row = rows.iter().find(|r| r.id == "unknown-server").unwrap();
        assert_eq!(row.verdict, "fail");
        assert_eq!(row.failure.as_deref(), Some("b: got -32601"));
        let unchecked = rows.iter().find(|r| r.id == "cancellation").unwrap();
        assert_eq!(unchecked.verdict, "not checked");
        assert_eq!(rows.len(), REQUIREMENTS.len());
    }
}
