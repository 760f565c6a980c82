//! The lock under which one thread at a time rewrites syscall sites (the sites, the trampoline
//! pages, `textmap`), and what fork does with it. Its own module so that the fast path and
//! fork (process) both use it without depending on each other.

use crate::owner_lock::OwnerLock;

/// Held by a thread's tid.
static LOCK: OwnerLock = OwnerLock::new();

fn me() -> u32 {
    crate::thread::current().tid as u32
}

/// Takes the lock for this thread; false if this thread holds it already (a program signal
/// handler that ran while the thread was rewriting, and trapped or forked itself).
pub fn lock() -> bool {
    LOCK.acquire(me())
}

/// Takes the lock only if no thread holds it: a site's rewrite can wait for its next trap,
/// where waiting here spun for as long as the holder (reading /proc/self/maps, ≈ 25 µs) was
/// preempted (up to 1.4 ms in a JVM's start at load 9).
pub fn try_lock() -> bool {
    LOCK.try_acquire(me())
}

pub fn unlock() {
    LOCK.release();
}

/// Around fork: no other thread may be half-way through a rewrite when the address space is
/// copied, and the child, whose only thread is the caller, must not inherit a lock held by a
/// thread it does not have (it then spun forever at its next new site: `stress_blocking`,
/// `fork_rewrite`). Returns whether the caller took the lock (it may hold it already).
pub fn before_fork() -> bool {
    lock()
}

/// After fork, in the parent (`taken` as before_fork said) and in the child (always released).
pub fn after_fork(taken: bool, child: bool) {
    if child {
        LOCK.reset();
    } else if taken {
        unlock();
    }
}
