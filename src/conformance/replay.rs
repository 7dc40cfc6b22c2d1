//! Replays a recorded scenario against acp-lsp in lock step, with no real
//! language server: the runner plays the editor and the agent, and stands in
//! for each server by answering what the recorded server answered.
//!
//! Lines are taken in order. `…→proxy` lines are sent; a `proxy→…` line
//! waits until acp-lsp has sent a message equal to it (after
//! [`super::normalize`]); `spawn` waits for acp-lsp to start that server
//! (a `conformance bridge` process that connects back here); `exit` ends it.

mod matching;

use super::drive::written_file;
use super::fixture::{copy_workspace, read_tree, Body, Dir, Line, Scenario, WorkspaceStep};
use super::normalize::{compare, normalize_fields, Bindings, ROOT};
use super::report::{Failure, Outcome};
use super::wire::{accept_bridge, Framing, Hello, Peer};
use super::{ConformanceError, PROXY_EXIT_TIMEOUT};
use crate::jsonrpc::object::RawObject;
use crate::lsp::config::Config;
use crate::sys::local_socket::Listener;
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::time::Instant;

/// How to replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// The `acp-lsp` executable: the proxy under test and the bridges.
    pub acp_lsp: PathBuf,
    /// How long one line may wait ([`super::STEP_TIMEOUT`]).
    pub step_timeout: Duration,
}

/// Which connection a line is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Channel {
    Editor,
    Agent,
    /// By recorded serverId.
    Server(String),
}

fn expected_channel(dir: &Dir) -> Option<Channel> {
    match dir {
        Dir::ProxyToEditor => Some(Channel::Editor),
        Dir::ProxyToAgent => Some(Channel::Agent),
        Dir::ProxyToServer(id) => Some(Channel::Server(id.clone())),
        _ => None,
    }
}

/// A stand-in for one recorded server.
struct Stand {
    peer: Option<Peer>,
    pid: Option<u32>,
    /// Killed by a `kill` step, not yet seen reaped (its `exit` line waits).
    killed: Option<crate::sys::Pid>,
    /// Recorded request id (JSON text) → live id (JSON text), for acp-lsp's
    /// requests to this server.
    ids: Vec<(String, String)>,
}

struct Replay<'s> {
    scenario: &'s Scenario,
    timeout: Duration,
    bindings: Bindings,
    root: PathBuf,
    editor: Peer,
    editor_open: bool,
    agent: Option<Peer>,
    agent_listener: Listener,
    listeners: HashMap<String, Listener>,
    /// Accepted bridges not yet claimed by a `spawn` line, per server name.
    pool: HashMap<String, Vec<(Hello, Peer)>>,
    stands: HashMap<String, Stand>,
    /// Peers of server processes that ended (checked for leftovers).
    retired: Vec<(String, Peer)>,
    /// What the editor confirmed writing (path → text): its buffers.
    buffers: BTreeMap<PathBuf, String>,
    checked: usize,
}

