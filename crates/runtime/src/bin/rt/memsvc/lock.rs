//! Memory locking under the pool (mlockall, mlock2, munlock, munlockall): the program's mappings, and the pool pages it holds, are locked as natively; the pool's unused reservation is neither counted nor locked.
//! The pool is address space reserved up front (three times budget and growth, PROT_NONE), and
//! the kernel counts it in the process's total_vm, which mlockall(MCL_CURRENT) holds against
//! RLIMIT_MEMLOCK: an unprivileged program's call failed with ENOMEM (strace's `mlockall` test
//! as user nobody), and a privileged one's locked 3 GiB of PROT_NONE reservation (VmLck), under
//! which every freed pool page stayed locked and resident (the scrubber's MADV_DONTNEED refused).
//! So mlockall is served here rather than passed on:
//! - MCL_CURRENT: the kernel's check is made on what the program would have natively: total_vm
//!   less the pool pages the program does not hold and the service's own mappings, which are
//!   sized by the pool, not by the program (the allocator's bookkeeping, 9 bytes per pool page,
//!   7 MiB for the default budget; the scrubbers' scratch ranges; the fault handler's buffer and
//!   doorbell). Past RLIMIT_MEMLOCK, whether the process may lock beyond it (CAP_IPC_LOCK in the
//!   initial user namespace, as the kernel's capable() asks) is asked of the kernel itself: an
//!   mlock2(MLOCK_ONFAULT) of more pages than the limit, on the pool's never-used tail (PROT_NONE,
//!   so nothing is populated), fails with ENOMEM (or EPERM under a zero limit) exactly where the
//!   kernel's mlockall would, and is undone where it succeeds. Then every mapping of
//!   /proc/self/maps but those is locked with mlock2, one call per mapping (a populate error
//!   stops mlock2 at the failing mapping, where mlockall goes on to the next: PROT_NONE guard
//!   pages, a file mapped past its end), and in the pool each run the program holds.
//! - MCL_FUTURE is kept here and not given to the kernel (its mm->def_flags would lock every
//!   mapping the runtime makes too: the pool's refills, the scrubbers' ranges and stacks, each
//!   checked against the program's limit, where EAGAIN ends the service): pool memory handed out
//!   while it is set (mmap, brk) is locked with mlock2 as it is handed out, the
//!   kernel's mmap of the program gets MAP_LOCKED (the same VM_LOCKED, the same limit check:
//!   EAGAIN), and both are populated unless MCL_ONFAULT was given. munlockall clears it, as does
//!   fork (a child inherits no locks) and execve (a new image).
//! - A pool range the program locked is unlocked before the pool takes it back (munmap, a lowered
//!   break), as the kernel's munmap would drop the lock, and before it is moved (mremap's growth,
//!   `unlock_before_move`), then locked again with its grown part, as the kernel's mremap keeps a
//!   mapping's lock (or its lack: MCL_FUTURE is not for it) and checks the growth against the
//!   limit (EAGAIN); mlock2 and munlock of pool pages the program does not hold fail with
//!   ENOMEM, as on unmapped memory.
//! Why served here rather than by releasing the reservation around the kernel's call: the
//! bookkeeping alone passes a small limit, an unmapped reservation could be taken by another
//! thread's mapping before it is mapped again, and a reservation mapped again after an
//! MCL_FUTURE would itself be locked (and refused past the limit).
//! What differs from native: the call is not atomic (another thread's mapping made while it
//! walks the maps may be left unlocked, unless MCL_FUTURE was given); mappings the kernel makes
//! for the program without an mmap (shmat, io_setup's ring) are not locked by MCL_FUTURE; under
//! MCL_FUTURE | MCL_ONFAULT a kernel mmap past the limit is made, then undone (EAGAIN), and a
//! MAP_FIXED one, which has replaced what lay there, is kept unlocked; mremap of pool memory locked
//! in part succeeds, all of it locked after (natively EFAULT: the range is several mappings), and
//! locked memory it moves is locked again on fault only where every lock the program made in the
//! pool was (MCL_ONFAULT, MLOCK_ONFAULT), populated otherwise; CAP_IPC_LOCK is read from capget
//! where the pool's tail is shorter than the limit, and for an mremap's growth past it; the service's
//! own mappings named above are not locked, and the runtime's others (its image, stacks, the
//! profile's blocks) are, and count against the limit.

