//! The memory pool's page allocator: a binary buddy system with its bookkeeping outside the pool.
//!
//! Why a buddy system: allocation and free are O(log n) whatever the pool's size, free blocks
//! coalesce without a search, and every block of 2^k pages starts on a multiple of 2^k pages,
//! so a request of 2 MiB or more gets whole 2 MiB frames and the pool's transparent huge pages
//! stay whole (a first-fit list would need a search and split huge pages at odd offsets).
//! Its weakness, rounding to a power of two, is removed by trimming: a request of n pages
//! takes a block of 2^k ≥ n and gives the tail back at once as aligned blocks, so at most the
//! alignment, not the memory, is lost. A program may unmap any page range (glibc trims the head
//! and tail of its arenas' reservations), so every page has a state, and freeing a range frees
//! exactly the pages of it that are in use.
//!
//! Free pages are mapped PROT_NONE (an access to unmapped memory must fault), so nothing can be
//! written into them: the free lists are doubly linked through arrays beside the pool (9 bytes
//! per 4 KiB page), not through the free blocks themselves as in a kernel's buddy allocator.

/// A page never yet populated (the state of a fresh, zero-filled bookkeeping array).
pub const UNPOPULATED: u8 = 0;
/// In a free block, not its first page.
pub const FREE_BODY: u8 = 1;
/// Handed out to the program.
pub const USED: u8 = 2;
/// Unmapped by the program, waiting to be zeroed.
pub const DIRTY: u8 = 3;
/// Replaced by a mapping of the program's own (mmap MAP_FIXED over pool pages it held).
pub const FOREIGN: u8 = 4;
/// First page of a free block of order k: FREE_HEAD | k.
pub const FREE_HEAD: u8 = 0x80;

/// Largest block: 2^MAX_ORDER pages (2^24 pages of 4 KiB = 64 GiB).
pub const MAX_ORDER: usize = 24;
const NIL: u32 = u32::MAX;

/// A buddy allocator over `pages` pages, numbered from 0; the caller maps page i at base + i·4 KiB.
pub struct Buddy<'a> {
    state: &'a mut [u8],
    next: &'a mut [u32],
    prev: &'a mut [u32],
    heads: [u32; MAX_ORDER + 1],
    /// Pages in the free lists.
    pub free_pages: usize,
}

/// Order of the largest aligned block starting at page `at` that fits in `len` pages.
fn largest_block(at: u32, len: usize) -> usize {
    let align = if at == 0 { MAX_ORDER } else { at.trailing_zeros() as usize };
    align.min(MAX_ORDER).min(usize::BITS as usize - 1 - len.leading_zeros() as usize)
}

impl<'a> Buddy<'a> {
    /// An allocator whose pages are all UNPOPULATED: `state` must be zero-filled, and the three
    /// arrays as long as the pool has pages (at most u32::MAX − 1).
    pub fn new(state: &'a mut [u8], next: &'a mut [u32], prev: &'a mut [u32]) -> Self {
        assert!(state.len() == next.len() && state.len() == prev.len() && state.len() < NIL as usize);
        Buddy { state, next, prev, heads: [NIL; MAX_ORDER + 1], free_pages: 0 }
    }

    /// Pages in the pool.
    pub fn pages(&self) -> usize {
        self.state.len()
    }

    /// State of page `i` (one of the constants; a free head reads FREE_HEAD | order).
    pub fn state(&self, i: usize) -> u8 {
        self.state[i]
    }

    /// Sets `len` pages from `start` to `state` (USED, DIRTY or FOREIGN; not a free state).
    pub fn mark(&mut self, start: u32, len: usize, state: u8) {
        self.state[start as usize..start as usize + len].fill(state);
    }

    fn push(&mut self, at: u32, order: usize) {
        self.state[at as usize] = FREE_HEAD | order as u8;
        self.next[at as usize] = self.heads[order];
        self.prev[at as usize] = NIL;
        if self.heads[order] != NIL {
            self.prev[self.heads[order] as usize] = at;
        }
        self.heads[order] = at;
    }