/// Replays one scenario. `Err` only when it cannot be set up.
pub async fn replay(
    scenario: &Scenario,
    options: &ReplayOptions,
) -> Result<Outcome, ConformanceError> {
    let started = std::time::Instant::now();
    let (_temp, base) = super::scratch_dir()?;
    let root = base.join("ws");
    let root_text = root.to_string_lossy().into_owned();
    copy_workspace(&scenario.workspace(), &root, &root_text)
        .map_err(ConformanceError::io("copying the workspace"))?;
    let sockets = base.join("sock");
    std::fs::create_dir_all(&sockets).map_err(ConformanceError::io("creating the socket dir"))?;

    let mut bindings = Bindings::new(&root_text);
    let mut names: Vec<String> = Vec::new();
    for line in &scenario.lines {
        if let (Dir::ProxyToServer(recorded_id), Body::Spawn { name, root }) =
            (&line.dir, &line.body)
        {
            let live_root = PathBuf::from(bindings.to_live(root));
            bindings.servers.insert(
                recorded_id.clone(),
                crate::lsp::registry::server_id(name, &live_root),
            );
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }

    let bad = |what: String| ConformanceError::Fixture {
        scenario: scenario.name.clone(),
        what,
    };
    let config_path = base.join("acp-lsp.toml");
    let config = replay_config(&scenario.meta.config, &names, &options.acp_lsp, &sockets)
        .map_err(|e| bad(format!("scenario.toml config: {e}")))?;
    std::fs::write(&config_path, config).map_err(ConformanceError::io("writing the config"))?;

    let agent_socket = sockets.join("agent.sock");
    let agent_listener =
        Listener::bind(&agent_socket).map_err(ConformanceError::io("binding the agent socket"))?;
    let mut listeners = HashMap::new();
    for name in &names {
        let listener = Listener::bind(sockets.join(format!("{name}.sock")))
            .map_err(ConformanceError::io("binding a server socket"))?;
        listeners.insert(name.clone(), listener);
    }

    // The proxy's debug log, shown with a failure, only when asked for: it
    // is costly to write and rarely read.
    let show_log = std::env::var_os("ACP_LSP_CONFORMANCE_LOG").is_some();
    let empty_path = base.join("empty-path");
    std::fs::create_dir_all(&empty_path)
        .map_err(ConformanceError::io("creating the empty PATH"))?;
    let log = std::fs::File::create(base.join("proxy.log"))
        .map_err(ConformanceError::io("creating the log"))?;
    let mut child = tokio::process::Command::new(&options.acp_lsp)
        .arg("proxy")
        // The injected MCP entry carries a fresh socket and token each run;
        // the fixtures are about lsp/*.
        .args(["--mcp", "off"])
        .arg("--config")
        .arg(&config_path)
        .arg("--log-level")
        .arg(if show_log { "debug" } else { "warn" })
        .arg("--")
        .arg(&options.acp_lsp)
        .arg("conformance")
        .arg("bridge")
        .arg(&agent_socket)
        .current_dir(&root)
        // No real language server can be started by mistake: nothing a
        // replay runs is looked up on PATH.
        .env("PATH", &empty_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .map_err(ConformanceError::io("starting acp-lsp proxy"))?;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| bad("BUG: stdin is piped".into()))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| bad("BUG: stdout is piped".into()))?;

    let mut run = Replay {
        scenario,
        timeout: options.step_timeout,
        bindings,
        root: root.clone(),
        editor: Peer::start(stdout, stdin, Framing::Lines, false),
        editor_open: true,
        agent: None,
        agent_listener,
        listeners,
        pool: HashMap::new(),
        stands: HashMap::new(),
        retired: Vec::new(),
        buffers: BTreeMap::new(),
        checked: 0,
    };
    let mut failure = run.play().await.err();
    if failure.is_none() {
        failure = run.finish(&mut child).await.err();
    }
    if failure.is_some() {
        let _ = child.start_kill();
        if let Some(f) = failure.as_mut() {
            let log = std::fs::read_to_string(base.join("proxy.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            if !tail.is_empty() && show_log {
                f.message.push_str("\nproxy log (last lines):\n");
                for l in tail.iter().rev() {
                    f.message.push_str(l);
                    f.message.push('\n');
                }
            }
        }
    }
    // What acp-lsp sent matched the recording byte for byte, so what the
    // recording shows of the servers' side holds for this run too.
    let verdicts = if failure.is_none() {
        super::rfd::server_side_verdicts(scenario).0
    } else {
        Vec::new()
    };
    Ok(Outcome {
        scenario: scenario.name.clone(),
        passed: failure.is_none(),
        checked: run.checked,
        failure,
        millis: started.elapsed().as_millis(),
        verdicts,
    })
}

/// The acp-lsp configuration of a replay: the scenario's own, every server of
/// the recording replaced by a bridge to its stand-in, every other disabled.
pub(crate) fn replay_config(
    scenario_config: &str,
    names: &[String],
    acp_lsp: &Path,
    sockets: &Path,
) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = super::fixture::config_with_defaults(scenario_config)?
        .parse()
        .map_err(|e| format!("{e}"))?;
    if doc.get("servers").is_none() {
        let mut table = toml_edit::Table::new();
        table.set_implicit(true);
        doc.insert("servers", toml_edit::Item::Table(table));
    }
    let servers = doc["servers"]
        .as_table_mut()
        .ok_or_else(|| "`servers` must be a table".to_string())?;
    for builtin in Config::builtin().servers {
        let entry = servers
            .entry(&builtin.name)
            .or_insert(toml_edit::Item::Table(toml_edit::Table::new()));
        let table = entry
            .as_table_mut()
            .ok_or_else(|| format!("servers.{} must be a table", builtin.name))?;
        if names.contains(&builtin.name) {
            table.insert(
                "command",
                toml_edit::value(acp_lsp.to_string_lossy().as_ref()),
            );
            let mut args = toml_edit::Array::new();
            args.push("conformance");
            args.push("bridge");
            args.push(
                sockets
                    .join(format!("{}.sock", builtin.name))
                    .to_string_lossy()
                    .as_ref(),
            );
            table.insert("args", toml_edit::value(args));
        } else {
            table.insert("enabled", toml_edit::value(false));
        }
    }
    Ok(doc.to_string())
}

