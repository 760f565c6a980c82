//! Merging the runtime's per-process profile files into one JSON profile
//! (format coreplane-profile/1, docs/formats.md).

use crate::syscalls;
use coreplane_runtime::profile_layout as L;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// What the supervisor knows about the run.
pub struct Run {
    pub program: String,
    pub argv: Vec<String>,
    pub policy: String,
    pub delegated: Vec<String>,
    pub forward_cost_ns: u64,
    pub compute: Vec<usize>,
    pub control: Vec<usize>,
    pub delegates: u32,
    pub time_every: u64,
    /// `--vdso intercept`: the vDSO's calls are profiled like any other.
    pub vdso_intercepted: bool,
    /// `--memory`: who served anonymous memory (linux, pool), and the pool's size in bytes.
    pub memory: &'static str,
    pub memory_budget: u64,
    /// `--scrubber-priority` under a pool (normal, fifo); None under `--memory linux`.
    pub scrubber_priority: Option<&'static str>,
    pub wall_ns: u64,
    pub user_ns: u64,
    pub sys_ns: u64,
    pub status: i32,
    /// TLB flushes of the program's own address spaces (shootdowns.rs), or why not counted.
    pub tlb_shootdowns: Result<u64, String>,
}

/// Calls the vDSO answers without entering the kernel, so no syscall is seen for them unless
/// the run intercepts the vDSO.
const NOT_INTERCEPTED: [&str; 5] = ["clock_gettime", "gettimeofday", "time", "getcpu", "clock_getres"];

/// Names of the profile directories (followed by the supervisor's pid and a time stamp).
const DIR_PREFIX: &str = "coreplane-prof-";
/// The directory of this run, open and locked (flock) for the life of this process: the kernel
/// drops the lock however the process ends, so a directory no process locks is a leftover.
static DIR_LOCK: std::sync::OnceLock<File> = std::sync::OnceLock::new();

/// A private directory for the runtime's profile files, on tmpfs when there is one: creating,
/// mapping and removing the (sparse) files there costs no disk work. Others may only pass
/// through it (0711), into the subdirectory the runtime gives each user a process of the run
/// became (uid-N, owned by that user, made while the process could still do so). Leftovers of
/// supervisors that died without removing theirs (SIGKILL: a timeout's kill of a whole
/// process group) are removed first.
pub fn make_dir() -> Result<PathBuf, String> {
    let shm = PathBuf::from("/dev/shm");
    let base = if shm.is_dir() { shm } else { std::env::temp_dir() };
    remove_leftovers(&base);
    loop {
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let dir = base.join(format!("{DIR_PREFIX}{}-{stamp}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let handle = File::open(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // Another supervisor's sweep may take it between the two calls; then it is gone
        // (no links left), and a new one is made.
        if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&handle), libc::LOCK_EX | libc::LOCK_NB) } != 0
            || std::os::unix::fs::MetadataExt::nlink(&handle.metadata().map_err(|e| e.to_string())?) == 0
        {
            continue;
        }
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o711)).map_err(|e| e.to_string())?;
        DIR_LOCK.set(handle).map_err(|_| "profile directory made twice".to_string())?;
        return Ok(dir);
    }
}

/// Removes this user's profile directories in `base` that no supervisor holds locked.
fn remove_leftovers(base: &Path) {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let Ok(entries) = std::fs::read_dir(base) else { return };
    let me = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = entry.file_name().to_str().is_some_and(|n| n.starts_with(DIR_PREFIX))
            && entry.metadata().is_ok_and(|m| m.is_dir() && m.uid() == me);
        if !ours {
            continue;
        }
        let Ok(dir) = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW).open(&path)
        else {
            continue;
        };
        if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&dir), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

