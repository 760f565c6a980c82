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
    let exe = unsafe { &mut *core::ptr::addr_of_mut!(EXE) };
    let last = exe.len() - 1;
    let len = sys::readlink(link.as_ptr(), &mut exe[..last]).max(0) as usize;
    exe[len] = 0;
}

/// The loaded program's canonical path.
pub fn exe() -> &'static [u8] {
    unsafe {
        let exe = &*core::ptr::addr_of!(EXE);
        &exe[..sys::cstr_len(exe.as_ptr())]
    }
}

/// The runtime's argv[0] when a process's execve re-enters it: `coreplane-rt`, then `:FD` when
/// the caller opened the ELF program as FD with its credentials before the exec (process::execve)
/// for the loader to map from there (`given_fd`), then `@FD` naming the runtime's own binary
/// (`runtime_for_exec`, `adopt_runtime`), then `%FD` naming the profile directory
/// (`profile::dir_for_exec`, `given_profile_dir`). At most 12 + 3 × 11 bytes and the NUL.
pub fn rt_argv0(program: Option<usize>, runtime: Option<usize>, profile_dir: Option<usize>, buf: &mut [u8; 48]) -> &[u8; 48] {
    let mut n = sys::concat(&[RT_NAME], buf);
    for (mark, fd) in [(b":", program), (b"@", runtime), (b"%", profile_dir)] {
        if let Some(fd) = fd {
            let mut digits = [0u8; 20];
            n += sys::concat(&[mark, sys::fmt_u64(fd as u64, &mut digits)], &mut buf[n..]);
        }
    }
    buf
}

const RT_NAME: &[u8] = b"coreplane-rt";

/// The descriptor argv[0] names after `mark` (`:` the program, `@` the runtime), if any.
fn named_fd(argv0: *const u8, mark: u8) -> Option<usize> {
    let name = unsafe { sys::cstr(argv0) }.strip_prefix(RT_NAME)?;
    let at = name.iter().position(|&c| c == mark)? + 1;
    let end = name[at..].iter().position(|c| !c.is_ascii_digit()).map_or(name.len(), |n| at + n);
    coreplane_runtime::config::parse_u64(&name[at..end]).map(|fd| fd as usize)
}

/// The program's descriptor that `rt_argv0` named in argv[0], if any.
pub fn given_fd(argv0: *const u8) -> Option<usize> {
    named_fd(argv0, b':')
}

/// The profile directory's descriptor that `rt_argv0` named in argv[0], if any.
pub fn given_profile_dir(argv0: *const u8) -> Option<usize> {
    named_fd(argv0, b'%')
}

/// The runtime's own binary, open (O_PATH, close-on-exec) for the life of the process, and the
/// file it was: a program's execve re-enters the runtime through it (execveat with
/// AT_EMPTY_PATH), where /proc may not exist (a chroot without /proc, as debootstrap's second
/// stage and pbuilder run: there /proc/thread-self/exe failed with ENOENT, and the program's
/// execve with it). Not kept from the program's close (that would send every close through the
/// runtime): a descriptor closed or replaced since is found out by its identity, and /proc used.
static mut RUNTIME: (isize, u64, u64) = (-1, 0, 0);

/// At process start, before the runtime's first thread: the runtime's binary from the descriptor
/// argv[0] names (`@FD`), or opened through /proc/self/exe and moved out of the program's way.
/// Moved to 900 or above, it grows the descriptor table to 1024 while the process has one
/// thread. That matters: the kernel grows a table that several threads share only after an RCU
/// grace period (expand_fdtable's synchronize_rcu), milliseconds on these machines, where
/// natively a single-threaded program grows it for nothing; beside the delegates every growth
/// paid that (bfs, whose directory descriptors pass 64, 128, 256, ..., took 2.40x its native time
/// under `--delegate all`, 1.33x with the table grown first; session 13). Fork and execve keep
/// the table's size.
pub fn adopt_runtime(argv0: *const u8) {
    const O_PATH: usize = 0o10000000;
    let fd = match named_fd(argv0, b'@') {
        Some(fd) if crate::own_fds::identity(fd).is_some() => {
            unsafe { syscall3(FCNTL, fd, F_SETFD, FD_CLOEXEC) };
            fd as isize
        }
        _ => {
            let fd = sys::open(b"/proc/self/exe\0".as_ptr(), O_PATH | O_CLOEXEC);
            if fd < 0 {
                return;
            }
            crate::own_fds::moved_high(fd)
        }
    };
    if let Some((dev, ino)) = crate::own_fds::identity(fd as usize) {
        unsafe { RUNTIME = (fd, dev, ino) };
    }
}

/// For an execve that re-enters the runtime: its binary's descriptor, inheritable until
/// `after_exec_failed`, when it is still the one `adopt_runtime` opened.
pub fn runtime_for_exec() -> Option<usize> {
    let (fd, dev, ino) = unsafe { RUNTIME };
    if fd < 0 || crate::own_fds::identity(fd as usize) != Some((dev, ino)) {
        return None;
    }
    unsafe { syscall3(FCNTL, fd as usize, F_SETFD, 0) };
    Some(fd as usize)
}

/// The execve failed: a descriptor made inheritable for it (`runtime_for_exec`,
/// `profile::dir_for_exec`) is close-on-exec again.
pub fn after_exec_failed(fd: Option<usize>) {
    if let Some(fd) = fd {
        unsafe { syscall3(FCNTL, fd, F_SETFD, FD_CLOEXEC) };
    }
}
