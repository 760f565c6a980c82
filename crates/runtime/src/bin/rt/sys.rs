//! Raw Linux x86-64 syscalls and the constants the runtime uses. Every syscall the runtime
//! makes goes through these functions, so it runs from the runtime's text, the one region
//! Syscall User Dispatch lets through.

use core::arch::asm;
use core::sync::atomic::{AtomicI32, Ordering::{AcqRel, Acquire, Relaxed, Release}};

pub const READ: usize = 0;
pub const STAT: usize = 4;
pub const FSTAT: usize = 5;
pub const LSTAT: usize = 6;
pub const NEWFSTATAT: usize = 262;
pub const STATX: usize = 332;
pub const WRITE: usize = 1;
pub const OPEN: usize = 2;
pub const OPENAT: usize = 257;
pub const OPENAT2: usize = 437;
pub const CLOSE: usize = 3;
pub const GETDENTS: usize = 78;
pub const GETDENTS64: usize = 217;
pub const DUP2: usize = 33;
pub const DUP3: usize = 292;
pub const CLOSE_RANGE: usize = 436;
pub const MMAP: usize = 9;
pub const MPROTECT: usize = 10;
pub const MUNMAP: usize = 11;
pub const BRK: usize = 12;
pub const MREMAP: usize = 25;
/// mremap's flag to move the mapping to the address given last, replacing what is there.
pub const MREMAP_FIXED: usize = 2;
/// mremap's flag to leave the old range mapped, emptied.
pub const MREMAP_DONTUNMAP: usize = 4;
pub const MADVISE: usize = 28;
pub const PKEY_MPROTECT: usize = 329;
/// sigaltstack's flags: the stack is off; the kernel disarms it while a handler runs on it.
pub const SS_DISABLE: i32 = 2;
pub const SS_AUTODISARM: i32 = 1 << 31;
pub const SHMAT: usize = 30;
/// shmat's flag to replace what is mapped at the address, as mmap's MAP_FIXED does.
pub const SHM_REMAP: usize = 0o40000;
pub const SHM_EXEC: usize = 0o100000;
pub const SCHED_YIELD: usize = 24;
pub const RT_SIGACTION: usize = 13;
pub const RT_SIGPROCMASK: usize = 14;
pub const SIGALTSTACK: usize = 131;
pub const PKEY_ALLOC: usize = 330;
pub const RT_SIGRETURN: usize = 15;
pub const PREAD64: usize = 17;
pub const GETPID: usize = 39;
pub const CLONE: usize = 56;
pub const FORK: usize = 57;
pub const VFORK: usize = 58;
pub const EXECVE: usize = 59;
pub const EXIT: usize = 60;
pub const WAIT4: usize = 61;
pub const FTRUNCATE: usize = 77;
pub const READLINK: usize = 89;
pub const GETRUSAGE: usize = 98;
pub const GETPPID: usize = 110;
pub const PRLIMIT64: usize = 302;
pub const MKDIRAT: usize = 258;
pub const FCHOWNAT: usize = 260;
pub const SETUID: usize = 105;
pub const GETEUID: usize = 107;
pub const SETREUID: usize = 113;
pub const SETRESUID: usize = 117;
pub const SETFSUID: usize = 122;
pub const SETGID: usize = 106;
pub const SETREGID: usize = 114;
pub const SETGROUPS: usize = 116;
pub const SETRESGID: usize = 119;
pub const SETFSGID: usize = 123;
pub const CAPSET: usize = 126;
pub const LANDLOCK_RESTRICT_SELF: usize = 446;
pub const IOCTL: usize = 16;
pub const SETNS: usize = 308;
pub const RT_SIGSUSPEND: usize = 130;
pub const MLOCKALL: usize = 151;
pub const MSEAL: usize = 462;
pub const MCL_CURRENT: usize = 1;
pub const MCL_FUTURE: usize = 2;
pub const PRCTL: usize = 157;
pub const ARCH_PRCTL: usize = 158;
pub const GETTID: usize = 186;
pub const FUTEX: usize = 202;
pub const SCHED_SETAFFINITY: usize = 203;
pub const CLOCK_GETTIME: usize = 228;
pub const CLOCK_GETRES: usize = 229;
pub const EXIT_GROUP: usize = 231;
pub const TGKILL: usize = 234;
pub const WAITID: usize = 247;
pub const READLINKAT: usize = 267;
pub const PSELECT6: usize = 270;
pub const PPOLL: usize = 271;
pub const UNSHARE: usize = 272;
pub const PTRACE: usize = 101;
pub const PTRACE_TRACEME: usize = 0;
pub const EPOLL_PWAIT: usize = 281;
pub const EXECVEAT: usize = 322;
pub const PROCESS_VM_READV: usize = 310;
pub const PROCESS_VM_WRITEV: usize = 311;
pub const SECCOMP: usize = 317;
pub const CLONE3: usize = 435;
pub const EPOLL_PWAIT2: usize = 441;

