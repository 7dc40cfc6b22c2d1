//! The sessions the gate serves: id → roots and the confinement built from them.

use super::confine::Confinement;
use super::ids::SessionId;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// One ACP session as the gate sees it: its id, its roots and the
/// confinement of its requests. Hosts receive it in every call.
#[derive(Debug)]
pub struct Session {
    id: SessionId,
    roots: Vec<PathBuf>,
    confinement: Confinement,
    /// The session's `lsp/request`s in flight (the gate's per-session quota).
    pub(crate) in_flight: AtomicUsize,
}

impl Session {
    /// A session over `roots` whose requests `confinement` checks. The gate
    /// makes its sessions itself ([`Gate::open_session`](super::Gate::open_session));
    /// a host that keeps sessions of its own (acp-lsp's shared daemon) uses
    /// [`SessionTable`].
    pub fn new(id: &str, roots: Vec<PathBuf>, confinement: Confinement) -> Session {
        Session {
            id: id.into(),
            roots,
            confinement,
            in_flight: AtomicUsize::new(0),
        }
    }

    /// The ACP session id.
    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// `[cwd, …additionalDirectories]`, as the editor sent them.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// What the session's requests may name: its roots (writable), the
    /// configured read-only roots, the allowed non-`file` schemes.
    pub fn confinement(&self) -> &Confinement {
        &self.confinement
    }
}

/// Sessions by id. Written on session lifecycle, read on every request; each
/// read clones an `Arc` under a short lock and never holds it across an await.
#[derive(Debug)]
pub struct SessionTable {
    read_only_roots: Vec<PathBuf>,
    allowed_schemes: Vec<String>,
    sessions: RwLock<HashMap<String, Arc<Session>>>,
}

impl SessionTable {
    /// An empty table; every session's confinement adds `read_only_roots`
    /// and lets `allowed_schemes` through.
    pub fn new(read_only_roots: Vec<PathBuf>, allowed_schemes: Vec<String>) -> SessionTable {
        SessionTable {
            read_only_roots,
            allowed_schemes,
            sessions: RwLock::new(HashMap::new()),
        }
    }

    /// Adds or replaces a session (`session/load` and `session/resume` resend the full list).
    pub fn insert(&self, id: &str, roots: Vec<PathBuf>) -> Arc<Session> {
        let confinement = Confinement::new(&roots, &self.read_only_roots, &self.allowed_schemes);
        let session = Arc::new(Session::new(id, roots, confinement));
        self.sessions
            .write()
            .insert(id.to_string(), Arc::clone(&session));
        session
    }

    /// Forgets a session; returns it if it was there.
    pub fn remove(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions.write().remove(id)
    }

    /// The session `id`, if it is open.
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions.read().get(id).cloned()
    }

    /// Every session, in no particular order.
    pub fn all(&self) -> Vec<Arc<Session>> {
        self.sessions.read().values().cloned().collect()
    }
}
