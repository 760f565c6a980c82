//! Which code is file-backed text, from /proc/self/maps, remembered until the mappings change.
//! The fast path rewrites only syscall sites in read-execute file mappings (not JIT code, the
//! vDSO or writable code). Reading /proc/self/maps costs ≈ 25 µs even for a small process, half
//! of a site's first call, so the answer is kept: the whole r-x file mapping a site was found in,
//! and pages found not to be file text. Both are forgotten when the program maps, unmaps or
//! re-protects memory in a way that may make them wrong (`range_changed`, from dispatch), after
//! which an address may be something else. Callers of `is_file_text` hold the fast path's
//! rewrite lock; `range_changed` takes no lock (see READING).

use crate::sys::*;
use core::sync::atomic::{fence, AtomicUsize, Ordering::*};

/// Bumped by every call that may change what an address is; the caches are of one generation.
static GENERATION: AtomicUsize = AtomicUsize::new(0);
static CACHED_GENERATION: AtomicUsize = AtomicUsize::new(0);
/// r-x file mappings found so far, [lo, hi).
const RANGES: usize = 64;
static TEXT: [[AtomicUsize; 2]; RANGES] = [const { [AtomicUsize::new(0), AtomicUsize::new(0)] }; RANGES];
static TEXT_USED: AtomicUsize = AtomicUsize::new(0);
/// Odd while `is_file_text` runs (a sequence lock): from before its read of /proc/self/maps to
/// after its cache update, so that a mapping call that ends meanwhile, whose change the read
/// may have missed or the update not yet shows, forgets instead of checking the ranges. The
/// rewrite lock was taken here before, and a rewrite holds it ≈ 25 µs: a JVM's mprotect calls
/// waited up to 13 ms on it at load 5 (its holder preempted), 0.2–0.7 ms in most runs.
static READING: AtomicUsize = AtomicUsize::new(0);
/// Pages found not to be file-backed text. Open addressing.
const NOT_TEXT_SLOTS: usize = 256;
static mut NOT_TEXT: [usize; NOT_TEXT_SLOTS] = [0; NOT_TEXT_SLOTS];

/// The program may have changed what some address is (mmap with MAP_FIXED, munmap, mprotect,
/// mremap): what is remembered is read again.
pub fn mappings_changed() {
    GENERATION.fetch_add(1, Release);
}

/// Mapping call `nr` with arguments `a` succeeded: forgets what is remembered only if it may
/// now be wrong, not at every call (glibc's malloc re-protects heap memory all the time, and
/// each forgetting costs the next new site a read of /proc/self/maps, ≈ 25 µs): when the range
/// overlaps remembered text, or its new protection lets it execute (a page found not to be
/// text may be text now). A range that neither executes nor overlaps text leaves both answers
/// true. mremap may move text anywhere: always.
pub fn range_changed(nr: usize, a: &[usize; 6]) {
    let exec = match nr {
        MMAP | MPROTECT => a[2] & PROT_EXEC != 0,
        MUNMAP => false,
        _ => true,
    };
    if exec {
        return mappings_changed();
    }
    let (lo, hi) = (a[0], a[0].saturating_add(a[1]));
    let seq = READING.load(Acquire);
    if seq % 2 == 1 {
        return mappings_changed();
    }
    let used = TEXT_USED.load(Relaxed).min(RANGES);
    let overlaps = CACHED_GENERATION.load(Relaxed) == GENERATION.load(Acquire)
        && TEXT[..used].iter().any(|[tlo, thi]| tlo.load(Relaxed) < hi && lo < thi.load(Relaxed));
    fence(Acquire);
    if overlaps || READING.load(Relaxed) != seq {
        mappings_changed();
    }
}

/// Whether `addr` lies in read-execute file text. Under the rewrite lock.
pub fn is_file_text(addr: usize) -> bool {
    READING.fetch_add(1, AcqRel);
    let found = look_up(addr);
    READING.fetch_add(1, Release);
    found
}

/// `is_file_text`'s answer, from the caches or /proc/self/maps (caching it).
fn look_up(addr: usize) -> bool {
    let generation = GENERATION.load(Acquire);
    if CACHED_GENERATION.load(Relaxed) != generation {
        TEXT_USED.store(0, Relaxed);
        unsafe { *core::ptr::addr_of_mut!(NOT_TEXT) = [0; NOT_TEXT_SLOTS] };
        CACHED_GENERATION.store(generation, Relaxed);
    }
    let used = TEXT_USED.load(Relaxed);
    if TEXT[..used].iter().any(|[lo, hi]| lo.load(Relaxed) <= addr && addr < hi.load(Relaxed)) {
        return true;
    }
    let page = addr & !(PAGE - 1);
    if unsafe { not_text(page, false) } {
        return false;
    }
    match mapping_of(addr) {
        Some((lo, hi)) => {
            if used < RANGES {
                TEXT[used][0].store(lo, Relaxed);
                TEXT[used][1].store(hi, Relaxed);
                TEXT_USED.store(used + 1, Relaxed);
            }
            true
        }
        None => {
            unsafe { not_text(page, true) };
            false
        }
    }
}

/// Looks `page` up in NOT_TEXT, inserting it when `insert`; true if it was there.
unsafe fn not_text(page: usize, insert: bool) -> bool {
    let table = &mut *core::ptr::addr_of_mut!(NOT_TEXT);
    let mut i = (page >> 12).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56;
    for _ in 0..NOT_TEXT_SLOTS {
        match table[i] {
            0 => {
                if insert {
                    table[i] = page;
                }
                return false;
            }
            p if p == page => return true,
            _ => i = (i + 1) % NOT_TEXT_SLOTS,
        }
    }
    false // full: look again next time
}

/// The read-execute file mapping holding `addr`, from /proc/self/maps; None for anything else
/// (anonymous and special mappings such as [vdso], writable code).
fn mapping_of(addr: usize) -> Option<(usize, usize)> {
    let fd = unsafe { syscall3(OPEN, b"/proc/self/maps\0".as_ptr() as usize, O_RDONLY | O_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 4096];
    let mut carry = 0;
    let mut found = None;
    'read: loop {
        let n = unsafe { syscall3(READ, fd as usize, buf.as_mut_ptr().add(carry) as usize, buf.len() - carry) };
        if n <= 0 {
            break;
        }
        let end = carry + n as usize;
        let mut start = 0;
        while let Some(nl) = buf[start..end].iter().position(|&c| c == b'\n') {
            let line = &buf[start..start + nl];
            start += nl + 1;
            let mut fields = line.split(|&c| c == b' ').filter(|f| !f.is_empty());
            let (Some(range), Some(perms)) = (fields.next(), fields.next()) else { continue };
            let dash = range.iter().position(|&c| c == b'-').unwrap_or(0);
            let (lo, hi) = (hex(&range[..dash]), hex(&range[dash + 1..]));
            if lo <= addr && addr < hi {
                let path = fields.nth(3);
                if perms.starts_with(b"r-x") && path.is_some_and(|p| p.first() == Some(&b'/')) {
                    found = Some((lo, hi));
                }
                break 'read;
            }
        }
        buf.copy_within(start..end, 0);
        carry = end - start;
    }
    unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
    found
}

fn hex(s: &[u8]) -> usize {
    s.iter().fold(0, |acc, &c| acc << 4 | (c as char).to_digit(16).unwrap_or(0) as usize)
}