pub const EINTR: isize = 4;
/// The kernel's own mark of a call a signal interrupted, never returned to user space: restarted
/// after a handler with SA_RESTART, else EINTR (`delegate::child_after_fork` marks so).
pub const ERESTARTSYS: isize = 512;
pub const ENOENT: isize = 2;
pub const ESRCH: isize = 3;
pub const EBADF: isize = 9;
pub const EACCES: isize = 13;
pub const ENOEXEC: isize = 8;
pub const ENOMEM: isize = 12;
pub const EPERM: isize = 1;
pub const EFAULT: isize = 14;
pub const E2BIG: isize = 7;
pub const EINVAL: isize = 22;
pub const EMFILE: isize = 24;
pub const EFBIG: isize = 27;
pub const EPIPE: isize = 32;
pub const ENOSYS: isize = 38;
pub const ENAMETOOLONG: isize = 36;

pub const SIGKILL: usize = 9;
pub const SIGCHLD: usize = 17;
pub const SIGSYS: usize = 31;
pub const SIGSEGV: usize = 11;
/// Real-time signal the runtime reserves to interrupt a delegate's blocking call.
pub const SIG_INTERRUPT: usize = 63;

pub const CLONE_VM: u64 = 0x100;
pub const CLONE_FS: u64 = 0x200;
pub const CLONE_FILES: u64 = 0x400;
pub const CLONE_SIGHAND: u64 = 0x800;
pub const CLONE_VFORK: u64 = 0x4000;
pub const CLONE_THREAD: u64 = 0x10000;
pub const CLONE_NEWUSER: u64 = 0x10000000;
pub const CLONE_NEWNS: u64 = 0x20000;
pub const CLONE_NEWTIME: u64 = 0x80;
pub const CLONE_NEWCGROUP: u64 = 0x2000000;
pub const CLONE_NEWUTS: u64 = 0x4000000;
pub const CLONE_NEWIPC: u64 = 0x8000000;
pub const CLONE_NEWNET: u64 = 0x40000000;
/// The end of user space (4-level page tables): the kernel refuses addresses from here on.
pub const TASK_SIZE_MAX: u64 = 0x7fff_ffff_f000;

pub const AT_FDCWD: isize = -100;
pub const O_RDONLY: usize = 0;
pub const O_RDWR: usize = 2;
pub const O_CREAT: usize = 0o100;
pub const O_EXCL: usize = 0o200;
pub const O_CLOEXEC: usize = 0o2000000;
pub const PROT_NONE: usize = 0;
pub const PROT_READ: usize = 1;
pub const PROT_WRITE: usize = 2;
pub const PROT_EXEC: usize = 4;
pub const MAP_SHARED: usize = 1;
pub const MAP_PRIVATE: usize = 2;
/// The bits of mmap's flags that say shared or private (MAP_SHARED_VALIDATE is 3).
pub const MAP_TYPE: usize = 0xf;
pub const MAP_FIXED: usize = 0x10;
pub const MAP_ANONYMOUS: usize = 0x20;
pub const FUTEX_WAIT_PRIVATE: usize = 128;
pub const FUTEX_WAKE_PRIVATE: usize = 129;
pub const ARCH_SET_GS: usize = 0x1001;
pub const ARCH_GET_GS: usize = 0x1004;
pub const PR_SET_SYSCALL_USER_DISPATCH: usize = 59;
pub const PR_SET_SECCOMP: usize = 22;
pub const PR_SET_TSC: usize = 26;
pub const PAGE: usize = 4096;

/// `x` rounded down to its page.
pub fn page_down(x: usize) -> usize {
    x & !(PAGE - 1)
}

/// `x` rounded up to a whole page.
pub fn page_up(x: usize) -> usize {
    (x + PAGE - 1) & !(PAGE - 1)
}

