//! The runtime's configuration, passed from coreplane-exec in the COREPLANE_RT environment
//! variable as `key=value` fields separated by `;` (the profile directory comes last).

use crate::sysset::SysSet;

pub const ENV_NAME: &[u8] = b"COREPLANE_RT";
pub const MAX_CPUS: usize = 1024;
/// Largest mean gap between timed local calls (`te`, coreplane-exec --time-every).
pub const TIME_EVERY_MAX: u64 = 1 << 20;

/// Whether the CPU and the kernel provide protection keys (CPUID leaf 7, ECX.OSPKE), which the
/// page-0 sled needs to make page 0 execute-only: the runtime picks its rewrite by it, and the
/// launcher warns when `--null-page-sled` is asked for without them.
pub fn protection_keys() -> bool {
    use core::arch::x86_64::{__cpuid, __cpuid_count};
    __cpuid(0).eax >= 7 && __cpuid_count(7, 0).ecx & (1 << 4) != 0
}

/// At which trap a syscall site is rewritten (`rwat`, coreplane-exec --rewrite-at): a rewrite
/// costs several traps (docs/benchmarks.md, "A site rewritten at its Nth trap"), and most sites
/// of a short process trap once or twice.
pub const DEFAULT_REWRITE_AT: u32 = 8;
pub const REWRITE_AT_MAX: u64 = 127;

/// The memory pressure (%) from which the pool gives freed memory back, unless a cell says.
pub const DEFAULT_GIVE_BACK: u32 = 10;

/// A CPU set for sched_setaffinity (1024 bits, the kernel's cpu_set_t).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CpuMask(pub [u64; MAX_CPUS / 64]);

impl CpuMask {
    pub const EMPTY: CpuMask = CpuMask([0; MAX_CPUS / 64]);

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    pub fn contains(&self, cpu: usize) -> bool {
        cpu < MAX_CPUS && self.0[cpu / 64] >> (cpu % 64) & 1 == 1
    }

    /// Parses a kernel CPU list ("0-3,8").
    pub fn parse(text: &[u8]) -> Option<CpuMask> {
        let mut mask = CpuMask::EMPTY;
        for part in text.split(|&c| c == b',').filter(|p| !p.is_empty()) {
            let (lo, hi) = match part.iter().position(|&c| c == b'-') {
                Some(i) => (parse_u64(&part[..i])?, parse_u64(&part[i + 1..])?),
                None => (parse_u64(part)?, parse_u64(part)?),
            };
            if lo > hi || hi as usize >= MAX_CPUS {
                return None;
            }
            for c in lo..=hi {
                mask.0[c as usize / 64] |= 1 << (c % 64);
            }
        }
        Some(mask)
    }
}

/// Parsed configuration; byte slices borrow from the environment string.
#[derive(Clone, Copy, Debug)]
pub struct Config<'a> {
    /// Syscalls delegated to the control cores; all others run locally.
    pub delegated: SysSet,
    /// Artificial forward cost per direction in ns (a round trip costs twice this).
    pub forward_cost_ns: u64,
    /// TSC frequency in kHz, measured once by the supervisor.
    pub tsc_khz: u64,
    pub compute: CpuMask,
    pub control: CpuMask,
    /// Delegate threads started with the first delegated call (the pool grows when all block).
    pub delegates: u32,
    /// Mean gap between timed local calls at rewritten sites (1: time every call).
    pub time_every: u64,
    /// Directory receiving one profile file per process; empty for no profile.
    pub profile_dir: &'a [u8],
    /// Thread placement by clone-tree key: `KEY:CPULIST` entries separated by `|`.
    pub placement: &'a [u8],
    /// Use the page-0 sled for the fast path even where page 0 cannot be made unreadable
    /// (no protection keys): faster to set up, but NULL reads no longer fault.
    pub null_page_sled: bool,
    /// Show the program a vDSO whose calls the runtime makes, so they are profiled and follow
    /// the delegation policy (`--vdso intercept`; default: the kernel's vDSO, calls unseen).
    pub vdso_intercept: bool,
    /// A syscall site is rewritten for the fast path at its `rewrite_at`-th trap (1: its first).
    pub rewrite_at: u32,
    /// Bytes of the memory pool that serves anonymous memory in user space (`--memory pool`);
    /// 0: the kernel serves it (`--memory linux`).
    pub memory_pool: u64,
    /// The pool's pages are filled at first touch by the runtime's userfaultfd handler
    /// (`--memory pool-demand`), not by the kernel.
    pub memory_on_demand: bool,
    /// The memory pressure (PSI "some avg10" of /proc/pressure/memory, in %) from which the
    /// pool gives freed memory back to the kernel instead of keeping it populated; 0: always.
    pub memory_give_back: u32,
    /// Lock the program's memory, present and future (mlockall), as a cell made with `--mlock`
    /// asks: page faults and reclaim stay off the compute cores.
    pub lock_memory: bool,
    /// The pool's scrubber runs under SCHED_FIFO priority 1 (`--scrubber-priority fifo`), ahead
    /// of every ordinary task on the control cores; else as an ordinary task.
    pub scrubber_fifo: bool,
    /// Bytes the pool may grow beyond `memory_pool` when `memory_supervisor` grants them.
    pub memory_grow: u64,
    /// The pid of the supervisor (coreplane-exec) that grants growth (0: none).
    pub memory_supervisor: u32,
    /// The pid of the launcher (coreplane-exec) that passes signals sent to it on to its child,
    /// which notes those it got itself (0: none).
    pub launcher: u32,
}

