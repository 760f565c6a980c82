//! Which fast-path rewrite each `syscall` instruction of an ELF file would get: the runtime's
//! own rules (coreplane_runtime::reloc) applied to every site that iced-x86 finds by linear
//! decoding of the executable segments. A static count: a site the program never calls costs
//! nothing either way, and code that is data or JIT output is not seen.

use coreplane_runtime::elf::{self, PF_X, PT_LOAD};
use coreplane_runtime::reloc::{self, Write, MAX_SETUP, SHORT_PATCH_LEN};
use iced_x86::{Code, Decoder, DecoderOptions, Register};
use std::collections::VecDeque;
use serde::Serialize;
use std::path::PathBuf;

const PAGE: u64 = 4096;

#[derive(clap::Args)]
pub struct CoverageArgs {
    /// ELF files (executables or shared libraries).
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// Site counts of one file, by the rewrite the relocating fast path gives them.
#[derive(Serialize, Default)]
pub struct Coverage {
    file: String,
    sites: usize,
    /// `mov eax|rax, nr` replaced by `jmp rel32` in one atomic store.
    mov_nr_single: usize,
    /// The same, written in two phases (the jump straddles a 16-byte block).
    mov_nr_two_phase: usize,
    /// Of those two, the sites whose `mov` stands before other simple instructions.
    mov_nr_further_back: usize,
    /// Sites the runtime's rules would relocate from an instruction boundary that iced-x86's
    /// linear decoding does not have: a misreading (0 is the only right answer).
    misread: usize,
    /// glibc's generic `syscall()`.
    generic: usize,
    /// `xor eax, eax` (read) through a short jump into padding.
    short_jump: usize,
    /// Left on the trap path.
    trap: usize,
    /// Every site takes the page-0 sled (2-byte rewrite) unless it straddles a 16-byte block.
    sled: usize,
}

fn coverage(path: &PathBuf) -> Result<Coverage, String> {
    let image = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let eh = elf::parse_ehdr(&image).map_err(|e| format!("{}: not an x86-64 ELF file ({e:?})", path.display()))?;
    let mut c = Coverage { file: path.display().to_string(), ..Default::default() };
    for i in 0..eh.phnum as usize {
        let off = eh.phoff as usize + i * elf::PHDR_SIZE;
        let ph = elf::parse_phdr(image.get(off..off + elf::PHDR_SIZE).ok_or("truncated program headers")?);
        if ph.kind != PT_LOAD || ph.flags & PF_X == 0 {
            continue;
        }
        let text = image.get(ph.offset as usize..(ph.offset + ph.filesz) as usize).ok_or("truncated segment")?;
        let mut decoder = Decoder::with_ip(64, text, ph.vaddr, DecoderOptions::NONE);
        // The instructions just before each `syscall`: their addresses are the boundaries a
        // relocation may start at, and the last `mov eax|rax, imm32` among them is the number
        // the site fixes (what would trap there).
        let mut recent: VecDeque<(u64, Option<usize>)> = VecDeque::with_capacity(RECENT);
        for insn in &mut decoder {
            if insn.code() == Code::Syscall {
                let nr = recent.iter().rev().find_map(|&(_, nr)| nr).unwrap_or(0);
                classify(&mut c, text, (insn.ip() - ph.vaddr) as usize, insn.ip(), nr, &recent);
            }
            if recent.len() == RECENT {
                recent.pop_front();
            }
            let nr = matches!(insn.code(), Code::Mov_r32_imm32 | Code::Mov_rm64_imm32)
                .then(|| insn.op0_register())
                .filter(|&r| r == Register::EAX || r == Register::RAX)
                .map(|_| insn.immediate32() as usize);
            recent.push_back((insn.ip(), nr));
        }
    }
    Ok(c)
}

/// Instructions remembered before a `syscall`: more than a setup can span.
const RECENT: usize = 8;

/// Counts the site whose `syscall` is at `at` in `text` (address `ip`) under its rewrite, for
/// the number `nr` that would trap there; `recent` holds the instruction boundaries before it.
fn classify(c: &mut Coverage, text: &[u8], at: usize, ip: u64, nr: usize, recent: &VecDeque<(u64, Option<usize>)>) {
    c.sites += 1;
    if ip % 16 != 15 {
        c.sled += 1;
    }
    let page = ip & !(PAGE - 1);
    // As the runtime reads it: the bytes before the `syscall` within its page.
    let from = at - (MAX_SETUP.min(at) as u64).min(ip - page) as usize;
    if let Some(setup) = reloc::setup(&text[from..at + 2], nr).or_else(|| reloc::setup(&text[from..at + 2], 0)) {
        if !recent.iter().any(|&(b, _)| b == ip - setup.len as u64) {
            c.misread += 1;
        }
        match (setup.fixed, reloc::write_kind(ip as usize - setup.len)) {
            (_, Write::None) => c.trap += 1,
            (false, _) => c.generic += 1,
            (true, kind) => {
                *if kind == Write::Single { &mut c.mov_nr_single } else { &mut c.mov_nr_two_phase } += 1;
                c.mov_nr_further_back += usize::from(setup.between > 0);
            }
        }
        return;
    }
    let short_at = ip as usize - SHORT_PATCH_LEN;
    if at >= SHORT_PATCH_LEN && short_at as u64 >= page && short_at % 16 != 15 {
        let code: &[u8; SHORT_PATCH_LEN + 2] = text[at - SHORT_PATCH_LEN..at + 2].try_into().unwrap();
        let end = ip as usize + 2;
        let room = ((page + PAGE) as usize - end).min(128).min(text.len() - (at + 2));
        if reloc::short_setup(code, 0)
            && reloc::padding_after(&text[at + 2..at + 2 + room], end).is_some_and(|p| reloc::short_jump(short_at, end + p).is_some())
        {
            c.short_jump += 1;
            return;
        }
    }
    c.trap += 1;
}

pub fn run(args: &CoverageArgs) -> Result<serde_json::Value, String> {
    let rows = args.files.iter().map(coverage).collect::<Result<Vec<_>, _>>()?;
    Ok(serde_json::to_value(rows).expect("serialisable"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_reads_no_setup_where_iced_sees_no_instruction_start() {
        // The C library and the loader of this machine, decoded linearly by iced-x86: every
        // relocation the runtime's rules allow starts at an instruction, and the rule for a
        // `mov` further back takes some of glibc's futex waits.
        for lib in ["/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"] {
            let c = coverage(&PathBuf::from(lib)).unwrap();
            assert!(c.sites > 0, "{lib}");
            assert_eq!(c.misread, 0, "{lib}");
        }
        let libc = coverage(&PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6")).unwrap();
        assert!(libc.mov_nr_further_back > 0);
    }
}
