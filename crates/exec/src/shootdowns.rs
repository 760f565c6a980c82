//! TLB flushes of the program's own address spaces, counted over its whole process tree: each is
//! a TLB shootdown IPI once a delegate of the process runs on a control core.
//!
//! Why the model needs them: a thread that changes its page tables (a copy-on-write fault, munmap,
//! mprotect, madvise) flushes the TLB of every CPU that has its address space loaded. A program
//! alone on its compute core flushes locally; with a delegate polling on a control core in the
//! same address space the kernel must interrupt that core and wait for it, which costs ≈ 10 µs
//! under KVM (docs/architecture.md, "TLB shootdowns"). python3's start-up makes ≈ 550 such flushes
//! (most of them copy-on-write faults): delegating only its 135 memory calls cost it as much as
//! delegating all 1233 (+10.6 and +10.8 ms over no delegation).
//!
//! The count comes from the kernel's `tlb:tlb_flush` tracepoint, reason 3 ("local MM
//! shootdown": a flush of the address space the CPU runs), counted by an inherited perf event
//! opened by the supervisor before it forks the program: a child's count is added to it when the
//! child exits. Only with --count-tlb-flushes (`coreplane profile` and validation's profile runs
//! pass it): enabling a tracepoint makes the kernel patch its own code, ≈ 40 ms a run on this
//! machine, outside the profile's wall time but not outside the command's. Counting a kernel
//! tracepoint needs root, CAP_PERFMON or perf_event_paranoid ≤ 1; without them the profile says
//! the count is unknown.

use perf_event_open_sys::{self as sys, bindings};
use std::os::fd::{FromRawFd, OwnedFd, AsRawFd};

/// Where tracefs is mounted on most systems, and where it is mounted when it is nowhere.
const TRACEFS: &str = "/sys/kernel/tracing";
const TRACEPOINT_ID: &str = "events/tlb/tlb_flush/id";
const LOCAL_MM_SHOOTDOWN: &str = "reason == 3";

/// An inherited count of the flushes, or why there is none.
pub enum Counter {
    Counting { fd: OwnedFd, before: u64 },
    Unavailable(String),
}

/// Where tracefs is mounted, mounted at /sys/kernel/tracing if it is nowhere (as perf does, and
/// `coreplane noise`: a fresh machine without a tracer that mounted it has none).
fn tracefs() -> Result<String, String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    if let Some(point) = mounts.lines().map(|l| l.split(' ').collect::<Vec<_>>()).find(|f| f.len() > 2 && f[2] == "tracefs") {
        return Ok(point[1].to_string());
    }
    let c = |s: &str| std::ffi::CString::new(s).unwrap();
    let (source, target, kind) = (c("nodev"), c(TRACEFS), c("tracefs"));
    if unsafe { libc::mount(source.as_ptr(), target.as_ptr(), kind.as_ptr(), 0, std::ptr::null()) } != 0 {
        return Err(format!("cannot mount tracefs at {TRACEFS}: {}", std::io::Error::last_os_error()));
    }
    Ok(TRACEFS.to_string())
}

/// Opens the counter on this process, to be inherited by the program forked next.
pub fn open() -> Counter {
    match try_open() {
        Ok(fd) => {
            let before = read(&fd).unwrap_or(0);
            Counter::Counting { fd, before }
        }
        Err(why) => Counter::Unavailable(why),
    }
}

fn try_open() -> Result<OwnedFd, String> {
    let id_file = format!("{}/{TRACEPOINT_ID}", tracefs()?);
    let id: u64 = std::fs::read_to_string(&id_file)
        .map_err(|e| format!("{id_file}: {e}"))?
        .trim()
        .parse()
        .map_err(|e| format!("{id_file}: {e}"))?;
    let mut attr = bindings::perf_event_attr {
        type_: bindings::PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<bindings::perf_event_attr>() as u32,
        config: id,
        ..Default::default()
    };
    attr.set_inherit(1);
    attr.set_disabled(1);
    let fd = unsafe { sys::perf_event_open(&mut attr, 0, -1, -1, bindings::PERF_FLAG_FD_CLOEXEC as _) };
    if fd < 0 {
        return Err(format!("perf_event_open(tlb:tlb_flush): {} (needs root, CAP_PERFMON or \
                            kernel.perf_event_paranoid <= 1)", std::io::Error::last_os_error()));
    }
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let filter = std::ffi::CString::new(LOCAL_MM_SHOOTDOWN).unwrap();
    if unsafe { sys::ioctls::SET_FILTER(fd.as_raw_fd(), filter.as_ptr() as *mut _) } < 0
        || unsafe { sys::ioctls::ENABLE(fd.as_raw_fd(), 0) } < 0
    {
        return Err(format!("tlb:tlb_flush filter: {}", std::io::Error::last_os_error()));
    }
    Ok(fd)
}

fn read(fd: &OwnedFd) -> Option<u64> {
    let mut value = 0u64;
    let n = unsafe { libc::read(fd.as_raw_fd(), &mut value as *mut u64 as *mut libc::c_void, 8) };
    (n == 8).then_some(value)
}

impl Counter {
    /// The flushes since `open`, once every process of the program has been waited for: the
    /// supervisor's own after the fork (it only waits) are a handful.
    pub fn total(&self) -> Result<u64, String> {
        match self {
            Counter::Counting { fd, before } => read(fd).map(|v| v - before).ok_or_else(|| "read failed".into()),
            Counter::Unavailable(why) => Err(why.clone()),
        }
    }
}
