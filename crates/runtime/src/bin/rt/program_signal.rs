//! Program signal handlers run at the program's context, even when the signal interrupts the runtime.
//! Every handler the program installs is entered through `coreplane_program_signal`. A signal
//! that interrupted program code goes straight to the handler, the kernel's frame untouched. One
//! that interrupted the runtime's own code (a call the runtime serves or delegates, on its own
//! stack or inside the dispatch trap) would otherwise show the handler the runtime's registers
//! and run it on the runtime's stack: garbage collectors that stop threads with a signal read the
//! thread's stack pointer and registers from there (Boehm's in Guile took the runtime stack for
//! the thread's and faulted scanning it; SBCL found no stack pointer it knew). Such a handler is
//! given instead the program's context at the call it made (its registers, stack pointer and
//! return address, rax = -EINTR as for an interrupted call) in a frame on the stack the kernel
//! would have chosen natively (the program's, or its signal stack for SA_ONSTACK), and returns to
//! the runtime, whose call then goes on as the kernel decides (restarted, or EINTR). What the
//! handler changes in that context's registers is not applied: the call in progress owns them;
//! the signal mask it leaves there is, as its rt_sigreturn would apply it.
//! Faults of the runtime's own code (synchronous SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP) keep
//! the context that faulted. A signal in the few instructions of an entry before its record is
//! made, or after it is gone, still shows the runtime's context.

use crate::sigaction::{KSigaction, SA_ONSTACK};
use crate::sigframe::{self, *};
use crate::sys::{self, syscall3, EFAULT, EINTR, MREMAP, MREMAP_DONTUNMAP, MUNMAP, PAGE, SIGALTSTACK, SIGKILL, SIGSYS, SS_AUTODISARM, SS_DISABLE};
use crate::thread::{self, THREAD_SIZE};
use core::arch::global_asm;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

const NSIG: usize = 64;
/// The program's handler for each signal routed through `coreplane_program_signal`.
#[no_mangle]
static COREPLANE_PROGRAM_HANDLERS: [AtomicUsize; NSIG + 1] = [const { AtomicUsize::new(0) }; NSIG + 1];
/// sa_flags of the program's handlers as the program gave them, by signal number (`signals`
/// keeps them at rt_sigaction; SA_RESTART decides restarts there, SA_ONSTACK placement here).
static FLAGS: [AtomicU64; NSIG + 1] = [const { AtomicU64::new(0) }; NSIG + 1];

/// What runs before a program handler that interrupted a call in progress: delegation's
/// `interrupt_before_handler`, registered at start-up (`set_before_handler`). A hook rather
/// than a call because delegation sits above this module: it asks `signals` whether a handler
/// restarts a call, and `signals` enters handlers here.
static BEFORE_HANDLER: AtomicUsize = AtomicUsize::new(0);

/// Registers the hook run before a program handler that interrupted a call in progress.
pub fn set_before_handler(hook: fn(&thread::Thread, usize, i32)) {
    BEFORE_HANDLER.store(hook as usize, Relaxed);
}

fn before_handler(t: &thread::Thread, entry: usize, sig: i32) {
    let hook = BEFORE_HANDLER.load(Relaxed);
    if hook != 0 {
        let hook: fn(&thread::Thread, usize, i32) = unsafe { core::mem::transmute(hook) };
        hook(t, entry, sig);
    }
}

/// A runtime call in progress (Thread.entry points to the innermost): where the program's
/// context at the call is. The fast path's Rust calls push one in assembly (`fastpath`, label 5):
/// `uc` the record's address xor FAST (cleared when the call ends), the program's callee-saved
/// registers in `saved` (r15, r14, r13, r12, rbp, rbx), and above the record, the entry's saved
/// rt_sp, the address of the program's pushed argument registers, then xmm0-15. A trapped call's
/// is made by `within`: `uc` is the dispatch trap's frame, which holds all of the program's
/// registers, and saved[0] is the record's address xor LIVE (cleared when the call ends). The
/// marks tell a record from memory the program reused after a handler's longjmp left the call.
#[repr(C)]
pub struct Entry {
    prev: usize,
    uc: usize,
    saved: [u64; 6],
}
const LIVE: u64 = 0x636f_7265_706c_616e;
const FAST: u64 = 0x6661_7374_7061_7468;
/// FAST, for the fast path's assembly.
#[no_mangle]
static COREPLANE_FAST_MARK: u64 = FAST;

