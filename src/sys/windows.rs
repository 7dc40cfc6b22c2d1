//! The Windows calls (`windows_sys`), behind safe wrappers: Job Objects for
//! a child's whole tree (killed when acp-lsp closes the job, however acp-lsp
//! ends), starting a child suspended and resuming it once it is in its job,
//! processes by id, an exclusive file lock, where an open file really is, a
//! process's working set, and the security of the named pipes
//! (`super::local_socket`): a DACL granting this user alone, and a check
//! that the process serving a pipe is this user's.

use super::Signal;
use std::ffi::c_void;
use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle, RawHandle};
use std::path::PathBuf;
use windows_sys::Win32::Foundation::{
    LocalFree, ERROR_INVALID_PARAMETER, HANDLE, INVALID_HANDLE_VALUE, STILL_ACTIVE,
};
use windows_sys::Win32::Security::{
    EqualSid, GetTokenInformation, TokenUser, PSECURITY_DESCRIPTOR, SECURITY_ATTRIBUTES,
    TOKEN_QUERY, TOKEN_USER,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, IsProcessInJob, JobObjectExtendedLimitInformation,
    QueryInformationJobObject, SetInformationJobObject, TerminateJobObject,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_BREAKAWAY_OK,
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, GetExitCodeProcess, OpenProcess, OpenProcessToken, OpenThread, ResumeThread,
    TerminateProcess, CREATE_BREAKAWAY_FROM_JOB, CREATE_NEW_PROCESS_GROUP, CREATE_NO_WINDOW,
    CREATE_SUSPENDED, DETACHED_PROCESS, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_TERMINATE,
    THREAD_SUSPEND_RESUME,
};

/// A process id.
pub type Pid = u32;

/// The exit code of a process ended by acp-lsp (`TerminateProcess`,
/// `TerminateJobObject`): 0xC000013A, `STATUS_CONTROL_C_EXIT`, what a
/// console process ended by Ctrl-C reports.
const KILLED_EXIT_CODE: u32 = 0xC000_013A;

/// How a child is created: without a console window of its own (a language
/// server started by an editor that has none would open one), and
/// suspended, so that it is in its job before it runs a single instruction
/// (see [`Job::adopt_suspended`]).
pub(crate) const CHILD_CREATION_FLAGS: u32 = CREATE_NO_WINDOW | CREATE_SUSPENDED;

/// For a short-lived child that needs no tree of its own (a start check):
/// no console window.
pub(crate) const NO_WINDOW: u32 = CREATE_NO_WINDOW;

/// A pid as a [`Pid`].
pub fn pid(pid: u32) -> Option<Pid> {
    Some(pid)
}

/// Whether an error says the process does not exist (`OpenProcess` answers
/// `ERROR_INVALID_PARAMETER` for a pid nobody has).
pub(crate) fn is_no_such_process(error: &io::Error) -> bool {
    error.raw_os_error() == Some(ERROR_INVALID_PARAMETER as i32)
}

/// A process opened by id with `access`.
fn open_process(pid: Pid, access: u32) -> io::Result<OwnedHandle> {
    // SAFETY: OpenProcess takes plain values and returns a new handle or null.
    let raw = unsafe { OpenProcess(access, 0, pid) };
    if raw.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a handle OpenProcess just returned, owned by nothing else.
    Ok(unsafe { OwnedHandle::from_raw_handle(raw) })
}