fn u64s(bytes: &[u8]) -> Vec<u64> {
    bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Histogram rows of the delegated calls only, by syscall number: [forwarding, queued].
/// (Dense tables of every row would page-fault in ≈ 2.6 MB per run for nothing.)
type Hists = BTreeMap<usize, [Vec<u64>; 2]>;

struct Process {
    header: Vec<u64>,
    exe: String,
    hists: Hists,
    threads: Vec<(Vec<u64>, Vec<u64>)>,
}

/// The process whose file is at `path`; None for an empty file, left by a process that could not
/// map it (the runtime truncates it then, and the process runs unprofiled).
fn read_process(path: &Path) -> std::io::Result<Option<Process>> {
    let f = File::open(path)?;
    if f.metadata()?.len() == 0 {
        return Ok(None);
    }
    let mut head = vec![0u8; L::HEADER_SIZE];
    f.read_exact_at(&mut head, 0)?;
    if &head[..8] != L::MAGIC {
        return Err(std::io::Error::other("not a coreplane profile file"));
    }
    let exe_bytes = &head[L::H_EXE..];
    let exe = String::from_utf8_lossy(&exe_bytes[..exe_bytes.iter().position(|&c| c == 0).unwrap_or(0)]).into_owned();
    let header = u64s(&head[..L::H_EXE]);
    let n = (header[L::H_NTHREADS / 8] as usize).min(L::MAX_THREADS);
    let mut threads = Vec::with_capacity(n);
    for i in 0..n {
        let mut block = vec![0u8; L::T_STATS + L::NSYS * L::STAT_FIELDS * 8];
        f.read_exact_at(&mut block, (L::THREADS_OFF + i * L::THREAD_BLOCK) as u64)?;
        let head = u64s(&block[..L::T_STATS]);
        // A block claimed beyond the mapping the runtime kept at an mlockall was never written.
        if head[L::T_TID / 8] != 0 {
            threads.push((head, u64s(&block[L::T_STATS..])));
        }
    }
    // Histograms exist only for delegated calls: read just those rows.
    let row = L::HIST_BUCKETS * 8;
    let mut hists = Hists::new();
    let mut buf = vec![0u8; row];
    for nr in 0..L::NSYS {
        if threads.iter().all(|(_, stats)| stats[nr * L::STAT_FIELDS + L::S_DELEGATED] == 0) {
            continue;
        }
        let mut read_row = |base: usize| {
            f.read_exact_at(&mut buf, (base + nr * row) as u64).map(|_| u64s(&buf))
        };
        hists.insert(nr, [read_row(L::HIST_FORWARD_OFF)?, read_row(L::HIST_QUEUED_OFF)?]);
    }
    Ok(Some(Process { header, exe, hists, threads }))
}

/// Nearest-rank percentile of a histogram, as the lower bound of its bucket.
fn percentile(hist: &[u64], q: f64) -> Option<u64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (b, c) in hist.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return Some(L::bucket_floor(b));
        }
    }
    None
}

fn summary(hist: &[u64], total: Option<u64>) -> Value {
    match percentile(hist, 0.0) {
        None => Value::Null,
        Some(min) => {
            let mut v = json!({"min": min, "p50": percentile(hist, 0.5), "p99": percentile(hist, 0.99)});
            if let Some(t) = total {
                v["total"] = json!(t);
            }
            v
        }
    }
}

/// Where a process's TSC readings lie on the run's clock.
struct Clock {
    khz: u64,
    start_tsc: u64,
    start_ns: u64, // the process's start, on the run's clock
}

impl Clock {
    fn ns(&self, ticks: u64) -> u64 {
        (ticks as u128 * 1_000_000 / self.khz as u128) as u64
    }

    /// A TSC reading as ns since the run's start; NO_TIME for 0 (nothing recorded).
    fn at(&self, tsc: u64) -> u64 {
        if tsc == 0 {
            NO_TIME
        } else if tsc >= self.start_tsc {
            self.start_ns + self.ns(tsc - self.start_tsc)
        } else {
            self.start_ns.saturating_sub(self.ns(self.start_tsc - tsc))
        }
    }
}

/// Calls whose result is the bytes they moved: the profile gives their sum (`bytes`).
const DATA_CALLS: [&str; 18] = ["read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev",
    "preadv2", "pwritev2", "recvfrom", "sendto", "recvmsg", "sendmsg", "sendfile", "splice", "tee", "copy_file_range"];

/// A first or latest call time that was never recorded.
const NO_TIME: u64 = u64::MAX;

