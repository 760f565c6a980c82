//! The layout of the kernel's x86-64 signal frame: saved registers and SIGSYS siginfo fields.
//! A leaf, so that every module that reads or rewrites a frame shares one description of it.

pub const NGREG: usize = 23;
pub const REG_R8: usize = 0;
pub const REG_R9: usize = 1;
pub const REG_R10: usize = 2;
pub const REG_RDI: usize = 8;
pub const REG_RSI: usize = 9;
pub const REG_RDX: usize = 12;
pub const REG_RAX: usize = 13;
pub const REG_RSP: usize = 15;
pub const REG_RIP: usize = 16;
/// Offset of uc_mcontext.gregs in the kernel's ucontext.
pub const GREGS_OFF: usize = 40;
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