impl Replay<'_> {
    async fn play(&mut self) -> Result<(), Failure> {
        let lines = &self.scenario.lines;
        for (index, line) in lines.iter().enumerate() {
            self.step(index, line).await?;
            self.checked += 1;
        }
        Ok(())
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }

    async fn step(&mut self, index: usize, line: &Line) -> Result<(), Failure> {
        let fail = |message: String| Failure::new(Some(line.number), message);
        match (&line.dir, &line.body) {
            (Dir::EditorToProxy, Body::Eof) => {
                self.editor.close().await;
                self.editor_open = false;
            }
            (Dir::EditorToProxy, body) => {
                let text = self.outgoing_text(body).map_err(fail)?;
                self.editor
                    .send(&text)
                    .await
                    .map_err(|e| fail(format!("cannot write to acp-lsp: {e}")))?;
            }
            (Dir::AgentToProxy, body) => {
                let text = self.outgoing_text(body).map_err(fail)?;
                let agent = self.agent().await.map_err(fail)?;
                agent
                    .send(&text)
                    .await
                    .map_err(|e| fail(format!("cannot write to acp-lsp as the agent: {e}")))?;
            }
            (Dir::ProxyToServer(id), Body::Spawn { name, root }) => {
                self.claim_server(id, name, root).await.map_err(fail)?;
            }
            (Dir::ServerToProxy(id), Body::Exit { status }) => {
                let Some(stand) = self.stands.get_mut(id) else {
                    return Err(fail(format!("exit of server {id}, which never started")));
                };
                let killed = if status.contains("signal") {
                    kill_bridge(stand).or(stand.killed.take())
                } else {
                    stand.killed.take()
                };
                if let Some(mut peer) = stand.peer.take() {
                    peer.close().await;
                    // The process is gone once its socket closes.
                    let deadline = Instant::now() + self.timeout;
                    while peer.inbox.more(deadline).await {}
                    if !peer.inbox.closed {
                        return Err(fail(format!("the stand-in for {id} did not end")));
                    }
                    self.retired.push((id.clone(), peer));
                }
                // Go on once acp-lsp has reaped it, as the recording did
                // (`drive.rs`): a request sent before acp-lsp knows the
                // server is gone would meet the dead process, not the
                // restarted one the recording shows answering.
                if let Some(pid) = killed {
                    let deadline = Instant::now() + self.timeout;
                    while crate::sys::process_exists(pid) {
                        if Instant::now() >= deadline {
                            return Err(fail(format!("acp-lsp never reaped the killed {id}")));
                        }
                        tokio::time::sleep(REAP_POLL).await;
                    }
                }
            }
            (Dir::ServerToProxy(id), Body::Message(raw)) => {
                let text = self.server_reply(id, raw).map_err(fail)?;
                let stand = self.stands.get(id).and_then(|s| s.peer.as_ref());
                let Some(peer) = stand else {
                    return Err(fail(format!("server {id} is not running")));
                };
                peer.send(&text)
                    .await
                    .map_err(|e| fail(format!("cannot write to acp-lsp as server {id}: {e}")))?;
            }
            (Dir::Workspace, Body::Step(step)) => self.workspace(step).map_err(fail)?,
            (dir, _) => {
                if let Some(channel) = expected_channel(dir) {
                    self.expect(index, line, &channel).await?;
                } else {
                    return Err(fail(format!("cannot replay a {} line here", dir.label())));
                }
            }
        }
        Ok(())
    }

    fn outgoing_text(&self, body: &Body) -> Result<String, String> {
        match body {
            Body::Message(raw) => Ok(self.bindings.to_live(raw.get())),
            Body::Text(text) => Ok(self.bindings.to_live(text)),
            Body::Fragment(_) => Err("fragments (lines over 8 MiB) are not replayed".into()),
            _ => Err("not a message".into()),
        }
    }

    async fn agent(&mut self) -> Result<&Peer, String> {
        if self.agent.is_none() {
            let (_, peer) =
                accept_bridge(&self.agent_listener, Framing::Lines, true, self.deadline())
                    .await
                    .map_err(|e| format!("acp-lsp did not start the agent: {e}"))?;
            self.agent = Some(peer);
        }
        self.agent
            .as_ref()
            .ok_or_else(|| "BUG: agent just set".to_string())
    }

    async fn claim_server(&mut self, id: &str, name: &str, root: &str) -> Result<(), String> {
        let cwd = self.bindings.to_live(root);
        let deadline = self.deadline();
        loop {
            let pool = self.pool.entry(name.to_string()).or_default();
            if let Some(at) = pool.iter().position(|(hello, _)| hello.cwd == cwd) {
                let (hello, peer) = pool.remove(at);
                let stand = self.stands.entry(id.to_string()).or_insert(Stand {
                    peer: None,
                    pid: None,
                    killed: None,
                    ids: Vec::new(),
                });
                if let Some(old) = stand.peer.take() {
                    self.retired.push((id.to_string(), old));
                }
                stand.peer = Some(peer);
                stand.pid = Some(hello.pid);
                stand.ids.clear();
                return Ok(());
            }
            let Some(listener) = self.listeners.get(name) else {
                return Err(format!("no stand-in socket for server {name}"));
            };
            let accepted = accept_bridge(listener, Framing::ContentLength, false, deadline)
                .await
                .map_err(|e| format!("acp-lsp did not start server {name} in {cwd}: {e}"))?;
            self.pool
                .entry(name.to_string())
                .or_default()
                .push(accepted);
        }
    }

    /// The recorded server message with acp-lsp's request id in place of the recorded one.
    fn server_reply(&self, id: &str, raw: &RawValue) -> Result<String, String> {
        let text = self.bindings.to_live(raw.get());
        let Ok(live) = serde_json::from_str::<&RawValue>(&text) else {
            return Ok(text);
        };
        let Ok(mut object) = RawObject::parse(live) else {
            return Ok(text);
        };
        if object.get_raw("method").is_some() {
            return Ok(text);
        }
        let Some(recorded_id) = object.get_raw("id").map(|r| r.get().to_string()) else {
            return Ok(text);
        };
        let ids = self.stands.get(id).map(|s| s.ids.as_slice()).unwrap_or(&[]);
        let Some((_, live_id)) = ids.iter().find(|(r, _)| *r == recorded_id) else {
            return Err(format!(
                "the recording answers request {recorded_id} of server {id}, which acp-lsp never sent"
            ));
        };
        object.set("id", live_id.clone());
        Ok(object.to_json())
    }

    fn workspace(&mut self, step: &WorkspaceStep) -> Result<(), String> {
        match step {
            WorkspaceStep::Write { path, text } => {
                let path = self.root.join(path);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
                }
                std::fs::write(&path, self.bindings.to_live(text)).map_err(|e| e.to_string())
            }
            WorkspaceStep::Remove(path) => {
                std::fs::remove_file(self.root.join(path)).map_err(|e| e.to_string())
            }
            WorkspaceStep::Kill(id) => {
                if let Some(stand) = self.stands.get_mut(id) {
                    stand.killed = kill_bridge(stand);
                }
                Ok(())
            }
            WorkspaceStep::Sleep(_) => Ok(()),
        }
    }

    fn inbox_of(&mut self, channel: &Channel) -> Option<&mut super::wire::Inbox> {
        match channel {
            Channel::Editor => Some(&mut self.editor.inbox),
            Channel::Agent => self.agent.as_mut().map(|p| &mut p.inbox),
            Channel::Server(id) => self
                .stands
                .get_mut(id)
                .and_then(|s| s.peer.as_mut())
                .map(|p| &mut p.inbox),
        }
    }

    /// The editor closes; acp-lsp must exit having sent nothing more, and the
    /// workspace (with the editor's buffers saved) must equal `expect/`.
    async fn finish(&mut self, child: &mut tokio::process::Child) -> Result<(), Failure> {
        if self.editor_open {
            self.editor.close().await;
            self.editor_open = false;
        }
        match tokio::time::timeout(PROXY_EXIT_TIMEOUT, child.wait()).await {
            Ok(_) => {}
            Err(_) => {
                return Err(Failure::new(
                    None,
                    format!(
                        "acp-lsp did not exit within {} s of the editor closing its input",
                        PROXY_EXIT_TIMEOUT.as_secs()
                    ),
                ))
            }
        }
        // Let the readers see the last bytes acp-lsp wrote before exiting.
        let settle = Instant::now() + Duration::from_millis(200);
        let mut leftovers = Vec::new();
        let mut inboxes: Vec<(String, &mut super::wire::Inbox)> = Vec::new();
        inboxes.push(("the editor".into(), &mut self.editor.inbox));
        if let Some(agent) = self.agent.as_mut() {
            inboxes.push(("the agent".into(), &mut agent.inbox));
        }
        for (id, stand) in self.stands.iter_mut() {
            if let Some(peer) = stand.peer.as_mut() {
                inboxes.push((format!("server {id}"), &mut peer.inbox));
            }
        }
        for (id, peer) in self.retired.iter_mut() {
            inboxes.push((format!("server {id}"), &mut peer.inbox));
        }
        for (who, inbox) in inboxes {
            while inbox.more(settle).await {}
            inbox.drain();
            if let Some((_, r)) = inbox.unconsumed().next() {
                leftovers.push((who, self.bindings.to_recorded(&r.text)));
            }
        }
        if let Some((who, text)) = leftovers.into_iter().next() {
            let live: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
            return Err(Failure::new(
                None,
                format!("acp-lsp sent {who} a message the recording does not have"),
            )
            .with_diff(&Value::Null, &live));
        }
        self.check_expect()
    }

    fn check_expect(&self) -> Result<(), Failure> {
        let expect = self.scenario.expect();
        if !expect.is_dir() {
            return Ok(());
        }
        for (path, text) in &self.buffers {
            if path.starts_with(&self.root) {
                std::fs::write(path, text)
                    .map_err(|e| Failure::new(None, format!("saving {}: {e}", path.display())))?;
            }
        }
        let root_text = self.root.to_string_lossy();
        let actual = read_tree(&self.root).map_err(|e| Failure::new(None, e.to_string()))?;
        let wanted = read_tree(&expect).map_err(|e| Failure::new(None, e.to_string()))?;
        let wanted: BTreeMap<String, Vec<u8>> = wanted
            .into_iter()
            .map(|(k, v)| match String::from_utf8(v) {
                Ok(text) => (k, text.replace(ROOT, &root_text).into_bytes()),
                Err(e) => (k, e.into_bytes()),
            })
            .collect();
        for (path, bytes) in &wanted {
            match actual.get(path) {
                None => {
                    return Err(Failure::new(
                        None,
                        format!("expect/{path} is missing from the workspace"),
                    ))
                }
                Some(have) if have != bytes => {
                    let a = Value::String(String::from_utf8_lossy(bytes).into_owned());
                    let b = Value::String(String::from_utf8_lossy(have).into_owned());
                    return Err(
                        Failure::new(None, format!("{path} differs from expect/{path}"))
                            .with_diff(&a, &b),
                    );
                }
                Some(_) => {}
            }
        }
        if let Some(extra) = actual.keys().find(|k| !wanted.contains_key(*k)) {
            return Err(Failure::new(
                None,
                format!("{extra} is in the workspace but not in expect/"),
            ));
        }
        Ok(())
    }
}

/// How often a killed stand-in is checked for having been reaped.
const REAP_POLL: Duration = Duration::from_millis(5);

/// SIGKILL, as the recording's editor did to the real server; the pid killed.
fn kill_bridge(stand: &mut Stand) -> Option<crate::sys::Pid> {
    let pid = crate::sys::pid(stand.pid.take()?)?;
    // The bridge process this replay accepted.
    let _ = crate::sys::kill(pid, crate::sys::Signal::Kill);
    Some(pid)
}

fn channel_label(channel: &Channel) -> String {
    match channel {
        Channel::Editor => "proxy→editor".into(),
        Channel::Agent => "proxy→agent".into(),
        Channel::Server(id) => format!("proxy→server:{id}"),
    }
}
