//! Plays a scenario's editor and agent against a live implementation with
//! real language servers: to re-record a fixture (`--record-fixtures`), and
//! for the normative suite (`acp-lsp conformance`), which checks the agent's
//! answers against what the recording makes normative.
//!
//! Pacing follows fixtures/README.md: a request waits for every earlier
//! request's response, a response waits for its request, a notification goes
//! at once, a workspace step waits like a request.

use super::fixture::{
    copy_workspace, parse_line, read_tree, Body, Dir, Line, Scenario, WorkspaceStep,
};
use super::normalize::{server_placeholder, Bindings, ROOT};
use super::report::{Failure, Outcome};
use super::wire::{accept_bridge, Framing, Peer};
use super::{ConformanceError, LIVE_ANSWER_TIMEOUT, PROXY_EXIT_TIMEOUT};
use crate::jsonrpc::object::RawObject;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::net::UnixListener;
use tokio::time::Instant;

/// How often a killed server is checked for having been reaped.
const REAP_POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// The notification the editor sends through the proxy to mark where a
/// workspace step happened in the recording (removed from the fixture).
pub const MARK_METHOD: &str = "_acp-lsp/conformance-mark";

/// What to run the scenario against.
#[derive(Debug, Clone)]
pub struct DriveOptions {
    /// The implementation's command. `{agent}` is replaced by the command of
    /// the agent stand-in (appended when absent), `{config}` by a file with
    /// the scenario's acp-lsp configuration, `{record}` by the recording path.
    pub command: Vec<OsString>,
    /// This executable (for the agent stand-in bridge).
    pub acp_lsp: PathBuf,
    /// Whether serverIds are acp-lsp's (UUID v5 of name and root), so that a
    /// script can name a server before asking `lsp/servers`.
    pub acp_lsp_ids: bool,
}

/// What one live run produced.
pub struct Session {
    /// The agent's requests (JSON id text → (method, message text)).
    pub agent_requests: Vec<(String, String, String)>,
    /// Responses the agent received, by JSON id text, in arrival order.
    pub agent_answers: Vec<(String, String)>,
    /// The `initialize` the agent received.
    pub agent_initialize: Option<String>,
    /// The editor's buffers after the session (fs/write_text_file).
    pub buffers: BTreeMap<PathBuf, String>,
    pub bindings: Bindings,
    /// Where each workspace step's mark went (step index in the script).
    pub root: PathBuf,
    pub cancelled: HashSet<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Editor,
    Agent,
}

struct Live {
    editor: Peer,
    agent: Option<Peer>,
    agent_listener: UnixListener,
    bindings: Bindings,
    acp_lsp_ids: bool,
    /// Requests the script sent that have no response yet: (side, id).
    pending: Vec<(Side, String)>,
    /// Requests that reached a side: (side, id).
    arrived: Vec<(Side, String)>,
    marks: HashSet<u64>,
    /// Ids of the requests the editor answered by itself (fs/*): a
    /// recording's copy of that answer is not sent again.
    auto_answered: HashSet<String>,
    session: Session,
    /// Sessions the agent created, oldest first.
    session_ids: Vec<String>,
    extra_ids: u64,
}

