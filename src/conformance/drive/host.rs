//! `acp-lsp conformance agent`: the runner as the ACP agent of an editor
//! host, playing the normative scenarios inside the host's one session
//! (what a host cannot give is listed as not run).

use super::*;

/// How long `acp-lsp conformance agent` waits for the host to open a session.
pub(crate) const HOST_SESSION_WAIT: std::time::Duration = std::time::Duration::from_secs(600);
/// The session id this agent gives the host.
pub(super) const HOST_SESSION_ID: &str = "acp-lsp-conformance";

impl Live {
    /// The host (the editor) asked this agent something.
    pub(super) async fn answer_host_request(&mut self, method: &str, text: &str, value: &Value) {
        let Some(id) = raw_id(text) else {
            return;
        };
        let result = match method {
            "initialize" => {
                let version = value["params"]["protocolVersion"]
                    .as_u64()
                    .unwrap_or(1)
                    .min(1);
                json!({"protocolVersion": version, "agentCapabilities": {"loadSession": false},
                    "authMethods": [], "agentInfo": {"name": "acp-lsp conformance", "version": env!("CARGO_PKG_VERSION")}})
            }
            "session/new" => {
                let host = self.host.get_or_insert_with(HostState::default);
                if host.session_id.is_none() {
                    host.session_id = Some(HOST_SESSION_ID.to_string());
                    host.cwd = value["params"]["cwd"].as_str().map(str::to_string);
                }
                json!({ "sessionId": HOST_SESSION_ID })
            }
            "session/prompt" => {
                let host = self.host.get_or_insert_with(HostState::default);
                host.prompts.push(id);
                self.answer_prompts().await;
                return;
            }
            "authenticate" => Value::Null,
            _ => {
                let reply = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32601,\"message\":\"Method not found\"}}}}");
                if let Some(agent) = &self.agent {
                    let _ = agent.send(&reply).await;
                }
                return;
            }
        };
        let reply = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}");
        if let Some(agent) = &self.agent {
            let _ = agent.send(&reply).await;
        }
    }

    /// Answers waiting prompts with the verdict, once there is one.
    pub(super) async fn answer_prompts(&mut self) {
        let Some(host) = self.host.as_mut() else {
            return;
        };
        let Some(verdict) = host.verdict.clone() else {
            return;
        };
        let prompts = std::mem::take(&mut host.prompts);
        let session = host.session_id.clone().unwrap_or_default();
        let Some(agent) = &self.agent else {
            return;
        };
        for id in prompts {
            let update = json!({"jsonrpc": "2.0", "method": "session/update", "params": {
                "sessionId": session,
                "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": verdict}}}});
            let _ = agent.send(&update.to_string()).await;
            let _ = agent
                .send(&format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"stopReason\":\"end_turn\"}}}}"))
                .await;
        }
    }

    /// Plays a scenario's agent requests in the host's session.
    pub(super) async fn play_in_host(&mut self, scenario: &Scenario) -> Result<(), Failure> {
        let host_session = self
            .host
            .as_ref()
            .and_then(|h| h.session_id.clone())
            .unwrap_or_default();
        let script_sessions = script_session_ids(scenario);
        for line in &scenario.lines {
            let (Dir::AgentToProxy, Body::Message(raw)) = (&line.dir, &line.body) else {
                continue;
            };
            let value: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
            if !value.is_array() && value.get("method").is_none() {
                // The agent's answers to the editor: this runner answers the host itself.
                continue;
            }
            let mut text = raw.get().to_string();
            for session in &script_sessions {
                text = text.replace(&format!("\"{session}\""), &format!("\"{host_session}\""));
            }
            let raw = RawValue::from_string(text)
                .map_err(|e| Failure::new(Some(line.number), e.to_string()))?;
            self.send(Side::Agent, &raw)
                .await
                .map_err(|m| Failure::new(Some(line.number), m))?;
        }
        self.settle().await.map_err(|m| Failure::new(None, m))
    }
}

/// The session ids a script's agent gave its editor.
pub(super) fn script_session_ids(scenario: &Scenario) -> Vec<String> {
    scenario
        .lines
        .iter()
        .filter(|l| l.dir == Dir::AgentToProxy)
        .filter_map(|l| match &l.body {
            Body::Message(raw) => serde_json::from_str::<Value>(raw.get()).ok(),
            _ => None,
        })
        .filter_map(|v| v["result"]["sessionId"].as_str().map(str::to_string))
        .collect()
}