/// What a record is.
enum Kind {
    /// A fast-path Rust call's.
    Fast,
    /// A trapped call's, with its frame.
    Trap(*mut u8),
}

impl Entry {
    /// The record's kind, or None where its marks say it is no record (any more).
    fn kind(&self) -> Option<Kind> {
        let at = self as *const Entry as usize;
        if self.uc as u64 == at as u64 ^ FAST {
            Some(Kind::Fast)
        } else if self.saved[0] == at as u64 ^ LIVE && self.uc > at && self.uc - at < THREAD_SIZE {
            Some(Kind::Trap(self.uc as *mut u8))
        } else {
            None
        }
    }
}
/// Where the fast path's record has the program's argument registers (rdi, rsi, rdx, r10, r8, r9,
/// then the 128-byte red zone and the return address) and its xmm0-15.
const ARGS_AT: usize = core::mem::size_of::<Entry>() + 8;
const XMM_AT: usize = core::mem::size_of::<Entry>() + 16;
const RETURN_AT: usize = 6 * 8 + 128;
/// Bytes below the frame's FPU state: return address, ucontext, siginfo, the runtime's saved rsp.
const FRAME_HEAD: usize = 8 + KERNEL_UCONTEXT_SIZE + SIGINFO_SIZE + 8;
const SAVED_RSP_AT: usize = 8 + KERNEL_UCONTEXT_SIZE + SIGINFO_SIZE;
/// Room left below the code building a frame on the stack it runs on.
const MARGIN: usize = 1024;

global_asm!(
    // rdi: signal, rsi: siginfo, rdx: ucontext, as the kernel enters a handler.
    ".globl coreplane_program_signal",
    "coreplane_program_signal:",
    // A signal another process sent (si_code SI_USER, SI_QUEUE or SI_TKILL) is noted for the
    // launcher (`launcher_notes`) before anything else; rsp + 8 is 16-aligned here, as at a call.
    "mov eax, [rsi + 8]",
    "test eax, eax",
    "je 4f",
    "cmp eax, -1",
    "je 4f",
    "cmp eax, -6",
    "jne 5f",
    "4:",
    "push rdi",
    "push rsi",
    "push rdx",
    "call coreplane_note_sent_signal",
    "pop rdx",
    "pop rsi",
    "pop rdi",
    "5:",
    "mov r11, [rdx + {rip}]",
    "mov rax, r11",
    "sub rax, [rip + COREPLANE_TEXT_START]",
    "cmp rax, [rip + COREPLANE_TEXT_LEN]",
    "jae 1f",
    // In the runtime's text; the fast path's own assembly before its Rust calls (the local
    // calls, made on the program's stack with its registers) counts as the program's.
    "lea rax, [rip + coreplane_fast_entry]",
    "cmp r11, rax",
    "jb 2f",
    "lea rax, [rip + coreplane_fast_rust]",
    "cmp r11, rax",
    "jb 1f",
    "2:",
    "jmp coreplane_signal_in_runtime",
    "1:",
    "lea rax, [rip + COREPLANE_PROGRAM_HANDLERS]",
    "mov r11, [rax + rdi * 8]",
    "xor eax, eax",
    "jmp r11",
    // coreplane_run_handler(handler, signal, siginfo, ucontext, frame) -> mask: runs the handler
    // on `frame` (its return address slot), back here when it returns with the signal mask it
    // left in its context.
    ".globl coreplane_run_handler",
    "coreplane_run_handler:",
    "push rbx",
    "push rbp",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "mov [r8 + {saved_rsp}], rsp",
    "lea rax, [rip + 3f]",
    "mov [r8], rax",
    "mov r11, rdi",
    "mov edi, esi",
    "mov rsi, rdx",
    "mov rdx, rcx",
    "mov rsp, r8",
    "xor eax, eax",
    "jmp r11",
    // The handler returned: rsp is past the return address slot, at its ucontext. The mask is
    // read first: until rsp leaves the frame, a signal's frame goes below it, not over it.
    "3:",
    "mov rax, [rsp + {mask}]",
    "mov rsp, [rsp + {saved_rsp} - 8]",
    "pop r15",
    "pop r14",
    "pop r13",
    "pop r12",
    "pop rbp",
    "pop rbx",
    "ret",
    rip = const GREGS_OFF + REG_RIP * 8,
    saved_rsp = const SAVED_RSP_AT,
    mask = const UC_SIGMASK_OFF,
);