use super::{demand, ensure_reserved, scrub, HeldOff, Pool, BOOK, BUDGET, POOL_LOCK};
use crate::sys::{self, *};
use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering::*};
use coreplane_runtime::buddy::{FOREIGN, USED};

pub const MLOCK: usize = 149;
pub const MUNLOCK: usize = 150;
pub const MUNLOCKALL: usize = 152;
pub const MLOCK2: usize = 325;
const MCL_ONFAULT: usize = 4;
const MLOCK_ONFAULT: usize = 1;
const MAP_LOCKED: usize = 0x2000;
const CAPGET: usize = 125;
const PRLIMIT64: usize = 302;
const RLIMIT_MEMLOCK: usize = 8;
const CAP_IPC_LOCK: u32 = 14;
pub const EAGAIN: isize = 11;
/// The lowest address that is not user space's (the [vsyscall] page lies above it).
const USER_END: usize = 1 << 47;

/// MCL_FUTURE as the program asked for it: 0 (not set), or 1 + the mlock2 flags new memory is
/// locked with (MLOCK_ONFAULT under MCL_ONFAULT).
static FUTURE: AtomicUsize = AtomicUsize::new(0);
/// How the program may have locked pool pages (an mlockall, or an mlock2 reaching the pool):
/// POPULATED, ON_FAULT or both; 0: never. Locked pages are unlocked before the pool takes them
/// back, and locked again as they were after a move (`lock_again`).
static LOCKED: AtomicU8 = AtomicU8::new(0);
const POPULATED: u8 = 1;
const ON_FAULT: u8 = 2;

/// The program locked pool pages, or may have, with the mlock2 `flags`.
fn note_locked(flags: usize) {
    LOCKED.fetch_or(if flags & MLOCK_ONFAULT != 0 { ON_FAULT } else { POPULATED }, Relaxed);
}

fn any_locked() -> bool {
    LOCKED.load(Relaxed) != 0
}

/// Under MCL_FUTURE, the mlock2 flags new memory is locked with.
pub fn future() -> Option<usize> {
    FUTURE.load(Relaxed).checked_sub(1)
}

fn failed(r: isize) -> bool {
    (-4095..0).contains(&r)
}

fn mlock2(addr: usize, len: usize, flags: usize) -> isize {
    unsafe { syscall3(MLOCK2, addr, len, flags) }
}

/// Whether mlockall is served here: a pool is configured for this image, it is reserved (now, if
/// it was not: a pool reserved after the call is not locked, as it is never given the kernel's
/// MCL_FUTURE), and the caller's calls cannot be killed by a seccomp filter of the program's
/// (`quiet`: the kernel's mlockall is then made as the program gave it, as before).
pub fn serves_mlockall(quiet: bool) -> bool {
    BUDGET.load(Relaxed) != 0 && !quiet && ensure_reserved() && !POOL_LOCK.held_by(super::me())
}

/// mlockall(flags), when `serves_mlockall`: see the module's comment. Natively the checks come
/// in this order: EINVAL for the flags, EPERM under a zero limit without the capability, ENOMEM
/// (MCL_CURRENT only) for a total past the limit; a failed call changes nothing.
pub fn mlockall(flags: usize) -> isize {
    if flags == 0 || flags & !(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) != 0 || flags == MCL_ONFAULT {
        return -EINVAL;
    }
    let lock_flags = if flags & MCL_ONFAULT != 0 { MLOCK_ONFAULT } else { 0 };
    // Populating may take long, as the kernel's does, and no handler may run in between with the
    // pool's lock held (a fork would copy it taken, a longjmp leave it so).
    let held_off = HeldOff::begin();
    let Some((guard, pool)) = super::Guard::take() else {
        drop(held_off);
        return unsafe { syscall3(MLOCKALL, flags, 0, 0) };
    };
    if flags & MCL_CURRENT != 0 {
        let r = pool.lock_current(lock_flags);
        if r != 0 {
            return r;
        }
        note_locked(lock_flags);
    } else if !may_lock() {
        return -EPERM;
    }
    // Natively mlockall(MCL_CURRENT) also ends an earlier MCL_FUTURE.
    FUTURE.store(if flags & MCL_FUTURE != 0 { 1 + lock_flags } else { 0 }, Relaxed);
    if flags & MCL_FUTURE != 0 {
        note_locked(lock_flags);
    }
    drop(guard);
    drop(held_off);
    0
}

