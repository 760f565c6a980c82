//! The trap path: the SIGSYS handler, entered by every syscall of code not yet rewritten.
//! The calls that need the signal frame (clone, clone3, vfork, rt_sigreturn) are served from it; any
//! other goes to `dispatch::handle`, its site is rewritten for the fast path next time, and its
//! result is written into the program's rax.

use crate::sigaction::{coreplane_sigreturn, sigaction, KSigaction, SA_NODEFER, SA_ONSTACK, SA_RESTORER, SA_SIGINFO};
use crate::sigframe::{copy_below, gregs, run_again, set_pkey_rights, AUDIT_ARCH_X86_64, SI_ARCH_OFF, UC_SIGMASK_OFF, UC_STACK_OFF, REG_R10, REG_R8, REG_R9, REG_RAX, REG_RBP, REG_RBX, REG_RCX, REG_RDI, REG_RDX, REG_RSI, REG_RSP, SI_CALL_ADDR_OFF, SI_CODE_OFF, SI_SYSCALL_OFF, SYS_USER_DISPATCH};
use crate::sys::*;
use crate::{dispatch, fastpath, process, program_signal, signals, sud};

/// Installs the SIGSYS handler for the whole process (before SUD is armed on any thread).
pub fn install_handler() {
    // SA_NODEFER: a program handler running inside a trap (a signal that interrupted a local
    // blocking call) must itself be able to trap; the program's mask is left as it was.
    // SA_ONSTACK: where the program gave a thread a signal stack, the trap's frame (≈ 1 KB of
    // kernel frame plus the handler's) goes there. Go runs code on goroutine stacks of a few KB
    // with a 32 KB signal stack per thread; a frame on the goroutine stack ran past its end and
    // corrupted the goroutine below it. Without a signal stack nothing changes.
    let act = KSigaction {
        handler: on_sigsys as *const () as usize,
        flags: SA_SIGINFO | SA_RESTORER | SA_NODEFER | SA_ONSTACK,
        restorer: coreplane_sigreturn as *const () as usize,
        mask: 0,
    };
    sigaction(SIGSYS, Some(&act), None);
}

/// Handles one trapped syscall, and rewrites its site for the fast path next time. A SIGSYS
/// that Syscall User Dispatch did not raise (a seccomp filter of the program's returned
/// SECCOMP_RET_TRAP) is the program's own. On a thread under a filter of the program's, the
/// return to the program is made by hand where it can be (`sigframe::can_return_by_hand`): the
/// filter judges the rt_sigreturn the handler's restorer makes, which the program never made,
/// and sshd's pre-authentication child, which allows write and exit and little else, was killed
/// for it at its first trap after its filter.
extern "C" fn on_sigsys(sig: i32, info: *mut u8, uc: *mut u8) {
    if serve(sig, info, uc) {
        crate::sigframe::return_by_hand(uc);
    }
}

/// `on_sigsys` from a copy of its frame (`run_again`): whether the return from the copy may be
/// made by hand, which `coreplane_frame_again` then makes.
extern "C" fn on_sigsys_again(sig: i32, info: *mut u8, uc: *mut u8) -> usize {
    (serve(sig, info, uc) && crate::sigframe::can_return_by_hand(uc)) as usize
}

