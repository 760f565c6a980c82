//! The fast path: a syscall site that trapped once is rewritten to reach the runtime directly.
//! Its next calls enter `coreplane_fast_entry` without a trap; plain local calls are then made
//! and counted in a few instructions of assembly, others go to `dispatch::handle`. Two rewrites:
//! - relocating (the default): `mov eax, nr` before the `syscall`
//!   becomes `jmp rel32` to a per-site stub in a trampoline page near the code (see
//!   coreplane_runtime::reloc); page 0 stays unmapped, so NULL reads, writes and calls fault;
//! - the page-0 sled (`--null-page-sled` only): `syscall` (0f 05) becomes `call *%rax` (ff d0)
//!   into a sled at address 0 that covers every number. Page 0 is mapped execute-only, which a
//!   CPU without protection keys cannot enforce (there it is readable); with them NULL reads and
//!   writes fault, but a NULL call enters the sled and so the runtime, where natively it faults:
//!   it was the default with protection keys until a machine that has them ran the NULL-call
//!   test (session 12). Mapping page 0 needs CAP_SYS_RAWIO (vm.mmap_min_addr is not changed).
//!   A site that may run on a small stack (Go's Syscall6) is relocated even then: the sled
//!   enters the ordinary entry, whose Rust path would run on that stack.
//! In-place writes are atomic for other threads executing the same bytes (see `store_bytes`);
//! a site that cannot be written so stays on the Syscall User Dispatch trap.

use crate::rewrite_lock;
use crate::sys::*;
use core::arch::global_asm;
use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering::*};
use coreplane_runtime::profile_layout as L;
use coreplane_runtime::reloc::{self, Write, MAX_SETUP, SHORT_PATCH_LEN, STUB_SIZE};
use coreplane_runtime::sysset::SysSet;

const MEMBARRIER: usize = 324;
const MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE: usize = 1 << 5;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE: usize = 1 << 6;
const MAP_FIXED_NOREPLACE: usize = 0x10_0000;

/// The sled covers every syscall number below 512 (larger ones are bounced to the trap).
/// It repeats a 14-byte period of nine 0x3e bytes (the DS override, ignored in 64-bit mode)
/// and five 0x3d bytes: from any offset this decodes as one `cmp eax, imm32` with up to nine
/// prefixes, which changes only the flags (a syscall does not preserve them for compiled code
/// either). A call slides up to 14 bytes per instruction, 38 instructions from address 0, where
/// one-byte NOPs would take 512. The sled ends on a whole period; the pad after it, thirteen
/// prefixes and a NOP, is one instruction from any offset, and the jump to
/// `coreplane_fast_entry` follows. (Checked from every offset with objdump.)
const SLED_PERIOD: [u8; 14] = [0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d];
const SLED_END: usize = 37 * SLED_PERIOD.len();
const PAD: [u8; 14] = [0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x90];
const JUMP_AT: usize = SLED_END + PAD.len();
/// `syscall; ret`: a call that needs the full trap path (its ucontext) is bounced here.
const TRAP_GADGET: [u8; 3] = [0x0f, 0x05, 0xc3];
/// `add rsp, 8; syscall`: the same for rt_sigreturn, whose frame starts above the return address.
const SIGRETURN_GADGET: [u8; 6] = [0x48, 0x83, 0xc4, 0x08, 0x0f, 0x05];
/// Where the gadgets lie in page 0 (sled) or in the gadget page (relocating).
const TRAP_GADGET_AT: usize = 0x700;
const SIGRETURN_GADGET_AT: usize = 0x710;

/// Which rewrite this process uses.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Mode {
    /// No rewrite: every call traps.
    Trap = 0,
    Sled = 1,
    Relocate = 2,
}
static MODE: AtomicU8 = AtomicU8::new(Mode::Trap as u8);

/// Calls made in assembly: neither delegated nor answered by the runtime.
#[no_mangle]
static mut COREPLANE_FAST_LOCAL: [u64; 8] = [0; 8];
/// 2·(N − 1) for a mean gap of N calls between timed local calls (profile_layout::S_TIMED).
#[no_mangle]
static mut COREPLANE_SAMPLE_MASK: u64 = 0;
/// Calls that must go through the trap path even from a rewritten site.
#[no_mangle]
static mut COREPLANE_FAST_BOUNCE: [u64; 8] = [0; 8];
/// Addresses of the trap and rt_sigreturn gadgets; outside the runtime's text, so that a
/// syscall there traps.
#[no_mangle]
static mut COREPLANE_TRAP_GADGETS: [usize; 2] = [0; 2];

