//! Turning an LSP `WorkspaceEdit` into file changes: planning (pure), applying
//! to disk (atomic, with rollback), a dry-run diff, and applying through an
//! agent's ACP `fs/*` methods.
//!
//! `plan` decides, `apply` and `acp` do the I/O: the edit planner does no I/O.

pub mod acp;
pub mod apply;
pub mod plan;
pub mod position;

pub use acp::{apply_with_agent_fs, AgentApplyError, AgentFs, AgentFsError};
pub use apply::{apply_to_disk, disk_entry, dry_run, plan_on_disk, ApplyError, ApplyReport};
pub use plan::{
    plan, touched_paths, Annotation, Current, Decisions, Entry, FileOperation, Plan, PlanContext,
    PlanError, PlanErrorKind,
};
pub use position::{LineIndex, PositionEncoding, PositionError};
