//! The relocating rewrite of a syscall site, as bytes: which sites qualify, the per-site stub
//! they jump to, and the jumps themselves. Pure and testable; the runtime's fast path applies it.
//!
//! A site qualifies when the instruction that ends at its `syscall` is one of a few exact
//! encodings (`setup`): `mov eax, nr` or `mov rax, nr` naming the very syscall that trapped
//! there (436 of glibc 2.36's 526 sites; 36 of a Go binary's 39), or the load of the sixth
//! argument that ends glibc's generic `syscall()`, or the two instructions (descriptor reload,
//! `xor eax, eax`) that end read's cancellable path, or the two argument moves that end Go's
//! `Syscall6` (fzf's 9,884 writes each trapped without it; it runs on a goroutine's small
//! stack, which the fast path's local branch fits and its Rust calls leave). That instruction
//! becomes `jmp rel32` to the
//! stub; the `syscall` itself stays, so a branch that lands on it directly still traps as
//! before. The stub runs a copy of the instruction, calls the fast entry with the red zone
//! skipped, and jumps back behind the `syscall`.
//!
//! The same `mov eax|rax, nr` may also stand up to MAX_GAP bytes before the `syscall`, with
//! up to three simple instructions between (`simple_len`: register moves, xor and the like,
//! loads and stores at rsp) that leave rax and rsp alone: glibc's futex waits
//! are `mov eax, 202; xor sil, 0x80; syscall` (tchmttest trapped 35k times a run at
//! __lll_lock_wait's). The jump still replaces the `mov` alone, one instruction, so the write
//! stays atomic for threads at any instruction boundary; the stub copies the instructions
//! between too. The `mov` is where the bytes say; a byte 0x40-0x4f right before it could be a
//! REX prefix making it another instruction (`41 b8 nr` is `mov r8d, nr`), so such a site is
//! refused, in both forms. `coreplane-bench coverage` checks the reading against iced-x86's
//! linear decoding of whole libraries.
//!
//! A site whose number is 0 (read) is set up with the 2-byte `xor eax, eax`, too short for a
//! `jmp rel32`. It becomes `jmp rel8` into the alignment padding behind its function's `ret`,
//! where the `jmp rel32` to the stub is written. That padding is found by following the code
//! from the `syscall`'s end (a known instruction boundary) through exact encodings only: the
//! error check glibc puts there, the `ret`, then NOP forms up to the 16-byte boundary. Padding
//! behind a `ret` and before an aligned label is never executed.

/// `mov eax, imm32`.
const MOV_EAX: u8 = 0xb8;
/// `mov rax, imm32` (sign-extended), as Go writes it.
const MOV_RAX: [u8; 3] = [0x48, 0xc7, 0xc0];
/// `mov r9, [rsp + 8]`: the last instruction of glibc's `syscall()`, before its `syscall`.
const LOAD_ARG6: [u8; 5] = [0x4c, 0x8b, 0x4c, 0x24, 0x08];
/// `mov edi, [rsp + 8]; xor eax, eax`: read's cancellable path (the one threaded programs
/// take), which reloads the descriptor after enabling cancellation.
const RELOAD_FD_READ: [u8; 6] = [0x8b, 0x7c, 0x24, 0x08, 0x31, 0xc0];
/// `mov rsi, rcx; mov rdi, rbx`: the end of Go's `Syscall6` (register ABI, the number already
/// in rax), through which `os.File`'s reads and writes go. It runs on a goroutine's stack.
const GO_SYSCALL6_ARGS: [u8; 6] = [0x48, 0x89, 0xce, 0x48, 0x89, 0xdf];
const SYSCALL: [u8; 2] = [0x0f, 0x05];
/// `lea rsp, [rsp+128]`: where a stub's call of the fast entry returns, the red zone given back.
const RED_ZONE_BACK: [u8; 8] = [0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00];
/// The red zone a stub skips below the program's stack pointer before its call.
pub const STUB_RED_ZONE: usize = 128;
/// Bytes of a `jmp rel32`, the least a relocated instruction must have.
pub const PATCH_LEN: usize = 5;
/// The longest setup: a 7-byte `mov rax, nr` and MAX_GAP bytes of instructions after it.
pub const MAX_SETUP: usize = 7 + MAX_GAP;
/// The most bytes of simple instructions allowed between `mov eax|rax, nr` and the `syscall`.
pub const MAX_GAP: usize = 12;
/// The most instructions allowed there.
const MAX_GAP_INSNS: usize = 3;
/// Bytes replaced in place for the short form: the `xor eax, eax`, which becomes `jmp rel8`.
pub const SHORT_PATCH_LEN: usize = 2;
/// Room for one stub in a trampoline page.
pub const STUB_SIZE: usize = 48;
// The longest copy (a `mov rax, nr` and MAX_GAP bytes, always a fixed number) and the stub's
// 24 bytes after it; the setups whose number is not fixed (6 bytes at most) add 9 more.
const _: () = assert!(MAX_SETUP + 24 <= STUB_SIZE && 6 + 33 <= STUB_SIZE);