extern "C" {
    fn coreplane_program_signal();
    fn coreplane_run_handler(handler: usize, sig: i32, info: usize, uc: usize, frame: usize) -> u64;
}

/// Whether the process owns its memory (not a process started in its parent's, as posix_spawn's
/// child until it execs, which shares this table but not the kernel's actions): only then are
/// handlers routed through the table.
fn routes() -> bool {
    crate::app_threads::owns_memory(thread::current())
}

/// The flags the program last gave for `sig` (0 for a signal out of range).
pub fn program_flags(sig: usize) -> u64 {
    if (1..=NSIG).contains(&sig) { FLAGS[sig].load(Relaxed) } else { 0 }
}

/// The program gave `flags` for `sig`.
pub fn set_program_flags(sig: usize, flags: u64) {
    if (1..=NSIG).contains(&sig) {
        FLAGS[sig].store(flags, Relaxed);
    }
}

/// The program's handler in the table for `sig` (0: none routed yet).
pub fn handler_of(sig: usize) -> usize {
    if (1..=NSIG).contains(&sig) { COREPLANE_PROGRAM_HANDLERS[sig].load(Relaxed) } else { 0 }
}

/// An action the program gives for `sig` (already read): a handler is entered through
/// `coreplane_program_signal`, the table holding the program's.
pub fn route(sig: usize, act: &mut KSigaction) {
    if (1..=NSIG).contains(&sig) && act.handler > 1 && routes() {
        // The table first: a signal that comes before the kernel's action changes finds a handler.
        COREPLANE_PROGRAM_HANDLERS[sig].store(act.handler, Relaxed);
        act.handler = coreplane_program_signal as *const () as usize;
    }
}

/// The handler the program sees for an action the kernel reported (`previous`: the table's before
/// the call): its own, not the entry.
pub fn shown(handler: usize, previous: usize) -> usize {
    if handler == coreplane_program_signal as *const () as usize { previous } else { handler }
}

/// Runs `call`, a trapped call served by the runtime, with its frame `uc` as the innermost entry.
pub fn within<R>(uc: *mut u8, call: impl FnOnce() -> R) -> R {
    let t = thread::current();
    let program_sp = gregs(uc)[REG_RSP] as usize;
    resumed(t, program_sp, Some(uc));
    let mut e = Entry { prev: live_below(t, t.entry, program_sp), uc: uc as usize, saved: [0; 6] };
    let at = &mut e as *mut Entry as usize;
    e.saved[0] = at as u64 ^ LIVE;
    unsafe { core::ptr::write_volatile(&mut t.entry, at) };
    let r = call();
    unsafe {
        core::ptr::write_volatile(&mut t.entry, e.prev);
        core::ptr::write_volatile(&mut e.saved[0], 0);
    }
    r
}

/// A fast-path Rust call begins (its record is Thread.entry): what `within` does for a trap.
pub fn fast_call_begins() {
    let t = thread::current();
    let e = unsafe { &mut *(t.entry as *mut Entry) };
    // Nothing to drop or put back, as on nearly every call: no more work on the fast path.
    if e.prev == 0 && t.disabled_for == 0 {
        return;
    }
    let Some((program_sp, _)) = program_call(t, e, true) else { return };
    resumed(t, program_sp, None);
    if e.prev != 0 {
        e.prev = live_below(t, e.prev, program_sp);
    }
}

