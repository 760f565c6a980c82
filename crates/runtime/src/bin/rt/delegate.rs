//! Delegation: threads on the control cores make syscalls on behalf of the program's threads.
//! They share the address space and file table, so pointer arguments stay valid.
//! Each application thread owns a request slot per nesting depth (a signal handler that runs
//! while a delegated call waits may delegate calls of its own). A slot is two cache lines, as in
//! the ping-pong that is the floor of this path: the request line is written by the application
//! (sequence number, call, arguments) and polled by the delegates, which claim a request with a
//! compare-and-swap; the response line is written by the delegate and polled by the application.
//! Queueing: delegates scan the slots round-robin from where they last served, so requests are
//! served in turn; an idle delegate sleeps on a futex after polling for a while. When every
//! delegate is busy (blocked in a call) and a request waits, the pool grows.
//! Slots are recycled: a thread that exits gives its slots back (`release_slots`), and the slots
//! of threads that ended unseen are taken back when none is left (`take_slot`).

use crate::sigframe::{gregs, REG_RAX, REG_RIP};
use crate::sigaction::{coreplane_sigreturn, sigaction, KSigaction, SA_RESTART, SA_RESTORER, SA_SIGINFO};
use crate::sys::{self, *};
use crate::thread::Thread;
use coreplane_runtime::handoff::Sequence;
use core::arch::global_asm;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

const MAX_SLOTS: usize = 4096;
const MAX_DELEGATES: usize = 64;
const NONE: u32 = u32::MAX;
/// A thread's slot at some depth when none could be had: its calls there are made locally,
/// until `look_again` finds one.
const NO_SLOT: u32 = NONE - 1;
/// Slots given back so far (`release_slots`): a thread without a slot looks again when this moved.
static RELEASED: AtomicU32 = AtomicU32::new(0);
/// A thread without a slot also looks again at every this many of its local calls: the slots
/// of threads that ended unseen come free without notice, and the look that finds them asks
/// the kernel about every owner (4096 tgkill, ≈ 1 ms), ≈ 0.25 µs a call spread over these.
const LOOK_AGAIN_EVERY: u32 = 4096;
/// Delegate side: how long an idle delegate goes on scanning before it sleeps. Counted in time,
/// not in scans: a scan covers every slot handed out, and 50,000 scans of 2000 threads' slots
/// (`many_threads`) kept up to 64 delegates polling one control core for seconds each.
const DELEGATE_SPIN_NS: u64 = 1_400_000;
/// An idle delegate yields its control core this often: the delegates of other processes on
/// the same control core (a shell pipeline's stages each have their own) get it when they have
/// work, instead of waiting for the scheduler to preempt a poller. (The proportion of the two is
/// that of the former counts, 1024 of 50,000 pauses, which the closed model's hand-over uses.)
const YIELD_EVERY_NS: u64 = 28_700;
/// Application side: a caller polls for its result for the round trip's forward cost (2·f_c)
/// plus this, then sleeps. A call still running after that is blocked in the kernel (a read of
/// an empty pipe, a wait) or queued, and the caller's core is better given to another thread:
/// with a fixed ≈ 0.6 ms of polling, the stages of a shell pipeline sharing one compute core
/// spun on it while the stage that would feed them waited for it (5 stages: 6× native time).
const APP_SPIN_SLACK_NS: u64 = 50_000;
const STACK_SIZE: usize = 64 * 1024;
/// Application side: the longest sleep between two looks for a delegate while no delegate has
/// taken the request (the sleeps double from 1 ms).
const UNCLAIMED_WAIT_MAX_NS: u64 = 32_000_000;
/// Application side: the sleep of a caller whose request a delegate has taken; the completion
/// wakes it, and a time-out is given only so that a signal handler ends the wait (EINTR).
const TAKEN_WAIT_NS: u64 = 1_000_000_000;

/// Written by the application, read by delegates.
#[repr(C, align(64))]
struct Request {
    /// The latest request posted in this slot and the latest a delegate claimed.
    seq: Sequence,
    nr: usize,
    args: [usize; 6],
}

/// Written by the delegate, read by the application.
#[repr(C, align(64))]
struct Response {
    /// Sequence number of the latest request completed.
    done: AtomicU32,
    /// The application sleeps on `done` and wants a futex wake.
    waiting: AtomicU32,
    result: isize,
    t_start: u64,
    /// Set by the application: its caller was interrupted by a signal without SA_RESTART.
    cancel: AtomicU32,
    /// Sequence number of the latest request whose call has been made, `result` its result,
    /// marked before the return trip's cost: a child forked before `done` moves keeps that
    /// result rather than make the call again (`child_after_fork`).
    made: AtomicU32,
}

#[repr(C, align(128))]
struct Slot {
    request: Request,
    response: Response,
}

struct Delegate {
    tid: AtomicI32,
    current: AtomicU32,
    stack: AtomicUsize,
}

/// Read on every call by the application, written rarely: one cache line.
#[repr(C, align(64))]
struct Pool {
    /// Process that owns the delegates (after fork the child has none).
    pid: AtomicI32,
    lock: AtomicU32,
    /// Slots handed out so far (delegates scan this many).
    slots: AtomicU32,
    delegates: AtomicU32,
}

