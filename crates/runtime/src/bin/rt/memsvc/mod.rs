//! The memory service (`--memory pool|pool-demand`): anonymous private memory served in user space.
//! As in XOS, the process owns a pool, reserved at the first mmap of 128 KiB or more (smaller
//! ones stay the kernel's) or the first brk; mmap of anonymous private read-write memory is
//! answered from it by the buddy allocator (coreplane_runtime::buddy) with one mprotect, munmap
//! hands the pages to the scrubber (`scrub`), a thread on a control core that makes them zero
//! again (or, when the run looks untouched, drops them itself: free at once, see
//! `Pool::looks_untouched`; a thread that would wait for it zeroes a step itself, see `scrub`),
//! and mremap moves page tables, not bytes. brk is served from a heap at the start of the
//! same reservation (see `brk`); the heap's pages and the mapped ones together are held to the
//! budget. Freed pages the program had touched come back zeroed and populated, so memory that is
//! reused does not fault; pages never handed out, or mostly left untouched, are filled at first
//! touch: by the kernel (`pool`), or by the runtime's fault handler on the control core through
//! userfaultfd (`pool-demand`, see `demand`). The pool's figures are published for
//! `coreplane cell status` (`stats`).
//!
//! Semantics kept (both modes):
//! - new memory reads as zero: a freed page is zeroed or dropped before it is handed out again;
//! - an access to memory the program unmapped faults (SIGSEGV): free pool pages are PROT_NONE.
//!   mprotect on free is the cheapest way found that keeps the pages populated: one syscall per
//!   run, 0.02-0.03 ms for 256 MiB of huge pages, where MADV_DONTNEED would make the next user
//!   fault every page in again. The scrubber zeroes such pages without opening them (see `scrub`);
//! - fork copies the pool (it is MAP_PRIVATE; the child starts its own scrubber when it frees
//!   pool memory), taken while no thread is inside the allocator (a clone onto a stack of the
//!   program's without CLONE_VM is not held back so);
//! - calls on pool pages the program does not hold fail as they would on unmapped memory
//!   (munmap succeeds, mprotect ENOMEM, mremap EFAULT).
//! What differs: /proc/self/maps shows the pool as anonymous mappings, its free parts `---p`,
//! and no `[heap]` (the break is in the pool; /proc/PID/stat's start_brk is the kernel's);
//! budget exhaustion is ENOMEM (mmap) or a break that does not move (brk), but a request within
//! the budget that the pool has no block for (fragmented) is mapped by the kernel, outside the
//! pool and not held to its budget (mremap moves the pages there); MAP_FIXED into free pool
//! pages fails with ENOMEM, and so does mremap with MREMAP_FIXED onto pool pages that are neither
//! all the program's nor all free (`mremap_fixed`); MREMAP_DONTUNMAP without MREMAP_FIXED on pool
//! memory fails with EINVAL;
//! madvise is left to the kernel (DONTNEED on pool memory is correct: the pages read as zero
//! and fault in again; on free pool pages it returns 0 where Linux says ENOMEM). A mapping call from a program signal handler that interrupted the service in the
//! same thread goes to the kernel (mmap) or fails with ENOMEM (munmap, mremap of pool memory).

mod demand;
mod grow;
pub mod lock;
mod scrub;
pub mod seal;
mod stats;

use crate::sys::{self, *};
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use coreplane_runtime::buddy::{Buddy, DIRTY, FOREIGN, UNPOPULATED, USED};
use crate::owner_lock::OwnerLock;

pub(crate) const HUGE_PAGE: usize = 2 << 20;
const HUGE_PAGES: usize = HUGE_PAGE / PAGE;
pub(crate) const MINCORE: usize = 27;
pub(crate) const MADV_DONTNEED: usize = 4;
const MADV_HUGEPAGE: usize = 14;
const MADV_POPULATE_WRITE: usize = 23;
pub(crate) const MAP_NORESERVE: usize = 0x4000;
const MAP_POPULATE: usize = 0x8000;
const MAP_STACK: usize = 0x20000;
pub(crate) const MREMAP_MAYMOVE: usize = 1;
const EFAULT: isize = 14;
/// Flags that do not change what anonymous private memory is (MAP_POPULATE: asked of the
/// kernel with MADV_POPULATE_WRITE; MAP_STACK: a hint).
const HARMLESS_FLAGS: usize = MAP_NORESERVE | MAP_POPULATE | MAP_STACK;

/// Smaller requests go to the kernel (128 KiB, glibc malloc's default mmap threshold): the
/// pool starts with the first larger one, so a program that never maps much (a shell,
/// coreutils, the loader's own small maps) runs as without the service.
const MIN_SERVED: usize = 128 * 1024;
/// Mappings of this size or more are filled with huge pages where the kernel can (MADV_HUGEPAGE;
/// not under pool-demand, whose userfaultfd copies 4 KiB pages); smaller ones and the heap fault
/// in 4 KiB pages, as natively. Asked for on the whole pool, every short process that mapped a
/// buffer and touched little of it paid to zero a huge page (sort's 6 MiB buffer for a few lines:
/// one 2 MiB page per run, where natively a few 4 KiB faults). The hint stays on the pages: a
/// smaller block later carved from a large mapping's freed pages still gets huge pages. Asked for only where the program
/// had used a freed 2 MiB densely (the scrubber's refill), the mmap loop was 1.4x faster than
/// Linux instead of 6x (64 MiB), 1.2x instead of 3.1x (256 MiB).
const HUGE_FROM: usize = 16 << 20;

/// Freed pages that start the scrubber (4 MiB; or a request that waits for them): a process
/// that frees a block or two before it exits (ripgrep: 168 KiB) does not pay for a thread.
const SCRUB_FROM: usize = 1024;

/// Freed runs waiting for the scrubber, oldest first.
const RING: usize = 4096;
/// The queue's slots, apart from `Pool`: built in place, a 32 KiB array of zeros was written on
/// the stack and copied into the pool at every reservation, faulting in about 16 pages in each
/// process that started a pool (≈ 25 µs); left in the zeroed bss, only the slots used are touched.
static mut RING_SLOTS: [(u32, u32); RING] = [(0, 0); RING];

