//! Plays a scenario's editor and agent against a live implementation with
//! real language servers: to re-record a fixture (`--record-fixtures`), and
//! for the normative suite (`acp-lsp conformance`), which checks the agent's
//! answers against what the recording makes normative.
//!
//! Pacing follows fixtures/README.md: a request waits for every earlier
//! request's response, a response waits for its request, a notification goes
//! at once, a workspace step waits like a request.

mod host;

pub use self::host::serve_host;

use super::fixture::{copy_workspace, Body, Dir, Scenario, WorkspaceStep};
use super::normalize::Bindings;
use super::report::Failure;
use super::transcript::Session;
use super::wire::{accept_bridge, Framing, Peer};
use super::{LIVE_ANSWER_TIMEOUT, PROXY_EXIT_TIMEOUT};
use crate::jsonrpc::object::RawObject;
use crate::sys::local_socket::Listener;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::time::Instant;

/// How often a killed server is checked for having been reaped.
const REAP_POLL: std::time::Duration = std::time::Duration::from_millis(5);
/// Between two `lsp/servers` asked while another implementation's server is
/// not `running` yet (the RFD's way to wait for a server).
const RUNNING_POLL_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// The notification the editor sends through the proxy to mark where a
/// workspace step happened in the recording (removed from the fixture).
pub(crate) const MARK_METHOD: &str = "_acp-lsp/conformance-mark";

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

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Editor,
    Agent,
}

struct Live {
    editor: Peer,
    agent: Option<Peer>,
    agent_listener: Option<Listener>,
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
    /// Set when this runner is the agent of an editor host.
    host: Option<HostState>,
}

