//! The TSC frequency the runtime converts its timestamps with, measured once per run.

use std::time::{Duration, Instant};

/// TSC ticks per millisecond, against CLOCK_MONOTONIC over 20 ms.
pub fn khz() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86-64.
    let tsc = || unsafe { core::arch::x86_64::_rdtsc() };
    let (w0, t0) = (Instant::now(), tsc());
    while w0.elapsed() < Duration::from_millis(20) {
        std::hint::spin_loop();
    }
    let (t1, w1) = (tsc(), Instant::now());
    ((t1 - t0) as u128 * 1_000_000 / (w1 - w0).as_nanos()) as u64
}
