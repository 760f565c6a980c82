//! The runtime's own descriptors, kept from the program's close, close_range, dup2 and dup3.
//! The runtime holds a few descriptors for the life of a process (the memory service's
//! userfaultfd and /proc files, the sockets to the growth supervisor and the arbiter), moved to
//! 900 and above (`out_of_the_way`). A program that closes every descriptor it did not open
//! itself (erl_child_setup, daemons, glibc's closefrom, `close_range(3, ~0U)`) closed them too:
//! under `--memory pool-demand` the fault handler then died on a read of a closed descriptor and
//! took the process with it. Such a descriptor is the program's to use only where it is not
//! open: close answers EBADF, close_range closes around it, dup2/dup3 onto it answer EBUSY (the
//! number is the runtime's while it holds it). A descriptor is known by its number and its file
//! (device and inode), so a number the runtime gave up and the program got again is the program's.

use crate::sys::*;
use core::sync::atomic::{AtomicI64, AtomicU64, Ordering::*};

const CLOSE_RANGE_CLOEXEC: usize = 1 << 2;
const CLOSE_RANGE_UNSHARE: usize = 1 << 1;
const EBUSY: isize = 16;
const SLOTS: usize = 16;

/// The descriptors kept (-1: a free slot) and the file each refers to.
static FDS: [AtomicI64; SLOTS] = [const { AtomicI64::new(-1) }; SLOTS];
static DEV: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
static INO: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];

/// `fd` moved to 900 or above, away from the numbers programs expect to get (a shell's
/// `exec 3>file` would replace fd 3); itself if it cannot be moved. Either way it is kept from
/// the program's close calls.
pub fn out_of_the_way(fd: isize) -> isize {
    let fd = moved_high(fd);
    keep(fd);
    fd
}

/// `fd` moved to 900 or above (close-on-exec), or itself if it cannot be moved; not kept.
/// The first such descriptor of a process grows its table to 1024, best while the process has
/// one thread (`exe::adopt_runtime`). Under a descriptor limit of 900 or below, to the highest
/// free number under it (`below_limit`).
pub fn moved_high(fd: isize) -> isize {
    let mut high = unsafe { syscall3(FCNTL, fd as usize, F_DUPFD_CLOEXEC, 900) };
    if high == -EINVAL {
        high = below_limit(fd);
    }
    if high < 0 {
        return fd;
    }
    unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
    high
}

/// `fd` duplicated (close-on-exec) at the highest free number below the soft RLIMIT_NOFILE, or
/// -errno. Left where it was, at the lowest free number, it took the number the program's own
/// next descriptor gets natively: under `ulimit -n 64` a program's first open returned 5, 6
/// with `--profile`, where natively 3. A few numbers are tried from the top down: the runtime's
/// own descriptors take them one after the other.
fn below_limit(fd: isize) -> isize {
    const RLIMIT_NOFILE: usize = 7;
    const TRIES: u64 = 16;
    let mut limit = [0u64; 2]; // struct rlimit: soft, hard
    if unsafe { syscall6(PRLIMIT64, 0, RLIMIT_NOFILE, 0, limit.as_mut_ptr() as usize, 0, 0) } != 0 {
        return -EINVAL;
    }
    let mut r = -EMFILE;
    for at in (limit[0].saturating_sub(TRIES)..limit[0]).rev().filter(|&at| at > fd as u64) {
        r = unsafe { syscall3(FCNTL, fd as usize, F_DUPFD_CLOEXEC, at as usize) };
        if r != -EMFILE {
            break;
        }
    }
    r
}

/// The abstract socket name "\0PREFIXPID" (no file to leave behind) in `buf`, as `unix_connect`
/// takes it: the launcher's sockets are named so.
pub fn abstract_name<'a>(prefix: &[u8], pid: u32, buf: &'a mut [u8; 48]) -> &'a [u8] {
    let mut digits = [0u8; 20];
    let digits = fmt_u64(pid as u64, &mut digits);
    let len = 1 + prefix.len() + digits.len();
    buf[0] = 0;
    buf[1..1 + prefix.len()].copy_from_slice(prefix);
    buf[1 + prefix.len()..len].copy_from_slice(digits);
    &buf[..len]
}

/// A connected AF_UNIX socket of type `kind` (close-on-exec, out of the way of the program's
/// descriptor numbers) to `path`, sockaddr_un's sun_path as it goes on the wire (a leading NUL
/// for an abstract name, the terminating NUL included for a file), kept from the program's
/// close calls; -1 when it cannot be had.
pub fn unix_connect(kind: usize, path: &[u8]) -> isize {
    let fd = unix_connect_unkept(kind, path);
    if fd >= 0 {
        keep(fd);
    }
    fd
}

