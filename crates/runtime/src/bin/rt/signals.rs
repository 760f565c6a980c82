//! The signal family: the runtime's own signals stay hidden, and program handlers are watched.
//! SIGSYS and SIG_INTERRUPT belong to the runtime, so the program may neither block SIGSYS nor
//! replace either handler (their actions are virtual: the program sets and reads its own, as
//! natively); the end of every program handler (its rt_sigreturn) is seen here, which is how a
//! delegated blocking call learns that a signal interrupted its caller.

use crate::sigframe::{gregs, REG_RIP, REG_RSP};
use crate::sigaction::{coreplane_sigreturn, KSigaction, SA_RESTART, SA_SIGINFO};
use crate::sys::{self, *};
use crate::{program_signal, thread};

const SIGSYS_BIT: u64 = 1 << (SIGSYS - 1);
const NSIG: usize = 64;

/// The program's own actions for the runtime's signals (SIGSYS, SIG_INTERRUPT), by that order.
static mut VIRTUAL: [KSigaction; 2] = [KSigaction { handler: 0, flags: 0, restorer: 0, mask: 0 }; 2];
/// What the kernel checks in rt_sigaction before anything else.
const SIGSET_SIZE: usize = 8;
const SIGSTOP: usize = 19;

/// Calls that a signal with SA_RESTART does not restart (the kernel returns EINTR for them,
/// or their remaining time): see signal(7), "Interruption of system calls".
fn never_restarted(nr: usize) -> bool {
    matches!(nr, 7 /*poll*/ | 23 /*select*/ | 34 /*pause*/ | 35 /*nanosleep*/ | 128 /*rt_sigtimedwait*/
        | 130 /*rt_sigsuspend*/ | 232 /*epoll_wait*/ | 230 /*clock_nanosleep*/ | 270 /*pselect6*/
        | 271 /*ppoll*/ | 281 /*epoll_pwait*/ | 441 /*epoll_pwait2*/ | 299 /*recvmmsg*/ | 69 /*msgsnd*/
        | 70 /*msgrcv*/ | 65 /*semop*/ | 220 /*semtimedop*/ | 208 /*io_getevents*/)
}

/// Whether a call interrupted by `signo`'s handler resumes (true) or fails with EINTR.
pub fn restarts(signo: i32, nr: usize) -> bool {
    let flags = if signo > 0 { program_signal::program_flags(signo as usize) } else { 0 };
    flags & SA_RESTART != 0 && !never_restarted(nr)
}

/// rt_sigaction: SIGSYS and SIG_INTERRUPT are virtual, other masks lose SIGSYS.
/// Handlers are installed with SA_SIGINFO whatever the program asked (a plain handler ignores
/// the extra arguments), because only then does the kernel put the signal number in the frame
/// that `on_sigreturn` reads; the program is shown its own flags. Go's runtime asks for every
/// signal from 1 to 64 at start-up and stops if one fails.
pub fn rt_sigaction(sig: usize, act: usize, old: usize, size: usize) -> isize {
    let virtual_slot = match sig {
        SIGSYS => Some(0),
        SIG_INTERRUPT => Some(1),
        _ => None,
    };
    unsafe {
        if let Some(i) = virtual_slot {
            // The kernel's own checks, in its order: the set size, then the signal.
            if size != SIGSET_SIZE {
                return -EINVAL;
            }
            // As the kernel: the new action read first (EFAULT changes nothing), the old one
            // written after the change (EFAULT then, with the change made).
            let prev = VIRTUAL[i];
            if act != 0 {
                let Some(new) = KSigaction::read_from_program(act) else { return -EFAULT };
                VIRTUAL[i] = new;
            }
            if old != 0 && !prev.write_to_program(old) {
                return -EFAULT;
            }
            return 0;
        }
        if size != SIGSET_SIZE || (act != 0 && (sig == SIGKILL || sig == SIGSTOP)) {
            return syscall6(RT_SIGACTION, sig, act, old, size, 0, 0);
        }
        let mut copy;
        let previous = program_signal::handler_of(sig);
        let act_ptr = if act != 0 {
            let Some(given) = KSigaction::read_from_program(act) else { return -EFAULT };
            copy = given;
            copy.mask &= !SIGSYS_BIT;
            if copy.handler > 1 {
                copy.flags |= SA_SIGINFO; // not for SIG_DFL (0) and SIG_IGN (1)
            }
            program_signal::route(sig, &mut copy);
            &copy as *const KSigaction as usize
        } else {
            0
        };
        let before = program_signal::program_flags(sig);
        let r = syscall6(RT_SIGACTION, sig, act_ptr, old, 8, 0, 0);
        if r == 0 && sig <= NSIG {
            if old != 0 {
                let o = &mut *(old as *mut KSigaction);
                o.flags = (o.flags & !SA_SIGINFO) | (before & SA_SIGINFO);
                o.handler = program_signal::shown(o.handler, previous);
            }
            if act != 0 {
                program_signal::set_program_flags(sig, (*(act as *const KSigaction)).flags);
            }
        }
        r
    }
}

