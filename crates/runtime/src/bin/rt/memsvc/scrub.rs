//! The scrubber: a thread on a control core that makes the pool pages the program unmapped read as
//! zero again before they are reused, so that the compute cores neither zero nor fault for
//! memory that is reused. It starts at the process's first munmap of pool memory.
//!
//! A freed part (each 2 MiB-aligned piece of a run, or the run's head and tail between them)
//! that the program mostly touched is zeroed and left populated for the next user; one it mostly
//! left untouched (mincore) is dropped (MADV_DONTNEED): it reads as zero and faults in at its
//! next first touch as native memory does, and nobody zeroes pages that were never used (a sort
//! buffer of 34 MiB of which 1 is touched). In pool-demand mode every part is dropped, and the
//! fault handler fills it again.
//! Free pages are PROT_NONE and must stay so while they are zeroed (a program touching memory
//! it unmapped must fault, and must not write into a page about to be handed out again), so
//! opening them in place to memset them is not correct. The scrubber moves them instead: mremap
//! with MREMAP_DONTUNMAP carries their page tables into its own scratch range (the pool's range
//! stays mapped, empty and PROT_NONE, so nothing else can be placed there), where they are
//! opened, zeroed with non-temporal stores and closed again, and moved back the same way (see
//! `zero_moved`). Measured here (load 7, 64 MiB): 0.013-0.015 ms/MiB, against 0.048-0.11 for
//! the huge-page refill used before (MADV_DONTNEED, then a one-byte write through
//! /proc/thread-self/mem that faults in a huge page the kernel zeroes) and 0.35-0.40 for writing
//! zeros through that file; memset in place would be 0.011-0.014. Where a run cannot be moved
//! (it spans two of the kernel's mappings), it is written through /proc/thread-self/mem, whose
//! writes pass page protection as a debugger's do (FOLL_FORCE). The kernel takes the memory
//! map's lock per move and per page written, so the program's own mapping calls wait at most
//! that long.
//! A program thread that would wait for the scrubber helps it instead (`claim`, `help`): it
//! zeroes the newest queued step itself, the same way, in a scratch range of its own, while the
//! scrubber works from the oldest. The compute core then pays for zeroing, but only in time it
//! would have spent waiting: on this 2-vCPU machine under load an ordinary-priority scrubber was
//! often not running when the program needed its pages (malloc + free of 64 MiB waited 1-34 ms
//! for one step's 1 ms of zeroing).
//! Under memory pressure the pool gives memory back: while /proc/pressure/memory's "some avg10"
//! (the share of the last 10 s in which some task stalled on memory) is at or above the
//! threshold (10 %, or the cell's --memory-give-back), every freed part is dropped rather than
//! kept populated, and once the queue is empty the free pages still populated (the allocator's
//! free blocks, the heap above its break) are dropped too; the next user faults them in again,
//! as natively. The file is read once per step and once per idle wake (every 100 ms at most).

use super::{pages_returned, Pool, HUGE_PAGE, MADV_DONTNEED, MAP_NORESERVE, MINCORE,
            MREMAP_MAYMOVE, POOL, POOL_LOCK, ZEROS};