core::arch::global_asm!(
    // coreplane_syscall_on(stack, nr, a0, a1): a two-argument call made with rsp = stack.
    ".globl coreplane_syscall_on",
    "coreplane_syscall_on:",
    "mov rax, rsp",
    "mov rsp, rdi",
    "push rax",
    "mov rax, rsi",
    "mov rdi, rdx",
    "mov rsi, rcx",
    "syscall",
    "pop rsp",
    "ret",
);

core::arch::global_asm!(
    // coreplane_call_on(stack, f, arg): f(arg) run with rsp = stack (16-byte aligned), then back
    // on the caller's stack.
    ".globl coreplane_call_on",
    "coreplane_call_on:",
    "push rbp",
    "mov rbp, rsp",
    "mov rsp, rdi",
    "mov rdi, rdx",
    "call rsi",
    "mov rsp, rbp",
    "pop rbp",
    "ret",
);

core::arch::global_asm!(
    // coreplane_spawn(flags, stack_top, entry, arg, tid_at) -> tid: a bare thread running
    // entry(arg); tid_at is clone's parent_tid and child_tid both.
    ".globl coreplane_spawn",
    "coreplane_spawn:",
    "mov r9, rdx",
    "mov r10, r8",
    "mov rdx, r8",
    "mov r8, rcx",
    "mov eax, 56",
    "syscall",
    "test rax, rax",
    "jnz 2f",
    "xor ebp, ebp",
    "mov rdi, r8",
    "and rsp, -16",
    "call r9",
    "mov eax, 60",
    "xor edi, edi",
    "syscall",
    "2:",
    "ret",
);

extern "C" {
    fn coreplane_call_on(stack: usize, f: extern "C" fn(usize), arg: usize);
    fn coreplane_syscall_on(stack: usize, nr: usize, a0: usize, a1: usize) -> isize;
    fn coreplane_spawn(flags: u64, stack_top: usize, entry: extern "C" fn(usize), arg: usize, tid_at: usize) -> isize;
}

/// Starts one of the runtime's own threads (delegates, the memory service's, watchers) on the
/// stack ending at `stack_top`, running entry(arg) and ending when it returns; its tid or -errno.
/// It starts with every signal but SIGSYS blocked, until its entry sets the mask it keeps: a
/// signal for the process taken in between ran the program's handler on it (a new delegate ran
/// mksh's SIGCHLD handler, whose delegated call then waited for that same delegate for good).
/// It does not share the process's System V semaphore undo list (no CLONE_SYSVSEM): sharing gave
/// a single-threaded program one, which kcmp(KCMP_SYSVSEM) shows (stress-ng --kcmp failed);
/// semop and semtimedop, which may add to the list, are made by their caller under every policy.
/// Its tid is in RUNTIME_TIDS while it runs, when a slot is free.
pub fn spawn_thread(stack_top: usize, entry: extern "C" fn(usize), arg: usize) -> isize {
    let mut flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD;
    // The slot is taken with signals blocked, so that no handler's longjmp leaves it taken.
    let mask = block_all_but_sigsys();
    let slot = RUNTIME_TIDS.iter().find(|s| s.compare_exchange(0, RESERVED, AcqRel, Relaxed).is_ok());
    if slot.is_some() {
        flags |= CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
    }
    let tid_at = slot.map_or(0, |s| s.as_ptr() as usize);
    let tid = unsafe { coreplane_spawn(flags, stack_top, entry, arg, tid_at) };
    if let Some(s) = slot.filter(|_| tid < 0) {
        s.store(0, Release);
    }
    set_mask(mask);
    tid
}

const CLONE_PARENT_SETTID: u64 = 0x0010_0000;
const CLONE_CHILD_CLEARTID: u64 = 0x0020_0000;
const RESERVED: i32 = -1;
/// The tids of the runtime's running threads: the kernel writes each before clone returns
/// (CLONE_PARENT_SETTID) and clears it when the thread ends (CLONE_CHILD_CLEARTID), so a tid
/// the kernel gives a later thread of the program's is never taken for one of them (`task_view`
/// hides them from the program's listing of its own threads). RESERVED while a clone is made.
static RUNTIME_TIDS: [AtomicI32; 64] = [const { AtomicI32::new(0) }; 64];

/// Whether `tid` is one of the runtime's running threads in this process.
pub fn is_runtime_thread(tid: i32) -> bool {
    tid > 0 && RUNTIME_TIDS.iter().any(|s| s.load(Acquire) == tid)
}