/// The same, not kept: the program may close it (every close of a process that keeps a
/// descriptor goes through the runtime, +35 ns), so its user checks its `identity` first.
pub fn unix_connect_unkept(kind: usize, path: &[u8]) -> isize {
    if path.len() > 108 {
        return -1;
    }
    let fd = unsafe { syscall3(SOCKET, AF_UNIX, kind | SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return -1;
    }
    let mut addr = [0u8; 110];
    addr[0] = AF_UNIX as u8;
    addr[2..2 + path.len()].copy_from_slice(path);
    if unsafe { syscall3(CONNECT, fd as usize, addr.as_ptr() as usize, 2 + path.len()) } != 0 {
        unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
        return -1;
    }
    moved_high(fd)
}

/// The file `fd` refers to (device, inode); None when it is not open.
pub fn identity(fd: usize) -> Option<(u64, u64)> {
    let mut st = [0u64; 18]; // struct stat: st_dev, then st_ino
    let r = crate::sys::fstat(fd, st.as_mut_ptr().cast());
    (r == 0).then(|| (st[0], st[1]))
}

/// Keeps `fd`, one of the runtime's own, from the program's calls from now on.
fn keep(fd: isize) {
    let Some((dev, ino)) = (fd >= 0).then(|| identity(fd as usize)).flatten() else { return };
    let slot = FDS.iter().position(|s| s.load(Acquire) == fd as i64)
        .or_else(|| FDS.iter().position(|s| s.compare_exchange(-1, fd as i64, AcqRel, Acquire).is_ok()))
        .or_else(|| FDS.iter().position(|s| identity(s.load(Acquire) as usize).is_none()));
    let Some(k) = slot else { return }; // more than SLOTS open at once: not expected
    DEV[k].store(dev, Relaxed);
    INO[k].store(ino, Relaxed);
    FDS[k].store(fd as i64, Release);
}

/// Whether the runtime keeps any descriptor now.
pub fn any() -> bool {
    FDS.iter().any(|s| s.load(Acquire) >= 0)
}

/// Whether `fd` is one of the runtime's own, still open.
fn ours(fd: usize) -> bool {
    (0..SLOTS).any(|k| {
        FDS[k].load(Acquire) == fd as i64
            && identity(fd) == Some((DEV[k].load(Relaxed), INO[k].load(Relaxed)))
    })
}

/// close(fd): EBADF for one of the runtime's own (never opened, as the program sees it).
pub fn close(fd: usize) -> Option<isize> {
    ours(fd).then_some(-EBADF)
}

/// dup2/dup3 onto `newfd`: EBUSY while the runtime holds that number.
pub fn dup_onto(newfd: usize) -> Option<isize> {
    ours(newfd).then_some(-EBUSY)
}

/// close_range(first, last, flags) through `run` (the call as the policy makes it), in pieces
/// around the runtime's own descriptors; None when the range holds none of them, or when it
/// only marks descriptors close-on-exec (the runtime's are so already).
pub fn close_range(first: usize, last: usize, flags: usize, run: impl Fn(&[usize; 6]) -> isize) -> Option<isize> {
    let (first, last) = (first as u32 as usize, last as u32 as usize);
    if flags & CLOSE_RANGE_CLOEXEC != 0 || first > last {
        return None;
    }
    let mut kept = [0usize; SLOTS];
    let mut n = 0;
    for s in &FDS {
        let fd = s.load(Acquire);
        if fd >= first as i64 && fd <= last as i64 && !kept[..n].contains(&(fd as usize)) && ours(fd as usize) {
            kept[n] = fd as usize;
            n += 1;
        }
    }
    if n == 0 {
        return None;
    }
    kept[..n].sort_unstable();
    // CLOSE_RANGE_UNSHARE goes with the first piece; the others then close in the thread's own table.
    let mut unshare = flags & CLOSE_RANGE_UNSHARE;
    let mut from = first;
    for upto_excl in kept[..n].iter().copied().chain(core::iter::once(last + 1)) {
        if upto_excl > from {
            let r = run(&[from, upto_excl - 1, (flags & !CLOSE_RANGE_UNSHARE) | unshare, 0, 0, 0]);
            if r < 0 {
                return Some(r);
            }
            unshare = 0;
        }
        from = upto_excl + 1;
    }
    if unshare != 0 {
        // Nothing but the runtime's in the range: the table is still to be unshared.
        return Some(unsafe { syscall3(UNSHARE, CLONE_FILES as usize, 0, 0) });
    }
    Some(0)
}
