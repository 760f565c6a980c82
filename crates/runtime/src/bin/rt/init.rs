//! Process start-up: every step, in order, between loading the program and entering it.
//! The runtime's signal handlers, the compute cores, the profile file, the main thread's state
//! and place, Syscall User Dispatch, then the fast path and its calibration. Runs once per image
//! (the program's start, and every execve, which re-enters the runtime); new threads and forked
//! children set up their own part in `process`.

use crate::sys::{self, *};
use crate::{app_threads, calibration, delegate, env, fastpath, launcher_notes, mcp, placement, profile, sud, thread, trap};

/// Arms the process: once this returns, every syscall of program code reaches the runtime.
pub fn start() {
    unsafe { sud::find_runtime_text() };
    trap::install_handler();
    delegate::install_interrupt_handler();
    // The signal mask survives execve, and a SIGSYS blocked at a trap would make the kernel
    // kill the process with the default action.
    let unblock: u64 = 1 << (SIGSYS - 1);
    unsafe { syscall6(RT_SIGPROCMASK, 1 /* SIG_UNBLOCK */, &unblock as *const u64 as usize, 0, 8, 0, 0) };
    let compute = &env::config().compute;
    if !compute.is_empty() && unsafe { env::TASK_ENV }.is_null() {
        // Program threads inherit this; delegates re-pin themselves on the control cores. Only
        // at the program's start: an image its own execve started keeps the CPUs the process had
        // (taskset, or mpirun binding each rank before its exec, as natively).
        unsafe { syscall3(SCHED_SETAFFINITY, 0, core::mem::size_of_val(&compute.0), compute.0.as_ptr() as usize) };
    }
    profile::open_process();
    launcher_notes::connect();
    // An image that starts under a seccomp filter of the program's (inherited across execve)
    // gets no pool: the kernel serves its memory calls, where the filter sees them as natively,
    // and the pool's own calls (reserving, zeroing) never meet a filter written for the program.
    let filtered = sys::seccomp_filtered();
    let pooled = env::config().memory_pool > 0 && !filtered;
    if env::config().lock_memory && !pooled {
        lock_memory();
    }
    if pooled {
        crate::memsvc::start(env::config().memory_pool, env::config().memory_on_demand, env::config().memory_give_back);
    }
    let t = thread::start_thread();
    let task = env::task();
    if filtered {
        // Sandboxed where the thread that exec'd this image was: its filter is the program's.
        t.now_filtered(false, task.is_some_and(|(_, sandboxed)| sandboxed));
    }
    app_threads::start(t);
    let (key, children) = match task {
        None => (placement::Key::ROOT, 0),
        Some((place, _)) => placement::from_env(place),
    };
    placement::adopt(&mut t.place, &key, children);
    // The program's first process of a delegating many-core process follows its cores.
    mcp::start(key.as_bytes() == placement::Key::ROOT.as_bytes());
    sud::arm_first_thread();
    fastpath::install();
    calibration::run();
    if env::config().lock_memory && pooled {
        // Under the pool, once the runtime can serve the call (`memsvc::lock`): the kernel's
        // mlockall would lock the pool's whole reservation, and every mapping made for the pool
        // after it (MCL_FUTURE).
        lock_memory();
    }
}

/// A cell made with --mlock: the program's memory locked before it runs, and every later mapping
/// of it; a refusal (the limit) leaves the program running unlocked, which `coreplane cell
/// status` shows.
fn lock_memory() {
    profile::before_mlockall(MCL_CURRENT, false, true);
    if crate::memsvc::lock::serves_mlockall(false) {
        crate::memsvc::lock::mlockall(MCL_CURRENT | MCL_FUTURE);
    } else {
        unsafe { syscall3(MLOCKALL, MCL_CURRENT | MCL_FUTURE, 0, 0) };
    }
}
