//! The token table: which secret token was injected for which session, and
//! whether a connection holds it now.
//!
//! A token is created when the relay injects an entry into a session request.
//! For `session/new` and `session/fork` the session id only comes in the
//! agent's response, so the token starts `Pending` and is bound on the
//! successful response; a failed request revokes it, and so does
//! `session/close`. Agents may launch the MCP server before they answer
//! `session/new`, so a connection may arrive while its token is pending: the
//! tools then wait for the binding ([`SESSION_BIND_WAIT`]).
//!
//! A token admits one connection at a time, not one connection ever: agents
//! start a session's MCP servers again (a reconnect after a crash, and
//! elizacp starts the server for every tool call), always from the same
//! entry, so a single-use token would break the second start. What a token
//! protects is unchanged: only a process given the entry's environment can
//! reach the session, the socket sits in a 0700 directory, and the token
//! dies with its session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;

/// How long a tool call waits for the session its token was injected for to
/// be committed (the agent launched the server before answering `session/new`).
pub const SESSION_BIND_WAIT: Duration = Duration::from_secs(30);
/// How long a connection waits for an earlier connection with the same token
/// to end (an agent that restarts its MCP server, or that starts one per tool
/// call as elizacp does, reconnects right after closing the last one).
pub const TOKEN_BUSY_WAIT: Duration = Duration::from_secs(5);

/// How long after a session is bound the proxy warns that the agent has not
/// connected to its MCP server. Agents that start MCP servers with the
/// session (Gemini CLI, Claude Code) connect before they answer
/// `session/new`; Gemini CLI starts none in a folder it does not trust, and
/// a one-shot client's whole prompt can take less than 10 s: the warning
/// must come while it still runs.
pub const UNCONNECTED_NOTICE: Duration = Duration::from_secs(3);

/// What a token is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding {
    /// The session request is awaiting the agent's answer.
    Pending,
    Session(String),
    /// The session request failed, or the session was closed.
    Revoked,
}

struct Entry {
    binding: watch::Sender<Binding>,
    /// Signalled while a connection holds the token; `false` when free.
    busy: watch::Sender<bool>,
    /// Whether any connection (socket or HTTP) ever presented the token.
    connected: Arc<AtomicBool>,
    /// The notice for an agent that never connects, waiting; it goes with
    /// the entry.
    notice: Option<AbortOnDropHandle<()>>,
}

/// Why a connection was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("unknown or revoked token")]
    Unknown,
    #[error("another connection holds this token")]
    Busy,
}

/// Tokens → sessions. Shared by the relay (which creates, binds and revokes)
/// and the socket listener (which admits connections).
#[derive(Default)]
pub struct TokenTable {
    tokens: Mutex<HashMap<String, Entry>>,
}

/// A connection's hold on its token; dropping an exclusive one frees the
/// token for the next connection.
pub struct Lease {
    binding: watch::Receiver<Binding>,
    /// Set for a socket connection ([`TokenTable::admit`]).
    busy: Option<watch::Sender<bool>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(busy) = &self.busy {
            busy.send_replace(false);
        }
    }
}

impl Lease {
    /// The session the token is bound to, waiting up to `wait` while it is
    /// pending. `None` when it was revoked or is still pending after `wait`.
    pub async fn session(&self, wait: Duration) -> Option<String> {
        let mut rx = self.binding.clone();
        let settled = tokio::time::timeout(wait, rx.wait_for(|b| *b != Binding::Pending)).await;
        match settled {
            Ok(Ok(binding)) => match &*binding {
                Binding::Session(id) => Some(id.clone()),
                _ => None,
            },
            _ => None,
        }
    }
}

impl TokenTable {
    pub fn new() -> TokenTable {
        TokenTable::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.tokens.lock().expect("BUG: token table lock poisoned")
    }

    /// A new random token, pending, or bound at once when the session id is known.
    pub fn create(&self, session_id: Option<&str>) -> std::io::Result<String> {
        let token = random_token()?;
        let binding = match session_id {
            Some(id) => Binding::Session(id.to_string()),
            None => Binding::Pending,
        };
        self.lock().insert(
            token.clone(),
            Entry {
                binding: watch::Sender::new(binding),
                busy: watch::Sender::new(false),
                connected: Arc::new(AtomicBool::new(false)),
                notice: None,
            },
        );
        Ok(token)
    }

