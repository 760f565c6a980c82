//! The process family: clone, fork, execve, exit, and the calls that would reveal the runtime.
//! clone/clone3/fork/vfork: every new thread and process arms SUD before running program code;
//! execve re-enters the runtime, so interception survives exec; calls whose answers would
//! otherwise show the runtime instead of the program (readlink and open of /proc/self/exe) are answered.

use crate::env;
use crate::exe::exe;
use crate::placement::{self, Key};
use crate::sigframe::{self, gregs, GREGS_OFF, KERNEL_UCONTEXT_SIZE, NGREG, REG_RAX, REG_RSP, SIGINFO_SIZE, UC_STACK_OFF};
use coreplane_runtime::elf;
use crate::sys::{self, *};
use crate::{app_threads, delegate, profile, sud, thread};
use core::arch::global_asm;
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Exit-code marker in a profile: this image was replaced by execve.
pub const EXEC_MARKER: u64 = 1 << 32;

/// What a new thread or process needs to resume the program after clone.
#[repr(C)]
struct ChildStart {
    regs: [u64; NGREG],
    stack: u64,
    flags: u64,
    key: Key,
    /// A vfork child's own memory (`VforkBlock`), or 0.
    vfork_block: usize,
    /// The creator is under a seccomp filter of the program's, which the child inherits, and
    /// whether the program installed it (`Thread::is_sandboxed`).
    filtered: bool,
    sandboxed: bool,
    /// The new thread's namespaces, filesystem context or file table are not the delegates'
    /// (`child_apart`).
    apart: bool,
    /// The program's FPU control (MXCSR, then the x87 control word) at its clone, which a new
    /// thread or process inherits natively; the runtime's handler ran with the default ones.
    fpu_control: [u32; 2],
    /// Its PKRU (protection keys' rights), which a new thread inherits too; None without keys.
    pkru: Option<u32>,
}

global_asm!(
    // coreplane_clone(flags, child_sp, ptid, ctid, tls) and coreplane_clone3(args, size)
    // (stack + stack_size = child_sp): the child starts on child_sp, where its ChildStart
    // lies, and calls coreplane_child_entry(child_sp).
    ".globl coreplane_clone",
    "coreplane_clone:",
    "mov r10, rcx",
    "mov eax, 56",
    "jmp 3f",
    ".globl coreplane_clone3",
    "coreplane_clone3:",
    "mov eax, 435",
    "3:",
    "syscall",
    "test rax, rax",
    "jnz 2f",
    "mov rdi, rsp",
    "call coreplane_child_entry",
    "ud2",
    "2:",
    "ret",
    // coreplane_vfork_clone(flags, child_sp, ptid, ctid, tls, frame): clone from the copied
    // signal frame's ucontext `frame` as the stack, the child starting on child_sp as above; the
    // parent puts the result in the frame's rax and returns to the program from it: by hand
    // where it may (`sigframe::return_by_hand`, on a sandboxed thread), else with rt_sigreturn.
    ".globl coreplane_vfork_clone",
    "coreplane_vfork_clone:",
    "mov rsp, r9",
    "mov r10, rcx",
    "mov eax, 56",
    "syscall",
    "test rax, rax",
    "jnz 5f",
    "mov rdi, rsp",
    "call coreplane_child_entry",
    "ud2",
    "5:",
    "mov [rsp + {frame_rax}], rax",
    "mov rdi, rsp",
    "call coreplane_vfork_parent_returns",
    "mov eax, 15",
    "syscall",
    "ud2",
    // coreplane_resume(regs, stack, fpu_control): the program's registers at its clone, rax = 0,
    // and its MXCSR and x87 control word.
    ".globl coreplane_resume",
    "coreplane_resume:",
    "ldmxcsr [rdx]",
    "fldcw [rdx + 4]",
    "mov rsp, rsi",
    "mov r8, [rdi + 0]",
    "mov r9, [rdi + 8]",
    "mov r10, [rdi + 16]",
    "mov r12, [rdi + 32]",
    "mov r13, [rdi + 40]",
    "mov r14, [rdi + 48]",
    "mov r15, [rdi + 56]",
    "mov rsi, [rdi + 72]",
    "mov rbp, [rdi + 80]",
    "mov rbx, [rdi + 88]",
    "mov rdx, [rdi + 96]",
    "mov r11, [rdi + 128]",
    "mov rdi, [rdi + 64]",
    "xor eax, eax",
    "jmp r11",
    frame_rax = const GREGS_OFF + REG_RAX * 8,
);

extern "C" {
    fn coreplane_clone(flags: u64, child_sp: usize, ptid: usize, ctid: usize, tls: usize) -> isize;
    fn coreplane_clone3(args: *const u64, size: usize) -> isize;
    fn coreplane_resume(regs: *const u64, stack: u64, fpu_control: *const [u32; 2]) -> !;
    fn coreplane_vfork_clone(flags: u64, child_sp: usize, ptid: usize, ctid: usize, tls: usize, frame: usize) -> !;
}

/// The parent of a stackless vfork returns to the program from its frame's copy `uc` (the
/// child has exec'd or exited): by hand where it may; returns where it may not.
#[no_mangle]
extern "C" fn coreplane_vfork_parent_returns(uc: *mut u8) {
    sigframe::return_by_hand(uc);
}

/// First code of every thread or process created with a new stack.
#[no_mangle]
extern "C" fn coreplane_child_entry(start: *const ChildStart) -> ! {
    let start = unsafe { &*start };
    if start.flags & CLONE_VM == 0 {
        // On the stack it lends the child next, not on the program's, which may be one page
        // (the profile's new file alone takes a 4 KiB path there).
        extern "C" fn after_fork_at(key: usize) {
            after_fork(unsafe { &*(key as *const Key) }, false);
        }
        let top = core::ptr::addr_of!(LENT_STACK) as usize + LENT_STACK_SIZE;
        sys::call_on(top, after_fork_at, &start.key as *const Key as usize);
        lend_signal_stack(thread::current());
    } else {
        let block = VforkBlock::at(start.vfork_block);
        let t = thread::start_thread_in(block.as_ref().map(VforkBlock::thread_page));
        // A process sharing its parent's memory (posix_spawn, vfork with a stack) shares the
        // delegate pool too, but not the file table: it makes its calls itself until it execs.
        t.local_only = start.flags & CLONE_THREAD == 0;
        t.apart = start.apart;
        if start.filtered {
            t.now_filtered(false, start.sandboxed);
            crate::filter_reaper::adopt(t);
        }
        if let Some(b) = block {
            t.lent_stack = b.lend_signal_stack();
        }
        placement::adopt(&mut t.place, &start.key, 0);
    }
    sud::arm_thread();
    if let Some(pkru) = start.pkru {
        // Last: the runtime's own memory is all key 0, which a program may close too.
        unsafe { core::arch::asm!("wrpkru", in("eax") pkru, in("ecx") 0, in("edx") 0, options(nostack, preserves_flags)) };
    }
    unsafe { coreplane_resume(start.regs.as_ptr(), start.stack, &start.fpu_control) }
}

const LENT_STACK_SIZE: usize = 64 * 1024;
/// A signal stack for a child process started on a stack of the program's (clone with a stack,
/// without CLONE_VM), which may be a single page (strace's clone-flags and ioctl_nsfs): natively
/// its calls need no room there, but each of its dispatch traps puts a frame of ~7 KB on the
/// stack (the kernel's, with the xsave area, then the runtime's handler), and the child died of
/// SIGSEGV. Every such child has its own copy of this memory, and runs its set-up on it first.
#[repr(C, align(16))]
struct LentStack([u8; LENT_STACK_SIZE]);
static mut LENT_STACK: LentStack = LentStack([0; LENT_STACK_SIZE]);

/// The kernel's stack_t.
#[repr(C)]
struct SignalStack {
    sp: usize,
    flags: i32,
    size: usize,
}