/// The allocator's address space, in multiples of what the pool may hold (budget and growth).
/// A buddy allocator rounds blocks to their alignment: with only the budget's space, 20 MiB then
/// 40 MiB in a 64 MiB pool found no aligned block for the second (ENOMEM, where Linux maps it).
/// Address space costs nothing here (PROT_NONE, not populated; 9 bytes of bookkeeping per page,
/// populated only where used); what still finds no block goes to the kernel (see `mmap`).
const SPREAD: usize = 2;


/// The pool and its allocator; only touched under `POOL_LOCK`.
/// Its reservation starts with the heap (pages [0, heap_pages), the program break's), then the
/// pages of the buddy allocator; both share one page numbering, state array and scrubber.
struct Pool {
    base: usize,
    buddy: Buddy<'static>,
    /// Pages from here on have never been given to the allocator: zero and not populated.
    fresh: usize,
    ring: &'static mut [(u32, u32); RING],
    ring_head: usize,
    ring_len: usize,
    dirty_pages: usize,
    /// The heap's pages (the first of the buddy's), its break, and the pages below the break.
    heap_pages: usize,
    brk: usize,
    heap_top: usize,
    /// Pages [heap_top, heap_lazy_end) are above the break, closed but not zeroed (see `brk`).
    heap_lazy_end: usize,
    /// Pages the program holds (heap and mapped), at most `budget()`.
    held: usize,
    /// The budget the process started with; the supervisor's grants come on top (`budget`).
    base_pages: usize,
    /// The program has mapped over pool pages it held (MAP_FIXED): some may be FOREIGN.
    any_foreign: bool,
}

/// What `Pool::take` found for a request.
enum Taken {
    Block(u32),
    /// The scrubber will return enough pages.
    Wait,
    /// The request would pass the budget (the supervisor may raise it: `grow`).
    OverBudget,
    /// Within the budget, but no block of the size is left (fragmented): growing cannot help;
    /// the kernel maps it instead (`allocate` answers None).
    Exhausted,
}

static mut POOL: Option<Pool> = None;
static POOL_LOCK: OwnerLock = OwnerLock::new();
/// The budget from the configuration (0: no pool); the pool is reserved at its first use.
static BUDGET: AtomicU64 = AtomicU64::new(0);
/// Bytes the pool may grow beyond its budget when the supervisor grants them (see `grow`): its
/// address space is reserved for budget and growth together.
static GROW: AtomicU64 = AtomicU64::new(0);
/// Set once POOL is complete: other threads may look at it from then on.
static READY: AtomicBool = AtomicBool::new(false);
/// The pool's address range, fixed once READY: calls outside it never take the lock.
static BASE: AtomicUsize = AtomicUsize::new(0);
static END: AtomicUsize = AtomicUsize::new(0);
/// Bumped whenever the scrubber returns pages; threads waiting for memory sleep on it.
static RETURNED: AtomicU32 = AtomicU32::new(0);
/// The program break, read without the lock (by a signal handler that interrupted the service).
static BREAK: AtomicUsize = AtomicUsize::new(0);
static WAITERS: AtomicU32 = AtomicU32::new(0);
/// The allocator's bookkeeping (address, bytes), a mapping of the service's own (`lock`).
static BOOK: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// The calling program thread's id, its owner id for `POOL_LOCK`.
fn me() -> u32 {
    crate::thread::current().tid as u32
}

/// The pool under the lock; None if there is no pool or this thread holds the lock already (a
/// signal handler that interrupted the service).
struct Guard;

impl Guard {
    fn take() -> Option<(Guard, &'static mut Pool)> {
        if !enabled() || !POOL_LOCK.acquire(me()) {
            return None;
        }
        Some((Guard, unsafe { (*core::ptr::addr_of_mut!(POOL)).as_mut().unwrap_unchecked() }))
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        POOL_LOCK.release();
    }
}

fn pages_of(len: usize) -> usize {
    len.div_ceil(PAGE)
}

fn failed(r: isize) -> bool {
    (-4095..0).contains(&r)
}

/// Whether [addr, addr + len) reaches into the pool; read without the lock.
fn reaches_pool(addr: usize, len: usize) -> bool {
    enabled() && addr < END.load(Relaxed) && addr.saturating_add(len) > BASE.load(Relaxed)
}

/// The service's entry from dispatch: a mapping call the pool answers (its result, counted in
/// the profile as served in user space), or None for the runtime's usual path.
pub fn serve(nr: usize, a: &[usize; 6]) -> Option<isize> {
    if !enabled() && (!matches!(nr, MMAP | BRK) || BUDGET.load(Relaxed) == 0) {
        return None;
    }
    let t = crate::thread::current();
    if t.no_tsc {
        // rdtsc would fault on this thread (PR_TSC_SIGSEGV): served untimed and unrecorded, as
        // `dispatch::run` makes such a thread's calls.
        return answer(nr, a);
    }
    let t0 = sys::rdtsc();
    let r = answer(nr, a)?;
    crate::profile::record_served(t.prof, nr, r, t0, sys::rdtsc() - t0);
    Some(r)
}

fn answer(nr: usize, a: &[usize; 6]) -> Option<isize> {
    match nr {
        MMAP => mmap(a),
        MUNMAP => munmap(a[0], a[1]),
        MREMAP => mremap(a),
        MPROTECT => check_held(a[0], a[1]),
        BRK => brk(a[0]),
        _ => None,
    }
}

/// Whether the process has a thread of the service's (the scrubber, the fault handler): like
/// a delegate, it would keep the process alive after its last program thread.
pub fn has_scrubber() -> bool {
    scrub::running() || demand::running()
}

/// The service's threads end: before a call the kernel allows only in a single-threaded process
/// (`process::alone_for`), before a seccomp filter is put on every thread or on the program's only one
/// (`process::before_filter`), and before seccomp strict mode, below.
/// The program's only thread is about to enter strict mode: the service's threads end, as
/// the delegates do, so that the thread's exit(2) ends the process as natively. That exit may
/// reach the kernel without the runtime seeing it (the thread no longer traps, and its call
/// site may never have been rewritten), so the process must not depend on the runtime to end
/// it. In strict mode the thread can make no mapping call, so there is nothing left to serve:
/// the fault handler closes its userfaultfd, after which the kernel fills the pool's missing
/// pages (pool-demand becomes pool), and freed pages still queued stay unscrubbed, never handed
/// out, or to a new scrubber if the mode was refused and the program frees more.
pub fn retire() {
    demand::retire();
    scrub::retire();
}