/// Runs the script part of `scenario` (its `…→proxy` and `workspace` lines)
/// against the command; returns what happened, or the first failure.
pub async fn drive(
    scenario: &Scenario,
    options: &DriveOptions,
    record: Option<&Path>,
    root: &Path,
    temp: &Path,
) -> Result<Session, Failure> {
    let root_text = root.to_string_lossy().into_owned();
    copy_workspace(&scenario.workspace(), root, &root_text)
        .map_err(|e| Failure::new(None, format!("copying the workspace: {e}")))?;
    let agent_socket = temp.join("agent.sock");
    let agent_listener = UnixListener::bind(&agent_socket)
        .map_err(|e| Failure::new(None, format!("binding the agent socket: {e}")))?;
    let config = temp.join("acp-lsp.toml");
    std::fs::write(&config, &scenario.meta.config)
        .map_err(|e| Failure::new(None, format!("writing the config: {e}")))?;
    let record_path = record
        .map(Path::to_path_buf)
        .unwrap_or_else(|| temp.join("record.jsonl"));

    let agent_command: Vec<OsString> = vec![
        options.acp_lsp.clone().into_os_string(),
        "conformance".into(),
        "bridge".into(),
        agent_socket.clone().into_os_string(),
    ];
    let mut command: Vec<OsString> = Vec::new();
    let mut placed_agent = false;
    for word in &options.command {
        match word.to_str() {
            Some("{agent}") => {
                command.extend(agent_command.iter().cloned());
                placed_agent = true;
            }
            Some("{config}") => command.push(config.clone().into_os_string()),
            Some("{record}") => command.push(record_path.clone().into_os_string()),
            _ => command.push(word.clone()),
        }
    }
    if !placed_agent {
        command.extend(agent_command);
    }
    let (program, args) = command
        .split_first()
        .ok_or_else(|| Failure::new(None, "no command to run"))?;
    let log = std::fs::File::create(temp.join("proxy.log"))
        .map_err(|e| Failure::new(None, format!("creating the log: {e}")))?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Failure::new(None, format!("starting {program:?}: {e}")))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(Failure::new(None, "BUG: the child's stdio is piped"));
    };
    let mut live = Live {
        editor: Peer::start(stdout, stdin, Framing::Lines, false),
        agent: None,
        agent_listener,
        bindings: Bindings::new(&root_text),
        acp_lsp_ids: options.acp_lsp_ids,
        pending: Vec::new(),
        arrived: Vec::new(),
        marks: HashSet::new(),
        auto_answered: HashSet::new(),
        session: Session {
            agent_requests: Vec::new(),
            agent_answers: Vec::new(),
            agent_initialize: None,
            buffers: BTreeMap::new(),
            bindings: Bindings::new(&root_text),
            root: root.to_path_buf(),
            cancelled: HashSet::new(),
        },
        session_ids: Vec::new(),
        extra_ids: 0,
    };
    let played = live.play(scenario).await;
    if played.is_ok() {
        live.editor.close().await;
        // Keep answering the editor's side while the proxy shuts down.
        let deadline = Instant::now() + PROXY_EXIT_TIMEOUT;
        let exited = loop {
            tokio::select! {
                status = child.wait() => break status.is_ok(),
                more = live.pump(deadline) => if !more && Instant::now() >= deadline { break false },
            }
        };
        if !exited {
            let _ = child.start_kill();
            return Err(Failure::new(
                None,
                "the proxy did not exit after the editor closed its input",
            ));
        }
    } else {
        let _ = child.start_kill();
    }
    played?;
    live.session.bindings = live.bindings.clone();
    Ok(live.session)
}

fn id_text(value: &Value) -> Option<String> {
    value.get("id").map(Value::to_string)
}

impl Live {
    async fn play(&mut self, scenario: &Scenario) -> Result<(), Failure> {
        for (step_index, line) in scenario.lines.iter().enumerate() {
            let fail = |m: String| Failure::new(Some(line.number), m);
            match (&line.dir, &line.body) {
                (Dir::EditorToProxy, Body::Message(raw)) => {
                    self.send(Side::Editor, raw).await.map_err(fail)?
                }
                (Dir::AgentToProxy, Body::Message(raw)) => {
                    self.send(Side::Agent, raw).await.map_err(fail)?
                }
                (Dir::Workspace, Body::Step(step)) => {
                    self.settle().await.map_err(fail)?;
                    self.mark(step_index as u64).await.map_err(fail)?;
                    self.workspace(step).await.map_err(fail)?;
                }
                // The recording's other lines are what happened, not what to do.
                _ => {}
            }
        }
        self.settle().await.map_err(|m| Failure::new(None, m))
    }