/// Gives `t`, a child process on a stack of the program's, the runtime's signal stack for its
/// traps, unless the program gave the thread one (inherited from its parent). SS_AUTODISARM: the
/// kernel disarms it while a handler runs on it, so the program may set a stack of its own then;
/// the program never sees it (`sigaltstack_lent`).
fn lend_signal_stack(t: &mut thread::Thread) {
    let mut now = SignalStack { sp: 0, flags: 0, size: 0 };
    unsafe { syscall3(SIGALTSTACK, 0, &mut now as *mut SignalStack as usize, 0) };
    if now.flags & SS_DISABLE == 0 {
        return;
    }
    let lent = SignalStack { sp: core::ptr::addr_of!(LENT_STACK) as usize, flags: SS_AUTODISARM, size: LENT_STACK_SIZE };
    t.lent_stack = unsafe { syscall3(SIGALTSTACK, &lent as *const SignalStack as usize, 0, 0) } == 0;
}

/// sigaltstack(2) trapped on the program's own signal stack (the runtime's handler is SA_ONSTACK)
/// while the program was not on it, which natively may change the stack and shows it not in use,
/// is made from the program's stack, below its stack pointer and red zone (where it would have
/// been made), since from the handler the kernel would refuse a change (EPERM) and show the stack
/// in use (SS_ONSTACK, which natively means the program is on it). Rust's main thread disables its signal
/// stack, then unmaps it, at exit: the runtime then ran on unmapped memory. (It was made from
/// below the runtime stack's rt_sp, inside the frames of a fast-path call in progress when a
/// handler run for that call made it: found in review.)
/// The stack to make it from; None where the call is not such a call (the program on its stack,
/// which natively is refused too, or the handler elsewhere).
pub fn sigaltstack_needs_other_stack(uc: *mut u8) -> Option<usize> {
    crate::program_signal::trap_borrows_signal_stack(uc)?;
    Some((gregs(uc)[REG_RSP] as usize - 256) & !15)
}

/// sigaltstack(2) made on `stack` (`sigaltstack_needs_other_stack`) for the trap with frame
/// `uc`. The old stack it shows is the one the frame saved where the program set it with
/// SS_AUTODISARM: the kernel disarmed it while the trap's handler runs there.
pub fn sigaltstack_on(stack: usize, uc: *mut u8, a: &[usize; 6]) -> isize {
    let saved = unsafe { *(uc.add(UC_STACK_OFF) as *const [usize; 3]) };
    let r = sys::syscall_on(stack, SIGALTSTACK, a[0], a[1]);
    if r == 0 && a[1] != 0 && saved[1] as i32 & SS_AUTODISARM != 0 {
        let bytes = unsafe { core::slice::from_raw_parts(saved.as_ptr() as *const u8, 24) };
        if !thread::current().write_program(a[1], bytes) {
            return -EFAULT;
        }
    }
    r
}

/// sigaltstack(2) on a thread with the runtime's signal stack: the program sees none (as it had
/// none) until it sets its own, which then replaces the runtime's.
pub fn sigaltstack_lent(a: &[usize; 6]) -> isize {
    let t = thread::current();
    if a[0] != 0 {
        let r = crate::program_signal::sets_signal_stack(a[0], || unsafe { syscall3(SIGALTSTACK, a[0], 0, 0) });
        if r != 0 {
            return r;
        }
        t.lent_stack = false;
    }
    let none = SignalStack { sp: 0, flags: SS_DISABLE, size: 0 };
    let bytes = unsafe { core::slice::from_raw_parts(&none as *const SignalStack as *const u8, core::mem::size_of::<SignalStack>()) };
    if a[1] != 0 && !t.write_program(a[1], bytes) {
        return -EFAULT;
    }
    0
}

/// The memory of a child that runs in its parent's memory until it execs or exits
/// (CLONE_VM|CLONE_VFORK with a stack: glibc's posix_spawn, so every Rust `Command`), mapped by
/// the parent before the clone and unmapped by it once the clone returns, when the child no
/// longer uses it: its Thread mapping (the state and the runtime stack), then a signal stack. The kernel keeps the parent's signal
/// stack for such a child (it clears it only for CLONE_VM without CLONE_VFORK), and the parent's
/// trap for this very clone lies on it, suspended: the child's own traps there overwrote that
/// frame and the parent returned through it (SIGSEGV in hyperfine, `fd -x`; Rust gives every
/// thread a signal stack). Its Thread mapping was also never freed: one mapping per spawn.
/// A stackless vfork's block (`stackless_vfork`) has two more areas after those: the child's
/// stack until it resumes the program, and the copy of the parent's trap frame.
struct VforkBlock(usize);

/// Room for the child's start in a stackless vfork's block, and for the parent's frame copy
/// (the ucontext and siginfo, and the FPU state: 2.7 KB with AVX-512, 11 KB with AMX tiles).
const VFORK_CHILD_STACK: usize = 32 * 1024;
const VFORK_FRAME_AREA: usize = 32 * 1024;

impl VforkBlock {
    const SIZE: usize = thread::THREAD_SIZE + LENT_STACK_SIZE + VFORK_CHILD_STACK + VFORK_FRAME_AREA;

    fn map() -> Option<VforkBlock> {
        sys::map_anon(Self::SIZE).map(|p| VforkBlock(p as usize))
    }

    fn at(addr: usize) -> Option<VforkBlock> {
        (addr != 0).then_some(VforkBlock(addr))
    }

    fn thread_page(&self) -> *mut u8 {
        self.0 as *mut u8
    }

    /// Makes the block's stack the calling child's signal stack (SS_AUTODISARM, as `lend_signal_stack`).
    fn lend_signal_stack(&self) -> bool {
        let lent = SignalStack { sp: self.0 + thread::THREAD_SIZE, flags: SS_AUTODISARM, size: LENT_STACK_SIZE };
        unsafe { syscall3(SIGALTSTACK, &lent as *const SignalStack as usize, 0, 0) == 0 }
    }

    fn unmap(self) {
        self.take_leftovers();
        unsafe { syscall3(MUNMAP, self.0, Self::SIZE, 0) };
    }

    /// Unmaps what the block's last child, now exec'd or exited, left in the memory it shared
    /// with its parent: the argument vector of its exec and the block of its own vforks. A shell
    /// grew by 4 KiB with every command it ran (2000 commands of dash: +8 MiB).
    fn take_leftovers(&self) {
        let child = unsafe { &mut *(self.thread_page() as *mut thread::Thread) };
        if child.exec_buffer[0] != 0 {
            give_exec_buffer(core::mem::take(&mut child.exec_buffer));
        }
        if child.vfork_block != 0 {
            VforkBlock(core::mem::take(&mut child.vfork_block)).unmap();
        }
    }

    fn child_stack_top(&self) -> usize {
        self.0 + thread::THREAD_SIZE + LENT_STACK_SIZE + VFORK_CHILD_STACK
    }

    /// Copies the trap's signal frame at `uc` into the frame area: the ucontext, the siginfo after
    /// it, and the FPU state its fpregs points to (64-byte aligned, as xrstor needs), with fpregs
    /// pointing to the copy. The copy's ucontext address (rt_sigreturn's stack pointer), or None
    /// where the FPU state does not fit.
    unsafe fn copy_frame(&self, uc: *mut u8) -> Option<usize> {
        let area = self.child_stack_top();
        let copy = area + 64;
        let fp = sigframe::fpstate(uc);
        let fp_copy = (copy + KERNEL_UCONTEXT_SIZE + SIGINFO_SIZE + 63) & !63;
        if fp_copy + fp.map_or(0, |(_, size)| size) > area + VFORK_FRAME_AREA {
            return None;
        }
        sigframe::copy_frame(uc, copy, fp_copy);
        Some(copy)
    }
}