/// The instruction that ends at a site's `syscall` and can be relocated.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Setup {
    /// Its length: the jump replaces its first PATCH_LEN bytes, the rest is never reached.
    pub len: usize,
    /// Whether it fixes the syscall number; otherwise the number may be any, rt_sigreturn
    /// included, and the stub sends that one back to the `syscall` to trap.
    pub fixed: bool,
    /// Bytes of instructions between the `mov` of the number and the `syscall` (0: none).
    pub between: usize,
}

/// The relocatable setup ending at the `syscall` that ends `code` (the bytes before it, at
/// most MAX_SETUP, fewer where its page starts), for a site where syscall `nr` trapped.
pub fn setup(code: &[u8], nr: usize) -> Option<Setup> {
    let (before, call) = code.split_at(code.len().checked_sub(SYSCALL.len())?);
    if call != SYSCALL {
        return None;
    }
    let end = before.len();
    let tail = |n: usize| end.checked_sub(n).map(|s| &before[s..]);
    let mov_ends_here = |len: usize| end.checked_sub(len).is_some_and(|at| mov_nr_at(before, at, len, nr));
    if mov_ends_here(5) {
        return Some(Setup { len: 5, fixed: true, between: 0 });
    } else if mov_ends_here(7) {
        return Some(Setup { len: 7, fixed: true, between: 0 });
    } else if tail(5) == Some(&LOAD_ARG6[..]) {
        return Some(Setup { len: 5, fixed: false, between: 0 });
    } else if tail(6) == Some(&RELOAD_FD_READ[..]) && nr == 0 {
        return Some(Setup { len: 6, fixed: true, between: 0 });
    } else if tail(6) == Some(&GO_SYSCALL6_ARGS[..]) {
        return Some(Setup { len: 6, fixed: false, between: 0 });
    }
    // `mov eax|rax, nr` further back, the gap between read as simple instructions.
    for gap in 1..=MAX_GAP.min(end) {
        for mov_len in [5, 7] {
            let Some(at) = (end - gap).checked_sub(mov_len) else { continue };
            if mov_nr_at(before, at, mov_len, nr) && simple_run(&before[end - gap..]) {
                return Some(Setup { len: mov_len + gap, fixed: true, between: gap });
            }
        }
    }
    None
}

/// Whether `code[at..at + len]` is `mov eax, nr` (len 5) or `mov rax, nr` (len 7), not
/// preceded by a byte that could be a REX prefix of another instruction. A `mov eax` at the
/// start of `code` is refused: the byte before it is unseen (on the previous page, where the
/// runtime reads from its page's start), and `41 | b8 nr` is `mov r8d, nr`. A REX prefix
/// before `mov rax` (48 c7 c0) is ignored by the CPU, so that one may start `code`.
fn mov_nr_at(code: &[u8], at: usize, len: usize, nr: usize) -> bool {
    let Some(insn) = code.get(at..at + len) else { return false };
    let op: &[u8] = if len == 5 { &[MOV_EAX] } else { &MOV_RAX };
    let imm = &insn[len - 4..];
    let before = at.checked_sub(1).map(|b| code[b]);
    insn[..len - 4] == *op
        && u32::from_le_bytes([imm[0], imm[1], imm[2], imm[3]]) as usize == nr
        && !before.is_some_and(|b| (0x40..=0x4f).contains(&b))
        && (len == 7 || before.is_some())
}

/// Whether `code` is, exactly, at most MAX_GAP_INSNS simple instructions (`simple_len`).
fn simple_run(code: &[u8]) -> bool {
    let mut at = 0;
    for _ in 0..MAX_GAP_INSNS {
        match simple_len(&code[at..]) {
            Some(n) => at += n,
            None => return false,
        }
        if at == code.len() {
            return true;
        }
    }
    false
}

