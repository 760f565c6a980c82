//! Layout of a per-process profile file: written live by the runtime through a MAP_SHARED
//! mapping (so it survives SIGKILL) and read by coreplane-exec, which merges the files.

pub const MAGIC: &[u8; 8] = b"CPPROF02";
pub const HEADER_SIZE: usize = 4096;

// Header fields (u64 little endian unless noted).
pub const H_PID: usize = 8;
pub const H_PPID: usize = 16;
pub const H_START_NS: usize = 24; // CLOCK_MONOTONIC
pub const H_END_NS: usize = 32; // 0 while running or if killed
pub const H_NTHREADS: usize = 40;
pub const H_EXIT_CODE: usize = 48; // exit_group argument
pub const H_USER_NS: usize = 56;
pub const H_SYS_NS: usize = 64;
pub const H_TRAP_NS: usize = 72; // measured cost of one trapped call minus a native one
pub const H_TSC_KHZ: usize = 80; // stats are in TSC ticks: ns = ticks * 1e6 / khz
pub const H_FAST_NS: usize = 88; // measured cost of one call through a rewritten site minus a native one
pub const H_REWRITTEN: usize = 96; // syscall sites rewritten to the fast path
pub const H_START_TSC: usize = 104; // TSC read with H_START_NS: places S_FIRST_TSC / S_LAST_TSC in time
pub const H_MAPS_READS: usize = 112; // reads of /proc/self/maps by the runtime (which code is file text)
pub const H_SLOTLESS: usize = 120; // calls the policy delegates made locally: no request slot was free
pub const H_WITHDRAWN: usize = 128; // calls the policy delegates made locally: every delegate busy, the pool full
pub const H_UNPROFILED: usize = 136; // threads left without a block: past MAX_THREADS, or started after an mlockall beyond its spare blocks
pub const H_EXEC_UNPROFILED: usize = 144; // 1: the image this process's execve started runs unprofiled (no profile directory to reach)
pub const H_LOST_CHILDREN: usize = 152; // forked children that could not create their file: how many, their pids at H_LOST_PIDS
pub const H_LOST_PIDS: usize = 160; // up to LOST_PIDS_MAX pids (u64)
pub const LOST_PIDS_MAX: usize = 32;
pub const H_EXE: usize = 512; // NUL-terminated path of the loaded program
pub const H_EXE_MAX: usize = HEADER_SIZE - H_EXE;

/// Histogram buckets: four per octave of nanoseconds, 40 octaves.
pub const HIST_BUCKETS: usize = 160;
pub const NSYS: usize = crate::sysset::MAX_SYSCALLS;
pub const HIST_FORWARD_OFF: usize = HEADER_SIZE;
pub const HIST_QUEUED_OFF: usize = HIST_FORWARD_OFF + NSYS * HIST_BUCKETS * 8;
pub const THREADS_OFF: usize = HIST_QUEUED_OFF + NSYS * HIST_BUCKETS * 8;

// Per-thread block: header then NSYS records of STAT_FIELDS u64.
pub const T_TID: usize = 0;
pub const T_START_NS: usize = 8;
pub const T_END_NS: usize = 16;
/// Local calls left until the next timed one (see S_TIMED).
pub const T_SAMPLE_LEFT: usize = 24;
/// xorshift64 state drawing the gaps between timed calls.
pub const T_SAMPLE_RNG: usize = 32;
/// The thread's CPU time (user + system) at its end, +1 (0: not recorded, a killed process).
pub const T_CPU_NS: usize = 40;
pub const T_STATS: usize = 64;
pub const STAT_FIELDS: usize = 12;
pub const S_COUNT: usize = 0;
pub const S_ERRORS: usize = 1;
pub const S_TOTAL_TICKS: usize = 2;
pub const S_DELEGATED: usize = 3;
pub const S_QUEUED_TICKS: usize = 4;
/// Calls whose time is in S_TOTAL_TICKS. Local calls at a rewritten site are timed only in a
/// random sample (two rdtsc cost ≈ 15 ns, half of the fast path); the first TIME_FIRST of a
/// syscall in a thread and all other calls are always timed (S_EXACT below); the total is
/// their ticks plus the sample's scaled to the calls not always timed.
pub const S_TIMED: usize = 5;
/// The call timeline, for models that need to know when calls happen (a thread's start-up
/// calls hold everything up; its steady calls overlap other threads): the TSC at the start of
/// the syscall's first call and of its latest timed call in this thread (0 before any). The
/// first is exact (the first TIME_FIRST calls are always timed); the latest lies within one
/// sampling gap of the last call.
pub const S_FIRST_TSC: usize = 6;
pub const S_LAST_TSC: usize = 7;
/// The calls always timed (the first TIME_FIRST local ones, every trapped or delegated one) and
/// their ticks, part of S_TIMED and S_TOTAL_TICKS. They are not a random sample: the first
/// calls of a syscall in a thread are often the slow, cold ones (rg's directory walker: its
/// first openat and statx calls, scaled by count / timed, came to 140 ms in a 25 ms life).
pub const S_EXACT: usize = 8;
pub const S_EXACT_TICKS: usize = 9;
/// Sum of the successful calls' results: for the data calls (read, write and their kin) the
/// bytes moved, which a delegated call moves between the control and the compute core. Summed
/// for every call (one add); only the data calls' sums mean anything.
pub const S_BYTES: usize = 10;
/// Calls served in user space by the runtime (the memory service, `--memory pool`): neither
/// run locally nor delegated. Always timed.
pub const S_SERVED: usize = 11;
pub const TIME_FIRST: u64 = 8;
pub const THREAD_BLOCK: usize = 53248;
pub const MAX_THREADS: usize = 4096;
pub const FILE_SIZE: usize = THREADS_OFF + MAX_THREADS * THREAD_BLOCK;

