//! Syscall paths as a program under coreplane run sees them: a null syscall (getppid through
//! glibc's syscall(), one hot site) timed call by call, next to the cache-line ping-pong between
//! the same two cores in the same process, so that ratios come from one run; and the cost of
//! the first calls at a site (`sites`: 64 distinct syscall instructions, each call timed up to
//! past the one that rewrites the site).

use crate::cpu::{pin_current_thread, tsc_end, tsc_per_ns, tsc_start};
use crate::floor::{parse_cores, pingpong};
use crate::stats::{summarise, Summary};
use serde::Serialize;
use std::time::Duration;

#[derive(clap::Args)]
pub struct PathsArgs {
    /// The program's core, then the core the ping-pong peer (and a delegate) runs on: "A,B".
    #[arg(long, default_value = "1,0")]
    cores: String,
    /// Timed null syscalls (after 1% warm-up).
    #[arg(long, default_value_t = 100_000)]
    calls: usize,
    /// Timed ping-pong round trips.
    #[arg(long, default_value_t = 100_000)]
    round_trips: usize,
    /// Arm Syscall User Dispatch first with every address allowed, so that nothing traps: what
    /// the kernel's entry path costs once dispatch is on (the floor of the runtime's fast path).
    #[arg(long)]
    dispatch_armed: bool,
}

#[derive(Serialize)]
pub struct PathsReport {
    cores: [usize; 2],
    tsc_ghz: f64,
    cacheline_pingpong_ns: Summary,
    /// One getppid per sample, timed with the same TSC pair as the ping-pong.
    null_syscall_ns: Summary,
}

/// Ping-pong, then the null-syscall loop, on the given cores.
pub fn run(args: &PathsArgs) -> Result<PathsReport, String> {
    let cores = parse_cores(&args.cores)?;
    if args.calls == 0 || args.round_trips == 0 {
        return Err("counts must be positive".into());
    }
    pin_current_thread(cores[1])?;
    pin_current_thread(cores[0])?;
    let tsc_ns = tsc_per_ns(Duration::from_millis(50));
    let cacheline_pingpong_ns = pingpong(cores, args.round_trips, tsc_ns)?;
    if args.dispatch_armed {
        arm_dispatch_allowing_all()?;
    }
    let warm = args.calls / 100 + 1;
    let mut samples = Vec::with_capacity(args.calls);
    for i in 0..warm + args.calls {
        let t0 = tsc_start();
        // SAFETY: getppid takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_getppid) };
        let t1 = tsc_end();
        if i >= warm {
            samples.push((t1 - t0) as f64 / tsc_ns);
        }
    }
    Ok(PathsReport { cores, tsc_ghz: tsc_ns, cacheline_pingpong_ns, null_syscall_ns: summarise(&mut samples) })
}

/// Syscall User Dispatch on for this thread, with the allowed region covering all of user space.
fn arm_dispatch_allowing_all() -> Result<(), String> {
    const PR_SET_SYSCALL_USER_DISPATCH: libc::c_int = 59;
    const PR_SYS_DISPATCH_ON: libc::c_ulong = 1;
    const ALL: (libc::c_ulong, libc::c_ulong) = (0x1000, 0x7fff_ffff_f000);
    // SAFETY: prctl with integer arguments; no selector byte is given.
    let r = unsafe { libc::prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, ALL.0, ALL.1, 0 as libc::c_ulong) };
    if r != 0 {
        return Err(format!("Syscall User Dispatch: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

macro_rules! sites {
    ($($name:ident = $n:literal)*) => {
        $(
            #[inline(never)]
            fn $name() {
                // SAFETY: getppid (110) takes no arguments. The distinct value loaded into rcx
                // (which the syscall clobbers anyway) keeps the compiler from merging the sites;
                // the number goes into eax right before the syscall, as libc's wrappers do, so
                // each site can be rewritten by either fast-path method.
                unsafe {
                    core::arch::asm!("mov ecx, {n}", "mov eax, 110", "syscall", n = const $n, lateout("rax") _,
                                     lateout("rcx") _, lateout("r11") _, options(nostack));
                }
            }
        )*
        const SITES: &[fn()] = &[$($name),*];
    };
}

sites!(s00 = 0 s01 = 1 s02 = 2 s03 = 3 s04 = 4 s05 = 5 s06 = 6 s07 = 7 s08 = 8 s09 = 9 s10 = 10 s11 = 11
       s12 = 12 s13 = 13 s14 = 14 s15 = 15 s16 = 16 s17 = 17 s18 = 18 s19 = 19 s20 = 20 s21 = 21 s22 = 22
       s23 = 23 s24 = 24 s25 = 25 s26 = 26 s27 = 27 s28 = 28 s29 = 29 s30 = 30 s31 = 31 s32 = 32 s33 = 33
       s34 = 34 s35 = 35 s36 = 36 s37 = 37 s38 = 38 s39 = 39 s40 = 40 s41 = 41 s42 = 42 s43 = 43 s44 = 44
       s45 = 45 s46 = 46 s47 = 47 s48 = 48 s49 = 49 s50 = 50 s51 = 51 s52 = 52 s53 = 53 s54 = 54 s55 = 55
       s56 = 56 s57 = 57 s58 = 58 s59 = 59 s60 = 60 s61 = 61 s62 = 62 s63 = 63);

/// Calls timed at each site: twice the runtime's default rewrite point, so that under coreplane
/// the trapped calls, the one that rewrites the site and the fast-path calls after it all show.
pub const CALLS_PER_SITE: usize = 2 * coreplane_runtime::config::DEFAULT_REWRITE_AT as usize;

#[derive(Serialize)]
pub struct SitesReport {
    sites: usize,
    /// The i-th call at each site, i = 1.. (under coreplane: traps until the rewrite, then the
    /// fast path).
    calls_ns: Vec<Summary>,
}

/// The first CALLS_PER_SITE calls at each of 64 distinct syscall sites.
pub fn sites() -> SitesReport {
    let tsc_ns = tsc_per_ns(Duration::from_millis(50));
    let mut calls = vec![Vec::new(); CALLS_PER_SITE];
    for site in SITES {
        for out in calls.iter_mut() {
            let t0 = tsc_start();
            site();
            let t1 = tsc_end();
            out.push((t1 - t0) as f64 / tsc_ns);
        }
    }
    SitesReport { sites: SITES.len(), calls_ns: calls.iter_mut().map(|c| summarise(c)).collect() }
}
