//! A child and everything it starts, as one thing to signal and to end,
//! on every OS.
//!
//! * **Unix** (Linux, macOS): the child leads its own process group (the
//!   group id is its pid), which the orphan guardian lists while the
//!   leader is unreaped; on Linux it also gets a parent-death signal. A
//!   signal goes to the whole group.
//! * **Windows**: the child is created suspended and without a console
//!   window, put into a Job Object of its own with
//!   `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`, then resumed: everything it
//!   starts is in the job from its first instruction, and the job's
//!   closing (this value dropped, or acp-lsp's end however it ends) kills
//!   them all. There are no signals: `Term` and `Kill` both end the job.

#[cfg(unix)]
use super::guardian;
use crate::sys::Signal;
use std::io;
use tokio::process::{Child, Command};

/// One child's tree (see the module docs).
#[derive(Debug)]
pub(crate) struct ProcessTree {
    #[cfg(unix)]
    pgid: crate::sys::Pid,
    #[cfg(windows)]
    job: crate::sys::Job,
}

impl ProcessTree {
    /// Makes `command` start its child as the root of a tree of its own;
    /// on Linux the child gets `death` when the spawning thread exits.
    pub(crate) fn prepare(command: &mut Command, death: Signal) {
        #[cfg(unix)]
        {
            command.process_group(0);
            crate::sys::set_parent_death_signal(command, death);
        }
        #[cfg(windows)]
        {
            let _ = death;
            command.creation_flags(crate::sys::CHILD_CREATION_FLAGS);
        }
    }

    /// The tree of `child`, just spawned from a command [`ProcessTree::prepare`]d.
    /// On Windows a child that cannot be put in a job is ended and this fails.
    pub(crate) fn adopt(child: &Child) -> io::Result<ProcessTree> {
        let pid = child
            .id()
            .ok_or_else(|| io::Error::other("the child has already been reaped"))?;
        #[cfg(unix)]
        {
            let pgid = crate::sys::pid(pid).ok_or_else(|| io::Error::other("pid out of range"))?;
            guardian::watch(pgid);
            Ok(ProcessTree { pgid })
        }
        #[cfg(windows)]
        {
            let handle = child
                .raw_handle()
                .ok_or_else(|| io::Error::other("the child has no handle"))?;
            let job = crate::sys::Job::adopt_suspended(handle, pid)?;
            Ok(ProcessTree { job })
        }
    }

    /// Signals the whole tree while its leader is unreaped (its id is then
    /// still ours); a tree already gone is not an error.
    pub(crate) fn signal(&self, signal: Signal) {
        #[cfg(unix)]
        send_group_signal(self.pgid, signal);
        #[cfg(windows)]
        {
            let _ = signal;
            self.job.terminate();
        }
    }

    /// The leader was reaped: end what it left, once, and stop listing the
    /// group (a process group id stays reserved while any member lives, so
    /// the signal reaches exactly the stragglers).
    pub(crate) fn leader_reaped(&self) {
        self.signal(Signal::Kill);
        self.forget();
    }

    /// The tree's owner is going away with the leader unreaped: kill it all.
    pub(crate) fn kill_and_forget(&self) {
        self.signal(Signal::Kill);
        self.forget();
    }

    fn forget(&self) {
        #[cfg(unix)]
        guardian::unwatch(self.pgid);
    }
}

/// Signals a process group; a group already gone is not an error.
#[cfg(unix)]
pub(crate) fn send_group_signal(pgid: crate::sys::Pid, signal: Signal) {
    if let Err(error) = crate::sys::kill_group(pgid, signal) {
        if !crate::sys::is_no_such_process(&error) {
            tracing::debug!(pgid, ?signal, %error, "killpg failed");
        }
    }
}