use crate::owner_lock::OwnerLock;
use crate::sys::{self, *};
use coreplane_runtime::buddy::{FREE_HEAD, UNPOPULATED};
use core::sync::atomic::{AtomicBool, AtomicIsize, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

/// Pages zeroed per step (8 MiB): a waiting caller gets memory after one step.
const STEP_PAGES: usize = 2048;
/// Idle polls before the scrubber sleeps (a few µs: it may share its CPU with the program).
const IDLE_SPINS: u32 = 2_000;
const PWRITEV: usize = 296;
/// Lock owner id of the scrubber (it has no runtime thread state of its own).
const SCRUBBER: u32 = u32::MAX;

static RUNNING: AtomicBool = AtomicBool::new(false);
static THREAD: super::Helper = super::Helper::new();
/// Set by `retire`: the scrubber ends before its next step.
static STOP: AtomicBool = AtomicBool::new(false);
/// The memory pressure, in hundredths of a %, from which memory is given back (0: always).
static GIVE_BACK_AT: AtomicU32 = AtomicU32::new(1000);
/// /proc/pressure/memory, opened with the scrubber (-1: none; nothing is given back).
static PSI: AtomicIsize = AtomicIsize::new(-1);
/// Bytes given back to the kernel under pressure.
static GIVEN_BACK: AtomicU64 = AtomicU64::new(0);
/// The free pages were given back since the scrubber last returned pages.
static FREE_GIVEN: AtomicBool = AtomicBool::new(false);
static SLEEPING: AtomicU32 = AtomicU32::new(0);
/// Bumped when work is queued; the sleeping scrubber waits on it.
static WORK: AtomicU32 = AtomicU32::new(0);
/// The scrubber's scratch range (STEP_PAGES pages, 2 MiB-aligned, PROT_NONE), where freed pages
/// are zeroed (`zero_moved`); 0 until the scrubber starts, or where it could not be reserved.
static SCRATCH: AtomicUsize = AtomicUsize::new(0);
/// The helping program thread's scratch range (`help`), reserved at its first help.
static HELP_SCRATCH: AtomicUsize = AtomicUsize::new(0);
/// A program thread is helping (one at a time: there is one helper's scratch range).
static HELPING: AtomicBool = AtomicBool::new(false);
/// Under the pool's lock: the end (page) of the step the scrubber is zeroing from the ring's
/// head (0: none), which a helper must leave to it, and the step a helper took out of the ring
/// (first page, pages; 0 pages: none), put back by a child forked meanwhile.
static STEP_END: AtomicU32 = AtomicU32::new(0);
static HELP_STEP: AtomicU64 = AtomicU64::new(0);
/// Held by the thread writing through the memory file (which it may reopen): one at a time.
static MEM_LOCK: OwnerLock = OwnerLock::new();
/// The pressure's last reading (`under_pressure`) and when it was read (TSC; 0: never).
static PRESSED: AtomicBool = AtomicBool::new(false);
static PRESSED_AT: AtomicU64 = AtomicU64::new(0);
/// The memory file and its identity (st_dev, st_ino), checked before each write: the program
/// may have closed the fd or put a file of its own under its number.
static mut MEM: (isize, u64, u64) = (-1, 0, 0);

/// Whether this process has a scrubber thread (a thread of the runtime's, like the delegates).
pub fn running() -> bool {
    RUNNING.load(Acquire)
}

/// In a forked child: the scrubber is the parent's, and so is the memory its fd writes to; a
/// step a helper of the parent's had taken out of the ring goes back into the child's, whose
/// copy of those pages is still to be zeroed (or gone with the parent's scratch range: empty,
/// read as zero).
pub fn child_after_fork(pool: &mut Pool) {
    RUNNING.store(false, Release);
    SLEEPING.store(0, Relaxed);
    STEP_END.store(0, Relaxed);
    HELPING.store(false, Relaxed);
    MEM_LOCK.reset();
    let step = HELP_STEP.swap(0, Relaxed);
    if step as u32 != 0 && pool.ring_len < super::RING {
        pool.ring[(pool.ring_head + pool.ring_len) % super::RING] = ((step >> 32) as u32, step as u32);
        pool.ring_len += 1;
    }
    unsafe {
        if MEM.0 >= 0 {
            syscall3(CLOSE, MEM.0 as usize, 0, 0);
        }
        MEM = (-1, 0, 0);
    }
}

/// At process start: memory is given back from `percent` % of memory pressure (0: always).
pub fn give_back_at(percent: u32) {
    GIVE_BACK_AT.store(percent * 100, Relaxed);
}

/// Bytes given back to the kernel under pressure so far.
pub fn given_back() -> u64 {
    GIVEN_BACK.load(Relaxed)
}

/// Whether memory is to be given back now: the pressure's "some avg10" is at or above the
/// threshold ("some avg10=12.34 avg60=..." read from the start of the file).
/// "some avg10" is a 10 s average the kernel updates every 2 s: it is read again after 100 ms,
/// not at every step (a pread per 8 MiB zeroed).
fn under_pressure() -> bool {
    let at = GIVE_BACK_AT.load(Relaxed);
    let fd = PSI.load(Relaxed);
    if at == 0 || fd < 0 {
        return at == 0;
    }
    let (now, then) = (sys::rdtsc(), PRESSED_AT.load(Relaxed));
    if then != 0 && now.wrapping_sub(then) < 100 * crate::env::config().tsc_khz {
        return PRESSED.load(Relaxed);
    }
    let pressed = read_pressure(fd, at);
    PRESSED.store(pressed, Relaxed);
    PRESSED_AT.store(now, Relaxed);
    pressed
}

/// Whether /proc/pressure/memory (`fd`) says "some avg10" is at or above `at` hundredths of a %.
fn read_pressure(fd: isize, at: u32) -> bool {
    let mut buf = [0u8; 64];
    let n = unsafe { syscall6(PREAD64, fd as usize, buf.as_mut_ptr() as usize, buf.len(), 0, 0, 0) };
    let text = &buf[..n.max(0) as usize];
    let Some(from) = text.windows(6).position(|w| w == b"avg10=") else { return false };
    let hundredths = text[from + 6..]
        .iter()
        .take_while(|c| c.is_ascii_digit() || **c == b'.')
        .filter(|c| c.is_ascii_digit())
        .fold(0u32, |v, c| v.saturating_mul(10).saturating_add((c - b'0') as u32));
    hundredths >= at
}

/// Drops the pool's free pages that may still be populated (the heap above its break, then the
/// allocator's free blocks), one block at a time under the lock (a program thread may take the
/// block the moment the lock is released), counting the resident ones as given back. Stops
/// where the kernel refuses (locked memory).
fn give_back_free() {
    let mut next = None; // None: the heap above its break
    loop {
        let pool = lock();
        let (at, len) = match next {
            None => (pool.heap_top, pool.heap_pages - pool.heap_top),
            Some(mut i) => {
                while i < pool.fresh && pool.buddy.state(i) & FREE_HEAD == 0 {
                    i += 1;
                }
                (i, if i < pool.fresh { 1 << (pool.buddy.state(i) & !FREE_HEAD) } else { 0 })
            }
        };
        let addr = pool.base + at * PAGE;
        let resident = resident_pages(addr, len);
        let dropped = len > 0 && unsafe { syscall3(MADVISE, addr, len * PAGE, MADV_DONTNEED) } == 0;
        if dropped && next.is_none() {
            // The heap's lazy pages read as zero now: free, as the scrubber would leave them.
            pool.buddy.mark(pool.heap_top as u32, pool.heap_lazy_end - pool.heap_top, UNPOPULATED);
            pool.heap_lazy_end = pool.heap_top;
        }
        if dropped {
            GIVEN_BACK.fetch_add((resident * PAGE) as u64, Relaxed);
            pool.publish();
        }
        let heap_pages = pool.heap_pages;
        POOL_LOCK.release();
        if !dropped && (next.is_some() || len > 0) {
            return;
        }
        next = Some(if next.is_none() { heap_pages } else { at + len });
    }
}

/// Pages of [addr, addr + pages) that are resident (mincore), counted a step at a time.
fn resident_pages(addr: usize, pages: usize) -> usize {
    let mut resident = [0u8; STEP_PAGES];
    let mut count = 0;
    for first in (0..pages).step_by(STEP_PAGES) {
        let n = (pages - first).min(STEP_PAGES);
        if unsafe { syscall3(MINCORE, addr + first * PAGE, n * PAGE, resident.as_mut_ptr() as usize) } == 0 {
            count += resident[..n].iter().filter(|r| *r & 1 != 0).count();
        }
    }
    count
}

/// Tells the scrubber there is work, starting it if the process has none yet. The memory file
/// is opened here, by the program thread, before the scrubber exists: moving a descriptor to 900
/// grows the descriptor table, which the kernel does with an RCU grace period (7 ms seen here)
/// when another thread shares the table, as the scrubber does once started.
pub fn wake() {
    // A thread under a seccomp filter of the program's would pass it on to the scrubber, whose
    // calls the filter was not written for: its work waits for the program's threads' help.
    if !running() && crate::thread::current().is_filtered() {
        return;
    }
    if !RUNNING.swap(true, AcqRel) {
        if !super::demand::active() && unsafe { MEM.0 } < 0 {
            open_mem();
        }
        if GIVE_BACK_AT.load(Relaxed) != 0 && PSI.load(Relaxed) < 0 {
            let fd = sys::open(c"/proc/pressure/memory".as_ptr().cast(), O_RDONLY | O_CLOEXEC);
            if fd >= 0 {
                PSI.store(crate::own_fds::out_of_the_way(fd), Relaxed);
            }
        }
        THREAD.spawn(scrubber_main, b"scrubber thread");
        if crate::env::config().scrubber_fifo {
            ahead_of_ordinary_tasks(THREAD.tid());
        }
    }
    WORK.fetch_add(1, SeqCst);
    if SLEEPING.load(SeqCst) != 0 {
        sys::futex_wake(WORK.as_ptr(), 1);
    }
}

/// Ends the scrubber, if the process has one (see `super::retire`); the queued runs stay queued.
/// The pressure file goes with it (the next scrubber opens it again): a program thread that
/// zeroes queued pages itself then reads no pressure, a call its seccomp filter might refuse.
pub fn retire() {
    if !running() {
        return;
    }
    STOP.store(true, SeqCst);
    WORK.fetch_add(1, SeqCst);
    sys::futex_wake(WORK.as_ptr(), 1);
    THREAD.await_exit();
    STOP.store(false, Relaxed);
    SLEEPING.store(0, Relaxed);
    let psi = PSI.swap(-1, Relaxed);
    if psi >= 0 {
        unsafe { syscall3(CLOSE, psi as usize, 0, 0) };
    }
    RUNNING.store(false, Release);
}

fn lock() -> &'static mut Pool {
    POOL_LOCK.acquire(SCRUBBER);
    unsafe { (*core::ptr::addr_of_mut!(POOL)).as_mut().unwrap_unchecked() }
}

