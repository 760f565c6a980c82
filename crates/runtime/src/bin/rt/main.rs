//! coreplane-rt, the in-process runtime: its entry point `_start` and its module tree.
//! Started as `coreplane-rt PROGRAM ARGV0 ARGS...` with its configuration in COREPLANE_RT, it
//! relocates itself, loads PROGRAM (and its ELF interpreter) into its own address space, arms
//! Syscall User Dispatch so that every syscall the program makes traps into the runtime, and
//! jumps to the program's entry point.
#![no_std]
#![no_main]

mod app_threads;
mod calibration;
mod call_kinds;
mod cmdline;
mod credentials;
mod delegate;
mod dispatch;
mod env;
mod exe;
mod fastpath;
mod filter_prog;
mod filter_reaper;
mod hot_sites;
mod init;
mod launcher_notes;
mod loader;
mod mcp;
mod mem;
mod memsvc;
mod on_behalf;
mod own_fds;
mod owner_lock;
mod placement;
mod process;
mod profile;
mod program_signal;
mod program_sud;
mod rewrite_lock;
mod sigaction;
mod sigframe;
mod signals;
mod sud;
mod strict_watch;
mod sys;
mod task_view;
mod textmap;
mod thread;
mod trap;
mod vdso;

use core::arch::global_asm;

global_asm!(
    ".globl _start",
    "_start:",
    "xor ebp, ebp",
    "mov rdi, rsp",
    "lea rsi, [rip + _DYNAMIC]",
    "lea rdx, [rip + __ehdr_start]",
    "and rsp, -16",
    "call rt_start",
    "ud2",
);

/// Applies the R_X86_64_RELATIVE relocations of this static PIE. Runs before anything that
/// reads an absolute address from data, so it touches only its arguments.
#[inline(never)]
unsafe fn relocate(dynamic: *const u64, base: u64) {
    let (mut rela, mut relasz) = (0u64, 0u64);
    let mut d = dynamic;
    while *d != 0 {
        match *d {
            7 => rela = *d.add(1),
            8 => relasz = *d.add(1),
            _ => {}
        }
        d = d.add(2);
    }
    let mut r = (base + rela) as *const u64;
    let end = (base + rela + relasz) as *const u64;
    while r < end {
        if *r.add(1) & 0xffff_ffff == 8 {
            *((base + *r) as *mut u64) = base.wrapping_add(*r.add(2));
        }
        r = r.add(3);
    }
}

/// Called by `_start` with the kernel's initial stack: relocates the runtime, reads its
/// environment entries, then loads and enters the program.
#[no_mangle]
unsafe extern "C" fn rt_start(sp: *mut usize, dynamic: *const u64, base: u64) -> ! {
    relocate(dynamic, base);
    let argc = *sp;
    let argv = sp.add(1) as *const *const u8;
    let envp = argv.add(argc + 1);
    if argc < 3 {
        sys::die(&[b"usage: coreplane-rt PROGRAM ARGV0 [ARGS...] (started by coreplane-exec)"]);
    }
    env::read(envp);
    let mut end = envp;
    while !(*end).is_null() {
        end = end.add(1);
    }
    thread::learn_auxv(end.add(1) as *const usize);
    loader::load_and_run(sp)
}

/// A panic is a runtime bug: the process exits as a failed exec would.
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    sys::die(&[b"internal error (panic)"])
}