/// Length of the instruction at the start of `b` if it is one a stub may run in place of the
/// original: no prefix but REX; a register operand, a memory operand at rsp + displacement (lea:
/// any address but rip-relative); no branch;
/// and it writes neither rax (the number) nor rsp (the stub's call is relative to it). The
/// forms: ALU ops with an 8- or 32-bit immediate (80, 81, 83), register ALU ops and moves
/// (01 03 09 0b 21 23 29 2b 31 33 39 3b 85 89 8b), lea (8d), `mov r32, imm32` (b8+r),
/// `mov r/m, imm32` (c7 /0), cmovcc (0f 40-4f). Memory destinations are stores, which a
/// copy makes as the original did (the stub runs them before it moves rsp).
pub fn simple_len(b: &[u8]) -> Option<usize> {
    let rex = b.first().filter(|&&c| (0x40..=0x4f).contains(&c)).copied();
    let (r, w) = rex.map_or((0, false), |x| ((x >> 2) & 1, x & 8 != 0));
    let x_b = rex.map_or(0, |x| x & 1);
    let b = &b[usize::from(rex.is_some())..];
    let p = usize::from(rex.is_some());
    let x_x = rex.map_or(0, |x| (x >> 1) & 1);
    // A memory operand is accessed only at rsp (+ displacement): a fault there would show the
    // program's handler the stub's address instead of its own code's; the stack does not
    // fault. lea (`accessed` false) may take any base but rip.
    let modrm_len = |m: &[u8], accessed: bool| -> Option<(usize, u8, u8, bool)> {
        // (bytes of modrm, sib and displacement; reg; rm with REX.B; register operand)
        let m0 = *m.first()?;
        let (md, reg, rm) = (m0 >> 6, (m0 >> 3) & 7, m0 & 7);
        if md == 3 {
            return Some((1, reg | (r << 3), rm | (x_b << 3), true));
        }
        if md == 0 && rm == 5 {
            return None; // rip-relative
        }
        let sib = usize::from(rm == 4);
        if sib == 1 && md == 0 && m.get(1)? & 7 == 5 {
            return None; // absolute disp32 without base: not worth the case
        }
        if accessed && !(sib == 1 && m.get(1)? & 0x3f == 0x24 && x_b == 0 && x_x == 0) {
            return None; // not [rsp + disp]
        }
        let disp = [0, 1, 4][md as usize];
        (m.len() >= 1 + sib + disp).then_some((1 + sib + disp, reg | (r << 3), 0xff, false))
    };
    let writes_ok = |dst: u8| dst != 0 && dst != 4;
    // An 8-bit register operand without REX: 4-7 are ah, ch, dh, bh (4 is ah, part of rax).
    let byte_ok = |dst: u8| writes_ok(dst) && (rex.is_some() || dst < 4);
    let n = match *b.first()? {
        0x80 | 0x83 | 0x81 => {
            let (m, reg, rm, is_reg) = modrm_len(&b[1..], true)?;
            let imm = if b[0] == 0x81 { 4 } else { 1 };
            let cmp = reg & 7 == 7;
            let ok = cmp || !is_reg || if b[0] == 0x80 { byte_ok(rm) } else { writes_ok(rm) };
            (ok && b.len() >= 1 + m + imm).then_some(1 + m + imm)?
        }
        op @ (0x01 | 0x03 | 0x09 | 0x0b | 0x21 | 0x23 | 0x29 | 0x2b | 0x31 | 0x33 | 0x39 | 0x3b | 0x85 | 0x89
        | 0x8b | 0x8d) => {
            let (m, reg, rm, is_reg) = modrm_len(&b[1..], op != 0x8d)?;
            let to_reg = matches!(op, 0x03 | 0x0b | 0x23 | 0x2b | 0x33 | 0x8b | 0x8d);
            let compare = matches!(op, 0x39 | 0x3b | 0x85);
            if op == 0x8d && is_reg {
                return None;
            }
            let ok = compare || if to_reg { writes_ok(reg) } else { !is_reg || writes_ok(rm) };
            ok.then_some(1 + m)?
        }
        op @ 0xb8..=0xbf if !w => {
            let dst = (op - 0xb8) | (x_b << 3);
            (writes_ok(dst) && b.len() >= 5).then_some(5)?
        }
        0xc7 => {
            let (m, reg, rm, is_reg) = modrm_len(&b[1..], true)?;
            (reg & 7 == 0 && (!is_reg || writes_ok(rm)) && b.len() >= 1 + m + 4).then_some(1 + m + 4)?
        }
        0x0f => {
            let op2 = *b.get(1)?;
            let (m, reg, _, _) = modrm_len(b.get(2..)?, true)?;
            ((0x40..=0x4f).contains(&op2) && writes_ok(reg)).then_some(2 + m)?
        }
        _ => return None,
    };
    Some(p + n)
}

