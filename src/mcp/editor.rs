//! Requests acp-lsp itself sends the editor (`fs/read_text_file`,
//! `fs/write_text_file`), so that an MCP `rename` is applied through the
//! editor: its open buffers follow and its review applies.
//!
//! The relay drains [`EditorFs`]'s outbox into the editor's output and hands
//! back every editor response whose id is one of ours; such responses are
//! never forwarded to the agent. Our ids are strings with a random part
//! (`"acp-lsp/<128 random bits>/<n>"`), and the relay refuses an agent
//! request that reuses an id of ours still in flight, so an editor response
//! can never be ambiguous.

use super::journal::Journal;
use crate::edit::{AgentFs, AgentFsError};
use crate::gate::{Gate, LspHost};
use crate::jsonrpc::RequestId;
use crate::proxy_host::ProxyHost;
use serde_json::json;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How long acp-lsp waits for the editor to answer one of its requests (an
/// editor may ask the user before writing).
pub const EDITOR_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// ACP's "resource not found".
const RESOURCE_NOT_FOUND: i64 = -32002;

/// An editor response: the raw `result`, or the raw `error`.
pub type EditorReply = Result<Box<RawValue>, Box<RawValue>>;

/// The editor as a file system, for the MCP tools.
pub struct EditorFs {
    /// The editor advertised both `fs.readTextFile` and `fs.writeTextFile`.
    enabled: AtomicBool,
    prefix: String,
    next: AtomicU64,
    outbox: mpsc::UnboundedSender<Vec<u8>>,
    outbox_rx: Mutex<Option<mpsc::UnboundedReceiver<Vec<u8>>>>,
    pending: Mutex<HashMap<RequestId, oneshot::Sender<EditorReply>>>,
    /// Every session's writes and known diagnostics, for the tools of every
    /// MCP connection of this proxy (the relay reports the agent's writes).
    journal: Arc<Journal>,
}

#[derive(Debug, thiserror::Error)]
pub enum EditorError {
    #[error("the editor did not answer within {} s", EDITOR_REQUEST_TIMEOUT.as_secs())]
    Timeout,
    #[error("the connection to the editor is gone")]
    Gone,
    #[error("the editor answered with an error: {0}")]
    Refused(String),
}

impl EditorFs {
    pub fn new(random: &str) -> EditorFs {
        let (outbox, rx) = mpsc::unbounded_channel();
        EditorFs {
            enabled: AtomicBool::new(false),
            prefix: format!("acp-lsp/{random}/"),
            next: AtomicU64::new(1),
            outbox,
            outbox_rx: Mutex::new(Some(rx)),
            pending: Mutex::new(HashMap::new()),
            journal: Arc::default(),
        }
    }

    /// The sessions' writes and known diagnostics (`diagnostics {since: "last_edit"}`).
    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    /// Set from the editor's `initialize`.
    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Relaxed);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// The lines to send the editor; taken once, by the relay.
    pub fn take_outbox(&self) -> Option<mpsc::UnboundedReceiver<Vec<u8>>> {
        self.outbox_rx
            .lock()
            .expect("BUG: editor outbox lock poisoned")
            .take()
    }

    fn pending(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<RequestId, oneshot::Sender<EditorReply>>> {
        self.pending
            .lock()
            .expect("BUG: editor pending lock poisoned")
    }

    /// Whether `id` is one of our requests still awaiting the editor.
    pub fn is_ours(&self, id: &RequestId) -> bool {
        self.pending().contains_key(id)
    }

    /// An editor response: returns true when it answered one of ours (it is
    /// then consumed, never forwarded).
    pub fn on_response(&self, id: &RequestId, reply: EditorReply) -> bool {
        match self.pending().remove(id) {
            Some(waiter) => {
                let _ = waiter.send(reply);
                true
            }
            None => false,
        }
    }

    /// Sends one request to the editor and waits for its answer.
    pub async fn request(
        &self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<Box<RawValue>, EditorError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let id_text = serde_json::to_string(&format!("{}{n}", self.prefix))
            .expect("BUG: a string always serializes");
        let id = RequestId::from_raw(
            &serde_json::from_str::<Box<RawValue>>(&id_text)
                .expect("BUG: a serialized string is JSON"),
        );
        let (tx, rx) = oneshot::channel();
        self.pending().insert(id.clone(), tx);
        let line = json!({ "jsonrpc": "2.0", "id": serde_json::from_str::<serde_json::Value>(&id_text)
            .expect("BUG: a serialized string is JSON"), "method": method, "params": params });
        if self.outbox.send(line.to_string().into_bytes()).is_err() {
            self.pending().remove(&id);
            return Err(EditorError::Gone);
        }
        let outcome = tokio::time::timeout(EDITOR_REQUEST_TIMEOUT, rx).await;
        self.pending().remove(&id);
        match outcome {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err(error))) => Err(EditorError::Refused(error.get().to_string())),
            Ok(Err(_)) => Err(EditorError::Gone),
            Err(_) => Err(EditorError::Timeout),
        }
    }

    /// The editor's files as one session sees them.
    pub fn for_session<'a>(
        self: &'a Arc<Self>,
        gate: &'a Arc<Gate<ProxyHost>>,
        session_id: &'a str,
    ) -> SessionFs<'a> {
        SessionFs {
            editor: self,
            gate,
            session_id,
        }
    }
}