/// In a child process with its own copy of memory: own profile, its clone-tree name. `in_call`:
/// the child goes on in the runtime call that forked (`fork_here`), not afresh on a stack of its
/// own (`delegate::child_after_fork`).
fn after_fork(key: &Key, in_call: bool) {
    crate::program_sud::after_fork(thread::current());
    sys::forget_runtime_threads();
    // Locks another thread of the parent held at the fork (a clone with its own stack and
    // memory does not pass through fork_here) are free: no thread here holds them.
    crate::rewrite_lock::after_fork(false, true);
    crate::memsvc::child_after_fork();
    profile::reopen_after_fork(thread::current().calls_may_kill());
    let t = thread::adopt_after_fork();
    crate::delegate::child_after_fork(t, in_call);
    app_threads::start(t);
    placement::adopt(&mut t.place, key, 0);
}

/// Places a ChildStart below `stack_top` and returns the child's initial stack pointer; the
/// child resumes the program on `program_sp` (`stack_top`, but for a stackless vfork).
fn prepare_child(uc: *mut u8, stack_top: u64, program_sp: u64, flags: u64, vfork_block: &Option<VforkBlock>) -> usize {
    let g = gregs(uc);
    let sp = ((stack_top as usize) - core::mem::size_of::<ChildStart>()) & !15;
    let start = sp as *mut ChildStart;
    unsafe {
        (*start).regs.copy_from_slice(&g[..NGREG]);
        (*start).stack = program_sp;
        (*start).flags = flags;
        (*start).key = placement::child_key(&mut thread::current().place);
        (*start).vfork_block = vfork_block.as_ref().map_or(0, |b| b.0);
        (*start).filtered = thread::current().filtered;
        (*start).sandboxed = thread::current().sandboxed;
        (*start).apart = child_apart(flags);
        (*start).fpu_control = sigframe::fpu_control(uc);
        (*start).pkru = sigframe::pkru_of(uc);
    }
    sp
}

/// A child that runs in its parent's memory until it execs or exits gets a `VforkBlock`.
fn vfork_block(flags: u64) -> Option<VforkBlock> {
    if flags & (CLONE_VM | CLONE_VFORK | CLONE_THREAD) == CLONE_VM | CLONE_VFORK {
        VforkBlock::map()
    } else {
        None
    }
}