    async fn agent(&mut self) -> Result<(), String> {
        if self.agent.is_none() {
            let deadline = Instant::now() + LIVE_ANSWER_TIMEOUT;
            let (_, peer) = accept_bridge(&self.agent_listener, Framing::Lines, true, deadline)
                .await
                .map_err(|e| format!("the proxy did not start the agent: {e}"))?;
            self.agent = Some(peer);
        }
        Ok(())
    }

    /// Waits until every request sent has its response.
    async fn settle(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + LIVE_ANSWER_TIMEOUT;
        while !self.pending.is_empty() {
            if !self.pump(deadline).await && Instant::now() >= deadline {
                return Err(format!(
                    "no response to {:?} within {} s",
                    self.pending,
                    LIVE_ANSWER_TIMEOUT.as_secs()
                ));
            }
        }
        Ok(())
    }

    async fn send(&mut self, side: Side, raw: &RawValue) -> Result<(), String> {
        if side == Side::Agent {
            self.agent().await?;
        }
        let value: Value = serde_json::from_str(raw.get()).map_err(|e| e.to_string())?;
        let messages: Vec<&Value> = match &value {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        let is_response = messages.len() == 1 && messages[0].get("method").is_none();
        let is_notification = messages.iter().all(|m| m.get("id").is_none());
        if is_response {
            let id = id_text(messages[0]).unwrap_or_default();
            let deadline = Instant::now() + LIVE_ANSWER_TIMEOUT;
            while !self.arrived.contains(&(side, id.clone())) {
                if !self.pump(deadline).await && Instant::now() >= deadline {
                    return Err(format!("the request {id} this line answers never arrived"));
                }
            }
            if side == Side::Editor && self.auto_answered.contains(&id) {
                return Ok(());
            }
            if side == Side::Agent {
                if let Some(session) = messages[0]["result"]["sessionId"].as_str() {
                    self.session_ids.push(session.to_string());
                }
            }
        } else if !is_notification {
            self.settle().await?;
        }
        self.resolve_servers(raw.get()).await?;
        let text = self.bindings.to_live(raw.get());
        for m in &messages {
            if let (Some(id), Some(method)) = (id_text(m), m.get("method").and_then(Value::as_str))
            {
                self.pending.push((side, id.clone()));
                if side == Side::Agent {
                    self.session
                        .agent_requests
                        .push((id, method.to_string(), m.to_string()));
                }
            }
            if m.get("method").and_then(Value::as_str) == Some("$/cancel_request") {
                self.session
                    .cancelled
                    .insert(m["params"]["requestId"].to_string());
            }
        }
        let peer = match side {
            Side::Editor => &self.editor,
            Side::Agent => self.agent.as_ref().ok_or("BUG: agent connected above")?,
        };
        peer.send(&text).await.map_err(|e| e.to_string())
    }

    /// Binds every `${serverId:…}` the text names: from acp-lsp's id scheme,
    /// or by asking `lsp/servers` (another implementation's ids are opaque).
    async fn resolve_servers(&mut self, text: &str) -> Result<(), String> {
        let mut rest = text;
        while let Some(start) = rest.find("${serverId:") {
            let Some(len) = rest[start..].find('}') else {
                break;
            };
            let placeholder = rest[start..start + len + 1].to_string();
            rest = &rest[start + len + 1..];
            if self.bindings.servers.contains_key(&placeholder) {
                continue;
            }
            let inner = &placeholder["${serverId:".len()..placeholder.len() - 1];
            let (name, sub) = inner.split_once('@').unwrap_or((inner, ""));
            let root = if sub.is_empty() {
                PathBuf::from(&self.bindings.root)
            } else {
                Path::new(&self.bindings.root).join(sub)
            };
            if self.acp_lsp_ids {
                let id = crate::lsp::registry::server_id(name, &root);
                self.bindings.servers.insert(placeholder, id);
            } else if let Some(id) = self.ask_server_id(name, &root).await? {
                self.bindings.servers.insert(placeholder, id);
            }
        }
        Ok(())
    }

    /// An extra `lsp/servers` outside the script, to learn a serverId.
    async fn ask_server_id(&mut self, name: &str, root: &Path) -> Result<Option<String>, String> {
        // Newest session first; a server rooted below one session's root is
        // listed only for that session.
        let sessions: Vec<String> = self.session_ids.iter().rev().cloned().collect();
        let root_text = root.to_string_lossy().into_owned();
        let mut by_name = None;
        for session in sessions {
            let servers = self.list_servers(&session).await?;
            if let Some(s) = servers
                .iter()
                .find(|s| s["name"] == name && s["root"].as_str() == Some(&root_text))
            {
                return Ok(s["serverId"].as_str().map(str::to_string));
            }
            if by_name.is_none() {
                by_name = servers
                    .iter()
                    .find(|s| s["name"] == name || s["root"].as_str() == Some(&root_text))
                    .and_then(|s| s["serverId"].as_str())
                    .map(str::to_string);
            }
        }
        Ok(by_name)
    }

    /// `lsp/servers` for a session, outside the script.
    async fn list_servers(&mut self, session: &str) -> Result<Vec<Value>, String> {
        self.agent().await?;
        self.extra_ids += 1;
        let id = format!("\"conformance-servers-{}\"", self.extra_ids);
        let request = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"lsp/servers\",\"params\":{{\"sessionId\":{}}}}}",
            Value::String(session.to_string())
        );
        self.pending.push((Side::Agent, id.clone()));
        if let Some(agent) = &self.agent {
            agent.send(&request).await.map_err(|e| e.to_string())?;
        }
        self.settle().await?;
        let answer = self
            .session
            .agent_answers
            .iter()
            .rev()
            .find(|(i, _)| *i == id)
            .map(|(_, text)| text.clone());
        self.session.agent_answers.retain(|(i, _)| *i != id);
        let value: Value = answer
            .and_then(|a| serde_json::from_str(&a).ok())
            .unwrap_or(Value::Null);
        Ok(value["result"]["servers"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// Handles one incoming message from either side; false at the deadline
    /// or when nothing more can come.
    async fn pump(&mut self, deadline: Instant) -> bool {
        let got = match self.agent.as_mut() {
            Some(agent) => {
                tokio::select! {
                    more = self.editor.inbox.more(deadline) => more.then_some(Side::Editor),
                    more = agent.inbox.more(deadline) => more.then_some(Side::Agent),
                }
            }
            None => {
                tokio::select! {
                    more = self.editor.inbox.more(deadline) => more.then_some(Side::Editor),
                    // The agent may connect while we wait.
                    accepted = self.agent_listener.accept() => {
                        if let Ok((stream, _)) = accepted {
                            let (read, write) = stream.into_split();
                            let mut read = tokio::io::BufReader::new(read);
                            let mut hello = String::new();
                            let _ = tokio::io::AsyncBufReadExt::read_line(&mut read, &mut hello).await;
                            self.agent = Some(Peer::start(read, write, Framing::Lines, true));
                        }
                        return true;
                    }
                }
            }
        };
        let Some(side) = got else {
            // An inbox that closed ends its `more` at once: don't spin.
            if Instant::now() < deadline {
                let both_closed =
                    self.editor.inbox.closed && self.agent.as_ref().is_none_or(|a| a.inbox.closed);
                if both_closed {
                    return false;
                }
                tokio::time::sleep_until(
                    deadline.min(Instant::now() + std::time::Duration::from_millis(20)),
                )
                .await;
                return true;
            }
            return false;
        };
        let inbox = match side {
            Side::Editor => &mut self.editor.inbox,
            Side::Agent => match self.agent.as_mut() {
                Some(a) => &mut a.inbox,
                None => return true,
            },
        };
        let Some(last) = inbox.received.last_mut() else {
            return true;
        };
        last.consumed = true;
        let text = last.text.clone();
        self.handle(side, &text).await;
        true
    }

    async fn handle(&mut self, side: Side, text: &str) {
        let Ok(value) = serde_json::from_str::<Value>(text) else {
            return;
        };
        if let Value::Array(items) = value {
            // A v2 batch: each member on its own.
            for item in items {
                Box::pin(self.handle(side, &item.to_string())).await;
            }
            return;
        }
        let method = value.get("method").and_then(Value::as_str);
        let id = id_text(&value);
        match (method, id) {
            (Some(method), Some(id)) => {
                if side == Side::Agent && method == "initialize" {
                    self.session.agent_initialize = Some(text.to_string());
                }
                self.arrived.push((side, id));
                if side == Side::Editor {
                    self.answer_editor_request(method, text, &value).await;
                }
            }
            (None, Some(id)) => {
                self.pending.retain(|(s, i)| !(*s == side && *i == id));
                if side == Side::Agent {
                    self.session.agent_answers.push((id, text.to_string()));
                }
            }
            (Some(MARK_METHOD), None) => {
                if let Some(step) = value["params"]["step"].as_u64() {
                    self.marks.insert(step);
                }
            }
            _ => {}
        }
    }

    /// The editor answers the agent's `fs/*` from its buffers; anything else
    /// it does not implement.
    async fn answer_editor_request(&mut self, method: &str, text: &str, value: &Value) {
        let Ok(raw) = serde_json::from_str::<&RawValue>(text) else {
            return;
        };
        let Ok(object) = RawObject::parse(raw) else {
            return;
        };
        let Some(id) = object.get_raw("id").map(|r| r.get().to_string()) else {
            return;
        };
        if let Some(key) = id_text(value) {
            self.auto_answered.insert(key);
        }
        let params = &value["params"];
        let reply = match method {
            "fs/write_text_file" => {
                if let (Some(path), Some(content)) = (params["path"].as_str(), params["content"].as_str()) {
                    self.session.buffers.insert(PathBuf::from(path), content.to_string());
                }
                format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":null}}")
            }
            "fs/read_text_file" => {
                let path = PathBuf::from(params["path"].as_str().unwrap_or_default());
                let content = match self.session.buffers.get(&path) {
                    Some(text) => Some(text.clone()),
                    None => std::fs::read_to_string(&path).ok(),
                };
                match content {
                    Some(content) => {
                        let content = slice_lines(&content, params["line"].as_u64(), params["limit"].as_u64());
                        format!(
                            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{}}}",
                            json!({ "content": content })
                        )
                    }
                    None => format!(
                        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32002,\"message\":\"Resource not found\"}}}}"
                    ),
                }
            }
            _ => format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32601,\"message\":\"Method not found\"}}}}"
            ),
        };
        let _ = self.editor.send(&reply).await;
    }

    /// Sends the mark through the proxy and waits for it to reach the agent,
    /// so the recording has it before the step's effects.
    async fn mark(&mut self, step: u64) -> Result<(), String> {
        let mark = json!({"jsonrpc": "2.0", "method": MARK_METHOD, "params": {"step": step}});
        self.editor
            .send(&mark.to_string())
            .await
            .map_err(|e| e.to_string())?;
        self.agent().await?;
        let deadline = Instant::now() + LIVE_ANSWER_TIMEOUT;
        while !self.marks.contains(&step) {
            if !self.pump(deadline).await && Instant::now() >= deadline {
                return Err("the workspace mark never reached the agent".into());
            }
        }
        Ok(())
    }

    async fn workspace(&mut self, step: &WorkspaceStep) -> Result<(), String> {
        let root = PathBuf::from(&self.bindings.root);
        match step {
            WorkspaceStep::Write { path, text } => {
                let path = root.join(path);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
                }
                std::fs::write(&path, self.bindings.to_live(text)).map_err(|e| e.to_string())
            }
            WorkspaceStep::Remove(path) => {
                std::fs::remove_file(root.join(path)).map_err(|e| e.to_string())
            }
            WorkspaceStep::Sleep(ms) => {
                tokio::time::sleep(std::time::Duration::from_millis(*ms)).await;
                Ok(())
            }
            WorkspaceStep::Kill(server) => {
                self.resolve_servers(server).await?;
                let id = self.bindings.to_live(server);
                let pid = self
                    .session
                    .agent_answers
                    .iter()
                    .rev()
                    .filter_map(|(_, text)| serde_json::from_str::<Value>(text).ok())
                    .find_map(|v| {
                        v["result"]["servers"]
                            .as_array()?
                            .iter()
                            .find(|s| s["serverId"].as_str() == Some(&id))?["pid"]
                            .as_i64()
                    })
                    .ok_or_else(|| format!("no lsp/servers answer gave the pid of {server}"))?;
                // SAFETY: kill(2) of a language server process the proxy started.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGKILL);
                }
                // Go on once the proxy has reaped it (it knows the server
                // is gone), so the recording does not race the restart.
                let proc_dir = PathBuf::from(format!("/proc/{pid}"));
                let deadline = Instant::now() + LIVE_ANSWER_TIMEOUT;
                while proc_dir.exists() {
                    if Instant::now() >= deadline {
                        return Err(format!("the proxy never reaped the killed server {server}"));
                    }
                    let _ = self.pump(Instant::now() + REAP_POLL).await;
                }
                Ok(())
            }
        }
    }
}