/// Where the program is at the call of record `e`: its stack pointer and where it resumes
/// (`fastpath::program_resumes`); None for a record that is no longer one. A record a handler's longjmp left may lie in memory the
/// program has since reused: a trap's must still be marked live, and a fast-path call's return
/// address is read as the kernel reads the program's memory (no fault for an unmapped one),
/// unless the record is `fresh` (the call just began: its return address is where it says).
fn program_call(t: &thread::Thread, e: &Entry, fresh: bool) -> Option<(usize, usize)> {
    let at = e as *const Entry as usize;
    if let Kind::Trap(uc) = e.kind()? {
        let g = gregs(uc);
        return Some((g[REG_RSP] as usize, g[REG_RIP] as usize));
    }
    let args = unsafe { *((at + ARGS_AT) as *const usize) };
    let slot = args + RETURN_AT;
    let mut word = [0u8; 8];
    if fresh {
        word = unsafe { *(slot as *const [u8; 8]) };
    } else if !t.read_program(slot, &mut word) {
        return None;
    }
    Some(crate::fastpath::program_resumes(slot, usize::from_ne_bytes(word)))
}

/// The program, at stack pointer `program_sp`, is back above what a handler left by longjmp
/// had below it: the signal stack disabled for that handler is put back (in the trap's frame
/// `trap_uc` too, whose rt_sigreturn would disable it again).
fn resumed(t: &mut thread::Thread, program_sp: usize, trap_uc: Option<*mut u8>) {
    if t.disabled_for != 0 && above(program_sp, t.disabled_for) {
        unsafe {
            sys::syscall6(SIGALTSTACK, t.disabled_stack.as_ptr() as usize, 0, 0, 0, 0, 0);
            if let Some(uc) = trap_uc {
                core::ptr::copy_nonoverlapping(t.disabled_stack.as_ptr(), uc.add(UC_STACK_OFF) as *mut usize, 3);
            }
        }
        t.disabled_for = 0;
    }
}

/// Whether `sp` lies at or above `frame` on the same stack (assumed within 8 MiB).
fn above(sp: usize, frame: usize) -> bool {
    sp >= frame && sp - frame < 8 << 20
}

/// sigaltstack(2) with the program's new stack_t at `ss` (0: a query), made by `set`. Once it
/// succeeds, a stack the runtime disabled for a handler is not put back over the new one, a
/// withdrawn one is forgotten, and the fast path learns where the program's stack lies. The
/// stack_t is read before the call: with sigaltstack(&ss, &ss) the kernel writes the old one
/// over it.
pub fn sets_signal_stack(ss: usize, set: impl FnOnce() -> isize) -> isize {
    if ss == 0 {
        return set();
    }
    let t = thread::current();
    let mut raw = [0u8; 24];
    let read = t.read_program(ss, &mut raw);
    let r = set();
    if r != 0 {
        return r;
    }
    t.disabled_for = 0;
    t.withdrawn_signal_stack = [0; 3];
    if read {
        let word = |i: usize| usize::from_ne_bytes(raw[8 * i..8 * i + 8].try_into().unwrap());
        let (sp, flags, size) = (word(0), word(1) as i32, word(2));
        t.program_signal_stack = if flags & SS_DISABLE != 0 || size == 0 { [0, 0] } else { [sp, sp + size - 1] };
    }
    r
}

/// A successful munmap or mremap took away the top of the signal stack the program set on this
/// thread, which natively is harmless while no signal comes (on a signal, the kernel kills the
/// process); but every trap of the runtime's would come there, and kill it (stress-ng
/// --vforkmany's stressor munmaps its signal stack and goes on). The kernel's stack is disabled
/// and the program is still shown its own (`sigaltstack_withdrawn`) until it sets another. A
/// handler with SA_ONSTACK then runs on the thread's stack, where natively the process dies.
pub fn after_unmap(nr: usize, a: &[usize; 6], result: isize) {
    let t = thread::current();
    let [lo, hi] = t.program_signal_stack;
    // The kernel takes lengths in whole pages.
    let end = |len: usize| a[0].saturating_add(len).saturating_add(PAGE - 1) & !(PAGE - 1);
    let gone = match nr {
        MUNMAP if result == 0 => a[0]..end(a[1]),
        // Shrunk in place: its tail; moved: all of it.
        MREMAP if result as usize == a[0] => end(a[2])..end(a[1]),
        MREMAP if result >= 0 && a[3] & MREMAP_DONTUNMAP == 0 => a[0]..end(a[1]),
        _ => return,
    };
    if hi == 0 || !gone.contains(&hi) {
        return;
    }
    let mut now = [0usize; 3];
    unsafe { syscall3(SIGALTSTACK, 0, now.as_mut_ptr() as usize, 0) };
    let off = [0usize, SS_DISABLE as usize, 0];
    if unsafe { syscall3(SIGALTSTACK, off.as_ptr() as usize, 0, 0) } == 0 {
        t.withdrawn_signal_stack = [lo, now[1] & SS_AUTODISARM as u32 as usize, hi - lo + 1];
        t.program_signal_stack = [0, 0];
    }
}

