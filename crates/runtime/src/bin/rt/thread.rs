//! Per-thread runtime state, found through the GS base.
//! glibc leaves the GS base unused on x86-64, so the trap path finds the state with no syscall
//! and no thread-local storage of its own.

use crate::sys::{self, *};
use core::arch::asm;

/// Nesting depth of delegated calls; deeper calls run locally.
pub const MAX_DEPTH: usize = 4;

/// A thread's state and its runtime stack share one mapping: the Thread in its first page, a
/// guard page, the stack above, growing down from its end. The fast path runs its Rust calls (delegated
/// calls, calls the runtime answers) there instead of on the program's stack, which may be a
/// goroutine's few KiB with no guard page below (`fastpath`, label 5). Untouched pages cost no
/// memory (a delegated call touched one page, measured); the deepest Rust path, execve, holds a
/// few 4 KiB path buffers (read from the code, not measured).
pub const THREAD_SIZE: usize = 256 * 1024;

#[repr(C)]
pub struct Thread {
    /// Points to itself: `mov reg, gs:[0]` yields the Thread.
    pub self_ptr: *mut Thread,
    pub tid: i32,
    pub pid: i32,
    /// This thread's block in the process profile file (null without a profile).
    pub prof: *mut u8,
    /// Request slots for delegated calls, one per nesting depth: a signal handler that runs
    /// while a delegated call waits may delegate calls of its own (u32::MAX: not yet taken).
    pub slots: [u32; MAX_DEPTH],
    /// Delegated calls in progress on this thread.
    pub depth: u32,
    /// The record (`program_signal::Entry`) of the runtime call whose delegated call, the
    /// innermost, this thread waits for (`delegate::interrupt_before_handler`).
    pub delegated_at: usize,
    /// Slots given back in the process when this thread last looked for one and found none
    /// (`delegate::look_again`), and its calls made without one since it first found none.
    pub slots_released_seen: u32,
    pub slotless_calls: u32,
    /// Program signal handlers finished on this thread (their rt_sigreturn trapped).
    pub handlers_done: u64,
    /// Signal number of the most recent of those.
    pub last_signo: i32,
    /// The program's own GS base (ARCH_SET_GS is virtualised).
    pub program_gs: usize,
    /// Never delegate: this thread is a process that shares its parent's memory, or is
    /// `filtered`, or in strict mode, or its rdtsc faults (see `calls_locally`).
    pub local_only: bool,
    /// Its namespaces, filesystem context or file table are no longer the delegates' (it
    /// unshared or joined some while they ran, or its creator's were): its calls are made here
    /// (`process::after_apart`).
    pub apart: bool,
    /// Under a seccomp filter of the program's (installed by this thread, inherited from the
    /// thread that created it or across execve, or synchronised onto it): the filter must see
    /// its calls, so they are made here, and it must see none of the runtime's own.
    pub filtered: bool,
    /// In seccomp strict mode: the kernel kills the thread for any call but read, write, exit
    /// and rt_sigreturn, the runtime's own too (see `process::strict_mode`).
    pub strict: bool,
    /// rdtsc faults on this thread (PR_TSC_SIGSEGV, or strict mode): its calls go untimed.
    pub no_tsc: bool,
    /// Traced since its PTRACE_TRACEME: its calls reach the kernel as made (`process::traced`).
    pub traced: bool,
    /// Its signal stack is the runtime's, which the program does not see (`process::lend_signal_stack`).
    pub lent_stack: bool,
    /// Place in the clone tree (see `placement`).
    pub place: crate::placement::Place,
    /// The Thread mapping is the thread's own (not a vfork child's block, which its parent
    /// unmaps): it is unmapped when the thread exits.
    pub owned: bool,
    /// The runtime stack's top while no fast-path Rust call is in progress there; below it
    /// (the call's frame) while one is (`fastpath`, label 5): a handler on its own signal stack
    /// that interrupted that call then makes its calls where it is, not over the call's frames.
    pub rt_sp: usize,
    /// The innermost runtime call in progress on this thread (a `program_signal::Entry`), or 0:
    /// a program handler for a signal that interrupts the runtime's own code is shown the
    /// program's context at that call and runs on the program's stack (`program_signal`).
    pub entry: usize,
    /// The frame of a handler `program_signal` is building (0: none); later frames go below.
    pub handler_frame: usize,
    /// The signal stack (a stack_t) `program_signal` disabled while a handler ran off it, and that
    /// handler's frame (0: none): put back when the handler returns, or at the thread's next
    /// runtime call made above that frame (the handler was left by longjmp).
    pub disabled_stack: [usize; 3],
    pub disabled_for: usize,
    /// The signal stack the program last set on this thread, as [lowest, highest] address
    /// ([0, 0]: none): a fast-path Rust call made on it stays on it (`fastpath`, label 5).
    pub program_signal_stack: [usize; 2],
    /// The signal stack the program set on this thread and then unmapped, as the stack_t it is
    /// still shown (its size 0: none); the kernel's is disabled (`program_signal::after_unmap`).
    pub withdrawn_signal_stack: [usize; 3],
    /// The memory this thread's stackless vforks give their children and itself (a
    /// `process::VforkBlock`, kept for the next one: the parent returns to the program from a copy
    /// of its trap frame there), or 0 before the first.
    pub vfork_block: usize,
    /// The argument vector this thread's execve mapped (address, size; 0 when none), while the
    /// exec is made: a vfork child runs in its parent's memory, where a successful exec leaves it
    /// (`process::VforkBlock::take_leftovers`).
    pub exec_buffer: [usize; 2],
    /// The program's own Syscall User Dispatch settings for this thread: mode, offset, length,
    /// selector (`program_sud`; mode 0: off). Not inherited by a new thread or a forked child.
    pub program_sud: [usize; 4],
    /// The byte Syscall User Dispatch reads at each call outside the runtime's text (`sud`).
    pub sud_selector: u8,
    /// Under a filter the program installed itself (`is_sandboxed`).
    pub sandboxed: bool,
}