global_asm!(
    // Every rewritten site enters here, Go's Syscall6 on a goroutine's few KiB among them: the
    // local branch stays in asm and takes at most ≈ 300 bytes below the caller's rsp (the
    // stub's and the entry's 128-byte skips, the return address, up to four pushes; Go keeps
    // ≈ 800 bytes below a nosplit chain), and every other call runs its Rust on the thread's
    // runtime stack (label 5).
    ".globl coreplane_fast_entry",
    "coreplane_fast_entry:",
    // rsp: return address (site + 2); rax: syscall number; rcx and r11 are free, as after
    // a real syscall. The 128-byte red zone below the caller's stack is skipped.
    "cmp rax, 512",
    "jae 8f",
    // The sets' words are loaded first: `bt` on a memory operand with a register offset is
    // microcoded (≈ 10 µops), on a register one µop.
    "mov ecx, eax",
    "shr ecx, 6",
    "lea r11, [rip + COREPLANE_FAST_BOUNCE]",
    "mov r11, [r11 + rcx * 8]",
    "bt r11, rax",
    "jc 9f",
    "lea rsp, [rsp - 128]",
    "lea r11, [rip + COREPLANE_FAST_LOCAL]",
    "mov r11, [r11 + rcx * 8]",
    "bt r11, rax",
    "jnc 5f",
    // Local call, counted when the thread has a profile block (Thread.prof at gs:[16]). Its
    // row: rcx = prof + T_STATS + nr * ROW. Counts are exact; the time is taken for the first
    // calls of a syscall and then for one call in a random gap (profile_layout::S_TIMED).
    "mov rcx, gs:[16]",
    "test rcx, rcx",
    "jz 4f",
    // A thread whose rdtsc faults (Thread.no_tsc) makes its calls untimed, as in `dispatch::run`.
    "cmp byte ptr gs:[{no_tsc}], 0",
    "jne 4f",
    "mov r11, rax",
    "imul r11, r11, {row}",
    "cmp qword ptr [rcx + r11 + {stats} + {timed}], {first}",
    "jb 3f",
    "cmp qword ptr [rcx + {left}], 1",
    "jbe 6f",
    // Untimed. Nothing is stored before the call (it made the kernel entry slower); stack [row].
    "push r11",
    "syscall",
    "mov rcx, gs:[16]",
    "mov r11, [rsp]",
    "dec qword ptr [rcx + {left}]",
    "inc qword ptr [rcx + r11 + {stats} + {count}]",
    "cmp rax, -4095",
    "jae 15f",
    "add [rcx + r11 + {stats} + {bytes}], rax",
    "17:",
    "lea rsp, [rsp + 136]",
    "ret",
    // Errors are counted out of line: a successful call takes no jump.
    "15:",
    "inc qword ptr [rcx + r11 + {stats} + {errors}]",
    "jmp 17b",
    // The next gap: 1 + (xorshift64 & COREPLANE_SAMPLE_MASK), whose mean is the sample period.
    "6:",
    "push rdx",
    "push rax",
    "mov rax, [rcx + {rng}]",
    "mov rdx, rax",
    "shl rdx, 13",
    "xor rax, rdx",
    "mov rdx, rax",
    "shr rdx, 7",
    "xor rax, rdx",
    "mov rdx, rax",
    "shl rdx, 17",
    "xor rax, rdx",
    "mov [rcx + {rng}], rax",
    "and rax, [rip + COREPLANE_SAMPLE_MASK]",
    "inc rax",
    "mov [rcx + {left}], rax",
    "jmp 2f",
    // Timed: stack [t0, nr, rdx] around the call, then [result, t0, nr, rdx].
    "3:",
    "push rdx",
    "push rax",
    "2:",
    "lfence",
    "rdtsc",
    "shl rdx, 32",
    "or rax, rdx",
    "push rax",
    "mov rax, [rsp + 8]",
    "mov rdx, [rsp + 16]",
    "syscall",
    "push rax",
    "lfence",
    "rdtsc",
    "shl rdx, 32",
    "or rax, rdx",
    "sub rax, [rsp + 8]",
    "mov rcx, [rsp + 16]",
    "imul rcx, rcx, {row}",
    "add rcx, gs:[16]",
    "add [rcx + {stats} + {ticks}], rax",
    // One of the first calls (timed < first, as at the entry): always timed, kept apart.
    "cmp qword ptr [rcx + {stats} + {timed}], {first}",
    "jae 12f",
    "add [rcx + {stats} + {exact_ticks}], rax",
    "inc qword ptr [rcx + {stats} + {exact}]",
    "12:",
    "inc qword ptr [rcx + {stats} + {timed}]",
    "inc qword ptr [rcx + {stats} + {count}]",
    "mov rax, [rsp + 8]",
    "mov [rcx + {stats} + {last}], rax",
    "cmp qword ptr [rcx + {stats} + {first_tsc}], 0",
    "jne 11f",
    "mov [rcx + {stats} + {first_tsc}], rax",
    "11:",
    "mov rax, [rsp]",
    "cmp rax, -4095",
    "jae 16f",
    "add [rcx + {stats} + {bytes}], rax",
    "18:",
    "mov rdx, [rsp + 24]",
    "lea rsp, [rsp + 160]",
    "ret",
    "16:",
    "inc qword ptr [rcx + {stats} + {errors}]",
    "jmp 18b",
    "4:",
    "lea rsp, [rsp + 128]",
    "syscall",
    "ret",
    // Anything else: in Rust, with the argument registers and xmm0-15 saved (the syscall ABI
    // preserves them, compiled Rust may not).
    "5:",
    ".globl coreplane_fast_rust",
    "coreplane_fast_rust:",
    "push r9",
    "push r8",
    "push r10",
    "push rdx",
    "push rsi",
    "push rdi",
    "mov rsi, rsp",
    "mov rcx, rsp",
    // Onto the thread's runtime stack, the rest of its Thread mapping (the program's stack may
    // be a goroutine's, a few KiB with no guard page below), from its top. Not when already on
    // it (a handler without a signal stack of its own interrupted a call there: it goes on
    // below), nor when a call is in progress there (Thread.rt_sp below the top) and this one
    // comes from elsewhere: a handler on its own signal stack, whose call stays on that stack,
    // as all calls did before session 8, since the interrupted call's frames below rt_sp are
    // still live. A call that a handler's longjmp abandoned leaves rt_sp set, and the thread's
    // calls then stay on the caller's stack too. Nor when the call is made on the program's
    // signal stack (Thread.program_signal_stack): off it, the kernel would start the frame of
    // a signal that comes during the call at the signal stack's top, over the frames of the
    // handler that made the call (stress-ng's timer stressor died of SIGSEGV so).
    "mov r11, gs:[0]",
    "lea rdx, [r11 + {thread_size}]",
    "cmp rsp, r11",
    "jbe 21f",
    "cmp rsp, rdx",
    "jbe 22f",
    "21:",
    "cmp rsp, gs:[{signal_stack}]",
    "jb 23f",
    "cmp rsp, gs:[{signal_stack} + 8]",
    "jbe 22f",
    "23:",
    "cmp rdx, gs:[{rt_sp}]",
    "jne 22f",
    "mov rsp, rdx",
    "22:",
    "and rsp, -16",
    "sub rsp, 256",
    "movdqu [rsp + 0], xmm0",
    "movdqu [rsp + 16], xmm1",
    "movdqu [rsp + 32], xmm2",
    "movdqu [rsp + 48], xmm3",
    "movdqu [rsp + 64], xmm4",
    "movdqu [rsp + 80], xmm5",
    "movdqu [rsp + 96], xmm6",
    "movdqu [rsp + 112], xmm7",
    "movdqu [rsp + 128], xmm8",
    "movdqu [rsp + 144], xmm9",
    "movdqu [rsp + 160], xmm10",
    "movdqu [rsp + 176], xmm11",
    "movdqu [rsp + 192], xmm12",
    "movdqu [rsp + 208], xmm13",
    "movdqu [rsp + 224], xmm14",
    "movdqu [rsp + 240], xmm15",
    "push rcx",
    "push qword ptr gs:[{rt_sp}]",
    "mov gs:[{rt_sp}], rsp",
    // The call's record for a signal that interrupts it (program_signal::Entry): the program's
    // callee-saved registers, which the Rust below may keep anywhere.
    "push rbx",
    "push rbp",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    // Its mark: its address (two pushes on) xor FAST; rdx is saved above.
    "mov rdx, [rip + COREPLANE_FAST_MARK]",
    "lea r11, [rsp - 16]",
    "xor r11, rdx",
    "push r11",
    "push qword ptr gs:[{entry}]",
    "mov gs:[{entry}], rsp",
    "mov rdi, rax",
    "call coreplane_fast_dispatch",
    "pop qword ptr gs:[{entry}]",
    "mov qword ptr [rsp], 0",
    "add rsp, 56",
    "pop qword ptr gs:[{rt_sp}]",
    "pop rcx",
    "movdqu xmm0, [rsp + 0]",
    "movdqu xmm1, [rsp + 16]",
    "movdqu xmm2, [rsp + 32]",
    "movdqu xmm3, [rsp + 48]",
    "movdqu xmm4, [rsp + 64]",
    "movdqu xmm5, [rsp + 80]",
    "movdqu xmm6, [rsp + 96]",
    "movdqu xmm7, [rsp + 112]",
    "movdqu xmm8, [rsp + 128]",
    "movdqu xmm9, [rsp + 144]",
    "movdqu xmm10, [rsp + 160]",
    "movdqu xmm11, [rsp + 176]",
    "movdqu xmm12, [rsp + 192]",
    "movdqu xmm13, [rsp + 208]",
    "movdqu xmm14, [rsp + 224]",
    "movdqu xmm15, [rsp + 240]",
    "mov rsp, rcx",
    "pop rdi",
    "pop rsi",
    "pop rdx",
    "pop r10",
    "pop r8",
    "pop r9",
    "lea rsp, [rsp + 128]",
    "ret",
    // Bounced to the trap path.
    "8:",
    "9:",
    "cmp rax, 15",
    "je 7f",
    "jmp qword ptr [rip + COREPLANE_TRAP_GADGETS]",
    "7:",
    "jmp qword ptr [rip + COREPLANE_TRAP_GADGETS + 8]",
    row = const L::STAT_FIELDS * 8,
    stats = const L::T_STATS,
    count = const L::S_COUNT * 8,
    errors = const L::S_ERRORS * 8,
    bytes = const L::S_BYTES * 8,
    ticks = const L::S_TOTAL_TICKS * 8,
    timed = const L::S_TIMED * 8,
    exact = const L::S_EXACT * 8,
    exact_ticks = const L::S_EXACT_TICKS * 8,
    first_tsc = const L::S_FIRST_TSC * 8,
    last = const L::S_LAST_TSC * 8,
    first = const L::TIME_FIRST,
    left = const L::T_SAMPLE_LEFT,
    rng = const L::T_SAMPLE_RNG,
    no_tsc = const core::mem::offset_of!(crate::thread::Thread, no_tsc),
    thread_size = const crate::thread::THREAD_SIZE,
    rt_sp = const core::mem::offset_of!(crate::thread::Thread, rt_sp),
    signal_stack = const core::mem::offset_of!(crate::thread::Thread, program_signal_stack),
    entry = const core::mem::offset_of!(crate::thread::Thread, entry),
);

