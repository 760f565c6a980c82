//! The profile: one file per process with every thread's syscall counts and times.
//! It is mapped MAP_SHARED so that every count written is in the page cache at once and
//! survives the process being killed. Threads write only their own block; the per-syscall
//! histograms are shared and updated atomically.

use crate::sys::{self, *};
use core::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use coreplane_runtime::profile_layout as L;

static mut BASE: *mut u8 = core::ptr::null_mut();
/// Where a block may be claimed: below this many bytes of the file. All of it (room for
/// MAX_THREADS blocks, 219 MB) until an mlockall (`before_mlockall`); once SHRINK is DONE, also
/// what is mapped at BASE.
static MAPPED: AtomicUsize = AtomicUsize::new(L::FILE_SIZE);
/// The mapping's shrink, once per image: WHOLE, then SHRINKING, then DONE.
static SHRINK: AtomicU8 = AtomicU8::new(WHOLE);
const WHOLE: u8 = 0;
const SHRINKING: u8 = 1;
const DONE: u8 = 2;
/// Blocks kept mapped beyond the claimed ones when the mapping shrinks: threads started after
/// the mlockall (one beyond them goes unprofiled, counted in H_UNPROFILED). More where the
/// runtime locks a cell's processes at their start, before any thread has a block.
const SPARE_BLOCKS: usize = 8;
const SPARE_BLOCKS_AT_START: usize = 32;

unsafe fn field(off: usize) -> &'static AtomicU64 {
    &*(BASE.add(off) as *const AtomicU64)
}

/// The profile directory, open (O_PATH, close-on-exec) for the life of the process, and the
/// file it is (device, inode); -1: none. Files are created through it, not by the directory's
/// path: after a chroot, or in a mount namespace of the program's (bwrap, firejail, unshare -m
/// with a tmpfs of its own over /dev/shm), the path names no directory or a read-only one, and
/// every process the program started there exited with status 127. It crosses the program's
/// execve named in argv[0] (`exe::rt_argv0`). Not kept from the program's close (that would send
/// every close through the runtime): a descriptor closed or replaced since is found out by its
/// identity, and the path used.
static mut DIR: (isize, u64, u64) = (-1, 0, 0);

/// At process start, before `open_process`: the profile directory from the descriptor argv[0]
/// names (`given`, inherited across the execve that started this image), or opened by its path.
pub fn adopt_dir(given: Option<usize>) {
    if crate::env::config().profile_dir.is_empty() {
        return;
    }
    let fd = match given {
        Some(fd) if crate::own_fds::identity(fd).is_some() => {
            unsafe { syscall3(FCNTL, fd, F_SETFD, FD_CLOEXEC) };
            fd as isize
        }
        _ => open_dir_by_path(),
    };
    remember_dir(fd);
}

