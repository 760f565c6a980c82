//! CPU helpers: pinning a thread to one core and a calibrated time-stamp counter.

use std::time::{Duration, Instant};

/// Pins the calling thread to `core`; fails with the kernel's reason.
pub fn pin_current_thread(core: usize) -> Result<(), String> {
    if core >= libc::CPU_SETSIZE as usize {
        return Err(format!("cannot pin to core {core}: beyond CPU_SETSIZE"));
    }
    // SAFETY: cpu_set_t is plain data; sched_setaffinity(0, ...) affects only this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "cannot pin to core {core}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Reads the TSC after all earlier instructions have completed (start of an interval).
#[inline(always)]
pub fn tsc_start() -> u64 {
    // SAFETY: lfence and rdtsc have no memory-safety preconditions on x86-64.
    unsafe {
        core::arch::x86_64::_mm_lfence();
        core::arch::x86_64::_rdtsc()
    }
}

/// Reads the TSC once all earlier instructions have retired (end of an interval).
#[inline(always)]
pub fn tsc_end() -> u64 {
    let mut aux = 0u32;
    // SAFETY: rdtscp writes only `aux`.
    unsafe {
        let t = core::arch::x86_64::__rdtscp(&mut aux);
        core::arch::x86_64::_mm_lfence();
        t
    }
}

/// TSC ticks per nanosecond, measured against CLOCK_MONOTONIC over `span`.
pub fn tsc_per_ns(span: Duration) -> f64 {
    let (w0, t0) = (Instant::now(), tsc_start());
    while w0.elapsed() < span {
        std::hint::spin_loop();
    }
    let (t1, w1) = (tsc_end(), Instant::now());
    (t1 - t0) as f64 / (w1 - w0).as_nanos() as f64
}
