//! Many-core processes: the runtime of a delegating program run by `coreplane run --mcp` follows
//! its MCP's cores, off the fast path (docs/architecture.md, "The runtime follows its MCP's cores").
//! The program's threads ask the kernel for every CPU but the control cores, so the cpuset the
//! arbiter writes decides where they run: the compute cores held, whatever they are, as they
//! come and go. A monitor thread on the control cores sleeps on procinfo's generation word (a
//! shared futex the arbiter wakes): a vcore the arbiter warns of is yielded at once, instead of
//! being preempted at its deadline. Yielded as a cooperating program yields, its CPU retained:
//! the program's threads leave it when it is granted to another (the arbiter writes this
//! cpuset first, and the kernel moves them), not before the revoker is answered (a cpuset write
//! that moved a running thread, 30-50 µs, and the moved thread then competed with the revoker on
//! the control core). While the arbiter has free cores and the MCP holds fewer than it asked for
//! at launch, it asks again, no sooner than ASK_AFTER_YIELD_NS after a yield. The program's first
//! process (clone-tree key "0", across its execve) has the monitor, for every process of the MCP:
//! all are in its cpuset, and two monitors would yield and ask for the same vcores.

use crate::sys::{self, *};
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering::*};

/// Set by `coreplane run --mcp` when the run delegates (src/coreplane/arbiter/mcp.py): the
/// vcores the launcher asked for, which the monitor asks for again when cores are free.
const ENV_WANT: &[u8] = b"COREPLANE_RT_MCP";
const ENV_SOCKET: &[u8] = abi::ENV_SOCKET.as_bytes();

/// procinfo's and procdata's layout and the socket's name, owned by the vcore crate (this
/// no_std binary links no crate of ours but the runtime's library, so it includes the file).
#[path = "../../../../vcore/src/abi.rs"]
#[allow(dead_code)] // the vcore crate's, not all read here
mod abi;
use abi::{MAX_VCORES, OFFSET_FREE_CORES, OFFSET_GENERATION, OFFSET_HELD, OFFSET_QUEUE_CONS, OFFSET_VCORES, OFFSET_VCORE_STATE,
          PROCDATA_SIZE, PROCINFO_SIZE, QUEUE_SIZE, VCORE_INFO_SIZE, VCORE_PREEMPT_PENDING};

const RECVMSG: usize = 47;
const SOCK_STREAM: usize = 1;
const MSG_CMSG_CLOEXEC: usize = 0x4000_0000;
const SCM_RIGHTS: i32 = 1;
/// A shared futex wait: the waker is the arbiter, another process; and its wake.
const FUTEX_WAIT_SHARED: usize = 0;
const FUTEX_WAKE_SHARED: usize = 1;
const STACK_SIZE: usize = 32 * 1024;
/// After it yielded, the monitor asks for cores again no sooner than this: the core was taken
/// because it was wanted elsewhere, and asking at once woke the monitor against the revoker on
/// the control core (its answer came 70 µs after the release instead of 25, p50).
const ASK_AFTER_YIELD_NS: u64 = 1_000_000;

/// The monitor's connection to the arbiter, the mapped procinfo and procdata pages and the
/// vcores wanted.
struct Monitor {
    /// The process whose monitor thread runs (a forked child has none).
    pid: AtomicI32,
    /// The process whose monitor was paused for a call the kernel allows a single thread only.
    paused: AtomicI32,
    /// The monitor thread's id and stack, and 1 when it is told to end (pause).
    tid: AtomicI32,
    stack: AtomicUsize,
    stop: AtomicU32,
    fd: AtomicI32,
    procinfo: AtomicUsize,
    procdata: AtomicUsize,
    want: AtomicU32,
}

static MONITOR: Monitor = Monitor {
    pid: AtomicI32::new(0),
    paused: AtomicI32::new(0),
    tid: AtomicI32::new(0),
    stack: AtomicUsize::new(0),
    stop: AtomicU32::new(0),
    fd: AtomicI32::new(-1),
    procinfo: AtomicUsize::new(0),
    procdata: AtomicUsize::new(0),
    want: AtomicU32::new(0),
};