    fn unlink(&mut self, at: u32, order: usize) {
        let (n, p) = (self.next[at as usize], self.prev[at as usize]);
        if p == NIL {
            self.heads[order] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        }
        self.state[at as usize] = FREE_BODY;
    }

    /// Returns `len` pages from `start` (zero, populated or not, PROT_NONE) to the free lists,
    /// merging each aligned block with its free buddies.
    pub fn release(&mut self, start: u32, len: usize) {
        self.state[start as usize..start as usize + len].fill(FREE_BODY);
        self.free_pages += len;
        let (mut at, mut left) = (start, len);
        while left > 0 {
            let order = largest_block(at, left);
            let (mut head, mut k) = (at, order);
            while k < MAX_ORDER {
                let buddy = head ^ (1 << k);
                if buddy as usize + (1 << k) > self.pages() || self.state[buddy as usize] != FREE_HEAD | k as u8 {
                    break;
                }
                self.unlink(buddy, k);
                head = head.min(buddy);
                k += 1;
            }
            self.push(head, k);
            at += 1 << order;
            left -= 1 << order;
        }
    }

    /// Takes `n` pages (n ≥ 1) aligned to the largest power of two not above n and marks them
    /// USED; the rest of the block they came from goes back at once. None when no block fits.
    pub fn alloc(&mut self, n: usize) -> Option<u32> {
        let want = (usize::BITS - (n - 1).leading_zeros()) as usize; // ceil(log2 n)
        let Some(mut order) = (want..=MAX_ORDER).find(|&k| self.heads[k] != NIL) else {
            return self.alloc_spanning(n, want);
        };
        let block = self.heads[order];
        self.unlink(block, order);
        while order > want {
            order -= 1;
            self.push(block + (1 << order), order);
        }
        self.free_pages -= 1 << want;
        self.mark(block, n, USED);
        if (1 << want) > n {
            let tail = (1usize << want) - n;
            self.release(block + n as u32, tail);
        }
        Some(block)
    }

    /// `n` pages (not a power of two) when no block of 2^want is free: a free block of half that
    /// size followed by free blocks up to n pages (glibc asks for 2^k + 1 pages, and a pool of
    /// three times the request holds only one block of 2^(k+1) aligned pages). Looks at the
    /// first SPAN_TRIES blocks of the half size.
    fn alloc_spanning(&mut self, n: usize, want: usize) -> Option<u32> {
        const SPAN_TRIES: usize = 64;
        if want == 0 || n == 1 << want {
            return None;
        }
        let half = want - 1;
        let mut candidate = self.heads[half];
        for _ in 0..SPAN_TRIES {
            if candidate == NIL {
                return None;
            }
            let (start, end) = (candidate as usize, candidate as usize + n);
            // Free blocks from the end of the candidate on, until they cover n pages.
            let mut at = start + (1 << half);
            while at < end && at < self.pages() && self.state[at] & FREE_HEAD != 0 {
                at += 1 << (self.state[at] & !FREE_HEAD);
            }
            if at >= end {
                let mut head = start;
                while head < at {
                    let k = (self.state[head] & !FREE_HEAD) as usize;
                    self.unlink(head as u32, k);
                    head += 1 << k;
                }
                self.free_pages -= at - start;
                self.mark(candidate, n, USED);
                self.release(end as u32, at - end);
                return Some(candidate);
            }
            candidate = self.next[candidate as usize];
        }
        None
    }

    /// Takes exactly the `len` pages from `start` and marks them USED, where all of them are in
    /// the free lists (mremap with MREMAP_FIXED into pages the program had unmapped); the parts
    /// of their blocks outside the range go back. False, and nothing changed, otherwise.
    pub fn claim(&mut self, start: u32, len: usize) -> bool {
        let end = start as usize + len;
        if len == 0 || end > self.pages() || !(start as usize..end).all(|i| self.state[i] == FREE_BODY || self.state[i] & FREE_HEAD != 0) {
            return false;
        }
        // Every block the range touches leaves the free lists before any part of one goes back,
        // so that no part merges with a block still to be taken.
        let (first, mut last) = (self.block_of(start), (0, 0));
        let mut at = start as usize;
        while at < end {
            let (head, order) = self.block_of(at as u32);
            self.unlink(head, order);
            self.free_pages -= 1 << order;
            last = (head, order);
            at = head as usize + (1 << order);
        }
        self.mark(start, len, USED);
        self.release(first.0, (start - first.0) as usize);
        self.release(end as u32, last.0 as usize + (1 << last.1) - end);
        true
    }