/// The kernel's can_do_mlock(): a limit above zero, or CAP_IPC_LOCK (capget: in the caller's
/// user namespace, where the kernel asks in the initial one).
fn may_lock() -> bool {
    memlock_limit() != 0 || has_cap_ipc_lock()
}

/// RLIMIT_MEMLOCK's soft limit, in bytes (u64::MAX: none).
fn memlock_limit() -> u64 {
    let mut limit = [u64::MAX; 2];
    unsafe { syscall6(PRLIMIT64, 0, RLIMIT_MEMLOCK, 0, limit.as_mut_ptr() as usize, 0, 0) };
    limit[0]
}

fn has_cap_ipc_lock() -> bool {
    let header = [0x2008_0522u32, 0]; // _LINUX_CAPABILITY_VERSION_3, this process
    let mut data = [0u32; 6];
    let r = unsafe { syscall3(CAPGET, header.as_ptr() as usize, data.as_mut_ptr() as usize, 0) };
    r == 0 && data[0] & (1 << CAP_IPC_LOCK) != 0
}

/// munlockall, before the kernel's: MCL_FUTURE ends.
pub fn munlockall() {
    FUTURE.store(0, Relaxed);
}

/// In a forked child: it inherits no locks, nor MCL_FUTURE.
pub fn child_after_fork() {
    FUTURE.store(0, Relaxed);
}

/// mlock, mlock2 and munlock reaching into the pool: ENOMEM where some of its pool pages are not
/// the program's, as on unmapped memory; else None (the kernel's call), remembering that pool
/// pages may be locked. The kernel's earlier errors are its own: mlock2's EINVAL for unknown
/// flags, and the EPERM of a lock under a zero limit without the capability.
pub fn lock_range(nr: usize, a: &[usize; 6]) -> Option<isize> {
    let (addr, len) = (a[0] & !(PAGE - 1), page_up(a[1].saturating_add(a[0] % PAGE)));
    if len == 0 || !super::reaches_pool(addr, len) || nr == MLOCK2 && a[2] & !MLOCK_ONFAULT != 0 {
        return None;
    }
    let r = super::check_held(addr, len);
    if r.is_some() && nr != MUNLOCK && !may_lock() {
        return None;
    }
    if r.is_none() && nr != MUNLOCK {
        note_locked(if nr == MLOCK2 { a[2] } else { 0 });
    }
    r
}

/// Pool memory just handed out (open, not yet the program's to see): locked under MCL_FUTURE.
/// -EAGAIN where the limit refuses it, as the kernel's mmap and brk refuse a locked mapping past
/// it (the caller gives the memory back); 0 otherwise (a populate that failed leaves it mapped,
/// as natively).
pub(super) fn lock_handed_out(addr: usize, len: usize) -> isize {
    match future() {
        Some(flags) if len > 0 && mlock2(addr, len, flags) == -ENOMEM => -EAGAIN,
        _ => 0,
    }
}

/// Pool pages the pool takes back (munmap, a lowered break): unlocked, as the kernel's munmap
/// drops their lock (else they stay resident and counted in VmLck, and the scrubber cannot drop
/// them).
pub(super) fn unlock_before_release(addr: usize, len: usize) {
    if any_locked() {
        unsafe { syscall3(MUNLOCK, addr, len, 0) };
    }
}

