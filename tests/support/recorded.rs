//! A registry and gate over a fresh copy of a fixture, with every message
//! recorded: the harness the real-server tests build theirs on.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use acp_lsp::lsp::config::Config;
use acp_lsp::lsp::registry::{Registry, RegistryOptions};
use acp_lsp::record::Recorder;
use acp_lsp_core::gate::{Gate, GateConfig, GateMethod};
use serde_json::{json, Value};

use super::copy_tree;

/// The one session of a [`Recorded`] harness.
pub const SESSION_ID: &str = "s1";
/// Upper bound on one gate call (above the gate's own deadline).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(150);

/// A fresh copy of `tests/projects/<fixture>` in a temporary directory named
/// `<prefix><fixture>-…`, and its canonical path (the registry canonicalizes
/// session roots); `prepare` runs on that path.
pub fn fixture_copy(
    fixture: &str,
    prefix: &str,
    prepare: impl FnOnce(&Path),
) -> (tempfile::TempDir, PathBuf) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/projects")
        .join(fixture);
    let project = tempfile::Builder::new()
        .prefix(&format!("{prefix}{fixture}-"))
        .tempdir()
        .expect("create a temporary directory");
    copy_tree(&source, project.path());
    let root = project
        .path()
        .canonicalize()
        .expect("canonicalize the temporary project");
    prepare(&root);
    (project, root)
}

/// A recorder writing `record.jsonl` in a temporary directory of its own,
/// outside any project, where no server looks.
pub fn recorder() -> (tempfile::TempDir, PathBuf, Recorder) {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let path = dir.path().join("record.jsonl");
    let recorder = Recorder::create(&path).expect("create the recording");
    (dir, path, recorder)
}

/// A registry of the built-in servers, started eagerly, recorded by `recorder`.
pub fn recorded_registry(recorder: &Recorder) -> Arc<Registry> {
    Registry::new(
        Config::builtin(),
        RegistryOptions {
            recorder: Some(recorder.clone()),
            ..RegistryOptions::default()
        },
    )
}

pub fn file_uri(path: &Path) -> String {
    url::Url::from_file_path(path)
        .expect("an absolute path")
        .to_string()
}

/// The path of a `file:` URI.
pub fn uri_path(uri: &str) -> PathBuf {
    url::Url::parse(uri)
        .ok()
        .and_then(|u| u.to_file_path().ok())
        .unwrap_or_else(|| panic!("not a file URI: {uri}"))
}

/// The params of an `lsp/request` of `method` with `params` to `server_id`.
pub fn request_params(
    server_id: &str,
    method: &str,
    params: Value,
    wait_until_ready_ms: Option<u64>,
) -> Value {
    let mut outer = json!({
        "sessionId": SESSION_ID,
        "serverId": server_id,
        "method": method,
        "params": params,
    });
    if let Some(ms) = wait_until_ready_ms {
        outer["waitUntilReady"] = json!(ms);
    }
    outer
}

/// One registry and gate over a fresh copy of a fixture, session
/// [`SESSION_ID`] open on it, recorded.
pub struct Recorded {
    _project: tempfile::TempDir,
    _recording_dir: tempfile::TempDir,
    /// The copy's canonical path (the registry canonicalizes session roots).
    pub root: PathBuf,
    pub recording: PathBuf,
    pub recorder: Recorder,
    pub registry: Arc<Registry>,
    pub gate: Arc<Gate<Registry>>,
    /// When the session was opened.
    pub opened: Instant,
    next_id: AtomicU64,
}

impl Recorded {
    /// Copies `fixture` (see [`fixture_copy`]) and opens the session on it.
    pub fn start(fixture: &str, prefix: &str, prepare: impl FnOnce(&Path)) -> Recorded {
        let (project, root) = fixture_copy(fixture, prefix, prepare);
        let (recording_dir, recording, recorder) = recorder();
        let registry = recorded_registry(&recorder);
        let gate = Gate::new(Arc::clone(&registry), GateConfig::default());
        let opened = Instant::now();
        gate.open_session(SESSION_ID, vec![root.clone()]);
        Recorded {
            _project: project,
            _recording_dir: recording_dir,
            root,
            recording,
            recorder,
            registry,
            gate,
            opened,
            next_id: AtomicU64::new(1),
        }
    }

    /// One gate call; the whole response, checked to answer the call's id.
    pub async fn response(&self, method: GateMethod, params: Value) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        super::gate::call(&self.gate, id, method, &params, CALL_TIMEOUT).await
    }

    /// The `lsp/servers` entry of the session's server called `name`.
    pub async fn entry(&self, name: &str) -> Value {
        let response = self
            .response(GateMethod::Servers, json!({ "sessionId": SESSION_ID }))
            .await;
        super::gate::named(&super::gate::servers_of(&response), name).clone()
    }

    pub fn uri(&self, file: &str) -> String {
        file_uri(&self.root.join(file))
    }

    /// `path` (of `uri`) relative to the project root.
    pub fn relative_path(&self, path: &Path, uri: &str) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or_else(|_| panic!("{uri} is outside the project {}", self.root.display()))
            .to_string_lossy()
            .into_owned()
    }
}
