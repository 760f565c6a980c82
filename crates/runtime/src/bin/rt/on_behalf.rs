//! A delegated call made on behalf of its caller: arguments that mean "the calling thread" are
//! rewritten to name the caller, since the delegate that makes the call is another thread.
//!
//! Linux lets several calls name the calling thread implicitly: pid 0 in the sched_* calls,
//! get_robust_list and perf_event_open, `who` 0 in get/setpriority(PRIO_PROCESS) and
//! ioprio_get/set(IOPRIO_WHO_PROCESS) (all of them per thread, not per process, despite their
//! names), and CLOCK_THREAD_CPUTIME_ID. Made by a
//! delegate as they stand, they read or change the delegate: a program that timed its thread
//! with CLOCK_THREAD_CPUTIME_ID under `--delegate all` read its delegate's CPU time. Each is
//! given the caller's tid, or its per-thread clock id, which means the same thing from any
//! thread of the process (stress-ng's pthread stressor read the delegate's robust-list head,
//! NULL, and died of SIGSEGV). getrusage(RUSAGE_THREAD) has no such form and stays local. Calls
//! that are per thread in every form (set_mempolicy, get_mempolicy, personality,
//! landlock_restrict_self) are always local (presets.json).
//! Process-wide CPU figures (CLOCK_PROCESS_CPUTIME_ID, getrusage(RUSAGE_SELF), times) include
//! the delegates' own CPU time whichever thread asks: they are threads of the process
//! (docs/architecture.md).

use crate::sys::{thread_clock, CLOCK_GETRES, CLOCK_GETTIME, GETRUSAGE};

const GETPRIORITY: usize = 140;
const SETPRIORITY: usize = 141;
const SCHED_SETPARAM: usize = 142;
const SCHED_GETPARAM: usize = 143;
const SCHED_SETSCHEDULER: usize = 144;
const SCHED_GETSCHEDULER: usize = 145;
const SCHED_RR_GET_INTERVAL: usize = 148;
const TIMER_CREATE: usize = 222;
const GET_ROBUST_LIST: usize = 274;
const PERF_EVENT_OPEN: usize = 298;
const IOPRIO_SET: usize = 251;
const IOPRIO_GET: usize = 252;
const SCHED_SETATTR: usize = 314;
const SCHED_GETATTR: usize = 315;

const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
const PRIO_PROCESS: usize = 0;
const IOPRIO_WHO_PROCESS: usize = 1;
const RUSAGE_THREAD: i32 = 1;

/// The arguments a delegate must use to make call `nr` for thread `tid`, or None when the call
/// can only be made by that thread itself.
pub fn args_for(nr: usize, a: &[usize; 6], tid: i32) -> Option<[usize; 6]> {
    let mut out = *a;
    match nr {
        // Not clock_nanosleep: the kernel refuses a sleep on one's own thread clock (EOPNOTSUPP
        // for this id); named by the caller's clock id from a delegate, it would sleep instead.
        CLOCK_GETTIME | CLOCK_GETRES | TIMER_CREATE if a[0] as i32 == CLOCK_THREAD_CPUTIME_ID => {
            out[0] = thread_clock(tid)
        }
        SCHED_SETPARAM | SCHED_GETPARAM | SCHED_SETSCHEDULER | SCHED_GETSCHEDULER | SCHED_RR_GET_INTERVAL
        | SCHED_SETATTR | SCHED_GETATTR
            if a[0] as i32 == 0 =>
        {
            out[0] = tid as usize
        }
        GET_ROBUST_LIST if a[0] as i32 == 0 => out[0] = tid as usize,
        // perf_event_open(attr, pid, cpu, ...): pid 0 is the calling thread.
        PERF_EVENT_OPEN if a[1] as i32 == 0 => out[1] = tid as usize,
        GETPRIORITY | SETPRIORITY if a[0] as i32 as usize == PRIO_PROCESS && a[1] as i32 == 0 => out[1] = tid as usize,
        IOPRIO_GET | IOPRIO_SET if a[0] as i32 as usize == IOPRIO_WHO_PROCESS && a[1] as i32 == 0 => {
            out[1] = tid as usize
        }
        GETRUSAGE if a[0] as i32 == RUSAGE_THREAD => return None,
        _ => {}
    }
    Some(out)
}