/// A thread's stats with times in ns (the runtime keeps TSC ticks), each total estimated from
/// its timed calls (profile_layout::total_ticks), and the call timeline (first and
/// latest timed call) in ns since the run's start.
fn thread_stats_ns(ticks: &[u64], clock: &Clock) -> Vec<u64> {
    let mut stats = ticks.to_vec();
    for row in stats.chunks_exact_mut(L::STAT_FIELDS) {
        row[L::S_TOTAL_TICKS] = clock.ns(L::total_ticks(row).min(u64::MAX as u128) as u64);
        row[L::S_QUEUED_TICKS] = clock.ns(row[L::S_QUEUED_TICKS]);
        row[L::S_FIRST_TSC] = clock.at(row[L::S_FIRST_TSC]);
        row[L::S_LAST_TSC] = clock.at(row[L::S_LAST_TSC]);
    }
    stats
}

/// Adds a thread's stats (from thread_stats_ns) to the program's: sums, except the timeline,
/// which spans the earliest first call and the latest call.
fn add_stats(totals: &mut [u64], stats: &[u64]) {
    for (into, from) in totals.chunks_exact_mut(L::STAT_FIELDS).zip(stats.chunks_exact(L::STAT_FIELDS)) {
        for f in 0..L::STAT_FIELDS {
            into[f] = match f {
                L::S_FIRST_TSC => into[f].min(from[f]),
                L::S_LAST_TSC if from[f] == NO_TIME => into[f],
                L::S_LAST_TSC if into[f] == NO_TIME => from[f],
                L::S_LAST_TSC => into[f].max(from[f]),
                _ => into[f].wrapping_add(from[f]), // S_BYTES sums any result: it may wrap
            };
        }
    }
}

fn time_or_null(ns: u64) -> Value {
    if ns == NO_TIME {
        Value::Null
    } else {
        json!(ns)
    }
}

/// Per-syscall entries from summed stats (already in ns) and histograms, when given.
fn syscall_entries(stats: &[u64], hists: Option<&Hists>) -> Vec<Value> {
    let mut out = Vec::new();
    for nr in 0..L::NSYS {
        let s = &stats[nr * L::STAT_FIELDS..(nr + 1) * L::STAT_FIELDS];
        let count = s[L::S_COUNT];
        if count == 0 {
            continue;
        }
        let (delegated, served) = (s[L::S_DELEGATED], s[L::S_SERVED]);
        let mut e = json!({
            "name": syscalls::name(nr), "nr": nr, "count": count, "errors": s[L::S_ERRORS],
            "total_ns": s[L::S_TOTAL_TICKS], "timed": s[L::S_TIMED], "local": count - delegated - served,
            "delegated": delegated, "served": served, "first_ns": time_or_null(s[L::S_FIRST_TSC]),
            "last_ns": time_or_null(s[L::S_LAST_TSC]),
        });
        let queued_total = if delegated > 0 { json!({"total": s[L::S_QUEUED_TICKS]}) } else { Value::Null };
        let (fwd, que) = match hists.and_then(|h| h.get(&nr)) {
            Some([f, q]) => (summary(f, None), summary(q, Some(s[L::S_QUEUED_TICKS]))),
            None => (Value::Null, queued_total),
        };
        if DATA_CALLS.contains(&syscalls::name(nr).as_str()) {
            e["bytes"] = json!(s[L::S_BYTES]);
        }
        e["forward_ns"] = fwd;
        e["queued_ns"] = que;
        out.push(e);
    }
    out
}

