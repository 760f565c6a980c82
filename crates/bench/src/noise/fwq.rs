//! FWQ (fixed work quantum): time the same amount of work over and over; a sample longer
//! than the fastest one was interrupted by that much.

use crate::cpu::{tsc_end, tsc_start};
use crate::stats::{summarise, Summary};
use serde::Serialize;

#[derive(Serialize)]
pub struct FwqReport {
    /// Iterations of the work loop per sample, calibrated to the requested quantum.
    work_iterations: u64,
    /// Length of every sample, in order.
    samples_ns: Vec<f64>,
    summary_ns: Summary,
    /// Sum over samples of (sample - fastest sample), as a share of the total time.
    lost_pct: f64,
}

/// The unit of work: a dependent multiply-add chain the compiler cannot shorten.
#[inline(never)]
fn work(iterations: u64, seed: u64) -> u64 {
    let mut x = seed;
    for _ in 0..iterations {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407));
    }
    x
}

fn time_ticks(iterations: u64) -> u64 {
    let t0 = tsc_start();
    std::hint::black_box(work(iterations, t0));
    tsc_end() - t0
}

/// Iterations whose fastest of several runs takes about `quantum_ns`.
fn calibrate(quantum_ns: u64, tsc_ns: f64) -> u64 {
    let probe = 100_000;
    let fastest = (0..20).map(|_| time_ticks(probe)).min().expect("20 runs") as f64 / tsc_ns;
    ((probe as f64 * quantum_ns as f64 / fastest) as u64).max(1)
}

/// Takes FWQ samples for `duration_ns` on the calling (pinned) thread.
pub fn run(quantum_ns: u64, duration_ns: u64, tsc_ns: f64) -> FwqReport {
    let iterations = calibrate(quantum_ns, tsc_ns);
    let expected = (duration_ns / quantum_ns) as usize + 1;
    let mut ticks: Vec<u64> = Vec::with_capacity(expected);
    let end = tsc_start() + (duration_ns as f64 * tsc_ns) as u64;
    while tsc_start() < end && ticks.len() < expected {
        ticks.push(time_ticks(iterations));
    }
    let samples_ns: Vec<f64> = ticks.iter().map(|&t| t as f64 / tsc_ns).collect();
    let fastest = samples_ns.iter().copied().fold(f64::INFINITY, f64::min);
    let total: f64 = samples_ns.iter().sum();
    let excess: f64 = samples_ns.iter().map(|s| s - fastest).sum();
    let mut sorted = samples_ns.clone();
    FwqReport {
        work_iterations: iterations,
        summary_ns: summarise(&mut sorted),
        lost_pct: 100.0 * excess / total,
        samples_ns,
    }
}