/// Serves the trap with frame `uc`: whether the return to the program may then be made without
/// rt_sigreturn. Not after the program's own SIGSYS handler ran on the frame (its seccomp trap,
/// its own Syscall User Dispatch): natively that handler returns through rt_sigreturn, which the
/// program's filter judges, and it may have edited the frame's mask or signal stack, which only
/// rt_sigreturn applies.
fn serve(sig: i32, info: *mut u8, uc: *mut u8) -> bool {
    let after_syscall = unsafe { *(info.add(SI_CALL_ADDR_OFF) as *const usize) };
    if unsafe { *(info.add(SI_CODE_OFF) as *const i32) } != SYS_USER_DISPATCH {
        if sud::refused_arm(after_syscall) {
            gregs(uc)[REG_RAX] = -EPERM as u64;
            return true;
        }
        signals::program_sigsys(sig, info, uc);
        return false;
    }
    let nr = unsafe { *(info.add(SI_SYSCALL_OFF) as *const i32) } as usize;
    if nr != RT_SIGRETURN && crate::program_sud::dispatches(crate::thread::current(), uc, info, after_syscall) {
        signals::program_sigsys(sig, info, uc);
        return false;
    }
    let g = gregs(uc);
    if unsafe { *(info.add(SI_ARCH_OFF) as *const u32) } != AUDIT_ARCH_X86_64 {
        // `int $0x80` from 64-bit code: an i386 call, its number and registers i386's, made as it
        // was (it ran as the x86-64 call of that number: getpid was writev). Its site stays.
        let [b, c, d, si, di, bp] = [g[REG_RBX], g[REG_RCX], g[REG_RDX], g[REG_RSI], g[REG_RDI], g[REG_RBP]];
        g[REG_RAX] = unsafe { coreplane_int80(nr, b, c, d, si, di, bp) } as u64;
        return true;
    }
    let a = [g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10], g[REG_R8], g[REG_R9]].map(|x| x as usize);
    if changes_borrowed_signal_stack(uc, nr, &a) {
        handle_again_on_program_stack(sig, uc);
    }
    let result = match nr {
        // The program's handler returns: back to the runtime's rt_sigreturn gadget on the
        // program's frame, which the filter judges as natively (by hand where it may be: the
        // trap's own return would be a second rt_sigreturn, one the program never made).
        RT_SIGRETURN => {
            signals::on_sigreturn(uc);
            return true;
        }
        CLONE => process::clone(uc, &a, fastpath::bounced(after_syscall)),
        CLONE3 => process::clone3(uc, &a),
        VFORK => process::vfork(uc, fastpath::bounced(after_syscall)),
        SIGALTSTACK if let Some(stack) = process::sigaltstack_needs_other_stack(uc) => {
            let r = dispatch::local(nr, || program_signal::sets_signal_stack(a[0], || process::sigaltstack_on(stack, uc, &a)));
            if r >= 0 {
                keep_thread_state(nr, &a, r, uc);
            }
            r
        }
        _ => {
            if let Some(top) = runtime_stack_for(uc) {
                handle_again_on_runtime_stack(sig, uc, top);
            }
            // The rewrite too (a lock, mprotect, membarrier: microseconds) is inside the call's
            // record, for a signal that comes meanwhile.
            let result = program_signal::within(uc, || {
                fastpath::maybe_rewrite(after_syscall, nr);
                dispatch::handle(nr, &a)
            });
            if result >= 0 {
                keep_thread_state(nr, &a, result, uc);
            }
            result
        }
    };
    gregs(uc)[REG_RAX] = result as u64;
    program_signal::keep_withdrawn(uc);
    true
}

/// Where a trap's call runs when its frame lies on the program's signal stack while the program
/// was not on it (the handler is SA_ONSTACK): from a copy of the frame at the top of the thread's
/// runtime stack. The signal stack need only hold what the program's own handlers need (8 KiB:
/// glibc's old SIGSTKSZ, a Rust program's main thread), and a trap needs its kernel frame
/// (3.4 KiB with AVX-512 state), the runtime's frames and, for a program signal that comes during
/// the call, a second kernel frame: a C program with an 8 KiB signal stack that raised a signal from a
/// trapped site died of SIGSEGV, or hung with the heap below its stack overwritten (session 21).
/// Off the signal stack, such a signal's frame goes to the stack's top, as natively for a program
/// not on it, where only the trap's spent frame lies. None where the runtime stack is in use (a
/// fast-path call in progress there, rt_sp below its top: a handler run during it trapped), nor
/// where the trapped code runs on the runtime stack itself (a handler that interrupted the fast
/// path's switch to it before rt_sp was set, or after it was given back: its frames lie just
/// below the top; a helper's review found the copy written over them), or the program's stack
/// is SS_AUTODISARM (disarmed for this trap: a signal meanwhile would land on the runtime stack,
/// not the program's).
/// An rt_sp that a handler's longjmp left below the top keeps the thread's traps on the signal
/// stack: telling such a one from a live call's by the records' stack pointers misjudged a
/// handler that switched stacks (green threads' swapcontext from SIGALRM) and wrote the copy over
/// a live fast-path call (a review), so nothing here guesses.
fn runtime_stack_for(uc: *mut u8) -> Option<usize> {
    program_signal::trap_borrows_signal_stack(uc)?;
    let t = crate::thread::current();
    let stack = t.mapping();
    let flags = unsafe { *(uc.add(UC_STACK_OFF + 8) as *const i32) };
    if stack.contains(&(gregs(uc)[REG_RSP] as usize)) || flags & SS_AUTODISARM != 0 {
        return None;
    }
    (t.rt_sp == stack.end).then_some(stack.end)
}

/// Handles the trap again from a copy of its frame below `top`, and returns to the program from
/// that copy. rt_sp marks the runtime stack in use until then (given back however `on_sigsys`
/// returns), so that a handler run during the call makes its fast-path calls where it is, not
/// over these frames.
fn handle_again_on_runtime_stack(sig: i32, uc: *mut u8, top: usize) -> ! {
    let copy = copy_below(uc, top);
    let t = crate::thread::current();
    t.rt_sp = copy;
    run_again(sig, copy, on_sigsys_again, (&mut t.rt_sp, top))
}