    /// The session request the token was injected into succeeded.
    pub fn bind(&self, token: &str, session_id: &str) {
        if let Some(entry) = self.lock().get_mut(token) {
            entry
                .binding
                .send_replace(Binding::Session(session_id.to_string()));
            entry.notice = notice_if_unconnected(entry, session_id);
        }
    }

    /// Whether a connection ever presented `token` (`None`: no such token).
    pub fn ever_connected(&self, token: &str) -> Option<bool> {
        self.lock()
            .get(token)
            .map(|entry| entry.connected.load(Ordering::Relaxed))
    }

    /// The session request failed: the token is forgotten.
    pub fn revoke(&self, token: &str) {
        if let Some(entry) = self.lock().remove(token) {
            entry.binding.send_replace(Binding::Revoked);
        }
    }

    /// The session closed: its tokens are forgotten.
    pub fn revoke_session(&self, session_id: &str) {
        self.lock().retain(|_, entry| {
            let ours = *entry.binding.borrow() == Binding::Session(session_id.to_string());
            if ours {
                entry.binding.send_replace(Binding::Revoked);
            }
            !ours
        });
    }

    /// Admits a connection presenting `token`: one connection at a time holds
    /// a token; a second waits up to [`TOKEN_BUSY_WAIT`] for the first to end.
    pub async fn admit(&self, token: &str) -> Result<Lease, TokenError> {
        let (binding, busy) = {
            let tokens = self.lock();
            let entry = tokens.get(token).ok_or(TokenError::Unknown)?;
            entry.connected.store(true, Ordering::Relaxed);
            (entry.binding.subscribe(), entry.busy.clone())
        };
        let deadline = tokio::time::Instant::now() + TOKEN_BUSY_WAIT;
        loop {
            // Taking the token is one atomic test-and-set on the watch value.
            let mut taken = false;
            busy.send_if_modified(|held| {
                if *held {
                    false
                } else {
                    *held = true;
                    taken = true;
                    true
                }
            });
            if taken {
                return Ok(Lease {
                    binding,
                    busy: Some(busy),
                });
            }
            let mut rx = busy.subscribe();
            let freed = tokio::time::timeout_at(deadline, rx.wait_for(|held| !*held))
                .await
                .is_ok_and(|r| r.is_ok());
            if !freed {
                return Err(TokenError::Busy);
            }
        }
    }

    /// A shared hold on `token`, for the http transport, where one agent may
    /// open several MCP sessions with the same bearer token.
    pub fn watch(&self, token: &str) -> Result<Lease, TokenError> {
        let tokens = self.lock();
        let entry = tokens.get(token).ok_or(TokenError::Unknown)?;
        entry.connected.store(true, Ordering::Relaxed);
        Ok(Lease {
            binding: entry.binding.subscribe(),
            busy: None,
        })
    }

    /// How many tokens are live (tests).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Warns if the agent took the session's MCP entry but has not
/// connected [`UNCONNECTED_NOTICE`] later, while the session lives: the user
/// otherwise gets no language-server tools and no word why.
fn notice_if_unconnected(entry: &Entry, session_id: &str) -> Option<AbortOnDropHandle<()>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    if entry.connected.load(Ordering::Relaxed) {
        return None;
    }
    let connected = Arc::clone(&entry.connected);
    let mut binding = entry.binding.subscribe();
    let session = session_id.to_string();
    Some(AbortOnDropHandle::new(runtime.spawn(async move {
        // Revoked (closed session, failed request) or dropped: nothing to say.
        let gone = binding.wait_for(|b| *b == Binding::Revoked);
        if tokio::time::timeout(UNCONNECTED_NOTICE, gone).await.is_ok() {
            return;
        }
        if !connected.load(Ordering::Relaxed) {
            tracing::warn!(
                session = %session,
                "the agent took acp-lsp's MCP server for this session but has not connected \
                 to it in {} s, so its model has no language-server tools. Gemini CLI starts \
                 no MCP server in a folder it does not trust: trust the folder (`/permissions \
                 trust` in Gemini CLI, or GEMINI_CLI_TRUST_WORKSPACE=true in its \
                 environment). Agents that start MCP \
                 servers only for a tool call (elizacp) connect later.",
                UNCONNECTED_NOTICE.as_secs()
            );
        }
    })))
}