/// A frame `uc` that rt_sigreturn is about to restore, saved before this thread's signal stack
/// was withdrawn, names that stack: it would arm it again, and the next trap would go there.
pub fn keep_withdrawn(uc: *mut u8) {
    let t = thread::current();
    let stack = unsafe { &mut *(uc.add(UC_STACK_OFF) as *mut [usize; 3]) };
    if t.withdrawn_signal_stack[2] != 0 && stack[0] == t.withdrawn_signal_stack[0] && stack[1] as i32 & SS_DISABLE == 0 {
        *stack = [0, SS_DISABLE as usize, 0];
    }
}

/// sigaltstack(2) on a thread whose signal stack was withdrawn (`after_unmap`): the program is
/// shown the stack it set, until it sets another, which the kernel checks as it would.
pub fn sigaltstack_withdrawn(a: &[usize; 6], set: impl FnOnce() -> isize) -> isize {
    let t = thread::current();
    let old = t.withdrawn_signal_stack;
    let r = sets_signal_stack(a[0], set);
    if r != 0 {
        return r;
    }
    let bytes = unsafe { core::slice::from_raw_parts(old.as_ptr() as *const u8, 24) };
    if a[1] != 0 && !t.write_program(a[1], bytes) {
        return -EFAULT;
    }
    0
}

/// The chain from record `at` without the records that lie below a call made at `program_sp`,
/// or are no longer records: their calls were left by a handler's longjmp. (A record the program
/// reused is dropped with all below it.)
fn live_below(t: &thread::Thread, mut at: usize, program_sp: usize) -> usize {
    while at != 0 {
        if !readable(t, at) {
            return 0;
        }
        let e = unsafe { &*(at as *const Entry) };
        match program_call(t, e, false) {
            Some((sp, _)) if !above(program_sp, sp) => break,
            Some(_) => at = e.prev,
            None => return 0,
        }
    }
    at
}

/// Whether the record at `at` can be read: one on the thread's runtime stack always can; one a
/// trap made on a stack of the program's may lie in memory the program unmapped after a handler
/// left the call by longjmp (stress-ng's signest unmapped its signal stack so: SIGSEGV here).
fn readable(t: &thread::Thread, at: usize) -> bool {
    let mut probe = [0u8; core::mem::size_of::<Entry>() + 16];
    t.mapping().contains(&at) || t.read_program(at, &mut probe)
}

/// The innermost entry, if it is one the signal interrupted: on the interrupted stack, above its
/// pointer, within a runtime stack's depth (a record a handler's longjmp abandoned is skipped
/// where it no longer lies so, or no longer marked live).
fn live_entry(t: &thread::Thread, irsp: usize) -> Option<(&'static Entry, usize, usize)> {
    let at = t.entry;
    if at <= irsp || at - irsp >= THREAD_SIZE {
        return None;
    }
    let e = unsafe { &*(at as *const Entry) };
    // Read directly: a record a longjmp left is dropped at the thread's next call, and until then
    // lies on a stack the signal did not interrupt (the runtime's, whose calls then stay on the
    // caller's) or is a trap's, checked by its mark. The kernel's copy would add ≈ 1 µs a signal.
    program_call(t, e, true).map(|(sp, ip)| (e, sp, ip))
}

/// The program's signal stack, [lo, hi), where the trap's frame `uc` lies on it (the runtime's
/// handler is SA_ONSTACK) while the program was not on it; None otherwise, and on a stack the
/// runtime lends. Read from the frame, which saved it before the kernel disarmed one set with
/// SS_AUTODISARM.
pub fn trap_borrows_signal_stack(uc: *mut u8) -> Option<(usize, usize)> {
    let [sp, flags, size] = unsafe { *(uc.add(UC_STACK_OFF) as *const [usize; 3]) };
    let on = |addr: usize| flags as i32 & SS_DISABLE == 0 && (sp..sp.saturating_add(size)).contains(&addr);
    let borrowed = !thread::current().lent_stack && on(uc as usize) && !on(gregs(uc)[REG_RSP] as usize);
    borrowed.then_some((sp, sp + size))
}

