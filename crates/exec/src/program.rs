//! The program to run: found on PATH as execvp finds it, and refused up front, with the exit
//! status a shell gives, when the kernel would not run it or the runtime cannot (the runtime's
//! loader maps x86-64 ELF images only). A file the kernel knows no format of (no ELF header, no
//! `#!`) is run by /bin/sh, as execvp runs it (and with it env, nohup, timeout, nice).

use coreplane_runtime::elf::{self, ElfError, PT_INTERP};
use std::ffi::{CString, OsStr, OsString};
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The shell's status for a command it found but could not run.
pub const CANNOT_EXECUTE: i32 = 126;
/// The shell's status for a command (or its interpreter) that does not exist.
pub const NOT_FOUND: i32 = 127;

/// Why a program cannot be started: the shell's exit status and a one-line reason.
pub struct Unrunnable {
    pub status: i32,
    pub why: String,
}

fn refuse(status: i32, why: impl Into<String>) -> Unrunnable {
    Unrunnable { status, why: why.into() }
}

fn executable(p: &Path) -> bool {
    std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// PATH lookup as execvp does it: a name with a slash is taken as it is.
pub fn find(name: &OsString) -> Result<PathBuf, Unrunnable> {
    let p = PathBuf::from(name);
    if name.as_bytes().contains(&b'/') {
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(&p))
        .find(|c| executable(c))
        .ok_or_else(|| refuse(NOT_FOUND, "command not found"))
}

/// Whether the calling user may execute `p` (root needs one x bit, as the kernel checks).
fn may_execute(p: &Path) -> std::io::Result<()> {
    let c = CString::new(p.as_os_str().as_bytes()).map_err(|_| ErrorKind::InvalidInput)?;
    if unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The interpreter an ELF image names in PT_INTERP, if any.
fn elf_interpreter(f: &mut std::fs::File, head: &[u8]) -> std::io::Result<Option<PathBuf>> {
    let eh = elf::parse_ehdr(head).expect("checked by the caller");
    for i in 0..eh.phnum as u64 {
        let mut ph = [0u8; elf::PHDR_SIZE];
        f.seek(SeekFrom::Start(eh.phoff + i * elf::PHDR_SIZE as u64))?;
        f.read_exact(&mut ph)?;
        let ph = elf::parse_phdr(&ph);
        if ph.kind == PT_INTERP {
            let mut name = vec![0u8; ph.filesz as usize];
            f.seek(SeekFrom::Start(ph.offset))?;
            f.read_exact(&mut name)?;
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            return Ok(Some(PathBuf::from(OsStr::from_bytes(&name[..end]))));
        }
    }
    Ok(None)
}

/// How a program that can be run is started.
#[derive(Debug, PartialEq, Eq)]
pub enum Start {
    /// By execve: an x86-64 ELF program or a `#!` script.
    Exec,
    /// By /bin/sh with the file as its script: the kernel refuses it with ENOEXEC, and execvp
    /// then hands it to the shell.
    Shell,
}

/// The shell execvp hands a file without a known format to.
pub const SHELL: &str = "/bin/sh";

/// What the kernel would answer to execve(`p`), checked before the runtime is started, plus
/// what the runtime cannot load (32-bit and foreign-architecture ELF files).
pub fn check(p: &Path) -> Result<Start, Unrunnable> {
    let meta = std::fs::metadata(p).map_err(|e| refuse(NOT_FOUND, os_reason(&e)))?;
    if meta.is_dir() {
        return Err(refuse(CANNOT_EXECUTE, "Is a directory"));
    }
    may_execute(p).map_err(|e| refuse(CANNOT_EXECUTE, os_reason(&e)))?;
    let mut f = std::fs::File::open(p).map_err(|e| refuse(CANNOT_EXECUTE, os_reason(&e)))?;
    let mut head = [0u8; 256];
    let n = read_up_to(&mut f, &mut head).map_err(|e| refuse(CANNOT_EXECUTE, os_reason(&e)))?;
    let head = &head[..n];
    if head.starts_with(b"#!") {
        let interp = elf::shebang_interpreter(head).ok_or_else(|| refuse(CANNOT_EXECUTE, "empty #! line"))?;
        return interpreter_exists(Path::new(OsStr::from_bytes(interp))).map(|()| Start::Exec);
    }
    match elf::parse_ehdr(head) {
        Ok(_) => match elf_interpreter(&mut f, head) {
            Ok(Some(interp)) => interpreter_exists(&interp).map(|()| Start::Exec),
            Ok(None) => Ok(Start::Exec),
            Err(e) => Err(refuse(CANNOT_EXECUTE, format!("truncated ELF file ({})", os_reason(&e)))),
        },
        Err(_) if head.starts_with(b"\x7fELF") && head.get(4) == Some(&1) => {
            Err(refuse(CANNOT_EXECUTE, "32-bit ELF program: coreplane runs x86-64 programs only"))
        }
        Err(ElfError::NotX86_64) => {
            let machine = u16::from_le_bytes([head[18], head[19]]);
            Err(refuse(CANNOT_EXECUTE, format!("ELF program for machine {machine}, not x86-64")))
        }
        Err(ElfError::NotExecutable) => Err(refuse(CANNOT_EXECUTE, "ELF file is neither an executable nor a shared object")),
        Err(ElfError::NotElf) => interpreter_exists(Path::new(SHELL)).map(|()| Start::Shell),
    }
}

/// The privileges the kernel's exec of `p` would give the caller, which a program the runtime
/// loads does not get (the runtime is exec'd, not the program): set-user-ID or set-group-ID of
/// another owner, or file capabilities to a caller other than root; None under no_new_privs,
/// where the kernel gives none either. (An exec inside a run goes to the kernel for these.)
pub fn privileges_lost(p: &Path) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(p).ok()?;
    // SAFETY: plain queries of this process's ids and flags.
    let (euid, egid, nnp) = unsafe { (libc::geteuid(), libc::getegid(), libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)) };
    let path = CString::new(p.as_os_str().as_bytes()).ok()?;
    // SAFETY: a size query (no buffer) of a NUL-terminated path and name.
    let caps = || unsafe { libc::getxattr(path.as_ptr(), c"security.capability".as_ptr(), std::ptr::null_mut(), 0) } > 0;
    if nnp == 1 {
        return None;
    }
    coreplane_runtime::exec::privileges(meta.mode(), meta.uid(), meta.gid(), euid, egid, caps)
}