/// In a forked child: none of the parent's runtime threads is here.
pub fn forget_runtime_threads() {
    for s in &RUNTIME_TIDS {
        s.store(0, Relaxed);
    }
}

/// Runs f(arg) on the stack ending at `stack_top` (16-byte aligned), then returns here.
pub fn call_on(stack_top: usize, f: extern "C" fn(usize), arg: usize) {
    unsafe { coreplane_call_on(stack_top, f, arg) }
}

/// A two-argument call made with its stack pointer at `stack`: the kernel judges where the caller
/// is by it (sigaltstack refuses a change made on the signal stack).
pub fn syscall_on(stack: usize, nr: usize, a0: usize, a1: usize) -> isize {
    unsafe { coreplane_syscall_on(stack, nr, a0, a1) }
}

/// The `syscall` instruction with six arguments; the result, or -errno.
#[inline(always)]
pub unsafe fn syscall6(nr: usize, a1: usize, a2: usize, a3: usize, a4: usize, a5: usize, a6: usize) -> isize {
    let ret: isize;
    asm!("syscall", inlateout("rax") nr as isize => ret, in("rdi") a1, in("rsi") a2, in("rdx") a3,
         in("r10") a4, in("r8") a5, in("r9") a6, lateout("rcx") _, lateout("r11") _, options(nostack));
    ret
}

/// `syscall6` with three arguments.
#[inline(always)]
pub unsafe fn syscall3(nr: usize, a1: usize, a2: usize, a3: usize) -> isize {
    syscall6(nr, a1, a2, a3, 0, 0, 0)
}

/// Ends the process with `code`.
pub fn exit_group(code: usize) -> ! {
    unsafe { syscall3(EXIT_GROUP, code, 0, 0) };
    loop {}
}

/// exit(2) of the calling thread once [addr, addr + len) is unmapped, though it may hold the
/// stack the thread runs on: every signal is blocked first (none could be delivered on an
/// unmapped stack), and nothing touches memory between the two calls.
pub fn exit_unmapping(addr: usize, len: usize, code: usize) -> ! {
    static ALL: u64 = !0;
    unsafe {
        syscall6(RT_SIGPROCMASK, 0 /* SIG_BLOCK */, &ALL as *const u64 as usize, 0, 8, 0, 0);
        asm!("syscall", "mov rdi, rdx", "mov eax, {exit}", "syscall", "ud2",
             exit = const EXIT, in("rax") MUNMAP, in("rdi") addr, in("rsi") len, in("rdx") code,
             options(noreturn, nostack));
    }
}

/// Blocks every signal but SIGSYS (the runtime's trap, which must never be blocked) and returns
/// the mask to give back with `set_mask`.
pub fn block_all_but_sigsys() -> u64 {
    let all: u64 = !(1 << (SIGSYS - 1));
    let mut old = 0u64;
    unsafe { syscall6(RT_SIGPROCMASK, 0 /* SIG_BLOCK */, &all as *const u64 as usize, &mut old as *mut u64 as usize, 8, 0, 0) };
    old
}

/// Sets the calling thread's signal mask to `mask`.
pub fn set_mask(mask: u64) {
    unsafe { syscall6(RT_SIGPROCMASK, 2 /* SIG_SETMASK */, &mask as *const u64 as usize, 0, 8, 0, 0) };
}

/// Writes all of `buf` to `fd`, giving up at the first error.
pub fn write_all(fd: usize, mut buf: &[u8]) {
    while !buf.is_empty() {
        let n = unsafe { syscall3(WRITE, fd, buf.as_ptr() as usize, buf.len()) };
        if n <= 0 {
            return;
        }
        buf = &buf[n as usize..];
    }
}

/// Anonymous private read-write memory, or None.
pub fn map_anon(len: usize) -> Option<*mut u8> {
    let p = unsafe { syscall6(MMAP, 0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, usize::MAX, 0) };
    (p >= 0 || p < -4095).then_some(p as *mut u8)
}

/// Whether a seccomp filter applies to the calling thread (PR_GET_SECCOMP says 2). Filters
/// survive execve, so a program may start under one (its launcher's, a container's).
pub fn seccomp_filtered() -> bool {
    const PR_GET_SECCOMP: usize = 21;
    unsafe { syscall3(PRCTL, PR_GET_SECCOMP, 0, 0) == 2 }
}

/// The calling thread's id.
pub fn gettid() -> i32 {
    unsafe { syscall3(GETTID, 0, 0, 0) as i32 }
}