/// The program's handler for a signal that interrupted the runtime's code.
#[no_mangle]
extern "C" fn coreplane_signal_in_runtime(sig: i32, info: *mut u8, uc: *mut u8) {
    let handler = COREPLANE_PROGRAM_HANDLERS[sig as usize].load(Relaxed);
    let t = thread::current();
    let irsp = gregs(uc)[REG_RSP] as usize;
    match live_entry(t, irsp) {
        Some((e, program_sp, resume_at)) if !t.strict && !synchronous(sig, info) => {
            if let Some(below) = runtime_stack_below(t, uc, irsp) {
                again_on_runtime_stack(t, sig, uc, below);
            }
            before_handler(t, e as *const Entry as usize, sig);
            run_at_program_context(t, e, (program_sp, resume_at), handler, sig, info, uc)
        }
        _ => {
            // No call the program made is in progress (a thread starting, say), or a fault of the
            // runtime's own code, which the handler may mend only in the context that faulted: as
            // the kernel entered it.
            let h: extern "C" fn(i32, *mut u8, *mut u8) = unsafe { core::mem::transmute(handler) };
            h(sig, info, uc);
        }
    }
}

/// A program handler's frame `frame` (its ucontext, the siginfo after it) is given back by its
/// rt_sigreturn: the signal it handled is noted for a delegated call waiting meanwhile
/// (`delegate`: one the signal does not restart ends with EINTR), and a withdrawn signal stack
/// kept so.
pub fn handler_returns(frame: *mut u8) {
    let t = thread::current();
    unsafe {
        let signo = *(frame.add(KERNEL_UCONTEXT_SIZE) as *const i32);
        core::ptr::write_volatile(&mut t.last_signo, signo);
        core::ptr::write_volatile(&mut t.handlers_done, t.handlers_done + 1);
    }
    keep_withdrawn(frame);
}

/// Where this handler's own frame `uc` goes instead of the program's signal stack: the kernel put
/// it there (the program's handler is SA_ONSTACK) though the interrupted runtime code runs on the
/// runtime stack at `irsp`, and the program's handler's frame was then built below it, 4.4 KiB
/// down with AVX-512 state: on an 8 KiB stack (a Rust thread's) a handler whose own call trapped
/// overflowed it, and stacks under ≈ 7 KiB that hold natively overflowed at once (session 21).
/// From below `irsp` on the runtime stack instead, the program's frame goes to the signal stack's
/// top, as the kernel would have put it.
fn runtime_stack_below(t: &thread::Thread, uc: *mut u8, irsp: usize) -> Option<usize> {
    trap_borrows_signal_stack(uc)?;
    t.mapping().contains(&irsp).then_some(irsp - 128)
}

/// Runs this handler again from a copy of its frame below `below`, and returns from the copy as
/// the program's restorer would have (`handler_returns`, then rt_sigreturn); rt_sp marks the
/// runtime stack in use down to the copy meanwhile (a fast-path call of the program's handler
/// stays where it is), and gets its value back after.
fn again_on_runtime_stack(t: &mut thread::Thread, sig: i32, uc: *mut u8, below: usize) -> ! {
    let copy = sigframe::copy_below(uc, below);
    let before = t.rt_sp;
    t.rt_sp = copy;
    sigframe::run_again(sig, copy, signal_in_runtime_returning, (&mut t.rt_sp, before))
}

/// `coreplane_signal_in_runtime` from a frame's copy, whose return the restorer does not see.
/// Its return is rt_sigreturn (0): the frame is a program signal's, whose mask only rt_sigreturn
/// restores, and which natively returns so too.
extern "C" fn signal_in_runtime_returning(sig: i32, info: *mut u8, uc: *mut u8) -> usize {
    coreplane_signal_in_runtime(sig, info, uc);
    handler_returns(uc);
    0
}

