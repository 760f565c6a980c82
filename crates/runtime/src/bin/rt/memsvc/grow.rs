//! Growth granted by the supervisor (`coreplane-exec --memory-grow SIZE`): a pool that has reached
//! its budget asks coreplane-exec, which outlives the program and holds the run's allowance, for
//! more before it answers ENOMEM. Each process has one SOCK_SEQPACKET connection to the
//! supervisor's abstract socket "coreplane-grow-PID" (the supervisor checks SO_PEERCRED: its
//! user, a process of its run), made at its first request (a forked child makes its own). A
//! request is the pages wanted, the answer the pages granted (u64 each, 0: refused); no answer
//! within a second is a refusal. Asked under the pool's lock, so that one thread's request and
//! answer never cross another's.

use crate::sys::*;
use core::sync::atomic::{AtomicIsize, AtomicU32, Ordering::*};

const SOCKET: usize = 41;
const CONNECT: usize = 42;
const SETSOCKOPT: usize = 54;
const AF_UNIX: usize = 1;
const SOCK_SEQPACKET: usize = 5;
const SOCK_CLOEXEC: usize = 0o2000000;
const SOL_SOCKET: usize = 1;
const SO_RCVTIMEO: usize = 20;

/// The supervisor's pid (0: no growth).
static SUPERVISOR: AtomicU32 = AtomicU32::new(0);
/// This process's connection (-1: not made yet) and its identity (st_dev, st_ino), checked
/// before each use: the program may have closed the descriptor or put a file of its own under
/// its number, which must never receive a request.
static CONN: AtomicIsize = AtomicIsize::new(-1);
static mut CONN_ID: (u64, u64) = (0, 0);

/// At process start: the pool may grow by asking the supervisor `pid` (0: it may not).
pub fn configure(pid: u32) {
    SUPERVISOR.store(pid, Relaxed);
}

/// In a forked child: the parent's connection is the parent's.
pub fn child_after_fork() {
    let fd = CONN.swap(-1, Relaxed);
    if fd >= 0 {
        unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
    }
}

/// Connects to the supervisor, out of the way of the program's descriptor numbers.
fn connect(pid: u32) -> isize {
    let fd = unsafe { syscall3(SOCKET, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return -1;
    }
    // struct sockaddr_un: the family, then "\0coreplane-grow-PID" (abstract: no file to leave).
    let mut addr = [0u8; 110];
    addr[0] = AF_UNIX as u8;
    let mut len = 3;
    for &c in b"coreplane-grow-" {
        addr[len] = c;
        len += 1;
    }
    let mut digits = [0u8; 10];
    let (mut n, mut k) = (pid, 0);
    loop {
        digits[k] = b'0' + (n % 10) as u8;
        k += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in (0..k).rev() {
        addr[len] = digits[i];
        len += 1;
    }
    let timeout: [i64; 2] = [1, 0]; // struct timeval: 1 s
    let ok = unsafe {
        syscall3(CONNECT, fd as usize, addr.as_ptr() as usize, len) == 0
            && syscall6(SETSOCKOPT, fd as usize, SOL_SOCKET, SO_RCVTIMEO, timeout.as_ptr() as usize, 16, 0) == 0
    };
    if !ok {
        unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
        return -1;
    }
    super::out_of_the_way(fd)
}

/// Asks the supervisor for `pages` more; the pages granted (0: refused, or no supervisor).
pub fn ask(pages: usize) -> usize {
    let pid = SUPERVISOR.load(Relaxed);
    if pid == 0 {
        return 0;
    }
    let mut fd = CONN.load(Relaxed);
    if fd < 0 || super::scrub::identity(fd) != Some(unsafe { CONN_ID }) {
        fd = connect(pid);
        let Some(id) = (fd >= 0).then(|| super::scrub::identity(fd)).flatten() else { return 0 };
        unsafe { CONN_ID = id };
        CONN.store(fd, Relaxed);
    }
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
        unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
        CONN.store(-1, Relaxed);
        return 0;
    }
    u64::from_le_bytes(answer) as usize
}