    /// The free block holding free page `at`: its head and order.
    fn block_of(&self, at: u32) -> (u32, usize) {
        (0..=MAX_ORDER)
            .map(|k| (at & !((1u32 << k) - 1), k))
            .find(|&(head, k)| self.state[head as usize] == FREE_HEAD | k as u8)
            .expect("a free page lies in a free block")
    }

    /// The maximal runs of pages in `state` among `len` pages from `start`, in order.
    pub fn runs(&self, start: u32, len: usize, state: u8) -> Runs<'_> {
        Runs { states: self.state, at: start as usize, end: start as usize + len, state }
    }

    /// Whether all `len` pages from `start` are in `state`.
    pub fn all(&self, start: u32, len: usize, state: u8) -> bool {
        let end = start as usize + len;
        scan(self.state, start as usize, end, state, false) == end
    }
}

/// The first page in [at, end) whose state is `state` (`equal`) or is not (!`equal`), else
/// `end`. Words of eight states, then the byte: freeing 128 MiB looks at 32768 states, and a
/// byte loop over them was 2/3 of the time of mmap + munmap of untouched memory under the pool.
fn scan(states: &[u8], mut at: usize, end: usize, state: u8, equal: bool) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let pattern = ONES * state as u64;
    // 64 states at a time while none is the one looked for (a block freed whole is one run).
    let differs = |w: &[u8]| u64::from_ne_bytes(w.try_into().unwrap()) ^ pattern;
    while at + 64 <= end {
        let words = states[at..at + 64].chunks_exact(8).map(differs);
        let found = if equal {
            words.fold(0, |acc, x| acc | x.wrapping_sub(ONES) & !x) & (ONES << 7) != 0
        } else {
            words.fold(0, |acc, x| acc | x) != 0
        };
        if found {
            break;
        }
        at += 64;
    }
    while at + 8 <= end {
        // A zero byte of `x` is a page in `state` (the test for one is exact, not its place).
        let x = differs(&states[at..at + 8]);
        let found = if equal { x.wrapping_sub(ONES) & !x & (ONES << 7) != 0 } else { x != 0 };
        if found {
            break;
        }
        at += 8;
    }
    while at < end && (states[at] == state) != equal {
        at += 1;
    }
    at
}

/// Iterator of (first page, pages) runs in one state; see `Buddy::runs`.
pub struct Runs<'b> {
    states: &'b [u8],
    at: usize,
    end: usize,
    state: u8,
}

