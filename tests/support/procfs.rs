//! Process checks read from /proc, for tests that must prove no process is left behind.
//! [`process_alive`] and the waits built on it ([`alive_among`],
//! [`wait_until_gone`]) work on Windows too, through [`super::windows_processes`].

use std::time::{Duration, Instant};

/// How often a wait re-reads /proc.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Whether `pid` is a live process. A zombie counts as dead: a reparented child
/// may wait for a container's init to reap it. On Windows: the exit code
/// `OpenProcess` finds.
pub fn process_alive(pid: u32) -> bool {
    #[cfg(windows)]
    return super::windows_processes::process_alive(pid);
    #[cfg(not(windows))]
    {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // The state is the first field after the parenthesised command name.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        !matches!(state, Some('Z' | 'X') | None)
    }
}

/// Process group of `pid`.
pub fn process_group(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    // Fields after the name: state, ppid, pgrp.
    rest.split_ascii_whitespace().nth(2)?.parse().ok()
}

/// Every pid on the machine.
pub fn all_pids() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .collect()
}

/// Live processes in process group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|pid| process_group(*pid) == Some(pgid) && process_alive(*pid))
        .collect()
}

/// The processes among `pids` that are still alive.
pub fn alive_among(pids: &[u32]) -> Vec<u32> {
    pids.iter().copied().filter(|p| process_alive(*p)).collect()
}

/// Polls until none of `pids` is alive or `timeout` passes; returns the survivors.
pub async fn wait_until_gone(pids: &[u32], timeout: Duration) -> Vec<u32> {
    let deadline = Instant::now() + timeout;
    loop {
        let alive = alive_among(pids);
        if alive.is_empty() || Instant::now() >= deadline {
            return alive;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// The parent of `pid`.
pub fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// The live processes below `pid` (children, their children, …).
pub fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = all_pids()
        .into_iter()
        .filter_map(|p| Some((p, parent(p)?)))
        .collect();
    let mut found = Vec::new();
    let mut next = vec![pid];
    while let Some(at) = next.pop() {
        for (child, _) in parents.iter().filter(|(_, of)| *of == at) {
            if process_alive(*child) && !found.contains(child) {
                found.push(*child);
                next.push(*child);
            }
        }
    }
    found
}

/// The program `pid` runs (the first word of its command line).
pub fn program(pid: u32) -> Option<String> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let first = cmdline.split(|b| *b == 0).next()?;
    Some(String::from_utf8_lossy(first).into_owned())
}

/// Live processes whose working directory is `root` or below it.
pub fn processes_in(root: &std::path::Path) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(root))
        })
        .filter(|pid| process_alive(*pid))
        .collect()
}

/// Live processes whose environment holds `NAME=value` exactly (every
/// instance of one test's fake server, when each test logs to its own file).
pub fn processes_with_env(name: &str, value: &str) -> Vec<u32> {
    let wanted = format!("{name}={value}").into_bytes();
    all_pids()
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == wanted.as_slice()))
        })
        .filter(|pid| process_alive(*pid))
        .collect()
}