/// Written by delegates going to sleep, on a line of its own.
#[repr(C, align(64))]
struct Sleep {
    sleepers: AtomicU32,
    work_seq: AtomicU32,
    /// Set while the delegates are being retired (see `retire`): idle ones end.
    retire: AtomicU32,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_SLOT: Slot = Slot {
    request: Request { seq: Sequence::new(), nr: 0, args: [0; 6] },
    response: Response { done: AtomicU32::new(0), waiting: AtomicU32::new(0), result: 0, t_start: 0, cancel: AtomicU32::new(0), made: AtomicU32::new(0) },
};
#[allow(clippy::declare_interior_mutable_const)]
const NO_DELEGATE: Delegate = Delegate { tid: AtomicI32::new(0), current: AtomicU32::new(NONE), stack: AtomicUsize::new(0) };

static mut SLOTS: [Slot; MAX_SLOTS] = [EMPTY_SLOT; MAX_SLOTS];
/// The tid of the thread each slot belongs to, 0 for a free slot.
static OWNERS: [AtomicI32; MAX_SLOTS] = [const { AtomicI32::new(0) }; MAX_SLOTS];
static DELEGATES: [Delegate; MAX_DELEGATES] = [NO_DELEGATE; MAX_DELEGATES];
static POOL: Pool = Pool { pid: AtomicI32::new(0), lock: AtomicU32::new(0), slots: AtomicU32::new(0), delegates: AtomicU32::new(0) };
static SLEEP: Sleep = Sleep { sleepers: AtomicU32::new(0), work_seq: AtomicU32::new(0), retire: AtomicU32::new(0) };

global_asm!(
    // coreplane_delegate_syscall(nr, args) -> result; the syscall instruction's address is
    // known so that an interrupt can tell a blocked delegated call from anything else.
    ".globl coreplane_delegate_syscall",
    "coreplane_delegate_syscall:",
    "mov rax, rdi",
    "mov rdi, [rsi]",
    "mov rdx, [rsi + 16]",
    "mov r10, [rsi + 24]",
    "mov r8, [rsi + 32]",
    "mov r9, [rsi + 40]",
    "mov rsi, [rsi + 8]",
    ".globl coreplane_delegate_site",
    "coreplane_delegate_site:",
    "syscall",
    "ret",
);

extern "C" {
    fn coreplane_delegate_syscall(nr: usize, args: *const usize) -> isize;
    fn coreplane_delegate_site();
}

fn slot(i: u32) -> &'static mut Slot {
    unsafe { &mut (*core::ptr::addr_of_mut!(SLOTS))[i as usize] }
}

fn spin_until(deadline: u64) {
    while sys::rdtsc() < deadline {
        core::hint::spin_loop();
    }
}

fn profiling() -> bool {
    !crate::env::config().profile_dir.is_empty()
}

fn forward_cost_ticks() -> u64 {
    let cfg = crate::env::config();
    cfg.forward_cost_ns * cfg.tsc_khz / 1_000_000
}

/// How long a caller polls before it sleeps, in TSC ticks (see APP_SPIN_SLACK_NS); worked out
/// at the first delegated call, not with two divisions on every one.
fn app_spin_ticks() -> u64 {
    static TICKS: AtomicU64 = AtomicU64::new(0);
    match TICKS.load(Relaxed) {
        0 => {
            let t = 2 * forward_cost_ticks() + APP_SPIN_SLACK_NS * crate::env::config().tsc_khz / 1_000_000;
            TICKS.store(t, Relaxed);
            t
        }
        t => t,
    }
}

/// The SIG_INTERRUPT handler: a delegate blocked in a call whose caller gave up (a signal
/// reached the caller) ends it; otherwise the call restarts. Ended where the kernel would restart
/// it (it rewound the call: the handler's SA_RESTART), the result is ERESTARTSYS, which its caller
/// restarts or ends with EINTR as the program's handler says; a call the kernel ends with EINTR
/// whatever the handler (a read of a socket with SO_RCVTIMEO) keeps it. On a program thread the
/// signal is the program's.
extern "C" fn on_interrupt(sig: i32, info: *mut u8, uc: *mut u8) {
    let g = gregs(uc);
    let site = coreplane_delegate_site as *const () as u64;
    let me = sys::gettid();
    let Some(d) = DELEGATES.iter().find(|d| d.tid.load(Relaxed) == me) else {
        // A program thread: the signal is the program's own (SIGRTMAX - 1 to it).
        return crate::signals::program_interrupt_signal(sig, info, uc);
    };
    let cur = d.current.load(Acquire);
    if g[REG_RIP] == site && cur != NONE && slot(cur).response.cancel.load(Acquire) != 0 {
        g[REG_RAX] = (-ERESTARTSYS) as u64;
        g[REG_RIP] = site + 2;
    }
}

