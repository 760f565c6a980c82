//! Signal delivery to a program handler, timed per signal: where the signal interrupts program
//! code, and where it interrupts a call the runtime serves itself (run it under coreplane).

use crate::cpu::{tsc_end, tsc_per_ns, tsc_start};
use crate::stats::{summarise, Summary};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

#[derive(clap::Args)]
pub struct SignalsArgs {
    /// Signals timed per case.
    #[arg(long, default_value_t = 20_000)]
    signals: usize,
}

#[derive(Serialize)]
pub struct SignalsReport {
    /// tgkill to the calling thread, delivered as the call returns: under coreplane the call is
    /// made by the fast path's assembly, which counts as program code.
    pub tgkill_ns: Summary,
    /// The signal pending while blocked, delivered when rt_sigprocmask unblocks it: under
    /// coreplane that call is served by the runtime's Rust (the mask loses SIGSYS), so the handler
    /// is given the program's context in a frame of its own.
    pub unblock_ns: Summary,
}

static HANDLED: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    HANDLED.fetch_add(1, Relaxed);
}

/// Both cases, each signal timed from before the call that delivers it to after its return.
pub fn run(args: &SignalsArgs) -> Result<SignalsReport, String> {
    let tsc_ns = tsc_per_ns(Duration::from_millis(50));
    let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        if libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()) != 0 {
            return Err("sigaction(SIGUSR1) failed".into());
        }
    }
    let mut one = unsafe { std::mem::zeroed::<libc::sigset_t>() };
    unsafe {
        libc::sigemptyset(&mut one);
        libc::sigaddset(&mut one, libc::SIGUSR1);
    }
    let time = |deliver: &dyn Fn()| {
        let mut samples = Vec::with_capacity(args.signals);
        for _ in 0..args.signals {
            let before = HANDLED.load(Relaxed);
            let t0 = tsc_start();
            deliver();
            let t1 = tsc_end();
            if HANDLED.load(Relaxed) == before + 1 {
                samples.push((t1 - t0) as f64 / tsc_ns);
            }
        }
        samples
    };
    let mut tgkill = time(&|| unsafe {
        libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGUSR1);
    });
    let mut unblock = time(&|| unsafe {
        libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, &one as *const _, 0, 8);
        libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGUSR1);
        libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_UNBLOCK, &one as *const _, 0, 8);
    });
    if tgkill.len() < args.signals / 2 || unblock.len() < args.signals / 2 {
        return Err(format!("too few signals handled where sent: {} and {} of {}", tgkill.len(), unblock.len(), args.signals));
    }
    Ok(SignalsReport { tgkill_ns: summarise(&mut tgkill), unblock_ns: summarise(&mut unblock) })
}
