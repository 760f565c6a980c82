//! A bounded multi-producer multi-consumer FIFO of u32 (D. Vyukov's sequence-number queue):
//! application threads push request-slot indices, delegate threads pop them.

use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

pub const CAPACITY: usize = 4096;

struct Cell {
    seq: AtomicUsize,
    value: AtomicU32,
}

#[repr(C, align(128))]
struct Padded<T>(T);

pub struct Queue {
    cells: [Cell; CAPACITY],
    enqueue: Padded<AtomicUsize>,
    dequeue: Padded<AtomicUsize>,
}

impl Queue {
    #[allow(clippy::declare_interior_mutable_const)]
    pub const fn new() -> Queue {
        const EMPTY: Cell = Cell { seq: AtomicUsize::new(0), value: AtomicU32::new(0) };
        Queue { cells: [EMPTY; CAPACITY], enqueue: Padded(AtomicUsize::new(0)), dequeue: Padded(AtomicUsize::new(0)) }
    }

    /// Empties the queue; only while no other thread uses it.
    pub fn reset(&self) {
        for (i, c) in self.cells.iter().enumerate() {
            c.seq.store(i, Ordering::Relaxed);
        }
        self.enqueue.0.store(0, Ordering::Relaxed);
        self.dequeue.0.store(0, Ordering::SeqCst);
    }

    /// Appends `v`; false when full.
    pub fn push(&self, v: u32) -> bool {
        let mut pos = self.enqueue.0.load(Ordering::Relaxed);
        loop {
            let cell = &self.cells[pos % CAPACITY];
            let seq = cell.seq.load(Ordering::Acquire);
            let dif = seq as isize - pos as isize;
            if dif == 0 {
                match self.enqueue.0.compare_exchange_weak(pos, pos + 1, Ordering::SeqCst, Ordering::Relaxed) {
                    Ok(_) => {
                        cell.value.store(v, Ordering::Relaxed);
                        cell.seq.store(pos + 1, Ordering::Release);
                        return true;
                    }
                    Err(now) => pos = now,
                }
            } else if dif < 0 {
                return false;
            } else {
                pos = self.enqueue.0.load(Ordering::Relaxed);
            }
        }
    }

    /// Removes the oldest value.
    pub fn pop(&self) -> Option<u32> {
        let mut pos = self.dequeue.0.load(Ordering::Relaxed);
        loop {
            let cell = &self.cells[pos % CAPACITY];
            let seq = cell.seq.load(Ordering::Acquire);
            let dif = seq as isize - (pos + 1) as isize;
            if dif == 0 {
                match self.dequeue.0.compare_exchange_weak(pos, pos + 1, Ordering::SeqCst, Ordering::Relaxed) {
                    Ok(_) => {
                        let v = cell.value.load(Ordering::Relaxed);
                        cell.seq.store(pos + CAPACITY, Ordering::Release);
                        return Some(v);
                    }
                    Err(now) => pos = now,
                }
            } else if dif < 0 {
                return None;
            } else {
                pos = self.dequeue.0.load(Ordering::Relaxed);
            }
        }
    }

    /// True if nothing is queued (a snapshot).
    pub fn is_empty(&self) -> bool {
        let pos = self.dequeue.0.load(Ordering::SeqCst);
        let seq = self.cells[pos % CAPACITY].seq.load(Ordering::SeqCst);
        (seq as isize - (pos + 1) as isize) < 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn fifo_and_full() {
        let q = Box::new(Queue::new());
        q.reset();
        assert!(q.is_empty() && q.pop().is_none());
        for i in 0..CAPACITY as u32 {
            assert!(q.push(i));
        }
        assert!(!q.push(7), "a full queue refuses");
        for i in 0..CAPACITY as u32 {
            assert_eq!(q.pop(), Some(i));
        }
        assert!(q.is_empty());
    }

    #[test]
    fn many_producers_many_consumers_lose_and_duplicate_nothing() {
        let q: Arc<Queue> = Arc::new(Queue::new());
        q.reset();
        let per = 50_000u32;
        let producers: Vec<_> = (0..4u32)
            .map(|p| {
                let q = q.clone();
                std::thread::spawn(move || {
                    for i in 0..per {
                        while !q.push(p * per + i) {
                            std::hint::spin_loop();
                        }
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..3)
            .map(|_| {
                let q = q.clone();
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    let mut idle = 0;
                    while idle < 2_000_000 {
                        match q.pop() {
                            Some(v) => {
                                got.push(v);
                                idle = 0
                            }
                            None => idle += 1,
                        }
                    }
                    got
                })
            })
            .collect();
        producers.into_iter().for_each(|h| h.join().unwrap());
        let mut all: Vec<u32> = consumers.into_iter().flat_map(|h| h.join().unwrap()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..4 * per).collect::<Vec<_>>());
    }
}