/// Installs the SIG_INTERRUPT handler (`on_interrupt`) for the whole process, at start-up.
pub fn install_interrupt_handler() {
    let act = KSigaction {
        handler: on_interrupt as *const () as usize,
        flags: SA_SIGINFO | SA_RESTORER | SA_RESTART,
        restorer: coreplane_sigreturn as *const () as usize,
        mask: 0,
    };
    sigaction(SIG_INTERRUPT, Some(&act), None);
    crate::program_signal::set_before_handler(interrupt_before_handler);
}

/// Executes the request `seq` of slot `index`; `fc` is the forward cost in TSC ticks and
/// `timed` says whether anyone reads timestamps (a profile, or a forward cost to spend).
fn serve(index: u32, seq: u32, me: &Delegate, fc: u64, timed: bool) {
    let s = slot(index);
    let t_start = if timed { sys::rdtsc() } else { 0 };
    // A request is always executed, even when its caller was signalled meanwhile: natively a
    // call that does not block completes before the signal is handled. Only a call blocked
    // in the kernel is interrupted (see `cancel`).
    if fc > 0 {
        spin_until(t_start + fc);
    }
    let mut result = unsafe { coreplane_delegate_syscall(s.request.nr, s.request.args.as_ptr()) };
    // An interrupt meant for an earlier request must not fail this one.
    while result == -EINTR && s.response.cancel.load(Acquire) == 0 {
        result = unsafe { coreplane_delegate_syscall(s.request.nr, s.request.args.as_ptr()) };
    }
    s.response.result = result;
    s.response.made.store(seq, Release);
    if fc > 0 {
        spin_until(sys::rdtsc() + fc);
    }
    me.current.store(NONE, Release);
    s.response.t_start = t_start;
    // The swap is a full barrier (a locked instruction), so `waiting` is read after `done` is
    // seen: with the caller's store of `waiting` then load of `done`, one of the two sees the
    // other, and a caller that sleeps is always woken. (A plain store let the read pass it, and
    // a missed caller slept out its time-out: with a fixed 1 ms time-out, 2000 threads waiting
    // at once woke 2 million times a second and starved the delegates.) The line is being taken
    // from the caller anyway; the swap only waits for it.
    s.response.done.swap(seq, SeqCst);
    if s.response.waiting.load(SeqCst) != 0 {
        sys::futex_wake(&s.response.done as *const AtomicU32 as *const u32, 1);
    }
}

/// Claims the request waiting in slot `index`, if any, for delegate `me`, which names the slot
/// (`current`) before it claims it, and until it has stored the result: a caller that sees its
/// request claimed then sees it running (`running`), or done. Named after the claim, a request
/// claimed by a delegate preempted before naming it looked settled to
/// `interrupt_before_handler`, whose handler then ran before the call (with 1 ms between the
/// two, a read got the handler's byte 7 times in 30 where natively EINTR). A cancel that
/// reaches a delegate that names a slot but makes no call is harmless (`on_interrupt`).
fn name_and_claim(index: u32, me: &Delegate) -> Option<u32> {
    let seq = &slot(index).request.seq;
    if !seq.waiting() {
        return None;
    }
    me.current.store(index, Release);
    let claimed = seq.claim();
    if claimed.is_none() {
        me.current.store(NONE, Release);
    }
    claimed
}

/// A delegate thread, `DELEGATES[index]`: it takes no program signals, moves to the control
/// cores, then serves requests for the life of the process.
extern "C" fn delegate_main(index: usize) {
    let me = &DELEGATES[index];
    // Its creator stores the same when clone returns, maybe later than a first interrupt.
    me.tid.store(sys::gettid(), Release);
    // Delegates take no program signals, only the runtime's interrupt.
    let mask: u64 = !(1u64 << (SIG_INTERRUPT - 1));
    unsafe { syscall6(RT_SIGPROCMASK, 2 /* SIG_SETMASK */, &mask as *const u64 as usize, 0, 8, 0, 0) };
    let control = &crate::env::config().control;
    if !control.is_empty() {
        unsafe { syscall3(SCHED_SETAFFINITY, 0, core::mem::size_of_val(&control.0), control.0.as_ptr() as usize) };
    }
    let word = &SLEEP.work_seq as *const AtomicU32 as *const u32;
    // Fixed for the life of the process: worked out once, not on every call.
    let fc = forward_cost_ticks();
    let timed = fc > 0 || profiling();
    let khz = crate::env::config().tsc_khz;
    let (spin_ticks, yield_ticks) = (DELEGATE_SPIN_NS * khz / 1_000_000, YIELD_EVERY_NS * khz / 1_000_000);
    let mut cursor = 0u32;
    // When the delegate last found nothing after serving (0: it just served), and last yielded.
    let mut idle_since = 0u64;
    let mut yielded = 0u64;
    loop {
        let n = POOL.slots.load(Acquire).min(MAX_SLOTS as u32);
        let mut served = false;
        // Round-robin from the cursor; no division on this path, where a request may be waiting.
        let mut i = if cursor >= n { 0 } else { cursor };
        for _ in 0..n {
            if let Some(seq) = name_and_claim(i, me) {
                serve(i, seq, me, fc, timed);
                cursor = i + 1;
                served = true;
                break;
            }
            i += 1;
            if i == n {
                i = 0;
            }
        }
        if served {
            idle_since = 0;
            continue;
        }
        if SLEEP.retire.load(Acquire) != 0 {
            return;
        }
        let now = sys::rdtsc();
        if idle_since == 0 {
            (idle_since, yielded) = (now, now);
        }
        if now - idle_since < spin_ticks {
            if now - yielded >= yield_ticks {
                unsafe { syscall3(SCHED_YIELD, 0, 0, 0) };
                yielded = now;
            }
            core::hint::spin_loop();
            continue;
        }
        idle_since = 0;
        SLEEP.sleepers.fetch_add(1, SeqCst);
        let seen = SLEEP.work_seq.load(SeqCst);
        // Sleep unless a request came in meanwhile: a poster that saw no sleeper is seen here.
        let n = POOL.slots.load(SeqCst).min(MAX_SLOTS as u32);
        if (0..n).all(|i| !slot(i).request.seq.waiting()) {
            sys::futex_wait(word, seen, 0);
        }
        SLEEP.sleepers.fetch_sub(1, SeqCst);
    }
}