extern "C" {
    fn coreplane_fast_entry();
}

/// This process's rewrite, once `install` has chosen it.
fn mode() -> Mode {
    match MODE.load(Relaxed) {
        1 => Mode::Sled,
        2 => Mode::Relocate,
        _ => Mode::Trap,
    }
}

/// Whether sites are rewritten at all.
fn enabled() -> bool {
    mode() != Mode::Trap
}

/// Calls that block until another thread or process acts (the models' wait calls): the Rust
/// path times every one. A sample would scale a few long waits up to a thread's blocked time
/// (xz -T2's main thread: 9 of 15 futex calls timed, 73 ms of waiting in a 65 ms life).
fn always_timed(nr: usize) -> bool {
    matches!(nr, FUTEX | WAIT4 | WAITID)
}

/// Whether the fast path makes call `nr` in its assembly, unless told otherwise
/// (`route_through_runtime`): a call made where it is, neither timed always nor seen by the runtime.
fn made_in_assembly(nr: usize) -> bool {
    !crate::call_kinds::needs_trap(nr) && !crate::env::config().delegated.contains(nr)
        && !crate::call_kinds::answered_by_runtime(nr) && !always_timed(nr)
}

/// Sends call `nr` through the runtime's dispatch from rewritten sites too (`through`), or back
/// to the assembly where that is where it is made (`task_view` watches a few reads so).
pub fn route_through_runtime(nr: usize, through: bool) {
    if !made_in_assembly(nr) {
        return;
    }
    let word = unsafe { &*(core::ptr::addr_of!(COREPLANE_FAST_LOCAL[nr / 64]) as *const core::sync::atomic::AtomicU64) };
    if through {
        word.fetch_and(!(1 << (nr % 64)), Relaxed);
    } else {
        word.fetch_or(1 << (nr % 64), Relaxed);
    }
}

