//! Calibration: what interposition adds to one call, through a trap and through the fast path.
//! Measured once per run, at the program's start, and written in that process's profile
//! overhead fields, so that the models can tell the runtime's own cost from the program's.
//! Once, not in every process: its 64 traps alone cost ≈ 0.15 ms, which a profiled shell
//! script paid in each of its processes (session 22).

use crate::sys::{self, *};
use crate::{env, fastpath, profile, thread};

/// Calls timed through each path; the median call counts, so that an interrupt or a preemption
/// during one of them does not move the figure.
const CALLS: usize = 64;

/// Measures what interposition adds to one getppid: through a trap (a stub outside the
/// runtime's text that is never rewritten) and through the fast path (a copy of the stub
/// rewritten as a program's site is), against getppid made directly. Only with a profile, in
/// the run's first image (an image an execve started carries the task entry), after the fast
/// path is installed, on a thread under no seccomp filter.
pub fn run() {
    // mov eax, 110 (getppid); syscall; ret, twice: the copy at 8 is rewritten.
    const STUB: [u8; 16] = [0xb8, 110, 0, 0, 0, 0x0f, 0x05, 0xc3, 0xb8, 110, 0, 0, 0, 0x0f, 0x05, 0xc3];
    unsafe {
        // A seccomp filter of the program's would see the 192 getppid calls (and might kill
        // the process for them): the figures stay unknown.
        if !profile::is_open() || !env::TASK_ENV.is_null() || thread::current().is_filtered() {
            return;
        }
        let page = syscall6(MMAP, 0, PAGE, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, usize::MAX, 0);
        if (-4095..0).contains(&page) {
            return; // W^X policy: leave the figures unknown
        }
        core::ptr::copy_nonoverlapping(STUB.as_ptr(), page as *mut u8, STUB.len());
        let fast_ok = fastpath::rewrite_for_calibration(page as usize + 13, GETPPID);
        let time = |f: extern "C" fn()| {
            let mut ticks = [0u64; CALLS];
            for t in ticks.iter_mut() {
                let t0 = sys::rdtsc();
                f();
                *t = sys::rdtsc() - t0;
            }
            ticks.sort_unstable();
            ticks[CALLS / 2]
        };
        // The runtime's own calls are not the program's: no profile block while timing them,
        // and never delegated, whatever the policy says of getppid (delegated, its 192 calls
        // would cost 192 round trips: 0.4 s at a 1 ms forward cost).
        let thread = thread::current();
        let prof = thread.prof;
        let local_only = thread.local_only;
        thread.prof = core::ptr::null_mut();
        thread.local_only = true;
        let trap = time(core::mem::transmute::<usize, extern "C" fn()>(page as usize));
        let fast = if fast_ok {
            time(core::mem::transmute::<usize, extern "C" fn()>(page as usize + 8))
        } else {
            0
        };
        extern "C" fn native_getppid() {
            unsafe { syscall3(GETPPID, 0, 0, 0) };
        }
        let native = time(native_getppid);
        thread.prof = prof;
        thread.local_only = local_only;
        syscall3(MUNMAP, page as usize, PAGE, 0);
        profile::store_overheads(trap.saturating_sub(native), (fast > 0).then(|| fast.saturating_sub(native)));
    }
}