/// Whether `code`, the 4 bytes ending with a site's `syscall`, is `xor eax, eax; syscall` with
/// the trapping number 0.
pub fn short_setup(code: &[u8; SHORT_PATCH_LEN + 2], nr: usize) -> bool {
    nr == 0 && (code[..2] == [0x31, 0xc0] || code[..2] == [0x33, 0xc0]) && code[2..] == SYSCALL
}

fn rel32(from_end: usize, to: usize) -> Option<[u8; 4]> {
    let d = (to as i64).wrapping_sub(from_end as i64);
    i32::try_from(d).ok().map(i32::to_le_bytes)
}

/// `jmp rel32` placed at `at`, to `to`; None when out of ±2 GiB.
pub fn jump(at: usize, to: usize) -> Option<[u8; PATCH_LEN]> {
    let d = rel32(at + PATCH_LEN, to)?;
    Some([0xe9, d[0], d[1], d[2], d[3]])
}

/// `jmp rel8` placed at `at`, to `to`; None when out of reach.
pub fn short_jump(at: usize, to: usize) -> Option<[u8; SHORT_PATCH_LEN]> {
    let d = (to as i64).wrapping_sub((at + SHORT_PATCH_LEN) as i64);
    i8::try_from(d).ok().map(|d| [0xeb, d as u8])
}

/// The stub at `stub` for the site whose `syscall` is at `syscall_at`: `copy` (the relocated
/// instruction); for a number that is not fixed, `cmp eax, 15; je syscall_at`; then
/// `lea rsp,[rsp-128]; call [entry_slot]; lea rsp,[rsp+128]; jmp syscall_at+2`. `entry_slot`
/// holds the fast entry's address (the runtime may lie beyond rel32 reach). rt_sigreturn is
/// sent to trap because the fast entry's bounce expects its frame above the return address.
pub fn stub(stub: usize, syscall_at: usize, entry_slot: usize, copy: &[u8], fixed: bool) -> Option<[u8; STUB_SIZE]> {
    let mut s = [0xccu8; STUB_SIZE]; // int3 padding
    let mut n = copy.len();
    s[..n].copy_from_slice(copy);
    if !fixed {
        s[n..n + 5].copy_from_slice(&[0x83, 0xf8, 0x0f, 0x0f, 0x84]);
        s[n + 5..n + 9].copy_from_slice(&rel32(stub + n + 9, syscall_at)?);
        n += 9;
    }
    s[n..n + 5].copy_from_slice(&[0x48, 0x8d, 0x64, 0x24, 0x80]);
    s[n + 5..n + 7].copy_from_slice(&[0xff, 0x15]);
    s[n + 7..n + 11].copy_from_slice(&rel32(stub + n + 11, entry_slot)?);
    s[n + 11..n + 19].copy_from_slice(&RED_ZONE_BACK);
    s[n + 19..n + 24].copy_from_slice(&jump(stub + n + 19, syscall_at + SYSCALL.len())?);
    Some(s)
}

/// Where the program resumes when the fast entry returns to `ret`, given the 13 bytes there:
/// `Some(site)`, the address behind the site's `syscall`, when `ret` is in a stub (whose
/// `lea rsp,[rsp+128]; jmp site` follow, the red zone below the program's stack pointer
/// skipped); None when `ret` is the site itself (the sled's `call`).
pub fn stub_resumes_at(ret: usize, code: &[u8; 13]) -> Option<usize> {
    if code[..8] != RED_ZONE_BACK || code[8] != 0xe9 {
        return None;
    }
    let rel = i32::from_le_bytes([code[9], code[10], code[11], code[12]]);
    Some((ret as i64 + 13 + rel as i64) as usize)
}

/// Length of the instruction at the start of `b` if it is one that may stand between a
/// `syscall` and its function's `ret` in compiled wrappers: `cmp rax, imm32|imm8`, `ja`/`jae`.
fn epilogue_len(b: &[u8]) -> Option<usize> {
    match b {
        [0x48, 0x3d, ..] => Some(6),
        [0x48, 0x83, 0xf8, _, ..] => Some(4),
        [0x77 | 0x73, _, ..] => Some(2),
        [0x0f, 0x87 | 0x83, ..] => Some(6),
        _ => None,
    }
}