/// The calling process's id.
pub fn getpid() -> i32 {
    unsafe { syscall3(GETPID, 0, 0, 0) as i32 }
}

/// Copies `len` bytes between the runtime's `local` and the program's memory at `addr` (into
/// the program when `write`) as the kernel copies a call's argument or result: false where the
/// kernel's copy fails with EFAULT (the runtime must not fault instead). `pid` is the caller's
/// process. Where a seccomp filter forbids process_vm_readv/writev, a plain copy.
fn copy_program(pid: i32, addr: usize, local: *mut u8, len: usize, write: bool) -> bool {
    let here = [local as usize, len];
    let there = [addr, len];
    let nr = if write { PROCESS_VM_WRITEV } else { PROCESS_VM_READV };
    let n = unsafe { syscall6(nr, pid as usize, here.as_ptr() as usize, 1, there.as_ptr() as usize, 1, 0) };
    if n == len as isize {
        return true;
    }
    if n >= 0 || n == -EFAULT {
        return false;
    }
    let (from, to) = if write { (local as *const u8, addr as *mut u8) } else { (addr as *const u8, local) };
    unsafe { core::ptr::copy_nonoverlapping(from, to, len) };
    true
}

/// Reads the program's memory at `addr` into `buf` (see `copy_program`).
pub fn read_program(pid: i32, addr: usize, buf: &mut [u8]) -> bool {
    copy_program(pid, addr, buf.as_mut_ptr(), buf.len(), false)
}

/// Reads `len` bytes of the program's memory at each of `addrs` (at most 64) into `out`, back to
/// back, in one process_vm_readv (see `copy_program`): how many of them, from the first, were
/// read whole (the kernel stops at the first it cannot read).
pub fn read_program_heads(pid: i32, addrs: &[usize], len: usize, out: &mut [u8]) -> usize {
    let n = addrs.len().min(64).min(out.len() / len.max(1));
    let mut there = [[0usize; 2]; 64];
    for (i, &a) in addrs[..n].iter().enumerate() {
        there[i] = [a, len];
    }
    let here = [out.as_mut_ptr() as usize, n * len];
    let got = unsafe { syscall6(PROCESS_VM_READV, pid as usize, here.as_ptr() as usize, 1, there.as_ptr() as usize, n, 0) };
    if got >= 0 || got == -EFAULT {
        return got.max(0) as usize / len.max(1);
    }
    for (i, &a) in addrs[..n].iter().enumerate() {
        unsafe { core::ptr::copy_nonoverlapping(a as *const u8, out.as_mut_ptr().add(i * len), len) };
    }
    n
}

/// Writes `data` into the program's memory at `addr` (see `copy_program`).
pub fn write_program(pid: i32, addr: usize, data: &[u8]) -> bool {
    copy_program(pid, addr, data.as_ptr() as *mut u8, data.len(), true)
}

/// Clock `clock` in nanoseconds; 0 when the kernel refuses.
fn clock_ns(clock: usize) -> u64 {
    let mut ts = [0i64; 2];
    if unsafe { syscall3(CLOCK_GETTIME, clock, ts.as_mut_ptr() as usize, 0) } < 0 {
        return 0;
    }
    ts[0] as u64 * 1_000_000_000 + ts[1] as u64
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    clock_ns(1)
}

/// The kernel's clock id for the CPU clock of thread `tid` of this process (!tid << 3 |
/// CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED): any thread of the process may read it.
pub fn thread_clock(tid: i32) -> usize {
    ((!tid) << 3 | 6) as isize as usize
}

/// The CPU time (user + system) of thread `tid` of this process, through its per-thread CPU
/// clock; 0 when the kernel refuses (the thread already gone).
pub fn thread_cpu_ns(tid: u64) -> u64 {
    clock_ns(thread_clock(tid as i32))
}