/// The signals whose actions are virtual (SIGSYS and SIG_INTERRUPT, the runtime's handlers in
/// the kernel), and of those the ones the program's own actions ignore and catch: what
/// /proc/PID/status's SigIgn and SigCgt show the program of them (`task_view`).
pub fn virtual_actions() -> (u64, u64, u64) {
    let all = SIGSYS_BIT | 1 << (SIG_INTERRUPT - 1);
    let (mut ignored, mut caught) = (0, 0);
    for (i, sig) in [SIGSYS, SIG_INTERRUPT].into_iter().enumerate() {
        let handler = unsafe { (*core::ptr::addr_of!(VIRTUAL))[i].handler };
        match handler {
            0 => {}
            1 => ignored |= 1 << (sig - 1),
            _ => caught |= 1 << (sig - 1),
        }
    }
    (all, ignored, caught)
}

/// Copies a sigset argument of `size` bytes without SIGSYS; returns the pointer to pass on.
/// The set is read only where the kernel would read it, after its size check and as its copy
/// would: a wrong size or an unreadable set goes to the kernel as it is, which fails the call
/// (EINVAL, EFAULT) without reading it, as natively; 0 stays 0.
fn without_sigsys(set: usize, size: usize, copy: &mut u64) -> usize {
    if set == 0 || size != SIGSET_SIZE {
        return set;
    }
    let Some(bits) = read_sigset(set) else { return set };
    *copy = bits & !SIGSYS_BIT;
    copy as *mut u64 as usize
}

/// The program's signal set at `set`, or None where the kernel's copy of it would fail. Where
/// nothing but the caller can unmap the set meanwhile (the only program thread, no process
/// sharing its memory), the kernel checks it first: rt_sigprocmask with a `how` it refuses
/// copies the set, then fails (EINVAL, or EFAULT where the copy failed) and changes nothing;
/// the set is then read directly: one call costing a null call (≈ 0.2 µs here). Elsewhere
/// another thread may unmap the set between that check and the read, and the runtime would
/// fault where natively the call fails with EFAULT: the kernel copies it (process_vm_readv,
/// ≈ 2.4 µs). A thread under a seccomp filter of the program's, which would see the check (and
/// might kill the process for it), makes no call (Thread::read_program).
fn read_sigset(set: usize) -> Option<u64> {
    let t = thread::current();
    if !t.is_filtered() && crate::app_threads::memory_private(t) {
        match unsafe { syscall6(RT_SIGPROCMASK, usize::MAX /* how = -1 */, set, 0, SIGSET_SIZE, 0, 0) } {
            r if r == -EINVAL => return Some(u64::from_ne_bytes(unsafe { core::ptr::read_volatile(set as *const [u8; 8]) })),
            r if r == -EFAULT => return None,
            _ => {}
        }
    }
    let mut bytes = [0u8; SIGSET_SIZE];
    t.read_program(set, &mut bytes).then(|| u64::from_ne_bytes(bytes))
}

