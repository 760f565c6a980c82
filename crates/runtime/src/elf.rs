//! Just enough ELF64 parsing for the loader: the file header and program headers.

pub const ET_EXEC: u16 = 2;
pub const ET_DYN: u16 = 3;
pub const PT_LOAD: u32 = 1;
pub const PT_INTERP: u32 = 3;
pub const PF_X: u32 = 1;
pub const PF_W: u32 = 2;
pub const PF_R: u32 = 4;
pub const EHDR_SIZE: usize = 64;
pub const PHDR_SIZE: usize = 56;

#[derive(Clone, Copy, Debug, Default)]
pub struct Ehdr {
    pub kind: u16,
    pub entry: u64,
    pub phoff: u64,
    pub phnum: u16,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Phdr {
    pub kind: u32,
    pub flags: u32,
    pub offset: u64,
    pub vaddr: u64,
    pub filesz: u64,
    pub memsz: u64,
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(x)
}

/// Why a file cannot be loaded.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum ElfError {
    NotElf,
    NotX86_64,
    NotExecutable,
}

/// Parses an x86-64 ELF64 little-endian executable or shared-object header.
pub fn parse_ehdr(b: &[u8]) -> Result<Ehdr, ElfError> {
    if b.len() < EHDR_SIZE || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return Err(ElfError::NotElf);
    }
    if u16_at(b, 18) != 62 {
        return Err(ElfError::NotX86_64);
    }
    let kind = u16_at(b, 16);
    if kind != ET_EXEC && kind != ET_DYN {
        return Err(ElfError::NotExecutable);
    }
    if u16_at(b, 54) as usize != PHDR_SIZE {
        return Err(ElfError::NotElf);
    }
    Ok(Ehdr { kind, entry: u64_at(b, 24), phoff: u64_at(b, 32), phnum: u16_at(b, 56) })
}

/// The interpreter a `#!` script names (the first word after `#!` on its first line), from the
/// file's first bytes `head`; None where `head` is not such a script or names none. The other
/// format execve knows, checked beside ELF by the launcher and by the runtime's execve.
pub fn shebang_interpreter(head: &[u8]) -> Option<&[u8]> {
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    line.split(|b| *b == b' ' || *b == b'\t').find(|w| !w.is_empty())
}

/// Parses one program header from its 56 bytes.
pub fn parse_phdr(b: &[u8]) -> Phdr {
    Phdr {
        kind: u32_at(b, 0),
        flags: u32_at(b, 4),
        offset: u64_at(b, 8),
        vaddr: u64_at(b, 16),
        filesz: u64_at(b, 32),
        memsz: u64_at(b, 40),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shebang_names_its_first_word_on_the_first_line() {
        assert_eq!(shebang_interpreter(b"#! /bin/sh -e\necho"), Some(&b"/bin/sh"[..]));
        assert_eq!(shebang_interpreter(b"#!/usr/bin/env\tpython3"), Some(&b"/usr/bin/env"[..]));
        assert_eq!(shebang_interpreter(b"#!  \n/bin/sh"), None);
        assert_eq!(shebang_interpreter(b"\x7fELF"), None);
    }

    #[test]
    fn parses_a_real_binary() {
        let data = std::fs::read("/bin/true").unwrap();
        let eh = parse_ehdr(&data).unwrap();
        assert!(eh.kind == ET_DYN || eh.kind == ET_EXEC);
        let phs: Vec<Phdr> = (0..eh.phnum as usize)
            .map(|i| parse_phdr(&data[eh.phoff as usize + i * PHDR_SIZE..]))
            .collect();
        assert!(phs.iter().any(|p| p.kind == PT_LOAD && p.flags & PF_X != 0));
        assert!(phs.iter().any(|p| p.kind == PT_INTERP));
    }

    #[test]
    fn rejects_non_elf() {
        assert_eq!(parse_ehdr(b"#!/bin/sh\n").unwrap_err(), ElfError::NotElf);
        let mut fake = std::fs::read("/bin/true").unwrap();
        fake[18] = 3; // EM_386
        assert_eq!(parse_ehdr(&fake).unwrap_err(), ElfError::NotX86_64);
    }
}
