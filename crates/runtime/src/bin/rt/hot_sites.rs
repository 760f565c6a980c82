//! How many times each syscall site has trapped, so that the fast path rewrites a site only at
//! its Nth trap (`rewrite_at`): a rewrite (two mprotect pairs, a membarrier, a stub) costs
//! several traps, and most sites of a short-lived process trap once or twice. Guarded by the
//! rewrite lock; a fork copies the counts, an execve starts afresh.

use core::ptr::addr_of_mut;

/// One page: a slot is the site's address (below 2^47) in the low bits and its traps in the top 16.
const SLOTS: usize = 512;
/// Slots looked at from a site's hash before the table counts as full for it.
const PROBES: usize = 16;
const SITE_BITS: u32 = 48;
const SITE_MASK: u64 = (1 << SITE_BITS) - 1;
/// 0 marks a free slot (page 0 holds no program code).
static mut SITES: [u64; SLOTS] = [0; SLOTS];

/// Counts a trap at `site`, under the rewrite lock: whether the site is now due for its
/// rewrite, i.e. has trapped `rewrite_at` times. A site the table has no room for is due at
/// once, as every site was before.
pub fn due(site: usize, rewrite_at: u32) -> bool {
    if rewrite_at <= 1 {
        return true;
    }
    let hash = ((site as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 55) as usize;
    let sites = unsafe { &mut *addr_of_mut!(SITES) };
    for i in 0..PROBES {
        let slot = &mut sites[(hash + i) % SLOTS];
        if *slot & SITE_MASK == site as u64 || *slot == 0 {
            let traps = ((*slot >> SITE_BITS) + 1).min(u16::MAX as u64);
            *slot = site as u64 | traps << SITE_BITS;
            return traps >= rewrite_at as u64;
        }
    }
    true
}