/// Length of the NOP at the start of `b` (the forms assemblers pad with), if it is one.
fn nop_len(b: &[u8]) -> Option<usize> {
    let prefixes = b.iter().take_while(|&&c| c == 0x66).count();
    let rest = &b[prefixes..];
    let cs = usize::from(rest.first() == Some(&0x2e));
    let len = match &rest[cs..] {
        [0x90, ..] if cs == 0 => 1,
        [0x0f, 0x1f, 0x00, ..] => 3,
        [0x0f, 0x1f, 0x40, 0x00, ..] => 4,
        [0x0f, 0x1f, 0x44, 0x00, 0x00, ..] => 5,
        [0x0f, 0x1f, 0x80, 0, 0, 0, 0, ..] => 7,
        [0x0f, 0x1f, 0x84, 0x00, 0, 0, 0, 0, ..] => 8,
        _ => return None,
    };
    Some(prefixes + cs + len)
}

/// Where, in `after` (the code from the end of a `syscall` at address `end`), alignment
/// padding of at least `PATCH_LEN` bytes starts behind the function's `ret`; None if the code
/// does not reach a `ret` through known encodings or no such padding follows.
pub fn padding_after(after: &[u8], end: usize) -> Option<usize> {
    let mut at = 0;
    loop {
        match after.get(at..)? {
            [0xc3, ..] => {
                at += 1;
                break;
            }
            rest => at += epilogue_len(rest)?,
        }
    }
    let start = at;
    let aligned = (end + at + 15) & !15;
    while end + at < aligned {
        at += nop_len(after.get(at..)?)?;
    }
    (end + at == aligned && at - start >= PATCH_LEN).then_some(start)
}

/// How the patched bytes at `at` can be written so that no thread ever executes a mix of old
/// and new bytes: in one 16-byte atomic store, or in two (a self-loop `jmp $` first).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Write {
    /// All PATCH_LEN bytes lie in one aligned 16-byte block.
    Single,
    /// The first two bytes share a block: park threads on `jmp $`, write the rest, then
    /// replace the loop with the jump's first two bytes.
    TwoPhase,
    /// The first two bytes straddle blocks: no atomic way; the site keeps the trap path.
    None,
}

/// The way to write a `jmp rel32` starting at `at`.
pub fn write_kind(at: usize) -> Write {
    match at % 16 {
        o if o + PATCH_LEN <= 16 => Write::Single,
        15 => Write::None,
        _ => Write::TwoPhase,
    }
}

/// `jmp $`: a thread arriving during a two-phase write waits on it.
pub const SELF_LOOP: [u8; 2] = [0xeb, 0xfe];

#[cfg(test)]
mod tests {
    use super::*;

    fn site(before: &[u8]) -> [u8; MAX_SETUP + 2] {
        let mut code = [0x90u8; MAX_SETUP + 2];
        code[MAX_SETUP - before.len()..MAX_SETUP].copy_from_slice(before);
        code[MAX_SETUP..].copy_from_slice(&SYSCALL);
        code
    }

    #[test]
    fn only_known_setups_of_the_trapping_number_qualify() {
        assert_eq!(setup(&site(&[0xb8, 0x27, 0, 0, 0]), 0x27), Some(Setup { len: 5, fixed: true, between: 0 }));
        assert_eq!(setup(&site(&[0xb8, 0x27, 0, 0, 0]), 0x28), None); // eax came from elsewhere
        assert_eq!(setup(&site(&[0xb9, 0x27, 0, 0, 0]), 0x27), None); // mov ecx
        assert_eq!(setup(&site(&[0x48, 0xc7, 0xc0, 0xe7, 0, 0, 0]), 0xe7), Some(Setup { len: 7, fixed: true, between: 0 }));
        assert_eq!(setup(&site(&LOAD_ARG6), 202), Some(Setup { len: 5, fixed: false, between: 0 }));
        // Go's Syscall6: any number (it is in rax already), on a goroutine's stack.
        assert_eq!(setup(&site(&GO_SYSCALL6_ARGS), 1), Some(Setup { len: 6, fixed: false, between: 0 }));
        assert_eq!(setup(&site(&[0x48, 0x89, 0xce, 0x48, 0x89, 0xd7]), 1), None); // mov rdi, rdx
        assert_eq!(setup(&site(&RELOAD_FD_READ), 0), Some(Setup { len: 6, fixed: true, between: 0 }));
        assert_eq!(setup(&site(&RELOAD_FD_READ), 1), None);
        let mut not_a_syscall = site(&[0xb8, 0x27, 0, 0, 0]);
        not_a_syscall[MAX_SETUP..].copy_from_slice(&[0xff, 0xd0]);
        assert_eq!(setup(&not_a_syscall, 0x27), None);
        assert!(short_setup(&[0x31, 0xc0, 0x0f, 0x05], 0));
        assert!(!short_setup(&[0x31, 0xc0, 0x0f, 0x05], 1));
    }

