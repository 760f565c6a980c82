//! What the program sees of its own threads in /proc: the link count of /proc/PID/task (two plus
//! the process's threads) leaves out the runtime's threads (delegates, the memory pool's).
//! Programs tell whether they are single-threaded from it before they do what the kernel allows
//! only then: Chromium's zygote CHECKs `fstatat(proc, "self/task/").st_nlink == 3` and died of
//! SIGTRAP under `--delegate all`, and its namespace sandbox concluded there was none. Only for
//! the program's only thread, which reads the result the kernel has just written (no other
//! program thread can unmap it meanwhile); a link count taken while program threads run still
//! counts the runtime's threads.
//! The thread count in /proc/PID/stat (its 20th field) and /proc/PID/status (`Threads:`), read
//! through a descriptor the program opened on its own, counts the program's threads alone too:
//! CPython 3.12 and later read it at each fork and warned, under `--delegate all`, that the
//! single-threaded program was multi-threaded. A stat file is adjusted where one read from its
//! start takes all of it, a status file in the read that holds the whole `Threads:` line (stdio
//! reads it in 1 KiB pieces); the text only ever gets shorter, so the pieces still join up.
//! The listing of /proc/PID/task through such a descriptor (getdents) leaves the runtime's
//! threads out (`sys::is_runtime_thread`), for every thread of the program.

use crate::sys::*;
use crate::thread;
use core::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, AtomicU8, Ordering::*};

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

/// Descriptors the program opened on its own stat or status file, watched at once at most.
const WATCHED: usize = 4;
/// What a watched descriptor is open on (NONE: a free entry).
const NONE: u8 = 0;
const STAT_FILE: u8 = 1;
const STATUS_FILE: u8 = 2;
const TASK_DIR: u8 = 3;
static WATCH_FD: [AtomicI64; WATCHED] = [const { AtomicI64::new(-1) }; WATCHED];
static WATCH_KIND: [AtomicU8; WATCHED] = [const { AtomicU8::new(NONE) }; WATCHED];
/// The file's identity (device, inode), for a number the program closed and reused unseen.
static WATCH_ID: [[AtomicU64; 2]; WATCHED] = [const { [AtomicU64::new(0), AtomicU64::new(0)] }; WATCHED];
/// Bytes read through it so far: only a read from its start is adjusted.
static WATCH_READ: [AtomicU64; WATCHED] = [const { AtomicU64::new(0) }; WATCHED];

/// Which of this process's thread-counting files `path` names: /proc/self/stat,
/// /proc/thread-self/status, /proc/PID/stat with its own process id, /proc/self/task/, and so on.
fn counting_file(path: &[u8]) -> u8 {
    let Some(rest) = path.strip_prefix(b"/proc/") else { return NONE };
    let rest = rest.strip_suffix(b"/").unwrap_or(rest);
    let (dir, kind) = match (rest.strip_suffix(b"/stat"), rest.strip_suffix(b"/status"), rest.strip_suffix(b"/task")) {
        (Some(dir), ..) => (dir, STAT_FILE),
        (_, Some(dir), _) => (dir, STATUS_FILE),
        (.., Some(dir)) if dir != b"thread-self" => (dir, TASK_DIR),
        _ => return NONE,
    };
    let mut digits = [0u8; 20];
    if dir == b"self" || dir == b"thread-self" || dir == fmt_u64(thread::current().pid as u64, &mut digits) {
        kind
    } else {
        NONE
    }
}

