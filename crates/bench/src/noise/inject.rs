//! Noise injection: one SCHED_FIFO thread per CPU wakes once per period and spins, like
//! the 1 ms-every-100 ms interrupt ROS used (ROS §5.2.1). Its own wake-up lateness is reported too.

use crate::stats::{summarise, Summary};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn request_stop(_signal: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Every CPU wakes at the same instants: multiples of the period on CLOCK_MONOTONIC,
    /// so separate injector processes line up too.
    Sync,
    /// Each CPU wakes at an independent uniformly random point of every period.
    Random,
}

#[derive(clap::Args)]
pub struct InjectArgs {
    /// CPUs to disturb, a kernel list such as "0-1".
    #[arg(long)]
    cpus: String,
    #[arg(long, default_value_t = 100_000_000)]
    period_ns: u64,
    /// Busy time per activation.
    #[arg(long, default_value_t = 1_000_000)]
    spin_ns: u64,
    /// Stop after this long; 0 runs until SIGINT or SIGTERM.
    #[arg(long, default_value_t = 0)]
    duration_ns: u64,
    #[arg(long, value_enum, default_value_t = Phase::Sync)]
    phase: Phase,
    /// SCHED_FIFO priority (1-99): anything above 0 preempts ordinary (SCHED_OTHER) tasks.
    #[arg(long, default_value_t = 10)]
    priority: i32,
    /// Seed of the random phases.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Serialize)]
struct CpuInjection {
    cpu: usize,
    activations: u64,
    /// Periods skipped because the thread woke too late to fit its spin in.
    missed: u64,
    /// How late each wake-up was against its deadline (a timerlat-like figure).
    wake_latency_ns: Option<Summary>,
    /// How long each spin actually lasted.
    spin_ns: Option<Summary>,
}

#[derive(Serialize)]
pub struct InjectReport {
    tool: &'static str,
    units: &'static str,
    period_ns: u64,
    spin_ns: u64,
    phase: Phase,
    priority: i32,
    elapsed_ns: u64,
    cpus: Vec<CpuInjection>,
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (returns early on a signal).
fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec { tv_sec: (deadline_ns / 1_000_000_000) as _, tv_nsec: (deadline_ns % 1_000_000_000) as _ };
    // SAFETY: `ts` is a valid timespec; no remainder is requested with TIMER_ABSTIME.
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
}

/// A small xorshift generator: the phases need spread, not cryptographic quality.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        if bound == 0 { 0 } else { self.0 % bound }
    }
}

fn inject_on(cpu: usize, args: &InjectArgs, until_ns: Option<u64>) -> Result<CpuInjection, String> {
    crate::cpu::pin_current_thread(cpu)?;
    super::become_fifo(args.priority)?;
    let mut rng = XorShift((args.seed ^ (cpu as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1);
    let (mut latencies, mut spins) = (Vec::new(), Vec::new());
    let mut missed = 0;
    // Periods are numbered from the epoch of CLOCK_MONOTONIC so all injectors agree on them.
    let mut period_index = monotonic_ns() / args.period_ns + 1;
    while !STOP.load(Ordering::Relaxed) {
        let offset = match args.phase {
            Phase::Sync => 0,
            Phase::Random => rng.below(args.period_ns - args.spin_ns),
        };
        let deadline = period_index * args.period_ns + offset;
        if until_ns.is_some_and(|u| deadline + args.spin_ns > u) {
            break;
        }
        sleep_until(deadline);
        let woke = monotonic_ns();
        if woke < deadline {
            continue; // interrupted by a stop signal
        }
        latencies.push((woke - deadline) as f64);
        while monotonic_ns() < woke + args.spin_ns {
            std::hint::spin_loop();
        }
        spins.push((monotonic_ns() - woke) as f64);
        let next = monotonic_ns() / args.period_ns + 1;
        missed += next.saturating_sub(period_index + 1);
        period_index = next;
    }
    let summary = |v: &mut Vec<f64>| (!v.is_empty()).then(|| summarise(v));
    Ok(CpuInjection {
        cpu,
        activations: spins.len() as u64,
        missed,
        wake_latency_ns: summary(&mut latencies),
        spin_ns: summary(&mut spins),
    })
}

/// Injects until the duration ends or a stop signal arrives, then reports per CPU.
pub fn run(args: &InjectArgs) -> Result<InjectReport, String> {
    let cpus = super::parse_cpu_list(&args.cpus)?;
    if args.spin_ns == 0 || args.spin_ns >= args.period_ns {
        return Err(format!("--spin-ns {} must be above 0 and below --period-ns {}", args.spin_ns, args.period_ns));
    }
    if !(1..=99).contains(&args.priority) {
        return Err(format!("--priority {}: SCHED_FIFO priorities run from 1 to 99", args.priority));
    }
    for &c in &cpus {
        crate::cpu::pin_current_thread(c)?;
    }
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, request_stop as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, request_stop as *const () as libc::sighandler_t);
    }
    let start = monotonic_ns();
    let until = (args.duration_ns > 0).then(|| start + args.duration_ns);
    let reports = super::on_each_cpu(&cpus, |cpu, _| inject_on(cpu, args, until))?;
    Ok(InjectReport {
        tool: "coreplane-bench noise inject",
        units: "ns",
        period_ns: args.period_ns,
        spin_ns: args.spin_ns,
        phase: args.phase,
        priority: args.priority,
        elapsed_ns: monotonic_ns() - start,
        cpus: reports,
    })
}