/// Syscalls that take a signal mask, run locally with SIGSYS removed from it.
pub fn masked_call(nr: usize, a: &[usize; 6]) -> isize {
    let mut m = 0u64;
    let mut a = *a;
    unsafe {
        match nr {
            // Never with SIGSYS blocked, even for an instant: session 7 let the kernel block a
            // SIG_BLOCK set as given and unblocked SIGSYS after, and a signal that arrived
            // meanwhile ran its handler with SIGSYS blocked, whose first trap made the kernel kill
            // the process with SIGSYS (tests/programs/block_race.c, every run). SIG_UNBLOCK may
            // unblock SIGSYS.
            RT_SIGPROCMASK if a[0] != 1 /* SIG_UNBLOCK */ => a[1] = without_sigsys(a[1], a[3], &mut m),
            RT_SIGSUSPEND => a[0] = without_sigsys(a[0], a[1], &mut m),
            PPOLL => a[3] = without_sigsys(a[3], a[4], &mut m),
            EPOLL_PWAIT | EPOLL_PWAIT2 => a[4] = without_sigsys(a[4], a[5], &mut m),
            PSELECT6 if a[5] != 0 => {
                // The sixth argument points to { const sigset_t *ss; size_t ss_len }.
                let mut bytes = [0u8; 16];
                if thread::current().read_program(a[5], &mut bytes) {
                    let (ss, len) = bytes.split_at(8);
                    let ss = usize::from_ne_bytes(ss.try_into().unwrap_or_default());
                    let len = usize::from_ne_bytes(len.try_into().unwrap_or_default());
                    let copy = [without_sigsys(ss, len, &mut m), len];
                    return syscall6(nr, a[0], a[1], a[2], a[3], a[4], copy.as_ptr() as usize);
                }
            }
            _ => {}
        }
        syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
    }
}

/// A program handler returns: note which signal it handled, then let the kernel's
/// rt_sigreturn run from the runtime's gadget with the program's stack pointer, so the
/// program's frame (not the runtime's) is the one restored.
pub fn on_sigreturn(uc: *mut u8) {
    let g = gregs(uc);
    let frame = g[REG_RSP] as usize;
    crate::program_signal::handler_returns(frame as *mut u8);
    g[REG_RIP] = coreplane_sigreturn as *const () as u64;
}

const SA_RESETHAND: u64 = 0x8000_0000;

/// A SIGSYS of the program's own (its seccomp filter trapped a call, made by the program or by
/// the runtime for it): its handler runs as the kernel would run it, with the kernel's siginfo
/// and frame (a handler that sets the frame's rax answers the call, as natively); with no
/// handler, or SIG_IGN, the process dies of SIGSYS, as the kernel forces a seccomp trap.
pub fn program_sigsys(sig: i32, info: *mut u8, uc: *mut u8) {
    deliver_virtual(0, sig, info, uc, true);
}

/// SIG_INTERRUPT reached a program thread: it is the program's own signal (the runtime sends it
/// only to delegates), delivered by the program's action for it.
pub fn program_interrupt_signal(sig: i32, info: *mut u8, uc: *mut u8) {
    deliver_virtual(1, sig, info, uc, false);
}

/// The process dies of `sig` (one whose default action terminates), whatever the program's
/// action for it, as when the kernel forces a fatal signal.
pub fn die_of(sig: i32) -> ! {
    let default = KSigaction::default();
    crate::sigaction::sigaction(sig as usize, Some(&default), None);
    let t = thread::current();
    let bit: u64 = 1 << (sig - 1);
    unsafe {
        syscall6(RT_SIGPROCMASK, 1 /* SIG_UNBLOCK */, &bit as *const u64 as usize, 0, 8, 0, 0);
        syscall3(TGKILL, t.pid as usize, t.tid as usize, sig as usize);
    }
    sys::exit_group(128 + sig as usize) // not reached: the signal is unblocked and fatal
}