/// A filter was installed with SECCOMP_FILTER_FLAG_TSYNC: the kernel put it on every thread of
/// the process, which each thread's `filtered` does not show. Survives fork, as filters do.
static EVERY_THREAD_FILTERED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
/// How many SECCOMP_FILTER_FLAG_TSYNC installs of the program's are under way
/// (`SandboxingEveryThread`).
static EVERY_THREAD_SANDBOXING: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

impl Thread {
    /// The thread's mapping, [Thread, runtime stack's top): a stack pointer in it is on the
    /// runtime stack (the Thread page below is not stack, but no stack pointer lies there).
    pub fn mapping(&self) -> core::ops::Range<usize> {
        let base = self as *const Thread as usize;
        base..base + THREAD_SIZE
    }

    /// Whether the thread's calls must be made where it is, never delegated.
    pub fn calls_locally(&self) -> bool {
        self.local_only || self.apart || every_thread_sandboxed()
    }

    /// Whether a seccomp filter of the program's applies to this thread.
    pub fn is_filtered(&self) -> bool {
        self.filtered || every_thread_sandboxed()
    }

    /// Whether a filter the program installed itself applies to this thread: a sandbox written
    /// for the program's own calls, which may refuse or trap the runtime's (Chromium's traps
    /// membarrier). A filter the image started under (a container's, a service manager's) is
    /// written for any program, and lets the runtime rewrite sites as it does elsewhere.
    pub fn is_sandboxed(&self) -> bool {
        self.sandboxed || every_thread_sandboxed() || EVERY_THREAD_SANDBOXING.load(core::sync::atomic::Ordering::Relaxed) != 0
    }

    /// Whether the runtime must make no call of its own on this thread that it can do without:
    /// a filter of the program's may kill the process for it. Its TSC is readable (a thread whose
    /// rdtsc faults makes its calls as any other).
    pub fn calls_may_kill(&self) -> bool {
        self.is_sandboxed() && !self.no_tsc
    }

    /// Reads the program's memory at `addr` for a call of this thread, as the kernel copies an
    /// argument: false where its copy would fail with EFAULT (sys::read_program). A thread under
    /// a filter of the program's copies directly and makes no call: the filter would see
    /// process_vm_readv, which allowlists without systemd's `@debug` group kill on
    /// (tests/programs/seccomp_no_vm_readv.c); an unreadable address then faults in the runtime
    /// where natively the call fails with EFAULT.
    pub fn read_program(&self, addr: usize, buf: &mut [u8]) -> bool {
        if self.is_filtered() {
            unsafe { core::ptr::copy_nonoverlapping(addr as *const u8, buf.as_mut_ptr(), buf.len()) };
            return true;
        }
        sys::read_program(self.pid, addr, buf)
    }

