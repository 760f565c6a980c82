//! Which fast-path rewrite each `syscall` instruction of an ELF file would get: the runtime's
//! own rules (coreplane_runtime::reloc) applied to every site that iced-x86 finds by linear
//! decoding of the executable segments. A static count: a site the program never calls costs
//! nothing either way, and code that is data or JIT output is not seen.

use coreplane_runtime::elf::{self, PF_X, PT_LOAD};
use coreplane_runtime::reloc::{self, Write, MAX_SETUP, SHORT_PATCH_LEN};
use iced_x86::{Code, Decoder, DecoderOptions};
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
        for insn in &mut decoder {
            if insn.code() == Code::Syscall {
                classify(&mut c, text, (insn.ip() - ph.vaddr) as usize, insn.ip());
            }
        }
    }
    Ok(c)
}

/// Counts the site whose `syscall` is at `at` in `text` (address `ip`) under its rewrite.
fn classify(c: &mut Coverage, text: &[u8], at: usize, ip: u64) {
    c.sites += 1;
    if ip % 16 != 15 {
        c.sled += 1;
    }
    let page = ip & !(PAGE - 1);
    if ip - MAX_SETUP as u64 >= page && at >= MAX_SETUP {
        let code: &[u8; MAX_SETUP + 2] = text[at - MAX_SETUP..at + 2].try_into().unwrap();
        // The number a site fixes is its immediate, or 0 for read's forms; the runtime checks
        // it against the number that trapped there.
        let imm = u32::from_le_bytes(code[MAX_SETUP - 4..MAX_SETUP].try_into().unwrap()) as usize;
        if let Some(setup) = reloc::setup(code, imm).or_else(|| reloc::setup(code, 0)) {
            match (setup.fixed, reloc::write_kind(ip as usize - setup.len)) {
                (_, Write::None) => c.trap += 1,
                (false, _) => c.generic += 1,
                (true, Write::Single) => c.mov_nr_single += 1,
                (true, Write::TwoPhase) => c.mov_nr_two_phase += 1,
            }
            return;
        }
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
