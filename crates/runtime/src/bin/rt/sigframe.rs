//! The layout of the kernel's x86-64 signal frame (saved registers and SIGSYS siginfo fields),
//! and the ways back from a frame other than the kernel's restorer: run again from a copy, or
//! returned from by hand.
//! Every module that reads or rewrites a frame shares this one description of it.

pub const NGREG: usize = 23;
pub const REG_R8: usize = 0;
pub const REG_R9: usize = 1;
pub const REG_R10: usize = 2;
pub const REG_R11: usize = 3;
pub const REG_R12: usize = 4;
pub const REG_R13: usize = 5;
pub const REG_R14: usize = 6;
pub const REG_R15: usize = 7;
pub const REG_RDI: usize = 8;
pub const REG_RSI: usize = 9;
pub const REG_RBP: usize = 10;
pub const REG_RBX: usize = 11;
pub const REG_RDX: usize = 12;
pub const REG_RAX: usize = 13;
pub const REG_RCX: usize = 14;
pub const REG_RSP: usize = 15;
pub const REG_RIP: usize = 16;
pub const REG_EFL: usize = 17;
/// uc_mcontext's csgsfs: cs in its low 16 bits.
pub const REG_CSGSFS: usize = 18;
/// Offset of uc_mcontext.gregs in the kernel's ucontext.
pub const GREGS_OFF: usize = 40;
/// Offset of the first XMM register in the FPU state's fxsave area; each takes 16 bytes.
pub const XMM0_OFF: usize = 160;
/// Offset of uc_mcontext.fpregs (the FPU state's address) in the kernel's ucontext: after the
/// general registers.
pub const FPREGS_OFF: usize = GREGS_OFF + NGREG * 8;
/// The FPU state's software bytes (struct _fpx_sw_bytes) in its fxsave area: magic1, then the
/// size of the whole state with its xsave header and components (else it is the 512-byte fxsave).
const FPX_SW_OFF: usize = 464;
const FP_XSTATE_MAGIC1: u32 = 0x4650_5853;
/// MXCSR and the x87 control word in the fxsave area.
const MXCSR_OFF: usize = 24;
const FCW_OFF: usize = 0;
/// Offset of uc_stack (the signal stack, a 24-byte stack_t) in the kernel's ucontext.
pub const UC_STACK_OFF: usize = 16;
/// Offset of uc_sigmask in the kernel's ucontext.
pub const UC_SIGMASK_OFF: usize = 296;
/// Size of the kernel's `struct ucontext` in an x86-64 rt_sigframe; the siginfo follows it.
pub const KERNEL_UCONTEXT_SIZE: usize = 304;
/// Size of a siginfo.
pub const SIGINFO_SIZE: usize = 128;
/// Offset of si_code in a siginfo.
pub const SI_CODE_OFF: usize = 8;
/// si_code of a SIGSYS raised by Syscall User Dispatch (the runtime's own); seccomp's
/// SECCOMP_RET_TRAP raises it with SYS_SECCOMP (1).
pub const SYS_USER_DISPATCH: i32 = 2;
/// Offset of si_call_addr (the address after the trapping syscall) in a SIGSYS siginfo.
pub const SI_CALL_ADDR_OFF: usize = 16;
/// Offset of si_syscall in a SIGSYS siginfo.
pub const SI_SYSCALL_OFF: usize = 24;
/// Offset of si_arch (the calling convention's AUDIT_ARCH_*) in a SIGSYS siginfo.
pub const SI_ARCH_OFF: usize = 28;
/// si_arch of an x86-64 call; `int $0x80` from 64-bit code makes an i386 one.
pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

/// The general registers saved in a signal frame.
pub fn gregs(uc: *mut u8) -> &'static mut [u64; NGREG] {
    unsafe { &mut *(uc.add(GREGS_OFF) as *mut [u64; NGREG]) }
}

/// The frame's FPU state: its address and size (None where the frame has none).
pub fn fpstate(uc: *mut u8) -> Option<(usize, usize)> {
    let fp = unsafe { *(uc.add(FPREGS_OFF) as *const usize) };
    if fp == 0 {
        return None;
    }
    let xsave = unsafe { *((fp + FPX_SW_OFF) as *const u32) } == FP_XSTATE_MAGIC1;
    Some((fp, if xsave { unsafe { *((fp + FPX_SW_OFF + 4) as *const u32) as usize } } else { 512 }))
}

/// The program's MXCSR and x87 control word as the frame saved them; the defaults where it has
/// no FPU state.
pub fn fpu_control(uc: *mut u8) -> [u32; 2] {
    match fpstate(uc) {
        Some((fp, _)) => unsafe { [*((fp + MXCSR_OFF) as *const u32), *((fp + FCW_OFF) as *const u16) as u32] },
        None => [0x1f80, 0x37f],
    }
}

