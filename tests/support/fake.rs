//! A workspace with one scriptable `acp-lsp-fake-server` behind a registry and
//! a gate: the harness the fault and sync tests build theirs on.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use acp_lsp::lsp::config::{Config, ServerConfig};
use acp_lsp::lsp::registry::{Registry, RegistryOptions};
use acp_lsp::lsp::server::Server;
use acp_lsp_core::gate::{Gate, GateConfig, GateMethod, ServerState};
use acp_lsp_core::jsonrpc::RequestId;
use serde_json::{json, Value};

/// The one session of a fake workspace.
pub const SESSION: &str = "s";
/// The method [`FakeServer::hover`] asks; the fake echoes it back.
pub const HOVER: &str = "textDocument/hover";
/// Longest wait for one gate call; every call is bounded by the gate itself,
/// this only keeps a broken build from hanging the suite.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest `Registry::shutdown` (shutdown, exit, 2 s grace, SIGTERM, 2 s, SIGKILL).
pub const SHUTDOWN_LIMIT: Duration = Duration::from_secs(15);
/// A request deadline long enough never to fire in a test that expects an answer.
pub const LONG_REQUEST_TIMEOUT_MS: u64 = 25_000;
/// Longest wait for something to show up in the fake's log (a watch batch
/// takes the 20 ms coalescing window plus the OS's latency).
pub const LOG_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between two looks at the fake's log.
pub const LOG_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// The scriptable fake language server binary (the workspace's
/// `acp-lsp-fake-server` package), built once per test binary: cargo gives a
/// package's tests only that package's own executables. `ACP_LSP_FAKE_SERVER`
/// names one built already: the Windows tests under wine, which cannot run
/// the host's cargo (.ci/run builds it for the target first).
pub fn fake_server() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        if let Ok(built) = std::env::var("ACP_LSP_FAKE_SERVER") {
            return built;
        }
        let built = super::cargo_build::build_in_workspace(&["acp-lsp-fake-server"], &[], false)
            .expect("building acp-lsp-fake-server");
        built["acp-lsp-fake-server"].display().to_string()
    })
}

/// The stand-in proxy of the parent-death tests (`tests/peers/stand-in-proxy.rs`,
/// an example of the `acp-lsp` package), built once per test binary; like
/// [`fake_server`], `ACP_LSP_STAND_IN_PROXY` names one built already (wine).
#[allow(dead_code)]
pub fn stand_in_proxy() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        if let Ok(built) = std::env::var("ACP_LSP_STAND_IN_PROXY") {
            return built;
        }
        let built = super::cargo_build::build(&[], &["stand-in-proxy"], false)
            .expect("building the stand-in proxy");
        built["stand-in-proxy"].display().to_string()
    })
}

pub fn uri_of(path: &Path) -> String {
    url::Url::from_file_path(path)
        .expect("absolute path")
        .to_string()
}

