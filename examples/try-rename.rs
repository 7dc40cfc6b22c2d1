//! A tiny example ACP editor (official Rust SDK) that shows acp-lsp at work: one real rename.
//!
//! `cargo run --example try-rename` copies `examples/sample-project` to a
//! temporary directory, starts `acp-lsp proxy -- <rename-agent>` (building
//! both if needed), opens a session there and sends one prompt,
//! `rename src/greet.rs:4:8 welcome`. The agent (`examples/rename-agent.rs`)
//! asks the proxy's language server (rust-analyzer) for the rename and
//! writes the edit through this editor's `fs/write_text_file`, which writes
//! the real files. It prints the agent's messages, each file request it
//! served, and at the end a unified diff of the project before and after.
//!
//! Needs rust-analyzer on `PATH` (`rustup component add rust-analyzer`).

#[path = "support/cargo_build.rs"]
mod cargo_build;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ContentBlock, FileSystemCapabilities, Implementation, InitializeRequest,
    NewSessionRequest, PromptRequest, ReadTextFileRequest, ReadTextFileResponse,
    SessionNotification, SessionUpdate, TextContent, WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Agent, Client, ErrorCode, LineDirection};
use anyhow::{bail, Context as _};
use clap::Parser;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Upper bound for the whole session: building nothing, starting
/// rust-analyzer on a tiny crate and one rename take seconds; a first
/// rust-analyzer run on a slow machine can take much longer.
const SESSION_TIMEOUT: Duration = Duration::from_secs(180);

/// Directories left out of the copy and the diff: what cargo and
/// rust-analyzer generate inside the project.
const SKIPPED_DIRS: [&str; 2] = ["target", ".git"];

#[derive(Parser)]
#[command(about = "Rename a symbol in a sample project through acp-lsp and a real language server")]
struct Args {
    /// The acp-lsp binary (default: build it with cargo).
    #[arg(long)]
    acp_lsp: Option<PathBuf>,
    /// The example agent binary (default: build `--example rename-agent`).
    #[arg(long)]
    agent: Option<PathBuf>,
    /// The project to copy and rename in.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample-project"))]
    project: PathBuf,
    /// Where to put the copy (must not exist yet); kept afterwards. Default:
    /// a temporary directory, removed at the end.
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// The prompt: `rename <file>:<line>:<column> <new name>`, 1-based.
    #[arg(long, default_value = "rename src/greet.rs:4:8 welcome")]
    prompt: String,
    /// Passed to the proxy: record every message it relays (JSON lines).
    #[arg(long)]
    record: Option<PathBuf>,
    /// Write a JSON summary (stop reason, messages, files read and written).
    #[arg(long)]
    report: Option<PathBuf>,
    /// Run acp-lsp as one proxy of a chain under this conductor
    /// (`agent-client-protocol-conductor`): `acp-lsp proxy --chain`, then
    /// `--chain-proxy`, then the agent.
    #[arg(long, requires = "chain_proxy")]
    conductor: Option<PathBuf>,
    /// The second proxy of the chain (with `--conductor`).
    #[arg(long)]
    chain_proxy: Option<PathBuf>,
}

/// What the editor saw, for the printout and `--report`.
#[derive(Default)]
struct Seen {
    messages: Vec<String>,
    reads: Vec<String>,
    writes: Vec<(String, usize)>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (acp_lsp, agent) = binaries(&args)?;

    let mut temp = None;
    let workdir = match &args.workdir {
        Some(dir) => {
            if dir.exists() {
                bail!("{} exists already", dir.display());
            }
            dir.clone()
        }
        None => {
            let dir = tempfile::Builder::new().prefix("try-rename-").tempdir()?;
            let project = dir.path().join("project");
            temp = Some(dir);
            project
        }
    };
    copy_tree(&args.project, &workdir)
        .with_context(|| format!("copying {}", args.project.display()))?;
    // The proxy reports session roots as given; a canonical path keeps the
    // agent's prefix checks and the diff's relative names simple.
    let workdir = workdir.canonicalize()?;
    println!("acp-lsp:  {}", acp_lsp.display());
    println!("agent:    {}", agent.display());
    // A temporary copy is gone when this exits: say so, and how to keep one.
    let lifetime = if temp.is_some() {
        ", removed at exit; pass --workdir DIR to keep it"
    } else {
        ""
    };
    println!(
        "project:  {} (a copy of {}{lifetime})",
        workdir.display(),
        args.project.display()
    );