/// Starts one more delegate thread; false at the limit or when out of memory.
fn spawn_delegate() -> bool {
    let n = POOL.delegates.load(Acquire) as usize;
    if n >= MAX_DELEGATES {
        return false;
    }
    let Some(stack) = sys::map_anon(STACK_SIZE) else { return false };
    let d = &DELEGATES[n];
    d.current.store(NONE, Relaxed);
    d.tid.store(0, Relaxed);
    d.stack.store(stack as usize, Relaxed);
    let tid = sys::spawn_thread(stack as usize + STACK_SIZE, delegate_main, n);
    if tid < 0 {
        unsafe { syscall3(MUNMAP, stack as usize, STACK_SIZE, 0) };
        return false;
    }
    d.tid.store(tid as i32, Release);
    POOL.delegates.store(n as u32 + 1, Release);
    true
}

/// Takes the pool's lock, which holds the thread id of its holder; false, without it, where
/// the holder is the calling thread, interrupted by a signal whose handler delegates a call (mksh's
/// SIGCHLD handler during its first delegated call spun here for good): that call is then made
/// where it is.
fn lock() -> bool {
    let me = crate::thread::current().tid as u32;
    loop {
        match POOL.lock.compare_exchange(0, me, Acquire, Relaxed) {
            Ok(_) => return true,
            Err(holder) if holder == me => return false,
            Err(_) => core::hint::spin_loop(),
        }
    }
}
fn unlock() {
    POOL.lock.store(0, Release);
}

/// In a forked child, whose only thread is `t` (its tid the child's pid): the pool's lock may
/// have been held by another thread of the parent (growing the pool) at the fork, and no thread
/// of the child will release it; the child's first delegated call (`ensure_pool`) then rebuilds
/// the pool anyway. `in_call`: the child goes on in the runtime call that forked, and so in the
/// delegated calls in progress below it, on its copy of the stack (a program handler that ran
/// while they waited forked): `t` keeps their depth and its slots, made the child's, which
/// `ensure_pool` leaves as they are. A call there that had not completed at the fork waits for
/// a delegate of the parent's, which never answers the child's copy: it is settled with
/// ERESTARTSYS, as the kernel marks a call a signal interrupted, and `call` makes it again in the
/// child, or ends it with EINTR (natively the child's read restarts after a handler with
/// SA_RESTART; the child waited for good). Settled so, no delegate of the child takes it up, and
/// no other thread the slot. One whose call a delegate had made (`made`: its result not yet
/// given, the return trip's cost still spent) is settled with that result: natively a call the
/// kernel completed before the signal is not made again (the child's restarted read took a
/// second byte of the file). A child started afresh (on a stack of its own) has no call in
/// progress, nor slots.
pub fn child_after_fork(t: &mut Thread, in_call: bool) {
    unlock();
    if !in_call {
        (t.slots, t.depth) = ([NONE; crate::thread::MAX_DEPTH], 0);
        return;
    }
    for &index in t.slots.iter().filter(|&&i| (i as usize) < MAX_SLOTS) {
        OWNERS[index as usize].store(t.tid, Relaxed);
        let s = slot(index);
        let posted = s.request.seq.posted();
        if s.response.done.load(Relaxed) != posted {
            if s.response.made.load(Acquire) != posted {
                s.response.result = -ERESTARTSYS;
            }
            s.response.done.store(s.request.seq.settle(), Relaxed);
        }
    }
}

