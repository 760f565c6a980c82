//! The loaded program's canonical path, what the kernel's /proc/self/exe would name, and the
//! program's descriptor handed across an execve that re-enters the runtime.
//! The runtime answers readlink of /proc/self/exe with it and writes it in the profile.

use crate::sys::{self, *};

static mut EXE: [u8; 4096] = [0; 4096];

/// Remembers the loaded program's canonical path from its open descriptor.
pub fn remember_exe(fd: usize) {
    let mut link = [0u8; 40];
    let mut b = [0u8; 20];
    sys::concat(&[b"/proc/self/fd/", sys::fmt_u64(fd as u64, &mut b)], &mut link);
    unsafe {
        let exe = &mut *core::ptr::addr_of_mut!(EXE);
        let len = syscall3(READLINK, link.as_ptr() as usize, exe.as_mut_ptr() as usize, exe.len() - 1);
        let len = if len < 0 { 0 } else { len as usize };
        exe[len] = 0;
    }
}

/// The loaded program's canonical path.
pub fn exe() -> &'static [u8] {
    unsafe {
        let exe = &*core::ptr::addr_of!(EXE);
        &exe[..sys::cstr_len(exe.as_ptr())]
    }
}

/// The runtime's argv[0] when a process's execve re-enters it: `coreplane-rt`, or
/// `coreplane-rt:FD` when the caller opened the ELF program as FD with its credentials before
/// the exec (process::execve), for the loader to map from there (`given_fd`).
pub fn rt_argv0(fd: Option<usize>, buf: &mut [u8; 40]) -> &[u8; 40] {
    let mut digits = [0u8; 20];
    match fd {
        Some(fd) => sys::concat(&[RT_NAME, b":", sys::fmt_u64(fd as u64, &mut digits)], buf),
        None => sys::concat(&[RT_NAME], buf),
    };
    buf
}

const RT_NAME: &[u8] = b"coreplane-rt";

/// The program's descriptor that `rt_argv0` named in argv[0], if any.
pub fn given_fd(argv0: *const u8) -> Option<usize> {
    let name = unsafe { sys::cstr(argv0) };
    let digits = name.strip_prefix(RT_NAME)?.strip_prefix(b":")?;
    coreplane_runtime::config::parse_u64(digits).map(|fd| fd as usize)
}
