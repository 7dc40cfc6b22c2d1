//! The normative half of a scenario: what an agent sends and what it must get
//! back, checked only as far as the ACP RFD (`docs/rfds/lsp-proxy.mdx`) and
//! rfd/lsp-over-acp.md make it normative — the `lsp` capability in
//! `initialize`, exactly one response per request, shapes, error codes and
//! `data.reason`, cancellation, and the scenario's own `checks` (e.g.
//! read-your-writes). Each check also gives a verdict on the RFD requirement
//! it covers (`conformance::rfd`).

use super::fixture::{Body, Dir, Scenario};
use super::report::Failure;
use super::rfd::Verdicts;
use super::transcript::Session;
use crate::gate::methods;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// The RFD's states; a client MAY report others, which this suite flags as
/// not the RFD's (acp-lsp reports only these).
const STATES: &[&str] = &["starting", "running", "not_running"];

/// Checks a live session against the recording, recording a verdict for each
/// RFD requirement a check covers. Returns how many things were checked, or
/// the first failure.
pub fn check(
    scenario: &Scenario,
    session: &Session,
    verdicts: &mut Verdicts,
) -> Result<usize, Failure> {
    let expected = Expected::read(scenario);
    let mut checked = 0;
    // Every request is checked even after a failure, so that the checklist
    // gives a verdict on every requirement; the scenario fails with the first.
    let mut first_failure: Option<Failure> = None;
    let mut tally = |outcome: Result<(), Failure>| match outcome {
        Ok(()) => checked += 1,
        Err(failure) => {
            first_failure.get_or_insert(failure);
        }
    };
    if let Some((number, recorded_init)) = &expected.initialize {
        tally(check_capability(session, *number, recorded_init, verdicts));
    }
    let mut server_ids = ServerIds::default();
    for (id, method, _) in &session.agent_requests {
        let Some((number, want)) = expected.recorded.get(id) else {
            continue;
        };
        let request = Asked {
            id,
            method,
            number: *number,
            want,
            asked: expected.sent.get(id).unwrap_or(&Value::Null),
        };
        tally(check_answer(
            scenario,
            session,
            &request,
            &mut server_ids,
            verdicts,
        ));
    }
    server_ids.pass_stable(verdicts);
    match first_failure {
        Some(failure) => Err(failure),
        None => Ok(checked),
    }
}

/// What the recording holds to check against: the `initialize` the agent
/// was sent, the answers it got (by JSON id text) and what it asked.
#[derive(Default)]
struct Expected {
    initialize: Option<(usize, Value)>,
    /// Answer by id: (line number, the answer).
    recorded: HashMap<String, (usize, Value)>,
    /// The agent's requests by id.
    sent: HashMap<String, Value>,
}

impl Expected {
    fn read(scenario: &Scenario) -> Expected {
        let mut expected = Expected::default();
        for line in &scenario.lines {
            let Body::Message(raw) = &line.body else {
                continue;
            };
            let value: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
            let items = match value {
                Value::Array(items) => items,
                other => vec![other],
            };
            for item in items {
                match line.dir {
                    Dir::ProxyToAgent => {
                        if item.get("method").and_then(Value::as_str) == Some("initialize") {
                            expected.initialize = Some((line.number, item));
                        } else if item.get("method").is_none() {
                            if let Some(id) = item.get("id") {
                                expected
                                    .recorded
                                    .insert(id.to_string(), (line.number, item));
                            }
                        }
                    }
                    Dir::AgentToProxy if item.get("method").is_some() => {
                        if let Some(id) = item.get("id") {
                            expected.sent.insert(id.to_string(), item);
                        }
                    }
                    _ => {}
                }
            }
        }
        expected
    }
}

/// The `lsp` capability in the `initialize` the agent received, where the
/// protocol version it was sent puts it.
fn check_capability(
    session: &Session,
    number: usize,
    recorded_init: &Value,
    verdicts: &mut Verdicts,
) -> Result<(), Failure> {
    let live = session
        .agent_initialize
        .as_deref()
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .unwrap_or(Value::Null);
    // Where the capability goes follows the version the agent was sent
    // (an editor host may speak another version than the recording).
    let version = live["params"]["protocolVersion"]
        .as_u64()
        .or_else(|| recorded_init["params"]["protocolVersion"].as_u64())
        .unwrap_or(1);
    let (caps, place) = if version >= 2 {
        (&live["params"]["capabilities"], "capabilities")
    } else {
        (&live["params"]["clientCapabilities"], "clientCapabilities")
    };
    if caps["lsp"].is_object() {
        verdicts.pass(
            "capability",
            format!("{place}.lsp in protocol version {version}"),
        );
        Ok(())
    } else {
        let message = format!("initialize reached the agent without {place}.lsp (RFD: capability)");
        verdicts.fail("capability", &message);
        Err(Failure::new(Some(number), message))
    }
}