/// The next run to scrub, as (first page, pages), or None when idle.
fn next_step(pool: &Pool) -> Option<(u32, usize)> {
    (pool.ring_len > 0).then(|| {
        let (first, pages) = pool.ring[pool.ring_head];
        (first, (pages as usize).min(STEP_PAGES))
    })
}

/// Opens the memory file (again), out of the way of the program's fd numbers: the calling
/// thread's (/proc/thread-self/mem; it names the process's memory for as long as that lives),
/// as /proc/self/mem is the main thread's and cannot be opened once it has called exit(2) while
/// other threads go on.
fn open_mem() {
    let fd = sys::open(c"/proc/thread-self/mem".as_ptr().cast(), O_RDWR | O_CLOEXEC);
    if fd < 0 {
        sys::die(&[b"memory pool: cannot open /proc/thread-self/mem to zero freed pages"]);
    }
    let fd = crate::own_fds::out_of_the_way(fd);
    let (dev, ino) = identity(fd).unwrap_or((0, 0));
    unsafe { MEM = (fd, dev, ino) };
}

/// The (st_dev, st_ino) of `fd`, to tell whether a descriptor of the service's is still its own.
pub(super) fn identity(fd: isize) -> Option<(u64, u64)> {
    let mut st = [0u64; 18];
    let r = sys::fstat(fd as usize, st.as_mut_ptr().cast());
    (r == 0).then_some((st[0], st[1]))
}