/// The time-stamp counter (the runtime's clock for call times).
#[inline(always)]
pub fn rdtsc() -> u64 {
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Sleeps while `*word == expected`, for at most `timeout_ns` (0: no limit).
pub fn futex_wait(word: *const u32, expected: u32, timeout_ns: u64) -> isize {
    let ts = [(timeout_ns / 1_000_000_000) as i64, (timeout_ns % 1_000_000_000) as i64];
    let tsp = if timeout_ns == 0 { 0 } else { ts.as_ptr() as usize };
    unsafe { syscall6(FUTEX, word as usize, FUTEX_WAIT_PRIVATE, expected as usize, tsp, 0, 0) }
}

/// Wakes up to `n` threads sleeping on `word`.
pub fn futex_wake(word: *const u32, n: usize) {
    unsafe { syscall3(FUTEX, word as usize, FUTEX_WAKE_PRIVATE, n) };
}

/// Length of a NUL-terminated string.
pub unsafe fn cstr_len(p: *const u8) -> usize {
    let mut n = 0;
    while *p.add(n) != 0 {
        n += 1;
    }
    n
}

/// A NUL-terminated string as a slice, without the NUL.
pub unsafe fn cstr<'a>(p: *const u8) -> &'a [u8] {
    core::slice::from_raw_parts(p, cstr_len(p))
}

/// Writes `parts` one after the other and a NUL into `out` (truncating); returns the length
/// without the NUL. The runtime's only way of building paths and environment entries.
pub fn concat(parts: &[&[u8]], out: &mut [u8]) -> usize {
    let mut n = 0;
    for part in parts {
        let k = part.len().min(out.len() - 1 - n);
        out[n..n + k].copy_from_slice(&part[..k]);
        n += k;
    }
    out[n] = 0;
    n
}

// The runtime's own calls on files are the ones glibc 2.36 makes (openat, newfstatat,
// readlinkat, faccessat), never the legacy open, fstat, readlink or access: a program's own
// seccomp filter, written for what glibc makes, may kill for those, and it applies to the
// runtime too (the start-up of an image exec'd under it, the exec's checks before).

/// open(2) of `path` (NUL-terminated) with `flags`, no mode, as openat from the current
/// directory: the descriptor, or -errno.
pub fn open(path: *const u8, flags: usize) -> isize {
    unsafe { syscall6(OPENAT, AT_FDCWD as usize, path as usize, flags, 0, 0, 0) }
}

/// fstat(2) of `fd` into `st` (a struct stat), as glibc makes it: newfstatat(fd, "",
/// AT_EMPTY_PATH), O_PATH descriptors too; 0 or -errno. A negative fd is EBADF, as fstat says
/// (AT_FDCWD would be the current directory).
pub fn fstat(fd: usize, st: *mut u8) -> isize {
    const AT_EMPTY_PATH: usize = 0x1000;
    if (fd as i32) < 0 {
        return -EBADF;
    }
    unsafe { syscall6(NEWFSTATAT, fd, b"\0".as_ptr() as usize, st as usize, AT_EMPTY_PATH, 0, 0) }
}

/// readlink(2) of `path` into `buf`, as readlinkat from the current directory: its length, or
/// -errno.
pub fn readlink(path: *const u8, buf: &mut [u8]) -> isize {
    unsafe { syscall6(READLINKAT, AT_FDCWD as usize, path as usize, buf.as_mut_ptr() as usize, buf.len(), 0, 0) }
}

/// The first read(2) of the file at `path` (NUL-terminated) into `buf`: enough for the small
/// /proc files the runtime looks at once. None when it cannot be opened.
pub fn read_once<'a>(path: &[u8], buf: &'a mut [u8]) -> Option<&'a [u8]> {
    let fd = open(path.as_ptr(), O_RDONLY | O_CLOEXEC);
    if fd < 0 {
        return None;
    }
    let n = unsafe { syscall3(READ, fd as usize, buf.as_mut_ptr() as usize, buf.len()) };
    unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
    Some(&buf[..n.max(0) as usize])
}

/// Formats `v` in decimal into `buf`, returning the digits.
pub fn fmt_u64(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &buf[i..];
        }
    }
}

/// Prints "coreplane-rt: <msg>" on stderr and exits with status 127, as a failed exec would.
pub fn die(parts: &[&[u8]]) -> ! {
    write_all(2, b"coreplane-rt: ");
    for p in parts {
        write_all(2, p);
    }
    write_all(2, b"\n");
    exit_group(127)
}

pub const SOCKET: usize = 41;
pub const CONNECT: usize = 42;
pub const FCNTL: usize = 72;
pub const F_DUPFD_CLOEXEC: usize = 1030;
pub const F_GETFD: usize = 1;
pub const F_SETFD: usize = 2;
pub const FD_CLOEXEC: usize = 1;
pub const AF_UNIX: usize = 1;
pub const SOCK_CLOEXEC: usize = 0o2000000;
pub const SOL_SOCKET: usize = 1;

