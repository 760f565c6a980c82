//! Which code is file-backed text: what the loader and the program mapped so, and otherwise
//! /proc/self/maps, remembered until the mappings change.
//! The fast path rewrites only syscall sites in private read-execute file mappings (not JIT
//! code, the vDSO or writable code, nor shared code: a patch in a MAP_SHARED file mapping or a
//! SysV segment attached with SHM_EXEC is written into the file or segment itself, for every
//! process that maps it; such sites trap at every call). Reading /proc/self/maps costs ≈ 25 µs even for a small process, half
//! of a site's first call, so one read is kept: every r-x file mapping it lists, which answers
//! for any address (one read per library cost a bash or env 3–4 reads, 135 of the runtime's 653
//! open calls in a pyenv `python3 -c pass` tree of 79 processes). It is forgotten when the
//! program maps, unmaps or re-protects memory in a way that may make it wrong (`range_changed`,
//! from dispatch), after which an address may be something else. Callers of `is_file_text` hold
//! the fast path's rewrite lock; `range_changed` takes no lock (see READING).

use crate::sys::*;
use core::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering::*};

/// Bumped by every call that may change what an address is; the cache is of one generation.
static GENERATION: AtomicUsize = AtomicUsize::new(0);
static CACHED_GENERATION: AtomicUsize = AtomicUsize::new(0);
/// The r-x file mappings of the last read, [lo, hi).
const RANGES: usize = 256;
static TEXT: [[AtomicUsize; 2]; RANGES] = [const { [AtomicUsize::new(0), AtomicUsize::new(0)] }; RANGES];
static TEXT_USED: AtomicUsize = AtomicUsize::new(0);
/// Whether TEXT holds all of them for the cached generation (none read yet, or more than
/// RANGES: an address outside is read again).
static COMPLETE: AtomicBool = AtomicBool::new(false);
/// Odd while `is_file_text` runs (a sequence lock): from before its read of /proc/self/maps to
/// after its cache update, so that a mapping call that ends meanwhile, whose change the read
/// may have missed or the update not yet shows, forgets instead of checking the ranges. The
/// rewrite lock was taken here before, and a rewrite holds it ≈ 25 µs: a JVM's mprotect calls
/// waited up to 13 ms on it at load 5 (its holder preempted), 0.2–0.7 ms in most runs.
static READING: AtomicUsize = AtomicUsize::new(0);

/// The program may have changed what some address is (mmap with MAP_FIXED, munmap, mprotect,
/// mremap): what is remembered is read again.
pub fn mappings_changed() {
    GENERATION.fetch_add(1, Release);
}

/// A private read-execute mapping of a file now lies at [lo, hi): ld.so's mapping of a library's
/// text, or the loader's of the program and its interpreter (`loaded`). It is added to what is
/// remembered instead of forgetting it, which cost every process a read of /proc/self/maps per
/// library it loaded (≈ 25–35 µs each on this machine's kernel). The new range is text whatever
/// it replaced, so the remembered ranges stay true with it added. Forgotten as before where the
/// rewrite lock is held (another thread reading or rewriting, or this one, interrupted) or no
/// range is left.
///
/// `before` is the generation when the mapping call began: where another thread changed the
/// mappings meanwhile (unmapped the new range and mapped JIT code there, say), the range may no
/// longer be this text, and it is not added (a helper's review).
pub fn text_mapped(lo: usize, hi: usize, before: usize) {
    if !crate::rewrite_lock::try_lock() {
        return mappings_changed();
    }
    // Odd while the ranges change, for `range_changed` in other threads (it takes no lock).
    READING.fetch_add(1, AcqRel);
    if GENERATION.load(Acquire) == before {
        add(lo, hi);
    }
    READING.fetch_add(1, Release);
    crate::rewrite_lock::unlock();
}

/// The generation of what is remembered: taken before a mapping call whose result `text_mapped`
/// adds.
pub fn generation() -> usize {
    GENERATION.load(Acquire)
}

/// The loader mapped text of the program or its interpreter at [lo, hi), before any thread of
/// the program runs (so without the lock, which needs a thread).
pub fn loading(lo: usize, hi: usize) {
    add(lo, hi);
}

/// The loader mapped the program and its interpreter, and the program has not run yet: no other
/// file text can hold a site of its, so the ranges are complete and its first rewrite needs no
/// read of /proc/self/maps. (The runtime's own text is file text too, but its calls never trap,
/// so no rewrite asks about it.)
pub fn loaded() {
    if CACHED_GENERATION.load(Relaxed) == GENERATION.load(Acquire) {
        COMPLETE.store(true, Relaxed);
    }
}