/// One request of the agent's, with what the recording expects for it.
struct Asked<'a> {
    /// Its JSON id text.
    id: &'a str,
    method: &'a str,
    /// The recorded answer's line.
    number: usize,
    /// The recorded answer.
    want: &'a Value,
    /// The request as the agent sent it.
    asked: &'a Value,
}

impl Asked<'_> {
    fn fail(&self, message: String) -> Failure {
        Failure::new(
            Some(self.number),
            format!("request {} ({}): {message}", self.id, self.method),
        )
    }

    /// The `lsp/request`'s inner method (empty for other requests).
    fn lsp_method(&self) -> &str {
        self.asked["params"]["method"].as_str().unwrap_or_default()
    }
}

/// How a request's answer was judged, when it passed.
#[derive(PartialEq)]
enum Judged {
    /// Checked in full; the scenario's own checks follow.
    Checked,
    /// Cancelled and answered once: nothing more is asked of it.
    Cancelled,
}

/// One request's answer: exactly one, the expected error or result, and
/// the scenario's own checks on it.
fn check_answer(
    scenario: &Scenario,
    session: &Session,
    request: &Asked<'_>,
    server_ids: &mut ServerIds,
    verdicts: &mut Verdicts,
) -> Result<(), Failure> {
    let id = request.id;
    let answers: Vec<Value> = session
        .agent_answers
        .iter()
        .filter(|(i, _)| i == id)
        .filter_map(|(_, t)| serde_json::from_str(t).ok())
        .collect();
    if answers.len() != 1 {
        return Err(request.fail(format!(
            "{} responses, exactly one is required",
            answers.len()
        )));
    }
    let got = &answers[0];
    let cancelled = session.cancelled.contains(id);
    let judged = match request.want.get("error") {
        Some(error) => check_error_answer(request, error, got, cancelled, verdicts)?,
        None => check_result_answer(request, got, cancelled, session, server_ids, verdicts)?,
    };
    if judged == Judged::Cancelled {
        return Ok(());
    }
    check_scenario_rules(scenario, request, got, verdicts)
}

/// An answer where the recording has an error: the same code and
/// `data.reason`, and the error data the RFD asks for.
fn check_error_answer(
    request: &Asked<'_>,
    error: &Value,
    got: &Value,
    cancelled: bool,
    verdicts: &mut Verdicts,
) -> Result<Judged, Failure> {
    let (id, method, want) = (request.id, request.method, request.want);
    let Some(live_error) = got.get("error") else {
        if cancelled {
            verdicts.pass("cancellation", format!("request {id} answered once"));
            return Ok(Judged::Cancelled);
        }
        let message = format!(
            "expected error {} ({}), got a result",
            error["code"], error["data"]["reason"]
        );
        if let Some(requirement) = error_requirement(method, request.asked, error) {
            verdicts.fail(requirement, format!("request {id}: {message}"));
        }
        return Err(request.fail(message).with_diff(want, got));
    };
    if cancelled && live_error["code"] == -32800 {
        verdicts.pass("cancellation", format!("request {id}: -32800"));
    }
    let requirement = error_requirement(method, request.asked, error);
    if live_error["code"] != error["code"]
        || live_error["data"]["reason"] != error["data"]["reason"]
    {
        let message = format!(
            "expected error {} with data.reason {}, got {} with {}",
            error["code"],
            error["data"]["reason"],
            live_error["code"],
            live_error["data"]["reason"]
        );
        if let Some(requirement) = requirement {
            verdicts.fail(requirement, format!("request {id}: {message}"));
        }
        return Err(request.fail(message).with_diff(want, got));
    }
    if let Some(requirement) = requirement {
        verdicts.pass(
            requirement,
            format!(
                "request {id}: {} {}",
                live_error["code"], live_error["data"]["reason"]
            ),
        );
    }
    check_error_data(id, request.lsp_method(), error, live_error, verdicts)
        .map_err(|m| request.fail(m).with_diff(want, got))?;
    Ok(Judged::Checked)
}