/// Sends every call of the process through the trap path from rewritten sites too (`all`: the
/// program's own Syscall User Dispatch is on, see `program_sud`), or only those that need the
/// trap's frame (`call_kinds::needs_trap`).
pub fn bounce_every_call(all: bool) {
    let mut bounce = SysSet::EMPTY;
    for nr in (0..coreplane_runtime::sysset::MAX_SYSCALLS).filter(|&nr| all || crate::call_kinds::needs_trap(nr)) {
        bounce.insert(nr);
    }
    for (w, bits) in bounce.0.iter().enumerate() {
        let word = unsafe { &*(core::ptr::addr_of!(COREPLANE_FAST_BOUNCE[w]) as *const core::sync::atomic::AtomicU64) };
        word.store(*bits, Relaxed);
    }
}

/// Where the program resumes after a fast-path call from a rewritten site whose return address
/// `ret` lies at `slot` on the program's stack: its stack pointer and instruction pointer. From a
/// relocated site the call returns into the site's stub, which gives back the red zone it skipped
/// and jumps behind the site's `syscall`; from the sled, to the site itself.
pub fn program_resumes(slot: usize, ret: usize) -> (usize, usize) {
    match in_stub(ret).then(|| reloc::stub_resumes_at(ret, unsafe { &*(ret as *const [u8; 13]) })).flatten() {
        Some(site) => (slot + 8 + reloc::STUB_RED_ZONE, site),
        None => (slot + 8, ret),
    }
}

