//! The physical floor: how fast two cores can talk at all, and what a bare syscall costs.

use crate::cpu::{pin_current_thread, tsc_end, tsc_per_ns, tsc_start};
use crate::stats::{summarise, Summary};
use serde::Serialize;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

#[derive(clap::Args)]
pub struct FloorArgs {
    /// Two cores, initiator first: "A,B".
    #[arg(long, default_value = "0,1")]
    cores: String,
    /// Timed cache-line round trips (after 1% warm-up).
    #[arg(long, default_value_t = 200_000)]
    round_trips: usize,
    /// Timed batches of raw getppid calls.
    #[arg(long, default_value_t = 10_000)]
    syscall_batches: usize,
    /// Calls per timed syscall batch (per-call figures are batch time / batch).
    #[arg(long, default_value_t = 32)]
    syscall_batch: usize,
    /// Timed futex wake-up round trips.
    #[arg(long, default_value_t = 20_000)]
    futex_round_trips: usize,
}

#[derive(Serialize)]
pub struct FloorReport {
    cores: [usize; 2],
    tsc_ghz: f64,
    /// Round trip of a value through two 128-byte-aligned lines, one written by each core.
    cacheline_pingpong_ns: Summary,
    /// One raw getppid syscall on the initiator core, from batches of `syscall_batch`.
    null_syscall_ns: Summary,
    syscall_batch: usize,
    /// FUTEX_WAKE to a sleeping thread on the other core and back.
    futex_wake_round_trip_ns: Summary,
}

/// A value alone on its own pair of 64-byte lines, so the adjacent-line prefetcher
/// does not couple it to a neighbour.
#[repr(C, align(128))]
struct Line<T>(T);

/// Parses "A,B" into two distinct online core numbers.
pub(crate) fn parse_cores(spec: &str) -> Result<[usize; 2], String> {
    let parts: Vec<&str> = spec.split(',').map(str::trim).collect();
    let cores: Vec<usize> = parts
        .iter()
        .map(|p| p.parse::<usize>().map_err(|_| format!("--cores: '{p}' is not a core number")))
        .collect::<Result<_, _>>()?;
    match cores.as_slice() {
        [a, b] if a != b => Ok([*a, *b]),
        [_, _] => Err("--cores: the two cores must differ".into()),
        _ => Err(format!("--cores: expected two cores 'A,B', got '{spec}'")),
    }
}

/// Runs `responder` pinned on `core` in a scoped thread while `initiator` runs here.
fn on_two_cores<R: Send>(
    cores: [usize; 2],
    initiator: impl FnOnce() -> R,
    responder: impl FnOnce() + Send,
) -> Result<R, String> {
    pin_current_thread(cores[0])?;
    std::thread::scope(|s| {
        let peer = s.spawn(move || pin_current_thread(cores[1]).map(|()| responder()));
        let out = initiator();
        peer.join().expect("responder panicked").map(|()| out)
    })
}

/// Times `n` round trips (after 1% warm-up) between an initiator on cores[0], whose
/// `send_and_wait(i)` starts round trip i and returns when it is answered, and a responder on
/// cores[1], whose `answer(i)` waits for round trip i and answers it. Round trips count from 1.
fn round_trips(
    cores: [usize; 2],
    n: usize,
    tsc_ns: f64,
    send_and_wait: impl Fn(u32),
    answer: impl Fn(u32) + Send,
) -> Result<Summary, String> {
    let warm = n / 100 + 1;
    let total = (warm + n) as u32;
    let mut samples = Vec::with_capacity(n);
    on_two_cores(
        cores,
        || {
            for i in 1..=total {
                let t0 = tsc_start();
                send_and_wait(i);
                let t1 = tsc_end();
                if i as usize > warm {
                    samples.push((t1 - t0) as f64 / tsc_ns);
                }
            }
        },
        move || (1..=total).for_each(answer),
    )?;
    Ok(summarise(&mut samples))
}