/// Adds [lo, hi) to the ranges if they are of the current generation (else they are read again
/// at the next look-up, and that read sees it); with no range left they are incomplete.
fn add(lo: usize, hi: usize) {
    if CACHED_GENERATION.load(Relaxed) != GENERATION.load(Acquire) {
        return;
    }
    let used = TEXT_USED.load(Relaxed);
    if used < RANGES {
        TEXT[used][0].store(lo, Relaxed);
        TEXT[used][1].store(hi, Relaxed);
        TEXT_USED.store(used + 1, Relaxed);
    } else {
        COMPLETE.store(false, Relaxed);
    }
}

/// Mapping call `nr` with arguments `a` succeeded: forgets what is remembered only if it may
/// now be wrong, not at every call (glibc's malloc re-protects heap memory all the time, and
/// each forgetting costs the next new site a read of /proc/self/maps, ≈ 25 µs): when the range
/// overlaps remembered text, or its new protection lets it execute (an address outside the
/// text may be text now). A range that neither executes nor overlaps text leaves the answers
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

/// `is_file_text`'s answer, from the cache or from a new read of /proc/self/maps.
fn look_up(addr: usize) -> bool {
    let generation = GENERATION.load(Acquire);
    if CACHED_GENERATION.load(Relaxed) != generation {
        TEXT_USED.store(0, Relaxed);
        COMPLETE.store(false, Relaxed);
        CACHED_GENERATION.store(generation, Relaxed);
    }
    let used = TEXT_USED.load(Relaxed);
    if TEXT[..used].iter().any(|[lo, hi]| lo.load(Relaxed) <= addr && addr < hi.load(Relaxed)) {
        return true;
    }
    if COMPLETE.load(Relaxed) {
        return false;
    }
    let (found, complete) = read_text(addr);
    COMPLETE.store(complete, Relaxed);
    found
}

/// Reads /proc/self/maps into TEXT: its private read-execute file mappings (not anonymous or
/// special mappings such as [vdso], nor writable or shared code), the first RANGES of them. Whether `addr` lies
/// in one, and whether they all fit (a failed read leaves TEXT empty and incomplete).
fn read_text(addr: usize) -> (bool, bool) {
    TEXT_USED.store(0, Relaxed);
    let mut found = false;
    let mut used = 0;
    let mut complete = true;
    let mut buf = [0u8; 4096];
    let read = each_mapping(&mut buf, |line| {
        let mut fields = line.split(|&c| c == b' ').filter(|f| !f.is_empty());
        let (Some(_), Some(perms)) = (fields.next(), fields.next()) else { return };
        let path = fields.nth(3);
        if perms != b"r-xp" || !path.is_some_and(|p| p.first() == Some(&b'/')) {
            return;
        }
        let (lo, hi) = range_of(line);
        found |= lo <= addr && addr < hi;
        if used == RANGES {
            complete = false;
            return;
        }
        TEXT[used][0].store(lo, Relaxed);
        TEXT[used][1].store(hi, Relaxed);
        used += 1;
        TEXT_USED.store(used, Relaxed);
    });
    (found, complete && read)
}

/// Reads /proc/self/maps through `buf`, calling `each` with every line (its first `buf.len()`
/// bytes where it is longer: a long path); false when it could not be read whole.
pub fn each_mapping(buf: &mut [u8], mut each: impl FnMut(&[u8])) -> bool {
    let fd = crate::sys::open(b"/proc/self/maps\0".as_ptr(), O_RDONLY | O_CLOEXEC);
    if fd < 0 {
        return false;
    }
    crate::profile::count_maps_read();
    let (mut carry, mut skipping, mut complete) = (0, false, true);
    loop {
        let n = unsafe { syscall3(READ, fd as usize, buf.as_mut_ptr().add(carry) as usize, buf.len() - carry) };
        if n <= 0 {
            complete &= n == 0;
            break;
        }
        let end = carry + n as usize;
        let mut start = 0;
        while let Some(nl) = buf[start..end].iter().position(|&c| c == b'\n') {
            if !core::mem::take(&mut skipping) {
                each(&buf[start..start + nl]);
            }
            start += nl + 1; // else the end of a line longer than the buffer, whose start was seen
        }
        if start == 0 && end == buf.len() {
            if !skipping {
                each(&buf[..end]);
            }
            skipping = true;
            carry = 0;
            continue;
        }
        buf.copy_within(start..end, 0);
        carry = end - start;
    }
    unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
    complete
}

/// The address range a line of /proc/self/maps starts with.
pub fn range_of(line: &[u8]) -> (usize, usize) {
    let range = line.split(|&c| c == b' ').next().unwrap_or(&[]);
    let dash = range.iter().position(|&c| c == b'-').unwrap_or(0);
    (hex(&range[..dash]), hex(&range[dash + 1..]))
}

fn hex(s: &[u8]) -> usize {
    s.iter().fold(0, |acc, &c| acc << 4 | (c as char).to_digit(16).unwrap_or(0) as usize)
}