/// Whether a trapped call was bounced from a rewritten site (its `syscall` is the trap gadget's,
/// `after_syscall` the address after it): the site's return address then lies on the stack.
pub fn bounced(after_syscall: usize) -> bool {
    unsafe { COREPLANE_TRAP_GADGETS[0] != 0 && after_syscall == COREPLANE_TRAP_GADGETS[0] + 2 }
}

/// Fills the call tables and sets up the rewrite: the sled when asked for (and page 0 can be
/// mapped), else the relocating rewrite.
pub fn install() {
    let cfg = crate::env::config();
    let mut local = SysSet::EMPTY;
    for nr in (0..coreplane_runtime::sysset::MAX_SYSCALLS).filter(|&nr| !crate::call_kinds::needs_trap(nr)) {
        if made_in_assembly(nr) {
            local.insert(nr);
        }
    }
    bounce_every_call(false);
    unsafe {
        COREPLANE_FAST_LOCAL = local.0;
        COREPLANE_SAMPLE_MASK = 2 * (cfg.time_every.max(1) - 1);
    }
    let mode = if cfg.null_page_sled && install_sled() {
        Mode::Sled
    } else if install_relocating() {
        Mode::Relocate
    } else {
        Mode::Trap
    };
    if mode != Mode::Trap {
        let sync_core = unsafe { syscall3(MEMBARRIER, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) };
        SYNC_CORE_OK.store(sync_core == 0, Relaxed);
    }
    MODE.store(mode as u8, Release);
}

/// Maps the page-0 sled execute-only; false without CAP_SYS_RAWIO.
fn install_sled() -> bool {
    unsafe {
        let p = syscall6(MMAP, 0, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, usize::MAX, 0);
        if p != 0 {
            return false;
        }
        let mut image = [0x90u8; PAGE];
        for chunk in image[..SLED_END].chunks_mut(SLED_PERIOD.len()) {
            chunk.copy_from_slice(&SLED_PERIOD);
        }
        image[SLED_END..JUMP_AT].copy_from_slice(&PAD);
        // movabs r11, coreplane_fast_entry; jmp r11
        let entry = (coreplane_fast_entry as *const () as u64).to_le_bytes();
        image[JUMP_AT..JUMP_AT + 2].copy_from_slice(&[0x49, 0xbb]);
        image[JUMP_AT + 2..JUMP_AT + 10].copy_from_slice(&entry);
        image[JUMP_AT + 10..JUMP_AT + 13].copy_from_slice(&[0x41, 0xff, 0xe3]);
        put_gadgets(&mut image);
        // Address 0 may not be written from Rust (a null pointer); the copy is done in asm.
        core::arch::asm!("rep movsb", inout("rcx") PAGE => _, inout("rdi") 0usize => _,
                         inout("rsi") image.as_ptr() => _, options(nostack, preserves_flags));
        // Execute-only: with protection keys, reads and writes of page 0 still fault.
        if syscall3(MPROTECT, 0, PAGE, PROT_EXEC) != 0 {
            syscall3(MUNMAP, 0, PAGE, 0);
            return false;
        }
        COREPLANE_TRAP_GADGETS = [TRAP_GADGET_AT, SIGRETURN_GADGET_AT];
    }
    true
}

fn put_gadgets(page: &mut [u8; PAGE]) {
    page[TRAP_GADGET_AT..TRAP_GADGET_AT + TRAP_GADGET.len()].copy_from_slice(&TRAP_GADGET);
    page[SIGRETURN_GADGET_AT..SIGRETURN_GADGET_AT + SIGRETURN_GADGET.len()].copy_from_slice(&SIGRETURN_GADGET);
}

/// The relocating rewrite's set-up: a page of gadgets outside the runtime's text.
fn install_relocating() -> bool {
    let Some(page) = map_code(0, false) else { return false };
    let mut image = [0xccu8; PAGE];
    put_gadgets(&mut image);
    unsafe {
        core::ptr::copy_nonoverlapping(image.as_ptr(), page as *mut u8, PAGE);
        if syscall3(MPROTECT, page, PAGE, PROT_READ | PROT_EXEC) != 0 {
            return false;
        }
        COREPLANE_TRAP_GADGETS = [page + TRAP_GADGET_AT, page + SIGRETURN_GADGET_AT];
    }
    true
}