/// [`AgentFs`] over the editor, for one session.
pub struct SessionFs<'a> {
    editor: &'a Arc<EditorFs>,
    gate: &'a Arc<Gate<ProxyHost>>,
    session_id: &'a str,
}

fn error_code(error: &str) -> Option<i64> {
    serde_json::from_str::<serde_json::Value>(error).ok()?["code"].as_i64()
}

impl AgentFs for SessionFs<'_> {
    async fn read_text_file(&self, path: &Path) -> Result<String, AgentFsError> {
        let params = json!({ "sessionId": self.session_id, "path": path });
        match self.editor.request("fs/read_text_file", params).await {
            Ok(result) => {
                #[derive(serde::Deserialize)]
                struct Read {
                    content: String,
                }
                serde_json::from_str::<Read>(result.get())
                    .map(|r| r.content)
                    .map_err(|e| AgentFsError::Other(Box::new(e)))
            }
            Err(EditorError::Refused(error)) if error_code(&error) == Some(RESOURCE_NOT_FOUND) => {
                Err(AgentFsError::NotFound)
            }
            Err(e) => Err(AgentFsError::Other(Box::new(e))),
        }
    }

    async fn write_text_file(&self, path: &Path, content: &str) -> Result<(), AgentFsError> {
        let params = json!({ "sessionId": self.session_id, "path": path, "content": content });
        self.editor
            .request("fs/write_text_file", params)
            .await
            .map_err(|e| AgentFsError::Other(Box::new(e)))?;
        // As for the agent's own writes: the servers see the new text before
        // anything else is asked of them.
        if let Some(session) = self.gate.sessions().get(self.session_id) {
            self.gate.host().text_written(&session, path, content);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_response_to_our_id_reaches_the_request() {
        let editor = Arc::new(EditorFs::new("r"));
        let mut outbox = editor.take_outbox().unwrap();
        let asking = {
            let editor = Arc::clone(&editor);
            tokio::spawn(async move { editor.request("fs/read_text_file", json!({})).await })
        };
        let line = outbox.recv().await.unwrap();
        let sent: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(sent["id"], json!("acp-lsp/r/1"));
        let id =
            RequestId::from_raw(&serde_json::from_str::<Box<RawValue>>("\"acp-lsp/r/1\"").unwrap());
        assert!(editor.is_ours(&id));
        let result = RawValue::from_string("{\"content\":\"x\"}".into()).unwrap();
        assert!(editor.on_response(&id, Ok(result)));
        assert_eq!(asking.await.unwrap().unwrap().get(), "{\"content\":\"x\"}");
        assert!(!editor.is_ours(&id));
        let other = RequestId::from_u64(1);
        assert!(!editor.on_response(&other, Err(RawValue::from_string("{}".into()).unwrap())));
    }
}