impl Iterator for Runs<'_> {
    type Item = (u32, usize);

    fn next(&mut self) -> Option<(u32, usize)> {
        let first = scan(self.states, self.at, self.end, self.state, true);
        self.at = scan(self.states, first, self.end, self.state, false);
        (self.at > first).then_some((first as u32, self.at - first))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrays(pages: usize) -> (Vec<u8>, Vec<u32>, Vec<u32>) {
        (vec![0; pages], vec![0; pages], vec![0; pages])
    }

    #[test]
    fn claims_an_exact_range_and_gives_it_back_whole() {
        let (mut s, mut n, mut p) = arrays(1024);
        let mut b = Buddy::new(&mut s, &mut n, &mut p);
        b.release(0, 1024);
        assert!(b.claim(300, 5));
        assert_eq!(b.free_pages, 1019);
        assert!((300..305).all(|i| b.state(i) == USED));
        assert!(!b.claim(302, 10), "a used page is not claimed");
        assert_eq!(b.free_pages, 1019);
        // The pages around stay allocatable, and what is given back merges into one block again.
        let a = b.alloc(256).unwrap();
        assert!(a + 256 <= 300 || a >= 305);
        b.release(a, 256);
        b.release(300, 5);
        assert_eq!(b.free_pages, 1024);
        assert_eq!(b.state(0), FREE_HEAD | 10);
    }

    #[test]
    fn trims_aligns_and_coalesces_back_to_one_block() {
        let (mut s, mut n, mut p) = arrays(1024);
        let mut b = Buddy::new(&mut s, &mut n, &mut p);
        b.release(0, 1024);
        assert_eq!(b.free_pages, 1024);
        let a = b.alloc(3).unwrap();
        assert_eq!(a % 2, 0);
        assert_eq!(b.free_pages, 1021, "the fourth page of the block went back");
        let big = b.alloc(512).unwrap();
        assert_eq!(big % 512, 0);
        assert!(b.alloc(512).is_none(), "half the pool is taken, and a page of the other half");
        let c = b.alloc(200).unwrap();
        assert!(b.all(c, 200, USED) && b.all(a, 3, USED));
        // Free in pieces, out of order, partly twice: the pool is one block again.
        for (start, len) in [(c + 100, 100), (big, 512), (a + 1, 2), (c, 100), (a, 1), (c + 100, 100)] {
            let used: Vec<_> = b.runs(start, len, USED).collect();
            for (first, count) in used {
                b.mark(first, count, DIRTY);
                b.release(first, count);
            }
        }
        assert_eq!(b.free_pages, 1024);
        assert_eq!(b.state(0), FREE_HEAD | 10);
        assert_eq!(b.alloc(1024), Some(0));
    }

    #[test]
    fn a_request_spans_free_blocks_when_no_aligned_block_is_free() {
        let (mut s, mut n, mut p) = arrays(768);
        let mut b = Buddy::new(&mut s, &mut n, &mut p);
        b.release(0, 768);
        let quarter = b.alloc(256).unwrap();
        let small = b.alloc(1).unwrap();
        assert_eq!((quarter, small), (512, 0));
        b.mark(quarter, 256, DIRTY);
        b.release(quarter, 256);
        // 300 pages need a 512-page block, and none is whole: 256 + 44 from two blocks.
        let big = b.alloc(300).unwrap();
        assert_eq!(big, 256);
        assert!(b.all(256, 300, USED));
        assert_eq!(b.free_pages, 768 - 301);
        b.mark(big, 300, DIRTY);
        b.release(big, 300);
        b.mark(small, 1, DIRTY);
        b.release(small, 1);
        assert_eq!((b.free_pages, b.state(0), b.state(512)), (768, FREE_HEAD | 9, FREE_HEAD | 8));
    }

    #[test]
    fn pool_of_odd_size_and_runs() {
        let (mut s, mut n, mut p) = arrays(1000);
        let mut b = Buddy::new(&mut s, &mut n, &mut p);
        b.release(0, 1000);
        assert!(b.alloc(1001).is_none(), "more than the pool");
        let x = b.alloc(512).unwrap();
        b.mark(x + 10, 5, DIRTY);
        let runs: Vec<_> = b.runs(x, 512, USED).collect();
        assert_eq!(runs, vec![(x, 10), (x + 15, 497)]);
        // Runs and `all` at every offset and length around the eight-state words.
        for (start, len) in [(x + 3, 9), (x + 8, 2), (x + 10, 5), (x + 11, 40), (x + 14, 1), (x + 15, 0)] {
            let bytes: Vec<_> = (start..start + len as u32).filter(|&i| b.state(i as usize) == USED).collect();
            let from_runs: Vec<_> = b.runs(start, len, USED).flat_map(|(f, n)| f..f + n as u32).collect();
            assert_eq!(from_runs, bytes, "runs({start}, {len})");
            assert_eq!(b.all(start, len, USED), bytes.len() == len);
            assert_eq!(b.all(start, len, DIRTY), (start..start + len as u32).all(|i| b.state(i as usize) == DIRTY));
        }
        let mut total = 512;
        while let Some(_) = b.alloc(1) {
            total += 1;
        }
        assert_eq!(total, 1000);
        assert_eq!(b.free_pages, 0);
    }
}