/// Before a fork by a thread whose delegated calls are in progress (a handler that interrupted
/// one forks): each such call a delegate has taken is interrupted and waited for until it has
/// been made or has ended, so that `child_after_fork` knows which. Natively the kernel has
/// completed the call, or interrupted it, before the handler runs; a delegate preempted between
/// its call's return and its store of `made` (a system call's exit is where a busy machine
/// preempts) showed the child a made read as not made, and the child read again
/// (`fork_after_made`: 2 of 60 forks at load 18). A call this interrupt ends where the kernel
/// would restart it ends with ERESTARTSYS (`on_interrupt`), which `call` restarts, or ends with
/// EINTR, as the handler's SA_RESTART says, in the parent as in the child; one the kernel ends
/// with EINTR whatever the handler (a read of a socket with SO_RCVTIMEO) ends so in both, as
/// natively (it restarted with its whole time-out, and the parent's and the child's read waited
/// 3 s for EAGAIN where natively EINTR: `fork_timed_read`).
pub fn settle_before_fork(t: &Thread) {
    for &index in t.slots[..t.depth as usize].iter().filter(|&&i| (i as usize) < MAX_SLOTS) {
        let s = slot(index);
        let seq = s.request.seq.posted();
        loop {
            let done = s.response.done.load(Acquire);
            if done == seq || s.response.made.load(Acquire) == seq || !s.request.seq.claimed(seq) {
                break;
            }
            // Claimed, and no delegate names it: withdrawn by this thread's own `call`, which
            // the handler interrupted before it stored `done` (only it would: waited for, the
            // fork waited for good), as `interrupt_before_handler` stops there too.
            if !running(index) {
                break;
            }
            cancel(index, t.pid);
            sleep_until_done(s, seq, done, 1_000_000);
        }
    }
}

/// Makes sure this process has its delegates (the first call, the first after a fork, whose
/// copy of the slots may hold the parent's requests in flight, and the first after `retire`,
/// whose slots stay with their threads). After a fork, the slots of the thread that forked stay
/// its own (`child_after_fork`), the others are settled and free.
/// False where the call must be made locally: the caller is a handler whose thread was
/// interrupted holding the pool's lock (`lock`), starting the delegates or retiring them (a
/// handler's call posted while they ended waited for good).
fn ensure_pool(pid: i32, tid: i32) -> bool {
    if POOL.pid.load(Acquire) == pid {
        return POOL.lock.load(Relaxed) != tid as u32;
    }
    if !lock() {
        return false;
    }
    if POOL.pid.load(Acquire) != pid {
        if POOL.pid.load(Relaxed) != -pid {
            let mut kept = 0;
            for i in 0..POOL.slots.load(Relaxed).min(MAX_SLOTS as u32) {
                if OWNERS[i as usize].load(Relaxed) == pid {
                    kept = i + 1;
                    continue;
                }
                let s = slot(i);
                s.response.done.store(s.request.seq.settle(), Relaxed);
                OWNERS[i as usize].store(0, Relaxed);
            }
            // The delegates scan the slots kept too.
            POOL.slots.store(kept, Relaxed);
        }
        POOL.delegates.store(0, Relaxed);
        SLEEP.sleepers.store(0, Relaxed);
        for _ in 0..crate::env::config().delegates.max(1) {
            spawn_delegate();
        }
        POOL.pid.store(pid, Release);
    }
    unlock();
    true
}

/// Whether process `pid` has delegate threads.
pub fn has_delegates(pid: i32) -> bool {
    POOL.pid.load(Acquire) == pid && POOL.delegates.load(Acquire) > 0
}

/// Set when the program changed its credentials while a delegate was in a call: delegates keep
/// the credentials they were made with, so from then on every call is made by its caller.
static STALE_CREDENTIALS: AtomicBool = AtomicBool::new(false);

/// The calling thread changed its credentials (uid, gid, groups, capabilities, a Landlock
/// domain). A delegate is a thread with credentials of its own, those of the thread that started
/// it: a program that dropped root still opened /etc/shadow through its delegates. The delegates are retired, so
/// that the next delegated call starts new ones with the caller's credentials; if one is in a
/// call and cannot be, delegation ends for the process.
pub fn credentials_changed(pid: i32) {
    if POOL.pid.load(Acquire) != pid || POOL.delegates.load(Acquire) == 0 {
        return;
    }
    retire(pid);
    if POOL.pid.load(Acquire) == pid && POOL.delegates.load(Acquire) > 0 {
        STALE_CREDENTIALS.store(true, Relaxed);
    }
}

/// Ends the delegates of process `pid` and waits until the kernel no longer counts them, for a
/// call it allows only in a single-threaded process (unshare(CLONE_NEWUSER)), made by the
/// program's only thread; the next delegated call starts new ones. Parked delegates would still
/// be threads. Nothing happens while a delegate is in a call (one a signal handler left by
/// longjmp): the call then fails as natively with another thread.
pub fn retire(pid: i32) {
    if !lock() {
        return;
    }
    let n = POOL.delegates.load(Acquire) as usize;
    if POOL.pid.load(Acquire) != pid || DELEGATES[..n].iter().any(|d| d.current.load(SeqCst) != NONE) {
        unlock();
        return;
    }
    SLEEP.retire.store(1, SeqCst);
    SLEEP.work_seq.fetch_add(1, SeqCst);
    sys::futex_wake(&SLEEP.work_seq as *const AtomicU32 as *const u32, MAX_DELEGATES);
    for d in &DELEGATES[..n] {
        reap(pid, d.tid.load(Acquire), d.stack.load(Relaxed), STACK_SIZE);
        d.tid.store(0, Relaxed);
    }
    POOL.delegates.store(0, Release);
    SLEEP.sleepers.store(0, Relaxed);
    SLEEP.retire.store(0, Release);
    POOL.pid.store(-pid, Release);
    unlock();
}