/// `fs/read_text_file`'s `line` (1-based) and `limit`.
fn slice_lines(text: &str, line: Option<u64>, limit: Option<u64>) -> String {
    if line.is_none() && limit.is_none() {
        return text.to_string();
    }
    let skip = line.unwrap_or(1).saturating_sub(1) as usize;
    let take = limit.map_or(usize::MAX, |l| l as usize);
    text.split_inclusive('\n').skip(skip).take(take).collect()
}

/// Re-records a scenario against acp-lsp and the real servers: rewrites
/// `session.jsonl` (and `expect/` when the session wrote).
pub async fn record_fixture(
    scenario: &Scenario,
    acp_lsp: &Path,
) -> Result<Outcome, ConformanceError> {
    let started = std::time::Instant::now();
    let temp = tempfile::tempdir().map_err(ConformanceError::io("creating a temp dir"))?;
    let base = temp
        .path()
        .canonicalize()
        .map_err(ConformanceError::io("resolving the temp dir"))?;
    let root = base.join("ws");
    let record = base.join("record.jsonl");
    let options = DriveOptions {
        command: vec![
            acp_lsp.as_os_str().to_owned(),
            "proxy".into(),
            "--config".into(),
            "{config}".into(),
            "--record".into(),
            "{record}".into(),
            "--".into(),
            "{agent}".into(),
        ],
        acp_lsp: acp_lsp.to_path_buf(),
        acp_lsp_ids: true,
    };
    let session = match drive(scenario, &options, Some(&record), &root, &base).await {
        Ok(session) => session,
        Err(failure) => {
            return Ok(Outcome {
                scenario: scenario.name.clone(),
                passed: false,
                checked: 0,
                failure: Some(failure),
                millis: started.elapsed().as_millis(),
            })
        }
    };
    let recorded =
        std::fs::read_to_string(&record).map_err(ConformanceError::io("reading the recording"))?;
    let lines = fixture_lines(scenario, &recorded, &session.bindings.root)?;
    let count = lines.len();
    let mut out = lines.join("\n");
    out.push('\n');
    std::fs::write(scenario.dir.join("session.jsonl"), out)
        .map_err(ConformanceError::io("writing session.jsonl"))?;
    write_expect(scenario, &session, &base)?;
    Ok(Outcome {
        scenario: scenario.name.clone(),
        passed: true,
        checked: count,
        failure: None,
        millis: started.elapsed().as_millis(),
    })
}