/// At the start of each image: when this is the first process of a delegating MCP (`root`),
/// widens the program's CPUs to every one but the control cores, attaches to the arbiter and
/// starts the monitor. Costs nothing but the environment lookup to any other program.
pub fn start(root: bool) {
    let control = &crate::env::config().control;
    if !root || control.is_empty() {
        return;
    }
    let mut socket = [0u8; 108];
    let Some(want) = from_environment(&mut socket) else { return };
    let mut others = [!0u64; 16];
    for (w, c) in others.iter_mut().zip(control.0.iter()) {
        *w &= !c;
    }
    // EINVAL when the MCP holds no compute core yet: the threads keep the cores they were given.
    unsafe { syscall3(SCHED_SETAFFINITY, 0, core::mem::size_of_val(&others), others.as_ptr() as usize) };
    let Some((fd, procinfo, procdata)) = attach(&socket) else {
        sys::write_all(2, b"coreplane-rt: --mcp: cannot attach to the arbiter; the program's cores will not follow its MCP's\n");
        return;
    };
    MONITOR.fd.store(fd, Relaxed);
    MONITOR.procinfo.store(procinfo, Relaxed);
    MONITOR.procdata.store(procdata, Relaxed);
    MONITOR.want.store(want, Relaxed);
    spawn();
}

/// Starts the monitor thread of this process (attached).
fn spawn() {
    let Some(stack) = sys::map_anon(STACK_SIZE) else { return };
    MONITOR.stop.store(0, Relaxed);
    let tid = sys::spawn_thread(stack as usize + STACK_SIZE, monitor_main, 0);
    if tid < 0 {
        unsafe { syscall3(MUNMAP, stack as usize, STACK_SIZE, 0) };
    } else {
        MONITOR.tid.store(tid as i32, Relaxed);
        MONITOR.stack.store(stack as usize, Relaxed);
        MONITOR.pid.store(sys::getpid(), Release);
    }
}

/// The program's only thread is about to make a call the kernel allows in a single-threaded
/// process only (unshare or setns of a user namespace, seccomp's strict mode): ends this
/// process's monitor and waits until the kernel no longer counts it (process::alone_for).
/// The vcores stay held; `resume` starts it again after the call.
pub fn pause() {
    let pid = sys::getpid();
    if !monitoring(pid) {
        return;
    }
    MONITOR.stop.store(1, SeqCst);
    let tid = MONITOR.tid.load(Relaxed);
    let generation = word(MONITOR.procinfo.load(Relaxed), OFFSET_GENERATION);
    // Woken again each round: it may have read `stop` just before it was set and then slept.
    while unsafe { syscall3(TGKILL, pid as usize, tid as usize, 0) } == 0 {
        unsafe { syscall6(FUTEX, generation.as_ptr() as usize, FUTEX_WAKE_SHARED, 1, 0, 0, 0) };
        sys::futex_wake(MONITOR.stop.as_ptr(), 1);
        unsafe { syscall3(SCHED_YIELD, 0, 0, 0) };
    }
    crate::delegate::reap(pid, tid, MONITOR.stack.load(Relaxed), STACK_SIZE);
    MONITOR.pid.store(0, Release);
    MONITOR.paused.store(pid, Release);
}

/// After the call `pause` made way for: the monitor of this process again, if it was paused.
/// Not from a thread under a seccomp filter of the program's: the monitor would carry the filter.
pub fn resume() {
    if MONITOR.paused.load(Acquire) == sys::getpid() && !crate::thread::current().is_filtered() {
        MONITOR.paused.store(0, Relaxed);
        spawn();
    }
}

/// Whether process `pid` runs the monitor thread, which takes no signal and never ends by
/// itself: its last program thread's exit(2) must end the process (process::exit_thread).
pub fn monitoring(pid: i32) -> bool {
    MONITOR.pid.load(Acquire) == pid
}

/// Finds ENV_WANT (returned) and ENV_SOCKET (copied NUL-terminated into `socket`) in this
/// image's environment.
fn from_environment(socket: &mut [u8; 108]) -> Option<u32> {
    let want = crate::env::at_start(ENV_WANT)?;
    let path = crate::env::at_start(ENV_SOCKET).filter(|p| p.len() < socket.len())?;
    sys::concat(&[path], socket);
    coreplane_runtime::config::parse_u64(want).map(|n| n.min(MAX_VCORES as u64) as u32)
}