/// Ends process `pid` (`TerminateProcess`; Windows has no gentler request
/// for a process without a console of ours, so both signals end it).
pub fn kill(pid: Pid, _signal: Signal) -> io::Result<()> {
    let process = open_process(pid, PROCESS_TERMINATE)?;
    // SAFETY: the handle is open with PROCESS_TERMINATE for the call.
    if unsafe { TerminateProcess(process.as_raw_handle(), KILLED_EXIT_CODE) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a process with this id runs (one of another user counts).
pub(crate) fn process_exists(pid: Pid) -> bool {
    let process = match open_process(pid, PROCESS_QUERY_LIMITED_INFORMATION) {
        Ok(process) => process,
        // Access denied: it exists, and is not ours.
        Err(error) => return !is_no_such_process(&error),
    };
    let mut code = 0u32;
    // SAFETY: the handle is open for the call; `code` is written.
    let ok = unsafe { GetExitCodeProcess(process.as_raw_handle(), &mut code) } != 0;
    // A process that exited with code 259 would read as running: a pid
    // kept longer, never a live one missed.
    !ok || code == STILL_ACTIVE as u32
}

/// A name for this user in file names: `USERNAME`, with anything but
/// letters, digits, `-` and `_` replaced (the directories it names are
/// under the user's own profile anyway).
pub(crate) fn user_tag() -> String {
    let name = std::env::var("USERNAME").unwrap_or_default();
    let tag: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if tag.is_empty() {
        "user".to_string()
    } else {
        tag
    }
}

/// Where the open `file` really is: its final, normalized name
/// (`GetFinalPathNameByHandleW`: links followed, short names expanded, the
/// stored case), without the `\\?\` it comes with.
pub(crate) fn real_path_of(file: &std::fs::File) -> Option<PathBuf> {
    use std::os::windows::ffi::OsStringExt;
    use windows_sys::Win32::Storage::FileSystem::{
        GetFinalPathNameByHandleW, FILE_NAME_NORMALIZED, VOLUME_NAME_DOS,
    };
    let mut buffer = vec![0u16; 1024];
    loop {
        // SAFETY: the handle is open for the call; the pointer and length
        // describe `buffer`, which the call writes at most that many units into.
        let n = unsafe {
            GetFinalPathNameByHandleW(
                file.as_raw_handle(),
                buffer.as_mut_ptr(),
                buffer.len() as u32,
                FILE_NAME_NORMALIZED | VOLUME_NAME_DOS,
            )
        } as usize;
        if n == 0 || n > 32 * 1024 {
            return None;
        }
        if n < buffer.len() {
            buffer.truncate(n);
            break;
        }
        buffer = vec![0u16; n];
    }
    let text = std::ffi::OsString::from_wide(&buffer).into_string().ok()?;
    if let Some(rest) = text.strip_prefix(r"\\?\UNC\") {
        return Some(PathBuf::from(format!(r"\\{rest}")));
    }
    let rest = text.strip_prefix(r"\\?\")?;
    let bytes = rest.as_bytes();
    (bytes.len() >= 3 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' && bytes[2] == b'\\')
        .then(|| PathBuf::from(rest))
}

/// The working set of process `pid` in bytes (`K32GetProcessMemoryInfo`).
pub(crate) fn resident_memory(pid: u32) -> Option<u64> {
    use windows_sys::Win32::System::ProcessStatus::{
        K32GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS,
    };
    let process = open_process(pid, PROCESS_QUERY_LIMITED_INFORMATION).ok()?;
    // SAFETY: plain integers; zeroed is a valid value.
    let mut counters: PROCESS_MEMORY_COUNTERS = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<PROCESS_MEMORY_COUNTERS>() as u32;
    counters.cb = size;
    // SAFETY: the pointer and size describe `counters`; the handle is open.
    let ok = unsafe { K32GetProcessMemoryInfo(process.as_raw_handle(), &mut counters, size) };
    (ok != 0).then_some(counters.WorkingSetSize as u64)
}

/// Makes the child `command` starts independent of this process: no
/// console (`DETACHED_PROCESS`), its own process group (no Ctrl-C of ours
/// reaches it), and out of the job this process is in when that job lets
/// children leave. A job that does not (an editor's that kills its tree on
/// close) keeps the shared daemon; it then ends with that job.
pub(crate) fn start_new_session(command: &mut std::process::Command) {
    use std::os::windows::process::CommandExt;
    let mut flags = DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP;
    if breakaway_allowed() {
        flags |= CREATE_BREAKAWAY_FROM_JOB;
    }
    command.creation_flags(flags);
}

/// Whether this process is in a job that lets children break away from it
/// (not in one: nothing to leave, and the flag would be refused).
fn breakaway_allowed() -> bool {
    let mut in_job = 0;
    // SAFETY: the pseudo handle of this process; a null job asks about any job.
    let asked = unsafe { IsProcessInJob(GetCurrentProcess(), std::ptr::null_mut(), &mut in_job) };
    if asked == 0 || in_job == 0 {
        return false;
    }
    // SAFETY: plain data; zeroed is a valid value.
    let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: a null job handle is this process's job; the pointer and size
    // describe `info`, which the call fills.
    let ok = unsafe {
        QueryInformationJobObject(
            std::ptr::null_mut(),
            JobObjectExtendedLimitInformation,
            (&mut info as *mut JOBOBJECT_EXTENDED_LIMIT_INFORMATION).cast(),
            std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            std::ptr::null_mut(),
        )
    };
    ok != 0 && info.BasicLimitInformation.LimitFlags & JOB_OBJECT_LIMIT_BREAKAWAY_OK != 0
}

/// Takes an exclusive lock on `file` without waiting (`LockFileEx`);
/// `false` if another handle holds it.
pub(crate) fn try_lock_exclusive(file: &std::fs::File) -> bool {
    use windows_sys::Win32::Storage::FileSystem::{
        LockFileEx, LOCKFILE_EXCLUSIVE_LOCK, LOCKFILE_FAIL_IMMEDIATELY,
    };
    use windows_sys::Win32::System::IO::OVERLAPPED;
    // SAFETY: plain data; zeroed is offset 0.
    let mut overlapped: OVERLAPPED = unsafe { std::mem::zeroed() };
    // SAFETY: the handle is open for the call; the lock covers the whole
    // file range and lives until the handle is closed.
    unsafe {
        LockFileEx(
            file.as_raw_handle(),
            LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY,
            0,
            u32::MAX,
            u32::MAX,
            &mut overlapped,
        ) != 0
    }
}

/// A Job Object holding one child and everything it starts. Closing it
/// (dropping this, or acp-lsp's end, however it ends: the kernel closes a
/// dead process's handles) kills every process still in it
/// (`JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`): Windows' process group and
/// orphan guardian in one.
#[derive(Debug)]
pub(crate) struct Job {
    handle: OwnedHandle,
}

impl Job {
    /// A new job that kills its processes when closed.
    pub(crate) fn new() -> io::Result<Job> {
        // SAFETY: no security attributes and no name: a fresh anonymous job.
        let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a handle CreateJobObjectW just returned, owned by nothing else.
        let handle = unsafe { OwnedHandle::from_raw_handle(raw) };
        // SAFETY: plain data; zeroed is "no limits".
        let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        // SAFETY: the pointer and size describe `info`, which the call reads.
        let ok = unsafe {
            SetInformationJobObject(
                handle.as_raw_handle(),
                JobObjectExtendedLimitInformation,
                (&info as *const JOBOBJECT_EXTENDED_LIMIT_INFORMATION).cast::<c_void>(),
                std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Job { handle })
    }

    /// Puts the child `process` (started with [`CHILD_CREATION_FLAGS`], so
    /// still suspended) into a new job, then lets it run. If it cannot be
    /// put in one, it is ended and the error returned: a child whose tree
    /// could outlive acp-lsp is not started.
    pub(crate) fn adopt_suspended(process: RawHandle, pid: Pid) -> io::Result<Job> {
        let adopted = Job::new().and_then(|job| {
            // SAFETY: both handles are open for the call.
            if unsafe { AssignProcessToJobObject(job.handle.as_raw_handle(), process) } == 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(job)
        });
        match adopted {
            Ok(job) => match resume_threads(pid) {
                Ok(()) => Ok(job),
                Err(error) => {
                    job.terminate();
                    Err(error)
                }
            },
            Err(error) => {
                // SAFETY: the handle is the child's, open for the call.
                unsafe { TerminateProcess(process, KILLED_EXIT_CODE) };
                Err(error)
            }
        }
    }

    /// Ends every process in the job now.
    pub(crate) fn terminate(&self) {
        // SAFETY: the job handle is open for the call.
        if unsafe { TerminateJobObject(self.handle.as_raw_handle(), KILLED_EXIT_CODE) } == 0 {
            tracing::debug!(error = %io::Error::last_os_error(), "TerminateJobObject failed");
        }
    }
}

/// Resumes every thread of the suspended process `pid` (one: its first).
fn resume_threads(pid: Pid) -> io::Result<()> {
    use windows_sys::Win32::System::Diagnostics::ToolHelp::{
        CreateToolhelp32Snapshot, Thread32First, Thread32Next, TH32CS_SNAPTHREAD, THREADENTRY32,
    };
    // SAFETY: a snapshot of every thread; the handle is checked below.
    let raw = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if raw == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a handle the call just returned, owned by nothing else.
    let snapshot = unsafe { OwnedHandle::from_raw_handle(raw) };
    // SAFETY: plain data; zeroed, then its size set as the API requires.
    let mut entry: THREADENTRY32 = unsafe { std::mem::zeroed() };
    entry.dwSize = std::mem::size_of::<THREADENTRY32>() as u32;
    let mut resumed = 0;
    // SAFETY: the snapshot is open and `entry` has its size set.
    let mut more = unsafe { Thread32First(snapshot.as_raw_handle(), &mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == pid {
            // SAFETY: plain values; a null handle is checked.
            let thread = unsafe { OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID) };
            if !thread.is_null() {
                // SAFETY: a handle OpenThread just returned, owned by nothing else.
                let thread = unsafe { OwnedHandle::from_raw_handle(thread) };
                // SAFETY: the thread handle is open with THREAD_SUSPEND_RESUME.
                if unsafe { ResumeThread(thread.as_raw_handle()) } != u32::MAX {
                    resumed += 1;
                }
            }
        }
        // SAFETY: as for Thread32First.
        more = unsafe { Thread32Next(snapshot.as_raw_handle(), &mut entry) } != 0;
    }
    if resumed == 0 {
        return Err(io::Error::other("the new process's thread was not found"));
    }
    Ok(())
}

/// This user's SID, as the process token says (`TOKEN_USER`, in a buffer
/// the SID points into).
struct UserSid {
    buffer: Vec<u64>,
}

impl UserSid {
    /// The user of `process` (a handle with query rights).
    fn of(process: HANDLE) -> io::Result<UserSid> {
        let mut token: HANDLE = std::ptr::null_mut();
        // SAFETY: the process handle is open for the call; `token` is written.
        if unsafe { OpenProcessToken(process, TOKEN_QUERY, &mut token) } == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a handle OpenProcessToken just returned, owned by nothing else.
        let token = unsafe { OwnedHandle::from_raw_handle(token) };
        // u64 words: aligned for TOKEN_USER; 256 bytes hold any SID.
        let mut buffer = vec![0u64; 32];
        let mut needed = 0u32;
        // SAFETY: the pointer and size describe `buffer`.
        let ok = unsafe {
            GetTokenInformation(
                token.as_raw_handle(),
                TokenUser,
                buffer.as_mut_ptr().cast(),
                (buffer.len() * 8) as u32,
                &mut needed,
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(UserSid { buffer })
    }

    /// This process's user.
    fn current() -> io::Result<UserSid> {
        // SAFETY: the pseudo handle of this process needs no closing.
        UserSid::of(unsafe { GetCurrentProcess() })
    }

    fn sid(&self) -> *mut c_void {
        // SAFETY: GetTokenInformation filled the buffer with a TOKEN_USER,
        // whose SID pointer points into the same buffer.
        unsafe { (*(self.buffer.as_ptr().cast::<TOKEN_USER>())).User.Sid }
    }

    fn equals(&self, other: &UserSid) -> bool {
        // SAFETY: both SIDs are valid for the life of their buffers.
        unsafe { EqualSid(self.sid(), other.sid()) != 0 }
    }

    /// The SID in its string form (`S-1-5-21-…`).
    fn to_text(&self) -> io::Result<String> {
        use windows_sys::Win32::Security::Authorization::ConvertSidToStringSidW;
        let mut text: *mut u16 = std::ptr::null_mut();
        // SAFETY: the SID is valid; the call allocates `text` (LocalFree).
        if unsafe { ConvertSidToStringSidW(self.sid(), &mut text) } == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `text` is a NUL-terminated wide string the call allocated.
        let owned = unsafe {
            let mut len = 0;
            while *text.add(len) != 0 {
                len += 1;
            }
            let slice = std::slice::from_raw_parts(text, len);
            let owned = String::from_utf16_lossy(slice);
            LocalFree(text.cast());
            owned
        };
        Ok(owned)
    }
}

/// The security attributes of a named pipe only this user may open: a
/// protected DACL with one entry, full access for the user's SID (not the
/// default, which lets everyone read). Holds the descriptor for as long as
/// the attributes are used.
pub(crate) struct PipeSecurity {
    descriptor: PSECURITY_DESCRIPTOR,
    attributes: SECURITY_ATTRIBUTES,
}

// SAFETY: the descriptor is a heap block no one else refers to; it is only
// read by CreateNamedPipeW and freed once, on drop.
unsafe impl Send for PipeSecurity {}
// SAFETY: as above; nothing mutates it through a shared reference.
unsafe impl Sync for PipeSecurity {}

impl PipeSecurity {
    /// For this process's user.
    pub(crate) fn for_this_user() -> io::Result<PipeSecurity> {
        use std::os::windows::ffi::OsStrExt;
        use windows_sys::Win32::Security::Authorization::{
            ConvertStringSecurityDescriptorToSecurityDescriptorW, SDDL_REVISION_1,
        };
        let sid = UserSid::current()?.to_text()?;
        let sddl: Vec<u16> = std::ffi::OsStr::new(&format!("D:P(A;;GA;;;{sid})"))
            .encode_wide()
            .chain([0])
            .collect();
        let mut descriptor: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
        // SAFETY: `sddl` is NUL-terminated; the call allocates `descriptor`
        // (freed on drop) and needs no size back.
        let ok = unsafe {
            ConvertStringSecurityDescriptorToSecurityDescriptorW(
                sddl.as_ptr(),
                SDDL_REVISION_1,
                &mut descriptor,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(PipeSecurity {
            descriptor,
            attributes: SECURITY_ATTRIBUTES {
                nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
                lpSecurityDescriptor: descriptor,
                bInheritHandle: 0,
            },
        })
    }

    /// The attributes, for `CreateNamedPipeW` (read only).
    pub(crate) fn attributes(&self) -> *mut c_void {
        (&self.attributes as *const SECURITY_ATTRIBUTES)
            .cast_mut()
            .cast()
    }
}

impl Drop for PipeSecurity {
    fn drop(&mut self) {
        // SAFETY: allocated by ConvertStringSecurityDescriptorToSecurityDescriptorW,
        // freed once.
        unsafe { LocalFree(self.descriptor) };
    }
}

/// Whether the process serving the named pipe `pipe` (a client's handle)
/// runs as this user: another user could have created the pipe's name
/// first and would read what the client sends. Fails closed: any error is
/// `false`.
pub(crate) fn pipe_served_by_this_user(pipe: RawHandle) -> bool {
    use windows_sys::Win32::System::Pipes::GetNamedPipeServerProcessId;
    let mut server = 0u32;
    // SAFETY: the pipe handle is open for the call; `server` is written.
    if unsafe { GetNamedPipeServerProcessId(pipe, &mut server) } == 0 {
        return false;
    }
    let Ok(process) = open_process(server, PROCESS_QUERY_LIMITED_INFORMATION) else {
        return false;
    };
    match (UserSid::of(process.as_raw_handle()), UserSid::current()) {
        (Ok(theirs), Ok(ours)) => theirs.equals(&ours),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_ends_its_suspended_child_and_what_it_started() {
        use std::os::windows::process::CommandExt;
        let mut child = std::process::Command::new("cmd.exe")
            .args(["/c", "ping -n 30 127.0.0.1 >NUL"])
            .creation_flags(CHILD_CREATION_FLAGS)
            .spawn()
            .unwrap();
        let job = Job::adopt_suspended(child.as_raw_handle(), child.id()).unwrap();
        assert!(process_exists(child.id()));
        job.terminate();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(KILLED_EXIT_CODE as i32));
        assert!(!process_exists(child.id()));
    }

    #[test]
    fn the_pipe_security_names_this_user() {
        let security = PipeSecurity::for_this_user().unwrap();
        assert!(!security.attributes().is_null());
        assert!(UserSid::current()
            .unwrap()
            .to_text()
            .unwrap()
            .starts_with("S-1-"));
    }

    #[test]
    fn an_exclusive_lock_is_refused_to_a_second_handle() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let a = std::fs::File::create(&path).unwrap();
        let b = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        assert!(try_lock_exclusive(&a));
        assert!(!try_lock_exclusive(&b));
        drop(a);
        assert!(try_lock_exclusive(&b));
    }
}
