//! The program's own Syscall User Dispatch (prctl PR_SET_SYSCALL_USER_DISPATCH), emulated.
//! The runtime arms the kernel's dispatch for itself, so the kernel refuses the program a second
//! one; but every call the program makes already stops in the runtime's SIGSYS handler, with the
//! frame the kernel gives a dispatched call (the call not made, rax its number, si_code
//! SYS_USER_DISPATCH). A call the program's settings dispatch is handed that frame, as its own
//! SIGSYS (Wine handles Windows programs' system calls so). While a thread has the program's
//! dispatch on, every call of the process takes the trap path, rewritten sites included (≈ 2 µs
//! a call); when the last such thread turns it off or ends, the fast path is back.
//! Differs: rt_sigreturn is never dispatched.

use crate::sigframe::{gregs, REG_RIP, REG_RSP, SI_CALL_ADDR_OFF};
use crate::sys::*;
use crate::thread::{self, Thread};
use crate::owner_lock::OwnerLock;
use crate::sys;
use core::sync::atomic::{AtomicIsize, Ordering::SeqCst};

const PR_SYS_DISPATCH_OFF: usize = 0;
const PR_SYS_DISPATCH_EXCLUSIVE_ON: usize = 1;
const PR_SYS_DISPATCH_INCLUSIVE_ON: usize = 2;
const SYSCALL_DISPATCH_FILTER_ALLOW: u8 = 0;
const SYSCALL_DISPATCH_FILTER_BLOCK: u8 = 1;
/// The end of user space: a selector at or past it is refused (EFAULT), as access_ok refuses it.
const TASK_SIZE: usize = 0x7fff_ffff_f000;

/// prctl(PR_SET_SYSCALL_USER_DISPATCH, mode, offset, len, selector) with `a`, checked as the
/// kernel checks it; the settings are the calling thread's (Thread.program_sud).
pub fn set(a: &[usize; 6]) -> isize {
    let (mode, offset, len, selector) = (a[1], a[2], a[3], a[4]);
    match mode {
        PR_SYS_DISPATCH_OFF if offset != 0 || len != 0 || selector != 0 => return -EINVAL,
        PR_SYS_DISPATCH_OFF => {}
        PR_SYS_DISPATCH_EXCLUSIVE_ON | PR_SYS_DISPATCH_INCLUSIVE_ON => {
            if offset != 0 && offset.checked_add(len).is_none_or(|end| end <= offset) {
                return -EINVAL;
            }
            if selector >= TASK_SIZE {
                return -EFAULT;
            }
        }
        _ => return -EINVAL,
    }
    let t = thread::current();
    let was_on = t.program_sud[0] != PR_SYS_DISPATCH_OFF;
    t.program_sud = [mode, offset, len, selector];
    match (was_on, mode != PR_SYS_DISPATCH_OFF) {
        (false, true) => threads_with_dispatch(1),
        (true, false) => threads_with_dispatch(-1),
        _ => {}
    }
    0
}

/// Threads of the process with the program's dispatch on; every call bounces while any has.
static THREADS_ON: AtomicIsize = AtomicIsize::new(0);
/// Held while the count and the bounce set change together, with the program's signals
/// blocked: a thread turning dispatch off must not store its bounce set after one turning it on
/// stored its own (that thread's calls would then skip its dispatch).
static COUNT_LOCK: OwnerLock = OwnerLock::new();

/// Counts a thread that turned the dispatch on (+1) or off (-1), and bounces every call or not.
fn threads_with_dispatch(change: isize) {
    let mask = sys::block_all_but_sigsys();
    COUNT_LOCK.acquire(thread::current().tid as u32);
    let on = THREADS_ON.fetch_add(change, SeqCst) + change > 0;
    crate::fastpath::bounce_every_call(on);
    COUNT_LOCK.release();
    sys::set_mask(mask);
}

/// Thread `t` ends: its dispatch no longer counts.
pub fn thread_ends(t: &Thread) {
    if t.program_sud[0] != PR_SYS_DISPATCH_OFF {
        threads_with_dispatch(-1);
    }
}

/// In a forked child: the program's dispatch is not inherited, as the kernel's is not.
pub fn after_fork(t: &mut Thread) {
    t.program_sud = [0; 4];
    THREADS_ON.store(0, SeqCst);
    COUNT_LOCK.reset();
    crate::fastpath::bounce_every_call(false);
}

/// A trapped call of `t` that stopped at `after_syscall` with frame `uc` and siginfo `info`:
/// true where the program's settings dispatch it, the frame and siginfo then showing the
/// program's own call (a call bounced from a rewritten site stopped in the trap gadget, with the
/// site's return address on the stack).
pub fn dispatches(t: &Thread, uc: *mut u8, info: *mut u8, after_syscall: usize) -> bool {
    let [mode, offset, len, selector] = t.program_sud;
    if mode == PR_SYS_DISPATCH_OFF {
        return false;
    }
    let g = gregs(uc);
    let slot = g[REG_RSP] as usize;
    let (sp, resume) = if crate::fastpath::bounced(after_syscall) {
        crate::fastpath::program_resumes(slot, unsafe { *(slot as *const usize) })
    } else {
        (slot, after_syscall)
    };
    let inside = resume.wrapping_sub(offset) < len;
    if inside == (mode == PR_SYS_DISPATCH_EXCLUSIVE_ON) {
        return false;
    }
    // As the kernel: a selector it cannot read kills the process with SIGSEGV, one holding
    // neither ALLOW nor BLOCK with SIGSYS, whatever the program's handlers.
    let mut state = [SYSCALL_DISPATCH_FILTER_BLOCK];
    if selector != 0 && !t.read_program(selector, &mut state) {
        crate::signals::die_of(SIGSEGV as i32);
    }
    match state[0] {
        SYSCALL_DISPATCH_FILTER_ALLOW => return false,
        SYSCALL_DISPATCH_FILTER_BLOCK => {}
        _ => crate::signals::die_of(SIGSYS as i32),
    }
    g[REG_RIP] = resume as u64;
    g[REG_RSP] = sp as u64;
    unsafe { *(info.add(SI_CALL_ADDR_OFF) as *mut usize) = resume };
    true
}
