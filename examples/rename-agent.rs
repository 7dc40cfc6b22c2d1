//! An example ACP agent (official Rust SDK) written to the ACP RFD text
//! alone (`docs/rfds/lsp-proxy.mdx`): definition, references and rename
//! with a real language server.
//!
//! The server is reached through the RFD's `lsp/*` methods and an edit is
//! written through the editor's `fs/*` methods. It reads only the RFD's
//! fields, never acp-lsp's extensions.
//!
//! A prompt holds commands separated by `;`:
//! `definition <file>:<line>:<column>`, `references <file>:<line>:<column>`,
//! `rename <file>:<line>:<column> <new name>` (file relative to the
//! session's cwd, line and column 1-based, the column counted in characters
//! as editors show it). For each, inside the prompt turn, it:
//!
//! 1. checks the `lsp` client capability of `initialize` (the RFD: no `lsp/*`
//!    call without it);
//! 2. asks `lsp/servers` until the server whose `workspacePath` holds the
//!    file and whose `fileExtensions` name it is `running`, and checks that
//!    the method is in `availableMethods` and the server's `capabilities`
//!    offer it;
//! 3. reads the file with `fs/read_text_file` to turn the column into an LSP
//!    position in `capabilities.positionEncoding` (utf-16 by default);
//! 4. sends the request through `lsp/request` and takes `lspResult`;
//! 5. reports locations (`definition: src/a.rs:3:8`), or applies a rename's
//!    `WorkspaceEdit` with `acp_lsp::edit::apply_with_agent_fs` over the SDK
//!    connection (every file read with `fs/read_text_file`, each changed file
//!    written once with `fs/write_text_file`);
//! 6. reports each step as a `session/update` agent message and ends the turn.
//!
//! It speaks ACP on stdio and is meant to run behind `acp-lsp proxy`; see
//! `examples/try-rename.rs`, which drives it, and `tests/rfd_agent.rs`.

use acp_lsp::edit::{
    apply_with_agent_fs, AgentFs, AgentFsError, Decisions, LineIndex, PositionEncoding,
};
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, ContentChunk, Implementation,
    InitializeRequest, InitializeResponse, NewSessionRequest, NewSessionResponse, PromptRequest,
    PromptResponse, ReadTextFileRequest, SessionId, SessionNotification, SessionUpdate, StopReason,
    TextContent, WriteTextFileRequest,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ErrorCode, Stdio, UntypedMessage};