/// Whether signal `sig` with `info` is a fault the kernel raised for the instruction that ran.
fn synchronous(sig: i32, info: *mut u8) -> bool {
    const SIGILL: i32 = 4;
    const SIGTRAP: i32 = 5;
    const SIGBUS: i32 = 7;
    const SIGFPE: i32 = 8;
    const SIGSEGV: i32 = 11;
    let code = unsafe { *(info.add(SI_CODE_OFF) as *const i32) };
    matches!(sig, SIGILL | SIGTRAP | SIGBUS | SIGFPE | SIGSEGV) && code > 0
}

/// Builds the handler's frame where the kernel would have put it for the program at entry `e`,
/// and runs the handler there.
#[inline(never)]
fn run_at_program_context(t: &mut thread::Thread, e: &Entry, (program_sp, resume_at): (usize, usize), handler: usize,
                          sig: i32, info: *mut u8, uc: *mut u8) {
    let here = &e as *const _ as usize;
    let at = e as *const Entry as usize;
    let trap = match e.kind() {
        Some(Kind::Trap(trap_uc)) => Some(trap_uc),
        _ => None,
    };
    let source = trap.unwrap_or(uc);
    let onstack = program_flags(sig as usize) & SA_ONSTACK != 0;
    // Below the runtime's frames, the fast path's saved argument registers (on the program's
    // stack, under its red zone) and any handler frame this thread has in use.
    let args = if trap.is_none() { unsafe { *((at + ARGS_AT) as *const usize) } } else { usize::MAX };
    let held = if t.handler_frame != 0 { t.handler_frame } else { usize::MAX };
    let place = Placement::of(t, uc, program_sp, onstack, [gregs(uc)[REG_RSP] as usize, here - MARGIN, args, held]);
    let fp_size = sigframe::fpstate(source).map_or(0, |(_, n)| n);
    let fp_to = (place.top - fp_size) & !63;
    let frame = ((fp_to - FRAME_HEAD) & !15) - 8;
    let copy = frame + 8;
    // Held while it is built: a signal that comes meanwhile builds its frame below. (Not while the
    // handler runs: its own calls are made below it anyway, and a longjmp would strand it.)
    let outer_frame = t.handler_frame;
    t.handler_frame = frame;
    unsafe {
        sigframe::copy_frame(source, copy, fp_to);
        // This delivery's siginfo, signal mask and signal stack.
        core::ptr::copy_nonoverlapping(info, (copy + KERNEL_UCONTEXT_SIZE) as *mut u8, SIGINFO_SIZE);
        core::ptr::copy_nonoverlapping(uc.add(UC_SIGMASK_OFF), (copy + UC_SIGMASK_OFF) as *mut u8, 8);
        core::ptr::copy_nonoverlapping(uc.add(UC_STACK_OFF), (copy + UC_STACK_OFF) as *mut u8, 24);
        let g = gregs(copy as *mut u8);
        if trap.is_none() {
            let a = &*(args as *const [u64; 6]);
            [g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10], g[REG_R8], g[REG_R9]] = *a;
            [g[REG_R15], g[REG_R14], g[REG_R13], g[REG_R12], g[REG_RBP], g[REG_RBX]] = e.saved;
            g[REG_RIP] = resume_at as u64;
            g[REG_RCX] = resume_at as u64;
            g[REG_R11] = g[REG_EFL];
            g[REG_RSP] = program_sp as u64;
            if fp_size != 0 {
                core::ptr::copy_nonoverlapping((at + XMM_AT) as *const u8, (fp_to + XMM0_OFF) as *mut u8, 256);
            }
        }
        g[REG_RAX] = (-EINTR) as u64;
        // The calls below are made on the handler's stack, under its frame: off the signal stack.
        let below = (frame - 256) & !15;
        let outer = (t.disabled_for, t.disabled_stack);
        if place.disarm {
            core::ptr::copy_nonoverlapping(uc.add(UC_STACK_OFF) as *const usize, t.disabled_stack.as_mut_ptr(), 3);
            t.disabled_for = frame;
            let off = [0usize, SS_DISABLE as usize, 0];
            sys::syscall_on(below, SIGALTSTACK, off.as_ptr() as usize, 0);
        }
        t.handler_frame = outer_frame;
        let left = coreplane_run_handler(handler, sig, copy + KERNEL_UCONTEXT_SIZE, copy, frame);
        keep_mask(uc, trap, left);
        // Put back unless the program set a signal stack of its own meanwhile.
        if place.disarm && t.disabled_for == frame {
            sys::syscall_on(below, SIGALTSTACK, t.disabled_stack.as_ptr() as usize, 0);
        }
        (t.disabled_for, t.disabled_stack) = outer;
    }
}