/// Reads every process file in `dir` and writes the merged profile to `out`.
pub fn write_profile(dir: &Path, run: &Run, out: &Path) -> Result<(), String> {
    let mut procs = Vec::new();
    let mut unprofiled_procs = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| e.to_string())? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.extension().is_some_and(|e| e == "cpprof") {
                match read_process(&path).map_err(|e| format!("{}: {e}", path.display()))? {
                    Some(p) => procs.push(p),
                    None => unprofiled_procs.push(json!({"pid": pid_of_file(&path), "at": "map"})),
                }
            } else if d == dir && path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("uid-")) {
                dirs.push(path);
            }
        }
    }
    procs.sort_by_key(|p| p.header[L::H_START_NS / 8]);
    let t0 = procs.first().map_or(0, |p| p.header[L::H_START_NS / 8]);
    let rel = |ns: u64| if ns == 0 { Value::Null } else { json!(ns.saturating_sub(t0)) };
    let mut totals = vec![0u64; L::NSYS * L::STAT_FIELDS];
    for row in totals.chunks_exact_mut(L::STAT_FIELDS) {
        row[L::S_FIRST_TSC] = NO_TIME;
        row[L::S_LAST_TSC] = NO_TIME;
    }
    let mut hists = Hists::new();
    let mut threads = Vec::new();
    let mut processes = Vec::new();
    let mut trap_ns = Vec::new();
    let mut fast_ns = Vec::new();
    let mut rewritten = 0;
    let mut maps_reads = 0;
    let mut slotless = 0;
    let mut unprofiled = 0;
    let mut withdrawn = 0;
    for p in &procs {
        let h = |off: usize| p.header[off / 8];
        for (nr, rows) in &p.hists {
            let sum = hists.entry(*nr).or_insert_with(|| [vec![0; L::HIST_BUCKETS], vec![0; L::HIST_BUCKETS]]);
            for (into, from) in sum.iter_mut().zip(rows) {
                into.iter_mut().zip(from).for_each(|(a, b)| *a += b);
            }
        }
        let clock = Clock {
            khz: h(L::H_TSC_KHZ).max(1),
            start_tsc: h(L::H_START_TSC),
            start_ns: h(L::H_START_NS).saturating_sub(t0),
        };
        for (th, ticks) in &p.threads {
            let stats = thread_stats_ns(ticks, &clock);
            add_stats(&mut totals, &stats);
            let mut thread = json!({
                "pid": h(L::H_PID), "tid": th[L::T_TID / 8], "start_ns": rel(th[L::T_START_NS / 8]),
                "end_ns": rel(th[L::T_END_NS / 8]), "syscalls": syscall_entries(&stats, None),
            });
            if th[L::T_CPU_NS / 8] > 0 {
                thread["cpu_ns"] = json!(th[L::T_CPU_NS / 8] - 1);
            }
            threads.push(thread);
        }
        let code = h(L::H_EXIT_CODE);
        let end = if h(L::H_END_NS) == 0 { "killed" } else if code == 1 << 32 { "execve" } else { "exit" };
        if h(L::H_TRAP_NS) > 0 {
            trap_ns.push(h(L::H_TRAP_NS));
        }
        if h(L::H_FAST_NS) > 0 {
            fast_ns.push(h(L::H_FAST_NS));
        }
        rewritten += h(L::H_REWRITTEN);
        maps_reads += h(L::H_MAPS_READS);
        slotless += h(L::H_SLOTLESS);
        unprofiled += h(L::H_UNPROFILED);
        withdrawn += h(L::H_WITHDRAWN);
        unprofiled_procs.extend(unprofiled_processes(&p.header, end));
        processes.push(json!({
            "pid": h(L::H_PID), "ppid": h(L::H_PPID), "exe": p.exe, "start_ns": rel(h(L::H_START_NS)),
            "end_ns": rel(h(L::H_END_NS)), "end": end, "exit_code": (end == "exit").then_some(code),
            "user_ns": h(L::H_USER_NS), "sys_ns": h(L::H_SYS_NS),
        }));
    }
    trap_ns.sort_unstable();
    fast_ns.sort_unstable();
    let exit = if libc::WIFSIGNALED(run.status) {
        json!({"signal": libc::WTERMSIG(run.status)})
    } else {
        json!({"status": libc::WEXITSTATUS(run.status)})
    };
    let doc = json!({
        "format": "coreplane-profile/1",
        "program": run.program,
        "argv": run.argv,
        "config": {
            "policy": run.policy, "delegated": run.delegated, "forward_cost_ns": run.forward_cost_ns,
            "compute_cores": run.compute, "control_cores": run.control, "delegates": run.delegates,
            "time_every": run.time_every, "time_first": L::TIME_FIRST,
            "vdso": if run.vdso_intercepted { "intercept" } else { "native" },
            "memory": run.memory, "memory_budget": run.memory_budget, "scrubber_priority": run.scrubber_priority,
        },
        "wall_ns": run.wall_ns, "user_ns": run.user_ns, "sys_ns": run.sys_ns,
        "exit": exit,
        "tlb_shootdowns": run.tlb_shootdowns.as_ref().ok(),
        "tlb_shootdowns_why": run.tlb_shootdowns.as_ref().err(),
        "machine": machine(),
        "overhead": {
            "interposed_call_ns": trap_ns.get(trap_ns.len() / 2),
            "fast_path_call_ns": fast_ns.get(fast_ns.len() / 2),
            "rewritten_sites": rewritten,
            "maps_reads": maps_reads,
            "slotless_calls": slotless,
            "unprofiled_threads": unprofiled,
            "withdrawn_calls": withdrawn,
            "unprofiled_processes": unprofiled_procs,
            "method": "(getppid through a trap - native getppid) and (getppid through the rewritten-site fast \
                       path - native getppid), the median of 64 calls each, measured by the runtime once, at the \
                       program's start; a site traps until it is rewritten, then takes the fast path; not included \
                       in total_ns, which times the call itself",
        },
        "not_intercepted": if run.vdso_intercepted { &[][..] } else { &NOT_INTERCEPTED[..] },
        "syscalls": syscall_entries(&totals, Some(&hists)),
        "threads": threads,
        "processes": processes,
    });
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    replace_file(out, (text + "\n").as_bytes()).map_err(|e| format!("{}: {e}", out.display()))
}

