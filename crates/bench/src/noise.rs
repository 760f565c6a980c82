//! OS-noise detectors and injectors: `noise measure` (gap detector, FTQ, FWQ) and
//! `noise inject` (SCHED_FIFO spinners). All times in the JSON are nanoseconds.

mod fwq;
mod gap;
mod inject;

use crate::cpu::tsc_per_ns;
use clap::Subcommand;
use serde::Serialize;
use std::sync::Barrier;
use std::time::Duration;

#[derive(clap::Args)]
pub struct NoiseArgs {
    #[command(subcommand)]
    command: NoiseCommand,
}

#[derive(Subcommand)]
enum NoiseCommand {
    /// Gap detector + FTQ (one loop), then FWQ, on each listed CPU at once.
    Measure(MeasureArgs),
    /// SCHED_FIFO threads that wake every period and spin, one per listed CPU.
    Inject(inject::InjectArgs),
}

#[derive(clap::Args)]
pub struct MeasureArgs {
    /// CPUs to measure, a kernel list such as "1" or "0-3,8"; one thread pinned on each.
    #[arg(long)]
    cpus: String,
    /// How long the gap/FTQ loop runs, and then the FWQ loop, on every CPU.
    #[arg(long, default_value_t = 5_000_000_000)]
    duration_ns: u64,
    /// A gap between two consecutive clock reads longer than this is an interruption.
    #[arg(long, default_value_t = 5_000)]
    threshold_ns: u64,
    /// FTQ quantum: loop iterations are counted per quantum of this length.
    #[arg(long, default_value_t = 100_000)]
    ftq_quantum_ns: u64,
    /// FWQ quantum: the fixed work is calibrated to take this long when undisturbed.
    #[arg(long, default_value_t = 100_000)]
    fwq_quantum_ns: u64,
    /// Skip the FWQ phase (the gap/FTQ loop alone).
    #[arg(long)]
    no_fwq: bool,
    /// At most this many gaps are kept per CPU for the timeline (all are counted).
    #[arg(long, default_value_t = 200_000)]
    max_gaps: usize,
    /// Measure as SCHED_FIFO at this priority (0: an ordinary task). Only higher-priority
    /// threads, interrupts and the RT throttle can then interrupt the detectors.
    #[arg(long, default_value_t = 0)]
    fifo: i32,
}

#[derive(Serialize)]
struct CpuReport {
    cpu: usize,
    gap: gap::GapReport,
    ftq: gap::FtqReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    fwq: Option<fwq::FwqReport>,
}

#[derive(Serialize)]
struct MeasureReport {
    tool: &'static str,
    units: &'static str,
    tsc_ghz: f64,
    threshold_ns: u64,
    duration_ns: u64,
    cpus: Vec<CpuReport>,
}

/// Expands a kernel CPU list ("0-3,8") into distinct core numbers, in order.
pub fn parse_cpu_list(spec: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |s: &str| s.trim().parse::<usize>().map_err(|_| format!("--cpus: '{s}' is not a CPU number"));
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if lo > hi {
            return Err(format!("--cpus: range '{part}' runs backwards"));
        }
        for c in lo..=hi {
            if cpus.contains(&c) {
                return Err(format!("--cpus: CPU {c} is listed twice"));
            }
            cpus.push(c);
        }
    }
    if cpus.is_empty() {
        return Err("--cpus: no CPU given".into());
    }
    Ok(cpus)
}

/// Makes the calling thread SCHED_FIFO at `priority` (it then preempts every ordinary task).
pub fn become_fifo(priority: i32) -> Result<(), String> {
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: pid 0 is the calling thread; `param` outlives the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(format!(
            "SCHED_FIFO priority {priority}: {} (needs root or CAP_SYS_NICE)",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Runs `work(cpu, start_barrier)` on one scoped thread per CPU and collects the results in order.
pub fn on_each_cpu<R: Send>(
    cpus: &[usize],
    work: impl Fn(usize, &Barrier) -> Result<R, String> + Sync,
) -> Result<Vec<R>, String> {
    let barrier = Barrier::new(cpus.len());
    let (barrier, work) = (&barrier, &work);
    std::thread::scope(|s| {
        let handles: Vec<_> = cpus.iter().map(|&c| s.spawn(move || work(c, barrier))).collect();
        handles.into_iter().map(|h| h.join().expect("noise thread panicked")).collect()
    })
}

fn measure(args: &MeasureArgs) -> Result<MeasureReport, String> {
    let cpus = parse_cpu_list(&args.cpus)?;
    if args.duration_ns < 10_000_000 || args.threshold_ns == 0 || args.ftq_quantum_ns < 1_000 || args.fwq_quantum_ns < 1_000 {
        return Err("duration must be >= 10 ms, threshold > 0, quanta >= 1 us".into());
    }
    // Every pin is tried before any loop starts, so one bad CPU fails fast and alone.
    for &c in &cpus {
        crate::cpu::pin_current_thread(c)?;
    }
    let tsc_ns = tsc_per_ns(Duration::from_millis(100));
    let reports = on_each_cpu(&cpus, |cpu, barrier| {
        crate::cpu::pin_current_thread(cpu)?;
        if args.fifo > 0 {
            become_fifo(args.fifo)?;
        }
        let gap_cfg = gap::Config {
            duration_ns: args.duration_ns,
            threshold_ns: args.threshold_ns,
            quantum_ns: args.ftq_quantum_ns,
            max_gaps: args.max_gaps,
            tsc_ns,
        };
        barrier.wait();
        let (gap, ftq) = gap::run(&gap_cfg);
        let fwq = (!args.no_fwq).then(|| {
            barrier.wait();
            fwq::run(args.fwq_quantum_ns, args.duration_ns, tsc_ns)
        });
        Ok(CpuReport { cpu, gap, ftq, fwq })
    })?;
    Ok(MeasureReport {
        tool: "coreplane-bench noise measure",
        units: "ns (durations and timestamps), percent (lost_pct), per second (per_s)",
        tsc_ghz: tsc_ns,
        threshold_ns: args.threshold_ns,
        duration_ns: args.duration_ns,
        cpus: reports,
    })
}

/// Runs the chosen noise subcommand and returns its JSON document.
pub fn run(args: &NoiseArgs) -> Result<serde_json::Value, String> {
    let doc = match &args.command {
        NoiseCommand::Measure(m) => serde_json::to_value(measure(m)?),
        NoiseCommand::Inject(i) => serde_json::to_value(inject::run(i)?),
    };
    doc.map_err(|e| format!("cannot encode the report: {e}"))
}

#[cfg(test)]
mod tests {
    use super::parse_cpu_list;

    #[test]
    fn cpu_lists_expand_and_reject() {
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert_eq!(parse_cpu_list("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert!(parse_cpu_list("3-1").unwrap_err().contains("backwards"));
        assert!(parse_cpu_list("1,1").unwrap_err().contains("twice"));
        assert!(parse_cpu_list("x").unwrap_err().contains("'x'"));
        assert!(parse_cpu_list("").unwrap_err().contains("no CPU"));
    }
}