/// Drops [addr, addr + len): it reads as zero and faults in again. Where the kernel refuses
/// (memory locked by mlockall, as in a cell made with --mlock: EINVAL), it is zeroed in place:
/// a freed page is never handed out with the program's old bytes. Whether it was dropped.
fn drop_pages(addr: usize, len: usize, scratch: usize) -> bool {
    let dropped = unsafe { syscall3(MADVISE, addr, len, MADV_DONTNEED) } == 0;
    if !dropped {
        zero(addr, len, scratch);
    }
    dropped
}

/// Opens the memory file unless the one held is still the process's (the program may have
/// closed the fd or put a file of its own under its number).
fn ensure_mem() {
    unsafe {
        if MEM.0 < 0 || identity(MEM.0) != Some((MEM.1, MEM.2)) {
            open_mem();
        }
    }
}

/// Makes [addr, addr + len) (at most STEP_PAGES) read as zero: each part the program mostly
/// touched zeroed and populated, the others dropped (see the module's comment); zeroed in the
/// calling thread's `scratch` range.
fn scrub(addr: usize, len: usize, scratch: usize) {
    let mut resident = [0u8; STEP_PAGES];
    let known = !super::demand::active() && unsafe { syscall3(MINCORE, addr, len, resident.as_mut_ptr() as usize) } == 0;
    let pressed = known && under_pressure();
    let keep = known && !pressed;
    let mut at = addr;
    // The parts to zero since `zero_from`, zeroed together (one move for a whole step).
    let mut zero_from = None;
    while at < addr + len {
        let end = (at + 1).next_multiple_of(HUGE_PAGE).min(addr + len);
        let part = &resident[(at - addr) / PAGE..(end - addr) / PAGE];
        let touched = part.iter().filter(|r| *r & 1 != 0).count();
        if !keep || touched * 2 < part.len() {
            if let Some(from) = zero_from.take() {
                zero(from, at - from, scratch);
            }
            if drop_pages(at, end - at, scratch) && pressed {
                GIVEN_BACK.fetch_add((touched * PAGE) as u64, Relaxed);
            }
        } else if zero_from.is_none() {
            zero_from = Some(at);
        }
        at = end;
    }
    if let Some(from) = zero_from {
        zero(from, addr + len - from, scratch);
    }
}

