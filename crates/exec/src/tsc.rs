//! The TSC frequency the runtime converts its timestamps with: measured once per boot (20 ms
//! against CLOCK_MONOTONIC) and kept in a small file keyed by the kernel's boot id, because
//! 20 ms is a large share of a short program's run.

use std::path::PathBuf;
use std::time::{Duration, Instant};

const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

fn cache_file() -> PathBuf {
    let dir = if is_root() { PathBuf::from("/run/coreplane") } else { std::env::temp_dir() };
    dir.join("tsc-khz")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn measure() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86-64.
    let tsc = || unsafe { core::arch::x86_64::_rdtsc() };
    let (w0, t0) = (Instant::now(), tsc());
    while w0.elapsed() < Duration::from_millis(20) {
        std::hint::spin_loop();
    }
    let (t1, w1) = (tsc(), Instant::now());
    ((t1 - t0) as u128 * 1_000_000 / (w1 - w0).as_nanos()) as u64
}

/// TSC ticks per millisecond.
pub fn khz() -> u64 {
    let boot = std::fs::read_to_string(BOOT_ID).unwrap_or_default();
    let boot = boot.trim();
    let file = cache_file();
    if let Ok(text) = std::fs::read_to_string(&file) {
        if let Some((id, khz)) = text.trim().split_once(' ') {
            if id == boot {
                if let Ok(khz) = khz.parse::<u64>() {
                    return khz;
                }
            }
        }
    }
    let khz = measure();
    if !boot.is_empty() {
        let _ = std::fs::create_dir_all(file.parent().unwrap());
        let tmp = file.with_extension(format!("{}", std::process::id()));
        if std::fs::write(&tmp, format!("{boot} {khz}\n")).is_ok() {
            let _ = std::fs::rename(&tmp, &file);
        }
    }
    khz
}
