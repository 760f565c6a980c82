//! The fast path: a syscall site that traps once is rewritten from `syscall` (0f 05) to
//! `call *%rax` (ff d0). Page 0 holds a sled, so the call lands on the runtime's entry for
//! any syscall number; plain local calls are then made and counted in a few instructions of
//! assembly, others go to `dispatch::handle`. Page 0 is mapped execute-only, so a NULL
//! dereference by the program still faults. Mapping it needs CAP_SYS_RAWIO (vm.mmap_min_addr
//! is not changed); without it every call stays on the Syscall User Dispatch trap.

use crate::sys::*;
use core::arch::global_asm;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::*};
use coreplane_runtime::profile_layout as L;
use coreplane_runtime::sysset::SysSet;

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
const TRAP_GADGET: usize = 0x700;
/// `add rsp, 8; syscall`: the same for rt_sigreturn, whose frame starts above the return address.
const SIGRETURN_GADGET: usize = 0x710;

static ENABLED: AtomicBool = AtomicBool::new(false);
static REWRITE_LOCK: AtomicU32 = AtomicU32::new(0);
/// Pages found not to be file-backed text (JIT code, the vDSO, the calibration stub), so that
/// a trap there does not read /proc/self/maps again. Open addressing; guarded by REWRITE_LOCK.
const NOT_TEXT_SLOTS: usize = 256;
static mut NOT_TEXT: [usize; NOT_TEXT_SLOTS] = [0; NOT_TEXT_SLOTS];

/// Looks `page` up in NOT_TEXT, inserting it when `insert`; true if it was there.
unsafe fn not_text(page: usize, insert: bool) -> bool {
    let table = &mut *core::ptr::addr_of_mut!(NOT_TEXT);
    let mut i = (page >> 12).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56;
    for _ in 0..NOT_TEXT_SLOTS {
        match table[i] {
            0 => {
                if insert {
                    table[i] = page;
                }
                return false;
            }
            p if p == page => return true,
            _ => i = (i + 1) % NOT_TEXT_SLOTS,
        }
    }
    false // full: look again next time
}

/// Calls made in assembly: neither delegated nor answered by the runtime.
#[no_mangle]
static mut COREPLANE_FAST_LOCAL: [u64; 8] = [0; 8];
/// 2·(N − 1) for a mean gap of N calls between timed local calls (profile_layout::S_TIMED).
#[no_mangle]
static mut COREPLANE_SAMPLE_MASK: u64 = 0;
/// Calls that must go through the trap path even from a rewritten site.
#[no_mangle]
static mut COREPLANE_FAST_BOUNCE: [u64; 8] = [0; 8];

global_asm!(
    ".globl coreplane_fast_entry",
    "coreplane_fast_entry:",
    // rsp: return address (site + 2); rax: syscall number; rcx and r11 are free, as after
    // a real syscall. The 128-byte red zone below the caller's stack is skipped.
    "cmp rax, 512",
    "jae 8f",
    "bt qword ptr [rip + COREPLANE_FAST_BOUNCE], rax",
    "jc 9f",
    "lea rsp, [rsp - 128]",
    "bt qword ptr [rip + COREPLANE_FAST_LOCAL], rax",
    "jnc 5f",
    // Local call, counted when the thread has a profile block (Thread.prof at gs:[16]). Its
    // row: rcx = prof + T_STATS + nr * ROW. Counts are exact; the time is taken for the first
    // calls of a syscall and then for one call in a random gap (profile_layout::S_TIMED).
    "mov rcx, gs:[16]",
    "test rcx, rcx",
    "jz 4f",
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
    "jb 1f",
    "inc qword ptr [rcx + r11 + {stats} + {errors}]",
    "1:",
    "lea rsp, [rsp + 136]",
    "ret",
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
    "jb 1f",
    "inc qword ptr [rcx + {stats} + {errors}]",
    "1:",
    "mov rdx, [rsp + 24]",
    "lea rsp, [rsp + 160]",
    "ret",
    "4:",
    "lea rsp, [rsp + 128]",
    "syscall",
    "ret",
    // Anything else: in Rust, with the argument registers and xmm0-15 saved (the syscall ABI
    // preserves them, compiled Rust may not).
    "5:",
    "push r9",
    "push r8",
    "push r10",
    "push rdx",
    "push rsi",
    "push rdi",
    "mov rsi, rsp",
    "mov rcx, rsp",
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
    "push rcx",
    "mov rdi, rax",
    "call coreplane_fast_dispatch",
    "pop rcx",
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
    "mov r11, 0x700",
    "jmp r11",
    "7:",
    "mov r11, 0x710",
    "jmp r11",
    row = const L::STAT_FIELDS * 8,
    stats = const L::T_STATS,
    count = const L::S_COUNT * 8,
    errors = const L::S_ERRORS * 8,
    ticks = const L::S_TOTAL_TICKS * 8,
    timed = const L::S_TIMED * 8,
    first_tsc = const L::S_FIRST_TSC * 8,
    last = const L::S_LAST_TSC * 8,
    first = const L::TIME_FIRST,
    left = const L::T_SAMPLE_LEFT,
    rng = const L::T_SAMPLE_RNG,
);

extern "C" {
    fn coreplane_fast_entry();
}

/// Rust side of the fast path for calls that are not plain local ones.
#[no_mangle]
extern "C" fn coreplane_fast_dispatch(nr: usize, args: *const [usize; 6]) -> isize {
    crate::dispatch::handle(nr, unsafe { &*args })
}