/// The processes a process's file notes as run unprofiled: its forked children that could not
/// create a file of their own, and itself after its execve where the new image could not reach
/// the profile directory (`end`: how the file's process ended).
fn unprofiled_processes(header: &[u64], end: &str) -> Vec<Value> {
    let h = |off: usize| header[off / 8];
    let named = (h(L::H_LOST_CHILDREN) as usize).min(L::LOST_PIDS_MAX);
    let mut lost: Vec<Value> = (0..named).map(|i| json!({"pid": h(L::H_LOST_PIDS + i * 8), "at": "fork"})).collect();
    if h(L::H_LOST_CHILDREN) as usize > named {
        lost.push(json!({"pid": null, "at": "fork", "more": h(L::H_LOST_CHILDREN) as usize - named}));
    }
    if end == "execve" && h(L::H_EXEC_UNPROFILED) != 0 {
        lost.push(json!({"pid": h(L::H_PID), "at": "execve"}));
    }
    lost
}

/// The pid a process file's name `PID-START.cpprof` begins with.
fn pid_of_file(path: &Path) -> Option<u64> {
    path.file_name()?.to_str()?.split('-').next()?.parse().ok()
}

/// Writes `out` through a fresh file renamed into place, so a reader never sees half a
/// profile. The old file is unlinked first: ext4 (auto_da_alloc) flushes a file to disk when it
/// replaces another by truncation or rename, which cost ≈ 1.3 ms per run on dd.
/// Checks, before the program runs, that the profile can be written to `out` as `replace_file`
/// writes it: a run whose profile is lost at its end cannot be had again.
pub fn check_destination(out: &Path) -> Result<(), String> {
    if out.is_dir() {
        return Err(format!("--profile {}: is a directory", out.display()));
    }
    let tmp = temporary_beside(out);
    std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)
        .map_err(|e| format!("--profile {}: cannot write there: {e}", out.display()))?;
    let _ = std::fs::remove_file(&tmp);
    Ok(())
}

/// The file `replace_file` writes before renaming it onto `out`.
fn temporary_beside(out: &Path) -> PathBuf {
    let mut tmp = out.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    PathBuf::from(tmp)
}

fn replace_file(out: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temporary_beside(out);
    std::fs::write(&tmp, bytes)?;
    match std::fs::remove_file(out) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        _ => {}
    }
    std::fs::rename(&tmp, out).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_percentiles() {
        let mut h = vec![0u64; L::HIST_BUCKETS];
        h[L::bucket_of(100)] = 98;
        h[L::bucket_of(10_000)] = 2;
        assert_eq!(percentile(&h, 0.0), Some(L::bucket_floor(L::bucket_of(100))));
        assert_eq!(percentile(&h, 0.5), Some(96)); // 100 ns lies in [96, 112)
        assert_eq!(percentile(&h, 0.99), Some(L::bucket_floor(L::bucket_of(10_000))));
        assert_eq!(percentile(&[0; 4], 0.5), None);
    }
}

/// The machine the profile was taken on, so that a model calibrated on another can say so:
/// systemd's machine id (/etc/machine-id, stable across boots) and the host name.
fn machine() -> serde_json::Value {
    let id = ["/etc/machine-id", "/var/lib/dbus/machine-id"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()));
    let mut name = [0u8; 256];
    let host = if unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) } == 0 {
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        String::from_utf8_lossy(&name[..end]).into_owned()
    } else {
        String::new()
    };
    json!({"id": id, "hostname": host})
}
