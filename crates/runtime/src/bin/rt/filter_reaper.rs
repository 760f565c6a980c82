//! Program threads that a seccomp filter of the program's may kill unseen, among others.
//! A filter that returns SECCOMP_RET_KILL_THREAD ends its thread in the kernel, without the
//! runtime's `process::exit_thread`, so the program's thread count keeps it: when the others
//! then exit, or when it was the last, the runtime's own threads (delegates, the memory pool's
//! scrubber) kept the process alive, and since they take no signal not even SIGTERM ended it.
//! Natively the process ends with its last thread. A thread that installs such a filter while
//! other program threads exist starts the reaper first (so that it does not carry the filter),
//! and registers itself; the threads it creates carry its filter and register too
//! (`adopt`, in their first code, which makes no call). The reaper looks every
//! `LOOK_EVERY_NS` for registered threads the kernel no longer knows whose exit the runtime did
//! not see: each is counted out of the program's threads, and if it was the last, the process
//! dies of SIGSYS as the kernel's killed thread did.
//! What is left: a filter put on every thread (SECCOMP_FILTER_FLAG_TSYNC) registers no thread,
//! nor does one beyond `MAX_THREADS`; the process ends up to `LOOK_EVERY_NS` after its last
//! thread; and the reaper is one more thread in /proc/PID/task while it runs.

use crate::sys::{self, *};
use crate::thread::Thread;
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering::*};

/// Registered threads at most (a slot holds a tid, 0 when free).
const MAX_THREADS: usize = 256;
const LOOK_EVERY_NS: u64 = 20_000_000;
const STACK_SIZE: usize = 16 * 1024;
/// BPF_RET | BPF_K: return the constant k; BPF_RET | BPF_A returns the accumulator (any action).
const BPF_CLASS_MASK: u16 = 0x07;
const BPF_RET: u16 = 0x06;
const BPF_RVAL_MASK: u16 = 0x18;
const BPF_K: u16 = 0x00;
const SECCOMP_RET_ACTION_FULL: u32 = 0xffff_0000;
const SECCOMP_RET_KILL_THREAD: u32 = 0;

static TIDS: [AtomicI32; MAX_THREADS] = [const { AtomicI32::new(0) }; MAX_THREADS];
/// The process whose reaper runs (a forked child's copy names its parent: none runs there).
static PID: AtomicI32 = AtomicI32::new(0);
static TID: AtomicI32 = AtomicI32::new(0);
static STACK: AtomicUsize = AtomicUsize::new(0);
/// Set to end the reaper (`retire`); it sleeps on this word.
static STOP: AtomicU32 = AtomicU32::new(0);

extern "C" {
    fn coreplane_spawn(flags: u64, stack_top: usize, entry: extern "C" fn(usize), arg: usize) -> isize;
}

/// Whether process `pid` has a reaper (which, like a delegate, keeps it alive).
pub fn running(pid: i32) -> bool {
    PID.load(Acquire) == pid
}

/// Thread `t`, among other program threads, is about to install the filter program at `prog`
/// (a struct sock_fprog of the program's) on itself: if the filter can kill a thread, the
/// reaper starts and `t` registers. A filter the kernel will refuse costs a registration only.
pub fn before_filter(t: &Thread, prog: usize) {
    if !may_kill_thread(t, prog) {
        return;
    }
    if !running(t.pid) && !start(t.pid) {
        return;
    }
    register(t.tid);
}

/// A thread created by a filtered one, in its first code: registered if its process has a reaper.
pub fn adopt(t: &Thread) {
    if running(t.pid) {
        register(t.tid);
    }
}

/// Thread `t` exits through the runtime (`process::exit_thread`): its end is seen, not the
/// reaper's to count. Before the exit call, so the reaper never finds it gone but registered.
pub fn exiting(t: &Thread) {
    if running(t.pid) {
        if let Some(slot) = TIDS.iter().find(|s| s.load(Relaxed) == t.tid) {
            let _ = slot.compare_exchange(t.tid, 0, AcqRel, Relaxed);
        }
    }
}

/// The program's only thread is about to make a call the kernel refuses in a process with other
/// threads (`process::alone_for`): the reaper ends (the delegates and the pool's threads end
/// with it, so nothing keeps the process alive after that thread, as natively).
pub fn retire(pid: i32) {
    if !running(pid) {
        return;
    }
    STOP.store(1, Release);
    sys::futex_wake(STOP.as_ptr(), 1);
    crate::delegate::reap(pid, TID.load(Acquire), STACK.load(Relaxed), STACK_SIZE);
    PID.store(0, Release);
}

