//! coreplane-rt: the in-process runtime. Started as `coreplane-rt PROGRAM ARGV0 ARGS...` with
//! its configuration in COREPLANE_RT, it relocates itself, loads PROGRAM (and its ELF
//! interpreter) into its own address space, arms Syscall User Dispatch so that every syscall
//! the program makes traps into the runtime, and jumps to the program's entry point.
#![no_std]
#![no_main]

mod calibration;
mod delegate;
mod dispatch;
mod exe;
mod fastpath;
mod init;
mod loader;
mod mem;
mod placement;
mod process;
mod profile;
mod sigaction;
mod sigframe;
mod signals;
mod sud;
mod sys;
mod thread;
mod trap;

use core::arch::global_asm;
use coreplane_runtime::config::{self, Config};

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

/// The configuration, parsed once at start (it borrows the environment string, which stays
/// on the original stack for the life of the process).
pub static mut CONFIG: Option<Config<'static>> = None;
/// The raw `COREPLANE_RT=...` environment entry, re-added to the environment on execve.
pub static mut CONFIG_ENV: *const u8 = core::ptr::null();
/// The `COREPLANE_TASK=...` entry an execve'd task came with (null for the program's start).
pub static mut TASK_ENV: *const u8 = core::ptr::null();

/// True if the environment entry `entry` is `name=...`.
pub fn is_env(entry: &[u8], name: &[u8]) -> bool {
    entry.len() > name.len() && entry.starts_with(name) && entry[name.len()] == b'='
}

pub fn config() -> &'static Config<'static> {
    unsafe { (*core::ptr::addr_of!(CONFIG)).as_ref().unwrap_unchecked() }
}

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

#[no_mangle]
unsafe extern "C" fn rt_start(sp: *mut usize, dynamic: *const u64, base: u64) -> ! {
    relocate(dynamic, base);
    let argc = *sp;
    let argv = sp.add(1) as *const *const u8;
    let envp = argv.add(argc + 1);
    if argc < 3 {
        sys::die(&[b"usage: coreplane-rt PROGRAM ARGV0 [ARGS...] (started by coreplane-exec)"]);
    }
    let mut e = envp;
    while !(*e).is_null() {
        let entry = sys::cstr(*e);
        if is_env(entry, config::ENV_NAME) {
            CONFIG_ENV = *e;
            CONFIG = config::parse(&entry[config::ENV_NAME.len() + 1..]);
        } else if is_env(entry, placement::ENV_NAME) {
            TASK_ENV = *e;
        }
        e = e.add(1);
    }
    if (*core::ptr::addr_of!(CONFIG)).is_none() {
        sys::die(&[b"COREPLANE_RT is missing or malformed (start programs with coreplane run)"]);
    }
    loader::load_and_run(sp)
}

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    sys::die(&[b"internal error (panic)"])
}