/// In the xsave area: XSTATE_BV (the components the area holds; one left out is restored to its
/// initial value), and the components the frame was laid out for (the software bytes' xfeatures).
const XSTATE_BV_OFF: usize = 512;
const FPX_SW_XFEATURES_OFF: usize = FPX_SW_OFF + 8;
/// PKRU is xsave component 9; its offset in the standard format the kernel writes frames in is
/// the CPU's (CPUID leaf 0xD).
const XFEATURE_PKRU: u32 = 9;

/// Gives protection key `key` the rights `rights` (PKEY_DISABLE_ACCESS, PKEY_DISABLE_WRITE) in
/// the PKRU that the frame restores, as pkey_alloc(2) sets them on its calling thread. Nothing
/// where the frame holds no PKRU (a CPU without protection keys, which has no key to give).
pub fn set_pkey_rights(uc: *mut u8, key: u32, rights: u32) {
    let Some((fp, at)) = pkru_at(uc) else { return };
    if key >= 16 {
        return;
    }
    unsafe {
        let bv = (fp + XSTATE_BV_OFF) as *mut u64;
        let pkru = (fp + at) as *mut u32;
        let old = pkru_of(uc).unwrap_or(0);
        *pkru = old & !(3 << (2 * key)) | (rights & 3) << (2 * key);
        *bv |= 1 << XFEATURE_PKRU;
    }
}

/// The program's PKRU as the frame saved it; None where the frame holds none (no protection
/// keys). A new thread starts with its creator's, and the runtime's handler runs with the
/// kernel's default for signal handlers.
pub fn pkru_of(uc: *mut u8) -> Option<u32> {
    let (fp, at) = pkru_at(uc)?;
    // Left out of the frame (XSTATE_BV), PKRU was in its initial state: 0, every key open.
    Some(unsafe { if *((fp + XSTATE_BV_OFF) as *const u64) & 1 << XFEATURE_PKRU != 0 { *((fp + at) as *const u32) } else { 0 } })
}

/// The frame's xsave area and PKRU's offset in it, where the frame was laid out with PKRU.
fn pkru_at(uc: *mut u8) -> Option<(usize, usize)> {
    let (fp, size) = fpstate(uc)?;
    if size <= 512 || unsafe { *((fp + FPX_SW_XFEATURES_OFF) as *const u64) } & 1 << XFEATURE_PKRU == 0 {
        return None;
    }
    let at = pkru_offset();
    (at != 0 && at + 4 <= size).then_some((fp, at))
}

/// PKRU's offset in the standard xsave layout (CPUID leaf 0xD, sub-leaf 9), asked once: under
/// a hypervisor every cpuid is a VM exit, and every clone of a thread would pay one.
fn pkru_offset() -> usize {
    use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    const UNKNOWN: usize = usize::MAX;
    static OFFSET: AtomicUsize = AtomicUsize::new(UNKNOWN);
    match OFFSET.load(Relaxed) {
        UNKNOWN => {
            let at = core::arch::x86_64::__cpuid_count(0xd, XFEATURE_PKRU).ebx as usize;
            OFFSET.store(at, Relaxed);
            at
        }
        at => at,
    }
}

/// A signal handler's entry, as `run_again` calls it: (signal, siginfo, ucontext); it answers
/// whether the return may be made by hand (`can_return_by_hand` said so), else 0.
pub type Handler = extern "C" fn(i32, *mut u8, *mut u8) -> usize;

/// Copies the frame `uc` (its FPU state first, at the top) to just below `below`, 64-byte
/// aligned as xrstor needs: the copy's address, for `run_again`.
pub fn copy_below(uc: *mut u8, below: usize) -> usize {
    let fp_size = fpstate(uc).map_or(0, |(_, size)| size);
    let fp_to = (below - fp_size) & !63;
    let copy = (fp_to - KERNEL_UCONTEXT_SIZE - SIGINFO_SIZE) & !63;
    unsafe { copy_frame(uc, copy, fp_to) };
    copy
}

/// Runs `handler` again from the frame copied to `copy` (`copy_below`), on the stack below it,
/// then stores `value` at `slot` (the runtime stack's mark, given back) and returns from the
/// copy with rt_sigreturn, as the kernel's restorer would from the original, or by hand where
/// the handler answered it may (`coreplane_trap_return`, which stores `value` last): for a
/// handler whose frame the kernel put somewhere it must not stay.
pub fn run_again(sig: i32, copy: usize, handler: Handler, (slot, value): (*mut usize, usize)) -> ! {
    unsafe { coreplane_frame_again(sig, (copy + KERNEL_UCONTEXT_SIZE) as *mut u8, copy as *mut u8, handler, slot, value) }
}