/// Whether call `nr` changes the memory the trap's frame lies in: the program unmaps, moves,
/// re-protects or discards its signal stack while off it, which natively touches no frame, but
/// this handler runs on that stack (SA_ONSTACK) and would return into unmapped memory (stress-ng
/// --vforkmany's stressor, which munmaps its signal stack at its end, died of SIGSEGV at every run).
fn changes_borrowed_signal_stack(uc: *mut u8, nr: usize, a: &[usize; 6]) -> bool {
    let ranges = match nr {
        MUNMAP | MPROTECT | PKEY_MPROTECT | MADVISE => [(a[0], a[1]), (0, 0)],
        MMAP if a[3] & MAP_FIXED != 0 => [(a[0], a[1]), (0, 0)],
        MREMAP => [(a[0], a[1]), if a[3] & MREMAP_FIXED != 0 { (a[4], a[2]) } else { (0, 0) }],
        _ => return false,
    };
    let Some((lo, hi)) = program_signal::trap_borrows_signal_stack(uc) else { return false };
    let changed = ranges.iter().any(|&(at, len)| at < hi && lo < at.saturating_add(len).saturating_add(PAGE - 1) & !(PAGE - 1));
    // The frame's copy goes below the program's stack pointer (`handle_again_on_program_stack`):
    // not where that would still be the signal stack (one mapping holding both).
    let copy_low = (gregs(uc)[REG_RSP] as usize).saturating_sub(128 + FRAME_COPY_ROOM);
    changed && !(copy_low < hi && lo < gregs(uc)[REG_RSP] as usize)
}

/// Room below the program's stack pointer for the frame's copy and the handler's own frames.
const FRAME_COPY_ROOM: usize = 32 * 1024;

/// Handles the trap again from a copy of its frame on the program's stack, below its red zone,
/// where the call would have been made natively, and returns to the program from that copy.
fn handle_again_on_program_stack(sig: i32, uc: *mut u8) -> ! {
    let copy = copy_below(uc, gregs(uc)[REG_RSP] as usize - 128);
    let t = crate::thread::current();
    run_again(sig, copy, on_sigsys_again, (&mut t.rt_sp, t.rt_sp))
}

core::arch::global_asm!(
    // coreplane_int80(nr, ebx, ecx, edx, esi, edi, ebp): an i386 system call, from the
    // runtime's text (which Syscall User Dispatch lets through).
    ".globl coreplane_int80",
    "coreplane_int80:",
    "push rbx",
    "push rbp",
    "mov rax, rdi",
    "mov rbx, rsi",
    "mov r10, rdx",
    "mov rdx, rcx",
    "mov rcx, r10",
    "mov rsi, r8",
    "mov rdi, r9",
    "mov rbp, [rsp + 24]",
    "int 0x80",
    "pop rbp",
    "pop rbx",
    "ret",
);

extern "C" {
    fn coreplane_int80(nr: usize, ebx: u64, ecx: u64, edx: u64, esi: u64, edi: u64, ebp: u64) -> isize;
}

/// When the handler returns, rt_sigreturn gives the thread the signal mask and signal stack
/// saved in the frame, those from before the trap: a program's rt_sigprocmask or sigaltstack
/// served here would be undone (pbzip2's signal thread then lost its blocked SIGUSR1, and the
/// process died of it), as would the new key's rights that pkey_alloc gives the calling thread
/// in its PKRU (Chromium's zygote then died of SEGV_PKUERR on its own key's page). The frame
/// gets the thread's state as the call left it.
fn keep_thread_state(nr: usize, a: &[usize; 6], result: isize, uc: *mut u8) {
    unsafe {
        match nr {
            PKEY_ALLOC => {
                set_pkey_rights(uc, result as u32, a[1] as u32);
            }
            RT_SIGPROCMASK => {
                syscall6(RT_SIGPROCMASK, 0 /* SIG_BLOCK */, 0, uc.add(UC_SIGMASK_OFF) as usize, 8, 0, 0);
            }
            // Only a new stack is kept: a query made on a stack the runtime lends (which the
            // kernel disarmed while its handler runs) must not make that stack disarmed for good.
            SIGALTSTACK if a[0] != 0 => {
                syscall3(SIGALTSTACK, 0, uc.add(UC_STACK_OFF) as usize, 0);
            }
            _ => {}
        }
    }
}
