//! An editor on the official ACP Rust SDK: one session over an agent (the
//! proxy, or a conductor in front of it) that answers `fs/read_text_file`
//! and `fs/write_text_file` from the disk, and collects what the agent says.

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ContentBlock, FileSystemCapabilities, InitializeRequest, NewSessionRequest,
    PromptRequest, ReadTextFileRequest, ReadTextFileResponse, SessionNotification, SessionUpdate,
    TextContent, WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{AcpAgent, Agent, Client, ErrorCode};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What the editor saw during a session.
#[derive(Default)]
pub struct Seen {
    /// The agent's message text, chunk by chunk.
    pub messages: Vec<String>,
    /// Files the editor wrote for the agent (or for acp-lsp).
    pub writes: Vec<PathBuf>,
}

/// The lock, even after a panicking holder (the test reports that panic).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One session on `root` through `agent` as the editor `name`: initialize
/// (with both `fs` capabilities), session/new, then each of `prompts`;
/// returns the agent's reply to each. Panics if the session fails.
pub async fn converse(
    agent: AcpAgent,
    name: &str,
    root: &Path,
    prompts: &[String],
    seen: Arc<Mutex<Seen>>,
) -> Vec<String> {
    let root = root.to_path_buf();
    let prompts = prompts.to_vec();
    let result = Client
        .v1()
        .name(name)
        .on_receive_notification(
            {
                let seen = seen.clone();
                async move |notification: SessionNotification, _cx| {
                    if let SessionUpdate::AgentMessageChunk(chunk) = notification.update {
                        if let ContentBlock::Text(text) = chunk.content {
                            lock(&seen).messages.push(text.text);
                        }
                    }
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: ReadTextFileRequest, responder, _cx| match std::fs::read_to_string(
                &request.path,
            ) {
                Ok(text) => responder.respond(ReadTextFileResponse::new(text)),
                Err(_) => responder.respond_with_error(agent_client_protocol::Error::new(
                    ErrorCode::RESOURCE_NOT_FOUND,
                    "not found".to_string(),
                )),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let seen = seen.clone();
                async move |request: WriteTextFileRequest, responder, _cx| {
                    if let Err(e) = std::fs::write(&request.path, &request.content) {
                        return responder.respond_with_error(
                            agent_client_protocol::Error::into_internal_error(e),
                        );
                    }
                    lock(&seen).writes.push(request.path.clone());
                    responder.respond(WriteTextFileResponse::new())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(agent, async |cx: ConnectionTo<Agent>| {
            cx.send_request(
                InitializeRequest::new(ProtocolVersion::V1).client_capabilities(
                    ClientCapabilities::new().fs(FileSystemCapabilities::new()
                        .read_text_file(true)
                        .write_text_file(true)),
                ),
            )
            .block_task()
            .await?;
            let session = cx
                .send_request(NewSessionRequest::new(root.clone()))
                .block_task()
                .await?;
            let mut replies = Vec::new();
            for prompt in &prompts {
                let before = lock(&seen).messages.len();
                cx.send_request(PromptRequest::new(
                    session.session_id.clone(),
                    vec![ContentBlock::Text(TextContent::new(prompt.clone()))],
                ))
                .block_task()
                .await?;
                replies.push(lock(&seen).messages[before..].concat());
            }
            Ok(replies)
        })
        .await;
    result.unwrap_or_else(|e| panic!("the ACP session through {name}'s agent failed: {e}"))
}
