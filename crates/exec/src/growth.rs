//! Growth granted by the supervisor (`--memory-grow SIZE`): coreplane-exec, which outlives the
//! program, holds the run's allowance and grants pool pages to its processes as their pools reach
//! their budgets (the runtime's side: crates/runtime/src/bin/rt/memsvc/grow.rs). It listens on
//! the abstract Unix socket "coreplane-grow-PID" (SOCK_SEQPACKET; abstract: nothing left behind)
//! from before the program starts, and answers each process's requests on a thread of its own:
//! a request is the pages wanted (u64, little-endian), the answer the pages granted (0:
//! refused); a negative word (i64) gives pages back, unanswered. What a connection was granted
//! and did not give back returns to the allowance when it closes (the process ended, exec'd, or
//! dropped it). A process is served only if SO_PEERCRED says it is this user's and a descendant
//! of this process; a grant never takes the allowance below zero, nor the machine's
//! MemAvailable below a sixteenth of its memory.

use std::sync::{Arc, Mutex};

const PAGE: u64 = 4096;

/// `--memory-grow`: 0 (no growth) or a size.
pub fn parse_allowance(text: &str) -> Result<u64, String> {
    if text.trim() == "0" {
        Ok(0)
    } else {
        crate::memory::parse_size(text)
    }
}

/// The listening socket, made before the program starts (connections wait in its backlog).
pub struct Growth {
    fd: i32,
}

/// Listens for the run's requests.
pub fn listen() -> Result<Growth, String> {
    let name = format!("coreplane-grow-{}", std::process::id());
    let fd = crate::abstract_socket::bind(libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, &name)
        .map_err(|e| format!("--memory-grow: cannot listen on @{name}: {e}"))?;
    if unsafe { libc::listen(fd, 64) } != 0 {
        let e = std::io::Error::last_os_error();
        unsafe { libc::close(fd) };
        return Err(format!("--memory-grow: cannot listen on @{name}: {e}"));
    }
    Ok(Growth { fd })
}

impl Growth {
    /// Serves the run's processes from now on, on threads of this process, with an allowance
    /// of `bytes`.
    pub fn serve(self, bytes: u64) {
        let allowance = Arc::new(Mutex::new(bytes / PAGE));
        std::thread::spawn(move || loop {
            let conn = unsafe { libc::accept4(self.fd, std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC) };
            if conn < 0 {
                // EMFILE and the like persist: wait a little rather than spin on a CPU.
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
            if !ours(conn) {
                unsafe { libc::close(conn) };
                continue;
            }
            let allowance = Arc::clone(&allowance);
            std::thread::spawn(move || answer(conn, &allowance));
        });
    }
}

/// Whether the peer of `conn` is this user's process and one of this process's descendants.
fn ours(conn: i32) -> bool {
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    let got = unsafe {
        libc::getsockopt(conn, libc::SOL_SOCKET, libc::SO_PEERCRED, &mut cred as *mut libc::ucred as *mut libc::c_void, &mut len)
    };
    if got != 0 || cred.uid != unsafe { libc::getuid() } {
        return false;
    }
    let me = std::process::id() as i32;
    let mut pid = cred.pid;
    for _ in 0..64 {
        if pid == me {
            return true;
        }
        match parent(pid) {
            Some(p) if p > 1 => pid = p,
            _ => return false,
        }
    }
    false
}

/// The parent of `pid` (field 4 of /proc/PID/stat, after the command's closing parenthesis).
fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].split_whitespace().nth(1)?.parse().ok()
}

/// Answers one process's requests until it goes, then takes back what it still holds.
fn answer(conn: i32, allowance: &Mutex<u64>) {
    let mut request = [0u8; 8];
    let mut holds = 0u64;
    while unsafe { libc::read(conn, request.as_mut_ptr() as *mut libc::c_void, 8) } == 8 {
        let word = i64::from_le_bytes(request);
        if word < 0 {
            let back = word.unsigned_abs().min(holds);
            holds -= back;
            *allowance.lock().unwrap() += back;
            continue;
        }
        let granted = {
            let mut left = allowance.lock().unwrap();
            let granted = (word as u64).min(*left).min(spare_pages());
            *left -= granted;
            granted
        };
        holds += granted;
        if unsafe { libc::write(conn, granted.to_le_bytes().as_ptr() as *const libc::c_void, 8) } != 8 {
            break;
        }
    }
    *allowance.lock().unwrap() += holds;
    unsafe { libc::close(conn) };
}

/// Pages the machine can spare: MemAvailable above a sixteenth of MemTotal.
fn spare_pages() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kib = |key: &str| {
        text.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    match (kib("MemAvailable:"), kib("MemTotal:")) {
        (Some(avail), Some(total)) => (avail.saturating_sub(total / 16)) * 1024 / PAGE,
        _ => 0,
    }
}