/// Runs the program's action for one of the runtime's signals (VIRTUAL[i]), from the runtime's
/// handler for it: the program's handler with its sa_mask added (the signal itself stays
/// unblocked, as if SA_NODEFER: the runtime needs it), then the mask as it was; the default
/// action (this signal's: both terminate) by re-raising it with SIG_DFL; SIG_IGN ignores it
/// unless the kernel `forced` it (a seccomp trap), which kills.
fn deliver_virtual(i: usize, sig: i32, info: *mut u8, uc: *mut u8, forced: bool) {
    let act = unsafe { VIRTUAL[i] };
    if act.handler == 1 && !forced {
        return;
    }
    if act.handler <= 1 {
        die_of(sig);
    }
    if act.flags & SA_RESETHAND != 0 {
        unsafe { VIRTUAL[i] = KSigaction::default() };
    }
    let mask = act.mask & !SIGSYS_BIT & !(1u64 << (sig - 1));
    let mut old = 0u64;
    unsafe { syscall6(RT_SIGPROCMASK, 0 /* SIG_BLOCK */, &mask as *const u64 as usize, &mut old as *mut u64 as usize, 8, 0, 0) };
    // A seccomp trap's handler makes its calls as natively, where a filter that reads their
    // instruction pointer sees them (`sud::pass_through`).
    let through = forced && crate::sud::ip_filtered();
    let passed = through && crate::sud::pass_through(true);
    if act.flags & SA_SIGINFO != 0 {
        let handler: extern "C" fn(i32, *mut u8, *mut u8) = unsafe { core::mem::transmute(act.handler) };
        handler(sig, info, uc);
    } else {
        let handler: extern "C" fn(i32) = unsafe { core::mem::transmute(act.handler) };
        handler(sig);
    }
    if through {
        crate::sud::pass_through(passed);
    }
    unsafe { syscall6(RT_SIGPROCMASK, 2 /* SIG_SETMASK */, &old as *const u64 as usize, 0, 8, 0, 0) };
}

const SIGPIPE: usize = 13;
const SIGXFSZ: usize = 25;
const MSG_NOSIGNAL: usize = 0x4000;
const RT_TGSIGQUEUEINFO: usize = 297;
const GETUID: usize = 102;

/// Whether call `nr` with arguments `a` makes the kernel send SIGPIPE when it fails with EPIPE
/// (a write to a pipe without readers or a broken stream socket).
fn sends_sigpipe(nr: usize, a: &[usize; 6]) -> bool {
    match nr {
        1 /*write*/ | 20 /*writev*/ | 40 /*sendfile*/ | 275 /*splice*/ | 276 /*tee*/ | 278 /*vmsplice*/ => true,
        44 /*sendto*/ | 307 /*sendmmsg*/ => a[3] & MSG_NOSIGNAL == 0,
        46 /*sendmsg*/ => a[2] & MSG_NOSIGNAL == 0,
        _ => false,
    }
}

/// Whether call `nr` makes the kernel send SIGXFSZ when it fails with EFBIG (RLIMIT_FSIZE).
fn sends_sigxfsz(nr: usize) -> bool {
    matches!(nr, 1 /*write*/ | 18 /*pwrite64*/ | 20 /*writev*/ | 296 /*pwritev*/ | 328 /*pwritev2*/
        | 76 /*truncate*/ | 77 /*ftruncate*/ | 285 /*fallocate*/ | 326 /*copy_file_range*/
        | 40 /*sendfile*/ | 275 /*splice*/)
}

/// A delegated call failed: the signal the kernel sent for it went to the delegate (which
/// blocks it), so send it to the calling thread as the kernel would have: SIGPIPE for EPIPE,
/// SIGXFSZ for EFBIG, with the siginfo of send_sig (SI_USER, from this process).
pub fn raise_for_delegated(nr: usize, a: &[usize; 6], result: isize) {
    let sig = match result {
        r if r == -EPIPE && sends_sigpipe(nr, a) => SIGPIPE,
        r if r == -EFBIG && sends_sigxfsz(nr) => SIGXFSZ,
        _ => return,
    };
    // struct siginfo: si_signo, si_errno, si_code (SI_USER = 0), padding, si_pid, si_uid.
    let mut info = [0u32; 32];
    info[0] = sig as u32;
    unsafe {
        info[4] = sys::getpid() as u32;
        info[5] = syscall3(GETUID, 0, 0, 0) as u32;
        let t = thread::current();
        syscall6(RT_TGSIGQUEUEINFO, t.pid as usize, t.tid as usize, sig, info.as_ptr() as usize, 0, 0);
    }
}