/// A fresh read-write page at `hint` (exactly there when `exact`, else anywhere).
fn map_code(hint: usize, exact: bool) -> Option<usize> {
    let flags = MAP_PRIVATE | MAP_ANONYMOUS | if exact { MAP_FIXED_NOREPLACE } else { 0 };
    let p = unsafe { syscall6(MMAP, hint, PAGE, PROT_READ | PROT_WRITE, flags, usize::MAX, 0) };
    if (-4095..0).contains(&p) {
        return None;
    }
    if exact && p as usize != hint {
        // A kernel older than MAP_FIXED_NOREPLACE took it as a hint.
        unsafe { syscall3(MUNMAP, p as usize, PAGE, 0) };
        return None;
    }
    Some(p as usize)
}

/// After a trap at a site: rewrite it, at its `rewrite_at`-th trap (`hot_sites`), when it is a
/// `syscall` in file-backed text that this process's rewrite can take (JIT code, the vDSO and
/// writable code are left alone). While another thread rewrites, the site is left to a later
/// trap (and that trap is not counted).
pub fn maybe_rewrite(after_syscall: usize, nr: usize) {
    let site = after_syscall.wrapping_sub(2);
    // A thread in strict mode may make no call a rewrite needs (mprotect); nor may one under a
    // filter the program installed, which may trap or refuse a rewrite's mprotect and
    // membarrier (Chromium's sandbox sent the runtime's membarrier to its crash handler): its
    // sites keep trapping, and those rewritten before its filter stay so.
    let t = crate::thread::current();
    if !enabled() || crate::call_kinds::needs_trap(nr) || t.strict || t.is_sandboxed() || !can_take(site, nr) {
        return;
    }
    if !rewrite_lock::try_lock() {
        return;
    }
    // Checked under the lock: another thread may have rewritten it meanwhile.
    // A call that may install a seccomp filter must not come back through rt_sigreturn, which the
    // filter may kill for (`rewrite_counted_sites`): its site is rewritten at its first trap, and
    // the calls after the first take the fast path, as every site did before.
    let at = if matches!(nr, PRCTL | SECCOMP) { 1 } else { crate::env::config().rewrite_at };
    if crate::hot_sites::due(site, nr, at) && can_take(site, nr)
        && crate::textmap::is_file_text(site) && rewrite(site, nr) {
        crate::profile::count_rewrite();
    }
    rewrite_lock::unlock();
}

/// Rewrites every site that trapped but was not yet due, before a seccomp filter of the program's
/// applies: from then on a trap's rt_sigreturn, and a rewrite's mprotect, may be calls the filter
/// kills for (strace's seccomp-filter-v allows close and exit alone, and closed from a site that
/// had trapped once). Each is rewritten as at its Nth trap.
pub fn rewrite_counted_sites() {
    if !enabled() || !rewrite_lock::lock() {
        return;
    }
    // Unlike a site that has just trapped, a counted one may lie in memory unmapped since (the
    // calibration's stub page): it is looked up in the text map before its bytes are read.
    crate::hot_sites::drain(|site, nr| {
        if crate::textmap::is_file_text(site) && can_take(site, nr) && rewrite(site, nr) {
            crate::profile::count_rewrite();
        }
    });
    rewrite_lock::unlock();
}

/// Rewrites the `mov eax, nr; syscall` the runtime's calibration made in its own stub (not
/// file text) with this process's rewrite; false where the fast path is off or cannot take it.
pub fn rewrite_for_calibration(site: usize, nr: usize) -> bool {
    if !enabled() || !can_take(site, nr) {
        return false;
    }
    if !rewrite_lock::lock() {
        return false;
    }
    let done = rewrite(site, nr);
    rewrite_lock::unlock();
    done
}

/// Whether the site's bytes fit this process's rewrite and can be written atomically.
fn can_take(site: usize, nr: usize) -> bool {
    if site < PAGE || site % PAGE > PAGE - 2 {
        return false;
    }
    match mode() {
        Mode::Sled => site % 16 != 15 && unsafe { core::ptr::read_volatile(site as *const [u8; 2]) } == [0x0f, 0x05],
        Mode::Relocate => relocation(site, nr).is_some(),
        Mode::Trap => false,
    }
}

/// How a site is relocated: the setup instruction before its `syscall` replaced in place by a
/// jump to the stub, or its `xor eax, eax` by a short jump to padding (at the given address)
/// that jumps to the stub.
enum Relocation {
    Long(reloc::Setup),
    Short(usize),
}

