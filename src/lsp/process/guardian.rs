//! The orphan guardian (Unix): the last line of defence against orphans
//! when this process dies without cleaning up (`kill -9`, a crash). The
//! parent-death signal ends each server leader (Linux only), but nothing
//! would end the helpers a server forked into its group (a grandchild with
//! no pipe to its dead parent lives on forever), nor, on macOS, the leader.
//!
//! One `sh` child per process, in its own process group so that our signals
//! never reach it (and ignoring SIGHUP, SIGINT and SIGTERM: a client that
//! signals the whole tree on exit must not end it before the proxy), reads
//! `+PGID` / `-PGID` lines on its stdin. When its stdin ends (this process
//! is gone, however it ended: the write end is ours alone, opened
//! close-on-exec; or [`stop`] closed it) it `SIGKILL`s every group still
//! listed and exits. A group leaves the list as soon as its leader is
//! reaped (after the sweep in `on_reaped`) or its owner is dropped, so a
//! group id is only ever signalled while it is still ours. Without
//! `/bin/sh` the guardian is skipped (logged).
//!
//! At a normal end, [`stop`] closes its stdin and reaps it (at most
//! [`GUARDIAN_EXIT_WAIT`]), so it is never left to exit after us as a
//! zombie of whoever inherits it.

use crate::sys::Pid;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How long [`stop`] waits for the guardian to exit once its stdin is
/// closed (it kills what is still listed, then exits at once).
pub(crate) const GUARDIAN_EXIT_WAIT: Duration = Duration::from_secs(2);

const SCRIPT: &str = r#"trap '' HUP INT TERM
groups=' '
while IFS= read -r line; do
  case "$line" in
    +*) groups="$groups${line#+} " ;;
    -*) kept=' '
        for g in $groups; do [ "$g" = "${line#-}" ] || kept="$kept$g "; done
        groups=$kept ;;
  esac
done
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
"#;

enum State {
    /// Not needed yet: started by the first `watch`.
    NotStarted,
    Running {
        stdin: ChildStdin,
        child: Child,
    },
    /// Could not start, stopped listening, or stopped: never started again.
    Gone,
}

static GUARDIAN: Mutex<State> = Mutex::new(State::NotStarted);

pub(crate) fn watch(pgid: Pid) {
    send(&format!("+{pgid}\n"));
}

pub(crate) fn unwatch(pgid: Pid) {
    send(&format!("-{pgid}\n"));
}

fn send(line: &str) {
    let mut state = GUARDIAN.lock().unwrap_or_else(PoisonError::into_inner);
    if matches!(*state, State::NotStarted) {
        *state = spawn();
    }
    let State::Running { stdin, .. } = &mut *state else {
        return;
    };
    // Non-blocking (set at spawn): a stuck guardian must not stall us.
    if let Err(error) = stdin.write_all(line.as_bytes()) {
        tracing::warn!(%error, "the orphan guardian stopped listening; helpers of servers may outlive a killed proxy");
        if let State::Running { child, .. } = std::mem::replace(&mut *state, State::Gone) {
            reap_in_background(child);
        }
    }
}

/// Closes the guardian's stdin (it kills what is still listed, then exits)
/// and reaps it, waiting at most [`GUARDIAN_EXIT_WAIT`]. Later `watch`es
/// start no new one.
pub(crate) fn stop() {
    let state = std::mem::replace(
        &mut *GUARDIAN.lock().unwrap_or_else(PoisonError::into_inner),
        State::Gone,
    );
    let State::Running { stdin, mut child } = state else {
        return;
    };
    drop(stdin);
    let (reaped, exited) = std::sync::mpsc::channel();
    let waiter = std::thread::Builder::new()
        .name("guardian-reaper".into())
        .spawn(move || {
            let _ = reaped.send(child.wait());
        });
    if waiter.is_err() {
        return;
    }
    match exited.recv_timeout(GUARDIAN_EXIT_WAIT) {
        Ok(Ok(status)) => tracing::debug!(%status, "the orphan guardian exited"),
        Ok(Err(error)) => tracing::debug!(%error, "cannot reap the orphan guardian"),
        Err(_) => tracing::warn!("the orphan guardian did not exit in time"),
    }
}

/// A guardian that stopped listening is reaped by a thread whenever it exits.
fn reap_in_background(mut child: Child) {
    let _ = std::thread::Builder::new()
        .name("guardian-reaper".into())
        .spawn(move || {
            let _ = child.wait();
        });
}

fn spawn() -> State {
    let spawned = Command::new("/bin/sh")
        .arg("-c")
        .arg(SCRIPT)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir("/")
        .stdin(Stdio::piped())
        // Never the protocol pipes: the editor must see our stdout close.
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => {
            tracing::warn!(%error, "cannot start the orphan guardian (/bin/sh); helpers of servers may outlive a killed proxy");
            return State::Gone;
        }
    };
    let Some(stdin) = child.stdin.take() else {
        reap_in_background(child);
        return State::Gone;
    };
    if !crate::sys::set_nonblocking(stdin.as_raw_fd()) {
        tracing::warn!("cannot make the orphan guardian's pipe non-blocking; not using it");
        drop(stdin);
        reap_in_background(child);
        return State::Gone;
    }
    State::Running { stdin, child }
}