    #[test]
    fn a_mov_of_the_number_further_back_qualifies_across_simple_instructions() {
        // glibc 2.36 __lll_lock_wait: mov eax, 202; xor sil, 0x80; syscall.
        let futex = [0xb8, 0xca, 0, 0, 0, 0x40, 0x80, 0xf6, 0x80];
        assert_eq!(setup(&site(&futex), 202), Some(Setup { len: 9, fixed: true, between: 4 }));
        assert_eq!(setup(&site(&futex), 203), None);
        // mov eax, 0xf3; mov edi, [rsp+8] (mq_timedsend's cancellable path); two stack loads.
        assert_eq!(setup(&site(&[0xb8, 0xf3, 0, 0, 0, 0x8b, 0x7c, 0x24, 0x08]), 0xf3), Some(Setup { len: 9, fixed: true, between: 4 }));
        let sendto = [0xb8, 0x2c, 0, 0, 0, 0x48, 0x8b, 0x74, 0x24, 0x10, 0x8b, 0x7c, 0x24, 0x08];
        assert_eq!(setup(&site(&sendto), 0x2c), Some(Setup { len: 14, fixed: true, between: 9 }));
        // mov rax, nr; xor edx, edx.
        assert_eq!(setup(&site(&[0x48, 0xc7, 0xc0, 0x27, 0, 0, 0, 0x31, 0xd2]), 0x27), Some(Setup { len: 9, fixed: true, between: 2 }));
        // Anything between that writes eax (the number) or rsp, or is relative to rip, or a branch: refused.
        assert_eq!(setup(&site(&[0xb8, 0x27, 0, 0, 0, 0x31, 0xc0]), 0x27), None); // xor eax, eax
        assert_eq!(setup(&site(&[0xb8, 0x27, 0, 0, 0, 0x44, 0x89, 0xc0]), 0x27), None); // mov eax, r8d
        assert_eq!(setup(&site(&[0xb8, 0x27, 0, 0, 0, 0x48, 0x83, 0xec, 0x08]), 0x27), None); // sub rsp, 8
        assert_eq!(setup(&site(&[0xb8, 0x27, 0, 0, 0, 0x40, 0x80, 0xf4, 0x01]), 0x27), None); // xor spl, 1
        assert_eq!(setup(&site(&[0xb8, 0x27, 0, 0, 0, 0x80, 0xf4, 0x01]), 0x27), None); // xor ah, 1
        assert_eq!(setup(&site(&[0xb8, 0x27, 0, 0, 0, 0x48, 0x8d, 0x35, 1, 2, 3, 4]), 0x27), None); // lea rsi, [rip+d]
        assert_eq!(setup(&site(&[0xb8, 0x27, 0, 0, 0, 0x74, 0x00]), 0x27), None); // je
        // More than three instructions between.
        assert_eq!(setup(&site(&[0xb8, 0x27, 0, 0, 0, 0x31, 0xd2, 0x31, 0xf6, 0x31, 0xff, 0x31, 0xc9]), 0x27), None);
        // Bytes that end mid-instruction before the syscall are no run of instructions.
        assert_eq!(setup(&site(&[0xb8, 0x27, 0, 0, 0, 0x8b, 0x7c, 0x24]), 0x27), None);
    }