/// An opening call `nr` with `a` returned `fd`: a descriptor on one of the process's counting
/// files is watched, and reads and closes go through dispatch while any is. Returns `fd`.
pub fn after_open(nr: usize, a: &[usize; 6], fd: isize) -> isize {
    if fd < 0 {
        return fd;
    }
    let kind = counting_file(crate::process::opened_path(nr, a));
    let Some((dev, ino)) = (kind != NONE).then(|| crate::own_fds::identity(fd as usize)).flatten() else { return fd };
    let Some(k) = (0..WATCHED).find(|&k| WATCH_KIND[k].compare_exchange(NONE, kind, AcqRel, Acquire).is_ok()) else {
        return fd; // more open at once: left as the kernel counts
    };
    WATCH_ID[k][0].store(dev, Relaxed);
    WATCH_ID[k][1].store(ino, Relaxed);
    WATCH_READ[k].store(0, Relaxed);
    WATCH_FD[k].store(fd as i64, Release);
    for nr in [READ, CLOSE, GETDENTS, GETDENTS64] {
        crate::fastpath::route_through_runtime(nr, true);
    }
    fd
}

/// Whether any descriptor is watched.
pub fn watching() -> bool {
    WATCH_KIND.iter().any(|k| k.load(Relaxed) != NONE)
}

/// The entry watching `fd`, if any.
fn entry(fd: usize) -> Option<usize> {
    (0..WATCHED).find(|&k| WATCH_FD[k].load(Acquire) == fd as i64)
}

/// Ends entry `k`; with none left, reads and closes go back to the assembly.
fn forget(k: usize) {
    WATCH_FD[k].store(-1, Relaxed);
    WATCH_KIND[k].store(NONE, Release);
    if !watching() {
        for nr in [READ, CLOSE, GETDENTS, GETDENTS64] {
            crate::fastpath::route_through_runtime(nr, false);
        }
    }
}

/// close(fd) is made: a watched descriptor is watched no longer.
pub fn closing(fd: usize) {
    if let Some(k) = entry(fd) {
        forget(k);
    }
}

/// The entry watching `fd` while it is still open on what it was opened on.
fn watched(fd: usize) -> Option<usize> {
    let k = entry(fd)?;
    if crate::own_fds::identity(fd) != Some((WATCH_ID[k][0].load(Relaxed), WATCH_ID[k][1].load(Relaxed))) {
        forget(k); // closed unseen and the number reused
        return None;
    }
    Some(k)
}

/// getdents64 or getdents (`nr`) with `a`, made by `list`: on a watched task directory, the
/// entries of the runtime's threads are taken out of what it returns (the records after one
/// moved down over it); a batch that held nothing else is followed by the next, since an empty
/// one means the end. Returns the bytes left.
pub fn listing(nr: usize, a: &[usize; 6], mut list: impl FnMut() -> isize) -> isize {
    let own = watched(a[0]).is_some_and(|k| WATCH_KIND[k].load(Relaxed) == TASK_DIR);
    loop {
        let r = list();
        if !own || r <= 0 || thread::current().is_filtered() {
            return r;
        }
        let buf = unsafe { core::slice::from_raw_parts_mut(a[1] as *mut u8, r as usize) };
        let left = without_runtime_threads(buf, if nr == GETDENTS64 { 19 } else { 18 });
        if left > 0 {
            return left as isize;
        }
    }
}

/// Removes the records of `buf` (linux_dirent64 or linux_dirent: the record's length at 16, its
/// name at `name_at`) that name one of the runtime's threads; the bytes left.
fn without_runtime_threads(buf: &mut [u8], name_at: usize) -> usize {
    let (mut at, mut len) = (0, buf.len());
    while at + name_at < len {
        let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
        if reclen == 0 || at + reclen > len {
            break;
        }
        let name = &buf[at + name_at..at + reclen];
        let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
        let tid = name.iter().try_fold(0i32, |n, &c| c.is_ascii_digit().then(|| n.saturating_mul(10).saturating_add((c - b'0') as i32)));
        if tid.is_some_and(is_runtime_thread) {
            buf.copy_within(at + reclen..len, at);
            len -= reclen;
        } else {
            at += reclen;
        }
    }
    len
}

