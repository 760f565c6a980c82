//! Syscall User Dispatch: only the runtime's text may make syscalls; any other raises SIGSYS.
//! SIGSYS is handled by `trap`. SUD is per thread and is not inherited by clone or fork, so
//! every new thread and process arms it itself before running program code.

use crate::sys::{self, *};

const PR_SYS_DISPATCH_OFF: usize = 0;
const PR_SYS_DISPATCH_ON: usize = 1;

/// The runtime's executable segment (named for `program_signal`'s assembly, which asks whether
/// a signal interrupted the runtime's code).
#[no_mangle]
static mut COREPLANE_TEXT_START: usize = 0;
#[no_mangle]
static mut COREPLANE_TEXT_LEN: usize = 0;

extern "C" {
    static __ehdr_start: u8;
}

/// Finds the runtime's executable segment from its own program headers.
pub unsafe fn find_runtime_text() {
    let base = core::ptr::addr_of!(__ehdr_start) as usize;
    let head = core::slice::from_raw_parts(base as *const u8, coreplane_runtime::elf::EHDR_SIZE);
    let eh = coreplane_runtime::elf::parse_ehdr(head).unwrap_or_else(|_| sys::die(&[b"bad runtime image"]));
    for i in 0..eh.phnum as usize {
        let raw = core::slice::from_raw_parts((base + eh.phoff as usize + i * 56) as *const u8, 56);
        let ph = coreplane_runtime::elf::parse_phdr(raw);
        if ph.kind == coreplane_runtime::elf::PT_LOAD && ph.flags & coreplane_runtime::elf::PF_X != 0 {
            COREPLANE_TEXT_START = base + ph.vaddr as usize;
            COREPLANE_TEXT_LEN = ph.memsz as usize;
        }
    }
    if COREPLANE_TEXT_LEN == 0 {
        sys::die(&[b"runtime text segment not found"]);
    }
}

/// Disarms SUD on the calling thread: its syscalls reach the kernel directly from now on.
pub fn disarm_thread() {
    unsafe { syscall6(PRCTL, PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 0, 0, 0, 0) };
}

/// What the thread's selector byte tells the kernel for a call outside the runtime's text.
const SELECTOR_ALLOW: u8 = 0;
const SELECTOR_BLOCK: u8 = 1;

core::arch::global_asm!(
    // coreplane_arm_dispatch(start, len, selector) -> prctl(PR_SET_SYSCALL_USER_DISPATCH, ON,
    // start, len, selector): made from one known instruction, so that a seccomp filter's trap
    // of it is known for the runtime's (`refused_arm`).
    ".globl coreplane_arm_dispatch",
    "coreplane_arm_dispatch:",
    "mov r8, rdx",
    "mov r10, rsi",
    "mov rdx, rdi",
    "mov esi, {on}",
    "mov edi, {option}",
    "mov eax, {prctl}",
    "syscall",
    ".globl coreplane_arm_dispatch_ret",
    "coreplane_arm_dispatch_ret:",
    "ret",
    on = const PR_SYS_DISPATCH_ON,
    option = const PR_SET_SYSCALL_USER_DISPATCH,
    prctl = const PRCTL,
);

extern "C" {
    fn coreplane_arm_dispatch(start: usize, len: usize, selector: *mut u8) -> isize;
    fn coreplane_arm_dispatch_ret();
}

/// Arms SUD on the calling thread; only the runtime's text may then make syscalls. False where
/// it was refused: by the kernel (no SUD), or by a seccomp filter of the program's on a new
/// thread of a sandboxed process (Chromium's renderers allow few prctl options), which then
/// makes its calls as natively, to the kernel directly but for the sites already rewritten.
pub fn arm_thread() -> bool {
    let selector = &mut crate::thread::current().sud_selector;
    *selector = SELECTOR_BLOCK;
    unsafe { coreplane_arm_dispatch(COREPLANE_TEXT_START, COREPLANE_TEXT_LEN, selector) == 0 }
}

/// Arms SUD on the program's first thread, or ends the process saying why it cannot.
pub fn arm_first_thread() {
    if !arm_thread() {
        sys::die(&[b"cannot arm Syscall User Dispatch (kernel >= 5.11 with CONFIG_SYSCALL_USER_DISPATCH needed)"]);
    }
}

/// Whether a seccomp trap (SIGSYS, SYS_SECCOMP) whose call ended at `after_syscall` was the
/// runtime's arming: the program never made that call, so its handler must not see it; the
/// arming fails with EPERM instead (`arm_thread`).
pub fn refused_arm(after_syscall: usize) -> bool {
    after_syscall == coreplane_arm_dispatch_ret as *const () as usize
}

/// A filter of the program's reads the instruction pointer of calls (`filter_prog`): its
/// handler's calls must then come from the program's own instructions (`pass_through`).
static FILTER_READS_IP: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// The program installs a filter that reads the instruction pointer of calls.
pub fn filter_reads_ip() {
    FILTER_READS_IP.store(true, core::sync::atomic::Ordering::Relaxed);
}

/// Whether a filter the program installed reads the instruction pointer of calls.
pub fn ip_filtered() -> bool {
    FILTER_READS_IP.load(core::sync::atomic::Ordering::Relaxed)
}

/// Lets the calling thread's calls from anywhere reach the kernel as they stand (`on`), or trap
/// again; no call is made (the kernel reads the thread's selector byte). Returns whether they
/// did before. For a program's handler of its own seccomp trap where a filter reads the
/// instruction pointer (`ip_filtered`): Chromium's sandbox lets only its handler's syscall
/// instruction make the calls it emulates, so it must see the program's own `syscall`. Only
/// then: a handler that leaves by longjmp leaves its thread passing every call through, its
/// clones made without the runtime.
pub fn pass_through(on: bool) -> bool {
    let selector = &mut crate::thread::current().sud_selector;
    let was = *selector == SELECTOR_ALLOW;
    *selector = if on { SELECTOR_ALLOW } else { SELECTOR_BLOCK };
    was
}
