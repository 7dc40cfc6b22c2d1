//! Figure 5: a real server. `textDocument/references` and
//! `textDocument/rename` (not applied) on this repository's `LspHost` trait,
//! with rust-analyzer: directly (a `Connection`, acp-lsp's own handshake
//! params, `didOpen`, waiting for `quiescent`) and through the gate with the
//! registry. Both servers run at once with the same settings (their own
//! target dir, `target/rust-analyzer`, so they never wait on the build lock of
//! `cargo bench`); requests alternate between them.

use super::{
    file_uri, is_success, median, micros, raw, Direct, GateStack, Table, Verdict, CALL_TIMEOUT,
};
use acp_lsp::lsp::config::{Config, ServerConfig};
use acp_lsp::lsp::connection::ServerMessages;
use acp_lsp::lsp::detect::find_on_path;
use acp_lsp::lsp::registry::RegistryOptions;
use acp_lsp_core::gate::GateMethod;
use acp_lsp_core::jsonrpc::ErrorObject;
use anyhow::{ensure, Context, Result};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Longest wait for rust-analyzer to finish loading this repository.
pub const READY_TIMEOUT: Duration = Duration::from_secs(240);
const WARMUP: usize = 2;
const ROUNDS: usize = 100;
const TARGET_RATIO: f64 = 1.05;

/// Answers rust-analyzer's requests as acp-lsp does (settings by section,
/// `null` otherwise) and watches for `quiescent`.
struct Handler {
    config: ServerConfig,
    quiescent: watch::Sender<bool>,
}

impl ServerMessages for Handler {
    fn on_request(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Box<RawValue>, ErrorObject> {
        if method == "workspace/configuration" {
            let params: Value = params
                .and_then(|p| serde_json::from_str(p.get()).ok())
                .unwrap_or_default();
            let answers: Vec<Value> = params["items"]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .map(|i| self.config.settings_section(i["section"].as_str()))
                        .collect()
                })
                .unwrap_or_default();
            return Ok(raw(&json!(answers)));
        }
        Ok(raw(&Value::Null))
    }

    fn on_notification(&self, method: &str, params: Option<&RawValue>) {
        if method == "experimental/serverStatus" {
            let quiescent = params
                .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                .is_some_and(|p| p["quiescent"] == true);
            if quiescent {
                self.quiescent.send_replace(true);
            }
        }
    }
}

/// Where `needle` starts in `path`: (line, character), 0-based, ASCII.
fn position_of(path: &Path, needle: &str, within: &str) -> Result<(usize, usize)> {
    let text = std::fs::read_to_string(path)?;
    for (n, line) in text.lines().enumerate() {
        if let Some(at) = line.find(needle) {
            let column = at + needle.find(within).context("within is in needle")?;
            return Ok((n, column));
        }
    }
    anyhow::bail!("{needle:?} not in {}", path.display())
}

pub async fn run(table: &Table) -> Result<()> {
    if find_on_path("rust-analyzer").is_none() {
        table.skipped(
            "5 rust-analyzer",
            "rust-analyzer not on PATH (rustup component add rust-analyzer)",
        );
        return Ok(());
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).canonicalize()?;
    let mut config = Config::builtin()
        .server("rust-analyzer")
        .cloned()
        .context("built-in rust-analyzer")?;
    config.settings =
        json!({"rust-analyzer": {"checkOnSave": false, "cargo": {"targetDir": true}}});
    config.request_timeout_ms = CALL_TIMEOUT.as_millis() as u64;
    let file = root.join("crates/acp-lsp-core/src/gate/host.rs");
    let (line, character) = position_of(&file, "pub trait LspHost", "LspHost")?;
    let uri = file_uri(&file);
    let references = json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character},
                            "context": {"includeDeclaration": true}});
    let rename = json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character},
                        "newName": "LspHostRenamed"});

    let started = Instant::now();
    let (quiescent, mut ready) = watch::channel(false);
    let handler = Arc::new(Handler {
        config: config.clone(),
        quiescent,
    });
    // Lazy: nested fixture projects (tests/projects/) get servers of their
    // own, which are never started unless asked.
    let (direct, stack) = tokio::join!(
        async {
            let direct = Direct::start(&config, &root, handler).await?;
            tokio::time::timeout(READY_TIMEOUT, ready.wait_for(|q| *q))
                .await
                .context("direct rust-analyzer never quiescent")??;
            direct.did_open(&file, "rust")?;
            Ok::<_, anyhow::Error>(direct)
        },
        async {
            let stack = GateStack::start(
                vec![config.clone()],
                &root,
                RegistryOptions {
                    lazy: true,
                    ..RegistryOptions::default()
                },
            )
            .await?;
            let id = stack.server_id("rust-analyzer", &root)?;
            let first = stack.request_params(
                &id,
                "textDocument/references",
                &references,
                Some(READY_TIMEOUT.as_millis() as u64),
            );
            stack.request_ok(first).await?;
            Ok::<_, anyhow::Error>((stack, id))
        }
    );
    let (direct, (stack, id)) = match (direct, stack) {
        (Ok(d), Ok(s)) => (d, s),
        (d, s) => {
            let mut errors = Vec::new();
            match d {
                Ok(d) => d.shutdown().await,
                Err(e) => errors.push(e.context("direct rust-analyzer")),
            }
            match s {
                Ok((s, _)) => s.shutdown().await,
                Err(e) => errors.push(e.context("rust-analyzer through the gate")),
            }
            return Err(errors.remove(0));
        }
    };
    eprintln!(
        "  (both rust-analyzers ready after {:.0} s)",
        started.elapsed().as_secs_f64()
    );
    let outcome = async {
        for (method, params) in [
            ("textDocument/references", &references),
            ("textDocument/rename", &rename),
        ] {
            let gate_params = stack.request_params(&id, method, params, None);
            let lsp_params = raw(params);
            let (mut ours, mut base) = (Vec::new(), Vec::new());
            let mut sizes = (0, 0);
            for round in 0..WARMUP + ROUNDS {
                // ABBA order: neither path always goes first.
                let (mut took_ours, mut took_base) = (0.0, 0.0);
                for gate_turn in [round % 2 == 0, round % 2 != 0] {
                    let t = Instant::now();
                    if gate_turn {
                        let response = stack
                            .call_raw(GateMethod::Request, gate_params.clone())
                            .await?;
                        took_ours = micros(t.elapsed()) / 1e3;
                        ensure!(is_success(&response), "{method} through the gate failed");
                        sizes.0 = response.len();
                    } else {
                        let result = direct.request_ok(method, &lsp_params).await?;
                        took_base = micros(t.elapsed()) / 1e3;
                        sizes.1 = result.get().len();
                    }
                }
                if round >= WARMUP {
                    ours.push(took_ours);
                    base.push(took_base);
                }
            }
            ensure!(
                sizes.1 > 100,
                "{method}: a near-empty result ({} bytes)",
                sizes.1
            );
            let (m_ours, m_base) = (median(&ours), median(&base));
            let ratio = m_ours / m_base;
            let short = method.trim_start_matches("textDocument/");
            table.row(
                format!("5 rust-analyzer {short} on this repo, median"),
                format!("{m_ours:.2} ms ({} B response)", sizes.0),
                format!("{m_base:.2} ms ({} B result)", sizes.1),
                Some(ratio),
                format!("≤ {TARGET_RATIO}×"),
                Verdict::of(ratio <= TARGET_RATIO),
            );
        }
        Ok(())
    }
    .await;
    stack.shutdown().await;
    direct.shutdown().await;
    outcome
}
