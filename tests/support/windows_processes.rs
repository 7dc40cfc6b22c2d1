//! Process checks on Windows, where there is no /proc: liveness from the exit
//! code `OpenProcess` finds, the process tree from a ToolHelp snapshot, job
//! membership from `IsProcessInJob`. The fault tests' "nothing is left" checks
//! under wine use these where Linux reads /proc ([`super::procfs`], whose
//! `process_alive` is [`process_alive`] here on Windows).

use windows_sys::Win32::Foundation::{CloseHandle, INVALID_HANDLE_VALUE, STILL_ACTIVE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Process32FirstW, Process32NextW, PROCESSENTRY32W, TH32CS_SNAPPROCESS,
};
use windows_sys::Win32::System::JobObjects::IsProcessInJob;
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, TerminateProcess, PROCESS_QUERY_INFORMATION,
    PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_TERMINATE,
};

/// Whether `pid` is a live process: it can be opened and has no exit code yet.
pub fn process_alive(pid: u32) -> bool {
    // SAFETY: OpenProcess takes plain values; the handle is checked, used for
    // one query and closed.
    unsafe {
        let handle = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if handle.is_null() {
            return false;
        }
        let mut code = 0u32;
        let ok = GetExitCodeProcess(handle, &mut code) != 0;
        CloseHandle(handle);
        ok && code == STILL_ACTIVE as u32
    }
}

/// Whether `pid` runs inside a Job Object (what stands for a process group).
pub fn in_a_job(pid: u32) -> bool {
    // Full query access: wine 8.0 answers "in no job" with the limited kind.
    // SAFETY: as in `process_alive`; a null job handle asks about any job.
    unsafe {
        let handle = OpenProcess(PROCESS_QUERY_INFORMATION, 0, pid);
        if handle.is_null() {
            return false;
        }
        let mut inside = 0;
        let ok = IsProcessInJob(handle, std::ptr::null_mut(), &mut inside) != 0;
        CloseHandle(handle);
        ok && inside != 0
    }
}

/// Ends `pid` at once (a test's clean-up of what should not have survived).
pub fn kill(pid: u32) {
    // SAFETY: plain values; the handle is checked, used once and closed.
    unsafe {
        let handle = OpenProcess(PROCESS_TERMINATE, 0, pid);
        if !handle.is_null() {
            TerminateProcess(handle, 9);
            CloseHandle(handle);
        }
    }
}

/// Every process now: (pid, parent pid, executable file name).
fn snapshot() -> Vec<(u32, u32, String)> {
    let mut processes = Vec::new();
    // SAFETY: the snapshot handle is checked and closed; `entry` is a plain
    // struct whose size field is set before the first call, as required.
    unsafe {
        let snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
        if snap == INVALID_HANDLE_VALUE {
            return processes;
        }
        let mut entry: PROCESSENTRY32W = std::mem::zeroed();
        entry.dwSize = std::mem::size_of::<PROCESSENTRY32W>() as u32;
        let mut more = Process32FirstW(snap, &mut entry) != 0;
        while more {
            let len = entry
                .szExeFile
                .iter()
                .position(|&c| c == 0)
                .unwrap_or(entry.szExeFile.len());
            let name = String::from_utf16_lossy(&entry.szExeFile[..len]);
            processes.push((entry.th32ProcessID, entry.th32ParentProcessID, name));
            more = Process32NextW(snap, &mut entry) != 0;
        }
        CloseHandle(snap);
    }
    processes
}

/// Live descendants of `pid` whose executable is named `program` (case
/// ignored, as Windows does), at any depth.
pub fn descendants_named(pid: u32, program: &str) -> Vec<u32> {
    let processes = snapshot();
    let mut found = Vec::new();
    // A parent id can name a newer process than the one that started a child
    // (ids are reused once a process is gone): each pid is visited once, so
    // such a loop cannot go round.
    let mut seen = std::collections::HashSet::from([pid]);
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for (child, ppid, name) in &processes {
            if *ppid == parent && seen.insert(*child) {
                if name.eq_ignore_ascii_case(program) && process_alive(*child) {
                    found.push(*child);
                }
                parents.push(*child);
            }
        }
    }
    found
}
