//! Delegation: delegate threads pinned on the control cores execute syscalls for application
//! threads. Each application thread owns a request slot (a 128-byte line) per nesting depth; it fills it
//! and pushes the slot's index on a FIFO shared by all delegates, which poll it and sleep on a
//! futex when idle. Same address space and file table, so pointer arguments stay valid.
//! When every delegate is busy (blocked in a call) and a request waits, the pool grows.

use crate::sud::{self, KSigaction, SA_RESTART, SA_RESTORER, SA_SIGINFO};
use crate::sys::{self, *};
use crate::thread::Thread;
use core::arch::global_asm;
use core::sync::atomic::{AtomicI32, AtomicU32, Ordering::*};
use coreplane_runtime::mpmc::Queue;

const MAX_SLOTS: usize = 4096;
const MAX_DELEGATES: usize = 64;
const NONE: u32 = u32::MAX;
const FREE: u32 = 0;
const POSTED: u32 = 1;
const RUNNING: u32 = 2;
const DONE: u32 = 3;
/// Polling before sleeping: application side (~20 µs) and delegate side (~50 µs).
const APP_SPINS: u32 = 20_000;
const DELEGATE_SPINS: u32 = 50_000;
const STACK_SIZE: usize = 64 * 1024;

#[repr(C, align(128))]
struct Slot {
    state: AtomicU32,
    waiting: AtomicU32,
    cancel: AtomicU32,
    nr: usize,
    args: [usize; 6],
    result: isize,
    t_post: u64,
    t_start: u64,
}

struct Delegate {
    tid: AtomicI32,
    current: AtomicU32,
}

struct Pool {
    /// Process that owns the delegates (after fork the child has none).
    pid: AtomicI32,
    lock: AtomicU32,
    next_slot: AtomicU32,
    delegates: AtomicU32,
    busy: AtomicU32,
    sleepers: AtomicU32,
    work_seq: AtomicU32,
    queue: Queue,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_SLOT: Slot = Slot {
    state: AtomicU32::new(FREE),
    waiting: AtomicU32::new(0),
    cancel: AtomicU32::new(0),
    nr: 0,
    args: [0; 6],
    result: 0,
    t_post: 0,
    t_start: 0,
};
#[allow(clippy::declare_interior_mutable_const)]
const NO_DELEGATE: Delegate = Delegate { tid: AtomicI32::new(0), current: AtomicU32::new(NONE) };

static mut SLOTS: [Slot; MAX_SLOTS] = [EMPTY_SLOT; MAX_SLOTS];
static DELEGATES: [Delegate; MAX_DELEGATES] = [NO_DELEGATE; MAX_DELEGATES];
static POOL: Pool = Pool {
    pid: AtomicI32::new(0),
    lock: AtomicU32::new(0),
    next_slot: AtomicU32::new(0),
    delegates: AtomicU32::new(0),
    busy: AtomicU32::new(0),
    sleepers: AtomicU32::new(0),
    work_seq: AtomicU32::new(0),
    queue: Queue::new(),
};

global_asm!(
    // coreplane_spawn(flags, stack_top, entry, arg) -> tid: a bare thread running entry(arg).
    ".globl coreplane_spawn",
    "coreplane_spawn:",
    "mov r9, rdx",
    "mov r8, rcx",
    "xor edx, edx",
    "xor r10d, r10d",
    "mov eax, 56",
    "syscall",
    "test rax, rax",
    "jnz 2f",
    "xor ebp, ebp",
    "mov rdi, r8",
    "and rsp, -16",
    "call r9",
    "mov eax, 60",
    "xor edi, edi",
    "syscall",
    "2:",
    "ret",
    // coreplane_delegate_syscall(nr, args) -> result; the syscall instruction's address is
    // known so that an interrupt can tell a blocked delegated call from anything else.
    ".globl coreplane_delegate_syscall",
    "coreplane_delegate_syscall:",
    "mov rax, rdi",
    "mov rdi, [rsi]",
    "mov rdx, [rsi + 16]",
    "mov r10, [rsi + 24]",
    "mov r8, [rsi + 32]",
    "mov r9, [rsi + 40]",
    "mov rsi, [rsi + 8]",
    ".globl coreplane_delegate_site",
    "coreplane_delegate_site:",
    "syscall",
    "ret",
);

extern "C" {
    fn coreplane_spawn(flags: u64, stack_top: usize, entry: extern "C" fn(usize), arg: usize) -> isize;
    fn coreplane_delegate_syscall(nr: usize, args: *const usize) -> isize;
    fn coreplane_delegate_site();
}

fn slot(i: u32) -> &'static mut Slot {
    unsafe { &mut (*core::ptr::addr_of_mut!(SLOTS))[i as usize] }
}

