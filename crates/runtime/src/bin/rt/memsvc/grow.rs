//! Growth granted by the supervisor (`coreplane-exec --memory-grow SIZE`): a pool that has reached
//! its budget asks coreplane-exec, which outlives the program and holds the run's allowance, for
//! more before it answers ENOMEM. Each process has one SOCK_SEQPACKET connection to the
//! supervisor's abstract socket "coreplane-grow-PID" (the supervisor checks SO_PEERCRED: its
//! user, a process of its run), made at its first request (a forked child makes its own). A
//! request is the pages wanted, the answer the pages granted (u64 each, 0: refused); no answer
//! within a second is a refusal. Pages given back are sent as their negation (i64), unanswered.
//! Grants belong to the connection: the supervisor takes back what a connection still holds
//! when it closes (the process ended or exec'd, or the connection was lost), so a process's
//! budget is its own plus what its current connection holds (`granted`), and a forked child,
//! whose connection is not its parent's, starts with none of its parent's grants. Asked under
//! the pool's lock, so that one thread's request and answer never cross another's.

use crate::sys::*;
use core::sync::atomic::{AtomicIsize, AtomicU32, AtomicUsize, Ordering::*};

const SETSOCKOPT: usize = 54;
const SOCK_SEQPACKET: usize = 5;
const SO_RCVTIMEO: usize = 20;

/// The supervisor's pid (0: no growth).
static SUPERVISOR: AtomicU32 = AtomicU32::new(0);
/// This process's connection (-1: not made yet) and its identity (st_dev, st_ino), checked
/// before each use: the program may have closed the descriptor or put a file of its own under
/// its number, which must never receive a request.
static CONN: AtomicIsize = AtomicIsize::new(-1);
static mut CONN_ID: (u64, u64) = (0, 0);
/// Pages granted on this process's connection and not given back.
static GRANTED: AtomicUsize = AtomicUsize::new(0);

/// At process start: the pool may grow by asking the supervisor `pid` (0: it may not).
pub fn configure(pid: u32) {
    SUPERVISOR.store(pid, Relaxed);
}

/// In a forked child: the parent's connection, and the grants on it, are the parent's.
pub fn child_after_fork() {
    let fd = CONN.swap(-1, Relaxed);
    if fd >= 0 {
        unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
    }
    GRANTED.store(0, Relaxed);
}

/// Pages this process holds by the supervisor's grants.
pub fn granted() -> usize {
    GRANTED.load(Relaxed)
}

/// The connection, unless the program closed it or put a file of its own under its number:
/// then it is gone (the supervisor took its grants back when it closed).
fn current() -> Option<isize> {
    let fd = CONN.load(Relaxed);
    if fd >= 0 && super::scrub::identity(fd) == Some(unsafe { CONN_ID }) {
        return Some(fd);
    }
    CONN.store(-1, Relaxed);
    GRANTED.store(0, Relaxed);
    None
}

/// The connection is dropped (an answer that did not come could be read as the next one's);
/// the supervisor takes back its grants, a late one included.
fn drop_connection(fd: isize) {
    unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
    CONN.store(-1, Relaxed);
    GRANTED.store(0, Relaxed);
}

/// Returns `pages` of the grants to the supervisor's allowance.
pub fn give_back(pages: usize) {
    let Some(fd) = current() else { return };
    let message = (-(pages.min(granted()) as i64)).to_le_bytes();
    if unsafe { syscall3(WRITE, fd as usize, message.as_ptr() as usize, 8) } == 8 {
        GRANTED.fetch_sub(pages.min(granted()), Relaxed);
    } else {
        drop_connection(fd);
    }
}

/// Connects to the supervisor, out of the way of the program's descriptor numbers.
fn connect(pid: u32) -> isize {
    let mut path = [0u8; 48];
    let fd = crate::own_fds::unix_connect(SOCK_SEQPACKET, crate::own_fds::abstract_name(b"coreplane-grow-", pid, &mut path));
    let timeout: [i64; 2] = [1, 0]; // struct timeval: 1 s
    if fd >= 0
        && unsafe { syscall6(SETSOCKOPT, fd as usize, SOL_SOCKET, SO_RCVTIMEO, timeout.as_ptr() as usize, 16, 0) } != 0
    {
        unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
        return -1;
    }
    fd
}

/// Asks the supervisor for `pages` more (added to `granted`; none when refused, or without a
/// supervisor).
pub fn ask(pages: usize) {
    let pid = SUPERVISOR.load(Relaxed);
    if pid == 0 {
        return;
    }
    let fd = match current() {
        Some(fd) => fd,
        None => {
            let fd = connect(pid);
            let Some(id) = (fd >= 0).then(|| super::scrub::identity(fd)).flatten() else { return };
            unsafe { CONN_ID = id };
            CONN.store(fd, Relaxed);
            fd
        }
    };
    let request = (pages as u64).to_le_bytes();
    let mut answer = [0u8; 8];
    let sent = unsafe { syscall3(WRITE, fd as usize, request.as_ptr() as usize, 8) } == 8;
    let mut got = if sent { unsafe { syscall3(READ, fd as usize, answer.as_mut_ptr() as usize, 8) } } else { -1 };
    // A handled signal ends a read with a time-out (SO_RCVTIMEO) in EINTR even under SA_RESTART:
    // the answer is still coming, and the grant is already out of the allowance.
    while got == -EINTR {
        got = unsafe { syscall3(READ, fd as usize, answer.as_mut_ptr() as usize, 8) };
    }
    if got != 8 {
        // A late answer would be read as the next request's: the connection goes (remade next time).
        drop_connection(fd);
        return;
    }
    GRANTED.fetch_add(u64::from_le_bytes(answer) as usize, Relaxed);
}
