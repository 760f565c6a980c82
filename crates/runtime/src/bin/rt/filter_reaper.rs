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

static TIDS: [AtomicI32; MAX_THREADS] = [const { AtomicI32::new(0) }; MAX_THREADS];
/// The process whose reaper runs (a forked child's copy names its parent: none runs there).
static PID: AtomicI32 = AtomicI32::new(0);
static TID: AtomicI32 = AtomicI32::new(0);
static STACK: AtomicUsize = AtomicUsize::new(0);
/// Set to end the reaper (`retire`); it sleeps on this word.
static STOP: AtomicU32 = AtomicU32::new(0);

/// Whether process `pid` has a reaper (which, like a delegate, keeps it alive).
pub fn running(pid: i32) -> bool {
    PID.load(Acquire) == pid
}

/// Thread `t`, among other program threads, is about to install the filter program at `prog`
/// (a struct sock_fprog of the program's) on itself: if the filter can kill a thread, the
/// reaper starts and `t` registers. A filter the kernel will refuse costs a registration only.
pub fn before_filter(t: &Thread, prog: usize) {
    if !crate::filter_prog::may_kill_thread(t, prog) {
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

/// Thread `t` exits through the runtime (`process::exit_thread`), before it is counted out:
/// its end is seen, not the reaper's to count (its slot is cleared before the exit call, so the
/// reaper never finds it gone but registered), and the registered threads that ended unseen
/// are counted out first, so that its exit is found the last if it is (a thread the filter
/// killed just before, not yet seen by the reaper, made an exit 0 end by SIGSYS).
pub fn exiting(t: &Thread) {
    if running(t.pid) {
        if let Some(slot) = TIDS.iter().find(|s| s.load(Relaxed) == t.tid) {
            let _ = slot.compare_exchange(t.tid, 0, AcqRel, Relaxed);
        }
        count_out(t.pid, !t.is_filtered());
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

/// Starts the reaper for process `pid`, unless another thread just did; false where it cannot
/// (no memory, no thread). The process is claimed first, so two threads that install filters
/// at once start one reaper.
fn start(pid: i32) -> bool {
    // Claimed as -pid while the slots are emptied (a forked child's copy holds its parent's):
    // another thread that installs a filter meanwhile waits, then registers.
    let before = PID.load(Acquire);
    if before == pid || before == -pid || PID.compare_exchange(before, -pid, AcqRel, Acquire).is_err() {
        while PID.load(Acquire) == -pid {
            unsafe { syscall3(SCHED_YIELD, 0, 0, 0) };
        }
        return running(pid);
    }
    for slot in &TIDS {
        slot.store(0, Relaxed);
    }
    let Some(stack) = sys::map_anon(STACK_SIZE) else {
        PID.store(0, Release);
        return false;
    };
    STOP.store(0, Relaxed);
    STACK.store(stack as usize, Relaxed);
    let tid = sys::spawn_thread(stack as usize + STACK_SIZE, reaper, pid as usize);
    if tid < 0 {
        unsafe { syscall3(MUNMAP, stack as usize, STACK_SIZE, 0) };
        PID.store(0, Release);
        return false;
    }
    TID.store(tid as i32, Release);
    PID.store(pid, Release);
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
        if count_out(pid, true) {
            die_of_sigsys(pid);
        }
    }
    // Returning ends the thread (`sys::spawn_thread`); `retire` frees its stack once it is gone.
}

/// Counts the registered threads of process `pid` that ended unseen out of the program's
/// threads; whether one of them was the last. Its exit(2) clears a thread's slot before it
/// ends, so a slot still held is an end the runtime did not see. `leader_too`: ask /proc about
/// the process's leader, which stays a zombie the kernel still finds (tgkill) until the last
/// thread ends (the program's thread may not be allowed that call: then its end is left to the
/// reaper).
fn count_out(pid: i32, leader_too: bool) -> bool {
    let mut last = false;
    for slot in &TIDS {
        let tid = slot.load(Acquire);
        if tid == 0 {
            continue;
        }
        let found = unsafe { syscall3(TGKILL, pid as usize, tid as usize, 0) };
        let ended = found == -ESRCH || found == 0 && tid == pid && leader_too && leader_ended(pid);
        if ended && slot.compare_exchange(tid, 0, AcqRel, Relaxed).is_ok() {
            last |= crate::app_threads::exiting(pid);
        }
    }
    last
}

/// Whether the leader of process `pid` has ended (a zombie, 'Z', or dead, 'X', in its task's
/// /proc stat).
fn leader_ended(pid: i32) -> bool {
    let mut path = [0u8; 48];
    let mut digits = [0u8; 20];
    let parts: [&[u8]; 3] = [b"/proc/self/task/", sys::fmt_u64(pid as u64, &mut digits), b"/stat\0"];
    let mut n = 0;
    for p in parts {
        path[n..n + p.len()].copy_from_slice(p);
        n += p.len();
    }
    let fd = sys::open(path.as_ptr(), O_RDONLY | O_CLOEXEC);
    if fd < 0 {
        return fd == -ENOENT;
    }
    let mut buf = [0u8; 512];
    let len = unsafe { syscall3(READ, fd as usize, buf.as_mut_ptr() as usize, buf.len()) };
    unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
    let text = &buf[..len.max(0) as usize];
    // "pid (comm) S ...": the state follows the last ')'.
    match text.iter().rposition(|c| *c == b')') {
        Some(i) => matches!(text.get(i + 2), Some(b'Z') | Some(b'X')),
        None => false,
    }
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