fn spin_until(deadline: u64) {
    while sys::rdtsc() < deadline {
        core::hint::spin_loop();
    }
}

fn forward_cost_ticks() -> u64 {
    let cfg = crate::config();
    cfg.forward_cost_ns * cfg.tsc_khz / 1_000_000
}

/// The SIG_INTERRUPT handler: a delegate blocked in a call whose caller gave up (a signal
/// without SA_RESTART reached the caller) returns EINTR; otherwise the call restarts.
extern "C" fn on_interrupt(_sig: i32, _info: *mut u8, uc: *mut u8) {
    let g = crate::dispatch::gregs(uc);
    let site = coreplane_delegate_site as *const () as u64;
    if g[crate::dispatch::REG_RIP] != site {
        return;
    }
    let me = sys::gettid();
    for d in DELEGATES.iter() {
        if d.tid.load(Relaxed) == me {
            let cur = d.current.load(Acquire);
            if cur != NONE && slot(cur).cancel.load(Acquire) != 0 {
                g[crate::dispatch::REG_RAX] = (-EINTR) as u64;
                g[crate::dispatch::REG_RIP] = site + 2;
            }
        }
    }
}

pub fn install_interrupt_handler() {
    let act = KSigaction {
        handler: on_interrupt as *const () as usize,
        flags: SA_SIGINFO | SA_RESTORER | SA_RESTART,
        restorer: sud::coreplane_sigreturn as *const () as usize,
        mask: 0,
    };
    sud::sigaction(SIG_INTERRUPT, Some(&act), None);
}

fn serve(index: u32, me: &Delegate) {
    let s = slot(index);
    let fc = forward_cost_ticks();
    s.t_start = sys::rdtsc();
    s.state.store(RUNNING, Release);
    me.current.store(index, Release);
    let result = if s.cancel.load(Acquire) != 0 {
        -EINTR
    } else {
        spin_until(s.t_start + fc);
        let mut r = unsafe { coreplane_delegate_syscall(s.nr, s.args.as_ptr()) };
        // An interrupt meant for an earlier request must not fail this one.
        while r == -EINTR && s.cancel.load(Acquire) == 0 {
            r = unsafe { coreplane_delegate_syscall(s.nr, s.args.as_ptr()) };
        }
        spin_until(sys::rdtsc() + fc);
        r
    };
    me.current.store(NONE, Release);
    s.result = result;
    s.state.store(DONE, SeqCst);
    if s.waiting.load(SeqCst) != 0 {
        sys::futex_wake(&s.state as *const AtomicU32 as *const u32, 1);
    }
}

extern "C" fn delegate_main(index: usize) {
    let me = &DELEGATES[index];
    me.tid.store(sys::gettid(), Release);
    // Delegates take no program signals, only the runtime's interrupt.
    let mask: u64 = !(1u64 << (SIG_INTERRUPT - 1));
    unsafe { syscall6(RT_SIGPROCMASK, 2 /* SIG_SETMASK */, &mask as *const u64 as usize, 0, 8, 0, 0) };
    let control = &crate::config().control;
    if !control.is_empty() {
        unsafe { syscall3(SCHED_SETAFFINITY, 0, core::mem::size_of_val(&control.0), control.0.as_ptr() as usize) };
    }
    let word = &POOL.work_seq as *const AtomicU32 as *const u32;
    loop {
        if let Some(i) = POOL.queue.pop() {
            POOL.busy.fetch_add(1, SeqCst);
            serve(i, me);
            POOL.busy.fetch_sub(1, SeqCst);
            continue;
        }
        let mut spins = 0;
        while spins < DELEGATE_SPINS && POOL.queue.is_empty() {
            core::hint::spin_loop();
            spins += 1;
        }
        if spins == DELEGATE_SPINS {
            POOL.sleepers.fetch_add(1, SeqCst);
            let seen = POOL.work_seq.load(SeqCst);
            if POOL.queue.is_empty() {
                sys::futex_wait(word, seen, 0);
            }
            POOL.sleepers.fetch_sub(1, SeqCst);
        }
    }
}

/// Starts one more delegate thread; false at the limit or when out of memory.
fn spawn_delegate() -> bool {
    let n = POOL.delegates.load(Acquire) as usize;
    if n >= MAX_DELEGATES {
        return false;
    }
    let Some(stack) = sys::map_anon(STACK_SIZE) else { return false };
    DELEGATES[n].current.store(NONE, Relaxed);
    DELEGATES[n].tid.store(0, Relaxed);
    let flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
    let tid = unsafe { coreplane_spawn(flags, stack as usize + STACK_SIZE, delegate_main, n) };
    if tid < 0 {
        return false;
    }
    POOL.delegates.store(n as u32 + 1, Release);
    true
}

