//! The exit of a seccomp strict-mode thread that shares its process with other program threads.
//! Such a thread may make no call but read, write, exit and rt_sigreturn, so when it is the
//! last program thread its exit(2) cannot end a process that the runtime's own threads
//! (delegates, the memory pool's scrubber) keep alive, as `process::exit_thread` does for others.
//! A watcher thread of its own, started before the thread enters strict mode, waits for the
//! kernel to clear the thread's tid word at its exit (which needs no call of the thread's), then
//! ends the process with the thread's code if it was the last; otherwise it ends itself, and the
//! last program thread's exit ends the process. The thread keeps trapping (`process::strict_mode`),
//! so its exit(2) reaches the runtime from any site; an end the runtime did not see is the
//! kernel's SIGKILL for a call strict mode forbids, which the watcher counts as the thread's exit,
//! and which ends the process if the thread was the last.
//! The word the kernel clears is the runtime's own: the program's (in glibc, in the thread's
//! stack) may be freed or reused once it reads 0, or unmapped before (then the kernel's clear
//! fails and wakes no one), so the watcher clears the program's word itself, as the kernel would
//! have, and never reads it.

use crate::sys::{self, *};
use crate::thread::Thread;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicUsize, Ordering::*};

const PR_GET_TID_ADDRESS: usize = 40;
const SET_TID_ADDRESS: usize = 218;
/// The kernel wakes a cleared tid word with a shared FUTEX_WAKE (as pthread_join waits).
const FUTEX_WAIT_SHARED: usize = 0;
const FUTEX_WAKE_SHARED: usize = 1;
const STACK_SIZE: usize = 16 * 1024;
/// Strict threads watched at once. One beyond them has no watcher: its exit(2) is counted, but
/// an end by the kernel's SIGKILL is not, and if it ends last, no thread ends the process.
const MAX_WATCHED: usize = 64;

/// One watched thread, its tid words, and what it left at its exit.
struct Watch {
    /// Who holds this watch: 0 when free; a pid that is not the process's own (a parent's, which
    /// fork copied without its watcher) counts as free.
    owner: AtomicI32,
    /// The watched thread's process once its watcher runs (`watching`), 0 when it is done.
    pid: AtomicI32,
    /// The watched thread.
    tid: AtomicI32,
    /// The program's tid word (0: none), cleared by the watcher.
    program_word: AtomicUsize,
    /// The tid word the kernel clears at the thread's exit.
    own_word: AtomicU32,
    /// The thread's exit(2) reached the runtime (`exiting`).
    seen: AtomicBool,
    /// The kernel refused the thread strict mode (`unwatch`): nothing to count or clear.
    cancelled: AtomicBool,
    last: AtomicBool,
    code: AtomicUsize,
    /// The watcher's stack, unmapped as it ends.
    stack: AtomicUsize,
}

const FREE: Watch = Watch {
    owner: AtomicI32::new(0),
    pid: AtomicI32::new(0),
    tid: AtomicI32::new(0),
    program_word: AtomicUsize::new(0),
    own_word: AtomicU32::new(0),
    seen: AtomicBool::new(false),
    cancelled: AtomicBool::new(false),
    last: AtomicBool::new(false),
    code: AtomicUsize::new(0),
    stack: AtomicUsize::new(0),
};
static WATCHES: [Watch; MAX_WATCHED] = [FREE; MAX_WATCHED];

/// A free watch, taken for process `pid`; None when every one is in use.
fn take(pid: i32) -> Option<&'static Watch> {
    WATCHES.iter().find(|w| {
        let owner = w.owner.load(Acquire);
        owner != pid && w.owner.compare_exchange(owner, pid, AcqRel, Relaxed).is_ok()
    })
}

/// `t`, not its process's only program thread, is about to enter strict mode: start its watcher.
pub fn watch(t: &Thread) {
    let mut word = 0usize;
    if unsafe { syscall3(PRCTL, PR_GET_TID_ADDRESS, &mut word as *mut usize as usize, 0) } != 0 {
        return; // a kernel without CONFIG_CHECKPOINT_RESTORE: the word may be the program's
    }
    let Some(w) = take(t.pid) else { return };
    let Some(stack) = sys::map_anon(STACK_SIZE) else {
        w.owner.store(0, Release);
        return;
    };
    w.own_word.store(t.tid as u32, Relaxed);
    unsafe { syscall3(SET_TID_ADDRESS, w.own_word.as_ptr() as usize, 0, 0) };
    w.program_word.store(word, Relaxed);
    w.tid.store(t.tid, Relaxed);
    w.seen.store(false, Relaxed);
    w.cancelled.store(false, Relaxed);
    w.last.store(false, Relaxed);
    w.stack.store(stack as usize, Relaxed);
    w.pid.store(t.pid, Release);
    if sys::spawn_thread(stack as usize + STACK_SIZE, watcher, w as *const Watch as usize) < 0 {
        unsafe { syscall3(SET_TID_ADDRESS, word, 0, 0) };
        unsafe { syscall3(MUNMAP, stack as usize, STACK_SIZE, 0) };
        w.pid.store(0, Release);
        w.owner.store(0, Release);
    }
}

