//! Syscall User Dispatch: the runtime's text is the only region whose syscalls reach the
//! kernel directly; any other syscall raises SIGSYS, handled by `dispatch::on_trap`.
//! SUD is per thread and is not inherited by clone or fork, so every new thread and process
//! arms it itself before running program code.

use crate::sigaction::{coreplane_sigreturn, sigaction, KSigaction, SA_NODEFER, SA_ONSTACK, SA_RESTORER, SA_SIGINFO};
use crate::sys::{self, *};

const PR_SYS_DISPATCH_ON: usize = 1;

static mut TEXT_START: usize = 0;
static mut TEXT_LEN: usize = 0;

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
            TEXT_START = base + ph.vaddr as usize;
            TEXT_LEN = ph.memsz as usize;
        }
    }
    if TEXT_LEN == 0 {
        sys::die(&[b"runtime text segment not found"]);
    }
}

/// Arms SUD on the calling thread; only the runtime's text may then make syscalls.
pub fn arm_thread() {
    let rc = unsafe {
        syscall6(PRCTL, PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, TEXT_START, TEXT_LEN, 0, 0)
    };
    if rc != 0 {
        sys::die(&[b"cannot arm Syscall User Dispatch (kernel >= 5.11 with CONFIG_SYSCALL_USER_DISPATCH needed)"]);
    }
}

extern "C" fn on_sigsys(_sig: i32, info: *mut u8, uc: *mut u8) {
    crate::dispatch::on_trap(info, uc);
}

/// Process start: handlers, the main thread's state, the profile file, then SUD.
pub fn arm_process() {
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
    crate::delegate::install_interrupt_handler();
    let unblock: u64 = 1 << (SIGSYS - 1);
    unsafe { syscall6(RT_SIGPROCMASK, 1 /* SIG_UNBLOCK */, &unblock as *const u64 as usize, 0, 8, 0, 0) };
    let compute = &crate::config().compute;
    if !compute.is_empty() {
        // Program threads inherit this; delegates re-pin themselves on the control cores.
        unsafe { syscall3(SCHED_SETAFFINITY, 0, core::mem::size_of_val(&compute.0), compute.0.as_ptr() as usize) };
    }
    crate::profile::open_process();
    let t = crate::thread::start_thread();
    let (key, children) = match unsafe { crate::TASK_ENV } {
        p if p.is_null() => (crate::placement::Key::ROOT, 0),
        p => crate::placement::from_env(&unsafe { sys::cstr(p) }[crate::placement::ENV_NAME.len() + 1..]),
    };
    crate::placement::adopt(&mut t.place, &key, children);
    arm_thread();
    crate::fastpath::install();
    crate::calibration::run();
}