    let mut proxy_args = vec!["proxy".to_string()];
    if let Some(record) = &args.record {
        proxy_args.extend(["--record".to_string(), record.display().to_string()]);
    }
    let config = match (&args.conductor, &args.chain_proxy) {
        (Some(conductor), Some(chain_proxy)) => {
            // The conductor splits each component like a POSIX shell.
            let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
            let mut acp_lsp_command = vec![quote(&acp_lsp.display().to_string())];
            acp_lsp_command.extend(proxy_args.iter().map(|a| quote(a)));
            acp_lsp_command.push("--chain".into());
            println!("chain:    {} agent", conductor.display());
            AcpAgentConfig::new(conductor).args([
                "agent".to_string(),
                acp_lsp_command.join(" "),
                quote(&chain_proxy.display().to_string()),
                quote(&agent.display().to_string()),
            ])
        }
        _ => {
            proxy_args.extend(["--".to_string(), agent.display().to_string()]);
            AcpAgentConfig::new(&acp_lsp).args(proxy_args)
        }
    };
    let proxy = AcpAgent::new(config).with_debug(|line, direction| {
        if direction == LineDirection::Stderr {
            eprintln!("proxy stderr │ {line}");
        }
    });

    let seen = Arc::new(Mutex::new(Seen::default()));
    let session = session(proxy, &workdir, &args.prompt, seen.clone());
    let outcome = match tokio::time::timeout(SESSION_TIMEOUT, session).await {
        Ok(outcome) => outcome,
        Err(_) => Err(anyhow::anyhow!(
            "no answer within {} s",
            SESSION_TIMEOUT.as_secs()
        )),
    };

    println!();
    let diff = diff_trees(&args.project, &workdir)?;
    if diff.is_empty() {
        println!("(no changes on disk)");
    } else {
        print!("{diff}");
    }