/// Before pool memory the program holds is moved (mremap's growth, MREMAP_DONTUNMAP): unlocked
/// first, because the kernel's move of a locked range leaves it counted twice (it clears the old
/// range's lock without uncounting it: VmLck kept 1 MiB after mremap and munmap of a locked MiB).
/// Whether it was locked (VmLck fell): VmLck before, in kB, for `lock_grown`.
pub(super) fn unlock_before_move(addr: usize, len: usize) -> Option<u64> {
    if !any_locked() {
        return None;
    }
    let before = vmlck_kb();
    unsafe { syscall3(MUNLOCK, addr, len, 0) };
    (vmlck_kb() < before).then_some(before)
}

/// The mlock2 flags pool memory that was locked is locked again with after a move: on fault where
/// every lock the program made in the pool was (the kernel's mremap keeps a mapping's
/// VM_LOCKONFAULT, and populates none of it), else populated.
fn relock_flags() -> usize {
    if LOCKED.load(Relaxed) == ON_FAULT { MLOCK_ONFAULT } else { 0 }
}

/// The grown part of pool memory that was locked (`unlock_before_move`: VmLck was
/// `locked_before_kb`), locked before the move as the kernel's mremap locks the growth of a locked
/// mapping, whether or not MCL_FUTURE is set (and never that of an unlocked one): -EAGAIN where
/// RLIMIT_MEMLOCK refuses it, checked on what was locked before the old part was unlocked, as
/// natively; 0 otherwise.
pub(super) fn lock_grown(addr: usize, len: usize, locked_before_kb: u64) -> isize {
    let wanted = locked_before_kb / (PAGE as u64 / 1024) + (len / PAGE) as u64;
    if wanted > memlock_limit() / PAGE as u64 && !has_cap_ipc_lock() {
        return -EAGAIN;
    }
    mlock2(addr, len, relock_flags());
    0
}

/// Pool memory that was locked before a move (`unlock_before_move`), locked again where it is
/// now, or still is (the move failed, or its growth was refused).
pub(super) fn lock_again(addr: usize, len: usize) {
    mlock2(addr, len, relock_flags());
}

/// VmLck of /proc/self/status, in kB (0 unread). Not inlined: its buffer would sit on the stack
/// the SIGSYS handler runs on, which may be a program's small signal stack.
#[inline(never)]
fn vmlck_kb() -> u64 {
    let mut buf = [0u8; 2048];
    let Some(text) = sys::read_once(b"/proc/self/status\0", &mut buf) else { return 0 };
    text.split(|&c| c == b'\n')
        .find_map(|line| line.strip_prefix(b"VmLck:"))
        .and_then(|v| coreplane_runtime::config::parse_u64(v.split(|&c| c == b' ' || c == b'\t').find(|f| !f.is_empty())?))
        .unwrap_or(0)
}

/// The kernel's mmap of the program under MCL_FUTURE (`make` makes the call with the arguments
/// given): MAP_LOCKED, as mm->def_flags would lock it; under MCL_ONFAULT, mlock2(MLOCK_ONFAULT)
/// after the call, and the mapping undone with EAGAIN where the limit refuses it, but for a
/// MAP_FIXED one (what it replaced is gone: it is kept, unlocked, rather than leave a hole).
pub fn mmap_locked(a: &[usize; 6], flags: usize, make: impl FnOnce(&[usize; 6]) -> isize) -> isize {
    if flags & MLOCK_ONFAULT == 0 {
        let mut locked = *a;
        locked[3] |= MAP_LOCKED;
        return make(&locked);
    }
    let r = make(a);
    if !failed(r) && mlock2(r as usize, a[1], flags) == -ENOMEM && a[3] & MAP_FIXED == 0 {
        unsafe { syscall3(MUNMAP, r as usize, a[1], 0) };
        return -EAGAIN;
    }
    r
}