fn interpreter_exists(interp: &Path) -> Result<(), Unrunnable> {
    if interp.exists() {
        Ok(())
    } else {
        Err(refuse(NOT_FOUND, format!("bad interpreter {}: No such file or directory", interp.display())))
    }
}

fn read_up_to(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The OS error's text without Rust's " (os error N)" suffix, as a shell prints it.
fn os_reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    fn status(p: &Path) -> i32 {
        check(p).err().map(|u| u.status).unwrap_or(0)
    }

    #[test]
    fn a_file_of_no_known_format_is_the_shells() {
        let dir = std::env::temp_dir().join(format!("coreplane-program-sh-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(check(&file(&dir, "plain", b"echo hi\n", 0o755)).ok(), Some(Start::Shell));
        assert_eq!(check(&file(&dir, "empty", b"", 0o755)).ok(), Some(Start::Shell));
        assert_eq!(check(Path::new("/bin/true")).ok(), Some(Start::Exec));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn statuses_match_the_shell() {
        let dir = std::env::temp_dir().join(format!("coreplane-program-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut elf32 = vec![0u8; 64];
        elf32[..6].copy_from_slice(b"\x7fELF\x01\x01");
        let mut arm64 = vec![0u8; 64];
        arm64[..6].copy_from_slice(b"\x7fELF\x02\x01");
        arm64[18] = 183;
        assert_eq!(status(Path::new("/bin/true")), 0);
        assert_eq!(status(&dir.join("missing")), NOT_FOUND);
        assert_eq!(status(&dir), CANNOT_EXECUTE);
        assert_eq!(status(&file(&dir, "script", b"#!/bin/sh\n", 0o755)), 0);
        assert_eq!(status(&file(&dir, "badinterp", b"#!/nonexistent/sh -e\n", 0o755)), NOT_FOUND);
        assert_eq!(status(&file(&dir, "elf32", &elf32, 0o755)), CANNOT_EXECUTE);
        assert_eq!(status(&file(&dir, "arm64", &arm64, 0o755)), CANNOT_EXECUTE);
        // Even root may not execute a file with no x bit at all.
        assert_eq!(status(&file(&dir, "nox", b"#!/bin/sh\n", 0o644)), CANNOT_EXECUTE);
        // An ELF program whose dynamic loader does not exist: ENOENT, as natively.
        let mut image = std::fs::read("/bin/true").unwrap();
        let at = image.windows(16).position(|w| w == b"ld-linux-x86-64.").expect("/bin/true is dynamic");
        image[at] = b'X';
        assert_eq!(status(&file(&dir, "noloader", &image, 0o755)), NOT_FOUND);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