    #[test]
    fn a_mov_behind_a_possible_rex_prefix_is_refused() {
        // 41 b8 nr = mov r8d, nr: the number in eax came from elsewhere; a copy of `b8 nr`
        // would set eax and leave r8 alone.
        assert_eq!(setup(&site(&[0x41, 0xb8, 0x27, 0, 0, 0]), 0x27), None);
        assert_eq!(setup(&site(&[0x41, 0xb8, 0xca, 0, 0, 0, 0x40, 0x80, 0xf6, 0x80]), 202), None);
        assert_eq!(setup(&site(&[0x90, 0xb8, 0x27, 0, 0, 0]), 0x27), Some(Setup { len: 5, fixed: true, between: 0 }));
        // Fewer bytes than MAX_SETUP before the syscall (its page starts there): read as far as there is.
        assert_eq!(setup(&[0x90, 0xb8, 0x27, 0, 0, 0, 0x0f, 0x05], 0x27), Some(Setup { len: 5, fixed: true, between: 0 }));
        assert_eq!(setup(&[0x27, 0, 0, 0, 0x0f, 0x05], 0x27), None);
        assert_eq!(setup(&[0x0f, 0x05], 0x27), None);
        // A `mov eax` at the page's start: the byte before it, unseen, may be the 41 of
        // `mov r8d, nr` (rex_page of site_mov_further_back: mmap got EBADF from call 1 on).
        assert_eq!(setup(&[0xb8, 0x09, 0, 0, 0, 0x0f, 0x05], 9), None);
        assert_eq!(setup(&[0xb8, 0xca, 0, 0, 0, 0x40, 0x80, 0xf6, 0x80, 0x0f, 0x05], 202), None);
        // `mov rax` there may stay: a REX prefix before its own is ignored (41 48 c7 c0 = mov rax).
        assert_eq!(setup(&[0x48, 0xc7, 0xc0, 0x27, 0, 0, 0, 0x0f, 0x05], 0x27), Some(Setup { len: 7, fixed: true, between: 0 }));
        // With the whole window read, a `mov eax` never starts it: the byte before its farthest
        // place (a MAX_GAP-byte gap) is seen.
        let far = [0xb8, 0x27, 0, 0, 0, 0xba, 1, 0, 0, 0, 0xbe, 2, 0, 0, 0, 0x31, 0xff]; // mov edx, 1; mov esi, 2; xor edi, edi
        assert_eq!(setup(&site(&far), 0x27), Some(Setup { len: 17, fixed: true, between: MAX_GAP }));
        let mut behind_rex = [0x41u8; MAX_SETUP + 2];
        behind_rex[2..].copy_from_slice(&site(&far)[2..]);
        assert_eq!(setup(&behind_rex, 0x27), None);
    }

    #[test]
    fn simple_instructions_have_their_lengths() {
        assert_eq!(simple_len(&[0x45, 0x31, 0xd2]), Some(3)); // xor r10d, r10d
        assert_eq!(simple_len(&[0xba, 2, 0, 0, 0]), Some(5)); // mov edx, 2
        assert_eq!(simple_len(&[0x41, 0x8b, 0x70, 0x10]), None); // mov esi, [r8+0x10]: may fault
        assert_eq!(simple_len(&[0x8b, 0x7c, 0x24, 0x08]), Some(4)); // mov edi, [rsp+8]
        assert_eq!(simple_len(&[0x41, 0x8b, 0x7c, 0x24, 0x08]), None); // mov edi, [r12+8]
        assert_eq!(simple_len(&[0x48, 0x8d, 0x53, 0x10]), Some(4)); // lea rdx, [rbx+0x10]: no access
        assert_eq!(simple_len(&[0x48, 0xc7, 0x04, 0x24, 1, 0, 0, 0]), Some(8)); // mov qword [rsp], 1
        assert_eq!(simple_len(&[0x4c, 0x0f, 0x46, 0xf0]), Some(4)); // cmovbe r14, rax
        assert_eq!(simple_len(&[0x48, 0x0f, 0x46, 0xc6]), None); // cmovbe rax, rsi
        assert_eq!(simple_len(&[0x49, 0x0f, 0x46, 0xf0]), Some(4)); // cmovbe rsi, r8
        assert_eq!(simple_len(&[0x48, 0x8d, 0x14, 0xfd, 0, 0, 0, 0]), None); // lea rdx, [rdi*8]: no base
        assert_eq!(simple_len(&[0x64, 0x8b, 0x00]), None); // fs: prefix
        assert_eq!(simple_len(&[0x8b, 0x7c, 0x24]), None); // truncated
    }