    let seen = lock(&seen);
    if let Some(path) = &args.report {
        let report = json!({
            "stopReason": outcome.as_ref().ok(),
            "error": outcome.as_ref().err().map(|e| format!("{e:#}")),
            "messages": seen.messages,
            "reads": seen.reads,
            "writes": seen.writes.iter().map(|(p, n)| json!({"path": p, "bytes": n})).collect::<Vec<_>>(),
            "workdir": workdir,
        });
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    if let Some(temp) = temp {
        let path = temp.path().display().to_string();
        match temp.close() {
            Ok(()) => println!("removed {path}"),
            Err(e) => eprintln!("could not remove {path}: {e}"),
        }
    }
    let stop_reason = outcome?;
    if seen.writes.is_empty() {
        bail!("the turn ended ({stop_reason}) without writing any file");
    }
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The two executables: given, or built with cargo.
fn binaries(args: &Args) -> anyhow::Result<(PathBuf, PathBuf)> {
    if let (Some(acp_lsp), Some(agent)) = (&args.acp_lsp, &args.agent) {
        return Ok((acp_lsp.clone(), agent.clone()));
    }
    eprintln!("Building acp-lsp and the example agent…");
    let built = cargo_build::build(&["acp-lsp"], &["rename-agent"], true)?;
    let pick = |given: &Option<PathBuf>, name: &str| {
        given
            .clone()
            .or_else(|| built.get(name).cloned())
            .with_context(|| format!("no {name} executable"))
    };
    Ok((
        pick(&args.acp_lsp, "acp-lsp")?,
        pick(&args.agent, "rename-agent")?,
    ))
}

/// One ACP session through the proxy: initialize, session/new on
/// `workdir`, one prompt. Serves fs/* from the disk, confined to `workdir`.
/// Returns the prompt's stop reason.
async fn session(
    proxy: AcpAgent,
    workdir: &Path,
    prompt: &str,
    seen: Arc<Mutex<Seen>>,
) -> anyhow::Result<String> {
    let root = workdir.to_path_buf();
    let result = Client
        .v1()
        .name("try-rename")
        .on_receive_notification(
            {
                let seen = seen.clone();
                async move |notification: SessionNotification, _cx| {
                    if let SessionUpdate::AgentMessageChunk(chunk) = notification.update {
                        if let ContentBlock::Text(text) = chunk.content {
                            for line in text.text.lines() {
                                println!("agent │ {line}");
                            }
                            lock(&seen).messages.push(text.text);
                        }
                    }
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            {
                let (seen, root) = (seen.clone(), root.clone());
                async move |request: ReadTextFileRequest, responder, _cx| {
                    let shown = match relative(&root, &request.path) {
                        Ok(shown) => shown,
                        Err(e) => return responder.respond_with_error(e),
                    };
                    let text = match std::fs::read_to_string(&request.path) {
                        Ok(text) => text,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                            return responder.respond_with_error(
                                agent_client_protocol::Error::new(
                                    ErrorCode::RESOURCE_NOT_FOUND,
                                    format!("{shown} does not exist"),
                                ),
                            );
                        }
                        Err(e) => {
                            return responder.respond_with_error(
                                agent_client_protocol::Error::into_internal_error(e),
                            )
                        }
                    };
                    println!("editor │ served fs/read_text_file {shown}");
                    lock(&seen).reads.push(shown);
                    responder.respond(ReadTextFileResponse::new(select_lines(
                        &text,
                        request.line,
                        request.limit,
                    )))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let (seen, root) = (seen.clone(), root.clone());
                async move |request: WriteTextFileRequest, responder, _cx| {
                    let shown = match relative(&root, &request.path) {
                        Ok(shown) => shown,
                        Err(e) => return responder.respond_with_error(e),
                    };
                    if let Err(e) = std::fs::write(&request.path, &request.content) {
                        return responder.respond_with_error(
                            agent_client_protocol::Error::into_internal_error(e),
                        );
                    }
                    println!(
                        "editor │ served fs/write_text_file {shown} ({} bytes)",
                        request.content.len()
                    );
                    lock(&seen).writes.push((shown, request.content.len()));
                    responder.respond(WriteTextFileResponse::new())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(proxy, async |cx: ConnectionTo<Agent>| {
            let initialized = cx
                .send_request(
                    InitializeRequest::new(ProtocolVersion::V1)
                        .client_capabilities(
                            ClientCapabilities::new().fs(FileSystemCapabilities::new()
                                .read_text_file(true)
                                .write_text_file(true)),
                        )
                        .client_info(Implementation::new("try-rename", env!("CARGO_PKG_VERSION"))),
                )
                .block_task()
                .await?;
            if let Some(info) = &initialized.agent_info {
                println!("agent:    {} {}", info.name, info.version);
            }
            let session = cx
                .send_request(NewSessionRequest::new(root.clone()))
                .block_task()
                .await?;
            println!();
            println!("> {prompt}");
            let response = cx
                .send_request(PromptRequest::new(
                    session.session_id,
                    vec![ContentBlock::Text(TextContent::new(prompt))],
                ))
                .block_task()
                .await?;
            let stop_reason = serde_json::to_value(response.stop_reason)?;
            println!("stop reason: {}", stop_reason.as_str().unwrap_or("?"));
            Ok(stop_reason.as_str().unwrap_or("?").to_string())
        })
        .await;
    result.map_err(|e| anyhow::anyhow!("{e}"))
}

/// `path` relative to the project, refusing paths outside it as an editor
/// confines an agent to the session's folders.
fn relative(root: &Path, path: &Path) -> Result<String, agent_client_protocol::Error> {
    match path.strip_prefix(root) {
        Ok(rel) => Ok(rel.display().to_string()),
        Err(_) => Err(agent_client_protocol::Error::invalid_params()
            .data(format!("{} is outside the project", path.display()))),
    }
}

/// ACP's optional `line` (1-based) and `limit` of `fs/read_text_file`.
fn select_lines(text: &str, line: Option<u32>, limit: Option<u32>) -> String {
    if line.is_none() && limit.is_none() {
        return text.to_string();
    }
    let skip = line.map_or(0, |l| l.saturating_sub(1) as usize);
    let take = limit.map_or(usize::MAX, |l| l as usize);
    text.split_inclusive('\n').skip(skip).take(take).collect()
}

fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type()?.is_dir() {
            if !SKIPPED_DIRS.iter().any(|d| name == *d) {
                copy_tree(&src, &dst)?;
            }
        } else {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// Relative paths of the files under `root`, outside `SKIPPED_DIRS`.
fn files(root: &Path, dir: &Path, out: &mut BTreeSet<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            if !SKIPPED_DIRS.iter().any(|d| entry.file_name() == *d) {
                files(root, &path, out)?;
            }
        } else if let Ok(rel) = path.strip_prefix(root) {
            out.insert(rel.to_path_buf());
        }
    }
    Ok(())
}

/// A unified diff of every file that differs between the two trees.
fn diff_trees(before: &Path, after: &Path) -> anyhow::Result<String> {
    let mut names = BTreeSet::new();
    files(before, before, &mut names)?;
    files(after, after, &mut names)?;
    let mut out = String::new();
    for name in names {
        let old = std::fs::read_to_string(before.join(&name)).ok();
        let new = std::fs::read_to_string(after.join(&name)).ok();
        if old == new {
            continue;
        }
        let shown = name.display();
        let (old_header, new_header) = (
            old.as_ref()
                .map_or("/dev/null".to_string(), |_| format!("a/{shown}")),
            new.as_ref()
                .map_or("/dev/null".to_string(), |_| format!("b/{shown}")),
        );
        let (old, new) = (old.unwrap_or_default(), new.unwrap_or_default());
        let diff = similar::TextDiff::from_lines(&old, &new);
        out.push_str(
            &diff
                .unified_diff()
                .context_radius(2)
                .header(&old_header, &new_header)
                .to_string(),
        );
    }
    Ok(out)
}