/// Makes [addr, addr + len) (at most STEP_PAGES, closed) read as zero, its pages kept: moved
/// to `scratch` and zeroed (`zero_moved`), else written through the memory file.
fn zero(addr: usize, len: usize, scratch: usize) {
    if !zero_moved(addr, len, scratch) {
        zero_through_mem(addr, len);
    }
}

/// Reserves a scratch range (`SCRATCH`, `HELP_SCRATCH`) unless there is one (a forked child
/// has its parent's, mapped in its own address space); its address (0: none, every run is
/// written through the memory file).
fn reserve_scratch(slot: &AtomicUsize) -> usize {
    if slot.load(Relaxed) != 0 {
        return slot.load(Relaxed);
    }
    let size = STEP_PAGES * PAGE;
    let flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    let raw = unsafe { syscall6(MMAP, 0, size + HUGE_PAGE, PROT_NONE, flags, usize::MAX, 0) };
    if raw < 0 {
        return 0;
    }
    let at = (raw as usize).next_multiple_of(HUGE_PAGE);
    unsafe {
        if at > raw as usize {
            syscall3(MUNMAP, raw as usize, at - raw as usize, 0);
        }
        syscall3(MUNMAP, at + size, raw as usize + HUGE_PAGE - at, 0);
    }
    slot.store(at, Relaxed);
    at
}

/// Zeroes the closed pages of [addr, addr + len) where no program thread can reach them: their
/// page tables are moved to the scratch range (MREMAP_DONTUNMAP leaves the pool's range mapped,
/// empty and closed), opened, zeroed with non-temporal stores (the program's next touch misses
/// the cache either way; they do not evict its data), closed, and moved back, over the empty
/// range, the same way (the scratch range stays mapped, so nothing else is placed there between
/// steps). False, nothing changed, where the kernel refuses the first move (a run spanning two
/// of its mappings, an old kernel) or the opening.
fn zero_moved(addr: usize, len: usize, scratch: usize) -> bool {
    const MOVE: usize = MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP;
    if scratch == 0 || unsafe { syscall6(MREMAP, addr, len, len, MOVE, scratch, 0) } != scratch as isize {
        return false;
    }
    let opened = unsafe { syscall3(MPROTECT, scratch, len, PROT_READ | PROT_WRITE) } == 0;
    if opened {
        unsafe { zero_streaming(scratch, len) };
    }
    // Never moved back open (a program thread could write into them before they are handed out).
    let closed = !opened || unsafe { syscall3(MPROTECT, scratch, len, PROT_NONE) } == 0;
    if closed && unsafe { syscall6(MREMAP, scratch, len, len, MOVE, addr, 0) } == addr as isize {
        return opened;
    }
    // Out of mappings (vm.max_map_count) for the way back: the pool's range is still mapped,
    // empty and closed, so it reads as zero (its next user faults fresh pages in); the pages
    // left here are dropped, and the next move replaces this range.
    unsafe { syscall3(MADVISE, scratch, len, MADV_DONTNEED) };
    true
}

