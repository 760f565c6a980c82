//! Pure, testable pieces of the coreplane runtime (no_std): configuration, ELF parsing, what an exec would give,
//! syscall sets, the delegate hand-off, the relocating rewrite's encodings and the profile file layout shared with the supervisor (coreplane-exec).
#![cfg_attr(not(test), no_std)]

pub mod config;
pub mod buddy;
pub mod elf;
pub mod exec;
pub mod handoff;
pub mod profile_layout;
pub mod reloc;
pub mod sysset;