/// An answer where the recording has a result: a result, and for the
/// gate's methods the shape the RFD gives it.
fn check_result_answer(
    request: &Asked<'_>,
    got: &Value,
    cancelled: bool,
    session: &Session,
    server_ids: &mut ServerIds,
    verdicts: &mut Verdicts,
) -> Result<Judged, Failure> {
    let (id, method, want) = (request.id, request.method, request.want);
    let lsp_method = request.lsp_method();
    let Some(result) = got.get("result") else {
        if cancelled && got["error"]["code"] == -32800 {
            verdicts.pass("cancellation", format!("request {id}: -32800"));
            return Ok(Judged::Cancelled);
        }
        return Err(request
            .fail("expected a result, got an error".into())
            .with_diff(want, got));
    };
    if cancelled {
        verdicts.pass("cancellation", format!("request {id} answered once"));
    }
    if method.ends_with("lsp/servers") {
        check_servers(result, &session.root, verdicts)
            .map_err(|m| request.fail(m).with_diff(want, got))?;
        server_ids
            .note(result, verdicts)
            .map_err(|m| request.fail(m).with_diff(want, got))?;
    } else if method.ends_with("lsp/request") {
        check_request(&want["result"], result).map_err(|m| {
            if lsp_method.starts_with("textDocument/") {
                verdicts.fail("open-for-request", format!("request {id}: {m}"));
            }
            request.fail(m).with_diff(want, got)
        })?;
        if lsp_method.starts_with("textDocument/") && !is_empty(&want["result"]["lspResult"]) {
            verdicts.pass(
                "open-for-request",
                format!("request {id}: {lsp_method} answered"),
            );
        }
    }
    Ok(Judged::Checked)
}

/// The scenario's own checks on an answer (read-your-writes).
fn check_scenario_rules(
    scenario: &Scenario,
    request: &Asked<'_>,
    got: &Value,
    verdicts: &mut Verdicts,
) -> Result<(), Failure> {
    let id = request.id;
    for rule in scenario.meta.checks.iter().filter(|c| c.id == *id) {
        let text = got.to_string();
        if !text.contains(&rule.contains) {
            let message = format!("the answer does not contain {:?}", rule.contains);
            verdicts.fail("write-propagation", format!("request {id}: {message}"));
            return Err(request.fail(message).with_diff(request.want, got));
        }
        verdicts.pass(
            "write-propagation",
            format!("request {id} sees {:?}", rule.contains),
        );
    }
    Ok(())
}

/// The serverIds each (name, root) was listed with, and how many times:
/// one id per server across listings (RFD: server-id-stable).
#[derive(Default)]
struct ServerIds(HashMap<(String, String), (String, usize)>);

impl ServerIds {
    /// Notes the servers of one `lsp/servers` result; an id that changed fails.
    fn note(&mut self, result: &Value, verdicts: &mut Verdicts) -> Result<(), String> {
        for s in result["servers"].as_array().into_iter().flatten() {
            let key = (
                s["name"].as_str().unwrap_or_default().to_string(),
                s["workspacePath"].as_str().unwrap_or_default().to_string(),
            );
            let server_id = s["serverId"].as_str().unwrap_or_default().to_string();
            let entry = self.0.entry(key).or_insert((server_id.clone(), 0));
            entry.1 += 1;
            if entry.0 != server_id {
                let message = format!(
                    "{} at {} was listed as {} and then as {server_id}",
                    s["name"], s["workspacePath"], entry.0
                );
                verdicts.fail("server-id-stable", &message);
                return Err(message);
            }
        }
        Ok(())
    }

    /// A pass for each server listed more than once with one id.
    fn pass_stable(&self, verdicts: &mut Verdicts) {
        for ((name, root), (_, times)) in &self.0 {
            if *times > 1 {
                verdicts.pass(
                    "server-id-stable",
                    format!("{name} at {root}: one serverId in {times} listings"),
                );
            }
        }
    }
}

/// The requirement an expected error stands for, from what was asked.
fn error_requirement(method: &str, asked: &Value, error: &Value) -> Option<&'static str> {
    let reason = error["data"]["reason"].as_str().unwrap_or_default();
    let lsp_method = asked["params"]["method"].as_str();
    match reason {
        "unknown_server" => Some("unknown-server"),
        "server_not_running" => Some("server-not-running"),
        "method_not_forwarded" => {
            let category = lsp_method
                .and_then(methods::refusal)
                .unwrap_or(crate::gate::Refusal::NotListed);
            Some(super::rfd::refusal_requirement(category))
        }
        "server_error" => Some("lsp-error-passthrough"),
        "invalid_params"
            if method.ends_with("lsp/request") && asked["params"].get("params").is_none() =>
        {
            Some("params-required")
        }
        _ => None,
    }
}

