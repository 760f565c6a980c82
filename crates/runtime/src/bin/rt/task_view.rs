//! What the program sees of its own threads in /proc: the link count of /proc/PID/task (two plus
//! the process's threads) leaves out the runtime's threads (delegates, the memory pool's).
//! Programs tell whether they are single-threaded from it before they do what the kernel allows
//! only then: Chromium's zygote CHECKs `fstatat(proc, "self/task/").st_nlink == 3` and died of
//! SIGTRAP under `--delegate all`, and its namespace sandbox concluded there was none. Only for
//! the program's only thread, which reads the result the kernel has just written (no other
//! program thread can unmap it meanwhile); the directory's entries and /proc/PID/status's
//! `Threads:` still show the runtime's threads, as does a count taken while program threads run.

use crate::sys::*;
use crate::thread;
use core::sync::atomic::{AtomicI32, AtomicU64, Ordering::Relaxed};

const STAT: usize = 4;
const FSTAT: usize = 5;
const LSTAT: usize = 6;
const NEWFSTATAT: usize = 262;
const STATX: usize = 332;
const S_IFMT: u32 = 0o170000;
const S_IFDIR: u32 = 0o040000;
const STATX_TYPE: u32 = 0x1;
const STATX_NLINK: u32 = 0x4;
const STATX_INO: u32 = 0x100;

/// procfs's device once seen (u64::MAX before): a directory elsewhere costs one comparison.
static PROC_DEV: AtomicU64 = AtomicU64::new(u64::MAX);
/// The inode this process's task directory had when last compared, and the process (a forked
/// child's copy names its parent's directory): the same one again needs no call (an evicted and
/// rebuilt entry gets a new inode, and is compared anew).
static TASK_INO: AtomicU64 = AtomicU64::new(u64::MAX);
static TASK_PID: AtomicI32 = AtomicI32::new(0);

/// Whether call `nr` is one whose answer this module may adjust.
pub fn adjusts(nr: usize) -> bool {
    matches!(nr, STAT | FSTAT | LSTAT | NEWFSTATAT | STATX)
}

/// A stat-family call `nr` with `a` returned `r`: where it described this process's task
/// directory, its link count becomes two plus the program's threads. Returns `r`.
pub fn after_stat(nr: usize, a: &[usize; 6], r: isize) -> isize {
    let t = thread::current();
    if r != 0 || !crate::app_threads::alone(t) || t.is_filtered() {
        return r;
    }
    // The buffer the kernel has just filled, read and written in place.
    let (dev, ino, nlink_at, wide) = unsafe {
        if nr == STATX {
            let b = a[4];
            let mask = *(b as *const u32);
            let mode = *((b + 28) as *const u16) as u32;
            let nlink = *((b + 16) as *const u32);
            if mask & (STATX_TYPE | STATX_NLINK | STATX_INO) != STATX_TYPE | STATX_NLINK | STATX_INO
                || mode & S_IFMT != S_IFDIR || nlink <= 3
            {
                return r;
            }
            let (major, minor) = (*((b + 136) as *const u32) as u64, *((b + 140) as *const u32) as u64);
            // The kernel's encoding of a device number in struct stat (new_encode_dev).
            (minor & 0xff | major << 8 | (minor & !0xff) << 12, *((b + 32) as *const u64), b + 16, false)
        } else {
            let b = if nr == NEWFSTATAT { a[2] } else { a[1] };
            let mode = *((b + 24) as *const u32);
            if mode & S_IFMT != S_IFDIR || *((b + 16) as *const u64) <= 3 {
                return r;
            }
            (*(b as *const u64), *((b + 8) as *const u64), b + 16, true)
        }
    };
    let known = PROC_DEV.load(Relaxed);
    if known != u64::MAX && known != dev {
        return r;
    }
    // The path decides without a call where it can: a /proc/PID directory has more than three
    // links too (`ps` stats each), and `self/task` is this process's wherever /proc is mounted.
    let named = if nr == FSTAT { Named::Descriptor } else { names_task(t.pid, if matches!(nr, NEWFSTATAT | STATX) { a[1] } else { a[0] }) };
    let ours = match named {
        Named::Other => false,
        Named::Own if known == dev => true,
        _ if known == dev && TASK_INO.load(Relaxed) == ino && TASK_PID.load(Relaxed) == t.pid => true,
        _ => {
            // Its inode is the task directory's only while the kernel keeps that entry: compared now.
            let mut own = [0u64; 18];
            let path = b"/proc/self/task\0";
            if unsafe { syscall6(NEWFSTATAT, AT_FDCWD as usize, path.as_ptr() as usize, own.as_mut_ptr() as usize, 0, 0, 0) } == 0 {
                PROC_DEV.store(own[0], Relaxed);
                TASK_INO.store(own[1], Relaxed);
                TASK_PID.store(t.pid, Relaxed);
                (own[0], own[1]) == (dev, ino)
            } else {
                // /proc is out of reach (a chroot into an empty directory, as Chromium's sandbox
                // makes before it checks again through a /proc descriptor it kept).
                known == dev && matches!(named, Named::Own)
            }
        }
    };
    if ours {
        set_links(nlink_at, wide);
    }
    r
}

/// What a stat call's path says of the directory it described.
enum Named {
    /// `[...]/self/task` or `[...]/PID/task` of this process.
    Own,
    /// `task` alone, relative to a descriptor (of some /proc/PID), or the descriptor itself
    /// (fstat, or an empty path with AT_EMPTY_PATH).
    Descriptor,
    /// Anything else.
    Other,
}

/// The link count of a task directory with one thread, written into the program's result.
fn set_links(nlink_at: usize, wide: bool) {
    unsafe {
        if wide {
            *(nlink_at as *mut u64) = 3;
        } else {
            *(nlink_at as *mut u32) = 3;
        }
    }
}

/// What the path at `at` (which the kernel has just resolved, so it is readable up to its NUL)
/// names, with or without a trailing slash.
fn names_task(pid: i32, at: usize) -> Named {
    let mut buf = [0u8; 256];
    let mut n = 0;
    while n < buf.len() {
        let c = unsafe { *((at + n) as *const u8) };
        if c == 0 {
            break;
        }
        buf[n] = c;
        n += 1;
    }
    let mut path = &buf[..n];
    while let Some(rest) = path.strip_suffix(b"/") {
        path = rest;
    }
    if path.is_empty() {
        return Named::Descriptor; // AT_EMPTY_PATH: glibc's fstat is fstatat(fd, "")
    }
    let Some(parent) = path.strip_suffix(b"task") else { return Named::Other };
    if parent.is_empty() {
        return Named::Descriptor;
    }
    let Some(parent) = parent.strip_suffix(b"/") else { return Named::Other };
    let dir = parent.rsplit(|c| *c == b'/').next().unwrap_or(parent);
    let mut digits = [0u8; 20];
    if dir == b"self" || dir == crate::sys::fmt_u64(pid as u64, &mut digits) {
        Named::Own
    } else {
        Named::Other
    }
}