/// Connects to the arbiter at `path` and attaches: (the connection, moved out of the way of the
/// program's descriptors, the read-only procinfo page, procdata), or None.
fn attach(path: &[u8; 108]) -> Option<(i32, usize, usize)> {
    let path_len = unsafe { sys::cstr_len(path.as_ptr()) };
    let fd = crate::own_fds::unix_connect(SOCK_STREAM, &path[..(path_len + 1).min(path.len())]);
    if fd < 0 {
        return None;
    }
    let fd = fd as i32;
    let mut fds = [-1i32; 2];
    let attached = send(fd, b"{\"op\":\"attach\",\"wait_ms\":0}\n") && receive_fds(fd, &mut fds);
    let (mut info, mut data) = (-1, -1);
    if attached && fds[0] >= 0 && fds[1] >= 0 {
        info = unsafe { syscall6(MMAP, 0, PROCINFO_SIZE, PROT_READ, MAP_SHARED, fds[0] as usize, 0) };
        data = unsafe { syscall6(MMAP, 0, PROCDATA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1] as usize, 0) };
    }
    for f in fds.iter().filter(|&&f| f >= 0) {
        unsafe { syscall3(CLOSE, *f as usize, 0, 0) };
    }
    if info > 0 && data > 0 {
        return Some((fd, info as usize, data as usize));
    }
    for (page, size) in [(info, PROCINFO_SIZE), (data, PROCDATA_SIZE)] {
        if page > 0 {
            unsafe { syscall3(MUNMAP, page as usize, size, 0) };
        }
    }
    unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
    None
}

/// Reads the attach reply, one line, keeping the two descriptors that ride on it (procinfo,
/// procdata); false when the arbiter refused or closed.
fn receive_fds(fd: i32, fds: &mut [i32; 2]) -> bool {
    let mut line = [0u8; 512];
    let mut len = 0;
    while !line[..len].contains(&b'\n') && len < line.len() {
        let mut control = [0u64; 4]; // a cmsghdr (16 bytes) and up to four descriptors
        let iov = [line.as_mut_ptr() as usize + len, line.len() - len];
        // struct msghdr: name, namelen, iov, iovlen, control, controllen, flags.
        let mut msg = [0usize, 0, iov.as_ptr() as usize, 1, control.as_mut_ptr() as usize, core::mem::size_of_val(&control), 0];
        let n = unsafe { syscall3(RECVMSG, fd as usize, msg.as_mut_ptr() as usize, MSG_CMSG_CLOEXEC) };
        if n == -EINTR {
            continue;
        }
        if n <= 0 {
            return false;
        }
        len += n as usize;
        let control_len = unsafe { core::ptr::read_volatile(&msg[5]) };
        let (level, kind) = (control[1] as u32 as i32, (control[1] >> 32) as u32 as i32);
        if control_len >= 16 && level == SOL_SOCKET as i32 && kind == SCM_RIGHTS {
            let count = ((control[0] as usize).saturating_sub(16) / 4).min(4);
            let words = [control[2] as u32 as i32, (control[2] >> 32) as u32 as i32, control[3] as u32 as i32, (control[3] >> 32) as u32 as i32];
            for (i, &received) in words[..count].iter().enumerate() {
                match fds.get_mut(i) {
                    Some(slot) => *slot = received,
                    None => unsafe {
                        syscall3(CLOSE, received as usize, 0, 0);
                    },
                }
            }
        }
    }
    contains(&line[..len], b"\"ok\":true")
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn send(fd: i32, mut line: &[u8]) -> bool {
    while !line.is_empty() {
        let n = unsafe { syscall6(44 /* sendto */, fd as usize, line.as_ptr() as usize, line.len(), 0x4000 /* MSG_NOSIGNAL */, 0, 0) };
        if n == -EINTR {
            continue;
        }
        if n <= 0 {
            return false;
        }
        line = &line[n as usize..];
    }
    true
}

/// Sends one request line and reads (and drops) its one reply line; false when the arbiter is gone.
fn call(line: &[u8]) -> bool {
    let fd = MONITOR.fd.load(Relaxed);
    if !send(fd, line) {
        return false;
    }
    let mut byte = [0u8; 256];
    loop {
        let n = unsafe { syscall3(READ, fd as usize, byte.as_mut_ptr() as usize, byte.len()) };
        if n == -EINTR {
            continue;
        }
        if n <= 0 {
            return false;
        }
        if byte[..n as usize].contains(&b'\n') {
            return true;
        }
    }
}

fn word(procinfo: usize, offset: usize) -> &'static AtomicU32 {
    unsafe { &*((procinfo + offset) as *const AtomicU32) }
}

