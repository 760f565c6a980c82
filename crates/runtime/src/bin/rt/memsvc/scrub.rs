//! The scrubber: a thread on a control core that zeroes the pool pages the program unmapped and
//! populates the pool ahead of need, so that the compute cores neither zero nor fault.
//! Free pages are PROT_NONE and must stay so while they are zeroed (a program touching memory
//! it unmapped must fault, and must not write into a page about to be handed out again), so the
//! scrubber writes zeros through /proc/self/mem, whose writes pass page protection as a
//! debugger's do (FOLL_FORCE): 0.14-0.2 ms per MiB here, populating a page that was never
//! touched on the way. Opening the pages (mprotect) to memset them would be faster and is not
//! correct. Whole huge pages go faster: MADV_DONTNEED drops them and a one-byte write through
//! /proc/self/mem faults in a new one, which the kernel zeroes at memset speed; mincore then
//! says whether it was a huge page (else the 2 MiB are written in full).

use super::{pages_returned, Pool, LOCK, MADVISE, POOL};
use crate::sys::{self, *};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::*};

/// Pages zeroed or populated per step (8 MiB): a waiting caller gets memory after one step.
const STEP_PAGES: usize = 2048;
/// Free memory kept populated ahead of need (8 MiB): every process image has a pool, and a
/// larger reserve made a four-process shell pipeline 2x slower (each scrubber populating
/// 64 MiB on the control core, holding the mm's lock against the program's mapping calls);
/// a larger request waits while the scrubber populates for it.
const RESERVE_PAGES: usize = 2048;
/// Idle polls before the scrubber sleeps (a few hundred µs).
const IDLE_SPINS: u32 = 20_000;
const STACK_SIZE: usize = 64 * 1024;
const PWRITEV: usize = 296;
const PWRITE64: usize = 18;
const MINCORE: usize = 27;
const MADV_DONTNEED: usize = 4;
const HUGE_PAGE: usize = super::HUGE_PAGE;
const FSTAT: usize = 5;
const FCNTL: usize = 72;
const F_DUPFD_CLOEXEC: usize = 1030;
/// The scrubber's fd is moved this high, away from the numbers programs expect to get.
const HIGH_FD: usize = 900;
/// Lock owner id of the scrubber (it has no runtime thread state of its own).
const SCRUBBER: u32 = u32::MAX;

static RUNNING: AtomicBool = AtomicBool::new(false);
static SLEEPING: AtomicU32 = AtomicU32::new(0);
/// Bumped when work is queued; the sleeping scrubber waits on it.
static WORK: AtomicU32 = AtomicU32::new(0);
/// /proc/self/mem and its identity (st_dev, st_ino), checked before each write: the program
/// may have closed the fd or put a file of its own under its number.
static mut MEM: (isize, u64, u64) = (-1, 0, 0);
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

extern "C" {
    fn coreplane_spawn(flags: u64, stack_top: usize, entry: extern "C" fn(usize), arg: usize) -> isize;
}

/// Whether this process has a scrubber thread (a thread of the runtime's, like the delegates).
pub fn running() -> bool {
    RUNNING.load(Acquire)
}

/// Starts the scrubber thread (once per process).
pub fn start() {
    if RUNNING.swap(true, AcqRel) {
        return;
    }
    let stack = sys::map_anon(STACK_SIZE).unwrap_or_else(|| sys::die(&[b"out of memory for the memory pool's scrubber"]));
    let flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
    if unsafe { coreplane_spawn(flags, stack as usize + STACK_SIZE, scrubber_main, 0) } < 0 {
        sys::die(&[b"cannot start the memory pool's scrubber thread"]);
    }
}

/// In a forked child: the scrubber is the parent's, and so is the memory its fd writes to.
pub fn child_after_fork() {
    RUNNING.store(false, Release);
    SLEEPING.store(0, Relaxed);
    unsafe {
        if MEM.0 >= 0 {
            syscall3(CLOSE, MEM.0 as usize, 0, 0);
        }
        MEM = (-1, 0, 0);
    }
}

/// Tells the scrubber there is work (starting it in a forked child that has none yet).
pub fn wake() {
    start();
    WORK.fetch_add(1, SeqCst);
    if SLEEPING.load(SeqCst) != 0 {
        sys::futex_wake(WORK.as_ptr(), 1);
    }
}

/// Whether free memory has fallen below the reserve while part of the pool is unpopulated.
pub fn below_reserve(pool: &Pool) -> bool {
    pool.populated < pool.buddy.pages() && pool.buddy.free_pages < RESERVE_PAGES
}

fn lock() -> &'static mut Pool {
    while LOCK.compare_exchange(0, SCRUBBER, Acquire, Relaxed).is_err() {
        core::hint::spin_loop();
    }
    unsafe { (*core::ptr::addr_of_mut!(POOL)).as_mut().unwrap_unchecked() }
}

fn unlock() {
    LOCK.store(0, Release);
}