    #[test]
    fn jumps_and_stubs_encode_their_targets() {
        assert_eq!(jump(0x1000, 0x1005), Some([0xe9, 0, 0, 0, 0]));
        assert_eq!(jump(0x1000, 0x1000), Some([0xe9, 0xfb, 0xff, 0xff, 0xff]));
        assert_eq!(jump(0, 1 << 32), None);
        assert_eq!(short_jump(0x100, 0x102), Some([0xeb, 0]));
        assert_eq!(short_jump(0x100, 0x300), None);
        let s = stub(0x10_0000, 0x20_0000, 0x10_0000 - 8, &[0xb8, 39, 0, 0, 0], true).unwrap();
        assert_eq!(&s[..5], &[0xb8, 39, 0, 0, 0]);
        assert_eq!(&s[5..10], &[0x48, 0x8d, 0x64, 0x24, 0x80]);
        // call [rip + d]: rip after it is stub + 16, so d = -24.
        assert_eq!(i32::from_le_bytes(s[12..16].try_into().unwrap()), -24);
        // jmp back lands right after the 2-byte syscall.
        let back = i32::from_le_bytes(s[25..29].try_into().unwrap()) as i64;
        assert_eq!(0x10_0000 + 29 + back, 0x20_0002);
        // The fast entry returns into the stub (behind its call, stub + 16): the program resumes there.
        let after_call: [u8; 13] = s[16..29].try_into().unwrap();
        assert_eq!(stub_resumes_at(0x10_0000 + 16, &after_call), Some(0x20_0002));
        assert_eq!(stub_resumes_at(0x20_0002, &[0x90; 13]), None);
        // A number that is not fixed: rt_sigreturn (15) goes back to the syscall itself.
        let g = stub(0x10_0000, 0x20_0000, 0x10_0000 - 8, &LOAD_ARG6, false).unwrap();
        assert_eq!(&g[5..10], &[0x83, 0xf8, 0x0f, 0x0f, 0x84]);
        assert_eq!(0x10_0000 + 14 + i32::from_le_bytes(g[10..14].try_into().unwrap()) as i64, 0x20_0000);
        assert!(stub(0, 1 << 33, 0, &[0x31, 0xc0], true).is_none());
        // The longest copy: mov rax, 0x27; mov edx, 1; mov esi, 2; xor edi, edi (19 bytes).
        let long = [0x48, 0xc7, 0xc0, 0x27, 0, 0, 0, 0xba, 1, 0, 0, 0, 0xbe, 2, 0, 0, 0, 0x31, 0xff];
        assert_eq!(long.len(), MAX_SETUP);
        let l = stub(0x10_0000, 0x20_0000, 0x10_0000 - 8, &long, true).unwrap();
        assert_eq!(&l[..MAX_SETUP], &long);
        assert_eq!(&l[MAX_SETUP..MAX_SETUP + 7], &[0x48, 0x8d, 0x64, 0x24, 0x80, 0xff, 0x15]);
        let call_end = MAX_SETUP + 11;
        assert_eq!(0x10_0000 + call_end as i64 + i32::from_le_bytes(l[call_end - 4..call_end].try_into().unwrap()) as i64, 0x10_0000 - 8);
        let after_call: [u8; 13] = l[call_end..call_end + 13].try_into().unwrap();
        assert_eq!(stub_resumes_at(0x10_0000 + call_end, &after_call), Some(0x20_0002));
        assert!(l[call_end + 13..].iter().all(|&b| b == 0xcc));
    }

    #[test]
    fn read_finds_the_padding_behind_its_ret() {
        // glibc 2.36 __read: xor eax,eax; syscall | cmp rax,-4096; ja; ret; cs nopw (10 bytes).
        let after = [0x48, 0x3d, 0x00, 0xf0, 0xff, 0xff, 0x77, 0x5b, 0xc3,
                     0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80];
        assert_eq!(padding_after(&after, 0xf82ad), Some(9));
        // Not aligned to 16 at the padding's end: refused.
        assert_eq!(padding_after(&after, 0xf82ae), None);
        // Code that is not a known epilogue: refused.
        assert_eq!(padding_after(&[0x48, 0x89, 0xc7, 0xc3, 0x90, 0x90, 0x90, 0x90, 0x90], 0x1007), None);
        // Too little padding.
        assert_eq!(padding_after(&[0xc3, 0x90, 0x90], 0x100d), None);
    }

    #[test]
    fn writes_are_atomic_or_refused() {
        assert_eq!(write_kind(0x1000), Write::Single);
        assert_eq!(write_kind(0x100b), Write::Single);
        assert_eq!(write_kind(0x100c), Write::TwoPhase);
        assert_eq!(write_kind(0x100e), Write::TwoPhase);
        assert_eq!(write_kind(0x100f), Write::None);
    }
}