/// A fork-like call (no new stack): the child returns here, inside the trap, then re-arms.
/// Signals are blocked from the fork until the child has made its copy of the runtime its own:
/// the trap's handler lets the program's signals in, and a handler that ran in the child before
/// `after_fork` delegated its calls to its parent's pool, as the parent's thread, and waited for
/// good (`mksh -c 'sleep 5 & kill $!'` under `--vdso intercept --delegate all`, 16 of 30 runs).
fn fork_here(nr: usize, a: &[usize; 6]) -> isize {
    crate::delegate::settle_before_fork(thread::current());
    let key = placement::child_key(&mut thread::current().place);
    let taken = crate::rewrite_lock::before_fork();
    let pool_taken = crate::memsvc::before_fork();
    let mask = sys::block_all_but_sigsys();
    let r = unsafe { syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
    crate::rewrite_lock::after_fork(taken, r == 0);
    if r != 0 {
        crate::memsvc::after_fork_parent(pool_taken);
    }
    if r == 0 {
        after_fork(&key, true);
        sud::arm_thread();
    }
    sys::set_mask(mask);
    r
}

/// clone(2). A stackless CLONE_VM|CLONE_VFORK is a vfork (`stackless_vfork`); other stackless
/// clones that share memory become a plain fork.
pub fn clone(uc: *mut u8, a: &[usize; 6], bounced: bool) -> isize {
    let mut flags = a[0] as u64;
    let stack = a[1] as u64;
    if stack == 0 {
        if flags & (CLONE_VM | CLONE_VFORK | CLONE_THREAD) == CLONE_VM | CLONE_VFORK && !bounced {
            stackless_vfork(uc, flags, a[2], a[3], a[4]);
        }
        if flags & CLONE_VM != 0 {
            flags &= !(CLONE_VM | CLONE_VFORK);
        }
        return fork_here(CLONE, &[flags as usize, 0, a[2], a[3], a[4], a[5]]);
    }
    let block = vfork_block(flags);
    let sp = prepare_child(uc, stack, stack, flags, &block);
    let r = counted_clone(flags, || unsafe { coreplane_clone(flags, sp, a[2], a[3], a[4]) });
    if let Some(b) = block {
        b.unmap(); // the child has exec'd or exited (or was never made)
    }
    r
}

/// Runs `clone` (with a stack of its own) with the new thread counted among the program's.
fn counted_clone(flags: u64, clone: impl FnOnce() -> isize) -> isize {
    let counted = app_threads::before_clone(thread::current(), flags);
    // A new process is copied under the rewrite lock, as in fork_here: with no rewrite and no
    // shrink of the profile's mapping half-done (the child starts in coreplane_child_entry,
    // which frees the lock there).
    let new_process = flags & CLONE_VM == 0;
    let taken = new_process && crate::rewrite_lock::before_fork();
    let r = clone();
    if new_process {
        crate::rewrite_lock::after_fork(taken, false);
    }
    if r < 0 && counted {
        app_threads::clone_failed();
    }
    r
}

/// clone3(2): like clone, with the stack given as base and size. Its arguments are read as
/// the kernel reads them, with its checks in its order: a size beyond a page (E2BIG) or below
/// the first version's (EINVAL), an unreadable struct (EFAULT), bytes beyond the fields this
/// kernel knows that are not zero (E2BIG).
pub fn clone3(uc: *mut u8, a: &[usize; 6]) -> isize {
    const KNOWN: usize = 88;
    if a[1] > PAGE {
        return -E2BIG;
    }
    if a[1] < 64 {
        return -EINVAL;
    }
    let size = a[1].min(KNOWN);
    let t = thread::current();
    // In order and in pieces within a page, as the kernel checks them (a non-zero byte before an
    // unreadable page is E2BIG), and small: the trap may run on a small signal stack.
    let mut piece = [0u8; 64];
    let mut at = size;
    while at < a[1] {
        let part = &mut piece[..(a[1] - at).min(64).min(PAGE - (a[0] + at) % PAGE)];
        if !t.read_program(a[0] + at, part) {
            return -EFAULT;
        }
        if part.iter().any(|b| *b != 0) {
            return -E2BIG;
        }
        at += part.len();
    }
    let mut args = [0u64; 11];
    let bytes = unsafe { core::slice::from_raw_parts_mut(args.as_mut_ptr() as *mut u8, size) };
    if !t.read_program(a[0], bytes) {
        return -EFAULT;
    }
    let (flags, stack, stack_size) = (args[0], args[5], args[6]);
    if !clone3_args_valid(flags, args[4], stack, stack_size) {
        return -EINVAL;
    }
    if stack == 0 {
        if flags & CLONE_VM != 0 {
            args[0] &= !(CLONE_VM | CLONE_VFORK);
        }
        return fork_here(CLONE3, &[args.as_ptr() as usize, size, 0, 0, 0, 0]);
    }
    let block = vfork_block(flags);
    let sp = prepare_child(uc, stack + stack_size, stack + stack_size, flags, &block);
    args[6] = sp as u64 - stack;
    let r = counted_clone(flags, || unsafe { coreplane_clone3(args.as_ptr(), size) });
    if let Some(b) = block {
        b.unmap(); // the child has exec'd or exited (or was never made)
    }
    r
}

/// The kernel's first checks of clone3's arguments (copy_clone_args_from_user and
/// clone3_args_valid), made before the runtime writes the child's start on its stack: an exit
/// signal that is no signal, flag bits clone3 does not know, a stack without a size or a size
/// without a stack, a stack beyond user space. The kernel's other checks come with the call.
fn clone3_args_valid(flags: u64, exit_signal: u64, stack: u64, stack_size: u64) -> bool {
    const KNOWN_FLAGS: u64 = 0xffff_ffff | 1 << 32 /* CLONE_CLEAR_SIGHAND */ | 1 << 33 /* CLONE_INTO_CGROUP */;
    exit_signal <= 64
        && flags & !KNOWN_FLAGS == 0
        && (stack == 0) == (stack_size == 0)
        && stack.checked_add(stack_size).is_some_and(|end| end <= TASK_SIZE_MAX)
}

/// fork(2).
pub fn fork() -> isize {
    fork_here(FORK, &[0; 6])
}

/// vfork(2) (`stackless_vfork`; where it cannot be, a fork). `bounced`: the call came from a
/// rewritten site through the trap gadget, whose return address on the stack the child would pop
/// and overwrite before the parent pops it.
pub fn vfork(uc: *mut u8, bounced: bool) -> isize {
    if !bounced {
        stackless_vfork(uc, CLONE_VM | CLONE_VFORK | SIGCHLD as u64, 0, 0, 0);
    }
    fork()
}

/// A vfork child without a stack of its own (vfork(2): dash's and CPython's subprocesses) runs on
/// its parent's stack, as natively: no copy of the parent's memory is made, nor torn down at its
/// exec (as a fork, ≈ 0.2 ms a process here). Below the program's stack pointer lies the trap's
/// signal frame and the handler's own, which the child's code overwrites while the parent waits;
/// so the parent makes the clone from a copy of its frame in its `VforkBlock` and returns to the
/// program from that copy (rt_sigreturn) with the clone's result, never to the handler. The child
/// starts in the block, then resumes the program on the parent's stack pointer. Returns only
/// where it cannot be done: a block that cannot be mapped, an FPU frame larger than the block
/// holds.
fn stackless_vfork(uc: *mut u8, flags: u64, ptid: usize, ctid: usize, tls: usize) {
    let t = thread::current();
    let g = gregs(uc);
    if t.vfork_block == 0 {
        match VforkBlock::map() {
            Some(b) => t.vfork_block = b.0,
            None => return,
        }
    }
    let block = VforkBlock(t.vfork_block);
    block.take_leftovers();
    let Some(frame) = (unsafe { block.copy_frame(uc) }) else { return };
    // The child's Thread is made afresh in the block at each vfork.
    unsafe { core::ptr::write_bytes(block.thread_page(), 0, core::mem::size_of::<thread::Thread>()) };
    let child_sp = prepare_child(uc, block.child_stack_top() as u64, g[REG_RSP], flags, &Some(VforkBlock(block.0)));
    unsafe { coreplane_vfork_clone(flags, child_sp, ptid, ctid, tls, frame) }
}

/// What `precheck` found at the path an execve names.
enum Image {
    /// An x86-64 ELF program, open for the loader.
    Elf(usize),
    /// A #! script whose interpreter the caller may execute.
    Script,
    /// A file the runtime cannot load as the kernel would: an ELF file of another kind (32-bit,
    /// another machine, malformed), one the caller may execute but not read, or one whose exec
    /// gives privileges (set-user-ID or set-group-ID of another owner, file capabilities). The
    /// kernel execs it as it is, without the runtime: it fails as natively (ENOEXEC), or runs,
    /// uninterposed, as it would natively (a 32-bit program exited 127, a mode-0711 one was
    /// refused with EACCES, and ping, su or passwd ran without their privileges).
    Foreign,
}

/// Fails like the kernel would, before the runtime is re-executed for `path`, with the caller's
/// credentials as they are before the exec (effective ids and capabilities, as execve checks
/// them; access(2) would use the real ids and drop the capabilities): not a regular file
/// (EACCES), no format the kernel knows (ENOEXEC), a script's interpreter or a program's
/// dynamic loader missing (ENOENT; the new image exited 127 instead), a script the interpreter
/// could not open (`inaccessible`, see `execveat`). An ELF program stays open:
/// the loader maps it from that descriptor, since after the exec the credentials may no longer
/// reach it (setpriv and su keep CAP_DAC_OVERRIDE up to the execve of a program in a directory
/// only root may search, then drop it).
fn precheck(path: *const u8, inaccessible: bool) -> Result<Image, isize> {
    let fd = sys::open(path, O_RDONLY | O_CLOEXEC);
    if fd == -EACCES && access_x(path) == 0 {
        return Ok(Image::Foreign); // executable, not readable: the kernel decides
    }
    if fd < 0 {
        return Err(fd);
    }
    let fd = fd as usize;
    let mut st = [0u32; 36];
    let regular = sys::fstat(fd, st.as_mut_ptr().cast()) == 0 && st[6] & 0o170000 == 0o100000;
    if regular && gives_privileges(fd, &st) {
        unsafe { syscall3(CLOSE, fd, 0, 0) };
        return match access_x(path) {
            denied if denied < 0 => Err(denied),
            _ => Ok(Image::Foreign),
        };
    }
    let mut head = [0u8; 256];
    let n = unsafe { syscall6(PREAD64, fd, head.as_mut_ptr() as usize, head.len(), 0, 0, 0) }.max(0) as usize;
    let head = &head[..n];
    let verdict = match access_x(path) {
        denied if denied < 0 => Err(denied),
        _ if !regular => Err(-EACCES),
        _ if head.starts_with(b"\x7fELF") => match loadable_elf(fd, head) {
            Ok(true) => return Ok(Image::Elf(fd)),
            Ok(false) => Ok(Image::Foreign),
            Err(e) => Err(e),
        },
        _ if head.starts_with(b"#!") => script_interpreter(head, inaccessible).map(|_| Image::Script),
        _ => Err(-ENOEXEC),
    };
    unsafe { syscall3(CLOSE, fd, 0, 0) };
    verdict
}

/// Whether the exec of the regular file open as `fd` (its struct stat `st`) would give the
/// caller privileges (`coreplane_runtime::exec::privileges`); not under no_new_privs, where the
/// kernel gives none.
fn gives_privileges(fd: usize, st: &[u32; 36]) -> bool {
    const PR_GET_NO_NEW_PRIVS: usize = 39;
    const FGETXATTR: usize = 193;
    const GETEGID: usize = 108;
    let (euid, egid) = unsafe { (syscall3(GETEUID, 0, 0, 0) as u32, syscall3(GETEGID, 0, 0, 0) as u32) };
    let caps = || unsafe { syscall6(FGETXATTR, fd, b"security.capability\0".as_ptr() as usize, 0, 0, 0, 0) } > 0;
    coreplane_runtime::exec::privileges(st[6], st[7], st[8], euid, egid, caps).is_some()
        && unsafe { syscall3(PRCTL, PR_GET_NO_NEW_PRIVS, 0, 0) } == 0
}

/// Whether the ELF file open as `fd`, whose first bytes are `head`, is one the runtime loads (a
/// 64-bit little-endian x86-64 executable or shared object, `elf::parse_ehdr`); Err where its
/// dynamic loader (PT_INTERP) cannot be opened, as the kernel fails it.
fn loadable_elf(fd: usize, head: &[u8]) -> Result<bool, isize> {
    let Ok(eh) = elf::parse_ehdr(head) else { return Ok(false) };
    let mut phdrs = [0u8; elf::PHDR_SIZE * 16];
    let len = (eh.phnum as usize * elf::PHDR_SIZE).min(phdrs.len());
    let got = unsafe { syscall6(PREAD64, fd, phdrs.as_mut_ptr() as usize, len, eh.phoff as usize, 0, 0) };
    for ph in phdrs[..got.max(0) as usize].chunks_exact(elf::PHDR_SIZE).map(elf::parse_phdr) {
        if ph.kind != elf::PT_INTERP {
            continue;
        }
        let mut interp = [0u8; 256];
        if ph.filesz < 2 || ph.filesz as usize > interp.len() {
            return Ok(false); // the kernel's own verdict
        }
        let size = ph.filesz as usize;
        if unsafe { syscall6(PREAD64, fd, interp.as_mut_ptr() as usize, size, ph.offset as usize, 0, 0) } != size as isize {
            return Ok(false);
        }
        interp[size - 1] = 0;
        let opened = sys::open(interp.as_ptr(), O_RDONLY | O_CLOEXEC);
        if opened < 0 {
            return Err(opened);
        }
        unsafe { syscall3(CLOSE, opened as usize, 0, 0) };
    }
    Ok(true)
}

/// The interpreter the #! line at the start of `head` names may be executed by the caller; else
/// the kernel's error for it (ENOENT where it does not exist, or where the script's path will be
/// `inaccessible` to it, which the kernel looks at first: binfmt_script's
/// BINPRM_FLAGS_PATH_INACCESSIBLE).
fn script_interpreter(head: &[u8], inaccessible: bool) -> Result<(), isize> {
    let mut interp = [0u8; 256];
    match elf::shebang_interpreter(head) {
        Some(name) if name.len() < interp.len() => interp[..name.len()].copy_from_slice(name),
        _ => return Err(-ENOEXEC),
    }
    if inaccessible {
        return Err(-ENOENT);
    }
    match access_x(interp.as_ptr()) {
        denied if denied < 0 => Err(denied),
        _ => Ok(()),
    }
}

/// Whether the caller may execute `path`, by its effective ids and capabilities
/// (faccessat2 with AT_EACCESS; before Linux 5.8, faccessat, by the real ids, as glibc falls back).
fn access_x(path: *const u8) -> isize {
    const FACCESSAT: usize = 269;
    const FACCESSAT2: usize = 439;
    const AT_EACCESS: usize = 0x200;
    let r = unsafe { syscall6(FACCESSAT2, AT_FDCWD as usize, path as usize, 1 /* X_OK */, AT_EACCESS, 0, 0) };
    if r == -ENOSYS { unsafe { syscall3(FACCESSAT, AT_FDCWD as usize, path as usize, 1) } } else { r }
}

/// Set when a thread of this process asked to be traced (see `traced`).
static UNINTERPOSED: AtomicBool = AtomicBool::new(false);

/// Whether a tracer is attached to the calling thread (TracerPid in /proc/thread-self/status):
/// a tracer that attached itself (strace's PTRACE_SEIZE) before the program's execve.
fn tracer_attached() -> bool {
    const FIELD: &[u8] = b"\nTracerPid:\t";
    let mut buf = [0u8; 2048];
    let Some(text) = sys::read_once(b"/proc/thread-self/status\0", &mut buf) else { return false };
    text.windows(FIELD.len()).position(|w| w == FIELD).is_some_and(|at| text.get(at + FIELD.len()) != Some(&b'0'))
}

/// ptrace(PTRACE_TRACEME) returned `result`. Once it succeeded the calling thread runs without
/// dispatch traps: its tracer would see each as a signal stop (a SIGSYS per trapped call, wait
/// status 0x1f7f) that the native program never has. Its calls reach the kernel as it made
/// them, all six arguments (the tracer may read them), even from sites rewritten for the fast
/// path, and the process's execve starts the new program without the runtime, as the
/// tracer means to trace that program (strace's own tests fork such tracees); so does the
/// execve of a thread a tracer attached to.
pub fn traced(result: isize) -> isize {
    if result == 0 {
        thread::current().traced = true;
        UNINTERPOSED.store(true, Relaxed);
        sud::disarm_thread();
    }
    result
}

/// execve(2): runs `coreplane-rt PATH ARGV...` instead, with the configuration restored in
/// the environment, so the new image is intercepted from its first instruction (the program
/// itself, without the runtime's entries in the environment, in a traced process).
pub fn execve(path: usize, argv: usize, envp: usize) -> isize {
    exec(path, argv, envp, false)
}

/// execve of `path`; where `inaccessible`, a script's interpreter could not open that path after
/// the exec (see `execveat`).
fn exec(path: usize, argv: usize, envp: usize, inaccessible: bool) -> isize {
    let t = thread::current();
    let mut head = [0u8; 32];
    let own = matches!(t.program_cstr(path, &mut head), Ok(name) if names_own_exe(name));
    let path = if own { exe().as_ptr() } else { path as *const u8 };
    let (image_fd, foreign) = match precheck(path, inaccessible) {
        Ok(Image::Elf(fd)) => (Some(fd), false),
        Ok(Image::Script) => (None, false),
        Ok(Image::Foreign) => (None, true),
        Err(e) => return e,
    };
    let (Some(na), Some(ne)) = (t.program_array_len(argv), t.program_array_len(envp)) else {
        return given_up(image_fd, -EFAULT);
    };
    let (argv, envp) = (argv as *const *const u8, envp as *const *const u8);
    let words = (2 + na.max(1) + 1) + (ne + 3);
    let mut task = [0u8; 96];
    placement::env_entry(&t.place, env::task_mark(t.is_sandboxed()), &mut task);
    let size = page_up(words * 8);
    let Some(buf) = take_exec_buffer(size) else { return given_up(image_fd, -ENOMEM) };
    t.exec_buffer = [buf as usize, size];
    // The new vector may fill a hole the program's pointers point into (strace's tests place
    // arguments before an unmapped page): natively the kernel finds nothing mapped there.
    let inside = |p: *const u8| (buf as usize..buf as usize + size).contains(&(p as usize));
    if inside(path) || (0..na).any(|i| inside(unsafe { *argv.add(i) })) || (0..ne).any(|i| inside(unsafe { *envp.add(i) })) {
        give_exec_buffer(core::mem::take(&mut t.exec_buffer));
        return given_up(image_fd, -EFAULT);
    }
    let buf = buf as *mut *const u8;
    unsafe {
        let mut w = 0;
        let mut push = |p: *const u8| {
            *buf.add(w) = p;
            w += 1;
            w
        };
        let interposed = !foreign && !UNINTERPOSED.load(Relaxed) && !tracer_attached();
        let runtime = if interposed { crate::exe::runtime_for_exec() } else { None };
        let profile_dir = if interposed { profile::dir_for_exec(t.pid) } else { None };
        let mut rt_name = [0u8; 48];
        if interposed {
            push(crate::exe::rt_argv0(image_fd, runtime, profile_dir, &mut rt_name).as_ptr());
            push(path);
        }
        for i in 0..na {
            push(*argv.add(i));
        }
        if na == 0 {
            push(b"\0".as_ptr()); // the kernel's argv[0] for an empty argv (Linux 5.18)
        }
        let env_start = push(core::ptr::null());
        program_env(t, envp, ne, |e| {
            push(e as *const u8);
        });
        if interposed {
            push(env::CONFIG_ENV);
            push(task.as_ptr());
        }
        push(core::ptr::null());
        // The thread's own block first: a vfork child's is in its parent's file, whose end it
        // leaves alone (and which would otherwise show it running until the parent ends).
        profile::end_thread(t.prof, t.calls_may_kill());
        profile::end_process(EXEC_MARKER, t.calls_may_kill(), t.pid);
        if let (true, Some(fd)) = (interposed, image_fd) {
            syscall3(FCNTL, fd, F_SETFD, 0);
        }
        let (args, env) = (buf as usize, buf.add(env_start) as usize);
        const AT_EMPTY_PATH: usize = 0x1000;
        let r = match (interposed, runtime) {
            // The runtime's own binary, where /proc may be missing (exe::adopt_runtime).
            (true, Some(fd)) => syscall6(EXECVEAT, fd, b"\0".as_ptr() as usize, args, env, AT_EMPTY_PATH, 0),
            // thread-self: /proc/self is the thread-group leader's, whose exe and fd table are
            // gone once it ended with exit(2) while this thread lives on (ENOENT).
            (true, None) => syscall3(EXECVE, b"/proc/thread-self/exe\0".as_ptr() as usize, args, env),
            (false, _) => syscall3(EXECVE, path as usize, args, env),
        };
        crate::exe::after_exec_failed(runtime);
        crate::exe::after_exec_failed(profile_dir);
        profile::end_process_undo(t.pid, t.prof);
        give_exec_buffer(core::mem::take(&mut t.exec_buffer));
        given_up(image_fd, r)
    }
}

/// Memory for an execve's new vectors, `size` bytes: mapped; or, where the process's address space
/// is over a limit the program has just lowered (`ulimit -v` in a shell whose memory pool reserved
/// more, under `--memory pool`: every command failed with ENOMEM), an area of the runtime's own,
/// one exec at a time.
fn take_exec_buffer(size: usize) -> Option<*mut u8> {
    sys::map_anon(size).or_else(|| {
        let free = size <= EXEC_AREA_SIZE && EXEC_AREA_BUSY.compare_exchange(false, true, core::sync::atomic::Ordering::Acquire, Relaxed).is_ok();
        free.then(|| core::ptr::addr_of_mut!(EXEC_AREA) as *mut u8)
    })
}

/// Gives back what `take_exec_buffer` gave, as [address, size].
fn give_exec_buffer([addr, size]: [usize; 2]) {
    if addr == core::ptr::addr_of!(EXEC_AREA) as usize {
        EXEC_AREA_BUSY.store(false, core::sync::atomic::Ordering::Release);
    } else if addr != 0 {
        unsafe { syscall3(MUNMAP, addr, size, 0) };
    }
}

const EXEC_AREA_SIZE: usize = 64 * 1024;
#[repr(C, align(4096))]
struct ExecArea([u8; EXEC_AREA_SIZE]);
static mut EXEC_AREA: ExecArea = ExecArea([0; EXEC_AREA_SIZE]);
static EXEC_AREA_BUSY: AtomicBool = AtomicBool::new(false);

/// Calls `keep` with each of the program's `n` environment entries at `envp`, in order, but the
/// runtime's own (COREPLANE_RT=, COREPLANE_TASK=), reading them as the kernel reads them: the
/// heads of 64 entries per process_vm_readv (one read per entry and name cost an exec from a
/// shell with 35 variables ≈ 100 µs). An entry whose head cannot be read (a string shorter than
/// the head before unmapped memory, or a bad address) is looked at alone.
unsafe fn program_env(t: &thread::Thread, envp: *const *const u8, n: usize, mut keep: impl FnMut(usize)) {
    const NAMES: [&[u8]; 2] = [coreplane_runtime::config::ENV_NAME, env::TASK_NAME];
    const HEAD: usize = 13; // "COREPLANE_RT=": no longer than any name and its '='
    let mut prefixes = [[0u8; 32]; 2];
    let lens = [0, 1].map(|k| sys::concat(&[NAMES[k], b"="], &mut prefixes[k]));
    let mut i = 0;
    while i < n {
        let chunk = (n - i).min(64);
        let mut addrs = [0usize; 64];
        for (j, a) in addrs[..chunk].iter_mut().enumerate() {
            *a = *envp.add(i + j) as usize;
        }
        let mut heads = [0u8; 64 * HEAD];
        let whole = t.read_program_heads(&addrs[..chunk], HEAD, &mut heads);
        for (j, &e) in addrs[..whole].iter().enumerate() {
            let head = &heads[j * HEAD..(j + 1) * HEAD];
            // A head the length of the name and '=' decides; a longer name is read whole.
            let own = (0..2).any(|k| head == &prefixes[k][..HEAD] && (lens[k] == HEAD || is_program_env(t, e, NAMES[k])));
            if !own {
                keep(e);
            }
        }
        if whole < chunk {
            let e = addrs[whole];
            if !NAMES.iter().any(|name| is_program_env(t, e, name)) {
                keep(e);
            }
        }
        i += (whole + 1).min(chunk);
    }
}

/// Whether the program's environment entry at `addr` is `name=...`, read as the kernel reads it
/// (a bad address is not, and the kernel fails the execve with EFAULT).
fn is_program_env(t: &thread::Thread, addr: usize, name: &[u8]) -> bool {
    let mut prefix = [0u8; 32];
    let n = sys::concat(&[name, b"="], &mut prefix);
    n == name.len() + 1 && t.program_starts_with(addr, &prefix[..n])
}

/// An execve that failed with `error`: the program's descriptor `precheck` opened is closed.
fn given_up(image_fd: Option<usize>, error: isize) -> isize {
    if let Some(fd) = image_fd {
        unsafe { syscall3(CLOSE, fd, 0, 0) };
    }
    error
}

/// execveat(2): resolved to a path, then as execve. A path relative to a close-on-exec descriptor
/// (or the descriptor itself) is one the kernel gives a script's interpreter as /dev/fd/N(/name),
/// which that interpreter cannot open: the kernel fails the exec of a script so with ENOENT, and
/// the caller may fall back (glibc's fexecve; the new image died instead).
pub fn execveat(a: &[usize; 6]) -> isize {
    let (dirfd, flags) = (a[0] as i32 as isize, a[4]);
    const AT_EMPTY_PATH: usize = 0x1000;
    let mut given = [0u8; 4096];
    let rel = match thread::current().program_cstr(a[1], &mut given) {
        Ok(rel) => rel,
        Err(e) => return e,
    };
    if dirfd == AT_FDCWD || rel.first() == Some(&b'/') {
        return execve(a[1], a[2], a[3]);
    }
    // The kernel's errors before the path is resolved, where the path under /proc said ENOENT
    // for a descriptor that is not open and ENOTDIR for an empty name without AT_EMPTY_PATH.
    if rel.is_empty() && flags & AT_EMPTY_PATH == 0 {
        return -ENOENT;
    }
    let cloexec = unsafe { syscall3(FCNTL, dirfd as usize, F_GETFD, 0) };
    if cloexec < 0 {
        return cloexec;
    }
    let mut full = [0u8; 4096];
    let mut b = [0u8; 20];
    let fd = sys::fmt_u64(dirfd as u64, &mut b);
    if rel.is_empty() {
        sys::concat(&[b"/proc/thread-self/fd/", fd], &mut full);
    } else {
        sys::concat(&[b"/proc/thread-self/fd/", fd, b"/", rel], &mut full);
    }
    exec(full.as_ptr() as usize, a[2], a[3], cloexec as usize & FD_CLOEXEC != 0)
}

/// readlink or readlinkat (`nr`, arguments `a`), made by `make`: of /proc/self/exe
/// (`names_own_exe`, from the current directory or an absolute path), the program, not the
/// runtime. That call is made into a buffer of the runtime's, for the kernel's checks of the path
/// and the size: the program's buffer gets the program's path alone, as many bytes as returned
/// (the runtime's longer path written there first left its tail past them). A path under
/// /proc/thread-self names the calling thread: `make` is told to make the call here (its second
/// argument; a delegate's tid was read). Every other readlink pays a comparison of its path's
/// first bytes.
pub fn readlink_self_exe(nr: usize, a: &[usize; 6], make: impl FnOnce(&[usize; 6], bool) -> isize) -> isize {
    let (path_at, buf_at) = if nr == READLINK { (0, 1) } else { (1, 2) };
    let from_cwd = nr == READLINK || a[0] as i32 as isize == AT_FDCWD;
    // Read as the kernel reads it: a path it cannot read is its EFAULT, not the runtime's fault.
    let mut head = [0u8; 32];
    let (own, here) = match thread::current().program_cstr(a[path_at], &mut head) {
        Ok(name) => (names_own_exe(name), names_thread_self(name)),
        Err(e) => (false, e == -ENAMETOOLONG && names_thread_self(&head)),
    };
    if !from_cwd || !own {
        return make(a, here);
    }
    let mut own = [0u8; 256];
    let mut args = *a;
    args[buf_at] = own.as_mut_ptr() as usize;
    args[buf_at + 1] = a[buf_at + 1].min(own.len());
    let result = make(&args, here);
    if result < 0 {
        return result;
    }
    let exe = exe();
    let n = exe.len().min(a[buf_at + 1]);
    if thread::current().write_program(a[buf_at], &exe[..n]) { n as isize } else { -EFAULT }
}

/// open, openat or openat2 (`nr`, arguments `a`) that the kernel answered with `fd`: one of
/// /proc/self/exe (`names_own_exe`) opened the runtime's binary, which is the process's
/// executable to the kernel; the program's is put on the same descriptor instead, opened with
/// the same flags (runc copies itself from there into a memfd; sha256sum /proc/self/exe and CPython reading it
/// give the program's bytes, checked in session 15).
/// Every other open pays a comparison of its path's first bytes.
pub fn open_self_exe(nr: usize, a: &[usize; 6], fd: isize) -> isize {
    if fd < 0 || !names_own_exe(opened_path(nr, a)) {
        return fd;
    }
    // openat2's flags are the first field of its open_how, which the kernel read too.
    let flags = match nr {
        OPEN => a[1],
        OPENAT => a[2],
        _ => (unsafe { *(a[2] as *const u64) }) as usize,
    } & !(O_CREAT | O_EXCL);
    let own = sys::open(exe().as_ptr(), flags);
    if own >= 0 {
        unsafe {
            syscall3(DUP3, own as usize, fd as usize, flags & O_CLOEXEC);
            syscall3(CLOSE, own as usize, 0, 0);
        }
    }
    fd
}

/// The start of the path of an opening call `nr` (open, openat, openat2) with `a` that
/// succeeded: the kernel read the string to its NUL, so up to that the memory is there and is
/// read in place, with no process_vm_readv (≈ 0.5 µs, a third of an open). At most 32 bytes:
/// enough for `names_own_exe` and `task_view::after_open`.
pub fn opened_path<'a>(nr: usize, a: &[usize; 6]) -> &'a [u8] {
    unsafe { accepted_path(if nr == OPEN { a[0] } else { a[1] }) }
}

/// The start of a path at `path` that a call which succeeded accepted (see `opened_path`).
pub unsafe fn accepted_path<'a>(path: usize) -> &'a [u8] {
    let p = path as *const u8;
    let mut n = 0;
    while n < 32 && *p.add(n) != 0 {
        n += 1;
    }
    core::slice::from_raw_parts(p, n)
}

/// Whether `path` names the process's executable link as a program would: /proc/self/exe,
/// /proc/thread-self/exe, or /proc/PID/exe with its own process id (a prefix of a longer path is not).
fn names_own_exe(path: &[u8]) -> bool {
    let Some(rest) = path.strip_prefix(b"/proc/") else { return false };
    let Some(dir) = rest.strip_suffix(b"/exe") else { return false };
    let mut b = [0u8; 20];
    dir == b"self" || dir == b"thread-self" || dir == sys::fmt_u64(thread::current().pid as u64, &mut b)
}

/// Whether `path` is /proc/thread-self or under it: it names the thread that makes the call.
pub fn names_thread_self(path: &[u8]) -> bool {
    path.strip_prefix(b"/proc/thread-self").is_some_and(|rest| rest.first().is_none_or(|&c| c == b'/'))
}

/// Whether `path`, under /proc/thread-self, opens a file outside /proc that the delegates
/// share with the calling thread (its descriptors, root, working directory, executable, mapped
/// files: the same file table, filesystem context and memory): such an open is the same from a
/// delegate, and undoing it closes the file, which dropped the process's POSIX locks on it, and
/// an O_CREAT|O_EXCL that created it was redone with EEXIST.
pub fn opens_shared_file(path: &[u8]) -> bool {
    const SHARED: [&[u8]; 6] = [b"fd", b"fdinfo", b"root", b"cwd", b"exe", b"map_files"];
    let Some(rest) = path.strip_prefix(b"/proc/thread-self/") else { return false };
    SHARED.contains(&rest.split(|&c| c == b'/').next().unwrap_or_default())
}

/// A call is about to run locally that the kernel allows only in a single-threaded process if
/// `needs_one_thread` (asked last, after the cheaper checks): the program's only thread retires
/// the delegates, the memory service's threads (they start again when next needed; a
/// pool-demand pool is filled by the kernel from then on) and the filter reaper, and pauses an MCP's monitor first
/// (dispatch resumes it after the call), since the kernel counts them as threads.
fn alone_for(needs_one_thread: impl FnOnce() -> bool) {
    let t = thread::current();
    let (delegates, monitor) = (delegate::has_delegates(t.pid), crate::mcp::monitoring(t.pid));
    // The memory service's scrubber and pool-demand's fault handler are threads too: with
    // them, unshare(CLONE_NEWUSER) failed with EINVAL (strace's *--pidns-translation tests
    // under pool-demand, whose handler runs from the start).
    let memory = crate::memsvc::has_scrubber();
    let reaper = crate::filter_reaper::running(t.pid);
    if t.depth == 0 && app_threads::alone(t) && (delegates || monitor || memory || reaper) && needs_one_thread() {
        if delegates {
            delegate::retire(t.pid);
        }
        crate::filter_reaper::retire(t.pid);
        if memory {
            crate::memsvc::retire();
        }
        crate::mcp::pause();
    }
}

/// What unshare(2) and setns(2) change for the calling thread alone, not its process: its
/// network, IPC, UTS, cgroup and mount namespaces, its filesystem context (root, cwd, umask) and
/// its file table. A delegate, another thread, kept the former ones: `ip -n NS link` listed the
/// host's interfaces. (A pid or time namespace is the caller's children's, which it makes itself;
/// a user namespace needs a single thread, `alone_for`.)
const APART: u64 = CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_NEWNS | CLONE_FS | CLONE_FILES;

/// unshare(2) of `flags` is about to run locally: the kernel refuses some flags in a process
/// with other threads, and the delegates must follow others (`leave_delegates`).
pub fn before_unshare(flags: usize) {
    const SINGLE_THREADED: u64 = CLONE_NEWUSER | CLONE_THREAD | CLONE_SIGHAND | CLONE_VM;
    alone_for(|| flags as u64 & SINGLE_THREADED != 0);
    leave_delegates(|| flags as u64);
}

/// setns(2) of `fd` with `nstype` is about to run locally: joining a user, mount or time
/// namespace is allowed only in a single-threaded process (nsenter --mount was EINVAL under
/// delegation until session 17), and the delegates must follow others (`leave_delegates`).
pub fn before_setns(fd: usize, nstype: usize) {
    // A user or time namespace needs a single thread (EINVAL, EUSERS), a mount namespace a
    // filesystem context no other thread shares (EINVAL: the delegates share the program's).
    const SINGLE_THREADED: u64 = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWTIME;
    alone_for(|| setns_types(fd, nstype) & SINGLE_THREADED != 0);
    leave_delegates(|| setns_types(fd, nstype));
}

/// The namespace types setns(2) of `fd` with `nstype` joins: nstype, or with nstype 0 the fd's
/// (NS_GET_NSTYPE; a pidfd names its types in nstype). Asked only where needed, last. A thread
/// under the program's seccomp filter asks nothing, for the filter would see the ioctl (one that
/// killed or refused it killed the program, or left the delegates, and setns of a mount
/// namespace failed with EINVAL, for its only thread after the others ended): every type is
/// assumed, which costs it nothing but the delegates, its calls being local.
pub fn setns_types(fd: usize, nstype: usize) -> u64 {
    const NS_GET_NSTYPE: usize = 0xb703;
    match nstype {
        0 if thread::current().is_filtered() => u64::MAX,
        0 => (unsafe { syscall3(IOCTL, fd, NS_GET_NSTYPE, 0) }).max(0) as u64,
        _ => nstype as u64,
    }
}

/// A call that may change the calling thread's `APART` context (of the `types` asked last) is
/// about to run: the program's only thread retires the delegates, so that the next delegated
/// call starts new ones from it, which share its new context (the rest of the runtime's threads
/// make none of the program's calls). A failed call leaves the thread as before: new delegates
/// start from it all the same.
fn leave_delegates(types: impl FnOnce() -> u64) {
    let t = thread::current();
    if t.depth == 0 && app_threads::alone(t) && delegate::has_delegates(t.pid) && types() & APART != 0 {
        delegate::retire(t.pid);
    }
}

/// unshare(2) or setns(2) that may change the calling thread's `APART` context (of the `types`
/// asked last) returned `r`. Where it did, and delegates made in the former context may still
/// serve the thread (it has company, the Go and CNI pattern of LockOSThread then unshare or
/// setns, or a delegate was in a call and could not be retired), its calls are made here from
/// then on, and those of the threads it creates (`child_apart`). A filtered thread's calls, and
/// its new threads', are made here already. Returns `r`.
pub fn after_apart(types: impl FnOnce() -> u64, r: isize) -> isize {
    let t = thread::current();
    if r == 0 && !t.is_filtered() && (delegate::has_delegates(t.pid) || !app_threads::alone(t)) && types() & APART != 0 {
        t.apart = true;
    }
    r
}

/// Whether a thread the current one creates with clone `flags` has namespaces, a filesystem
/// context or a file table other than the delegates': its creator's are, or the flags give it
/// new namespaces, or a filesystem context or file table of its own (clone's CLONE_FS and
/// CLONE_FILES share, where unshare's unshare).
fn child_apart(flags: u64) -> bool {
    const SHARED: u64 = CLONE_FS | CLONE_FILES;
    thread::current().apart || flags & APART & !SHARED != 0 || flags & SHARED != SHARED
}

/// A seccomp filter of the program's is about to be installed: on the calling thread, or on
/// every thread of the process (`everywhere`, SECCOMP_FILTER_FLAG_TSYNC). The runtime's own
/// threads must not carry it, since it was written for the program's calls and theirs differ.
/// Where the filter goes on every thread, or the caller is the program's only thread, the memory
/// service's threads end for good (a thread a filtered one creates carries its filter, so none
/// starts again: the program's threads zero freed pool pages themselves when they need them, and
/// the kernel fills a pool-demand pool), as does an MCP's monitor (its cores no longer follow the
/// MCP). Where the caller is the program's only thread, the delegates end too: its calls are
/// local from then on, as are those of every thread it creates, and a filter that kills the
/// thread (SECCOMP_RET_KILL_THREAD) must find it the process's last, as natively, for the
/// kernel to end the process (delegates kept it alive, and `coreplane run` waited for good).
/// Among other program threads, a delegate may be in one of their calls: the delegates stay
/// (with TSYNC, they carry the filter and wait for work that no longer comes, with futex, which
/// any filter a threaded program runs under allows, and, for their first idle millisecond,
/// sched_yield, which a filter might refuse: a difference that remains); a filter `prog` that
/// can kill its thread unseen starts `filter_reaper`, which ends the process when that thread
/// was the last.
pub fn before_filter(everywhere: bool, prog: usize) {
    let t = thread::current();
    let alone = t.depth == 0 && app_threads::alone(t);
    if everywhere || alone {
        crate::memsvc::retire();
        crate::mcp::pause();
    }
    if alone && delegate::has_delegates(t.pid) {
        delegate::retire(t.pid);
    }
    if !everywhere && !app_threads::alone(t) {
        crate::filter_reaper::before_filter(t, prog);
    }
    if crate::filter_prog::reads_instruction_pointer(t, prog) {
        crate::sud::filter_reads_ip();
    }
}

/// Seccomp strict mode for the calling thread, entered by call `nr` (seccomp(SET_MODE_STRICT)
/// or prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT)): from then on the kernel allows the thread
/// read, write, exit and rt_sigreturn only and kills it for any other call, the runtime's
/// included, and disables its rdtsc (SIGSEGV). So the thread stops trapping first (afterwards
/// the prctl that disarms would be refused), its calls stay local and untimed, and the
/// program's only thread retires the delegates and the memory service's threads, so that its
/// exit(2), which may reach the kernel unseen, can end the process as natively. A thread among
/// others gets a watcher that ends the process for it (`strict_watch`) and keeps trapping, so
/// that its exit from any site reaches the runtime (`exit_thread`): it did not, from a site
/// never rewritten, and the program's thread count kept it, so that the process never ended
/// (`strict_unseen`). Its traps then make no call but its own (`dispatch::handle`, no
/// rewrite). A refused call re-arms.
pub fn strict_mode(nr: usize, a: &[usize; 6]) -> isize {
    let t = thread::current();
    let alone = app_threads::alone(t);
    if t.depth == 0 && alone {
        if delegate::has_delegates(t.pid) {
            delegate::retire(t.pid);
        }
        crate::mcp::pause(); // for good once in strict mode: the thread can make no call that would resume it
        crate::memsvc::retire();
    } else if !alone {
        crate::strict_watch::watch(t);
    }
    if alone {
        sud::disarm_thread();
    }
    let r = unsafe { syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if r == 0 {
        t.local_only = true;
        t.strict = true;
        t.no_tsc = true;
    } else if alone {
        // Refused: the thread goes on as before (the delegates and the pool's scrubber start
        // again when next needed; the MCP monitor does not by itself).
        sud::arm_thread();
        if t.depth == 0 {
            crate::mcp::resume();
        }
    } else {
        crate::strict_watch::unwatch(t);
    }
    r
}

/// prctl(PR_SET_TSC, mode): with PR_TSC_SIGSEGV rdtsc faults on the thread, the runtime's
/// timing of its calls included: they are made untimed and locally from then on (the delegated
/// path times its wait); PR_TSC_ENABLE times them again.
pub fn set_tsc(a: &[usize; 6]) -> isize {
    const PR_TSC_SIGSEGV: usize = 2;
    let r = unsafe { syscall6(PRCTL, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if r == 0 {
        let t = thread::current();
        t.no_tsc = a[1] == PR_TSC_SIGSEGV;
        t.local_only |= t.no_tsc;
    }
    r
}

/// exit(2) of one thread. The last program thread's ends the process when the runtime's own
/// threads (delegates, the memory pool's scrubber, the strict watcher, an MCP's monitor, the
/// filter reaper) would keep it alive (they take no signal
/// either, so not even SIGTERM would end it), with its own code, as the kernel ends a process
/// whose threads all called exit(2).
pub fn exit_thread(code: usize) -> ! {
    let t = thread::current();
    crate::filter_reaper::exiting(t);
    let last = app_threads::exiting(t.pid);
    crate::program_sud::thread_ends(t);
    if t.strict {
        crate::strict_watch::exiting(t, last, code);
        unsafe { syscall3(EXIT, code, 0, 0) };
    }
    if last && (delegate::has_delegates(t.pid) || crate::memsvc::has_scrubber() || crate::strict_watch::watching(t.pid)
                || crate::mcp::monitoring(t.pid) || crate::filter_reaper::running(t.pid)) {
        exit_group(code);
    }
    delegate::release_slots(t);
    profile::end_thread(t.prof, t.calls_may_kill());
    if t.vfork_block != 0 {
        // Its stackless vforks' block: one a thread, kept for the thread's next vfork.
        VforkBlock(t.vfork_block).unmap();
    }
    if t.owned {
        // Its state and runtime stack (which it may be running on) go with it.
        sys::exit_unmapping(t as *mut thread::Thread as usize, thread::THREAD_SIZE, code);
    }
    unsafe { syscall3(EXIT, code, 0, 0) };
    loop {}
}

/// exit_group(2): the profile is closed first.
pub fn exit_group(code: usize) -> ! {
    let t = thread::current();
    profile::end_thread(t.prof, t.calls_may_kill());
    profile::end_process(code as u64 & 0xff, t.calls_may_kill(), t.pid);
    sys::exit_group(code)
}