/// Whether the pool exists (`--memory pool`, and a request has started it).
pub fn enabled() -> bool {
    READY.load(Acquire)
}

/// At process start: the pool will be of `bytes`, reserved when a request first needs it;
/// `on_demand`: its pages are filled by the runtime's fault handler (`--memory pool-demand`);
/// freed memory goes back to the kernel while the memory pressure is `give_back` % or more.
pub fn start(bytes: u64, on_demand: bool, give_back: u32) {
    BUDGET.store(bytes, Relaxed);
    GROW.store(crate::env::config().memory_grow, Relaxed);
    grow::configure(crate::env::config().memory_supervisor);
    demand::choose(on_demand);
    scrub::give_back_at(give_back);
}

/// Reserves the pool unless it is there; false when there is no budget, or this thread holds
/// the lock (a signal handler interrupted the service).
fn ensure_reserved() -> bool {
    if enabled() {
        return true;
    }
    let budget = BUDGET.load(Relaxed);
    if budget == 0 || !POOL_LOCK.acquire(me()) {
        return false;
    }
    if !enabled() {
        let (budget, growth) = within_address_limit(budget, GROW.load(Relaxed));
        if budget == 0 {
            // No room under RLIMIT_AS: the kernel serves this process's memory, as without a pool.
            BUDGET.store(0, Relaxed);
            POOL_LOCK.release();
            return false;
        }
        reserve(budget, growth);
    }
    POOL_LOCK.release();
    true
}

/// The budget and growth the pool may take under the process's RLIMIT_AS (`ulimit -v`, as batch
/// systems set it): its reservation, (1 + SPREAD) times their sum, is at most half of the
/// address space the limit leaves (it was ≈ 3 GiB for the default 1 GiB budget, and every
/// process under `ulimit -v 2000000` failed). Shrunk to whole huge pages; (0, 0) when none fits.
fn within_address_limit(budget: u64, growth: u64) -> (u64, u64) {
    const PRLIMIT64: usize = 302;
    const RLIMIT_AS: usize = 9;
    let mut limit = [u64::MAX; 2];
    unsafe { syscall6(PRLIMIT64, 0, RLIMIT_AS, 0, limit.as_mut_ptr() as usize, 0, 0) };
    if limit[0] == u64::MAX {
        return (budget, growth);
    }
    let room = limit[0].saturating_sub((total_vm() * PAGE) as u64) / 2 / (1 + SPREAD as u64);
    if budget + growth <= room {
        return (budget, growth);
    }
    let budget = room / HUGE_PAGE as u64 * HUGE_PAGE as u64;
    (budget, 0)
}

/// The process's address space in pages (total_vm: /proc/self/statm's first field; 0 unread).
fn total_vm() -> usize {
    let mut buf = [0u8; 128];
    sys::read_once(b"/proc/self/statm\0", &mut buf)
        .and_then(|text| coreplane_runtime::config::parse_u64(text.split(|&c| c == b' ').next()?))
        .unwrap_or(0) as usize
}

/// Reserves the pool of `bytes` and the `growth` it may be granted (rounded up to huge pages),
/// PROT_NONE and not populated, after a heap of as much address space, with their bookkeeping;
/// called under the lock. The allocator's part has SPREAD times the address space it may hold.
fn reserve(bytes: u64, growth: u64) {
    let heap = ((bytes + growth) as usize).next_multiple_of(HUGE_PAGE);
    let size = heap + SPREAD * heap;
    let pages = size / PAGE;
    let base = reserve_aligned(size);
    if pages >= u32::MAX as usize {
        sys::die(&[b"cannot reserve the memory pool (--memory-budget too large for this process?)"]);
    }
    // Huge pages are asked for per mapping (`mmap`), not for the whole pool.
    demand::register(base, size);
    // One mapping for the three arrays: every process under the pool pays for its start-up calls.
    let state_bytes = pages.next_multiple_of(PAGE);
    let links_bytes = (pages * 4).next_multiple_of(PAGE);
    let book = sys::map_anon(state_bytes + 2 * links_bytes)
        .unwrap_or_else(|| sys::die(&[b"out of memory for the memory pool's bookkeeping"]));
    BOOK[0].store(book as usize, Relaxed);
    BOOK[1].store(state_bytes + 2 * links_bytes, Relaxed);
    let (state, next, prev) = unsafe {
        (
            core::slice::from_raw_parts_mut(book, pages),
            core::slice::from_raw_parts_mut(book.add(state_bytes) as *mut u32, pages),
            core::slice::from_raw_parts_mut(book.add(state_bytes + links_bytes) as *mut u32, pages),
        )
    };
    unsafe {
        *core::ptr::addr_of_mut!(POOL) = Some(Pool {
            base,
            buddy: Buddy::new(state, next, prev),
            fresh: heap / PAGE,
            ring: &mut *core::ptr::addr_of_mut!(RING_SLOTS),
            ring_head: 0,
            ring_len: 0,
            dirty_pages: 0,
            heap_pages: heap / PAGE,
            brk: base,
            heap_top: 0,
            heap_lazy_end: 0,
            held: 0,
            base_pages: (bytes as usize).next_multiple_of(HUGE_PAGE) / PAGE,
            any_foreign: false,
        });
    }
    BREAK.store(base, Relaxed);
    stats::open();
    BASE.store(base, Relaxed);
    END.store(base + size, Relaxed);
    READY.store(true, Release);
    unsafe { (*core::ptr::addr_of_mut!(POOL)).as_mut().unwrap_unchecked() }.publish();
}

/// `size` bytes of address space (a multiple of HUGE_PAGE), PROT_NONE and not populated, aligned
/// to a huge page so that the buddy's aligned blocks are whole huge pages. The kernel aligns an
/// anonymous mapping of whole huge pages itself where transparent huge pages are built in (one
/// call); elsewhere a huge page more is mapped and the ends trimmed.
fn reserve_aligned(size: usize) -> usize {
    let flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    let map = |len: usize| unsafe { syscall6(MMAP, 0, len, PROT_NONE, flags, usize::MAX, 0) };
    let raw = map(size);
    if !failed(raw) && raw as usize % HUGE_PAGE == 0 {
        return raw as usize;
    }
    if !failed(raw) {
        unsafe { syscall3(MUNMAP, raw as usize, size, 0) };
    }
    let raw = map(size + HUGE_PAGE);
    if failed(raw) {
        sys::die(&[b"cannot reserve the memory pool (--memory-budget too large for this process?)"]);
    }
    let base = (raw as usize).next_multiple_of(HUGE_PAGE);
    unsafe {
        if base > raw as usize {
            syscall3(MUNMAP, raw as usize, base - raw as usize, 0);
        }
        syscall3(MUNMAP, base + size, raw as usize + HUGE_PAGE - base, 0);
    }
    base
}