/// Zeroes [at, at + len) (page-aligned, open) with non-temporal 16-byte stores.
unsafe fn zero_streaming(at: usize, len: usize) {
    use core::arch::x86_64::{__m128i, _mm_setzero_si128, _mm_sfence, _mm_stream_si128};
    let zero = _mm_setzero_si128();
    let mut p = at as *mut __m128i;
    let end = (at + len) as *mut __m128i;
    while p < end {
        _mm_stream_si128(p, zero);
        _mm_stream_si128(p.add(1), zero);
        _mm_stream_si128(p.add(2), zero);
        _mm_stream_si128(p.add(3), zero);
        p = p.add(4);
    }
    _mm_sfence();
}

/// Writes zeros over [addr, addr + len) through the memory file (one thread at a time: it may
/// reopen the file).
fn zero_through_mem(addr: usize, len: usize) {
    // By kernel tid: the scrubber and a helping program thread both come here (and a helper
    // holds its program's signals off, so no handler of the same thread comes in between).
    MEM_LOCK.acquire(sys::gettid() as u32);
    ensure_mem();
    let iov: [(usize, usize); 64] = [(ZEROS.as_ptr() as usize, ZEROS.len()); 64];
    let mut done = 0;
    while done < len {
        let chunks = (len - done).div_ceil(ZEROS.len()).min(iov.len());
        let mut v = iov;
        let last = (len - done).min(chunks * ZEROS.len()) - (chunks - 1) * ZEROS.len();
        v[chunks - 1].1 = last;
        let n = unsafe { syscall6(PWRITEV, MEM.0 as usize, v.as_ptr() as usize, chunks, addr + done, 0, 0) };
        if n <= 0 {
            // The program is never handed a page that was not zeroed.
            sys::die(&[b"memory pool: cannot zero freed pages through /proc/thread-self/mem"]);
        }
        done += n as usize;
    }
    MEM_LOCK.release();
}

/// Polls for work a while, then sleeps on `WORK` until woken (or 100 ms, a safety net).
fn idle_until_work() {
    let seq = WORK.load(SeqCst);
    for _ in 0..IDLE_SPINS {
        if WORK.load(Relaxed) != seq {
            return;
        }
        core::hint::spin_loop();
    }
    SLEEPING.store(1, SeqCst);
    let more = next_step(lock()).is_some() || STOP.load(SeqCst);
    POOL_LOCK.release();
    if !more {
        if !FREE_GIVEN.load(Relaxed) && under_pressure() {
            give_back_free();
            FREE_GIVEN.store(true, Relaxed);
        }
        sys::futex_wait(WORK.as_ptr(), seq, 100_000_000);
    }
    SLEEPING.store(0, SeqCst);
}

/// `--scrubber-priority fifo`: this thread runs under SCHED_FIFO priority 1, so that an ordinary
/// task on the control core (a memory-hungry neighbour) no longer delays the memory a program
/// waits for (Fig. 6: the pool's p99 under load was its scrubber preempted). The lowest real-time
/// priority: any real-time task of the machine's still comes first, and the kernel's real-time
/// throttling (sched_rt_runtime_us) bounds what it can take from the others. coreplane-exec
/// checked that the priority is allowed; a refusal here leaves the scrubber ordinary. Set by the
/// thread that starts the scrubber, before it goes on: a program thread that helps rather than
/// waits may otherwise run on before the scrubber has set it.
fn ahead_of_ordinary_tasks(tid: i32) {
    const SCHED_SETSCHEDULER: usize = 144;
    const SCHED_FIFO: usize = 1;
    let priority: i32 = 1;
    unsafe { syscall3(SCHED_SETSCHEDULER, tid as usize, SCHED_FIFO, &priority as *const i32 as usize) };
}