/// The kernel refused `t` strict mode (EINVAL, a thread with a filter already): its tid word is
/// the program's again and its watcher ends without counting it or clearing anything, so the
/// thread's own exit later is counted once, as any thread's.
pub fn unwatch(t: &Thread) {
    let Some(w) = WATCHES.iter().find(|w| w.pid.load(Acquire) == t.pid && w.tid.load(Relaxed) == t.tid) else { return };
    unsafe { syscall3(SET_TID_ADDRESS, w.program_word.load(Relaxed), 0, 0) };
    w.cancelled.store(true, Release);
    w.own_word.store(0, Release);
    unsafe { syscall3(FUTEX, w.own_word.as_ptr() as usize, FUTEX_WAKE_SHARED, 1) };
}

/// Whether process `pid` has a watcher thread (which, like a delegate, keeps it alive).
pub fn watching(pid: i32) -> bool {
    WATCHES.iter().any(|w| w.pid.load(Acquire) == pid)
}

/// Strict-mode thread `t` exits with `code`; `last`: it is the last program thread. Plain
/// loads and stores: the thread may make no other call. Only its own watch is written: another
/// strict thread's later end must not look seen.
pub fn exiting(t: &Thread, last: bool, code: usize) {
    if let Some(w) = WATCHES.iter().find(|w| w.pid.load(Acquire) == t.pid && w.tid.load(Relaxed) == t.tid) {
        w.code.store(code, Relaxed);
        w.last.store(last, Relaxed);
        w.seen.store(true, Release);
    }
}

/// The watcher of the watch at `arg`: takes no signal, waits for its tid word to be cleared,
/// clears the program's, then ends the process if the watched thread was the last program
/// thread, or else only itself, its watch given back.
extern "C" fn watcher(arg: usize) {
    let w = unsafe { &*(arg as *const Watch) };
    let all: u64 = !0;
    unsafe { syscall6(RT_SIGPROCMASK, 2 /* SIG_SETMASK */, &all as *const u64 as usize, 0, 8, 0, 0) };
    loop {
        let v = w.own_word.load(Acquire);
        if v == 0 {
            break;
        }
        unsafe { syscall6(FUTEX, w.own_word.as_ptr() as usize, FUTEX_WAIT_SHARED, v as usize, 0, 0, 0) };
    }
    // Before the program's word is cleared: a thread that joins the watched one and then exits
    // must find it gone from the count (it is then the last one; strict_unseen second ended
    // with SIGKILL instead of the main thread's code).
    let pid = w.pid.load(Relaxed);
    let cancelled = w.cancelled.load(Acquire);
    if cancelled {
        // The thread is not in strict mode and ends as any other: nothing of it is this watcher's.
    } else if !w.seen.load(Acquire) {
        // Killed by the kernel (SIGKILL): the process dies of it too if the thread was its last.
        if crate::app_threads::exiting(pid) {
            unsafe { syscall3(TGKILL, pid as usize, sys::gettid() as usize, SIGKILL) };
        }
    } else if w.last.load(Relaxed) {
        crate::profile::end_process(w.code.load(Relaxed) as u64 & 0xff, crate::thread::every_thread_sandboxed(), pid);
        sys::exit_group(w.code.load(Relaxed));
    }
    let word = if cancelled { 0 } else { w.program_word.load(Relaxed) };
    // As the kernel's clear at a thread's exit: a write that may fail, then one shared wake.
    // Through the watcher's own tid: a leader that has ended has no memory to write to (ESRCH).
    if word != 0 && sys::write_program(sys::gettid(), word, &0u32.to_ne_bytes()) {
        unsafe { syscall3(FUTEX, word, FUTEX_WAKE_SHARED, 1) };
    }
    let stack = w.stack.load(Relaxed);
    w.pid.store(0, Release);
    w.owner.store(0, Release);
    sys::exit_unmapping(stack, STACK_SIZE, 0)
}