/// The proxy's recording in fixture form: placeholders for the root and the
/// serverIds, the workspace steps where their marks went.
fn fixture_lines(
    scenario: &Scenario,
    recorded: &str,
    root: &str,
) -> Result<Vec<String>, ConformanceError> {
    let mut bindings = Bindings::new(root);
    for text in recorded.lines() {
        let Ok(line) = parse_line(0, text) else {
            continue;
        };
        if let (
            Dir::ProxyToServer(id),
            Body::Spawn {
                name,
                root: server_root,
            },
        ) = (&line.dir, &line.body)
        {
            let sub = Path::new(server_root)
                .strip_prefix(root)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            bindings
                .servers
                .insert(server_placeholder(name, &sub), id.clone());
        }
    }
    let steps: Vec<&Line> = scenario.lines.iter().collect();
    let mut out = Vec::new();
    for text in recorded.lines() {
        let Ok(line) = parse_line(0, text) else {
            out.push(bindings.to_recorded(text));
            continue;
        };
        if let Body::Message(raw) = &line.body {
            if raw.get().contains(MARK_METHOD) {
                if line.dir == Dir::EditorToProxy {
                    let value: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
                    if let Some(step) = value["params"]["step"]
                        .as_u64()
                        .and_then(|s| steps.get(s as usize))
                    {
                        out.push(step.source.clone());
                    }
                }
                continue;
            }
        }
        out.push(bindings.to_recorded(text));
    }
    let _ = ROOT;
    Ok(out)
}