/// Before fork: no other thread (nor the scrubber) may be half-way through the pool's
/// bookkeeping, or through reserving the pool, when the address space is copied; the lock is
/// taken until the fork is done. False when there is no budget, or this thread holds the lock
/// already (a signal handler).
pub fn before_fork() -> bool {
    BUDGET.load(Relaxed) != 0 && POOL_LOCK.acquire(me())
}

/// After fork, in the parent: the lock `before_fork` took is released (the child's copy is
/// released by `child_after_fork`).
pub fn after_fork_parent(taken: bool) {
    if taken {
        POOL_LOCK.release();
    }
}

/// After fork, in the child: the parent's scrubber, fault handler and lock holder are not here.
pub fn child_after_fork() {
    POOL_LOCK.reset();
    WAITERS.store(0, Relaxed);
    lock::child_after_fork();
    grow::child_after_fork();
    if enabled() {
        scrub::child_after_fork(unsafe { (*core::ptr::addr_of_mut!(POOL)).as_mut().unwrap_unchecked() });
    }
    demand::child_after_fork();
}

impl Pool {
    fn end(&self) -> usize {
        self.base + self.buddy.pages() * PAGE
    }

    /// Publishes the pool's figures (`stats`); under the lock.
    fn publish(&self) {
        stats::publish(&stats::Figures {
            budget: (self.budget() * PAGE) as u64,
            in_use: (self.held * PAGE) as u64,
            scrubbing: (self.dirty_pages * PAGE) as u64,
            heap: (self.brk - self.base) as u64,
            given_back: scrub::given_back(),
            on_demand: demand::active(),
        });
    }

    /// The scrubber made `pages` from `first` zero again (see `zeroed`).
    fn scrubbed(&mut self, first: u32, pages: usize) {
        self.zeroed(first, pages);
        self.dirty_pages -= pages;
        self.publish();
    }

    /// `pages` from `first` read as zero again: the heap's stay the heap's (free above the
    /// break), the others go back to the allocator.
    fn zeroed(&mut self, first: u32, pages: usize) {
        let split = (self.heap_pages as u32).clamp(first, first + pages as u32);
        if split > first {
            self.buddy.mark(first, (split - first) as usize, UNPOPULATED);
        }
        if first + (pages as u32) > split {
            self.buddy.release(split, (first + pages as u32 - split) as usize);
        }
    }

    /// Whether the freed run at `addr` seems never touched: none of its first SAMPLE pages is
    /// resident (mincore). A whole run's mincore costs 0.6 ns a page here (20 us for 128 MiB,
    /// four times Linux's mmap + munmap), one call 1-1.5 us. A program that used its memory
    /// touched its first pages (glibc's malloc writes its chunk header there), and what the
    /// sample misses is dropped by the program's thread, as Linux's munmap would free it,
    /// instead of being zeroed by the scrubber for reuse: slower to reuse, never wrong.
    fn looks_untouched(&self, addr: usize, pages: usize) -> bool {
        const SAMPLE: usize = 16;
        let mut vec = [0u8; SAMPLE];
        let n = SAMPLE.min(pages);
        let r = unsafe { syscall3(MINCORE, addr, n * PAGE, vec.as_mut_ptr() as usize) };
        r == 0 && vec[..n].iter().all(|r| r & 1 == 0)
    }

    /// Whether the program holds all `n` pages from `first` (its own, or mapped over by it).
    fn holds(&self, first: u32, n: usize) -> bool {
        (0..n).all(|i| matches!(self.buddy.state(first as usize + i), USED | FOREIGN))
    }

    fn page(&self, addr: usize) -> u32 {
        ((addr - self.base) / PAGE) as u32
    }

    /// The part of [addr, addr + len) inside the pool, as (first page, pages).
    fn overlap(&self, addr: usize, len: usize) -> Option<(u32, usize)> {
        let (lo, hi) = (addr.max(self.base), addr.saturating_add(len).min(self.end()));
        (lo < hi).then(|| (self.page(lo), pages_of(hi - lo)))
    }

    /// A block of `n` pages: free pages first; when the scrubber holds as many (or, `waited`,
    /// while it still holds any), the scrubber's: they come back populated where the program had
    /// touched them, where fresh pages fault in at first touch, and the scrubber zeroes no slower
    /// than a fault would; then fresh pages, given to the allocator as far as the request needs.
    /// (Waiting while the free and the scrubber's pages merely add up to the request made every
    /// realloc of a growing perl hash wait for the scrubber: 10x the context switches.)
    fn take(&mut self, n: usize, waited: bool) -> Taken {
        if self.held + n > self.budget() {
            return Taken::OverBudget; // the heap holds the rest of the budget
        }
        if let Some(first) = self.buddy.alloc(n) {
            return Taken::Block(first);
        }
        if self.dirty_pages >= n || (waited && self.dirty_pages > 0) {
            return Taken::Wait;
        }
        if let Some(first) = self.from_fresh(n) {
            return Taken::Block(first);
        }
        if self.dirty_pages > 0 {
            Taken::Wait
        } else {
            Taken::Exhausted
        }
    }

    /// A block of `n` pages among fresh ones, given to the allocator as far as the request
    /// needs: just the request, then enough for an aligned block of its size, then all.
    fn from_fresh(&mut self, n: usize) -> Option<u32> {
        let (pages, block) = (self.buddy.pages(), n.next_power_of_two());
        for end in [self.fresh + n, self.fresh.next_multiple_of(block) + block, pages] {
            let end = end.next_multiple_of(HUGE_PAGES).min(pages);
            if end > self.fresh {
                self.buddy.release(self.fresh as u32, end - self.fresh);
                self.fresh = end;
                if let Some(first) = self.buddy.alloc(n) {
                    return Some(first);
                }
            }
        }
        None
    }