/// A value through two lines, each written by one core and polled by the other.
pub(crate) fn pingpong(cores: [usize; 2], n: usize, tsc_ns: f64) -> Result<Summary, String> {
    let ping = Line(AtomicU32::new(0));
    let pong = Line(AtomicU32::new(0));
    let spin_until = |line: &AtomicU32, i: u32| {
        while line.load(Ordering::Acquire) != i {
            std::hint::spin_loop();
        }
    };
    round_trips(
        cores,
        n,
        tsc_ns,
        |i| {
            ping.0.store(i, Ordering::Release);
            spin_until(&pong.0, i);
        },
        |i| {
            spin_until(&ping.0, i);
            pong.0.store(i, Ordering::Release);
        },
    )
}

fn null_syscall(core: usize, batches: usize, batch: usize, tsc_ns: f64) -> Result<Summary, String> {
    pin_current_thread(core)?;
    let mut samples = Vec::with_capacity(batches);
    for b in 0..batches + batches / 100 + 1 {
        let t0 = tsc_start();
        for _ in 0..batch {
            // SAFETY: getppid takes no arguments and cannot fail.
            unsafe { libc::syscall(libc::SYS_getppid) };
        }
        let t1 = tsc_end();
        if b > batches / 100 {
            samples.push((t1 - t0) as f64 / tsc_ns / batch as f64);
        }
    }
    Ok(summarise(&mut samples))
}

fn futex_wait(word: &AtomicU32, while_value: u32) {
    // SAFETY: `word` is a live, aligned u32; FUTEX_WAIT_PRIVATE only reads it.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            while_value,
            std::ptr::null::<libc::timespec>(),
        )
    };
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: as above; FUTEX_WAKE does not touch the word.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1) };
}

/// Blocks until `word` holds `want`, sleeping in the kernel rather than spinning.
fn sleep_until(word: &AtomicU32, want: u32) {
    loop {
        let seen = word.load(Ordering::Acquire);
        if seen == want {
            return;
        }
        futex_wait(word, seen);
    }
}

/// A FUTEX_WAKE to a peer sleeping on the other core, and its wake-up back.
fn futex_round_trip(cores: [usize; 2], n: usize, tsc_ns: f64) -> Result<Summary, String> {
    let to_b = Line(AtomicU32::new(0));
    let to_a = Line(AtomicU32::new(0));
    round_trips(
        cores,
        n,
        tsc_ns,
        |i| {
            to_b.0.store(i, Ordering::Release);
            futex_wake(&to_b.0);
            sleep_until(&to_a.0, i);
        },
        |i| {
            sleep_until(&to_b.0, i);
            to_a.0.store(i, Ordering::Release);
            futex_wake(&to_a.0);
        },
    )
}

/// Measures the three floors on the given pair of cores.
pub fn run(args: &FloorArgs) -> Result<FloorReport, String> {
    let cores = parse_cores(&args.cores)?;
    if args.round_trips == 0 || args.syscall_batches == 0 || args.syscall_batch == 0 || args.futex_round_trips == 0 {
        return Err("counts must be positive".into());
    }
    // Both pins are tried here, so a responder never fails while its initiator spins.
    pin_current_thread(cores[1])?;
    pin_current_thread(cores[0])?;
    let tsc_ns = tsc_per_ns(Duration::from_millis(100));
    Ok(FloorReport {
        cores,
        tsc_ghz: tsc_ns,
        cacheline_pingpong_ns: pingpong(cores, args.round_trips, tsc_ns)?,
        null_syscall_ns: null_syscall(cores[0], args.syscall_batches, args.syscall_batch, tsc_ns)?,
        syscall_batch: args.syscall_batch,
        futex_wake_round_trip_ns: futex_round_trip(cores, args.futex_round_trips, tsc_ns)?,
    })
}

#[cfg(test)]
mod tests {
    use super::parse_cores;

    #[test]
    fn cores_parse_and_reject() {
        assert_eq!(parse_cores("0,1").unwrap(), [0, 1]);
        assert_eq!(parse_cores(" 3 , 2").unwrap(), [3, 2]);
        assert!(parse_cores("1,1").unwrap_err().contains("differ"));
        assert!(parse_cores("0").unwrap_err().contains("two cores"));
        assert!(parse_cores("a,1").unwrap_err().contains("'a'"));
    }
}