/// The relocation a site allows, reading only bytes of its own page (the neighbouring pages
/// may be unmapped or differently protected, and only this page is made writable).
fn relocation(site: usize, nr: usize) -> Option<Relocation> {
    let page = site & !(PAGE - 1);
    let after = site + 2;
    let from = (site - MAX_SETUP).max(page);
    if from < site {
        let code = unsafe { core::slice::from_raw_parts(from as *const u8, site + 2 - from) };
        if let Some(setup) = reloc::setup(code, nr) {
            let kind = reloc::write_kind(site - setup.len);
            return (kind == Write::Single || kind == Write::TwoPhase && SYNC_CORE_OK.load(Relaxed))
                .then_some(Relocation::Long(setup));
        }
    }
    let at = site - SHORT_PATCH_LEN;
    if at < page || at % 16 == 15 || !reloc::short_setup(unsafe { &*(at as *const [u8; SHORT_PATCH_LEN + 2]) }, nr) {
        return None;
    }
    let code = unsafe { core::slice::from_raw_parts(after as *const u8, (page + PAGE - after).min(128)) };
    let pad = after + reloc::padding_after(code, after)?;
    reloc::short_jump(at, pad).map(|_| Relocation::Short(pad))
}

/// Applies this process's rewrite to a site `can_take` accepted; under the rewrite lock.
fn rewrite(site: usize, nr: usize) -> bool {
    let page = site & !(PAGE - 1);
    unsafe {
        if syscall3(MPROTECT, page, PAGE, PROT_READ | PROT_WRITE | PROT_EXEC) != 0 {
            return false;
        }
    }
    let done = match mode() {
        Mode::Sled => {
            store_bytes(site, &[0xff, 0xd0]);
            true
        }
        Mode::Relocate => relocate(site, nr),
        Mode::Trap => false,
    };
    unsafe { syscall3(MPROTECT, page, PAGE, PROT_READ | PROT_EXEC) };
    done
}

/// Whether membarrier SYNC_CORE is registered, which two-phase writes need.
static SYNC_CORE_OK: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Makes every thread of the process execute a serialising instruction before it runs user
/// code again, so that none executes bytes it fetched before a write.
fn sync_cores() {
    unsafe { syscall3(MEMBARRIER, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) };
}

/// Sends the site's setup instruction to a new stub that runs a copy of it: the instruction
/// becomes a jump there, or (`xor eax, eax`) a short jump to padding that jumps there.
fn relocate(site: usize, nr: usize) -> bool {
    let Some(how) = relocation(site, nr) else { return false };
    let (at, fixed) = match how {
        Relocation::Long(setup) => (site - setup.len, setup.fixed),
        Relocation::Short(_) => (site - SHORT_PATCH_LEN, true),
    };
    let copy = unsafe { core::slice::from_raw_parts(at as *const u8, site - at) };
    let Some(stub) = new_stub(site, copy, fixed) else { return false };
    match how {
        Relocation::Long(_) => {
            let Some(jump) = reloc::jump(at, stub) else { return false };
            if reloc::write_kind(at) == Write::Single {
                store_bytes(at, &jump);
            } else {
                // Threads arriving now wait on `jmp $`; none is inside the old instruction once
                // the cores are synchronised, so its next three bytes can change; then the loop
                // goes.
                store_bytes(at, &reloc::SELF_LOOP);
                sync_cores();
                store_bytes(at + 2, &jump[2..]);
                sync_cores();
                store_bytes(at, &jump[..2]);
            }
        }
        Relocation::Short(pad) => {
            let (Some(far), Some(near)) = (reloc::jump(pad, stub), reloc::short_jump(at, pad)) else { return false };
            // The padding is never executed: written first, then made reachable.
            store_bytes(pad, &far);
            sync_cores();
            store_bytes(at, &near);
        }
    }
    sync_cores();
    true
}

/// Writes `bytes` at `at` in one atomic 16-byte store (`lock cmpxchg16b` on the aligned block
/// that holds them, which instruction fetch on other cores sees whole or not at all). The
/// bytes must lie in one block, except in the middle phase of a two-phase write, where no
/// thread executes them and each block is written on its own.
fn store_bytes(at: usize, bytes: &[u8]) {
    let mut done = 0;
    while done < bytes.len() {
        let block = (at + done) & !15;
        let off = at + done - block;
        let n = (16 - off).min(bytes.len() - done);
        unsafe {
            loop {
                let old = core::ptr::read_volatile(block as *const [u8; 16]);
                let mut new = old;
                new[off..off + n].copy_from_slice(&bytes[done..done + n]);
                if cmpxchg16b(block, old, new) {
                    break;
                }
            }
        }
        done += n;
    }
}

