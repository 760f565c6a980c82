//! The kernel's sigaction interface, for the handlers the runtime installs itself.
//! The `struct sigaction` layout, its flags, and the restorer gadget in the runtime's text
//! (from which a program handler's rt_sigreturn is also replayed).

use crate::sys::*;
use core::arch::global_asm;

pub const SA_SIGINFO: u64 = 4;
pub const SA_RESTORER: u64 = 0x0400_0000;
pub const SA_RESTART: u64 = 0x1000_0000;
pub const SA_NODEFER: u64 = 0x4000_0000;
pub const SA_ONSTACK: u64 = 0x0800_0000;

global_asm!(
    // The restorer of the runtime's handlers, and the gadget through which a program
    // handler's rt_sigreturn is replayed from inside the allowed region.
    ".globl coreplane_sigreturn",
    "coreplane_sigreturn:",
    "mov eax, 15",
    "syscall",
    "ud2",
);

extern "C" {
    /// The gadget above: rt_sigreturn made from inside the runtime's text.
    pub fn coreplane_sigreturn();
}

/// Kernel `struct sigaction` for rt_sigaction.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct KSigaction {
    pub handler: usize,
    pub flags: u64,
    pub restorer: usize,
    pub mask: u64,
}

impl KSigaction {
    /// The program's struct at `addr`, read as the kernel reads it (None: EFAULT).
    pub fn read_from_program(addr: usize) -> Option<KSigaction> {
        let mut k = KSigaction::default();
        let bytes = unsafe { core::slice::from_raw_parts_mut(&mut k as *mut KSigaction as *mut u8, core::mem::size_of::<Self>()) };
        crate::thread::current().read_program(addr, bytes).then_some(k)
    }

    /// Written to the program's memory at `addr` as the kernel writes it (false: EFAULT).
    pub fn write_to_program(&self, addr: usize) -> bool {
        let bytes = unsafe { core::slice::from_raw_parts(self as *const KSigaction as *const u8, core::mem::size_of::<Self>()) };
        crate::thread::current().write_program(addr, bytes)
    }
}

/// rt_sigaction(2) for the runtime's own handlers.
pub fn sigaction(sig: usize, act: Option<&KSigaction>, old: Option<&mut KSigaction>) -> isize {
    let a = act.map_or(0, |a| a as *const _ as usize);
    let o = old.map_or(0, |o| o as *mut _ as usize);
    unsafe { syscall6(RT_SIGACTION, sig, a, o, 8, 0, 0) }
}