/// Waits until thread `tid` of process `pid`, told to end, is gone from the thread group (the
/// kernel no longer finds it: tgkill with signal 0), then frees its stack of `stack_size` bytes
/// at `stack`: for the runtime's own threads (the delegates, the memory service's).
pub(crate) fn reap(pid: i32, tid: i32, stack: usize, stack_size: usize) {
    while unsafe { syscall3(TGKILL, pid as usize, tid as usize, 0) } == 0 {
        unsafe { syscall3(SCHED_YIELD, 0, 0, 0) };
    }
    unsafe { syscall3(MUNMAP, stack, stack_size, 0) };
}

fn all_busy() -> bool {
    let n = POOL.delegates.load(Acquire) as usize;
    DELEGATES[..n].iter().all(|d| d.current.load(SeqCst) != NONE)
}

/// Grows the pool when a request waits while every delegate is busy in a call. False when
/// every delegate is busy and none could be added (the pool is at MAX_DELEGATES, the kernel
/// refuses a thread, or the caller is a handler whose thread was interrupted holding the lock).
fn maybe_grow() -> bool {
    if !all_busy() {
        return true;
    }
    match POOL.lock.load(Relaxed) {
        0 => {}
        holder if holder == crate::thread::current().tid as u32 => return false,
        _ => return true, // another caller is growing it
    }
    if !lock() {
        return false;
    }
    let grown = !all_busy() || spawn_delegate();
    unlock();
    grown
}

/// Interrupts the delegate running `index`, if one is: a call it is blocked in ends
/// (`on_interrupt`).
/// Called again while the caller waits, for a delegate that takes the request up later.
fn cancel(index: u32, pid: i32) {
    slot(index).response.cancel.store(1, SeqCst);
    let n = POOL.delegates.load(Acquire) as usize;
    for d in &DELEGATES[..n] {
        if d.current.load(Acquire) == index {
            unsafe { syscall3(TGKILL, pid as usize, d.tid.load(Relaxed) as usize, SIG_INTERRUPT) };
        }
    }
}

/// Whether a delegate is making the call of slot `index` (it has taken the request and not yet
/// its result).
fn running(index: u32) -> bool {
    let n = POOL.delegates.load(Acquire) as usize;
    DELEGATES[..n].iter().any(|d| d.current.load(Acquire) == index)
}

/// The program's handler for `sig` is about to run on thread `t`, whose signal interrupted the
/// runtime call of record `entry`. Where that call waits for a delegate, the delegate's call is
/// interrupted now, and its outcome settled, before the handler runs, as the kernel interrupts a
/// call before it runs the handler: the result it already had; EINTR where the kernel ends the
/// call so, or where it would restart it and `sig` does not; else ERESTARTSYS, which `call`
/// makes again after the handler. Interrupted after, a read of a pipe got the byte the handler
/// wrote into it (1 where natively EINTR), and nanosleep's time left counted the handler's; not
/// interrupted for a handler with SA_RESTART, a read of a socket with a receive time-out ran it
/// out (EAGAIN after 3 s where natively EINTR at once: `fork_timed_read nofork`). A request no
/// delegate has taken yet is waited for as in `call` (it is interrupted once taken, should it
/// block), or withdrawn, to be made again or ended with EINTR, where none can take it.
pub fn interrupt_before_handler(t: &Thread, entry: usize, sig: i32) {
    if t.depth == 0 || t.delegated_at != entry {
        return;
    }
    let index = t.slots[t.depth as usize - 1];
    let s = slot(index);
    let seq = s.request.seq.posted();
    let restarts = crate::signals::restarts(sig, s.request.nr);
    loop {
        let done = s.response.done.load(Acquire);
        let claimed = s.request.seq.claimed(seq);
        // Done, or about to be: made (its result is known), or withdrawn by `call` itself.
        if done == seq || claimed && !running(index) {
            break;
        }
        // Sent again every 1 ms: a delegate still spending its forward cost before the call
        // misses it.
        cancel(index, t.pid);
        if !claimed && withdrawn(s, seq, t.pid) {
            s.response.result = if restarts { -ERESTARTSYS } else { -EINTR };
            s.response.t_start = 0;
            return;
        }
        sleep_until_done(s, seq, done, 1_000_000);
    }
    // Ended where the kernel would have restarted it (`on_interrupt`): `call` makes it again
    // after the handler where the handler restarts it, else it ends with EINTR.
    if s.response.result == -ERESTARTSYS && !restarts {
        s.response.result = -EINTR;
    }
}

/// Request `seq` of slot `s`, which no delegate has taken: a sleeping delegate is woken, or
/// the pool grows where every delegate is busy; where it cannot, the request is withdrawn
/// (true), to be answered by its caller. Left waiting, it could wait for good: with 64 delegates
/// blocked in reads of pipes, the writes that would end them queued behind them (hackbench -T
/// hung). So is one posted in process `pid` without delegates of its own: a child forked after
/// its caller's look at the pool and before the post (a handler that ran there forked).
fn withdrawn(s: &Slot, seq: u32, pid: i32) -> bool {
    wake_a_sleeper();
    if (has_delegates(pid) && maybe_grow()) || s.request.seq.claim() != Some(seq) {
        return false;
    }
    s.response.done.store(seq, Release);
    crate::profile::count_withdrawn_call();
    true
}