fn lock() {
    while POOL.lock.compare_exchange(0, 1, Acquire, Relaxed).is_err() {
        core::hint::spin_loop();
    }
}
fn unlock() {
    POOL.lock.store(0, Release);
}

/// Makes sure this process has its delegates (the first call, and the first after a fork).
fn ensure_pool(pid: i32) {
    if POOL.pid.load(Acquire) == pid {
        return;
    }
    lock();
    if POOL.pid.load(Acquire) != pid {
        POOL.queue.reset();
        POOL.next_slot.store(0, Relaxed);
        POOL.delegates.store(0, Relaxed);
        POOL.busy.store(0, Relaxed);
        POOL.sleepers.store(0, Relaxed);
        for _ in 0..crate::config().delegates.max(1) {
            spawn_delegate();
        }
        POOL.pid.store(pid, Release);
    }
    unlock();
}

/// Grows the pool when a request waits while every delegate is busy in a call.
fn maybe_grow() {
    let n = POOL.delegates.load(Acquire);
    if POOL.busy.load(SeqCst) >= n && POOL.lock.load(Relaxed) == 0 {
        lock();
        if POOL.busy.load(SeqCst) >= POOL.delegates.load(Acquire) {
            spawn_delegate();
        }
        unlock();
    }
}

/// Interrupts the delegate running `index`, if one is.
fn cancel(index: u32, pid: i32) {
    slot(index).cancel.store(1, SeqCst);
    let n = POOL.delegates.load(Acquire) as usize;
    for d in &DELEGATES[..n] {
        if d.current.load(Acquire) == index {
            unsafe { syscall3(TGKILL, pid as usize, d.tid.load(Relaxed) as usize, SIG_INTERRUPT) };
        }
    }
}

/// Program handlers finished on `t`; read afresh because a nested trap updates it.
fn handlers_done(t: &Thread) -> u64 {
    unsafe { core::ptr::read_volatile(&t.handlers_done) }
}

/// Runs syscall `nr` on a delegate and waits for it. Returns (result, round-trip ticks,
/// queued ticks), or None when no slot is left (the caller then runs it locally).
pub fn call(t: &mut Thread, nr: usize, args: &[usize; 6]) -> Option<(isize, u64, u64)> {
    if t.local_only {
        return None;
    }
    ensure_pool(t.pid);
    let depth = t.depth as usize;
    if depth >= crate::thread::MAX_DEPTH {
        return None;
    }
    if t.slots[depth] == NONE {
        let i = POOL.next_slot.fetch_add(1, Relaxed);
        if i as usize >= MAX_SLOTS {
            return None;
        }
        t.slots[depth] = i;
    }
    let index = t.slots[depth];
    t.depth += 1;
    let s = slot(index);
    s.cancel.store(0, Relaxed);
    s.waiting.store(0, Relaxed);
    s.nr = nr;
    s.args = *args;
    s.t_post = sys::rdtsc();
    s.state.store(POSTED, Release);
    POOL.queue.push(index);
    if POOL.sleepers.load(SeqCst) > 0 {
        POOL.work_seq.fetch_add(1, SeqCst);
        sys::futex_wake(&POOL.work_seq as *const AtomicU32 as *const u32, 1);
    }
    let mut handlers_seen = handlers_done(t);
    let mut spins = 0u32;
    let mut cancelled = false;
    loop {
        let state = s.state.load(Acquire);
        if state == DONE {
            break;
        }
        if handlers_done(t) != handlers_seen {
            handlers_seen = handlers_done(t);
            let signo = unsafe { core::ptr::read_volatile(&t.last_signo) };
            if !cancelled && !crate::signals::restarts(signo, nr) {
                cancelled = true;
                cancel(index, t.pid);
            }
        }
        if spins < APP_SPINS {
            spins += 1;
            core::hint::spin_loop();
            continue;
        }
        if state == POSTED {
            maybe_grow();
        }
        s.waiting.store(1, SeqCst);
        if s.state.load(SeqCst) != DONE {
            sys::futex_wait(&s.state as *const AtomicU32 as *const u32, state, 1_000_000);
        }
    }
    let done = sys::rdtsc();
    let result = s.result;
    let queued = s.t_start.saturating_sub(s.t_post);
    s.state.store(FREE, Relaxed);
    t.depth -= 1;
    Some((result, done - s.t_post, queued))
}