/// Why a scenario cannot run inside an editor host's session, if it cannot:
/// the host is the editor (no workspace steps, no second session) and its
/// folder must hold the scenario's workspace.
pub(crate) fn host_obstacle(scenario: &Scenario, cwd: &Path) -> Option<String> {
    if !scenario.meta.normative {
        return Some("not normative".into());
    }
    if scenario.lines.iter().any(|l| l.dir == Dir::Workspace) {
        return Some("needs workspace steps the runner cannot do in a host".into());
    }
    if script_session_ids(scenario).len() != 1 {
        return Some("needs more than one session".into());
    }
    let wanted = match crate::conformance::fixture::read_tree(&scenario.workspace()) {
        Ok(tree) => tree,
        Err(e) => return Some(e.to_string()),
    };
    let root = cwd.to_string_lossy();
    for (rel, bytes) in wanted {
        let bytes = match String::from_utf8(bytes) {
            Ok(text) => text.replace(crate::conformance::ROOT, &root).into_bytes(),
            Err(e) => e.into_bytes(),
        };
        if std::fs::read(cwd.join(&rel)).ok().as_deref() != Some(&bytes[..]) {
            return Some(format!(
                "the host's folder does not have {rel} of its workspace"
            ));
        }
    }
    None
}

/// `acp-lsp conformance agent`: this process is the ACP agent of an editor
/// host (on stdin/stdout). Once the host opens a session, every normative
/// scenario whose workspace is the session's folder is played; the verdict
/// goes to stderr, to `report` and to the reply to any prompt. Returns when
/// the host closes stdin.
pub async fn serve_host(
    scenarios: &[Scenario],
    on_verdict: impl FnOnce(&[crate::conformance::report::Outcome], &[(String, String)]) -> String,
) -> Vec<crate::conformance::report::Outcome> {
    let mut live = Live::new(
        Peer::start(tokio::io::empty(), tokio::io::sink(), Framing::Lines, false),
        Some(Peer::start(
            tokio::io::stdin(),
            tokio::io::stdout(),
            Framing::Lines,
            false,
        )),
        None,
        "",
        false,
    );
    live.session_ids.push(HOST_SESSION_ID.to_string());
    live.host = Some(HostState::default());
    let deadline = Instant::now() + HOST_SESSION_WAIT;
    while live.host.as_ref().is_some_and(|h| h.cwd.is_none()) {
        if !live.pump(deadline).await && (Instant::now() >= deadline || live.dead()) {
            return Vec::new();
        }
    }
    let cwd = PathBuf::from(
        live.host
            .as_ref()
            .and_then(|h| h.cwd.clone())
            .unwrap_or_default(),
    );
    live.bindings = Bindings::new(&cwd.to_string_lossy());
    let initialize = live.session.agent_initialize.clone();
    let mut outcomes = Vec::new();
    let mut skipped = Vec::new();
    for scenario in scenarios {
        if let Some(why) = host_obstacle(scenario, &cwd) {
            skipped.push((scenario.name.clone(), why));
            continue;
        }
        let started = std::time::Instant::now();
        live.session.agent_requests.clear();
        live.session.agent_answers.clear();
        live.session.cancelled.clear();
        live.session.agent_initialize = initialize.clone();
        let mut verdicts = crate::conformance::rfd::Verdicts::default();
        let result = match live.play_in_host(scenario).await {
            Ok(()) => crate::conformance::normative::check(scenario, &live.session, &mut verdicts),
            Err(f) => Err(f),
        };
        let (checked, failure) = match result {
            Ok(n) => (n, None),
            Err(f) => (0, Some(f)),
        };
        outcomes.push(crate::conformance::report::Outcome {
            scenario: scenario.name.clone(),
            passed: failure.is_none(),
            checked,
            failure,
            millis: started.elapsed().as_millis(),
            verdicts: verdicts.0,
        });
    }
    let verdict = on_verdict(&outcomes, &skipped);
    if let Some(host) = live.host.as_mut() {
        host.verdict = Some(verdict);
    }
    live.answer_prompts().await;
    // Keep answering the host (prompts get the verdict) until it closes stdin.
    loop {
        let far = Instant::now() + HOST_SESSION_WAIT;
        if !live.pump(far).await && live.dead() {
            break;
        }
    }
    outcomes
}