/// The caller sleeps until request `seq` of slot `s` completes (its completion word no longer
/// `done`), a signal comes, or `timeout_ns` passes.
fn sleep_until_done(s: &Slot, seq: u32, done: u32, timeout_ns: u64) {
    s.response.waiting.store(1, SeqCst);
    if s.response.done.load(SeqCst) != seq {
        sys::futex_wait(&s.response.done as *const AtomicU32 as *const u32, done, timeout_ns);
    }
    s.response.waiting.store(0, Relaxed);
}

/// Wakes one sleeping delegate, if any.
fn wake_a_sleeper() {
    if SLEEP.sleepers.load(Relaxed) > 0 {
        SLEEP.work_seq.fetch_add(1, SeqCst);
        sys::futex_wake(&SLEEP.work_seq as *const AtomicU32 as *const u32, 1);
    }
}

/// A slot for thread `t`: one a thread gave back, else a new one, else (all 4096 taken) one
/// whose thread ended unseen by the runtime, which the kernel no longer knows (a thread that a
/// seccomp filter killed with SECCOMP_RET_KILL_THREAD, or whose exit reached the kernel directly:
/// one in seccomp strict mode, or traced after PTRACE_TRACEME); None when every slot belongs
/// to a live thread. Taken with a compare-and-swap on its owner, as other threads look too.
/// `dead_owners`: whether to look for the last kind (a kernel call per slot, ≈ 1 ms for 4096):
/// not when a release sent every slotless thread to look (the slot given back is free, or
/// already taken by one of them), only at a thread's first look and every LOOK_AGAIN_EVERY-th
/// call.
fn take_slot(t: &Thread, dead_owners: bool) -> Option<u32> {
    let take = |i: u32, from: i32| OWNERS[i as usize].compare_exchange(from, t.tid, AcqRel, Relaxed).is_ok();
    loop {
        let n = POOL.slots.load(Acquire).min(MAX_SLOTS as u32);
        if let Some(i) = (0..n).find(|&i| OWNERS[i as usize].load(Relaxed) == 0 && take(i, 0)) {
            return Some(i);
        }
        if n == MAX_SLOTS as u32 {
            break;
        }
        let i = POOL.slots.fetch_add(1, AcqRel);
        if i as usize >= MAX_SLOTS {
            break;
        }
        // Another thread's scan may have taken it meanwhile: then look again.
        if take(i, 0) {
            return Some(i);
        }
    }
    if !dead_owners {
        return None;
    }
    (0..MAX_SLOTS as u32).find(|&i| {
        let owner = OWNERS[i as usize].load(Acquire);
        let s = slot(i);
        owner != 0
            && owner != t.tid
            && unsafe { syscall3(TGKILL, t.pid as usize, owner as usize, 0) } == -ESRCH
            && s.request.seq.at_rest(s.response.done.load(Acquire))
            && take(i, owner)
    })
}

/// Thread `t` exits through the runtime: its slots go back to the pool. A call of its own that
/// a delegate has not taken yet is withdrawn; one a delegate is making (the thread exits from a
/// signal handler that ran while it waited) is interrupted, as a signal without SA_RESTART
/// interrupts it (a blocked read returns EINTR), and waited for: natively the call ended with
/// the thread, and a delegate still making it would take what the program's other threads are
/// to get (the read's data: `slot_churn abandon`). Only then is the slot free.
pub fn release_slots(t: &mut Thread) {
    for depth in 0..crate::thread::MAX_DEPTH {
        let index = t.slots[depth];
        if index as usize >= MAX_SLOTS {
            continue;
        }
        let s = slot(index);
        if let Some(seq) = s.request.seq.claim() {
            s.response.done.store(seq, Release);
        }
        loop {
            let done = s.response.done.load(Acquire);
            if s.request.seq.at_rest(done) {
                break;
            }
            cancel(index, t.pid);
            s.response.waiting.store(1, SeqCst);
            if s.response.done.load(SeqCst) == done {
                sys::futex_wait(&s.response.done as *const AtomicU32 as *const u32, done, 1_000_000);
            }
            s.response.waiting.store(0, Relaxed);
        }
        t.slots[depth] = NONE;
        OWNERS[index as usize].store(0, Release);
        RELEASED.fetch_add(1, Release);
    }
}

/// Whether thread `t`, which found no slot, looks for one again now (Some), and whether for
/// slots of dead threads too (`take_slot`): one was given back since it last looked (free slots
/// only), or this is its LOOK_AGAIN_EVERY-th call without one (every kind).
fn look_again(t: &mut Thread) -> Option<bool> {
    t.slotless_calls = t.slotless_calls.wrapping_add(1);
    if t.slotless_calls % LOOK_AGAIN_EVERY == 0 {
        Some(true)
    } else {
        (RELEASED.load(Relaxed) != t.slots_released_seen).then_some(false)
    }
}

