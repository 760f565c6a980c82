//! How many times each syscall site has trapped, so that the fast path rewrites a site only at
//! its Nth trap (`rewrite_at`): a rewrite (two mprotect pairs, a membarrier, a stub) costs
//! several traps, and most sites of a short-lived process trap once or twice. Guarded by the
//! rewrite lock; a fork copies the counts, an execve starts afresh.

use core::ptr::addr_of_mut;

/// One page of words: a site's address (below 2^47), the number it trapped with (below 512) and
/// its traps so far (saturating).
const SLOTS: usize = 512;
/// Slots looked at from a site's hash before the table counts as full for it.
const PROBES: usize = 16;
const NR_SHIFT: u32 = 48;
const COUNT_SHIFT: u32 = 57;
const SITE_MASK: u64 = (1 << NR_SHIFT) - 1;
/// The most traps a slot counts: the configuration's largest rewrite point.
const MAX_COUNT: u64 = (1 << (64 - COUNT_SHIFT)) - 1;
const _: () = assert!(MAX_COUNT == coreplane_runtime::config::REWRITE_AT_MAX);
/// 0 marks a free slot (page 0 holds no program code).
static mut SITES: [u64; SLOTS] = [0; SLOTS];

/// Counts a trap of call `nr` at `site`, under the rewrite lock: whether the site is now due
/// for its rewrite, i.e. has trapped `rewrite_at` times. A site the table has no room for is due
/// at once, as every site was before.
pub fn due(site: usize, nr: usize, rewrite_at: u32) -> bool {
    if rewrite_at <= 1 {
        return true;
    }
    let hash = ((site as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 55) as usize;
    let sites = unsafe { &mut *addr_of_mut!(SITES) };
    for i in 0..PROBES {
        let slot = &mut sites[(hash + i) % SLOTS];
        if *slot & SITE_MASK == site as u64 || *slot == 0 {
            let traps = ((*slot >> COUNT_SHIFT) + 1).min(MAX_COUNT);
            *slot = site as u64 | (nr as u64 & 511) << NR_SHIFT | traps << COUNT_SHIFT;
            return traps >= rewrite_at as u64;
        }
    }
    true
}

/// Each site counted so far with the number it trapped with, forgotten once given (under the
/// rewrite lock).
pub fn drain(mut each: impl FnMut(usize, usize)) {
    let sites = unsafe { &mut *addr_of_mut!(SITES) };
    for slot in sites.iter_mut().filter(|s| **s != 0) {
        each((*slot & SITE_MASK) as usize, ((*slot >> NR_SHIFT) & 511) as usize);
        *slot = 0;
    }
}