core::arch::global_asm!(
    // coreplane_frame_again(sig, info, uc, handler, slot, value): handler(sig, info, uc) called
    // with rsp = uc (aligned: two pushes below a 64-byte aligned copy), then *slot = value, then
    // rt_sigreturn from the frame at rsp (its ucontext there, as a restorer finds it); or, where
    // the handler answered non-zero, back by hand from the frame at rsp, *slot = value last.
    ".globl coreplane_frame_again",
    "coreplane_frame_again:",
    "mov rsp, rdx",
    "push r9",
    "push r8",
    "call rcx",
    "pop r8",
    "pop r9",
    "test rax, rax",
    "jnz 1f",
    "mov [r8], r9",
    "mov eax, 15",
    "syscall",
    "ud2",
    "1:",
    "mov rdi, rsp",
    "mov rsi, r8",
    "mov rdx, r9",
    "jmp coreplane_trap_return",
);

extern "C" {
    fn coreplane_frame_again(sig: i32, info: *mut u8, uc: *mut u8, handler: Handler, slot: *mut usize, value: usize) -> !;
}

/// Copies the ucontext at `uc` with the siginfo after it to `to`, and its FPU state (if any) to
/// `fp_to` (64-byte aligned, as xrstor needs), the copy's fpregs pointing there.
pub unsafe fn copy_frame(uc: *const u8, to: usize, fp_to: usize) {
    core::ptr::copy_nonoverlapping(uc, to as *mut u8, KERNEL_UCONTEXT_SIZE + SIGINFO_SIZE);
    if let Some((at, size)) = fpstate(uc as *mut u8) {
        core::ptr::copy_nonoverlapping(at as *const u8, fp_to as *mut u8, size);
        *((to + FPREGS_OFF) as *mut usize) = fp_to;
    }
}

/// Returns from the trap frame `uc` to the program without rt_sigreturn where it can
/// (`can_return_by_hand`); returns, having done nothing, where it cannot, and the handler's
/// restorer then makes rt_sigreturn as before.
pub fn return_by_hand(uc: *mut u8) {
    if can_return_by_hand(uc) {
        unsafe { coreplane_trap_return(uc, core::ptr::null_mut(), 0) }
    }
}

/// Whether a return from the trap frame `uc` may be made by hand (`coreplane_trap_return`), and
/// if so makes the frame's flags those rt_sigreturn would restore. Only on a thread under a
/// filter of the program's (`Thread::is_sandboxed`), which may kill for the rt_sigreturn the
/// program never made (sshd's pre-authentication child allows neither it nor most else), and
/// only where rt_sigreturn would restore nothing but the registers, the flags and the FPU state,
/// which user space can: the runtime's SIGSYS handler is SA_NODEFER with an empty mask, so the
/// kernel left the signal mask as the frame saved it (and a trapped rt_sigprocmask writes the
/// thread's new one into the frame, `trap::keep_thread_state`); the signal stack too, as the
/// runtime mirrors every change it makes to it into the frame (`keep_thread_state`,
/// `program_signal::keep_withdrawn`). Invariant: no runtime code may leave in a trap's frame a
/// mask or signal stack other than the thread's (a program's own SIGSYS handler may edit its
/// frame: those frames go back through rt_sigreturn, `trap::serve`). It cannot where:
/// - the frame was delivered on a signal stack with SS_AUTODISARM (the runtime's lent stacks,
///   or a program's): the kernel disarmed it for the handler, and only rt_sigreturn or
///   sigaltstack(2) arms it again;
/// - the frame's PKRU denies access to key 0, the runtime's memory, read after xrstor;
/// - a user shadow stack is on (rdsspq reads non-zero): rt_sigreturn pops its signal token;
/// - the frame's code segment is not the runtime's (32-bit code: iretq would need its own).
/// Those frames go back through rt_sigreturn, as before.
pub fn can_return_by_hand(uc: *mut u8) -> bool {
    if !crate::thread::current().is_sandboxed() {
        return false;
    }
    let flags = unsafe { *(uc.add(UC_STACK_OFF + 8) as *const i32) };
    if flags & crate::sys::SS_AUTODISARM != 0 && flags & crate::sys::SS_DISABLE == 0 {
        return false;
    }
    if pkru_of(uc).is_some_and(|p| p & 3 != 0) {
        return false;
    }
    let (ssp, cs): (u64, u64);
    // rdsspq is a NOP where shadow stacks are off: the register keeps its 0.
    unsafe { core::arch::asm!("xor {s:e}, {s:e}", "rdsspq {s}", "mov {c:e}, cs", s = out(reg) ssp, c = out(reg) cs, options(nomem, nostack, preserves_flags)) };
    if ssp != 0 || gregs(uc)[REG_CSGSFS] & 0xffff != cs {
        return false;
    }
    // The flags rt_sigreturn takes from the frame (the kernel's FIX_EFLAGS: AC OF DF TF SF ZF
    // AF PF CF RF), and ID and NT, which it leaves as the thread has them: as the program had
    // them at the trap, since the delivery clears only DF, RF and TF (a program that set ID, as
    // CPUID probes do, found it clear after its call). With IF and the reserved bit 1; IOPL
    // does not change at CPL 3.
    const FIX_EFLAGS: u64 = 0x40000 | 0x800 | 0x400 | 0x100 | 0x80 | 0x40 | 0x10 | 0x4 | 0x1 | 0x10000;
    const NT: u64 = 0x4000;
    const ID: u64 = 0x20_0000;
    let g = gregs(uc);
    g[REG_EFL] = g[REG_EFL] & (FIX_EFLAGS | NT | ID) | 0x202;
    true
}