/// Program handlers finished on `t`; read afresh because a nested trap updates it.
fn handlers_done(t: &Thread) -> u64 {
    unsafe { core::ptr::read_volatile(&t.handlers_done) }
}

/// Whether program handlers finished on `t` since the `seen`-th (which this moves on), the last
/// for a signal that does not restart call `nr`.
fn interrupted_by_handler(t: &Thread, seen: &mut u64, nr: usize) -> bool {
    let done = handlers_done(t);
    if done == *seen {
        return false;
    }
    *seen = done;
    let signo = unsafe { core::ptr::read_volatile(&t.last_signo) };
    !crate::signals::restarts(signo, nr)
}

/// Runs syscall `nr` on a delegate and waits for it. Returns (result, TSC at posting,
/// round-trip ticks, queued ticks), or None when the call must run locally (no slot left, as
/// counted in the profile, or a process that shares its parent's memory).
pub fn call(t: &mut Thread, nr: usize, args: &[usize; 6]) -> Option<(isize, u64, u64, u64)> {
    if t.calls_locally() || STALE_CREDENTIALS.load(Relaxed) {
        return None;
    }
    if !ensure_pool(t.pid, t.tid) {
        return None;
    }
    // No delegate could be started: after unshare(CLONE_NEWPID) the kernel refuses new threads
    // (EINVAL) to the process for good, natively too; its calls are made where it is.
    if POOL.delegates.load(Relaxed) == 0 {
        return None;
    }
    let depth = t.depth as usize;
    if depth >= crate::thread::MAX_DEPTH {
        return None;
    }
    let look = match t.slots[depth] {
        NONE => Some(true),
        NO_SLOT => look_again(t),
        _ => None,
    };
    if let Some(dead_owners) = look {
        // Read before the look: a slot given back during it is looked for at the next call.
        t.slots_released_seen = RELEASED.load(Acquire);
        t.slots[depth] = take_slot(t, dead_owners).unwrap_or(NO_SLOT);
    }
    if t.slots[depth] == NO_SLOT {
        crate::profile::count_slotless_call();
        return None;
    }
    let index = t.slots[depth];
    t.depth += 1;
    let outer_at = core::mem::replace(&mut t.delegated_at, t.entry);
    let s = slot(index);
    // Reading first keeps the response line shared: it is written only after a cancel.
    if s.response.cancel.load(Relaxed) != 0 {
        s.response.cancel.store(0, Relaxed);
    }
    s.request.nr = nr;
    s.request.args = *args;
    let timed = profiling();
    let t_post = if timed { sys::rdtsc() } else { 0 };
    // No full barrier here either: a delegate that fell asleep without seeing this request is
    // woken again below, once the caller stops polling.
    let seq = s.request.seq.post();
    wake_a_sleeper();
    let mut handlers_seen = handlers_done(t);
    let spin_until = sys::rdtsc() + app_spin_ticks();
    let mut spinning = true;
    let mut cancelled = false;
    let mut unclaimed_wait = 1_000_000;
    loop {
        let done = s.response.done.load(Acquire);
        if done == seq {
            break;
        }
        if !cancelled && interrupted_by_handler(t, &mut handlers_seen, nr) {
            cancelled = true;
            cancel(index, t.pid);
        }
        if spinning {
            spinning = sys::rdtsc() < spin_until;
            core::hint::spin_loop();
            continue;
        }
        let claimed = s.request.seq.claimed(seq);
        if !claimed {
            // Withdrawn: made here, or (a handler that does not restart it has run) EINTR.
            // Read afresh: a fork since the call began changed it.
            if withdrawn(s, seq, unsafe { core::ptr::read_volatile(&t.pid) }) {
                (t.delegated_at, t.depth) = (outer_at, t.depth - 1);
                return cancelled.then_some((-EINTR, t_post, 0, 0));
            }
        } else if cancelled {
            cancel(index, t.pid);
        }
        // Woken by the completion, or by a signal (a time-out makes the kernel end the wait
        // with EINTR after a handler, never restart it). Without those: a request no delegate
        // has taken looks for one again after 1, 2, 4 … 32 ms (all may be blocked, and the pool
        // grows); a cancelled one sends its interrupt again every 1 ms; a taken one waits.
        let timeout = if cancelled {
            1_000_000
        } else if !claimed {
            let wait = unclaimed_wait;
            unclaimed_wait = (wait * 2).min(UNCLAIMED_WAIT_MAX_NS);
            wait
        } else {
            TAKEN_WAIT_NS
        };
        sleep_until_done(s, seq, done, timeout);
    }
    let end = if timed { sys::rdtsc() } else { 0 };
    let result = s.response.result;
    let queued = s.response.t_start.saturating_sub(t_post);
    (t.delegated_at, t.depth) = (outer_at, t.depth - 1);
    if result == -ERESTARTSYS {
        // In a child forked while the call waited (`child_after_fork`): the handler that forked
        // has run, in the child too.
        if cancelled || interrupted_by_handler(t, &mut handlers_seen, nr) {
            return Some((-EINTR, t_post, 0, 0));
        }
        return call(t, nr, args);
    }
    Some((result, t_post, end - t_post, queued))
}