    /// Pages the process may hold: its own budget and what the supervisor granted this process
    /// (a forked child starts with none of its parent's grants, see `grow`).
    fn budget(&self) -> usize {
        self.base_pages + grow::granted()
    }

    /// The budget raised for a request of `n` pages the pool cannot hold (see `grow`): by what
    /// is missing, at least an eighth of the budget, within the reservation. Whether the
    /// request fits now.
    fn grow(&mut self, n: usize) -> bool {
        let budget = self.budget();
        let want = (self.held + n).saturating_sub(budget).max(self.base_pages / 8);
        let room = self.heap_pages.saturating_sub(budget);
        if room > 0 {
            grow::ask(want.min(room).next_multiple_of(HUGE_PAGES).min(room));
        }
        self.publish();
        // Only a raise that makes room is worth another try (true without one looped for ever).
        self.held + n <= self.budget()
    }

    /// After the program gave pages back: grants it no longer needs return to the supervisor's
    /// allowance, for its other processes, once a quarter of the own budget is spare; an eighth
    /// stays spare, so that a program freeing and mapping by turns does not ask at every map.
    fn return_grants(&mut self) {
        let (granted, spare) = (grow::granted(), self.budget().saturating_sub(self.held));
        if granted > 0 && spare >= self.base_pages / 4 {
            let back = (spare - self.base_pages / 8).min(granted) / HUGE_PAGES * HUGE_PAGES;
            if back > 0 {
                grow::give_back(back);
                self.publish();
            }
        }
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
    /// and both queued for the scrubber, or made free at once where the program seems not to
    /// have touched them (`looks_untouched`). False if the queue filled up (the rest is left held).
    fn release_held(&mut self, first: u32, n: usize) -> bool {
        let states: &[u8] = if self.any_foreign { &[USED, FOREIGN] } else { &[USED] };
        for &state in states {
            let mut from = first;
            while let Some((run, len)) = self.buddy.runs(from, n - (from - first) as usize, state).next() {
                from = run + len as u32;
                let addr = self.base + run as usize * PAGE;
                let r = unsafe {
                    if state == USED {
                        lock::unlock_before_release(addr, len * PAGE);
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
                if state == USED && self.looks_untouched(addr, len) && unsafe { syscall3(MADVISE, addr, len * PAGE, MADV_DONTNEED) } == 0 {
                    // Nothing (or next to nothing) to zero: no scrubber, and no wait for it (the loop
                    // mmap + munmap of 128 MiB ran 200x slower than Linux through it). Dropped, so
                    // it reads as zero whatever the samples missed.
                    self.zeroed(run, len);
                    self.held -= len;
                    continue;
                }
                if !self.push_dirty(run, len) {
                    unsafe { syscall3(MPROTECT, addr, len * PAGE, PROT_READ | PROT_WRITE) };
                    return false;
                }
                self.held -= len;
            }
        }
        true
    }
}

/// The caller needs queued pages zeroed: rather than sleep until the scrubber gets a CPU, it
/// zeroes a step of the queue itself (`scrub::claim`), else waits for the scrubber. Err when
/// the pool could not be taken again (not reached: this thread let the lock go).
fn help_or_wait(guard: Guard, pool: &mut Pool) -> Result<(), isize> {
    let Some(step) = scrub::claim(pool) else {
        wait_for_scrubber(guard);
        return Ok(());
    };
    let base = pool.base;
    let held_off = HeldOff::begin();
    drop(guard);
    scrub::wake();
    scrub::help(base, step);
    let Some((guard, pool)) = Guard::take() else {
        scrub::helped();
        return Err(-ENOMEM);
    };
    scrub::helped();
    pool.scrubbed(step.0, step.1);
    drop(held_off);
    drop(guard);
    pages_returned();
    Ok(())
}

/// Waits for queued pages: for the scrubber to hand some back (at most 10 ms, a safety net), or,
/// where there can be no scrubber (a thread under a seccomp filter starts none), zeroes them here.
fn wait_for_queued(guard: Guard, pool: &mut Pool) -> Result<(), isize> {
    if scrub::running() || !crate::thread::current().is_filtered() {
        wait_for_scrubber(guard);
        return Ok(());
    }
    help_or_wait(guard, pool)
}

/// Waits until the scrubber hands pages back (at most 10 ms, a safety net).
fn wait_for_scrubber(guard: Guard) {
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

/// The program's asynchronous signals held off while a thread zeroes a step it claimed with the
/// pool's lock released (`scrub::claim`/`help`): a handler that ran in that window could mmap and
/// wait for ever for the step only this thread finishes, fork (the child would put the step back
/// and scrub it again) or siglongjmp out (the step would stay claimed). Synchronous signals
/// (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS) stay open. A step is up to 8 MiB, about a
/// millisecond of zeroing; the signals held off are delivered when it ends.
struct HeldOff(u64);

impl HeldOff {
    fn begin() -> HeldOff {
        const SYNCHRONOUS: u64 = 1 << (4 - 1) | 1 << (5 - 1) | 1 << (7 - 1) | 1 << (8 - 1) | 1 << (11 - 1) | 1 << (31 - 1);
        let block = !SYNCHRONOUS;
        let mut old = 0u64;
        unsafe {
            syscall6(RT_SIGPROCMASK, 0 /* SIG_BLOCK */, &block as *const u64 as usize, &mut old as *mut u64 as usize, 8, 0, 0)
        };
        HeldOff(old)
    }
}

impl Drop for HeldOff {
    fn drop(&mut self) {
        unsafe { syscall6(RT_SIGPROCMASK, 2 /* SIG_SETMASK */, &self.0 as *const u64 as usize, 0, 8, 0, 0) };
    }
}

/// `n` pages from the pool, open for reading and writing; waits while the scrubber will return
/// enough; ENOMEM past the budget; None when the budget holds them but the pool has no block for
/// them (fragmented): the caller has the kernel map them, as Linux would.
fn allocate(n: usize) -> Result<Option<usize>, isize> {
    let mut waited = false;
    loop {
        let Some((guard, pool)) = Guard::take() else { return Err(-ENOMEM) };
        let taken = match pool.take(n, waited) {
            Taken::Wait if n <= HUGE_PAGES && !scrub::claimable(pool) => match pool.from_fresh(n) {
                // Nothing to help with (the scrubber is on the only queued step, or another
                // thread helps): a request of a huge page or less takes fresh pages, which one
                // fault fills, rather than sleep while the scrubber may be off its CPU (beside
                // a busy neighbour on the control core, a request's p99 was that wait).
                Some(first) => Taken::Block(first),
                None => Taken::Wait,
            },
            taken => taken,
        };
        match taken {
            Taken::Block(first) => {
                let addr = pool.base + first as usize * PAGE;
                let r = unsafe { syscall3(MPROTECT, addr, n * PAGE, PROT_READ | PROT_WRITE) };
                if failed(r) {
                    pool.buddy.release(first, n);
                    return Err(r);
                }
                pool.held += n;
                pool.publish();
                return Ok(Some(addr));
            }
            Taken::Wait => {
                waited = true;
                help_or_wait(guard, pool)?;
            }
            Taken::OverBudget if pool.grow(n) => {}
            Taken::OverBudget => return Err(-ENOMEM),
            Taken::Exhausted => return Ok(None),
        }
    }
}

/// mmap: anonymous private read-write memory without an address is served from the pool;
/// MAP_FIXED over pool pages is checked; anything else is the kernel's (None), and so is a
/// request the budget holds but the fragmented pool has no block for (mapped outside the pool
/// and its budget; the profile counts it as a local mmap, not a served one).
pub fn mmap(a: &[usize; 6]) -> Option<isize> {
    let (addr, len, prot, flags) = (a[0], a[1], a[2], a[3]);
    if flags & MAP_FIXED != 0 {
        return fixed_over_pool(a);
    }
    let anonymous_private = flags & !HARMLESS_FLAGS == MAP_PRIVATE | MAP_ANONYMOUS;
    if addr != 0 || !anonymous_private || prot != PROT_READ | PROT_WRITE || len < MIN_SERVED || len > isize::MAX as usize {
        return None;
    }
    if !ensure_reserved() || POOL_LOCK.held_by(me()) {
        return None; // no pool, or a signal handler interrupted the service: the kernel serves it
    }
    Some(match allocate(pages_of(len)) {
        Ok(None) => return None,
        Ok(Some(addr)) => {
            if len >= HUGE_FROM && !demand::active() {
                unsafe { syscall3(MADVISE, addr, len, MADV_HUGEPAGE) };
            }
            if lock::lock_handed_out(addr, len) != 0 {
                // MCL_FUTURE past RLIMIT_MEMLOCK: EAGAIN, nothing mapped, as natively.
                munmap(addr, len);
                return Some(-lock::EAGAIN);
            }
            if flags & MAP_POPULATE != 0 && lock::future() != Some(0) {
                // Fresh or dropped pages are not populated yet (an old kernel's EINVAL: they
                // fault in at first touch).
                unsafe { syscall3(MADVISE, addr, len, MADV_POPULATE_WRITE) };
            }
            addr as isize
        }
        Err(e) => e,
    })
}

/// brk: the program break, served from the heap at the start of the pool's reservation (the
/// kernel's break is never moved), so it is reserved at the first brk, the loader's brk(0).
/// As Linux: the result is the new break, or the old one when the break cannot move there
/// (below the heap, beyond its address space, or beyond the budget: ENOMEM for glibc's sbrk).
/// Pages above the break are closed (PROT_NONE: SIGSEGV on access, ENOMEM for mprotect). A
/// lowering by less than SCRUB_FROM pages leaves them populated and unzeroed, "lazy" (DIRTY, not
/// queued), in [heap_top, heap_lazy_end); the break growing over them again opens them and zeroes
/// them in place (a memset of pages the process has, where Linux unmaps them and faults and zeroes
/// them again; glibc trims and regrows its heap by small steps). A larger lowering, or lazy pages
/// reaching SCRUB_FROM, goes to the scrubber, whose pages the break waits for, as an mmap does.
fn brk(addr: usize) -> Option<isize> {
    if !ensure_reserved() {
        return None;
    }
    loop {
        let Some((guard, pool)) = Guard::take() else { return Some(BREAK.load(Relaxed) as isize) };
        let (start, end, old) = (pool.base, pool.base + pool.heap_pages * PAGE, pool.brk);
        if addr < start || addr > end {
            return Some(old as isize);
        }
        let (top, new_top) = (pool.heap_top, pages_of(addr - start));
        if new_top > top {
            let n = new_top - top;
            let lazy = pool.heap_lazy_end.min(new_top).saturating_sub(top);
            if pool.held + n > pool.budget() && !pool.grow(n) {
                return Some(old as isize);
            }
            if (top + lazy..new_top).any(|i| pool.buddy.state(i) == DIRTY) {
                if wait_for_queued(guard, pool).is_err() {
                    return Some(old as isize);
                }
                continue;
            }
            let r = unsafe { syscall3(MPROTECT, start + top * PAGE, n * PAGE, PROT_READ | PROT_WRITE) };
            if failed(r) {
                return Some(old as isize);
            }
            if lock::lock_handed_out(start + top * PAGE, n * PAGE) != 0 {
                // MCL_FUTURE past RLIMIT_MEMLOCK: the break does not move, as natively.
                unsafe { syscall3(MPROTECT, start + top * PAGE, n * PAGE, PROT_NONE) };
                return Some(old as isize);
            }
            unsafe { core::ptr::write_bytes((start + top * PAGE) as *mut u8, 0, lazy * PAGE) };
            pool.buddy.mark(top as u32, n, USED);
            pool.held += n;
        } else if new_top < top && !pool.lower_break(new_top, top) {
            if wait_for_queued(guard, pool).is_err() {
                return Some(old as isize);
            }
            continue;
        }
        pool.heap_top = new_top;
        pool.heap_lazy_end = pool.heap_lazy_end.max(new_top);
        pool.brk = addr;
        BREAK.store(addr, Relaxed);
        let start_scrubber = new_top < top && (scrub::running() || pool.dirty_pages >= SCRUB_FROM);
        if new_top < top {
            pool.return_grants();
        }
        pool.publish();
        drop(guard);
        if start_scrubber {
            scrub::wake();
        }
        return Some(addr as isize);
    }
}

impl Pool {
    /// Closes the heap's pages [new_top, top) as the break is lowered (see `brk`): lazily when
    /// they and the lazy pages above them are fewer than SCRUB_FROM and all the program's own,
    /// else through the scrubber with the lazy ones. False if the scrubber's queue was full.
    fn lower_break(&mut self, new_top: usize, top: usize) -> bool {
        let lazy_end = self.heap_lazy_end.max(top);
        let own = self.buddy.all(new_top as u32, top - new_top, USED);
        if own && lazy_end - new_top < SCRUB_FROM {
            lock::unlock_before_release(self.base + new_top * PAGE, (top - new_top) * PAGE);
            if failed(unsafe { syscall3(MPROTECT, self.base + new_top * PAGE, (top - new_top) * PAGE, PROT_NONE) }) {
                return true; // out of mappings (vm.max_map_count): the pages stay the program's
            }
            self.buddy.mark(new_top as u32, top - new_top, DIRTY);
            self.held -= top - new_top;
            self.heap_lazy_end = lazy_end;
            return true;
        }
        if lazy_end > top && !self.push_dirty(top as u32, lazy_end - top) {
            return false;
        }
        // Nothing above the new break is lazy now: it is queued, or still to be (a full queue).
        self.heap_lazy_end = new_top;
        self.release_held(new_top as u32, top - new_top)
    }
}

/// mmap MAP_FIXED reaching into the pool: allowed over pages the program holds (they become
/// its own mapping, FOREIGN), refused with ENOMEM over free ones.
fn fixed_over_pool(a: &[usize; 6]) -> Option<isize> {
    if !reaches_pool(a[0], a[1]) {
        return None;
    }
    let (guard, pool) = Guard::take()?;
    let (first, n) = pool.overlap(a[0], a[1])?;
    if !pool.holds(first, n) {
        return Some(-ENOMEM);
    }
    let make = |a: &[usize; 6]| unsafe { syscall6(MMAP, a[0], a[1], a[2], a[3], a[4], a[5]) };
    let r = match lock::future() {
        Some(flags) => lock::mmap_locked(a, flags, make),
        None => make(a),
    };
    if !failed(r) {
        pool.buddy.mark(first, n, FOREIGN);
        pool.any_foreign = true;
    }
    drop(guard);
    crate::textmap::mappings_changed();
    Some(r)
}

/// munmap of a range reaching into the pool: the pool's part is taken back, the rest unmapped
/// by the kernel. None when the range misses the pool.
pub fn munmap(addr: usize, len: usize) -> Option<isize> {
    if addr % PAGE != 0 || len == 0 || !reaches_pool(addr, len) {
        return None; // not the pool's, or the kernel's EINVAL
    }
    if seal::refuses(addr, len) {
        return Some(-EPERM);
    }
    loop {
        let Some((guard, pool)) = Guard::take() else { return Some(-ENOMEM) };
        let (first, n) = pool.overlap(addr, len)?;
        if !pool.release_held(first, n) {
            if wait_for_queued(guard, pool).is_err() {
                return Some(-ENOMEM);
            }
            continue;
        }
        let (base, end, start) = (pool.base, pool.end(), scrub::running() || pool.dirty_pages >= SCRUB_FROM);
        pool.return_grants();
        pool.publish();
        drop(guard);
        pages_returned(); // an untouched run is free again at once
        if start {
            scrub::wake();
        }
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
    if !reaches_pool(addr, len) {
        return None;
    }
    let (guard, pool) = Guard::take()?;
    let (first, n) = pool.overlap(addr, len)?;
    let held = pool.holds(first, n);
    drop(guard);
    (!held).then_some(-ENOMEM)
}

/// mremap of pool memory: shrinking frees the tail, growing (with MREMAP_MAYMOVE) takes a new
/// block and moves the page tables into it (MREMAP_DONTUNMAP leaves the old range mapped, and
/// empty, for the scrubber to take back), so no byte is copied. None when the pool is not
/// involved.
pub fn mremap(a: &[usize; 6]) -> Option<isize> {
    let (old, old_len, new_len, flags, target) = (a[0], a[1], a[2], a[3], a[4]);
    let in_target = flags & MREMAP_FIXED != 0 && reaches_pool(target, new_len);
    if !in_target && !reaches_pool(old, old_len.max(1)) {
        return None;
    }
    if seal::refuses(old, old_len.max(1)) {
        return Some(-EPERM);
    }
    if flags & MREMAP_FIXED != 0 {
        return Some(mremap_fixed(a));
    }
    if flags & MREMAP_DONTUNMAP != 0 || old_len == 0 || old % PAGE != 0 {
        return Some(-EINVAL);
    }
    let held = {
        let (_guard, pool) = Guard::take()?;
        let (first, n) = pool.overlap(old, old_len)?;
        old >= pool.base && old + old_len <= pool.end() && pool.buddy.all(first, n, USED)
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
    let (new, in_pool) = match allocate(new_pages) {
        Ok(Some(p)) => (p, true),
        Ok(None) => {
            // Fragmented: the pages move into a mapping of the kernel's, outside the pool.
            let flags = MAP_PRIVATE | MAP_ANONYMOUS;
            let r = unsafe { syscall6(MMAP, 0, new_pages * PAGE, PROT_READ | PROT_WRITE, flags, usize::MAX, 0) };
            if failed(r) {
                return Some(r);
            }
            (r as usize, false)
        }
        Err(e) => return Some(e),
    };
    let drop_new = || {
        if in_pool {
            munmap(new, new_pages * PAGE);
        } else {
            unsafe { syscall3(MUNMAP, new, new_pages * PAGE, 0) };
        }
    };
    let was_locked = lock::unlock_before_move(old, old_pages * PAGE);
    if let Some(before) = was_locked {
        let tail = (new + old_pages * PAGE, (new_pages - old_pages) * PAGE);
        if lock::lock_grown(tail.0, tail.1, before) != 0 {
            // Past RLIMIT_MEMLOCK: EAGAIN, the old mapping left as it was.
            lock::lock_again(old, old_pages * PAGE);
            drop_new();
            return Some(-lock::EAGAIN);
        }
    }
    demand::disarm(old, old_pages * PAGE);
    let moved = unsafe {
        syscall6(MREMAP, old, old_pages * PAGE, old_pages * PAGE, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, new, 0)
    };
    demand::rearm(old, old_pages * PAGE);
    if in_pool && !failed(moved) {
        demand::rearm(new, old_pages * PAGE);
    }
    if failed(moved) {
        if was_locked.is_some() {
            lock::lock_again(old, old_pages * PAGE);
        }
        drop_new();
        return Some(moved);
    }
    if was_locked.is_some() {
        lock::lock_again(new, old_pages * PAGE);
    }
    munmap(old, old_pages * PAGE);
    Some(new as isize)
}

/// mremap with MREMAP_FIXED from or into the pool (stress-ng --pagemove shuffles the pages of a
/// pool mapping through a page it unmapped): the kernel moves the page tables. The target's pool
/// pages must all be the program's, or all free (then taken from the allocator first, and
/// counted against the budget); they become a mapping of the program's own (FOREIGN). The pool
/// pages the move left are mapped PROT_NONE again, and are free. A range only partly in the
/// pool: EINVAL; old pages the program does not hold: EFAULT; a target of pages neither all held
/// nor all free (some being zeroed, above the break, never handed out): ENOMEM, where natively
/// the move succeeds.
fn mremap_fixed(a: &[usize; 6]) -> isize {
    let (old, old_len, new_len, flags, target) = (a[0], a[1], a[2], a[3], a[4]);
    if flags & MREMAP_MAYMOVE == 0 || old % PAGE != 0 || target % PAGE != 0 || old_len == 0 || new_len == 0 {
        return -EINVAL;
    }
    let Some((guard, pool)) = Guard::take() else { return -ENOMEM };
    let within = |addr: usize, len: usize| addr >= pool.base && addr.saturating_add(len) <= pool.end();
    let (old_in, target_in) = (reaches_pool(old, old_len), reaches_pool(target, new_len));
    if old_in && !within(old, old_len) || target_in && !within(target, new_len) {
        return -EINVAL;
    }
    let (old_first, old_n) = (pool.page(old), pages_of(old_len));
    if old_in && !pool.holds(old_first, old_n) {
        return -EFAULT;
    }
    let (target_first, target_n) = (pool.page(target.max(pool.base)), pages_of(new_len));
    let claimed = target_in && !pool.holds(target_first, target_n);
    let leaves = old_in && flags & MREMAP_DONTUNMAP == 0;
    let room = pool.budget() + if leaves { old_n } else { 0 };
    if claimed && (pool.held + target_n > room || !pool.buddy.claim(target_first, target_n)) {
        return -ENOMEM;
    }
    // Only the pool's own pages are registered with pool-demand's userfaultfd (a file the
    // program mapped over pool pages cannot be).
    let registered = old_in && pool.buddy.all(old_first, old_n, USED);
    if registered {
        demand::disarm(old, old_n * PAGE);
    }
    let r = unsafe { syscall6(MREMAP, old, old_len, new_len, flags, target, 0) };
    if registered && (failed(r) || !leaves) {
        demand::rearm(old, old_n * PAGE);
    }
    if failed(r) {
        // The kernel may have unmapped the target before it failed: the pool's pages there are
        // mapped again, and the program's, if it held them, gone as natively.
        let mut resident = [0u8; 1];
        let unmapped = target_in && unsafe { syscall3(MINCORE, target, PAGE, resident.as_mut_ptr() as usize) } == -ENOMEM;
        if unmapped && refill(target, target_n) {
            if !claimed {
                pool.zeroed(target_first, target_n);
                pool.held -= target_n;
            }
        }
        if claimed {
            pool.buddy.release(target_first, target_n);
        }
        pool.publish();
        return r;
    }
    if target_in {
        pool.buddy.mark(target_first, target_n, FOREIGN);
        pool.any_foreign = true;
        if claimed {
            pool.held += target_n;
        }
    }
    if leaves && refill(old, old_n) {
        pool.zeroed(old_first, old_n);
        pool.held -= old_n;
    }
    pool.publish();
    drop(guard);
    crate::textmap::mappings_changed();
    r
}

/// Maps `n` pool pages at `addr` again, closed (PROT_NONE) and registered as the pool's are;
/// false where the kernel refused (out of mappings): they stay unmapped.
fn refill(addr: usize, n: usize) -> bool {
    let flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED;
    let ok = !failed(unsafe { syscall6(MMAP, addr, n * PAGE, PROT_NONE, flags, usize::MAX, 0) });
    if ok {
        demand::rearm(addr, n * PAGE);
    }
    ok
}

/// Zeros to write or copy from (the scrubber's writes, the fault handler's batches).
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// Stack of each thread of the service's.
const STACK_SIZE: usize = 64 * 1024;

/// A thread of the service's, as `retire` needs it: its tid and its stack.
pub(crate) struct Helper {
    tid: AtomicI32,
    stack: AtomicUsize,
}

impl Helper {
    pub(crate) const fn new() -> Self {
        Helper { tid: AtomicI32::new(0), stack: AtomicUsize::new(0) }
    }

    /// Starts the thread (`what` names it in the error), and in it `entry`, which calls
    /// `on_control_core` first.
    pub(crate) fn spawn(&self, entry: extern "C" fn(usize), what: &[u8]) {
        let stack = sys::map_anon(STACK_SIZE).unwrap_or_else(|| sys::die(&[b"out of memory for the memory pool's ", what]));
        self.stack.store(stack as usize, Relaxed);
        let tid = sys::spawn_thread(stack as usize + STACK_SIZE, entry, 0);
        if tid < 0 {
            sys::die(&[b"cannot start the memory pool's ", what]);
        }
        self.tid.store(tid as i32, Release);
    }

    /// The thread's tid (0: not started).
    pub(crate) fn tid(&self) -> i32 {
        self.tid.load(Acquire)
    }

    /// Waits until the thread, told to end, is gone, then frees its stack (`delegate::reap`).
    pub(crate) fn await_exit(&self) {
        let pid = crate::thread::current().pid;
        crate::delegate::reap(pid as i32, self.tid.load(Acquire), self.stack.load(Relaxed), STACK_SIZE);
        self.tid.store(0, Relaxed);
    }
}

/// In a thread of the service's: every signal blocked (they are the program's), and the thread
/// on the control cores.
fn on_control_core() {
    let all: u64 = !0;
    unsafe { syscall6(RT_SIGPROCMASK, 2 /* SIG_SETMASK */, &all as *const u64 as usize, 0, 8, 0, 0) };
    let control = &crate::env::config().control;
    if !control.is_empty() {
        unsafe { syscall3(SCHED_SETAFFINITY, 0, core::mem::size_of_val(&control.0), control.0.as_ptr() as usize) };
    }
}
