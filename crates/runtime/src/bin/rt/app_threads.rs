//! The program's threads, counted apart from the delegates, which the kernel counts as threads
//! of the process too: the last program thread's exit(2) must end the process, and calls the
//! kernel allows only in a single-threaded process must see the program's threads alone.

use crate::sys::{CLONE_THREAD, CLONE_VFORK, CLONE_VM};
use crate::thread::Thread;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering::*};

/// The process whose threads are counted (a process sharing this memory without being a thread
/// of it, as posix_spawn's child, has its own pid and is not counted).
static PID: AtomicI32 = AtomicI32::new(0);
static COUNT: AtomicU32 = AtomicU32::new(0);
/// Whether a process that runs in this memory alongside it was ever made (clone with CLONE_VM,
/// without CLONE_THREAD or CLONE_VFORK): it may unmap the program's memory at any time.
static SHARED: AtomicBool = AtomicBool::new(false);

/// A process starts (the program's start, an execve, a fork) with the one thread `t`.
pub fn start(t: &Thread) {
    PID.store(t.pid, Relaxed);
    COUNT.store(1, Relaxed);
    SHARED.store(false, Relaxed);
}

/// `t` is about to clone with `flags`: a new thread of the counted process is counted before
/// it exists, so that its creator's exit cannot look like the last. Returns whether it was.
pub fn before_clone(t: &Thread, flags: u64) -> bool {
    let counted = flags & CLONE_THREAD != 0 && PID.load(Relaxed) == t.pid;
    if flags & (CLONE_VM | CLONE_THREAD | CLONE_VFORK) == CLONE_VM {
        SHARED.store(true, Release);
    }
    if counted {
        COUNT.fetch_add(1, AcqRel);
    }
    counted
}

/// The clone that `before_clone` counted failed.
pub fn clone_failed() {
    COUNT.fetch_sub(1, AcqRel);
}

/// A thread of process `pid` calls exit(2), or ended otherwise: whether it is the counted
/// process's last program thread.
pub fn exiting(pid: i32) -> bool {
    PID.load(Relaxed) == pid && COUNT.fetch_sub(1, AcqRel) == 1
}

/// Whether `t` belongs to the process whose memory this is: not to a process started in it
/// without being a thread of it (posix_spawn's child, until it execs).
pub fn owns_memory(t: &Thread) -> bool {
    PID.load(Relaxed) == t.pid
}

/// The program threads of process `pid`; None where it is not the counted process.
pub fn count(pid: i32) -> Option<u32> {
    (PID.load(Relaxed) == pid).then(|| COUNT.load(Acquire))
}

/// Whether `t` is the only program thread of its process.
pub fn alone(t: &Thread) -> bool {
    PID.load(Relaxed) == t.pid && COUNT.load(Acquire) == 1
}

/// Whether nothing but `t` itself can change its memory's mappings now: it is the only program
/// thread and no other process shares the memory.
pub fn memory_private(t: &Thread) -> bool {
    alone(t) && !SHARED.load(Acquire)
}