/// `acp-lsp conformance agent`: what the host told this agent.
#[derive(Default)]
struct HostState {
    session_id: Option<String>,
    cwd: Option<String>,
    /// `session/prompt` ids not answered yet.
    prompts: Vec<String>,
    /// The verdict, once the scenarios have run.
    verdict: Option<String>,
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
    let agent_listener = Listener::bind(&agent_socket)
        .map_err(|e| Failure::new(None, format!("binding the agent socket: {e}")))?;
    let config = temp.join("acp-lsp.toml");
    let text = super::fixture::config_with_defaults(&scenario.meta.config)
        .map_err(|e| Failure::new(None, format!("the scenario's config: {e}")))?;
    std::fs::write(&config, text)
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
    let mut live = Live::new(
        Peer::start(stdout, stdin, Framing::Lines, false),
        None,
        Some(agent_listener),
        &root_text,
        options.acp_lsp_ids,
    );
    live.session.root = root.to_path_buf();
    let played = live.play(scenario).await;
    if played.is_ok() {
        live.editor.close().await;
        // Keep answering the editor's side while the proxy shuts down.
        let deadline = Instant::now() + PROXY_EXIT_TIMEOUT;
        let exited = loop {
            tokio::select! {
                status = child.wait() => break status.is_ok(),
                more = live.pump(deadline) => {
                    if !more && (Instant::now() >= deadline || live.dead()) {
                        break tokio::time::timeout_at(deadline, child.wait()).await.is_ok();
                    }
                }
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

/// A message's id exactly as sent (to echo it byte for byte).
fn raw_id(text: &str) -> Option<String> {
    let raw = serde_json::from_str::<&RawValue>(text).ok()?;
    let object = RawObject::parse(raw).ok()?;
    object.get_raw("id").map(|r| r.get().to_string())
}

/// A message's id as a key (its JSON text after parsing).
fn id_text(value: &Value) -> Option<String> {
    value.get("id").map(Value::to_string)
}

impl Live {
    fn new(
        editor: Peer,
        agent: Option<Peer>,
        agent_listener: Option<Listener>,
        root: &str,
        acp_lsp_ids: bool,
    ) -> Live {
        Live {
            editor,
            agent,
            agent_listener,
            bindings: Bindings::new(root),
            acp_lsp_ids,
            pending: Vec::new(),
            arrived: Vec::new(),
            marks: HashSet::new(),
            auto_answered: HashSet::new(),
            session: Session {
                agent_requests: Vec::new(),
                agent_answers: Vec::new(),
                agent_initialize: None,
                buffers: BTreeMap::new(),
                bindings: Bindings::new(root),
                root: PathBuf::from(root),
                cancelled: HashSet::new(),
            },
            session_ids: Vec::new(),
            extra_ids: 0,
            host: None,
        }
    }

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
            let listener = self
                .agent_listener
                .as_ref()
                .ok_or("the agent's connection has closed")?;
            let (_, peer) = accept_bridge(listener, Framing::Lines, true, deadline)
                .await
                .map_err(|e| format!("the proxy did not start the agent: {e}"))?;
            self.agent = Some(peer);
        }
        Ok(())
    }

    /// Nothing more can arrive: every connection has closed.
    fn dead(&self) -> bool {
        self.editor.inbox.closed && self.agent.as_ref().is_none_or(|a| a.inbox.closed)
    }

    /// Waits until every request sent has its response.
    async fn settle(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + LIVE_ANSWER_TIMEOUT;
        while !self.pending.is_empty() {
            if !self.pump(deadline).await && (Instant::now() >= deadline || self.dead()) {
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
                if !self.pump(deadline).await && (Instant::now() >= deadline || self.dead()) {
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
        if side == Side::Agent && !self.acp_lsp_ids && messages.len() == 1 {
            self.await_running(&text).await?;
        }
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
                .find(|s| s["name"] == name && s["workspacePath"].as_str() == Some(&root_text))
            {
                return Ok(s["serverId"].as_str().map(str::to_string));
            }
            if by_name.is_none() {
                by_name = servers
                    .iter()
                    .find(|s| s["name"] == name || s["workspacePath"].as_str() == Some(&root_text))
                    .and_then(|s| s["serverId"].as_str())
                    .map(str::to_string);
            }
        }
        Ok(by_name)
    }

    /// `_meta.waitUntilReady` is acp-lsp's extension. Before such an
    /// `lsp/request` reaches another implementation, the runner does what an
    /// agent written to the RFD does instead: it asks `lsp/servers` (outside
    /// the script) until the server is `running`, for at most that long.
    async fn await_running(&mut self, live_text: &str) -> Result<(), String> {
        let Ok(message) = serde_json::from_str::<Value>(live_text) else {
            return Ok(());
        };
        let params = &message["params"];
        let is_request = message["method"]
            .as_str()
            .is_some_and(|m| m.ends_with("lsp/request"));
        let wait = params["_meta"]["waitUntilReady"].as_u64();
        let (Some(wait), Some(session), Some(server), true) = (
            wait,
            params["sessionId"].as_str(),
            params["serverId"].as_str(),
            is_request,
        ) else {
            return Ok(());
        };
        let deadline = Instant::now() + std::time::Duration::from_millis(wait);
        loop {
            let servers = self.list_servers(session).await?;
            let running = servers
                .iter()
                .any(|s| s["serverId"] == server && s["state"] == "running");
            if running || Instant::now() >= deadline {
                return Ok(());
            }
            tokio::time::sleep(RUNNING_POLL_INTERVAL).await;
        }
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
        let editor_open = !self.editor.inbox.closed;
        let got = match (self.agent.as_mut(), self.agent_listener.as_ref()) {
            (Some(agent), _) => {
                let agent_open = !agent.inbox.closed;
                if !editor_open && !agent_open {
                    return false;
                }
                tokio::select! {
                    more = self.editor.inbox.more(deadline), if editor_open => more.then_some(Side::Editor),
                    more = agent.inbox.more(deadline), if agent_open => more.then_some(Side::Agent),
                }
            }
            (None, Some(listener)) => {
                tokio::select! {
                    more = self.editor.inbox.more(deadline), if editor_open => more.then_some(Side::Editor),
                    // The agent may connect while we wait.
                    accepted = tokio::time::timeout_at(deadline, listener.accept()) => {
                        let Ok(Ok(stream)) = accepted else { return false };
                        let (read, write) = stream.into_split();
                        let mut read = tokio::io::BufReader::new(read);
                        let mut hello = String::new();
                        let _ = tokio::io::AsyncBufReadExt::read_line(&mut read, &mut hello).await;
                        self.agent = Some(Peer::start(read, write, Framing::Lines, true));
                        return true;
                    }
                }
            }
            (None, None) => {
                if !editor_open {
                    return false;
                }
                self.editor
                    .inbox
                    .more(deadline)
                    .await
                    .then_some(Side::Editor)
            }
        };
        let Some(side) = got else {
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
                if side == Side::Agent && self.host.is_some() {
                    self.answer_host_request(method, text, &value).await;
                    return;
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
        let Some(id) = raw_id(text) else {
            return;
        };
        if let Some(key) = id_text(value) {
            self.auto_answered.insert(key);
        }
        let params = &value["params"];
        let reply = match method {
            "fs/write_text_file" => {
                if let Some((path, content)) = written_file(params) {
                    self.session.buffers.insert(path, content);
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
            if !self.pump(deadline).await && (Instant::now() >= deadline || self.dead()) {
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
                            .find(|s| s["serverId"].as_str() == Some(&id))?["_meta"]["acp-lsp"]
                            ["pid"]
                            .as_i64()
                    })
                    .ok_or_else(|| format!("no lsp/servers answer gave the pid of {server}"))?;
                // A language server process the proxy started.
                let _ = crate::sys::kill(pid as crate::sys::Pid, crate::sys::Signal::Kill);
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

/// The file and text of `fs/write_text_file` params.
pub(super) fn written_file(params: &Value) -> Option<(PathBuf, String)> {
    let path = params["path"].as_str()?;
    let content = params["content"].as_str()?;
    Some((PathBuf::from(path), content.to_string()))
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