/// Signals no mask blocks: SIGKILL and SIGSTOP (rt_sigreturn drops them), and SIGSYS, the
/// runtime's traps.
const UNBLOCKABLE: u64 = 1 << (SIGKILL - 1) | 1 << (19 - 1) | 1 << (SIGSYS - 1);

/// The program's handler, shown the signal mask of the signal's frame `uc`, left `left` in its
/// context: what it added or removed there is applied as its rt_sigreturn would apply it, to the
/// frames whose return gives the thread its mask: `uc`'s, when this handler returns to the
/// runtime's call, and a trapped call's frame `trap`, when that call returns (natively, SIGUSR2
/// added there is blocked after the call; it was not). The registers stay the call's.
fn keep_mask(uc: *mut u8, trap: Option<*mut u8>, left: u64) {
    let mask = |frame: *mut u8| unsafe { &mut *(frame.add(UC_SIGMASK_OFF) as *mut u64) };
    let shown = *mask(uc);
    if left == shown {
        return;
    }
    let (added, removed) = (left & !shown & !UNBLOCKABLE, shown & !left);
    for frame in core::iter::once(uc).chain(trap) {
        *mask(frame) = (*mask(frame) | added) & !removed;
    }
}

/// Where the handler's frame goes.
struct Placement {
    /// The frame's top.
    top: usize,
    /// Whether the signal stack is disabled while the handler runs off it.
    disarm: bool,
}

impl Placement {
    /// The program's signal stack for SA_ONSTACK where it has one and was not on it, else below
    /// the program's stack pointer and its red zone; then below any of `live` (the runtime's
    /// stack pointers at the interruption and now, memory it holds) on that same stack. Where the runtime's frames
    /// are on the signal stack (a trap's, as its handler is SA_ONSTACK) and the handler runs off
    /// it, the stack is disabled meanwhile: a trap or a signal with SA_ONSTACK that came while the
    /// handler ran would otherwise start a frame at the stack's top, over those frames (Mono's
    /// stop handler, trapped in sigsuspend, ran so on a frame overwritten). A thread under a
    /// filter of the program's, which would see that call, runs the handler on the signal stack
    /// below them instead. Where the kernel disarmed the stack itself (SS_AUTODISARM, as the stack
    /// the runtime lends) nothing is needed.
    fn of(t: &thread::Thread, uc: *mut u8, program_sp: usize, onstack: bool, live: [usize; 4]) -> Placement {
        let (ss_sp, ss_flags, ss_size) = unsafe {
            let s = uc.add(UC_STACK_OFF);
            (*(s as *const usize), *(s.add(8) as *const i32), *(s.add(16) as *const usize))
        };
        let alt = (ss_flags & SS_DISABLE == 0 && ss_size != 0).then_some(ss_sp..ss_sp + ss_size);
        let runtime = t.mapping();
        let stack_of = |x: usize| match &alt {
            _ if runtime.contains(&x) => 0,
            Some(r) if r.contains(&x) => 1,
            _ => 2,
        };
        let mut top = match &alt {
            Some(r) if onstack && !r.contains(&program_sp) => r.end,
            _ => program_sp - 128,
        };
        for x in live {
            if stack_of(x) == stack_of(top - 1) && x < top {
                top = x - 128;
            }
        }
        let frames_on_alt = live.iter().copied().filter(|&x| stack_of(x) == 1).min();
        let mut disarm = false;
        if let Some(lowest) = frames_on_alt.filter(|_| stack_of(top - 1) != 1 && ss_flags & SS_AUTODISARM == 0) {
            if t.is_filtered() {
                top = lowest - 128;
            } else {
                disarm = true;
            }
        }
        Placement { top, disarm }
    }
}