/// The messages the fake server logged (one JSON value a line), in the order
/// it received them.
pub fn read_log(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// Checks a successful hover answer of the fake (it echoes method and params).
pub fn assert_echo(response: &Value, uri: &str) {
    let result = &response["result"]["lspResult"];
    assert_eq!(result["echo"]["method"], HOVER, "{response}");
    assert_eq!(
        result["echo"]["params"]["textDocument"]["uri"], uri,
        "{response}"
    );
}

/// A workspace (`root`, with `fake.toml` and `a.fake`) with one fake server
/// behind a registry and a gate, in session [`SESSION`].
pub struct FakeServer {
    pub dir: tempfile::TempDir,
    /// The temporary directory, canonical: outside the workspace, for the
    /// fake's log and for things built elsewhere and moved in.
    pub outside: PathBuf,
    pub root: PathBuf,
    /// The fake's log of every message it receives.
    pub log: PathBuf,
    pub registry: Arc<Registry>,
    pub gate: Arc<Gate<Registry>>,
    pub server_id: String,
    next_id: AtomicU64,
}

impl FakeServer {
    /// Opens a session over a fresh workspace whose one server is the fake in
    /// `mode`. `prepare` runs on the workspace root before the session opens;
    /// `tweak` adjusts the server's configuration (with the temporary
    /// directory). Returns the fake and its `lsp/servers` entry.
    pub async fn start(
        mode: &str,
        options: RegistryOptions,
        prepare: impl FnOnce(&Path),
        tweak: impl FnOnce(&mut ServerConfig, &Path),
    ) -> (FakeServer, Value) {
        let dir = tempfile::tempdir().expect("temp dir");
        let outside = dir.path().canonicalize().expect("canonical temp dir");
        let root = outside.join("ws");
        std::fs::create_dir(&root).expect("create workspace");
        std::fs::write(root.join("fake.toml"), "").expect("write marker");
        std::fs::write(root.join("a.fake"), "hello fake\n").expect("write document");
        prepare(&root);
        let log = outside.join("fake.log");

        let mut server = ServerConfig::new(
            "fake",
            fake_server(),
            &[],
            &["fake"],
            &["fake"],
            &["fake.toml"],
        );
        server.env.insert("FAKE_LSP_MODE".into(), mode.into());
        server
            .env
            .insert("FAKE_LSP_LOG".into(), log.display().to_string());
        server.request_timeout_ms = LONG_REQUEST_TIMEOUT_MS;
        tweak(&mut server, &outside);
        // No built-in server: only the fake may start.
        let config = Config {
            servers: vec![server],
            ..Config::builtin()
        };
        let registry = Registry::new(config, options);
        let gate = Gate::new(Arc::clone(&registry), GateConfig::default());
        gate.open_session(SESSION, vec![root.clone()]);
        let mut fake = FakeServer {
            dir,
            outside,
            root,
            log,
            registry,
            gate,
            server_id: String::new(),
            next_id: AtomicU64::new(1),
        };
        // Listing waits for detection, which starts the root's watch first.
        let mut servers = fake.servers().await;
        assert_eq!(servers.len(), 1, "exactly the fake server: {servers:?}");
        let entry = servers.remove(0);
        fake.server_id = entry["serverId"]
            .as_str()
            .expect("serverId is a string")
            .to_string();
        (fake, entry)
    }

    pub fn server(&self) -> Arc<Server> {
        self.registry
            .server(&self.server_id)
            .expect("the registry knows the server")
    }

    /// The URI of `relative` in the workspace.
    pub fn uri(&self, relative: &str) -> String {
        uri_of(&self.root.join(relative))
    }

    /// What the fake has received so far.
    pub fn log(&self) -> Vec<Value> {
        read_log(&self.log)
    }

    /// Polls the log until `find` yields something; panics after [`LOG_TIMEOUT`].
    pub async fn wait_log<T>(&self, what: &str, find: impl Fn(&[Value]) -> Option<T>) -> T {
        let deadline = Instant::now() + LOG_TIMEOUT;
        loop {
            let log = self.log();
            if let Some(found) = find(&log) {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the fake received:\n{}",
                log.iter()
                    .map(Value::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            tokio::time::sleep(LOG_POLL_INTERVAL).await;
        }
    }

    pub fn next_request_id(&self) -> RequestId {
        RequestId::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// One gate call, decoded, as a future that owns what it needs.
    pub fn call(
        &self,
        method: GateMethod,
        params: Value,
    ) -> impl std::future::Future<Output = Value> {
        let gate = Arc::clone(&self.gate);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        async move { super::gate::call(&gate, id, method, &params, CALL_TIMEOUT).await }
    }

    /// `lsp/servers` → the `servers` array.
    pub async fn servers(&self) -> Vec<Value> {
        let response = self
            .call(GateMethod::Servers, json!({"sessionId": SESSION}))
            .await;
        super::gate::servers_of(&response)
    }

    /// The `lsp/request` params of a hover on `uri`.
    pub fn hover_params(&self, uri: &str) -> Value {
        json!({
            "sessionId": SESSION,
            "serverId": self.server_id,
            "method": HOVER,
            "params": {
                "textDocument": {"uri": uri},
                "position": {"line": 0, "character": 1}
            }
        })
    }

    /// A hover on `uri`, as a future that owns what it needs (to spawn it).
    pub fn hover(&self, uri: &str) -> impl std::future::Future<Output = Value> {
        self.call(GateMethod::Request, self.hover_params(uri))
    }

    /// Shuts the registry down within [`SHUTDOWN_LIMIT`]; the server is stopped.
    pub async fn shut_down(&self) {
        tokio::time::timeout(SHUTDOWN_LIMIT, self.registry.shutdown())
            .await
            .expect("registry shutdown finishes in time");
        assert_eq!(self.server().status().state, ServerState::Stopped);
    }
}

/// A TOML basic string.
pub fn toml_string(text: &str) -> String {
    // JSON string escapes are valid TOML basic-string escapes.
    serde_json::to_string(text).expect("a string serializes")
}

/// A workspace on disk for the `acp-lsp` binary: `root` with `fake.toml`
/// and `a.fake`, and a config file whose one server is the fake in a mode,
/// logging what it receives to `log`.
pub struct FakeProject {
    pub dir: tempfile::TempDir,
    /// The workspace, canonical.
    pub root: PathBuf,
    /// The config file (`--config`).
    pub config: PathBuf,
    /// The fake's log of every message it receives.
    pub log: PathBuf,
}

impl FakeProject {
    /// The fake in `mode`, with `env` added to its environment.
    pub fn new(mode: &str, env: &[(&str, &str)]) -> FakeProject {
        let dir = tempfile::tempdir().expect("temp dir");
        let outside = dir.path().canonicalize().expect("canonical temp dir");
        let root = outside.join("ws");
        std::fs::create_dir(&root).expect("create workspace");
        std::fs::write(root.join("fake.toml"), "").expect("write marker");
        std::fs::write(root.join("a.fake"), "hello fake\n").expect("write document");
        let log = outside.join("fake.log");
        let config = outside.join("config.toml");
        let mut table = format!(
            "FAKE_LSP_MODE = {}, FAKE_LSP_LOG = {}",
            toml_string(mode),
            toml_string(&log.display().to_string())
        );
        for (name, value) in env {
            table.push_str(&format!(", {name} = {}", toml_string(value)));
        }
        let text = format!(
            "[servers.fake]\ncommand = {}\nlanguage_ids = [\"fake\"]\n\
             file_extensions = [\"fake\"]\nroot_markers = [\"fake.toml\"]\nenv = {{ {table} }}\n",
            toml_string(fake_server()),
        );
        // The file must parse as a config.
        Config::from_toml_str(&text, &config, Config::builtin()).expect("a valid config");
        std::fs::write(&config, text).expect("write the config");
        FakeProject {
            dir,
            root,
            config,
            log,
        }
    }

    /// What the fake has received so far.
    pub fn received(&self) -> Vec<Value> {
        read_log(&self.log)
    }

    /// Polls the fake's log until `find` yields something; panics after
    /// [`LOG_TIMEOUT`].
    pub async fn wait_log<T>(&self, what: &str, find: impl Fn(&[Value]) -> Option<T>) -> T {
        let deadline = Instant::now() + LOG_TIMEOUT;
        loop {
            let log = self.received();
            if let Some(found) = find(&log) {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the fake received:\n{}",
                log.iter()
                    .map(Value::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            tokio::time::sleep(LOG_POLL_INTERVAL).await;
        }
    }
}
