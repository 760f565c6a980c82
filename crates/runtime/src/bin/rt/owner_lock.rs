//! The runtime's owner lock: a lock whose word holds its holder's id, so that a thread that finds
//! its own id there (a program signal handler that interrupted the runtime while it held the
//! lock) is refused instead of deadlocking. The memory pool's lock and the rewrite lock are
//! such locks. Waiters spin briefly, then sleep on the word: the holder may share the waiter's
//! CPU (the scrubber and the program), or be preempted (a rewrite reading /proc/self/maps),
//! where spinning would burn the time the holder needs.

use crate::sys;
use core::sync::atomic::{AtomicU32, Ordering::*};

/// Polls before a waiter sleeps (a few µs: these locks are held for bookkeeping only).
const SPINS: u32 = 200;

pub struct OwnerLock {
    holder: AtomicU32,
    sleepers: AtomicU32,
}

impl OwnerLock {
    pub const fn new() -> Self {
        OwnerLock { holder: AtomicU32::new(0), sleepers: AtomicU32::new(0) }
    }

    /// Takes the lock for `me` (not 0); false when `me` holds it already.
    pub fn acquire(&self, me: u32) -> bool {
        let mut spins = 0;
        loop {
            match self.holder.compare_exchange(0, me, SeqCst, Relaxed) {
                Ok(_) => return true,
                Err(owner) if owner == me => return false,
                Err(_) if spins < SPINS => {
                    spins += 1;
                    core::hint::spin_loop();
                }
                Err(owner) => {
                    self.sleepers.fetch_add(1, SeqCst);
                    sys::futex_wait(self.holder.as_ptr(), owner, 0);
                    self.sleepers.fetch_sub(1, SeqCst);
                }
            }
        }
    }

    /// Takes the lock for `me` only if no thread holds it.
    pub fn try_acquire(&self, me: u32) -> bool {
        self.holder.compare_exchange(0, me, SeqCst, Relaxed).is_ok()
    }

    /// Whether `me` holds the lock.
    pub fn held_by(&self, me: u32) -> bool {
        self.holder.load(Relaxed) == me
    }

    pub fn release(&self) {
        self.holder.store(0, SeqCst);
        if self.sleepers.load(SeqCst) != 0 {
            sys::futex_wake(self.holder.as_ptr(), 1);
        }
    }

    /// In a forked child: no thread of the parent's is here to hold or wait for the lock.
    pub fn reset(&self) {
        self.holder.store(0, SeqCst);
        self.sleepers.store(0, SeqCst);
    }
}
