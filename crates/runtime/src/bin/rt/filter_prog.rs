//! A seccomp filter program the program installs, read before the kernel runs it: what the
//! runtime must know of it (whether it can kill a thread unseen, whether it looks at the
//! instruction pointer of a call).

use crate::thread::Thread;

const BPF_CLASS_MASK: u16 = 0x07;
const BPF_LD: u16 = 0x00;
const BPF_RET: u16 = 0x06;
/// BPF_LD | BPF_W | BPF_ABS: load a word of struct seccomp_data.
const BPF_LD_W_ABS: u16 = 0x20;
/// BPF_RET | BPF_K returns the constant k; BPF_RET | BPF_A returns the accumulator (any action).
const BPF_RVAL_MASK: u16 = 0x18;
const BPF_K: u16 = 0x00;
const SECCOMP_RET_ACTION_FULL: u32 = 0xffff_0000;
const SECCOMP_RET_KILL_THREAD: u32 = 0;
/// offsetof(struct seccomp_data, instruction_pointer), a u64 read as two words.
const IP_LOW: u32 = 8;
const IP_HIGH: u32 = 12;

/// Whether the filter at `prog` returns SECCOMP_RET_KILL_THREAD anywhere, or an action it
/// computes.
pub fn may_kill_thread(t: &Thread, prog: usize) -> bool {
    any_instruction(t, prog, |code, k| {
        code & BPF_CLASS_MASK == BPF_RET && (code & BPF_RVAL_MASK != BPF_K || k & SECCOMP_RET_ACTION_FULL == SECCOMP_RET_KILL_THREAD)
    })
}

/// Whether the filter at `prog` reads the instruction pointer of the call (Chromium's lets its
/// SIGSYS handler's calls through by where they are made from).
pub fn reads_instruction_pointer(t: &Thread, prog: usize) -> bool {
    any_instruction(t, prog, |code, k| code & BPF_CLASS_MASK == BPF_LD && code == BPF_LD_W_ABS && (k == IP_LOW || k == IP_HIGH))
}

/// Whether any instruction (code, k) of the classic BPF program whose struct sock_fprog is at
/// `prog` satisfies `test`; false when it cannot be read (the kernel refuses it with EFAULT then).
fn any_instruction(t: &Thread, prog: usize, test: impl Fn(u16, u32) -> bool) -> bool {
    let mut head = [0u8; 16];
    if !t.read_program(prog, &mut head) {
        return false;
    }
    let len = u16::from_ne_bytes([head[0], head[1]]) as usize;
    let mut at = usize::from_ne_bytes(head[8..16].try_into().unwrap());
    let mut chunk = [0u8; 8 * 128];
    let mut left = len.min(4096);
    while left > 0 {
        let n = left.min(128);
        if !t.read_program(at, &mut chunk[..8 * n]) {
            return false;
        }
        for insn in chunk[..8 * n].chunks_exact(8) {
            if test(u16::from_ne_bytes([insn[0], insn[1]]), u32::from_ne_bytes(insn[4..8].try_into().unwrap())) {
                return true;
            }
        }
        at += 8 * n;
        left -= n;
    }
    false
}
