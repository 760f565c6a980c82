//! The loaded program's canonical path, what the kernel's /proc/self/exe would name.
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
