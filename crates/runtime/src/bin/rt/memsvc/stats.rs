//! The pool's figures, published for `coreplane cell status`: one page of the process's own,
//! mapped privately from a memfd named "coreplane-memsvc", so that a reader finds it in
//! /proc/PID/maps ("/memfd:coreplane-memsvc (deleted)") and reads it through /proc/PID/mem
//! (ptrace access: root, as the cell commands are). Nothing is left behind when the process
//! ends, however it ends (a file in /dev/shm would be), a fork's child has its own copy (the
//! mapping is private), and an update is a few stores under the pool's lock. This kernel has no
//! CONFIG_ANON_VMA_NAME, so an anonymous page could not be named.
//! Layout (docs/formats.md, "Memory pool figures"): little-endian u64 words: MAGIC, a sequence
//! number (odd while the words are written), then the budget, in use, scrubbing, heap and given
//! back, in bytes, and the mode (1 pool, 2 pool-demand).

use crate::sys::*;
use core::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering::*};

const MEMFD_CREATE: usize = 319;
const MFD_CLOEXEC: usize = 1;
/// "CPMEMSV1", read as a little-endian u64.
const MAGIC: u64 = u64::from_le_bytes(*b"CPMEMSV1");

/// The page's address (0: not published).
static PAGE_AT: AtomicUsize = AtomicUsize::new(0);

/// What the pool holds, in bytes.
pub struct Figures {
    pub budget: u64,
    pub in_use: u64,
    pub scrubbing: u64,
    pub heap: u64,
    pub given_back: u64,
    pub on_demand: bool,
}

/// Maps the page (once, when the pool is reserved); without it nothing is published.
pub fn open() {
    let fd = unsafe { syscall3(MEMFD_CREATE, c"coreplane-memsvc".as_ptr() as usize, MFD_CLOEXEC, 0) };
    if fd < 0 {
        return;
    }
    let at = unsafe {
        if syscall3(FTRUNCATE, fd as usize, PAGE, 0) == 0 {
            syscall6(MMAP, 0, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd as usize, 0)
        } else {
            -1
        }
    };
    unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
    if at > 0 {
        PAGE_AT.store(at as usize, Relaxed);
    }
}

/// Writes `f` to the page; called under the pool's lock (one writer at a time).
pub fn publish(f: &Figures) {
    let at = PAGE_AT.load(Relaxed);
    if at == 0 {
        return;
    }
    let words = unsafe { &*(at as *const [AtomicU64; 8]) };
    let seq = words[1].load(Relaxed);
    words[1].store(seq | 1, Relaxed);
    fence(Release);
    let mode = if f.on_demand { 2 } else { 1 };
    for (w, v) in words[2..].iter().zip([f.budget, f.in_use, f.scrubbing, f.heap, f.given_back, mode]) {
        w.store(v, Relaxed);
    }
    words[0].store(MAGIC, Relaxed);
    words[1].store((seq | 1) + 1, Release);
}