impl Config<'_> {
    /// The CPUs the placement gives the task `key` ("0", "0.1", ...), if it names it.
    pub fn placement_of(&self, key: &[u8]) -> Option<CpuMask> {
        self.placement.split(|&c| c == b'|').find_map(|entry| {
            let colon = entry.iter().position(|&c| c == b':')?;
            (&entry[..colon] == key).then(|| CpuMask::parse(&entry[colon + 1..])).flatten()
        })
    }
}

pub fn parse_u64(text: &[u8]) -> Option<u64> {
    if text.is_empty() || text.len() > 19 {
        return None;
    }
    text.iter().try_fold(0u64, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + (c - b'0') as u64))
}

/// Parses the COREPLANE_RT value; None if a field is malformed or one is missing.
pub fn parse(text: &[u8]) -> Option<Config<'_>> {
    let mut cfg = Config {
        delegated: SysSet::EMPTY,
        forward_cost_ns: 0,
        tsc_khz: 0,
        compute: CpuMask::EMPTY,
        control: CpuMask::EMPTY,
        delegates: 1,
        time_every: 1,
        profile_dir: b"",
        placement: b"",
        null_page_sled: false,
        vdso_intercept: false,
        rewrite_at: DEFAULT_REWRITE_AT,
        memory_pool: 0,
        memory_on_demand: false,
        memory_give_back: DEFAULT_GIVE_BACK,
        lock_memory: false,
        scrubber_fifo: false,
        memory_grow: 0,
        memory_supervisor: 0,
        launcher: 0,
    };
    let mut rest = text;
    while !rest.is_empty() {
        let eq = rest.iter().position(|&c| c == b'=')?;
        let key = &rest[..eq];
        let after = &rest[eq + 1..];
        if key == b"prof" {
            cfg.profile_dir = after;
            break;
        }
        let end = after.iter().position(|&c| c == b';').unwrap_or(after.len());
        let value = &after[..end];
        match key {
            b"d" => cfg.delegated = SysSet::from_hex(value)?,
            b"fc" => cfg.forward_cost_ns = parse_u64(value)?,
            b"khz" => cfg.tsc_khz = parse_u64(value)?,
            b"cmp" => cfg.compute = CpuMask::parse(value)?,
            b"ctl" => cfg.control = CpuMask::parse(value)?,
            b"nd" => cfg.delegates = parse_u64(value)? as u32,
            b"map" => cfg.placement = value,
            b"sled" => cfg.null_page_sled = parse_u64(value).filter(|n| *n <= 1)? == 1,
            b"vdso" => cfg.vdso_intercept = parse_u64(value).filter(|n| *n <= 1)? == 1,
            b"rwat" => cfg.rewrite_at = parse_u64(value).filter(|n| (1..=REWRITE_AT_MAX).contains(n))? as u32,
            b"mem" => cfg.memory_pool = parse_u64(value)?,
            b"memd" => cfg.memory_on_demand = parse_u64(value).filter(|n| *n <= 1)? == 1,
            b"give" => cfg.memory_give_back = parse_u64(value).filter(|n| *n <= 100)? as u32,
            b"lock" => cfg.lock_memory = parse_u64(value).filter(|n| *n <= 1)? == 1,
            b"scrf" => cfg.scrubber_fifo = parse_u64(value).filter(|n| *n <= 1)? == 1,
            b"grow" => cfg.memory_grow = parse_u64(value)?,
            b"gsup" => cfg.memory_supervisor = parse_u64(value).filter(|n| *n <= u32::MAX as u64)? as u32,
            b"lpid" => cfg.launcher = parse_u64(value).filter(|n| *n <= u32::MAX as u64)? as u32,
            b"te" => cfg.time_every = parse_u64(value).filter(|n| (1..=TIME_EVERY_MAX).contains(n))?,
            _ => return None,
        }
        rest = if end < after.len() { &after[end + 1..] } else { &[] };
    }
    (cfg.tsc_khz > 0).then_some(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_fields() {
        let mut hex = [b'0'; 128];
        hex[0] = b'8'; // bit 63 of word 0
        let text = [b"d=".as_slice(), &hex, b";fc=1500;khz=2600000;cmp=1-2;ctl=0;nd=2;te=16;prof=/tmp/a;b"].concat();
        let cfg = parse(&text).unwrap();
        assert!(cfg.delegated.contains(63) && !cfg.delegated.contains(0));
        assert_eq!((cfg.forward_cost_ns, cfg.tsc_khz, cfg.delegates, cfg.time_every), (1500, 2600000, 2, 16));
        assert!(cfg.compute.contains(1) && cfg.compute.contains(2) && !cfg.compute.contains(0));
        assert!(cfg.control.contains(0));
        assert_eq!(cfg.profile_dir, b"/tmp/a;b");
    }

    #[test]
    fn placement_by_key() {
        let cfg = parse(b"khz=1;map=0:1|0.0:0,1|0.1:1;prof=/x").unwrap();
        assert!(cfg.placement_of(b"0").unwrap().contains(1));
        let both = cfg.placement_of(b"0.0").unwrap();
        assert!(both.contains(0) && both.contains(1));
        assert!(cfg.placement_of(b"0.2").is_none());
        assert!(cfg.placement_of(b"0.").is_none());
    }

    #[test]
    fn rejects_malformed() {
        assert!(parse(b"khz=0").is_none());
        assert!(parse(b"khz=12;fc=x").is_none());
        assert!(parse(b"khz=12;zz=1").is_none());
        assert!(parse(b"khz=12;cmp=3-1").is_none());
        assert!(parse(b"khz=12;cmp=5000").is_none());
        assert!(parse(b"khz=12;te=0").is_none());
        assert!(parse(b"khz=12;sled=2").is_none());
        assert!(parse(b"khz=12;sled=1").unwrap().null_page_sled);
        assert!(!parse(b"khz=12").unwrap().null_page_sled);
        assert!(parse(b"khz=12;vdso=1").unwrap().vdso_intercept);
        assert!(parse(b"khz=12;vdso=3").is_none());
        assert!(parse(b"khz=12").is_some());
        assert_eq!(parse(b"khz=12;mem=1073741824").unwrap().memory_pool, 1 << 30);
        assert!(parse(b"khz=12;mem=1G").is_none());
        assert!(parse(b"khz=12;scrf=1").unwrap().scrubber_fifo && !parse(b"khz=12").unwrap().scrubber_fifo);
        assert!(parse(b"khz=12;scrf=2").is_none());
        let grow = parse(b"khz=12;grow=67108864;gsup=4242").unwrap();
        assert_eq!((grow.memory_grow, grow.memory_supervisor), (64 << 20, 4242));
        assert!(parse(b"khz=12;gsup=4294967296").is_none());
        assert_eq!((parse(b"khz=12;lpid=77").unwrap().launcher, parse(b"khz=12").unwrap().launcher), (77, 0));
        assert!(parse(b"khz=12;lpid=x").is_none());
    }
}
