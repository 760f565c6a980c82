//! The memory service (`--memory pool`): anonymous private memory served in user space.
//! As in XOS, the process owns a pool, reserved at the first request of 128 KiB or more (smaller
//! ones stay the kernel's); mmap of anonymous private read-write memory is answered from it by the buddy allocator (coreplane_runtime::buddy) with one
//! mprotect and no page fault, munmap hands the pages to the scrubber (`scrub`), a thread on
//! a control core that zeroes and re-populates them, and mremap moves page tables, not bytes.
//!
//! Semantics kept (the default, and only, pool mode):
//! - new memory reads as zero: every page is zeroed by the scrubber before it is handed out;
//! - an access to memory the program unmapped faults (SIGSEGV): free pool pages are PROT_NONE.
//!   mprotect on free is the cheapest way found that keeps the pages populated: one syscall per
//!   run, 0.02-0.03 ms for 256 MiB of huge pages, where MADV_DONTNEED would make the next user
//!   fault every page in again. The scrubber zeroes such pages without opening them (see `scrub`);
//! - fork copies the pool (it is MAP_PRIVATE; the child starts its own scrubber), taken while no
//!   thread is inside the allocator (a clone onto a stack of the program's without CLONE_VM
//!   is not held back so);
//! - calls on pool pages the program does not hold fail as they would on unmapped memory
//!   (munmap succeeds, mprotect ENOMEM, mremap EFAULT).
//! What differs: /proc/self/maps shows the pool as anonymous mappings, its free parts `---p`;
//! budget exhaustion is ENOMEM (the pool does not grow); MAP_FIXED into free pool pages, and
//! mremap with MREMAP_FIXED or MREMAP_DONTUNMAP on pool memory, fail with ENOMEM / EINVAL;
//! madvise is left to the kernel (DONTNEED on pool memory is correct: the pages read as zero
//! and fault in again; on free pool pages it returns 0 where Linux says ENOMEM); brk stays the
//! kernel's. A mapping call from a program signal handler that interrupted the service in the
//! same thread goes to the kernel (mmap) or fails with ENOMEM (munmap, mremap of pool memory).

mod scrub;

use crate::sys::{self, *};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use coreplane_runtime::buddy::{Buddy, DIRTY, FOREIGN, USED};

pub(crate) const HUGE_PAGE: usize = 2 << 20;
pub(crate) const MADVISE: usize = 28;
const MADV_HUGEPAGE: usize = 14;
const MAP_NORESERVE: usize = 0x4000;
const MAP_POPULATE: usize = 0x8000;
const MAP_STACK: usize = 0x20000;
const MREMAP_MAYMOVE: usize = 1;
const MREMAP_FIXED: usize = 2;
const MREMAP_DONTUNMAP: usize = 4;
const EFAULT: isize = 14;
/// Flags that do not change what anonymous private memory is (MAP_POPULATE: pool pages are
/// populated already; MAP_STACK: a hint).
const HARMLESS_FLAGS: usize = MAP_NORESERVE | MAP_POPULATE | MAP_STACK;

/// Smaller requests go to the kernel (128 KiB, glibc malloc's default mmap threshold): the
/// pool, and its scrubber, start with the first larger one, so a program that never maps
/// much (a shell, coreutils, the loader's own small maps) runs as without the service.
const MIN_SERVED: usize = 128 * 1024;

/// Freed runs waiting for the scrubber, oldest first.
const RING: usize = 4096;

/// The pool and its allocator; only touched under `LOCK`.
struct Pool {
    base: usize,
    buddy: Buddy<'static>,
    /// Pages below this have been populated once (the scrubber fills the pool ahead of need).
    populated: usize,
    ring: [(u32, u32); RING],
    ring_head: usize,
    ring_len: usize,
    dirty_pages: usize,
    /// Largest request waiting for pages (the scrubber populates while one waits).
    wanted: usize,
}

