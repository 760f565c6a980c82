//! The gap detector and FTQ in one loop: read the TSC as fast as possible; a long step
//! between two reads is an interruption (gap), and the reads per quantum are the FTQ counts.

use crate::cpu::{tsc_end, tsc_start};
use crate::stats::{summarise, Summary};
use serde::Serialize;

pub struct Config {
    pub duration_ns: u64,
    pub threshold_ns: u64,
    pub quantum_ns: u64,
    pub max_gaps: usize,
    pub tsc_ns: f64,
}

#[derive(Serialize)]
pub struct GapReport {
    /// Wall time the loop ran.
    runtime_ns: f64,
    /// Loop iterations (clock reads); runtime / iterations is the detector's resolution.
    iterations: u64,
    /// Interruptions: steps between consecutive reads longer than the threshold.
    count: u64,
    per_s: f64,
    /// Sum of the gaps: the time this CPU was taken away from the loop.
    lost_ns: f64,
    lost_pct: f64,
    max_ns: f64,
    /// Distribution of gap lengths (absent when there was no gap).
    durations_ns: Option<Summary>,
    /// [start, length] of each gap, start measured from the common start of all CPUs.
    timeline: Vec<[f64; 2]>,
    /// True when more gaps happened than `max_gaps` kept for the timeline.
    timeline_truncated: bool,
}

#[derive(Serialize)]
pub struct FtqReport {
    quantum_ns: u64,
    /// Loop iterations completed in each consecutive quantum.
    counts: Vec<u32>,
}

/// Runs the loop for `cfg.duration_ns` on the calling (pinned) thread.
pub fn run(cfg: &Config) -> (GapReport, FtqReport) {
    let to_ticks = |ns: u64| (ns as f64 * cfg.tsc_ns) as u64;
    let (threshold, quantum) = (to_ticks(cfg.threshold_ns), to_ticks(cfg.quantum_ns).max(1));
    let n_quanta = (cfg.duration_ns / cfg.quantum_ns) as usize;
    // Everything the loop writes is allocated up front: growing a vector inside the loop
    // would itself be noise.
    let mut gaps: Vec<(u64, u64)> = Vec::with_capacity(cfg.max_gaps.min(1 << 16));
    let mut counts: Vec<u32> = Vec::with_capacity(n_quanta + 1);
    let (mut total_gaps, mut lost, mut longest) = (0u64, 0u64, 0u64);
    let mut iterations = 0u64;

    let start = tsc_start();
    let end = start + to_ticks(cfg.duration_ns);
    let mut quantum_end = start + quantum;
    let mut in_quantum = 0u32;
    let mut prev = start;
    loop {
        let now = tsc_end();
        let step = now.wrapping_sub(prev);
        if step > threshold {
            total_gaps += 1;
            lost += step;
            longest = longest.max(step);
            if gaps.len() < cfg.max_gaps {
                gaps.push((prev - start, step));
            }
        }
        iterations += 1;
        // Close every quantum that ended before this read (those inside a gap count 0).
        while now >= quantum_end && counts.len() < n_quanta {
            counts.push(in_quantum);
            in_quantum = 0;
            quantum_end += quantum;
        }
        in_quantum += 1;
        prev = now;
        if now >= end {
            break;
        }
    }
    let runtime_ticks = prev - start;
    let ns = |ticks: u64| ticks as f64 / cfg.tsc_ns;
    let runtime_ns = ns(runtime_ticks);
    let mut lengths: Vec<f64> = gaps.iter().map(|&(_, d)| ns(d)).collect();
    let gap = GapReport {
        runtime_ns,
        iterations,
        count: total_gaps,
        per_s: total_gaps as f64 / (runtime_ns / 1e9),
        lost_ns: ns(lost),
        lost_pct: 100.0 * lost as f64 / runtime_ticks as f64,
        max_ns: ns(longest),
        durations_ns: (!lengths.is_empty()).then(|| summarise(&mut lengths)),
        timeline: gaps.iter().map(|&(s, d)| [ns(s), ns(d)]).collect(),
        timeline_truncated: total_gaps as usize > gaps.len(),
    };
    (gap, FtqReport { quantum_ns: cfg.quantum_ns, counts })
}

#[cfg(test)]
mod tests {
    use super::{run, Config};
    use crate::cpu::tsc_per_ns;
    use std::time::Duration;

    #[test]
    fn one_count_per_quantum_and_consistent_totals() {
        let cfg = Config {
            duration_ns: 20_000_000,
            threshold_ns: 5_000,
            quantum_ns: 1_000_000,
            max_gaps: 3,
            tsc_ns: tsc_per_ns(Duration::from_millis(20)),
        };
        let (gap, ftq) = run(&cfg);
        assert_eq!(ftq.counts.len(), 20);
        assert!(gap.runtime_ns >= 20e6 && gap.runtime_ns < 40e6, "{}", gap.runtime_ns);
        assert!(ftq.counts.iter().map(|&c| u64::from(c)).sum::<u64>() <= gap.iterations);
        assert!(gap.lost_ns <= gap.runtime_ns && gap.max_ns <= gap.lost_ns + 1.0);
        assert!(gap.timeline.len() <= 3 && gap.timeline_truncated == (gap.count > 3));
    }
}