/// 128 random bits from the kernel, as hex.
pub(crate) fn random_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    crate::sys::fill_random(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_pending_token_is_bound_by_the_response() {
        let table = TokenTable::new();
        let token = table.create(None).unwrap();
        assert_eq!(token.len(), 32);
        let lease = table.admit(&token).await.unwrap();
        table.bind(&token, "s1");
        assert_eq!(
            lease.session(Duration::from_secs(1)).await,
            Some("s1".into())
        );
    }

    /// The warning an operator sees when the agent never connects, and
    /// none when it does.
    #[tokio::test(start_paused = true)]
    async fn an_agent_that_never_connects_is_warned_about() {
        #[derive(Clone, Default)]
        struct Warnings(Arc<std::sync::Mutex<Vec<String>>>);
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
            fn on_event(
                &self,
                event: &tracing::Event<'_>,
                _: tracing_subscriber::layer::Context<'_, S>,
            ) {
                if *event.metadata().level() == tracing::Level::WARN {
                    let mut text = String::new();
                    event.record(
                        &mut |field: &tracing::field::Field, value: &dyn std::fmt::Debug| {
                            text.push_str(&format!("{}={value:?} ", field.name()));
                        },
                    );
                    self.0.lock().unwrap().push(text);
                }
            }
        }
        use tracing_subscriber::layer::SubscriberExt;
        let warnings = Warnings::default();
        let _guard =
            tracing::subscriber::set_default(tracing_subscriber::registry().with(warnings.clone()));
        let table = TokenTable::new();
        let quiet = table.create(None).unwrap();
        table.bind(&quiet, "never");
        let busy = table.create(None).unwrap();
        let _lease = table.admit(&busy).await.unwrap();
        table.bind(&busy, "connected");
        tokio::time::sleep(UNCONNECTED_NOTICE + Duration::from_millis(10)).await;
        tokio::task::yield_now().await;
        let seen = warnings.0.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert!(
            seen[0].contains("session=never") && seen[0].contains("trust the folder"),
            "{seen:?}"
        );
    }

    #[tokio::test]
    async fn revoked_and_unknown_tokens_are_refused() {
        let table = TokenTable::new();
        let token = table.create(None).unwrap();
        let lease = table.admit(&token).await.unwrap();
        table.revoke(&token);
        assert_eq!(lease.session(Duration::from_secs(1)).await, None);
        assert_eq!(table.admit(&token).await.err(), Some(TokenError::Unknown));
        assert_eq!(table.admit("nope").await.err(), Some(TokenError::Unknown));
        let token = table.create(Some("s2")).unwrap();
        table.revoke_session("s2");
        assert!(table.is_empty());
        assert_eq!(table.admit(&token).await.err(), Some(TokenError::Unknown));
    }

    #[tokio::test(start_paused = true)]
    async fn one_connection_at_a_time_holds_a_token() {
        let table = TokenTable::new();
        let token = table.create(Some("s")).unwrap();
        let first = table.admit(&token).await.unwrap();
        assert_eq!(table.admit(&token).await.err(), Some(TokenError::Busy));
        drop(first);
        let second = table.admit(&token).await.unwrap();
        assert_eq!(second.session(Duration::ZERO).await, Some("s".into()));
    }

    #[tokio::test]
    async fn a_token_is_connected_once_a_connection_presents_it() {
        let table = TokenTable::new();
        let socket = table.create(None).unwrap();
        let http = table.create(None).unwrap();
        table.bind(&socket, "s1");
        table.bind(&http, "s2");
        assert_eq!(table.ever_connected(&socket), Some(false));
        assert_eq!(table.ever_connected(&http), Some(false));
        drop(table.admit(&socket).await.unwrap());
        drop(table.watch(&http).unwrap());
        assert_eq!(table.ever_connected(&socket), Some(true));
        assert_eq!(table.ever_connected(&http), Some(true));
        assert_eq!(table.ever_connected("nope"), None);
    }

    #[test]
    fn tokens_differ() {
        let table = TokenTable::new();
        assert_ne!(table.create(None).unwrap(), table.create(None).unwrap());
    }
}