/// The next step, as (first page, pages, from the dirty queue), or None when idle.
fn next_step(pool: &mut Pool) -> Option<(u32, usize, bool)> {
    if pool.ring_len > 0 {
        let (first, pages) = pool.ring[pool.ring_head];
        return Some((first, (pages as usize).min(STEP_PAGES), true));
    }
    // A waiting request may need an aligned block that the free pages do not hold.
    let unpopulated = pool.buddy.pages() - pool.populated;
    if unpopulated > 0 && (pool.buddy.free_pages < RESERVE_PAGES || pool.wanted > 0) {
        return Some((pool.populated as u32, unpopulated.min(STEP_PAGES), false));
    }
    None
}

/// Opens /proc/self/mem (again), out of the way of the program's fd numbers.
fn open_mem() {
    let fd = unsafe { syscall3(OPEN, c"/proc/self/mem".as_ptr() as usize, O_RDWR | O_CLOEXEC, 0) };
    if fd < 0 {
        sys::die(&[b"memory pool: cannot open /proc/self/mem to zero freed pages"]);
    }
    let high = unsafe { syscall3(FCNTL, fd as usize, F_DUPFD_CLOEXEC, HIGH_FD) };
    let fd = if high >= 0 {
        unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
        high
    } else {
        fd
    };
    let (dev, ino) = identity(fd).unwrap_or((0, 0));
    unsafe { MEM = (fd, dev, ino) };
}

fn identity(fd: isize) -> Option<(u64, u64)> {
    let mut st = [0u64; 18];
    let r = unsafe { syscall3(FSTAT, fd as usize, st.as_mut_ptr() as usize, 0) };
    (r == 0).then_some((st[0], st[1]))
}

/// Makes [addr, addr + len) zero-filled and populated: whole huge pages are replaced by fresh
/// ones, the rest is written with zeros.
fn scrub(addr: usize, len: usize) {
    unsafe {
        if MEM.0 < 0 || identity(MEM.0) != Some((MEM.1, MEM.2)) {
            open_mem();
        }
    }
    let (lo, hi) = (addr.next_multiple_of(HUGE_PAGE), (addr + len) / HUGE_PAGE * HUGE_PAGE);
    if lo >= hi {
        return zero(addr, len);
    }
    zero(addr, lo - addr);
    zero(hi, addr + len - hi);
    unsafe { syscall3(MADVISE, lo, hi - lo, MADV_DONTNEED) };
    let mut at = lo;
    while at < hi {
        if unsafe { syscall6(PWRITE64, MEM.0 as usize, ZEROS.as_ptr() as usize, 1, at, 0, 0) } != 1 {
            sys::die(&[b"memory pool: cannot zero freed pages through /proc/self/mem"]);
        }
        at += HUGE_PAGE;
    }
    // One byte per 4 KiB page; a step is at most STEP_PAGES.
    let mut resident = [0u8; STEP_PAGES];
    let pages = (hi - lo) / PAGE;
    if unsafe { syscall3(MINCORE, lo, hi - lo, resident.as_mut_ptr() as usize) } != 0 {
        resident[..pages].fill(0);
    }
    for (i, huge) in resident[..pages].chunks(HUGE_PAGE / PAGE).enumerate() {
        if huge.iter().any(|r| r & 1 == 0) {
            zero(lo + i * HUGE_PAGE, HUGE_PAGE);
        }
    }
}

/// Writes zeros over [addr, addr + len) through /proc/self/mem.
fn zero(addr: usize, len: usize) {
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
            sys::die(&[b"memory pool: cannot zero freed pages through /proc/self/mem"]);
        }
        done += n as usize;
    }
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
    let pool = lock();
    let more = next_step(pool).is_some();
    unlock();
    if !more {
        sys::futex_wait(WORK.as_ptr(), seq, 100_000_000);
    }
    SLEEPING.store(0, SeqCst);
}

/// Zeroes and populates, step by step, then sleeps until woken.
extern "C" fn scrubber_main(_: usize) {
    let all: u64 = !0;
    unsafe { syscall6(RT_SIGPROCMASK, 2 /* SIG_SETMASK */, &all as *const u64 as usize, 0, 8, 0, 0) };
    let control = &crate::env::config().control;
    if !control.is_empty() {
        unsafe { syscall3(SCHED_SETAFFINITY, 0, core::mem::size_of_val(&control.0), control.0.as_ptr() as usize) };
    }
    loop {
        let pool = lock();
        let step = next_step(pool);
        let base = pool.base;
        unlock();
        let Some((first, pages, dirty)) = step else {
            idle_until_work();
            continue;
        };
        scrub(base + first as usize * PAGE, pages * PAGE);
        let pool = lock();
        if dirty {
            let head = &mut pool.ring[pool.ring_head];
            head.0 += pages as u32;
            head.1 -= pages as u32;
            if head.1 == 0 {
                pool.ring_head = (pool.ring_head + 1) % super::RING;
                pool.ring_len -= 1;
            }
            pool.dirty_pages -= pages;
        } else {
            pool.populated += pages;
        }
        pool.buddy.release(first, pages);
        unlock();
        pages_returned();
    }
}