pub fn enabled() -> bool {
    ENABLED.load(Relaxed)
}

/// Calls that block until another thread or process acts (the models' wait calls): the Rust
/// path times every one. A sample would scale a few long waits up to a thread's blocked time
/// (xz -T2's main thread: 9 of 15 futex calls timed, 73 ms of waiting in a 65 ms life).
fn always_timed(nr: usize) -> bool {
    matches!(nr, FUTEX | WAIT4 | WAITID)
}

/// Maps the page-0 trampoline and fills the call tables (no-op without CAP_SYS_RAWIO).
pub fn install() {
    let cfg = crate::config();
    let mut local = SysSet::EMPTY;
    let mut bounce = SysSet::EMPTY;
    for nr in 0..coreplane_runtime::sysset::MAX_SYSCALLS {
        if crate::dispatch::needs_trap(nr) {
            bounce.insert(nr);
        } else if !cfg.delegated.contains(nr) && !crate::dispatch::answered_by_runtime(nr) && !always_timed(nr) {
            local.insert(nr);
        }
    }
    unsafe {
        COREPLANE_FAST_LOCAL = local.0;
        COREPLANE_FAST_BOUNCE = bounce.0;
        COREPLANE_SAMPLE_MASK = 2 * (cfg.time_every.max(1) - 1);
        let p = syscall6(MMAP, 0, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, usize::MAX, 0);
        if p != 0 {
            return;
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
        image[TRAP_GADGET..TRAP_GADGET + 3].copy_from_slice(&[0x0f, 0x05, 0xc3]);
        image[SIGRETURN_GADGET..SIGRETURN_GADGET + 6].copy_from_slice(&[0x48, 0x83, 0xc4, 0x08, 0x0f, 0x05]);
        // Address 0 may not be written from Rust (a null pointer); the copy is done in asm.
        core::arch::asm!("rep movsb", inout("rcx") PAGE => _, inout("rdi") 0usize => _,
                         inout("rsi") image.as_ptr() => _, options(nostack, preserves_flags));
        // Execute-only (a protection key on x86): reads and writes of page 0 still fault.
        if syscall3(MPROTECT, 0, PAGE, PROT_EXEC) != 0 {
            syscall3(MUNMAP, 0, PAGE, 0);
            return;
        }
    }
    ENABLED.store(true, Release);
}

/// Whether `addr` lies in read-execute file text (from /proc/self/maps; anonymous and special
/// mappings such as [vdso], and writable code, are left alone).
fn is_file_text(addr: usize) -> bool {
    let fd = unsafe { syscall3(OPEN, b"/proc/self/maps\0".as_ptr() as usize, O_RDONLY | O_CLOEXEC, 0) };
    if fd < 0 {
        return false;
    }
    let mut buf = [0u8; 4096];
    let mut carry = 0;
    let mut found = false;
    'read: loop {
        let n = unsafe { syscall3(READ, fd as usize, buf.as_mut_ptr().add(carry) as usize, buf.len() - carry) };
        if n <= 0 {
            break;
        }
        let end = carry + n as usize;
        let mut start = 0;
        while let Some(nl) = buf[start..end].iter().position(|&c| c == b'\n') {
            let line = &buf[start..start + nl];
            start += nl + 1;
            let mut fields = line.split(|&c| c == b' ').filter(|f| !f.is_empty());
            let (Some(range), Some(perms)) = (fields.next(), fields.next()) else { continue };
            let dash = range.iter().position(|&c| c == b'-').unwrap_or(0);
            let (lo, hi) = (hex(&range[..dash]), hex(&range[dash + 1..]));
            if lo <= addr && addr < hi {
                let path = fields.nth(3);
                if perms.starts_with(b"r-x") && path.is_some_and(|p| p.first() == Some(&b'/')) {
                    found = true;
                }
                break 'read;
            }
        }
        buf.copy_within(start..end, 0);
        carry = end - start;
    }
    unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
    found
}

fn hex(s: &[u8]) -> usize {
    s.iter().fold(0, |acc, &c| acc << 4 | (c as char).to_digit(16).unwrap_or(0) as usize)
}

/// After the first trap at a site: rewrite it when it is a `syscall` in file-backed text.
pub fn maybe_rewrite(after_syscall: usize, nr: usize) {
    // A site whose two bytes straddle pages (rare) stays on the trap path: the next page may
    // belong to another mapping with other protections.
    let site = after_syscall.wrapping_sub(2);
    if !enabled() || crate::dispatch::needs_trap(nr) || after_syscall < 2 || site % PAGE == PAGE - 1 {
        return;
    }
    while REWRITE_LOCK.compare_exchange(0, 1, Acquire, Relaxed).is_err() {
        core::hint::spin_loop();
    }
    // Checked under the lock: another thread may have rewritten it meanwhile.
    let bytes = unsafe { core::ptr::read_volatile(site as *const [u8; 2]) };
    let page = site & !(PAGE - 1);
    if bytes == [0x0f, 0x05] && !unsafe { not_text(page, false) } {
        if !is_file_text(site) {
            unsafe { not_text(page, true) };
        } else {
            unsafe {
                if syscall3(MPROTECT, page, PAGE, PROT_READ | PROT_WRITE | PROT_EXEC) == 0 {
                    core::ptr::write_volatile(site as *mut u16, u16::from_le_bytes([0xff, 0xd0]));
                    syscall3(MPROTECT, page, PAGE, PROT_READ | PROT_EXEC);
                    crate::profile::count_rewrite();
                }
            }
        }
    }
    REWRITE_LOCK.store(0, Release);
}