/// The profile directory opened by its path (close-on-exec, out of the program's way), or -errno.
fn open_dir_by_path() -> isize {
    const O_PATH: usize = 0o10000000;
    const O_DIRECTORY: usize = 0o200000;
    let mut path = [0u8; 4096];
    sys::concat(&[crate::env::config().profile_dir], &mut path);
    let fd = sys::open(path.as_ptr(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if fd < 0 { fd } else { crate::own_fds::moved_high(fd) }
}

fn remember_dir(fd: isize) {
    if let Some((dev, ino)) = (fd >= 0).then(|| crate::own_fds::identity(fd as usize)).flatten() {
        unsafe { DIR = (fd, dev, ino) };
    }
}

/// The profile directory's descriptor: the one remembered while it is still that directory
/// (`checked`: looked at; a thread under a filter of the program's makes no call beyond those
/// it made before the descriptor was kept, and takes it as it is), else opened by its path
/// and remembered; -errno when it cannot be had. A child running in its parent's memory (vfork,
/// posix_spawn) has a descriptor table of its own and remembers nothing: the number would be
/// its own, and its parent's forked children, finding it was not the directory, opened the
/// directory once more (`spawn_then_fork_fds.c`).
fn dir_fd(checked: bool) -> isize {
    let (fd, dev, ino) = unsafe { DIR };
    if fd >= 0 && (!checked || crate::own_fds::identity(fd as usize) == Some((dev, ino))) {
        return fd;
    }
    let fd = open_dir_by_path();
    if !in_parents_memory() {
        remember_dir(fd);
    }
    fd
}

/// Whether this process runs in its parent's memory until it execs or exits: the file it maps
/// is another process's (`owns_file`).
fn in_parents_memory() -> bool {
    !unsafe { BASE.is_null() } && !owns_file(sys::getpid())
}

/// For an execve that re-enters the runtime: the profile directory's descriptor, inheritable
/// until `exe::after_exec_failed`, for the new image to create its file in. None without a profile,
/// or when the directory cannot be had (the program closed the descriptor, and its root or mount
/// namespace has no such path): then the new image runs unprofiled, which the process's file
/// notes (`H_EXEC_UNPROFILED`) where the caller is the process that file is (`pid`).
pub fn dir_for_exec(pid: i32) -> Option<usize> {
    if crate::env::config().profile_dir.is_empty() {
        return None;
    }
    let fd = dir_fd(true);
    if fd < 0 {
        if owns_file(pid) {
            unsafe { field(L::H_EXEC_UNPROFILED).store(1, Ordering::Relaxed) };
        }
        return None;
    }
    unsafe { syscall3(FCNTL, fd as usize, F_SETFD, 0) };
    Some(fd as usize)
}

/// Whether this process maps a profile file and is the process it was made for (not a child
/// running in its parent's memory).
fn owns_file(pid: i32) -> bool {
    unsafe { !BASE.is_null() && field(L::H_PID).load(Ordering::Relaxed) == pid as u64 }
}

/// Creates and maps this process's profile file (no-op without a profile directory). A process
/// that cannot create or map it runs unprofiled, as natively, never otherwise.
pub fn open_process() {
    let start = sys::monotonic_ns();
    let start_tsc = sys::rdtsc();
    if let Some(fd) = create(start, true) {
        map(fd, start, start_tsc);
    }
}

/// This process's file, created: its descriptor, or None without a profile or when it cannot
/// be created. `checked` as in `dir_fd`.
fn create(start: u64, checked: bool) -> Option<isize> {
    if crate::env::config().profile_dir.is_empty() {
        return None;
    }
    let dir = dir_fd(checked);
    let mut fd = create_file(dir, b"", start);
    if fd == -EACCES {
        // A process whose user is not the launcher's (a program that dropped privileges) may
        // create files only in its user's subdirectory (`before_credentials`); without one it
        // runs unprofiled rather than otherwise than natively.
        let mut b = [0u8; 20];
        let euid = unsafe { syscall3(GETEUID, 0, 0, 0) } as u64;
        fd = create_file(dir, sys::fmt_u64(euid, &mut b), start);
    }
    (fd >= 0).then_some(fd)
}

/// Maps the file just created as `fd` and writes its header; a file that cannot be mapped (an
/// address space limit of the program's) is truncated to nothing, which the merge skips.
fn map(fd: isize, start: u64, start_tsc: u64) {
    unsafe {
        syscall3(FTRUNCATE, fd as usize, L::FILE_SIZE, 0);
        let p = syscall6(MMAP, 0, L::FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd as usize, 0);
        let mapped = !(-4095..0).contains(&p);
        if !mapped {
            syscall3(FTRUNCATE, fd as usize, 0, 0);
        }
        syscall3(CLOSE, fd as usize, 0, 0);
        if !mapped {
            return;
        }
        BASE = p as *mut u8;
        core::ptr::copy_nonoverlapping(L::MAGIC.as_ptr(), BASE, 8);
        field(L::H_PID).store(sys::getpid() as u64, Ordering::Relaxed);
        field(L::H_PPID).store(syscall3(GETPPID, 0, 0, 0) as u64, Ordering::Relaxed);
        field(L::H_START_NS).store(start, Ordering::Relaxed);
        field(L::H_START_TSC).store(start_tsc, Ordering::Relaxed);
        field(L::H_TSC_KHZ).store(crate::env::config().tsc_khz, Ordering::Relaxed);
        let exe = crate::exe::exe();
        let len = exe.len().min(L::H_EXE_MAX - 1);
        core::ptr::copy_nonoverlapping(exe.as_ptr(), BASE.add(L::H_EXE), len);
    }
}

/// Subdirectories of the profile directory, one per user a process of the run became.
const USER_DIR: &[u8] = b"uid-";

/// Creates this process's file `pid-start.cpprof` in the profile directory `dir` (a descriptor),
/// or in its subdirectory for user `uid` when `uid` is not empty; the fd, or -errno.
fn create_file(dir: isize, uid: &[u8], start: u64) -> isize {
    if dir < 0 {
        return dir;
    }
    let mut path = [0u8; 64];
    let (mut b1, mut b2) = ([0u8; 20], [0u8; 20]);
    let pid = sys::fmt_u64(sys::getpid() as u64, &mut b1);
    let (sub, slash): (&[u8], &[u8]) = if uid.is_empty() { (b"", b"") } else { (USER_DIR, b"/") };
    sys::concat(&[sub, uid, slash, pid, b"-", sys::fmt_u64(start, &mut b2), b".cpprof"], &mut path);
    // openat, the call a forked child of a program under its own seccomp filter makes here:
    // filters written for glibc allow openat alone (open killed such a child).
    unsafe { syscall6(OPENAT, dir as usize, path.as_ptr() as usize, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644, 0, 0) }
}

/// The calls that change the user id files are created as: their new id, if they change it
/// (setuid, setreuid and setresuid set the file-system id with the effective one).
pub fn changes_file_user(nr: usize, a: &[usize; 6]) -> Option<u32> {
    let id = match nr {
        SETUID | SETFSUID => a[0],
        SETREUID | SETRESUID => a[1],
        _ => return None,
    } as u32;
    (id != u32::MAX).then_some(id)
}

/// Before a call that makes files be created as user `uid` (`changes_file_user`), while the
/// process may still give a directory away: the subdirectory where that user's processes of the
/// run create their profile files, owned by it (the profile directory itself admits only the
/// launcher's user: a program that dropped privileges, as `setpriv` or a daemon does, died with
/// status 127 at its next execve or fork). Failures are the kernel's business: without the
/// privilege to give the directory away, the call itself fails or changes nothing. Never inlined:
/// its buffers stay out of the frame of `dispatch::handle`, on the stack the SIGSYS handler runs
/// on, which may be the program's own small signal stack (a Rust program's 8 KiB). `quiet`: the
/// thread is under a filter of the program's, which may kill for the fstat that checks the
/// directory's descriptor (`dir_fd`).
#[cold]
#[inline(never)]
pub fn before_credentials(uid: u32, quiet: bool) {
    if crate::env::config().profile_dir.is_empty() || unsafe { syscall3(GETEUID, 0, 0, 0) } as u32 == uid {
        return;
    }
    let mut path = [0u8; 32];
    let mut b = [0u8; 20];
    sys::concat(&[USER_DIR, sys::fmt_u64(uid as u64, &mut b)], &mut path);
    let dir = dir_fd(!quiet);
    if dir >= 0 {
        unsafe {
            syscall3(MKDIRAT, dir as usize, path.as_ptr() as usize, 0o700);
            syscall6(FCHOWNAT, dir as usize, path.as_ptr() as usize, uid as usize, u32::MAX as usize, 0, 0);
        }
    }
}

/// A fresh block for a new thread; null without a profile, past MAX_THREADS, or beyond the
/// mapping kept at an mlockall (`before_mlockall`).
pub fn claim_thread_block(tid: i32) -> *mut u8 {
    unsafe {
        if BASE.is_null() {
            return core::ptr::null_mut();
        }
        // Both SeqCst, as in `before_mlockall`: a claim that still sees the whole mapping has an
        // index the shrink keeps.
        let i = field(L::H_NTHREADS).fetch_add(1, Ordering::SeqCst) as usize;
        if i >= L::MAX_THREADS || L::THREADS_OFF + (i + 1) * L::THREAD_BLOCK > MAPPED.load(Ordering::SeqCst) {
            field(L::H_UNPROFILED).fetch_add(1, Ordering::Relaxed);
            return core::ptr::null_mut();
        }
        let block = BASE.add(L::THREADS_OFF + i * L::THREAD_BLOCK);
        *(block.add(L::T_TID) as *mut u64) = tid as u64;
        *(block.add(L::T_START_NS) as *mut u64) = sys::monotonic_ns();
        *(block.add(L::T_SAMPLE_LEFT) as *mut u64) = 1;
        // Any non-zero xorshift seed; the TSC makes the gaps differ between runs and threads.
        *(block.add(L::T_SAMPLE_RNG) as *mut u64) = sys::rdtsc() | 1;
        block
    }
}

/// After fork the child still maps its parent's file: give it its own, created while the
/// parent's is still mapped, so that a child that cannot create one (the program closed the
/// directory's descriptor in a chroot) is noted there by its pid and runs unprofiled. `quiet`:
/// the child is under a filter of the program's (`dir_fd`).
pub fn reopen_after_fork(quiet: bool) {
    unsafe {
        if BASE.is_null() {
            return;
        }
        let start = sys::monotonic_ns();
        let start_tsc = sys::rdtsc();
        let fd = create(start, !quiet);
        if fd.is_none() {
            note_lost_child(sys::getpid());
        }
        // No child is copied in the middle of a shrink (`before_mlockall`): MAPPED is what is
        // mapped.
        syscall3(MUNMAP, BASE as usize, MAPPED.load(Ordering::Relaxed), 0);
        BASE = core::ptr::null_mut();
        MAPPED.store(L::FILE_SIZE, Ordering::Relaxed);
        SHRINK.store(WHOLE, Ordering::Relaxed);
        if let Some(fd) = fd {
            map(fd, start, start_tsc);
        }
    }
}

/// Notes `pid`, a forked child without a file of its own, in the mapped (parent's) file.
unsafe fn note_lost_child(pid: i32) {
    let i = field(L::H_LOST_CHILDREN).fetch_add(1, Ordering::Relaxed) as usize;
    if i < L::LOST_PIDS_MAX {
        field(L::H_LOST_PIDS + i * 8).store(pid as u64, Ordering::Relaxed);
    }
}

/// Before an mlockall with MCL_CURRENT (the program's, or the runtime's own in a cell made with
/// --mlock, `at_start`): the mapping keeps only the blocks claimed and a few spare. Mapped whole,
/// all 219 MB were filled and locked (as root: 214 MB of /dev/shm in every process), and an
/// unprivileged call failed with ENOMEM, the mapping counting against RLIMIT_MEMLOCK (strace's
/// mlockall test). Once per image, kept if the call then fails. `quiet`: the caller's calls may
/// be killed by a filter of the program's, and the munmap is not made. No child is copied with
/// the mapping half-shrunk: the program's call shrinks it under the rewrite lock, which every
/// clone of a new process takes (`dispatch`, `process`), and with the program's signals blocked
/// (a handler's fork, or its longjmp out with the lock held).
pub fn before_mlockall(flags: usize, quiet: bool, at_start: bool) {
    unsafe {
        if !shrink_pending(flags, quiet)
            || SHRINK.compare_exchange(WHOLE, SHRINKING, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return;
        }
        let signals = sys::block_all_but_sigsys();
        let mapped = MAPPED.load(Ordering::Relaxed);
        let spare = if at_start { SPARE_BLOCKS_AT_START } else { SPARE_BLOCKS };
        let up_to = |n: usize| page_up(L::THREADS_OFF + n.min(L::MAX_THREADS) * L::THREAD_BLOCK).min(mapped);
        let keep = up_to(field(L::H_NTHREADS).load(Ordering::SeqCst) as usize + spare);
        MAPPED.store(keep, Ordering::SeqCst);
        // A claim whose index came before this second look may have seen the whole mapping:
        // its block is kept. One after it sees the new size.
        let keep = keep.max(up_to(field(L::H_NTHREADS).load(Ordering::SeqCst) as usize));
        MAPPED.store(keep, Ordering::SeqCst);
        if keep < mapped {
            syscall3(MUNMAP, BASE as usize + keep, mapped - keep, 0);
        }
        SHRINK.store(DONE, Ordering::Release);
        sys::set_mask(signals);
    }
}

/// Whether an mlockall with `flags` would shrink the profile's mapping (`before_mlockall`).
pub fn shrink_pending(flags: usize, quiet: bool) -> bool {
    unsafe { !BASE.is_null() && flags & MCL_CURRENT != 0 && !quiet && SHRINK.load(Ordering::Acquire) == WHOLE }
}

#[inline(always)]
fn ns(ticks: u64) -> u64 {
    ticks * 1_000_000 / crate::env::config().tsc_khz
}

/// Counts one call of `nr` that returned `result` after `ticks` TSC ticks from TSC `start`;
/// for a delegated call also `queued` ticks spent waiting for a delegate. Stats are kept in
/// ticks (the fast path adds them in assembly); the histograms of delegated calls are in
/// nanoseconds.
#[inline(always)]
pub fn record(prof: *mut u8, nr: usize, result: isize, start: u64, ticks: u64, delegated: Option<u64>) {
    if prof.is_null() || nr >= L::NSYS {
        return;
    }
    unsafe {
        let s = prof.add(L::T_STATS + nr * L::STAT_FIELDS * 8) as *mut u64;
        *s.add(L::S_COUNT) += 1;
        if (-4095..0).contains(&result) {
            *s.add(L::S_ERRORS) += 1;
        } else {
            *s.add(L::S_BYTES) = (*s.add(L::S_BYTES)).wrapping_add(result as u64);
        }
        *s.add(L::S_TOTAL_TICKS) += ticks;
        *s.add(L::S_TIMED) += 1;
        *s.add(L::S_EXACT_TICKS) += ticks;
        *s.add(L::S_EXACT) += 1;
        if *s.add(L::S_FIRST_TSC) == 0 {
            *s.add(L::S_FIRST_TSC) = start;
        }
        *s.add(L::S_LAST_TSC) = start;
        if let Some(q) = delegated {
            *s.add(L::S_DELEGATED) += 1;
            *s.add(L::S_QUEUED_TICKS) += q;
            let h = L::bucket_of(ns(ticks));
            field(L::HIST_FORWARD_OFF + (nr * L::HIST_BUCKETS + h) * 8).fetch_add(1, Ordering::Relaxed);
            let hq = L::bucket_of(ns(q));
            field(L::HIST_QUEUED_OFF + (nr * L::HIST_BUCKETS + hq) * 8).fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Counts one call of `nr` served in user space (see profile_layout::S_SERVED).
#[inline(always)]
pub fn record_served(prof: *mut u8, nr: usize, result: isize, start: u64, ticks: u64) {
    record(prof, nr, result, start, ticks, None);
    if !prof.is_null() && nr < L::NSYS {
        unsafe { *(prof.add(L::T_STATS + (nr * L::STAT_FIELDS + L::S_SERVED) * 8) as *mut u64) += 1 };
    }
}

/// How many calls of `nr` the thread's block holds (0 without a profile).
pub fn count_of(prof: *mut u8, nr: usize) -> u64 {
    if prof.is_null() || nr >= L::NSYS {
        return 0;
    }
    unsafe { *(prof.add(L::T_STATS + (nr * L::STAT_FIELDS + L::S_COUNT) * 8) as *const u64) }
}

/// Stores the CPU time of the thread whose block is `block`, +1 (0 stays "not recorded"): a
/// clock that could not be read (the thread gone meanwhile) leaves it unrecorded, not 0 ns.
unsafe fn record_cpu(block: *mut u8) {
    let cpu = sys::thread_cpu_ns(*(block.add(L::T_TID) as *const u64));
    if cpu > 0 {
        *(block.add(L::T_CPU_NS) as *mut u64) = cpu + 1;
    }
}

/// The profile's clock (CLOCK_MONOTONIC) now. `quiet`: without a call, from the TSC and the
/// process's start, for a thread under a filter of the program's, which may kill the process for
/// clock_gettime (strace's seccomp-filter-v allows close and exit alone, and died of SIGSYS at
/// its exit under a profile). The profile must be open.
unsafe fn now_ns(quiet: bool) -> u64 {
    if !quiet {
        return sys::monotonic_ns();
    }
    let (start_ns, start_tsc) = (field(L::H_START_NS).load(Ordering::Relaxed), field(L::H_START_TSC).load(Ordering::Relaxed));
    // In 128 bits: ticks × 10^6 overflows 64 after two hours at 2.6 GHz.
    let since = sys::rdtsc().saturating_sub(start_tsc) as u128 * 1_000_000 / crate::env::config().tsc_khz as u128;
    start_ns + since as u64
}

/// Marks the calling thread's end, with its CPU time; `quiet` as in `now_ns`, and then without
/// the CPU time, which only a call can read.
pub fn end_thread(prof: *mut u8, quiet: bool) {
    if !prof.is_null() {
        unsafe {
            if !quiet {
                record_cpu(prof);
            }
            *(prof.add(L::T_END_NS) as *mut u64) = now_ns(quiet);
        }
    }
}

/// Marks the process's end (exit_group or a successful execve) with its resource usage; its
/// threads end with it (only a killed process leaves threads without an end). `quiet` as in
/// `now_ns`, and then without the CPU times and the resource usage. `pid`: the caller's process,
/// which is another than the file's for a child that runs in its parent's memory until it execs
/// or exits (vfork, posix_spawn): its end is not its parent's.
pub fn end_process(code: u64, quiet: bool, pid: i32) {
    unsafe {
        if !owns_file(pid) {
            return;
        }
        let now = now_ns(quiet);
        for block in mapped_blocks() {
            let end = block.add(L::T_END_NS) as *mut u64;
            if *end == 0 {
                // Still running, or blocked in a call that will never return (a pool's idle
                // worker in futex): its CPU time says which, where its lifetime cannot.
                if !quiet {
                    record_cpu(block);
                }
                *end = now;
            }
        }
        if !quiet {
            let mut ru = [0i64; 18];
            syscall3(GETRUSAGE, 0, ru.as_mut_ptr() as usize, 0);
            field(L::H_USER_NS).store((ru[0] * 1_000_000_000 + ru[1] * 1000) as u64, Ordering::Relaxed);
            field(L::H_SYS_NS).store((ru[2] * 1_000_000_000 + ru[3] * 1000) as u64, Ordering::Relaxed);
        }
        field(L::H_EXIT_CODE).store(code, Ordering::Relaxed);
        // The threads' end, so that `end_process_undo` knows which ends it wrote.
        field(L::H_END_NS).store(now, Ordering::Release);
    }
}

/// An execve that failed after end_thread and end_process (and `dir_for_exec`): the process goes
/// on, and so do the calling thread (its block `prof`) and the threads end_process ended.
pub fn end_process_undo(pid: i32, prof: *mut u8) {
    unsafe {
        if !prof.is_null() {
            *(prof.add(L::T_END_NS) as *mut u64) = 0;
            *(prof.add(L::T_CPU_NS) as *mut u64) = 0;
        }
        if !owns_file(pid) {
            return;
        }
        field(L::H_EXEC_UNPROFILED).store(0, Ordering::Relaxed);
        let ended = field(L::H_END_NS).swap(0, Ordering::AcqRel);
        field(L::H_EXIT_CODE).store(0, Ordering::Relaxed);
        for block in mapped_blocks() {
            if ended != 0 && *(block.add(L::T_END_NS) as *const u64) == ended {
                *(block.add(L::T_END_NS) as *mut u64) = 0;
                *(block.add(L::T_CPU_NS) as *mut u64) = 0;
            }
        }
    }
}

/// The claimed thread blocks that are mapped (all of them, but those claimed after the mapping
/// shrank at an mlockall beyond its spare blocks).
unsafe fn mapped_blocks() -> impl Iterator<Item = *mut u8> {
    let n = (field(L::H_NTHREADS).load(Ordering::Relaxed) as usize).min(L::MAX_THREADS);
    let mapped = MAPPED.load(Ordering::Relaxed);
    (0..n).take_while(move |i| L::THREADS_OFF + (i + 1) * L::THREAD_BLOCK <= mapped)
        .map(|i| BASE.add(L::THREADS_OFF + i * L::THREAD_BLOCK))
        // A claim refused in a shrink's window leaves its block unwritten.
        .filter(|b| *(b.add(L::T_TID) as *const u64) != 0)
}

/// Whether this process writes a profile.
pub fn is_open() -> bool {
    unsafe { !BASE.is_null() }
}

/// Stores what interposition adds to one call, in TSC ticks: through a trap, and through the
/// fast path where it is on; the profile must be open.
pub fn store_overheads(trap_ticks: u64, fast_ticks: Option<u64>) {
    unsafe {
        field(L::H_TRAP_NS).store(ns(trap_ticks).max(1), Ordering::Relaxed);
        if let Some(fast) = fast_ticks {
            field(L::H_FAST_NS).store(ns(fast).max(1), Ordering::Relaxed);
        }
    }
}

/// Counts a rewritten syscall site.
pub fn count_rewrite() {
    count(L::H_REWRITTEN);
}

/// Counts one of the runtime's reads of /proc/self/maps.
pub fn count_maps_read() {
    count(L::H_MAPS_READS);
}

/// Counts a call the policy delegates that ran locally because no request slot was free.
pub fn count_slotless_call() {
    count(L::H_SLOTLESS);
}

/// Counts a call the policy delegates that its caller withdrew and made itself: every delegate
/// was busy and the pool could not grow.
pub fn count_withdrawn_call() {
    count(L::H_WITHDRAWN);
}

/// Adds one to the process header's counter at `off`, when there is a profile.
fn count(off: usize) {
    unsafe {
        if !BASE.is_null() {
            field(off).fetch_add(1, Ordering::Relaxed);
        }
    }
}
