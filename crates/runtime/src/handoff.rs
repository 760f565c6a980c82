//! The delegate hand-off's sequence words: a request that its caller posts in a slot is claimed
//! by exactly one delegate, however the delegates scanning the slot are interleaved.
//! The caller posts request n + 1 only after request n completed, so at any moment `posted` is
//! `taken` or `taken + 1`, and both only grow.

use core::sync::atomic::{AtomicU32, Ordering::*};

/// Sequence numbers of one request slot: the latest request posted by the caller and the latest
/// one a delegate claimed.
#[repr(C)]
pub struct Sequence {
    posted: AtomicU32,
    taken: AtomicU32,
}

impl Sequence {
    pub const fn new() -> Sequence {
        Sequence { posted: AtomicU32::new(0), taken: AtomicU32::new(0) }
    }

    /// Caller: posts the next request, whose arguments it has written; returns its number.
    pub fn post(&self) -> u32 {
        let seq = self.posted.load(Relaxed).wrapping_add(1);
        self.posted.store(seq, Release);
        seq
    }

    /// The number of the latest request posted.
    pub fn posted(&self) -> u32 {
        self.posted.load(Acquire)
    }

    /// Delegate: claims the request waiting in the slot, if any, and returns its number.
    /// `taken` is read before `posted`. In the other order a delegate that read `posted` = n
    /// and was preempted while others claimed n, completed it and claimed n + 1 read
    /// `taken` = n + 1 != n, and its compare-and-swap moved `taken` back to n: request n + 1
    /// ran twice (two reads of a pipe for one call) and a completion numbered n was stored
    /// after n + 1, so the caller waiting for n + 1 saw a result that was not its own or
    /// never saw its own.
    pub fn claim(&self) -> Option<u32> {
        let taken = self.taken.load(Acquire);
        let posted = self.posted.load(Acquire);
        (posted != taken && self.taken.compare_exchange(taken, posted, AcqRel, Relaxed).is_ok()).then_some(posted)
    }

    /// Whether a request waits for a delegate.
    pub fn waiting(&self) -> bool {
        self.taken.load(SeqCst) != self.posted.load(SeqCst)
    }

    /// Whether request `seq` has been claimed.
    pub fn claimed(&self, seq: u32) -> bool {
        self.taken.load(Acquire) == seq
    }

    /// Whether the slot is at rest: every request posted was claimed and the latest, numbered
    /// `done` in the slot's completion word, has completed.
    pub fn at_rest(&self, done: u32) -> bool {
        let posted = self.posted.load(Acquire);
        self.taken.load(Acquire) == posted && done == posted
    }

    /// In a forked child, where no delegate serves the parent's requests: the latest posted
    /// request counts as claimed; returns its number.
    pub fn settle(&self) -> u32 {
        let posted = self.posted.load(Relaxed);
        self.taken.store(posted, Relaxed);
        posted
    }
}

impl Default for Sequence {
    fn default() -> Sequence {
        Sequence::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// One caller, more claimers than CPUs (so that claimers are preempted inside `claim`):
    /// every request is claimed exactly once and `taken` never goes back.
    #[test]
    fn every_request_is_claimed_exactly_once_by_racing_delegates() {
        const REQUESTS: usize = 300_000;
        let seq = Arc::new(Sequence::new());
        let done = Arc::new(AtomicU32::new(0));
        let runs: Arc<Vec<AtomicU32>> = Arc::new((0..=REQUESTS).map(|_| AtomicU32::new(0)).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let claimers: Vec<_> = (0..6)
            .map(|_| {
                let (seq, done, runs, stop) = (seq.clone(), done.clone(), runs.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(Relaxed) {
                        if let Some(n) = seq.claim() {
                            runs[n as usize].fetch_add(1, Relaxed);
                            // A stale completion must not hide a later one (it would hang the caller).
                            done.fetch_max(n, AcqRel);
                        }
                    }
                })
            })
            .collect();
        for n in 1..=REQUESTS as u32 {
            assert_eq!(seq.post(), n);
            while done.load(Acquire) < n {
                std::hint::spin_loop();
            }
        }
        stop.store(true, Relaxed);
        claimers.into_iter().for_each(|c| c.join().unwrap());
        let twice: Vec<usize> = (1..=REQUESTS).filter(|&n| runs[n].load(Relaxed) != 1).collect();
        assert!(twice.is_empty(), "requests run other than once: {:?}", &twice[..twice.len().min(10)]);
        assert_eq!(seq.taken.load(Relaxed), REQUESTS as u32);
    }

    #[test]
    fn a_posted_request_waits_until_claimed_and_a_forked_child_settles_it() {
        let s = Sequence::new();
        assert!(!s.waiting() && s.claim().is_none());
        let n = s.post();
        assert!(s.waiting() && !s.claimed(n));
        assert_eq!(s.claim(), Some(n));
        assert!(s.claimed(n) && s.claim().is_none());
        assert!(!s.at_rest(n - 1) && s.at_rest(n));
        let m = s.post();
        assert!(!s.at_rest(n));
        assert_eq!(s.settle(), m);
        assert!(!s.waiting() && s.claim().is_none());
    }
}