/// Yields every vcore the arbiter warned of (its CPU retained); then asks for what the
/// launcher asked for while cores are free. The notification queues are emptied unread (procinfo
/// says all the monitor needs), so the arbiter counts no notification dropped. Asks nothing
/// before `quiet_until` (CLOCK_MONOTONIC ns), which a yield moves on. False when the arbiter is gone.
fn follow(procinfo: usize, quiet_until: &mut u64) -> bool {
    let woke = sys::monotonic_ns();
    let (mut digits, mut woke_digits, mut sent_digits) = ([0u8; 20], [0u8; 20], [0u8; 20]);
    let mut line = [0u8; 160];
    let procdata = MONITOR.procdata.load(Relaxed);
    for v in 0..MAX_VCORES {
        let queue = procdata + v * QUEUE_SIZE;
        word(queue, OFFSET_QUEUE_CONS).store(word(queue, 0).load(Acquire), Release);
        if word(procinfo, OFFSET_VCORES + v * VCORE_INFO_SIZE + OFFSET_VCORE_STATE).load(Acquire) == VCORE_PREEMPT_PENDING {
            // With its times (woke, sent), which the arbiter reports with the revocation's outcome.
            let parts: [&[u8]; 7] = [b"{\"op\":\"yield\",\"vcore\":", sys::fmt_u64(v as u64, &mut digits), b",\"woke_ns\":",
                sys::fmt_u64(woke, &mut woke_digits), b",\"sent_ns\":", sys::fmt_u64(sys::monotonic_ns(), &mut sent_digits), b"}\n"];
            let n = sys::concat(&parts, &mut line);
            if !call(&line[..n]) {
                return false;
            }
            *quiet_until = woke + ASK_AFTER_YIELD_NS;
        }
    }
    let held = word(procinfo, OFFSET_HELD).load(Acquire);
    let want = MONITOR.want.load(Relaxed);
    if word(procinfo, OFFSET_FREE_CORES).load(Acquire) > 0 && held < want && sys::monotonic_ns() >= *quiet_until {
        let n = sys::concat(&[b"{\"op\":\"request\",\"n\":", sys::fmt_u64((want - held) as u64, &mut digits), b"}\n"], &mut line);
        return call(&line[..n]);
    }
    true
}

/// The monitor: takes no signal, runs on the control cores, and follows every change the
/// arbiter announces; once the arbiter is gone it waits for the end of the process. It ends
/// when told to (`pause`).
extern "C" fn monitor_main(_: usize) {
    let all: u64 = !0;
    unsafe { syscall6(RT_SIGPROCMASK, 2 /* SIG_SETMASK */, &all as *const u64 as usize, 0, 8, 0, 0) };
    let control = &crate::env::config().control;
    unsafe { syscall3(SCHED_SETAFFINITY, 0, core::mem::size_of_val(&control.0), control.0.as_ptr() as usize) };
    let procinfo = MONITOR.procinfo.load(Relaxed);
    let generation = word(procinfo, OFFSET_GENERATION);
    let mut quiet_until = 0;
    while MONITOR.stop.load(Acquire) == 0 {
        let seen = generation.load(Acquire);
        if !follow(procinfo, &mut quiet_until) {
            break;
        }
        // Until the next change; while quiet after a yield, no longer than the quiet time.
        let left = quiet_until.saturating_sub(sys::monotonic_ns());
        let timeout = [(left / 1_000_000_000) as i64, (left % 1_000_000_000) as i64];
        let timeout = if left > 0 { timeout.as_ptr() as usize } else { 0 };
        unsafe { syscall6(FUTEX, generation.as_ptr() as usize, FUTEX_WAIT_SHARED, seen as usize, timeout, 0, 0) };
    }
    while MONITOR.stop.load(Acquire) == 0 {
        sys::futex_wait(MONITOR.stop.as_ptr(), 0, 0);
    }
}