    /// Writes `data` into the program's memory at `addr` for a call of this thread (see
    /// `read_program`).
    pub fn write_program(&self, addr: usize, data: &[u8]) -> bool {
        if self.is_filtered() {
            unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) };
            return true;
        }
        sys::write_program(self.pid, addr, data)
    }

    /// Whether the program's memory at `addr` starts with the bytes `expected`, read as the kernel
    /// reads an argument: false for an address the kernel would fail with EFAULT (a call the
    /// runtime looks into is then left to the kernel, which fails it so, where the runtime must not
    /// fault instead).
    pub fn program_starts_with(&self, addr: usize, expected: &[u8]) -> bool {
        let mut buf = [0u8; 64];
        let got = &mut buf[..expected.len().min(64)];
        got.len() == expected.len() && self.read_program(addr, got) && got == expected
    }

    /// `read_program` of `len` bytes at each of `addrs` (at most 64) into `out`, back to back, in
    /// one call: how many of them, from the first, were read whole.
    pub fn read_program_heads(&self, addrs: &[usize], len: usize, out: &mut [u8]) -> usize {
        if self.is_filtered() {
            let n = addrs.len().min(out.len() / len.max(1));
            for (i, &a) in addrs[..n].iter().enumerate() {
                unsafe { core::ptr::copy_nonoverlapping(a as *const u8, out.as_mut_ptr().add(i * len), len) };
            }
            return n;
        }
        sys::read_program_heads(self.pid, addrs, len, out)
    }

    /// The program's NUL-terminated string at `addr`, copied into `buf` (without its NUL): None where
    /// the kernel would fail with EFAULT, or ENAMETOOLONG where it does not fit. Read up to a page
    /// boundary at a time, so a string that ends just before unmapped memory is read whole.
    pub fn program_cstr<'a>(&self, addr: usize, buf: &'a mut [u8]) -> Result<&'a [u8], isize> {
        let mut n = 0;
        while n < buf.len() {
            let at = addr + n;
            let len = (PAGE - at % PAGE).min(buf.len() - n);
            if addr == 0 || !self.read_program(at, &mut buf[n..n + len]) {
                return Err(-EFAULT);
            }
            if let Some(end) = buf[n..n + len].iter().position(|&c| c == 0) {
                return Ok(&buf[..n + end]);
            }
            n += len;
        }
        Err(-ENAMETOOLONG)
    }

    /// The program's pointer array at `addr` (argv, envp), up to its NULL: its length, or None
    /// where the kernel would fail with EFAULT. Read a page's worth at a time, then word by word
    /// where a read runs off the array's mapping.
    pub fn program_array_len(&self, addr: usize) -> Option<usize> {
        if addr == 0 {
            return Some(0);
        }
        let mut n = 0;
        let mut chunk = [0usize; 64];
        loop {
            let at = addr + n * 8;
            let words = (PAGE - at % PAGE) / 8;
            let words = words.clamp(1, chunk.len());
            let bytes = unsafe { core::slice::from_raw_parts_mut(chunk.as_mut_ptr() as *mut u8, words * 8) };
            if !self.read_program(at, bytes) {
                return None;
            }
            match chunk[..words].iter().position(|&w| w == 0) {
                Some(end) => return Some(n + end),
                None => n += words,
            }
        }
    }

    /// A filter now applies to this thread (to every thread of the process with `everywhere`);
    /// `sandbox`: one the program installed under the runtime (or a thread it came from did).
    pub fn now_filtered(&mut self, everywhere: bool, sandbox: bool) {
        self.filtered = true;
        self.sandboxed |= sandbox;
        self.local_only = true;
        if everywhere {
            EVERY_THREAD_FILTERED.store(true, core::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// While alive, every thread counts as sandboxed (`Thread::is_sandboxed`): made before a
/// SECCOMP_FILTER_FLAG_TSYNC install of the program's and dropped after the caller's
/// `now_filtered`, since the kernel puts the filter on each thread during the call, and a trap
/// of another thread's that returned through rt_sigreturn after it applied died where the
/// filter kills for that call (`sandboxed_tsync.c`). What is left: a trap that looked before
/// the mark and makes its rt_sigreturn after the filter applies (a few instructions). A child
/// forked meanwhile keeps the count, and its threads stay sandboxed: whether the filter came
/// before the fork is unknown to it.
pub struct SandboxingEveryThread;

impl SandboxingEveryThread {
    /// Marks every thread sandboxed until the value is dropped.
    pub fn begin() -> Self {
        EVERY_THREAD_SANDBOXING.fetch_add(1, core::sync::atomic::Ordering::SeqCst);
        SandboxingEveryThread
    }
}

impl Drop for SandboxingEveryThread {
    fn drop(&mut self) {
        EVERY_THREAD_SANDBOXING.fetch_sub(1, core::sync::atomic::Ordering::SeqCst);
    }
}

/// Whether a filter the program installed applies to every thread of the process, the
/// runtime's own included (`EVERY_THREAD_FILTERED`).
pub fn every_thread_sandboxed() -> bool {
    EVERY_THREAD_FILTERED.load(core::sync::atomic::Ordering::Relaxed)
}

/// The calling thread's state.
#[inline(always)]
pub fn current() -> &'static mut Thread {
    let p: *mut Thread;
    unsafe {
        asm!("mov {}, gs:[0]", out(reg) p, options(nostack, readonly, preserves_flags));
        &mut *p
    }
}

/// Creates the state of a new thread (or of a new process's only thread) and points GS at it.
pub fn start_thread() -> &'static mut Thread {
    start_thread_in(None)
}

/// `start_thread` with the state in `area` (zeroed, THREAD_SIZE bytes) when given, else in a
/// new mapping.
pub fn start_thread_in(area: Option<*mut u8>) -> &'static mut Thread {
    let page = area.or_else(|| sys::map_anon(THREAD_SIZE));
    let t = page.unwrap_or_else(|| sys::die(&[b"out of memory for a thread"])) as *mut Thread;
    unsafe {
        (*t).self_ptr = t;
        (*t).owned = area.is_none();
        (*t).rt_sp = t as usize + THREAD_SIZE;
        // A guard page between the state and the stack: an overflow faults instead of
        // overwriting the state.
        syscall3(MPROTECT, t as usize + PAGE, PAGE, PROT_NONE);
        (*t).tid = sys::gettid();
        (*t).pid = sys::getpid();
        (*t).slots = [u32::MAX; MAX_DEPTH];
        (*t).depth = 0;
        (*t).prof = crate::profile::claim_thread_block((*t).tid);
        set_gs_base(t as usize);
        &mut *t
    }
}