/// What the RFD puts in `error.data` beside `reason`.
fn check_error_data(
    id: &str,
    lsp_method: &str,
    want: &Value,
    live: &Value,
    verdicts: &mut Verdicts,
) -> Result<(), String> {
    let data = &live["data"];
    match want["data"]["reason"].as_str().unwrap_or_default() {
        "server_not_running" => {
            if !data["state"].is_string() {
                let message = format!("request {id}: server_not_running without data.state");
                verdicts.fail("server-not-running", &message);
                return Err(message);
            }
            verdicts.check(
                "error-lists",
                data["servers"].is_array(),
                format!("request {id}: server_not_running data.servers"),
            );
        }
        "unknown_server" => verdicts.check(
            "error-lists",
            data["servers"].is_array(),
            format!("request {id}: unknown_server data.servers"),
        ),
        "method_not_forwarded" => {
            let listed = data["availableMethods"]
                .as_array()
                .is_some_and(|list| !list.iter().any(|m| m == lsp_method));
            verdicts.check(
                "error-lists",
                listed,
                format!(
                    "request {id}: method_not_forwarded data.availableMethods without {lsp_method}"
                ),
            );
        }
        "server_error" => {
            let recorded = &want["data"];
            let ok = data["code"] == recorded["code"]
                && data["message"] == recorded["message"]
                && data.get("data") == recorded.get("data");
            if !ok {
                let message = format!(
                    "request {id}: error.data does not carry the server's code, message and data ({})",
                    recorded
                );
                verdicts.fail("lsp-error-passthrough", &message);
                return Err(message);
            }
        }
        _ => {}
    }
    Ok(())
}

/// The RFD's server entry and result shapes.
fn check_servers(result: &Value, root: &Path, verdicts: &mut Verdicts) -> Result<(), String> {
    let outcome = servers_shape(result);
    match &outcome {
        Ok(()) => verdicts.pass("server-fields", "lsp/servers result"),
        Err(m) => verdicts.fail("server-fields", m),
    }
    outcome?;
    for s in result["servers"].as_array().into_iter().flatten() {
        let path = Path::new(s["workspacePath"].as_str().unwrap_or_default());
        let overlaps = path.starts_with(root) || root.starts_with(path);
        verdicts.check(
            "workspace-overlap",
            overlaps,
            format!("{} at {}", s["name"], path.display()),
        );
        if !overlaps {
            return Err(format!(
                "{} at {} does not overlap the session's root {}",
                s["name"],
                path.display(),
                root.display()
            ));
        }
    }
    Ok(())
}

fn servers_shape(result: &Value) -> Result<(), String> {
    let servers = result["servers"]
        .as_array()
        .ok_or("result.servers is not an array")?;
    if !result["availableMethods"]
        .as_array()
        .is_some_and(|m| m.iter().all(Value::is_string))
    {
        return Err("result.availableMethods is not an array of strings".into());
    }
    for (i, s) in servers.iter().enumerate() {
        for key in ["serverId", "name", "workspacePath", "state"] {
            if !s[key].is_string() {
                return Err(format!("servers[{i}].{key} is not a string"));
            }
        }
        if s.get("languageId").is_some_and(|v| !v.is_string()) {
            return Err(format!("servers[{i}].languageId is not a string"));
        }
        if s.get("fileExtensions")
            .is_some_and(|v| !v.as_array().is_some_and(|a| a.iter().all(Value::is_string)))
        {
            return Err(format!(
                "servers[{i}].fileExtensions is not a list of strings"
            ));
        }
        if !s["capabilities"].is_object() {
            return Err(format!("servers[{i}].capabilities is not an object"));
        }
        let path = s["workspacePath"].as_str().unwrap_or_default();
        if !Path::new(path).is_absolute() {
            return Err(format!(
                "servers[{i}].workspacePath {path:?} is not absolute"
            ));
        }
        let state = s["state"].as_str().unwrap_or_default();
        if !STATES.contains(&state) {
            return Err(format!(
                "servers[{i}].state {state:?} is none of the RFD's (starting, running, not_running)"
            ));
        }
    }
    Ok(())
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// rfd §5: `{lspResult}`; where the recording had an answer, so must this.
fn check_request(want: &Value, result: &Value) -> Result<(), String> {
    let Some(live) = result.get("lspResult") else {
        return Err("result has no lspResult".into());
    };
    if !is_empty(&want["lspResult"]) && is_empty(live) {
        return Err("lspResult is empty where the recording had an answer".into());
    }
    Ok(())
}