/// Scrubs the queued runs step by step, then sleeps until woken; returns (the thread ends) when
/// told to stop.
extern "C" fn scrubber_main(_: usize) {
    super::on_control_core();
    let scratch = reserve_scratch(&SCRATCH);
    while !STOP.load(SeqCst) {
        let pool = lock();
        let step = next_step(pool);
        STEP_END.store(step.map_or(0, |(first, pages)| first + pages as u32), Relaxed);
        let base = pool.base;
        POOL_LOCK.release();
        let Some((first, pages)) = step else {
            idle_until_work();
            continue;
        };
        scrub(base + first as usize * PAGE, pages * PAGE, scratch);
        let pool = lock();
        STEP_END.store(0, Relaxed);
        let head = &mut pool.ring[pool.ring_head];
        head.0 += pages as u32;
        head.1 -= pages as u32;
        let head_done = head.1 == 0;
        if head_done {
            pool.ring_head = (pool.ring_head + 1) % super::RING;
            pool.ring_len -= 1;
        }
        pool.scrubbed(first, pages);
        let whole = head_done || pool.ring_len == 0;
        POOL_LOCK.release();
        FREE_GIVEN.store(false, Relaxed);
        if whole {
            pages_returned();
        }
    }
}

/// Whether `claim` would give a step now (under the pool's lock).
pub(super) fn claimable(pool: &Pool) -> bool {
    if pool.ring_len == 0 || HELPING.load(Acquire) {
        return false;
    }
    let (first, pages) = pool.ring[(pool.ring_head + pool.ring_len - 1) % super::RING];
    help_start(pool, first, first + pages) < first + pages
}

/// Where a helper's step of the newest run [first, end) would start (`claim`).
fn help_start(pool: &Pool, first: u32, end: u32) -> u32 {
    const HUGE_PAGES: u32 = (HUGE_PAGE / PAGE) as u32;
    let from = if pool.ring_len == 1 { first.max(STEP_END.load(Relaxed)) } else { first };
    from.max(end.saturating_sub(STEP_PAGES as u32).next_multiple_of(HUGE_PAGES))
}

/// For a program thread about to wait for the scrubber, under the pool's lock: a step to zero
/// itself (`help`), taken out of the ring: the last STEP_PAGES of its newest run at most, from
/// a 2 MiB boundary (moving part of a huge page splits it), short of the step the scrubber is
/// on. None when another thread helps, or nothing is left to take.
pub(super) fn claim(pool: &mut Pool) -> Option<(u32, usize)> {
    if pool.ring_len == 0 || HELPING.swap(true, Acquire) {
        return None;
    }
    let tail = (pool.ring_head + pool.ring_len - 1) % super::RING;
    let (first, pages) = pool.ring[tail];
    let end = first + pages;
    let start = help_start(pool, first, end);
    if start >= end {
        HELPING.store(false, Release);
        return None;
    }
    let take = (end - start) as usize;
    pool.ring[tail].1 -= take as u32;
    if pool.ring[tail].1 == 0 {
        pool.ring_len -= 1;
    }
    HELP_STEP.store((start as u64) << 32 | take as u64, Relaxed);
    Some((start, take))
}

/// Zeroes the step `claim` gave, as the scrubber would (the pool's lock not held); then, under
/// the lock, the caller calls `helped` and returns the pages (`Pool::scrubbed`).
pub(super) fn help(base: usize, (first, pages): (u32, usize)) {
    scrub(base + first as usize * PAGE, pages * PAGE, reserve_scratch(&HELP_SCRATCH));
}

/// The helper's step is done (under the pool's lock): another thread may help.
pub(super) fn helped() {
    HELP_STEP.store(0, Relaxed);
    HELPING.store(false, Release);
}

/// The scratch ranges (address, bytes; 0 where not reserved), mappings of the service's own that
/// mlockall neither counts nor locks (`lock`).
pub(super) fn own_ranges() -> [(usize, usize); 2] {
    let size = |at: usize| if at == 0 { 0 } else { STEP_PAGES * PAGE };
    let (a, b) = (SCRATCH.load(Relaxed), HELP_SCRATCH.load(Relaxed));
    [(a, size(a)), (b, size(b))]
}