/// Whether the kernel lets user space write GS's base itself (HWCAP2_FSGSBASE in the auxiliary
/// vector, read at start by `learn_auxv`).
static FSGSBASE: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
const AT_HWCAP2: usize = 26;
const HWCAP2_FSGSBASE: usize = 2;

/// Reads what the runtime needs of the kernel's auxiliary vector at `auxv`.
pub unsafe fn learn_auxv(mut auxv: *const usize) {
    while *auxv != 0 {
        if *auxv == AT_HWCAP2 {
            FSGSBASE.store(*auxv.add(1) & HWCAP2_FSGSBASE != 0, core::sync::atomic::Ordering::Relaxed);
        }
        auxv = auxv.add(2);
    }
}

/// Points GS at thread state `t`: with wrgsbase where the kernel allows it, which makes no call
/// (a new thread of a sandboxed process runs under the program's filter, and Chromium's lets
/// arch_prctl set FS only: the runtime's ARCH_SET_GS went to the program's crash handler).
fn set_gs_base(t: usize) {
    if FSGSBASE.load(core::sync::atomic::Ordering::Relaxed) {
        unsafe { asm!("wrgsbase {}", in(reg) t, options(nostack, preserves_flags)) };
    } else {
        unsafe { syscall3(ARCH_PRCTL, ARCH_SET_GS, t, 0) };
    }
}

/// After fork: the copied Thread now belongs to a new process with one thread (its delegated
/// calls and slots: `delegate::child_after_fork`).
pub fn adopt_after_fork() -> &'static mut Thread {
    let t = current();
    t.tid = sys::gettid();
    t.pid = sys::getpid();
    // The child's delegates will be its own, started from it, in its namespaces.
    t.apart = false;
    t.prof = crate::profile::claim_thread_block(t.tid);
    t
}