static mut POOL: Option<Pool> = None;
/// The budget from the configuration (0: no pool); the pool is reserved at its first use.
static BUDGET: AtomicU64 = AtomicU64::new(0);
/// Set once POOL is complete: other threads may look at it from then on.
static READY: AtomicBool = AtomicBool::new(false);
/// The thread reserving the pool (0: nobody yet, u32::MAX: done).
static STARTER: AtomicU32 = AtomicU32::new(0);
/// Tid of the thread holding the pool, 0 when none.
static LOCK: AtomicU32 = AtomicU32::new(0);
/// Bumped whenever the scrubber returns pages; threads waiting for memory sleep on it.
static RETURNED: AtomicU32 = AtomicU32::new(0);
static WAITERS: AtomicU32 = AtomicU32::new(0);

/// The pool under the lock; None if this thread holds it already (a signal handler that
/// interrupted the service) or there is no pool.
struct Guard;

impl Guard {
    fn take() -> Option<(Guard, &'static mut Pool)> {
        if !enabled() {
            return None;
        }
        let pool = unsafe { (*core::ptr::addr_of_mut!(POOL)).as_mut()? };
        let me = crate::thread::current().tid as u32;
        loop {
            match LOCK.compare_exchange(0, me, Acquire, Relaxed) {
                Ok(_) => return Some((Guard, pool)),
                Err(owner) if owner == me => return None,
                Err(_) => core::hint::spin_loop(),
            }
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        LOCK.store(0, Release);
    }
}

fn pages_of(len: usize) -> usize {
    len.div_ceil(PAGE)
}

fn failed(r: isize) -> bool {
    (-4095..0).contains(&r)
}

/// The service's entry from dispatch: a mapping call the pool answers (its result, counted in
/// the profile as served in user space), or None for the runtime's usual path.
pub fn serve(nr: usize, a: &[usize; 6]) -> Option<isize> {
    if !enabled() && (nr != MMAP || BUDGET.load(Relaxed) == 0) {
        return None;
    }
    let t0 = sys::rdtsc();
    let r = match nr {
        MMAP => mmap(a),
        MUNMAP => munmap(a[0], a[1]),
        MREMAP => mremap(a),
        MPROTECT => check_held(a[0], a[1]),
        _ => None,
    }?;
    crate::profile::record_served(crate::thread::current().prof, nr, r, t0, sys::rdtsc() - t0);
    Some(r)
}

/// Whether the process has the pool's scrubber thread: a thread of the runtime's that, like a
/// delegate, would keep the process alive after its last program thread.
pub fn has_scrubber() -> bool {
    scrub::running()
}

/// Whether the pool exists (`--memory pool`, and a request has started it).
pub fn enabled() -> bool {
    READY.load(Acquire)
}

/// At process start: the pool will be of `bytes`, reserved when a request first needs it.
pub fn start(bytes: u64) {
    BUDGET.store(bytes, Relaxed);
}

/// Reserves the pool unless it is there; false when this thread is reserving it already (a
/// signal handler interrupted it) or there is no budget.
fn ensure_reserved() -> bool {
    if enabled() {
        return true;
    }
    let budget = BUDGET.load(Relaxed);
    let me = crate::thread::current().tid as u32;
    if budget == 0 {
        return false;
    }
    loop {
        match STARTER.compare_exchange(0, me, Acquire, Acquire) {
            Ok(_) => {
                reserve(budget);
                STARTER.store(u32::MAX, Release);
                return true;
            }
            Err(u32::MAX) => return enabled(),
            Err(owner) if owner == me => return false,
            Err(_) => core::hint::spin_loop(),
        }
    }
}

/// Reserves the pool of `bytes` (rounded up to huge pages), PROT_NONE and not yet populated,
/// with its bookkeeping, and starts the scrubber, which populates it ahead of need.
fn reserve(bytes: u64) {
    let size = (bytes as usize).next_multiple_of(HUGE_PAGE);
    let pages = size / PAGE;
    let flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    let raw = unsafe { syscall6(MMAP, 0, size + HUGE_PAGE, PROT_NONE, flags, usize::MAX, 0) };
    if failed(raw) || pages >= u32::MAX as usize {
        sys::die(&[b"cannot reserve the memory pool (--memory-budget too large for this process?)"]);
    }
    // Aligned to a huge page, so that the buddy's aligned blocks are whole huge pages.
    let base = (raw as usize).next_multiple_of(HUGE_PAGE);
    unsafe {
        if base > raw as usize {
            syscall3(MUNMAP, raw as usize, base - raw as usize, 0);
        }
        syscall3(MUNMAP, base + size, raw as usize + HUGE_PAGE - base, 0);
        syscall3(MADVISE, base, size, MADV_HUGEPAGE);
    }
    let bookkeeping = |bytes: usize| {
        sys::map_anon(bytes.next_multiple_of(PAGE)).unwrap_or_else(|| sys::die(&[b"out of memory for the memory pool's bookkeeping"]))
    };
    let (state, next, prev) = unsafe {
        (
            core::slice::from_raw_parts_mut(bookkeeping(pages), pages),
            core::slice::from_raw_parts_mut(bookkeeping(pages * 4) as *mut u32, pages),
            core::slice::from_raw_parts_mut(bookkeeping(pages * 4) as *mut u32, pages),
        )
    };
    unsafe {
        *core::ptr::addr_of_mut!(POOL) = Some(Pool {
            base,
            buddy: Buddy::new(state, next, prev),
            populated: 0,
            ring: [(0, 0); RING],
            ring_head: 0,
            ring_len: 0,
            dirty_pages: 0,
            wanted: 0,
        });
    }
    READY.store(true, Release);
    scrub::start();
}

/// Before fork: no other thread (nor the scrubber) may be half-way through the pool's
/// bookkeeping when the address space is copied; the lock is taken until the fork is done.
/// False when there is no pool, or this thread holds the lock already (a signal handler).
pub fn before_fork() -> bool {
    match enabled().then(Guard::take).flatten() {
        Some((guard, _)) => {
            core::mem::forget(guard);
            true
        }
        None => false,
    }
}

/// After fork, in the parent: the lock `before_fork` took is released (the child's copy is
/// released by `child_after_fork`).
pub fn after_fork_parent(taken: bool) {
    if taken {
        LOCK.store(0, Release);
    }
}

/// After fork, in the child: the parent's scrubber and lock holder are not here.
pub fn child_after_fork() {
    if !enabled() {
        // A thread of the parent was reserving the pool: the child reserves its own.
        STARTER.store(0, Relaxed);
    }
    if enabled() {
        LOCK.store(0, Release);
        WAITERS.store(0, Relaxed);
        scrub::child_after_fork();
    }
}

impl Pool {
    fn end(&self) -> usize {
        self.base + self.buddy.pages() * PAGE
    }

