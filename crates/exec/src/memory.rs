//! The memory options: `--memory linux|pool|pool-demand` and the pool's `--memory-budget`,
//! checked against the machine before the program starts.

/// Who serves the program's anonymous memory.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Memory {
    /// The kernel, as without coreplane.
    Linux,
    /// The runtime's memory service, from a pool of --memory-budget bytes.
    Pool,
    /// The same, its pages filled on demand by the runtime's userfaultfd handler.
    PoolDemand,
}

impl Memory {
    pub fn name(self) -> &'static str {
        match self {
            Memory::Linux => "linux",
            Memory::Pool => "pool",
            Memory::PoolDemand => "pool-demand",
        }
    }
}

/// How the pool's scrubber is scheduled (`--scrubber-priority`).
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScrubberPriority {
    /// An ordinary task (SCHED_OTHER), as every other thread of the runtime's.
    Normal,
    /// SCHED_FIFO priority 1.
    Fifo,
}

impl ScrubberPriority {
    pub fn name(self) -> &'static str {
        match self {
            ScrubberPriority::Normal => "normal",
            ScrubberPriority::Fifo => "fifo",
        }
    }
}

/// Whether this process may run a thread under SCHED_FIFO priority 1, as the runtime's scrubber
/// does under `--scrubber-priority fifo`: tried on this thread, then undone.
pub fn check_fifo() -> Result<(), String> {
    // What this process runs under now, put back after the trial: the program inherits it (a
    // `chrt -f 10 coreplane run ...` program must run at FIFO 10, as natively).
    let policy = unsafe { libc::sched_getscheduler(0) };
    let mut param = libc::sched_param { sched_priority: 0 };
    unsafe { libc::sched_getparam(0, &mut param) };
    let fifo = libc::sched_param { sched_priority: 1 };
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!("--scrubber-priority fifo: SCHED_FIFO refused ({e}; it needs CAP_SYS_NICE or RLIMIT_RTPRIO)"));
    }
    unsafe { libc::sched_setscheduler(0, policy.max(0), &param) };
    Ok(())
}

/// A size in bytes: digits with an optional K, M, G or T suffix (powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("'{text}': unknown size suffix '{c}' (K, M, G or T)")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = digits.parse().map_err(|_| format!("'{text}': not a size (e.g. 512M, 2G)"))?;
    n.checked_shl(shift).filter(|v| v >> shift == n && *v > 0).ok_or_else(|| format!("'{text}': size out of range"))
}

/// The machine's memory (MemTotal of /proc/meminfo, from sysinfo(2): reading /proc/meminfo
/// cost every process started under the pool ≈ 20 µs), in bytes.
fn machine_bytes() -> Result<u64, String> {
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    if unsafe { libc::sysinfo(&mut info) } != 0 {
        return Err(format!("sysinfo: {}", std::io::Error::last_os_error()));
    }
    Ok(info.totalram as u64 * info.mem_unit.max(1) as u64)
}

/// Whether this process may handle the faults of its own memory through userfaultfd, as the
/// runtime does under `--memory pool-demand` (kernel-mode faults too: a read(2) into the pool).
pub fn check_userfaultfd() -> Result<(), String> {
    let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) };
    if fd < 0 {
        let sysctl = std::fs::read_to_string("/proc/sys/vm/unprivileged_userfaultfd").unwrap_or_default();
        return Err(format!(
            "--memory pool-demand: userfaultfd refused ({}; it needs CAP_SYS_PTRACE, or vm.unprivileged_userfaultfd = 1, now {})",
            std::io::Error::last_os_error(),
            sysctl.trim()
        ));
    }
    unsafe { libc::close(fd as i32) };
    Ok(())
}

/// The pool's size for the runtime, or an error naming the option when the machine lacks it.
pub fn checked_budget(budget: u64) -> Result<u64, String> {
    let machine = machine_bytes()?;
    if budget > machine {
        return Err(format!(
            "--memory-budget {:.1} GiB: larger than this machine's memory ({:.1} GiB)",
            budget as f64 / (1u64 << 30) as f64,
            machine as f64 / (1u64 << 30) as f64
        ));
    }
    Ok(budget)
}

/// Set by `coreplane cell exec` in a cell made with `--memory-budget`: the bytes each pooled
/// process of the cell may hold.
const CELL_BUDGET_VARIABLE: &str = "COREPLANE_CELL_MEMORY_BUDGET";

/// The pool's budget in a cell with a budget of its own: the smaller of the two (a run's
/// --memory-budget cannot take a process past what the cell allows).
pub fn within_cell(budget: u64) -> u64 {
    let cell = std::env::var(CELL_BUDGET_VARIABLE).ok().and_then(|v| v.parse::<u64>().ok()).filter(|b| *b > 0);
    cell.map_or(budget, |c| c.min(budget))
}

/// Set by `coreplane cell exec` in a cell made with `--memory-give-back`: the memory pressure (%)
/// from which the pool gives freed memory back to the kernel.
const CELL_GIVE_BACK_VARIABLE: &str = "COREPLANE_CELL_MEMORY_GIVE_BACK";

/// The memory pressure (%, 0 to 100) from which the pool gives memory back: the cell's, or the
/// runtime's default.
pub fn give_back_threshold() -> u32 {
    std::env::var(CELL_GIVE_BACK_VARIABLE)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|p| *p <= 100)
        .unwrap_or(coreplane_runtime::config::DEFAULT_GIVE_BACK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("512m").unwrap(), 512 << 20);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("2X").unwrap_err().contains("unknown size suffix"));
        assert!(parse_size("G").is_err() && parse_size("0").is_err() && parse_size("99999999999T").is_err());
    }

    #[test]
    fn budget_beyond_the_machine_is_refused() {
        assert!(checked_budget(1 << 20).is_ok());
        let e = checked_budget(1 << 60).unwrap_err();
        assert!(e.starts_with("--memory-budget 1073741824.0 GiB: larger than this machine's memory"), "{e}");
    }
}