/// The service's own mappings, sized by the pool and not by the program: neither counted nor
/// locked by mlockall (the fault handler's doorbell must not be touched).
fn own_ranges() -> [(usize, usize); 5] {
    let [s1, s2] = scrub::own_ranges();
    let [d1, d2] = demand::own_ranges();
    [(BOOK[0].load(Relaxed), BOOK[1].load(Relaxed)), s1, s2, d1, d2]
}

impl Pool {
    /// mlockall's MCL_CURRENT, under the pool's lock: the limit checked on what the program holds
    /// (see the module's comment), then its mappings locked. 0, or the kernel's error.
    fn lock_current(&mut self, flags: usize) -> isize {
        let limit = memlock_limit();
        let limit_pages = if limit == u64::MAX { usize::MAX } else { limit as usize / PAGE };
        let own: usize = own_ranges().iter().map(|r| r.1 / PAGE).sum();
        let unused = self.buddy.pages() - self.held;
        let total = super::total_vm().saturating_sub(own + unused);
        if total > limit_pages {
            let r = self.may_lock_beyond(limit_pages);
            if r != 0 {
                return r;
            }
        }
        let own = own_ranges();
        let (base, end) = (self.base, self.end());
        for_each_mapping(|lo, hi| {
            if lo >= USER_END {
                return;
            }
            // Outside the pool: the mapping less the service's own ranges.
            let mut at = lo;
            while at < hi {
                let cut = [(base, end - base)].iter().chain(own.iter())
                    .filter(|r| r.1 > 0 && r.0 + r.1 > at && r.0 < hi)
                    .min_by_key(|r| r.0).copied();
                let stop = cut.map_or(hi, |r| r.0.max(at));
                if stop > at {
                    mlock2(at, stop - at, flags);
                }
                at = cut.map_or(hi, |r| (r.0 + r.1).min(hi));
            }
            // In the pool: the runs the program holds (heap below the break, then blocks handed
            // out; pages from `fresh` on were never handed out).
            let (lo, hi) = (lo.max(base), hi.min(end));
            if lo < hi {
                let (first, last) = (self.page(lo) as usize, self.page(hi - 1) as usize + 1);
                for (from, to) in [(0, self.heap_top), (self.heap_pages, self.fresh)] {
                    let (from, to) = (from.max(first), to.min(last));
                    for state in [USED, FOREIGN] {
                        if from < to {
                            for (run, n) in self.buddy.runs(from as u32, to - from, state) {
                                mlock2(self.base + run as usize * PAGE, n * PAGE, flags);
                            }
                        }
                    }
                }
            }
        });
        0
    }

    /// Whether the process may lock past RLIMIT_MEMLOCK: 0, or the kernel's EPERM or ENOMEM.
    /// Asked of the kernel with an mlock2(MLOCK_ONFAULT) of more pages than the limit on the
    /// pool's never-used tail (PROT_NONE: nothing populated), undone where it succeeds; where
    /// the tail is shorter than the limit, from the capability sets (capget).
    fn may_lock_beyond(&mut self, limit_pages: usize) -> isize {
        let tail = self.buddy.pages() - self.fresh;
        if limit_pages < tail {
            let (addr, len) = (self.base + self.fresh * PAGE, (limit_pages + 1) * PAGE);
            let r = mlock2(addr, len, MLOCK_ONFAULT);
            if r == 0 {
                unsafe { syscall3(MUNLOCK, addr, len, 0) };
            }
            return r;
        }
        match (has_cap_ipc_lock(), limit_pages) {
            (true, _) => 0,
            (false, 0) => -EPERM,
            (false, _) => -ENOMEM,
        }
    }
}

/// /proc/self/maps, read under the pool's lock into a buffer of its own (the caller may be on a
/// small signal stack of the program's): `each(lo, hi)` for every mapping.
fn for_each_mapping(mut each: impl FnMut(usize, usize)) {
    static mut BUF: [u8; 4096] = [0; 4096];
    let buf = unsafe { &mut *core::ptr::addr_of_mut!(BUF) };
    crate::textmap::each_mapping(buf, |line| {
        let (lo, hi) = crate::textmap::range_of(line);
        if lo < hi {
            each(lo, hi);
        }
    });
}