/// read(fd, buf, count) in `a` returned `r`: the thread count in what was read of a watched
/// file is made the program's. Returns the bytes read, maybe fewer.
pub fn after_read(a: &[usize; 6], r: isize) -> isize {
    let Some(k) = watched(a[0]) else { return r };
    let start = WATCH_READ[k].fetch_add(r.max(0) as u64, Relaxed);
    let t = thread::current();
    let Some(program) = crate::app_threads::count(t.pid) else { return r };
    if r <= 0 || t.is_filtered() {
        return r;
    }
    let buf = unsafe { core::slice::from_raw_parts_mut(a[1] as *mut u8, r as usize) };
    let kind = WATCH_KIND[k].load(Relaxed);
    if kind == STATUS_FILE {
        show_program_actions(buf);
    }
    let field = match kind {
        STAT_FILE if start == 0 && (r as usize) < a[2] => stat_threads(buf),
        STATUS_FILE => status_threads(buf),
        _ => None,
    };
    match field {
        Some(at) => rewrite_count(buf, at, program) as isize,
        None => r,
    }
}

/// Where the thread count of /proc/PID/stat's text lies: its 20th field, the 18th after the
/// command's closing parenthesis (the command may hold spaces and parentheses itself).
fn stat_threads(buf: &[u8]) -> Option<(usize, usize)> {
    let close = buf.iter().rposition(|&c| c == b')')?;
    let mut spaces = 0;
    let start = (close..buf.len()).find(|&i| {
        spaces += (buf[i] == b' ') as u32;
        spaces == 18
    })? + 1;
    let end = (start..buf.len()).find(|&i| buf[i] == b' ')?;
    Some((start, end))
}

/// SigIgn and SigCgt in a read of /proc/PID/status, where the read holds the whole line (a read
/// may start with it): the virtual signals as the program's own actions have them, not as the
/// runtime's handlers (ps -o caught, and procps's status reading, showed SIGSYS and signal 63
/// caught in every program). A line split between two reads is left as the kernel wrote it.
fn show_program_actions(buf: &mut [u8]) {
    let (all, ignored, caught) = crate::signals::virtual_actions();
    for (key, bits) in [(&b"SigIgn:\t"[..], ignored), (&b"SigCgt:\t"[..], caught)] {
        let line_start = |p: usize| p == 0 || buf[p - 1] == b'\n';
        let Some(at) = (0..buf.len()).find(|&p| buf[p..].starts_with(key) && line_start(p)).map(|p| p + key.len()) else { continue };
        let Some(hex) = buf.get_mut(at..at + 16).filter(|h| h.iter().all(u8::is_ascii_hexdigit)) else { continue };
        let kernel = hex.iter().fold(0u64, |n, &c| n << 4 | (c as char).to_digit(16).unwrap_or(0) as u64);
        let shown = kernel & !all | bits;
        for (i, c) in hex.iter_mut().enumerate() {
            *c = b"0123456789abcdef"[(shown >> (60 - 4 * i) & 0xf) as usize];
        }
    }
}

/// Where the number after "Threads:" and its tab lies in /proc/PID/status's text.
fn status_threads(buf: &[u8]) -> Option<(usize, usize)> {
    const KEY: &[u8] = b"\nThreads:\t";
    let start = buf.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let end = (start..buf.len()).find(|&i| buf[i] == b'\n')?;
    Some((start, end))
}

/// Writes `count` over the digits at `start..end` of `buf` where it is smaller than they say
/// (never more threads than the kernel counts), moving the rest up; the text's new length.
fn rewrite_count(buf: &mut [u8], (start, end): (usize, usize), count: u32) -> usize {
    let digits = &buf[start..end];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return buf.len();
    }
    let kernel = digits.iter().fold(0u64, |n, &c| n * 10 + (c - b'0') as u64);
    if count == 0 || count as u64 >= kernel {
        return buf.len();
    }
    let mut text = [0u8; 20];
    let new = fmt_u64(count as u64, &mut text);
    let len = buf.len();
    buf.copy_within(end..len, start + new.len());
    buf[start..start + new.len()].copy_from_slice(new);
    len - (end - start - new.len())
}