/// `lock cmpxchg16b`; true if the block still held `old` and now holds `new`.
unsafe fn cmpxchg16b(block: usize, old: [u8; 16], new: [u8; 16]) -> bool {
    let (old_lo, old_hi) = (u64::from_le_bytes(old[..8].try_into().unwrap()), u64::from_le_bytes(old[8..].try_into().unwrap()));
    let (new_lo, new_hi) = (u64::from_le_bytes(new[..8].try_into().unwrap()), u64::from_le_bytes(new[8..].try_into().unwrap()));
    let ok: u8;
    // rbx is reserved by the compiler: swap the new low word through it.
    core::arch::asm!(
        "xchg rbx, {lo}",
        "lock cmpxchg16b [rdi]",
        "sete {ok}",
        "xchg rbx, {lo}",
        in("rdi") block,
        lo = inout(reg) new_lo => _,
        ok = out(reg_byte) ok,
        in("rcx") new_hi,
        inout("rax") old_lo => _,
        inout("rdx") old_hi => _,
        options(nostack),
    );
    ok != 0
}

/// Trampoline pages: each starts with the fast entry's address (ENTRY_SLOT), then stubs of
/// STUB_SIZE from STUBS_FROM.
const MAX_TRAMPOLINES: usize = 64;
const ENTRY_SLOT: usize = 0;
const STUBS_FROM: usize = 16;
static TRAMPOLINES: [AtomicUsize; MAX_TRAMPOLINES] = [const { AtomicUsize::new(0) }; MAX_TRAMPOLINES];
/// Bytes used in each trampoline page (guarded by the rewrite lock).
static mut TRAMPOLINE_USED: [usize; MAX_TRAMPOLINES] = [0; MAX_TRAMPOLINES];
/// Whether `addr` lies in a trampoline page (a stub's code, mapped for good).
pub fn in_stub(addr: usize) -> bool {
    TRAMPOLINES.iter().map(|t| t.load(Relaxed)).take_while(|&p| p != 0).any(|p| (p..p + PAGE).contains(&addr))
}

/// Reach of a rel32 jump, with room for the page itself.
const REACH: usize = (1 << 31) - 2 * PAGE;

/// Writes a stub for `site` that runs `copy` first into a trampoline page within rel32 reach;
/// its address.
fn new_stub(site: usize, copy: &[u8], fixed: bool) -> Option<usize> {
    let i = trampoline_near(site)?;
    let page = TRAMPOLINES[i].load(Relaxed);
    let stub = page + unsafe { TRAMPOLINE_USED[i] };
    let slot = page + ENTRY_SLOT;
    let code = reloc::stub(stub, site, slot, copy, fixed)?;
    unsafe {
        // Other stubs of the page stay executable while this one is written.
        if syscall3(MPROTECT, page, PAGE, PROT_READ | PROT_WRITE | PROT_EXEC) != 0 {
            return None;
        }
        core::ptr::copy_nonoverlapping(code.as_ptr(), stub as *mut u8, STUB_SIZE);
        syscall3(MPROTECT, page, PAGE, PROT_READ | PROT_EXEC);
        TRAMPOLINE_USED[i] += STUB_SIZE;
    }
    Some(stub)
}

/// A trampoline page with room, within reach of `site`; maps one when none is.
fn trampoline_near(site: usize) -> Option<usize> {
    let mut free = None;
    for (i, t) in TRAMPOLINES.iter().enumerate() {
        let page = t.load(Relaxed);
        if page == 0 {
            free = free.or(Some(i));
        } else if page.abs_diff(site) < REACH && unsafe { TRAMPOLINE_USED[i] } + STUB_SIZE <= PAGE {
            return Some(i);
        }
    }
    let i = free?;
    let page = map_near(site)?;
    unsafe {
        *((page + ENTRY_SLOT) as *mut usize) = coreplane_fast_entry as *const () as usize;
        syscall3(MPROTECT, page, PAGE, PROT_READ | PROT_EXEC);
        TRAMPOLINE_USED[i] = STUBS_FROM;
    }
    TRAMPOLINES[i].store(page, Relaxed);
    Some(i)
}

/// A new page within rel32 reach of `site`: where the kernel puts it if that is near enough,
/// else the first free page found stepping away from the site by 1 MiB.
fn map_near(site: usize) -> Option<usize> {
    let base = site & !(PAGE - 1);
    if let Some(p) = map_code(base, false) {
        if p.abs_diff(site) < REACH {
            return Some(p);
        }
        unsafe { syscall3(MUNMAP, p, PAGE, 0) };
    }
    const STEP: usize = 1 << 20;
    (1..REACH / STEP).flat_map(|k| [base.checked_sub(k * STEP), base.checked_add(k * STEP)]).flatten()
        .filter(|&a| a >= 1 << 16)
        .take(512)
        .find_map(|a| map_code(a, true))
}
