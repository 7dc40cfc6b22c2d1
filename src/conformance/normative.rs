//! The normative half of a scenario: what an agent sends and what it must get
//! back, checked only as far as rfd/lsp-over-acp.md makes it normative —
//! the `lsp` capability in `initialize`, exactly one response per request,
//! shapes, error codes and `data.reason`, cancellation, and the scenario's
//! own `checks` (e.g. read-your-writes).

use super::drive::Session;
use super::fixture::{Body, Dir, Scenario};
use super::report::Failure;
use serde_json::Value;
use std::collections::HashMap;

/// The states of rfd §7.
const STATES: &[&str] = &[
    "starting",
    "indexing",
    "ready",
    "restarting",
    "failed",
    "stopped",
];

/// Checks a live session against the recording. Returns how many things were
/// checked, or the first failure.
pub fn check(scenario: &Scenario, session: &Session) -> Result<usize, Failure> {
    let mut checked = 0;
    let mut recorded: HashMap<String, (usize, Value)> = HashMap::new();
    let mut initialize: Option<(usize, Value)> = None;
    for line in &scenario.lines {
        let (Dir::ProxyToAgent, Body::Message(raw)) = (&line.dir, &line.body) else {
            continue;
        };
        let value: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
        let items = match value {
            Value::Array(items) => items,
            other => vec![other],
        };
        for item in items {
            if item.get("method").and_then(Value::as_str) == Some("initialize") {
                initialize = Some((line.number, item));
            } else if item.get("method").is_none() {
                if let Some(id) = item.get("id") {
                    recorded.insert(id.to_string(), (line.number, item));
                }
            }
        }
    }

    if let Some((number, recorded_init)) = initialize {
        let live = session
            .agent_initialize
            .as_deref()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
            .ok_or_else(|| Failure::new(Some(number), "the agent never received initialize"))?;
        // Where the capability goes follows the version the agent was sent
        // (an editor host may speak another version than the recording).
        let version = live["params"]["protocolVersion"]
            .as_u64()
            .or_else(|| recorded_init["params"]["protocolVersion"].as_u64())
            .unwrap_or(1);
        let caps = if version >= 2 {
            &live["params"]["capabilities"]
        } else {
            &live["params"]["clientCapabilities"]
        };
        if !caps["lsp"].is_object() || !caps["_meta"]["lsp"].is_object() {
            let place = if version >= 2 {
                "capabilities"
            } else {
                "clientCapabilities"
            };
            return Err(Failure::new(
                Some(number),
                format!("initialize reached the agent without {place}.lsp and {place}._meta.lsp (rfd §2)"),
            ));
        }
        checked += 1;
    }

    for (id, method, _) in &session.agent_requests {
        let Some((number, want)) = recorded.get(id) else {
            continue;
        };
        let fail = |m: String| Failure::new(Some(*number), format!("request {id} ({method}): {m}"));
        let answers: Vec<Value> = session
            .agent_answers
            .iter()
            .filter(|(i, _)| i == id)
            .filter_map(|(_, t)| serde_json::from_str(t).ok())
            .collect();
        if answers.len() != 1 {
            return Err(fail(format!(
                "{} responses, exactly one is required",
                answers.len()
            )));
        }
        let got = &answers[0];
        let cancelled = session.cancelled.contains(id);
        if let Some(error) = want.get("error") {
            let Some(live_error) = got.get("error") else {
                if cancelled {
                    checked += 1;
                    continue;
                }
                return Err(fail(format!(
                    "expected error {} ({}), got a result",
                    error["code"], error["data"]["reason"]
                ))
                .with_diff(want, got));
            };
            if live_error["code"] != error["code"]
                || live_error["data"]["reason"] != error["data"]["reason"]
            {
                return Err(fail(format!(
                    "expected error {} with data.reason {}, got {} with {}",
                    error["code"],
                    error["data"]["reason"],
                    live_error["code"],
                    live_error["data"]["reason"]
                ))
                .with_diff(want, got));
            }
        } else {
            let Some(result) = got.get("result") else {
                if cancelled && got["error"]["code"] == -32800 {
                    checked += 1;
                    continue;
                }
                return Err(fail("expected a result, got an error".into()).with_diff(want, got));
            };
            if method.ends_with("lsp/servers") {
                check_servers(result).map_err(|m| fail(m).with_diff(want, got))?;
            } else if method.ends_with("lsp/request") {
                check_request(&want["result"], result).map_err(|m| fail(m).with_diff(want, got))?;
            }
        }
        for rule in scenario.meta.checks.iter().filter(|c| c.id == *id) {
            let text = got.to_string();
            if !text.contains(&rule.contains) {
                return Err(
                    fail(format!("the answer does not contain {:?}", rule.contains))
                        .with_diff(want, got),
                );
            }
        }
        checked += 1;
    }
    Ok(checked)
}

/// rfd §4: the result's shape.
fn check_servers(result: &Value) -> Result<(), String> {
    let servers = result["servers"]
        .as_array()
        .ok_or("result.servers is not an array")?;
    if !result["availableMethods"].is_array() {
        return Err("result.availableMethods is not an array".into());
    }
    for (i, s) in servers.iter().enumerate() {
        for key in ["serverId", "name", "root", "languageId", "state"] {
            if !s[key].is_string() {
                return Err(format!("servers[{i}].{key} is not a string"));
            }
        }
        for key in ["languageIds", "fileExtensions"] {
            if !s[key].is_array() {
                return Err(format!("servers[{i}].{key} is not an array"));
            }
        }
        if !s["capabilities"].is_object() {
            return Err(format!("servers[{i}].capabilities is not an object"));
        }
        let state = s["state"].as_str().unwrap_or_default();
        if !STATES.contains(&state) {
            return Err(format!(
                "servers[{i}].state {state:?} is not a state of rfd §7"
            ));
        }
    }
    Ok(())
}

/// rfd §5: `{lspResult}`; where the recording had an answer, so must this.
fn check_request(want: &Value, result: &Value) -> Result<(), String> {
    let Some(live) = result.get("lspResult") else {
        return Err("result has no lspResult".into());
    };
    let recorded = &want["lspResult"];
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    if !empty(recorded) && empty(live) {
        return Err("lspResult is empty where the recording had an answer".into());
    }
    Ok(())
}