const _: () = assert!(T_STATS + NSYS * STAT_FIELDS * 8 <= THREAD_BLOCK);
const _: () = assert!(THREADS_OFF % 4096 == 0);

/// Histogram bucket of a duration: exact below 4 ns, then four buckets per power of two.
pub fn bucket_of(ns: u64) -> usize {
    if ns < 4 {
        return ns as usize;
    }
    let octave = 63 - ns.leading_zeros() as usize; // >= 2
    let sub = (ns >> (octave - 2)) as usize & 3;
    (4 * (octave - 1) + sub).min(HIST_BUCKETS - 1)
}

/// Smallest duration that falls into bucket `b`.
pub fn bucket_floor(b: usize) -> u64 {
    if b < 4 {
        return b as u64;
    }
    let octave = b / 4 + 1;
    ((4 + b % 4) as u64) << (octave - 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_invert() {
        let mut last = 0;
        for ns in 0..100_000u64 {
            let b = bucket_of(ns);
            assert!(b >= last);
            last = b;
            assert!(bucket_floor(b) <= ns && (b + 1 >= HIST_BUCKETS || ns < bucket_floor(b + 1)), "{ns}");
        }
        assert_eq!(bucket_of(u64::MAX), HIST_BUCKETS - 1);
    }
}

/// Time spent in a row's calls: the always-timed calls' ticks as they are, the random sample's
/// scaled up to the calls it stands for (all but the always-timed ones).
pub fn total_ticks(row: &[u64]) -> u128 {
    let (count, timed, ticks) = (row[S_COUNT] as u128, row[S_TIMED] as u128, row[S_TOTAL_TICKS] as u128);
    let (exact, exact_ticks) = (row[S_EXACT] as u128, row[S_EXACT_TICKS] as u128);
    let (sampled, sampled_ticks) = (timed.saturating_sub(exact), ticks.saturating_sub(exact_ticks));
    let rest = count.saturating_sub(exact);
    match (sampled, exact) {
        (0, 0) => 0,
        (0, _) => exact_ticks * count / exact,
        _ => exact_ticks + sampled_ticks * rest / sampled,
    }
}

#[cfg(test)]
mod estimator_tests {
    use super::*;

    fn row(count: u64, timed: u64, ticks: u64, exact: u64, exact_ticks: u64) -> [u64; STAT_FIELDS] {
        let mut r = [0; STAT_FIELDS];
        (r[S_COUNT], r[S_TIMED], r[S_TOTAL_TICKS], r[S_EXACT], r[S_EXACT_TICKS]) = (count, timed, ticks, exact, exact_ticks);
        r
    }

    #[test]
    fn cold_first_calls_are_not_scaled_up() {
        // 8 cold calls of 1000 ticks, then 1000 calls of 10, of which 62 sampled.
        assert_eq!(total_ticks(&row(1008, 70, 8000 + 620, 8, 8000)), 8000 + 10 * 1000);
        // Every call timed (delegated, trapped): exact.
        assert_eq!(total_ticks(&row(5, 5, 500, 5, 500)), 500);
        // Only always-timed calls seen, more calls than them: their mean.
        assert_eq!(total_ticks(&row(10, 4, 400, 4, 400)), 1000);
        assert_eq!(total_ticks(&row(0, 0, 0, 0, 0)), 0);
    }
}
