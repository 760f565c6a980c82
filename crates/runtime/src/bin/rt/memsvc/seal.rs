//! Pool memory the program sealed (mseal, Linux 6.10): the munmap the service answers fails as the kernel's would.
//! mseal seals the pool's own mapping in the kernel, so every call the kernel still makes on that
//! memory (mprotect, madvise, mremap's move, MAP_FIXED over it) fails with EPERM as natively. Only
//! what the service answers without the kernel must ask here: munmap, and mremap's shrinking,
//! which free pages in user space. Sealed ranges are remembered exactly, up to SLOTS (256) of them;
//! past that, the span from the lowest to the highest sealed byte counts as sealed, so a munmap
//! between sealed ranges may fail with EPERM where natively it would not. Seals cannot be
//! undone and a fork child keeps its parent's (the kernel copies them with the mappings), as
//! it keeps these statics.

use crate::sys::PAGE;
use core::sync::atomic::{AtomicUsize, Ordering::{Acquire, Relaxed, Release}};

const SLOTS: usize = 256;
/// [start, end) of each sealed range in the pool, end stored first: a reader that sees a start
/// sees its end (a range half-written by a racing mseal reads as empty, as the race allows).
static RANGES: [[AtomicUsize; 2]; SLOTS] = [const { [AtomicUsize::new(0), AtomicUsize::new(0)] }; SLOTS];
/// Ranges recorded, SLOTS and beyond meaning some were only folded into the span.
static COUNT: AtomicUsize = AtomicUsize::new(0);
static SPAN: [AtomicUsize; 2] = [AtomicUsize::new(usize::MAX), AtomicUsize::new(0)];

/// After the program's mseal(addr, len) returned `r`: a seal that reaches the pool is remembered.
pub fn after_mseal(addr: usize, len: usize, r: isize) {
    if r != 0 || len == 0 || !super::reaches_pool(addr, len) {
        return;
    }
    let end = addr.saturating_add(len).next_multiple_of(PAGE);
    SPAN[0].fetch_min(addr, Relaxed);
    SPAN[1].fetch_max(end, Relaxed);
    let i = COUNT.fetch_add(1, Relaxed);
    if i < SLOTS {
        RANGES[i][1].store(end, Relaxed);
        RANGES[i][0].store(addr, Release);
    }
}

/// Whether [addr, addr + len) reaches sealed pool memory: the service's munmap or shrinking
/// mremap of it fails with EPERM, and nothing is freed.
pub fn refuses(addr: usize, len: usize) -> bool {
    let n = COUNT.load(Acquire);
    if n == 0 {
        return false;
    }
    let end = addr.saturating_add(len);
    if n > SLOTS {
        return addr < SPAN[1].load(Relaxed) && end > SPAN[0].load(Relaxed);
    }
    RANGES[..n].iter().any(|r| {
        let start = r[0].load(Acquire);
        start != 0 && addr < r[1].load(Relaxed) && end > start
    })
}
