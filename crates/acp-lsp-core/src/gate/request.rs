//! The typed `lsp/request` ([`LspRequest`]): what the wire's params become
//! once read, and what an in-process caller (acp-lsp's MCP tools and command
//! line) builds directly; and the gate's checks that wait for the host's
//! route ([`Checks`], run by [`HostCall::route`](super::HostCall::route)).

use super::confine::Confinement;
use super::document::NamedDocument;
use super::ids::{ServerId, SessionId};
use super::methods::{self, Refusal};
use super::session::Session;
use super::tree::{Json, JsonTree};
use super::{named_documents, GateError};
use serde_json::value::RawValue;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// What the gate needs to know of one server to check a request to it.
#[derive(Debug, Clone)]
pub struct Route {
    /// The commands `workspace/executeCommand` may run on this server; with
    /// none, `workspace/executeCommand` is not forwarded to it.
    pub execute_commands: Vec<String>,
    /// Server extension methods forwarded to this server
    /// (`rust-analyzer/expandMacro`); other methods outside the RFD's list
    /// are `method_not_forwarded`.
    pub extension_methods: Vec<String>,
    /// How long the server may take to answer (plus the request's
    /// `waitUntilReady`): the gate's deadline, counted from
    /// [`HostCall::route`](super::HostCall::route).
    pub request_timeout: Duration,
}

/// An `lsp/request`'s `params` member, as the agent sent it.
#[derive(Debug)]
pub(crate) enum Params {
    /// No `params` member at all (the RFD requires one).
    Missing,
    /// `params: null`.
    Null,
    /// Anything else, verbatim.
    Value(Box<RawValue>),
}

/// Who is asking: an agent gets exactly the RFD's `availableMethods`;
/// acp-lsp's own rename may also send the file lifecycle requests that LSP
/// has a client send while it applies file renames
/// (`workspace/willRenameFiles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// An agent (over the wire, or through acp-lsp's MCP tools).
    Agent,
    /// The editing client itself, about to apply file operations.
    FileLifecycle,
}

/// One `lsp/request`, typed. The gate checks it exactly as it checks the
/// wire's (limits, refusals, routing, confinement, quota), so an in-process
/// caller gets no more than an agent.
#[derive(Debug, Clone)]
pub struct LspRequest {
    /// The session asking.
    pub session_id: SessionId,
    /// The server, as `lsp/servers` lists it.
    pub server_id: ServerId,
    /// The LSP method.
    pub method: String,
    /// The LSP params, verbatim; `None` for a method that takes none (`null`).
    pub params: Option<Box<RawValue>>,
    /// Wait up to this long for the server to be ready (`_meta.waitUntilReady`).
    pub wait_until_ready: Option<Duration>,
    /// Who is asking.
    pub caller: Caller,
}

/// The gate's `lsp/request` quotas: in flight in all, and the limits (the
/// per-session count lives in the [`Session`]).
#[derive(Debug)]
pub(crate) struct Admission {
    total: AtomicUsize,
    max_per_session: usize,
    max_total: usize,
}

impl Admission {
    pub(crate) fn new(max_per_session: usize, max_total: usize) -> Admission {
        Admission {
            total: AtomicUsize::new(0),
            max_per_session,
            max_total,
        }
    }

    /// One more `lsp/request` of `session`, or a refusal at once
    /// (`overloaded`, retryable), never a queue.
    fn admit(self: &Arc<Self>, session: &Arc<Session>) -> Result<Admitted, GateError> {
        let below = |limit: usize| move |n: usize| (n < limit).then_some(n + 1);
        if session
            .in_flight
            .fetch_update(
                Ordering::AcqRel,
                Ordering::Acquire,
                below(self.max_per_session),
            )
            .is_err()
        {
            return Err(GateError::Overloaded {
                scope: "session",
                limit: self.max_per_session,
            });
        }
        if self
            .total
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, below(self.max_total))
            .is_err()
        {
            session.in_flight.fetch_sub(1, Ordering::AcqRel);
            return Err(GateError::Overloaded {
                scope: "total",
                limit: self.max_total,
            });
        }
        Ok(Admitted {
            admission: Arc::clone(self),
            session: Arc::clone(session),
        })
    }
}