use anyhow::{anyhow, bail, Context as _};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the agent remembers per session: its cwd, which the prompt's
/// relative path is resolved against and which bounds what it may write.
type Sessions = Arc<Mutex<HashMap<SessionId, PathBuf>>>;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sessions: Sessions = Arc::default();
    let lsp_advertised = Arc::new(Mutex::new(false));
    Agent
        .v1()
        .name("acp-lsp-rename-agent")
        .on_receive_request(
            {
                let lsp_advertised = lsp_advertised.clone();
                async move |request: InitializeRequest, responder, _cx| {
                    // The typed request drops the top-level `lsp` member it
                    // does not know; the RFD puts the same signal in
                    // `_meta.lsp`, which it keeps.
                    let advertised = request
                        .client_capabilities
                        .meta
                        .as_ref()
                        .is_some_and(|meta| meta.get("lsp").is_some_and(Value::is_object));
                    *lock(&lsp_advertised) = advertised;
                    responder.respond(
                        InitializeResponse::new(ProtocolVersion::V1)
                            .agent_capabilities(AgentCapabilities::new())
                            .agent_info(Implementation::new(
                                "acp-lsp-rename-agent",
                                env!("CARGO_PKG_VERSION"),
                            )),
                    )
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let sessions = sessions.clone();
                async move |request: NewSessionRequest, responder, _cx| {
                    let id = SessionId::new(format!("rename-{}", lock(&sessions).len() + 1));
                    lock(&sessions).insert(id.clone(), request.cwd);
                    responder.respond(NewSessionResponse::new(id))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let sessions = sessions.clone();
                async move |request: PromptRequest,
                            responder: Responder<PromptResponse>,
                            cx: ConnectionTo<Client>| {
                    let cwd = lock(&sessions).get(&request.session_id).cloned();
                    let advertised = *lock(&lsp_advertised);
                    // The turn waits on the editor (fs/*, lsp/*), whose
                    // answers this dispatch loop delivers: run it outside.
                    cx.clone().spawn(async move {
                        let session = request.session_id.clone();
                        let say = Say {
                            cx: cx.clone(),
                            session: session.clone(),
                        };
                        let outcome = match cwd {
                            None => Err(anyhow!("unknown session {}", session.0)),
                            Some(_) if !advertised => Err(anyhow!(
                                "the client did not advertise the `lsp` capability: \
                                 run me behind `acp-lsp proxy`"
                            )),
                            Some(cwd) => prompt_turn(&cx, &session, &cwd, &request, &say).await,
                        };
                        match outcome {
                            Ok(()) => responder.respond(PromptResponse::new(StopReason::EndTurn)),
                            Err(e) => {
                                let message = format!("{e:#}");
                                say.line(&format!("rename failed: {message}"))?;
                                responder.respond_with_error(agent_client_protocol::Error::new(
                                    ErrorCode::INTERNAL_ERROR,
                                    format!("rename failed: {message}"),
                                ))
                            }
                        }
                    })
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        // A turn here is a handful of requests; there is nothing to stop.
        .on_receive_notification(
            async move |_: CancelNotification, _cx| Ok(()),
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await?;
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Streams text to the editor as `agent_message_chunk`s.
struct Say {
    cx: ConnectionTo<Client>,
    session: SessionId,
}

impl Say {
    fn line(&self, text: &str) -> Result<(), agent_client_protocol::Error> {
        self.cx.send_notification(SessionNotification::new(
            self.session.clone(),
            SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(
                TextContent::new(format!("{text}\n")),
            ))),
        ))
    }
}

/// One command of a prompt; file relative to the session's cwd, line and
/// column 1-based (the column in characters, as editors show it).
struct Command {
    verb: Verb,
    file: PathBuf,
    line: u64,
    column: usize,
}

enum Verb {
    Definition,
    References,
    Rename(String),
}

impl Verb {
    /// The LSP method, and the server capability that says it answers it.
    fn method(&self) -> (&'static str, &'static str) {
        match self {
            Verb::Definition => ("textDocument/definition", "definitionProvider"),
            Verb::References => ("textDocument/references", "referencesProvider"),
            Verb::Rename(_) => ("textDocument/rename", "renameProvider"),
        }
    }
}

const USAGE: &str = "expected commands separated by `;`: \
    `definition <file>:<line>:<column>`, `references <file>:<line>:<column>`, \
    `rename <file>:<line>:<column> <new name>`";

fn parse_prompt(prompt: &[ContentBlock]) -> anyhow::Result<Vec<Command>> {
    let text: String = prompt
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ");
    let commands = text
        .split(';')
        .filter(|c| !c.trim().is_empty())
        .map(parse_command)
        .collect::<anyhow::Result<Vec<_>>>()?;
    if commands.is_empty() {
        bail!("{USAGE}, got {text:?}");
    }
    Ok(commands)
}

fn parse_command(text: &str) -> anyhow::Result<Command> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let (verb, location) = match words.as_slice() {
        ["definition", location] => (Verb::Definition, location),
        ["references", location] => (Verb::References, location),
        ["rename", location, new_name] => (Verb::Rename(new_name.to_string()), location),
        _ => bail!("{USAGE}, got {text:?}"),
    };
    let mut parts = location.rsplitn(3, ':');
    let (Some(column), Some(line), Some(file)) = (parts.next(), parts.next(), parts.next()) else {
        bail!("{USAGE}, got {text:?}");
    };
    let line: u64 = line.parse().context("the line is not a number")?;
    let column: usize = column.parse().context("the column is not a number")?;
    if line == 0 || column == 0 {
        bail!("line and column count from 1");
    }
    Ok(Command {
        verb,
        file: PathBuf::from(file),
        line,
        column,
    })
}

async fn prompt_turn(
    cx: &ConnectionTo<Client>,
    session: &SessionId,
    cwd: &Path,
    request: &PromptRequest,
    say: &Say,
) -> anyhow::Result<()> {
    for command in parse_prompt(&request.prompt)? {
        run_command(cx, session, cwd, &command, say).await?;
    }
    Ok(())
}

async fn run_command(
    cx: &ConnectionTo<Client>,
    session: &SessionId,
    cwd: &Path,
    command: &Command,
    say: &Say,
) -> anyhow::Result<()> {
    let path = cwd.join(&command.file);
    let fs = EditorFs {
        cx: cx.clone(),
        session: session.clone(),
    };
    let (method, capability) = command.verb.method();

    // Only the RFD's fields: a server whose workspacePath holds the file and
    // whose fileExtensions name it, once its state is `running`.
    let (server, available) = running_server(cx, session, &path, say).await?;
    if !available.iter().any(|m| m == method) {
        bail!(
            "{method} is not in availableMethods ({})",
            available.join(", ")
        );
    }
    let capabilities = &server["capabilities"];
    if capabilities[capability].is_null() || capabilities[capability] == false {
        bail!("{} does not offer {capability}", server["name"]);
    }
    let server_id = server["serverId"]
        .as_str()
        .context("lsp/servers: a server without `serverId`")?;
    // The RFD: positions count in `capabilities.positionEncoding`, utf-16 by default.
    let encoding = capabilities["positionEncoding"]
        .as_str()
        .and_then(PositionEncoding::from_lsp)
        .unwrap_or(PositionEncoding::Utf16);
    say.line(&format!(
        "Using {} (state {}, positions in {}) for {}.",
        server["name"].as_str().unwrap_or("?"),
        server["state"].as_str().unwrap_or("?"),
        encoding.as_lsp(),
        command.file.display()
    ))?;

    // The column names a character; LSP counts in the server's encoding.
    let text = fs
        .read_text_file(&path)
        .await
        .with_context(|| format!("reading {}", path.display()))?;
    let character = LineIndex::new(&text).character_of_column(
        &text,
        command.line - 1,
        command.column - 1,
        encoding,
    )?;
    let uri = url::Url::from_file_path(&path)
        .map_err(|()| anyhow!("{} is not an absolute path", path.display()))?;
    say.line(&format!(
        "Asking for {method} at {}:{}:{} (LSP line {}, character {}).",
        command.file.display(),
        command.line,
        command.column,
        command.line - 1,
        character
    ))?;
    let mut params = json!({
        "textDocument": { "uri": uri.as_str() },
        "position": { "line": command.line - 1, "character": character },
    });
    match &command.verb {
        Verb::Rename(new_name) => params["newName"] = json!(new_name),
        Verb::References => params["context"] = json!({ "includeDeclaration": true }),
        Verb::Definition => {}
    }
    let answer = lsp(
        cx,
        "lsp/request",
        json!({
            "sessionId": session,
            "serverId": server_id,
            "method": method,
            "params": params,
        }),
    )
    .await?;
    let result = &answer["lspResult"];
    match &command.verb {
        Verb::Definition | Verb::References => {
            let locations = locations(result, cwd);
            if locations.is_empty() {
                bail!("the server found nothing for {method}");
            }
            let verb = if matches!(command.verb, Verb::Definition) {
                "definition"
            } else {
                "references"
            };
            say.line(&format!("{verb}: {}", locations.join(" ")))?;
        }
        Verb::Rename(new_name) => {
            if result.is_null() {
                bail!("the server found nothing to rename there");
            }
            say.line(&format!(
                "The server's WorkspaceEdit has {} text edit(s).",
                count_text_edits(result)
            ))?;
            // Only files under the session's cwd may be written.
            let writable = |p: &Path| p.starts_with(cwd);
            let report =
                apply_with_agent_fs(result, &fs, encoding, writable, &Decisions::default()).await?;
            for written in report.written.iter().chain(&report.created) {
                let shown = written.strip_prefix(cwd).unwrap_or(written);
                say.line(&format!(
                    "Wrote {} through fs/write_text_file.",
                    shown.display()
                ))?;
            }
            say.line(&format!(
                "Renamed to `{new_name}` in {} file(s).",
                report.written.len() + report.created.len()
            ))?;
        }
    }
    Ok(())
}

/// How often `lsp/servers` is asked while the server is not `running` yet,
/// and for how long at most: rust-analyzer loads a small crate in seconds.
const POLL_INTERVAL: Duration = Duration::from_millis(200);
const POLL_LIMIT: Duration = Duration::from_secs(120);

/// Asks `lsp/servers` until the server for `path` is `running` (the RFD:
/// anything else does not accept requests). Returns it and `availableMethods`.
async fn running_server(
    cx: &ConnectionTo<Client>,
    session: &SessionId,
    path: &Path,
    say: &Say,
) -> anyhow::Result<(Value, Vec<String>)> {
    let started = Instant::now();
    let mut reported = None;
    loop {
        let servers = lsp(cx, "lsp/servers", json!({ "sessionId": session })).await?;
        let server = pick_server(&servers, path)?.clone();
        let state = server["state"].as_str().unwrap_or("?").to_string();
        if state == "running" {
            let available = servers["availableMethods"]
                .as_array()
                .context("lsp/servers: no `availableMethods`")?
                .iter()
                .filter_map(|m| m.as_str().map(str::to_string))
                .collect();
            return Ok((server, available));
        }
        if started.elapsed() > POLL_LIMIT {
            bail!(
                "{} is still {state} after {} s",
                server["name"],
                POLL_LIMIT.as_secs()
            );
        }
        if reported.as_deref() != Some(state.as_str()) {
            say.line(&format!("{} is {state}; waiting.", server["name"]))?;
            reported = Some(state);
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// `Location | Location[] | LocationLink[]` as `file:line:column` (1-based,
/// the column as the server counts it), relative to `cwd` when inside it.
fn locations(result: &Value, cwd: &Path) -> Vec<String> {
    let items = match result {
        Value::Array(items) => items.clone(),
        Value::Null => Vec::new(),
        single => vec![single.clone()],
    };
    items
        .iter()
        .filter_map(|item| {
            let uri = item["uri"].as_str().or(item["targetUri"].as_str())?;
            let range = if item["range"].is_object() {
                &item["range"]
            } else {
                &item["targetSelectionRange"]
            };
            let path = url::Url::parse(uri).ok()?.to_file_path().ok()?;
            let shown = path
                .strip_prefix(cwd)
                .unwrap_or(&path)
                .display()
                .to_string();
            Some(format!(
                "{shown}:{}:{}",
                range["start"]["line"].as_u64()? + 1,
                range["start"]["character"].as_u64()? + 1
            ))
        })
        .collect()
}

/// Sends one of acp-lsp's methods. The SDK sends an `UntypedMessage`'s
/// method name verbatim, so the canonical `lsp/…` spelling can be used (an
/// SDK that only sends `_`-prefixed methods would use `_lsp/…`).
async fn lsp(cx: &ConnectionTo<Client>, method: &str, params: Value) -> anyhow::Result<Value> {
    let request = UntypedMessage::new(method, params)?;
    cx.send_request(request).block_task().await.map_err(|e| {
        // One line: the error's `data` (the RFD's `reason`, the server's
        // own error) is compact JSON.
        let data = e.data.map(|d| format!(" {d}")).unwrap_or_default();
        anyhow!("{method} failed: {}{data}", e.message)
    })
}

/// The server for `path`: one whose `workspacePath` holds it and whose
/// `fileExtensions` name its extension; of several, the one with the deepest
/// root (the RFD's advice: the most specific root).
fn pick_server<'a>(servers: &'a Value, path: &Path) -> anyhow::Result<&'a Value> {
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let list = servers["servers"]
        .as_array()
        .context("lsp/servers: no `servers` list")?;
    list.iter()
        .filter(|s| {
            s["fileExtensions"]
                .as_array()
                .is_some_and(|exts| exts.iter().any(|e| e.as_str() == Some(extension)))
        })
        .filter_map(|s| {
            let root = Path::new(s["workspacePath"].as_str()?);
            path.starts_with(root)
                .then_some((root.components().count(), s))
        })
        .max_by_key(|(depth, _)| *depth)
        .map(|(_, s)| s)
        .with_context(|| {
            let names: Vec<&str> = list.iter().filter_map(|s| s["name"].as_str()).collect();
            format!(
                "no language server for {} (listed: {})",
                path.display(),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )
        })
}

/// Text edits in a `WorkspaceEdit`, in `changes` or `documentChanges`.
fn count_text_edits(edit: &Value) -> usize {
    let in_changes: usize = edit["changes"]
        .as_object()
        .map(|m| m.values().filter_map(Value::as_array).map(Vec::len).sum())
        .unwrap_or(0);
    let in_document_changes: usize = edit["documentChanges"]
        .as_array()
        .map(|changes| {
            changes
                .iter()
                .filter_map(|c| c["edits"].as_array())
                .map(Vec::len)
                .sum()
        })
        .unwrap_or(0);
    in_changes + in_document_changes
}

/// The editor's file system, through the SDK connection: what
/// `apply_with_agent_fs` reads and writes with.
struct EditorFs {
    cx: ConnectionTo<Client>,
    session: SessionId,
}

impl AgentFs for EditorFs {
    fn read_text_file(
        &self,
        path: &Path,
    ) -> impl Future<Output = Result<String, AgentFsError>> + Send {
        let sent = self
            .cx
            .send_request(ReadTextFileRequest::new(self.session.clone(), path));
        async move { sent.block_task().await.map(|r| r.content).map_err(fs_error) }
    }

    fn write_text_file(
        &self,
        path: &Path,
        content: &str,
    ) -> impl Future<Output = Result<(), AgentFsError>> + Send {
        let sent = self.cx.send_request(WriteTextFileRequest::new(
            self.session.clone(),
            path,
            content,
        ));
        async move { sent.block_task().await.map(|_| ()).map_err(fs_error) }
    }
}

/// ACP's "resource not found" is how an editor says a file does not exist.
fn fs_error(e: agent_client_protocol::Error) -> AgentFsError {
    if e.code == ErrorCode::RESOURCE_NOT_FOUND {
        AgentFsError::NotFound
    } else {
        AgentFsError::Other(Box::new(e))
    }
}