/// Whether the classic BPF program at `prog` returns SECCOMP_RET_KILL_THREAD anywhere, or an
/// action it computes; false when it cannot be read (the kernel refuses it with EFAULT then).
fn may_kill_thread(t: &Thread, prog: usize) -> bool {
    let mut head = [0u8; 16];
    if !t.read_program(prog, &mut head) {
        return false;
    }
    let len = u16::from_ne_bytes([head[0], head[1]]) as usize;
    let mut at = usize::from_ne_bytes(head[8..16].try_into().unwrap());
    let mut chunk = [0u8; 8 * 128];
    let mut left = len.min(4096);
    while left > 0 {
        let n = left.min(128);
        if !t.read_program(at, &mut chunk[..8 * n]) {
            return false;
        }
        for insn in chunk[..8 * n].chunks_exact(8) {
            let code = u16::from_ne_bytes([insn[0], insn[1]]);
            let k = u32::from_ne_bytes(insn[4..8].try_into().unwrap());
            if code & BPF_CLASS_MASK == BPF_RET
                && (code & BPF_RVAL_MASK != BPF_K || k & SECCOMP_RET_ACTION_FULL == SECCOMP_RET_KILL_THREAD)
            {
                return true;
            }
        }
        at += 8 * n;
        left -= n;
    }
    false
}

/// Starts the reaper for process `pid`, unless another thread just did; false where it cannot
/// (no memory, no thread). The process is claimed first, so two threads that install filters
/// at once start one reaper.
fn start(pid: i32) -> bool {
    let before = PID.load(Acquire);
    if before == pid || PID.compare_exchange(before, pid, AcqRel, Acquire).is_err() {
        return running(pid);
    }
    let Some(stack) = sys::map_anon(STACK_SIZE) else {
        PID.store(0, Release);
        return false;
    };
    for slot in &TIDS {
        slot.store(0, Relaxed);
    }
    STOP.store(0, Relaxed);
    STACK.store(stack as usize, Relaxed);
    let flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
    let tid = unsafe { coreplane_spawn(flags, stack as usize + STACK_SIZE, reaper, pid as usize) };
    if tid < 0 {
        unsafe { syscall3(MUNMAP, stack as usize, STACK_SIZE, 0) };
        PID.store(0, Release);
        return false;
    }
    TID.store(tid as i32, Release);
    true
}

fn register(tid: i32) {
    if TIDS.iter().any(|s| s.load(Relaxed) == tid) {
        return;
    }
    let _ = TIDS.iter().find(|s| s.compare_exchange(0, tid, AcqRel, Relaxed).is_ok());
}

/// The reaper of process `arg`: takes no signal; every LOOK_EVERY_NS, counts out the registered
/// threads that ended unseen, and ends the process as the last of them did.
extern "C" fn reaper(arg: usize) {
    let pid = arg as i32;
    let all: u64 = !0;
    unsafe { syscall6(RT_SIGPROCMASK, 2 /* SIG_SETMASK */, &all as *const u64 as usize, 0, 8, 0, 0) };
    while STOP.load(Acquire) == 0 {
        sys::futex_wait(STOP.as_ptr(), 0, LOOK_EVERY_NS);
        for slot in &TIDS {
            let tid = slot.load(Acquire);
            if tid == 0 || unsafe { syscall3(TGKILL, pid as usize, tid as usize, 0) } != -ESRCH {
                continue;
            }
            // Its exit(2) clears the slot before the thread ends: a slot still held is unseen.
            if slot.compare_exchange(tid, 0, AcqRel, Relaxed).is_ok() && crate::app_threads::exiting(pid) {
                die_of_sigsys(pid);
            }
        }
    }
    // Returning ends the thread (coreplane_spawn); `retire` frees its stack once it is gone.
}

/// Ends process `pid` by SIGSYS with its default action, as the kernel ended its last thread.
fn die_of_sigsys(pid: i32) -> ! {
    let default = [0usize; 4]; // SIG_DFL, no flags, no restorer, empty mask
    unsafe { syscall6(RT_SIGACTION, SIGSYS, default.as_ptr() as usize, 0, 8, 0, 0) };
    let only_sigsys: u64 = !(1 << (SIGSYS - 1));
    unsafe { syscall6(RT_SIGPROCMASK, 2 /* SIG_SETMASK */, &only_sigsys as *const u64 as usize, 0, 8, 0, 0) };
    unsafe { syscall3(TGKILL, pid as usize, sys::gettid() as usize, SIGSYS) };
    sys::exit_group(128 + SIGSYS)
}