fn write_expect(
    scenario: &Scenario,
    session: &Session,
    base: &Path,
) -> Result<(), ConformanceError> {
    let steps_write = scenario.lines.iter().any(|l| {
        matches!(
            l.body,
            Body::Step(WorkspaceStep::Write { .. } | WorkspaceStep::Remove(_))
        )
    });
    let expect = scenario.expect();
    if session.buffers.is_empty() && !steps_write {
        if expect.exists() {
            std::fs::remove_dir_all(&expect).map_err(ConformanceError::io("removing expect/"))?;
        }
        return Ok(());
    }
    // The workspace as the session left it, without what servers wrote:
    // a fresh copy, the steps, then the editor's buffers saved.
    let clean = base.join("expect");
    let root_text = session.root.to_string_lossy().into_owned();
    copy_workspace(&scenario.workspace(), &clean, ROOT)
        .map_err(ConformanceError::io("copying the workspace"))?;
    for line in &scenario.lines {
        match &line.body {
            Body::Step(WorkspaceStep::Write { path, text }) => {
                let path = clean.join(path);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(ConformanceError::io("writing expect/"))?;
                }
                std::fs::write(path, text).map_err(ConformanceError::io("writing expect/"))?;
            }
            Body::Step(WorkspaceStep::Remove(path)) => {
                let _ = std::fs::remove_file(clean.join(path));
            }
            _ => {}
        }
    }
    for (path, text) in &session.buffers {
        if let Ok(rel) = path.strip_prefix(&session.root) {
            let target = clean.join(rel);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(ConformanceError::io("writing expect/"))?;
            }
            std::fs::write(target, text.replace(&root_text, ROOT))
                .map_err(ConformanceError::io("writing expect/"))?;
        }
    }
    if expect.exists() {
        std::fs::remove_dir_all(&expect).map_err(ConformanceError::io("removing expect/"))?;
    }
    let tree = read_tree(&clean).map_err(ConformanceError::io("reading expect/"))?;
    for (rel, bytes) in tree {
        let target = expect.join(rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(ConformanceError::io("writing expect/"))?;
        }
        std::fs::write(target, bytes).map_err(ConformanceError::io("writing expect/"))?;
    }
    Ok(())
}