/// One admitted request; gives its places back when dropped.
#[derive(Debug)]
pub(crate) struct Admitted {
    admission: Arc<Admission>,
    session: Arc<Session>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.session.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.admission.total.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What the gate learns while the host routes one request: its deadline,
/// and its place in the quota (held until the gate's future for the request
/// ends, however it ends).
#[derive(Debug, Default)]
pub(crate) struct Slot {
    pub(crate) deadline: OnceLock<Duration>,
    admitted: OnceLock<Admitted>,
}

/// The gate's checks that need the route, carried by a [`HostCall`](super::HostCall).
#[derive(Debug)]
pub(crate) struct Checks {
    pub(crate) caller: Caller,
    pub(crate) admission: Arc<Admission>,
    pub(crate) slot: Arc<Slot>,
}

impl Checks {
    /// Checks `call` against the server's `route`, in the order the wire's
    /// errors have always come: the method is forwarded to this server,
    /// the quota, the params are there, readable, confined, an
    /// `executeCommand`'s command is allowed. Takes the quota place and
    /// sets the deadline; returns the documents the params name.
    pub(crate) fn finish(
        &self,
        session: &Arc<Session>,
        method: &str,
        params: &Params,
        wait_until_ready: Option<Duration>,
        route: &Route,
    ) -> Result<Vec<NamedDocument>, GateError> {
        let listed = methods::is_forwarded(method)
            || (self.caller == Caller::FileLifecycle && methods::is_file_lifecycle(method))
            || (method == methods::EXECUTE_COMMAND && !route.execute_commands.is_empty())
            || route.extension_methods.iter().any(|m| m == method);
        if !listed {
            return Err(GateError::MethodNotForwarded {
                method: method.to_string(),
                refusal: Refusal::NotListed,
                // Filled in by the gate.
                available: Vec::new(),
            });
        }
        // Counted from here to the answer: waiting for readiness or document
        // sync holds a place too.
        let admitted = self.admission.admit(session)?;
        let _ = self.slot.admitted.set(admitted);
        let documents = match params {
            Params::Missing => {
                return Err(GateError::InvalidParams(
                    "params is required (null for a method that takes none)".into(),
                ))
            }
            Params::Null if method == methods::EXECUTE_COMMAND => {
                return Err(GateError::InvalidParams(
                    "workspace/executeCommand needs params with a command".into(),
                ))
            }
            Params::Null => Vec::new(),
            Params::Value(params) => inspect(params, session.confinement(), method, route)?,
        };
        let wait = wait_until_ready.unwrap_or_default();
        let _ = self.slot.deadline.set(route.request_timeout + wait);
        Ok(documents)
    }
}

/// The one reading of a request's inner params: confinement of every URI,
/// an `executeCommand`'s command, the documents they name.
fn inspect(
    params: &RawValue,
    confinement: &Confinement,
    method: &str,
    route: &Route,
) -> Result<Vec<NamedDocument>, GateError> {
    let value: Json =
        serde_json::from_str(params.get()).map_err(|e| GateError::InvalidParams(e.to_string()))?;
    let mut named: Vec<NamedDocument> = named_documents(&value)
        .into_iter()
        .map(NamedDocument::from_uri)
        .collect();
    confinement.check_params_naming(&value, &mut named)?;
    if method == methods::EXECUTE_COMMAND {
        check_command(&value, route)?;
    }
    Ok(named)
}

fn check_command<T: JsonTree>(params: &T, route: &Route) -> Result<(), GateError> {
    let command = params
        .get("command")
        .and_then(JsonTree::as_str)
        .ok_or_else(|| {
            GateError::InvalidParams("workspace/executeCommand needs a command".into())
        })?;
    if route.execute_commands.iter().any(|c| c == command) {
        Ok(())
    } else {
        Err(GateError::CommandNotAllowed {
            command: command.to_string(),
            allowed: route.execute_commands.clone(),
        })
    }
}