core::arch::global_asm!(
    // coreplane_trap_return(uc, slot, value): back to the program from the trap frame `uc`
    // without rt_sigreturn (`can_return_by_hand` said it may be), storing `value` at `slot`
    // (none where slot is 0) last. An iretq frame (ss, rsp, rflags, cs, rip) is built on the
    // stack below everything live, then slot, value and the program's rdi below it; then the
    // FPU state (xrstor of the components the frame was laid out for, the software bytes'
    // xfeatures, where it is an xsave frame: one left out of XSTATE_BV is reset to its initial
    // value, as the kernel does; fxrstor where it is a bare fxsave area; none where the frame
    // has none); then the general registers, the slot's store with rdi alone, rdi, and iretq,
    // which sets rip, rsp and rflags at once: nothing is written below the program's stack
    // pointer (its red zone), and a signal that comes before it finds a runtime context whose
    // handler returns here (its frame goes below this one). xrstor comes after all Rust code,
    // which may use the vector registers.
    ".globl coreplane_trap_return",
    "coreplane_trap_return:",
    "and rsp, -16",
    // The handler runs with the program's NT (its delivery keeps it), with which iretq itself
    // faults in long mode (#GP, SIGSEGV); the NT it pops is the program's to keep.
    "pushfq",
    "and qword ptr [rsp], ~0x4000",
    "popfq",
    "mov eax, ss",
    "push rax",
    "push qword ptr [rdi + {rsp}]",
    "push qword ptr [rdi + {efl}]",
    "mov eax, cs",
    "push rax",
    "push qword ptr [rdi + {rip}]",
    "push rdx",
    "push rsi",
    "push qword ptr [rdi + {rdi}]",
    "mov rsi, [rdi + {fpregs}]",
    "test rsi, rsi",
    "jz 2f",
    "cmp dword ptr [rsi + {sw}], {magic1}",
    "jne 1f",
    "mov eax, [rsi + {xfeatures}]",
    "mov edx, [rsi + {xfeatures} + 4]",
    "xrstor64 [rsi]",
    "jmp 2f",
    "1:",
    "fxrstor64 [rsi]",
    "2:",
    "mov r8, [rdi + {g} + 0 * 8]",
    "mov r9, [rdi + {g} + 1 * 8]",
    "mov r10, [rdi + {g} + 2 * 8]",
    "mov r11, [rdi + {g} + 3 * 8]",
    "mov r12, [rdi + {g} + 4 * 8]",
    "mov r13, [rdi + {g} + 5 * 8]",
    "mov r14, [rdi + {g} + 6 * 8]",
    "mov r15, [rdi + {g} + 7 * 8]",
    "mov rsi, [rdi + {g} + 9 * 8]",
    "mov rbp, [rdi + {g} + 10 * 8]",
    "mov rbx, [rdi + {g} + 11 * 8]",
    "mov rdx, [rdi + {g} + 12 * 8]",
    "mov rax, [rdi + {g} + 13 * 8]",
    "mov rcx, [rdi + {g} + 14 * 8]",
    // *slot = value, with rdi the only register left: push [rsp + 16] reads value before rsp
    // moves, pop [rdi] stores it. The flags it changes are iretq's to set.
    "mov rdi, [rsp + 8]",
    "test rdi, rdi",
    "jz 3f",
    "push qword ptr [rsp + 16]",
    "pop qword ptr [rdi]",
    "3:",
    "pop rdi",
    "lea rsp, [rsp + 16]",
    "iretq",
    g = const GREGS_OFF,
    rsp = const GREGS_OFF + REG_RSP * 8,
    efl = const GREGS_OFF + REG_EFL * 8,
    rip = const GREGS_OFF + REG_RIP * 8,
    rdi = const GREGS_OFF + REG_RDI * 8,
    xfeatures = const FPX_SW_XFEATURES_OFF,
    fpregs = const FPREGS_OFF,
    sw = const FPX_SW_OFF,
    magic1 = const FP_XSTATE_MAGIC1,
);

extern "C" {
    fn coreplane_trap_return(uc: *mut u8, slot: *mut usize, value: usize) -> !;
}