    fn page(&self, addr: usize) -> u32 {
        ((addr - self.base) / PAGE) as u32
    }

    /// The part of [addr, addr + len) inside the pool, as (first page, pages).
    fn overlap(&self, addr: usize, len: usize) -> Option<(u32, usize)> {
        let (lo, hi) = (addr.max(self.base), addr.saturating_add(len).min(self.end()));
        (lo < hi).then(|| (self.page(lo), pages_of(hi - lo)))
    }

    /// Pages that the scrubber will still hand back (dirty, or never populated).
    fn pending(&self) -> usize {
        self.dirty_pages + self.buddy.pages() - self.populated
    }

    /// Queues a run (PROT_NONE already) for the scrubber; false when the queue is full.
    fn push_dirty(&mut self, first: u32, pages: usize) -> bool {
        if self.ring_len == RING {
            return false;
        }
        self.buddy.mark(first, pages, DIRTY);
        self.ring[(self.ring_head + self.ring_len) % RING] = (first, pages as u32);
        self.ring_len += 1;
        self.dirty_pages += pages;
        true
    }

    /// Takes back every page of `n` from `first` that the program holds: its own pages are
    /// closed (PROT_NONE), mappings it put over pool pages replaced by fresh PROT_NONE ones,
    /// and both queued for the scrubber. False if the queue filled up (the rest is left held).
    fn release_held(&mut self, first: u32, n: usize) -> bool {
        for state in [USED, FOREIGN] {
            while let Some((run, len)) = self.buddy.runs(first, n, state).next() {
                let addr = self.base + run as usize * PAGE;
                let r = unsafe {
                    if state == USED {
                        syscall3(MPROTECT, addr, len * PAGE, PROT_NONE)
                    } else {
                        let flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED;
                        syscall6(MMAP, addr, len * PAGE, PROT_NONE, flags, usize::MAX, 0)
                    }
                };
                if failed(r) {
                    // Out of mappings (vm.max_map_count): the pages stay the program's.
                    return true;
                }
                if !self.push_dirty(run, len) {
                    unsafe { syscall3(MPROTECT, addr, len * PAGE, PROT_READ | PROT_WRITE) };
                    return false;
                }
            }
        }
        true
    }
}

/// Waits until the scrubber hands pages back (at most 10 ms, a safety net).
fn wait_for_scrubber(pool: &mut Pool, guard: Guard, wanted: usize) {
    pool.wanted = pool.wanted.max(wanted);
    let seq = RETURNED.load(SeqCst);
    WAITERS.fetch_add(1, SeqCst);
    drop(guard);
    scrub::wake();
    sys::futex_wait(RETURNED.as_ptr(), seq, 10_000_000);
    WAITERS.fetch_sub(1, SeqCst);
}

/// The scrubber returned pages: wake whoever waits for them.
fn pages_returned() {
    RETURNED.fetch_add(1, SeqCst);
    if WAITERS.load(SeqCst) > 0 {
        sys::futex_wake(RETURNED.as_ptr(), usize::MAX);
    }
}

/// `n` pages from the pool, open for reading and writing; waits while the scrubber may still
/// return enough, else ENOMEM.
fn allocate(n: usize) -> Result<usize, isize> {
    loop {
        let Some((guard, pool)) = Guard::take() else { return Err(-ENOMEM) };
        let found = pool.buddy.alloc(n);
        if found.is_some() || pool.pending() == 0 || n > pool.buddy.free_pages + pool.pending() {
            if pool.wanted <= n {
                pool.wanted = 0;
            }
        }
        if let Some(first) = found {
            let addr = pool.base + first as usize * PAGE;
            let r = unsafe { syscall3(MPROTECT, addr, n * PAGE, PROT_READ | PROT_WRITE) };
            if failed(r) {
                pool.buddy.release(first, n);
                return Err(r);
            }
            let low = scrub::below_reserve(pool);
            drop(guard);
            if low {
                scrub::wake();
            }
            return Ok(addr);
        }
        if pool.pending() == 0 || n > pool.buddy.free_pages + pool.pending() {
            return Err(-ENOMEM);
        }
        wait_for_scrubber(pool, guard, n);
    }
}

/// mmap: anonymous private read-write memory without an address is served from the pool;
/// MAP_FIXED over pool pages is checked; anything else is the kernel's (None).
pub fn mmap(a: &[usize; 6]) -> Option<isize> {
    let (addr, len, prot, flags) = (a[0], a[1], a[2], a[3]);
    if flags & MAP_FIXED != 0 {
        return fixed_over_pool(a);
    }
    let anonymous_private = flags & !HARMLESS_FLAGS == MAP_PRIVATE | MAP_ANONYMOUS;
    if addr != 0 || !anonymous_private || prot != PROT_READ | PROT_WRITE || len < MIN_SERVED || len > isize::MAX as usize {
        return None;
    }
    if !ensure_reserved() {
        return None;
    }
    if LOCK.load(Relaxed) == crate::thread::current().tid as u32 {
        return None; // a signal handler interrupted the service: the kernel serves it
    }
    Some(match allocate(pages_of(len)) {
        Ok(addr) => addr as isize,
        Err(e) => e,
    })
}

/// mmap MAP_FIXED reaching into the pool: allowed over pages the program holds (they become
/// its own mapping, FOREIGN), refused with ENOMEM over free ones.
fn fixed_over_pool(a: &[usize; 6]) -> Option<isize> {
    let (guard, pool) = Guard::take()?;
    let (first, n) = pool.overlap(a[0], a[1])?;
    if !(0..n).all(|i| matches!(pool.buddy.state(first as usize + i), USED | FOREIGN)) {
        return Some(-ENOMEM);
    }
    let r = unsafe { syscall6(MMAP, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if !failed(r) {
        pool.buddy.mark(first, n, FOREIGN);
    }
    drop(guard);
    crate::textmap::mappings_changed();
    Some(r)
}

/// munmap of a range reaching into the pool: the pool's part is taken back, the rest unmapped
/// by the kernel. None when the range misses the pool.
pub fn munmap(addr: usize, len: usize) -> Option<isize> {
    if !enabled() {
        return None;
    }
    if addr % PAGE != 0 || len == 0 {
        return None; // the kernel's EINVAL
    }
    loop {
        let Some((guard, pool)) = Guard::take() else {
            return enabled().then_some(-ENOMEM);
        };
        let (first, n) = pool.overlap(addr, len)?;
        if !pool.release_held(first, n) {
            wait_for_scrubber(pool, guard, 0);
            continue;
        }
        let (base, end) = (pool.base, pool.end());
        drop(guard);
        scrub::wake();
        let stop = addr.saturating_add(len);
        unsafe {
            if addr < base {
                syscall3(MUNMAP, addr, base - addr, 0);
            }
            if stop > end {
                syscall3(MUNMAP, end, stop - end, 0);
            }
        }
        crate::textmap::mappings_changed();
        return Some(0);
    }
}

/// mprotect (and other calls the kernel makes on a range) reaching into the pool: ENOMEM when
/// some of its pool pages are not the program's, as for unmapped memory; else None.
pub fn check_held(addr: usize, len: usize) -> Option<isize> {
    let (guard, pool) = Guard::take()?;
    let (first, n) = pool.overlap(addr, len)?;
    let held = (0..n).all(|i| matches!(pool.buddy.state(first as usize + i), USED | FOREIGN));
    drop(guard);
    (!held).then_some(-ENOMEM)
}

/// mremap of pool memory: shrinking frees the tail, growing (with MREMAP_MAYMOVE) takes a new
/// block and moves the page tables into it (MREMAP_DONTUNMAP leaves the old range mapped, and
/// empty, for the scrubber to refill), so no byte is copied. None when the pool is not involved.
pub fn mremap(a: &[usize; 6]) -> Option<isize> {
    let (old, old_len, new_len, flags, target) = (a[0], a[1], a[2], a[3], a[4]);
    if !enabled() {
        return None;
    }
    let (first, n, in_pool) = {
        let (guard, pool) = Guard::take()?;
        let in_old = pool.overlap(old, old_len.max(1));
        let in_target = (flags & MREMAP_FIXED != 0).then(|| pool.overlap(target, new_len)).flatten();
        if in_old.is_none() && in_target.is_none() {
            return None;
        }
        if in_target.is_some() || flags & (MREMAP_FIXED | MREMAP_DONTUNMAP) != 0 || old_len == 0 || old % PAGE != 0 {
            return Some(-EINVAL);
        }
        let (first, n) = in_old?;
        let whole = old >= pool.base && old + old_len <= pool.end();
        drop(guard);
        (first, n, whole)
    };
    let held = in_pool && {
        let (_guard, pool) = Guard::take()?;
        pool.buddy.all(first, n, USED)
    };
    if !held {
        return Some(-EFAULT);
    }
    let (old_pages, new_pages) = (pages_of(old_len), pages_of(new_len));
    if new_pages == 0 {
        return Some(-EINVAL);
    }
    if new_pages <= old_pages {
        if new_pages < old_pages {
            munmap(old + new_pages * PAGE, (old_pages - new_pages) * PAGE);
        }
        return Some(old as isize);
    }
    if flags & MREMAP_MAYMOVE == 0 {
        return Some(-ENOMEM);
    }
    let new = match allocate(new_pages) {
        Ok(p) => p,
        Err(e) => return Some(e),
    };
    let moved = unsafe {
        syscall6(MREMAP, old, old_pages * PAGE, old_pages * PAGE, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, new, 0)
    };
    if failed(moved) {
        munmap(new, new_pages * PAGE);
        return Some(moved);
    }
    munmap(old, old_pages * PAGE);
    Some(new as isize)
}
