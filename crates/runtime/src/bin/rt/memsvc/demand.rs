//! Demand paging in user space (`--memory pool-demand`): a fault-handler thread on a control core
//! fills the pool's missing pages, in batches.
//! The pool is registered with userfaultfd in MISSING mode, and the handler fills each missing page
//! the program touches together with the rest of its aligned batch: UFFDIO_ZEROPAGE for a read (the
//! shared zero page; a later write is the kernel's own copy-on-write fault), UFFDIO_COPY from a
//! zero buffer for a write, so one fault brings in pages zeroed ahead of their first touch. A batch
//! is MIN_BATCH pages, and doubles up to MAX_BATCH while each fault falls just past the previous
//! batch (a program going through its memory in order), as readahead does for files. A fault of the
//! kernel's on the program's behalf (a read(2) into pool memory) is served the same way. Free pool
//! pages are PROT_NONE: a touch faults with SIGSEGV before userfaultfd sees it. The scrubber only
//! drops freed pages here, never populates them. A forked child keeps no registration (no
//! UFFD_FEATURE_EVENT_FORK): the kernel fills its pages. Costs measured here: a kernel anonymous
//! fault 1.7-2.5 µs per 4 KiB page, a userfaultfd fault with UFFDIO_COPY 8.9 µs with the handler on
//! the faulting CPU, 19.7 µs across CPUs; a batch spreads that over its pages, and pays where the
//! program touches them all.

use crate::sys::{self, *};
use core::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering::*};

const USERFAULTFD: usize = 323;
const IOCTL: usize = 16;
const UFFD_API: u64 = 0xAA;
/// _IOWR(0xAA, 0x3F, struct uffdio_api), and so on (linux/userfaultfd.h).
const UFFDIO_API: usize = 0xC018_AA3F;
const UFFDIO_REGISTER: usize = 0xC020_AA00;
const UFFDIO_UNREGISTER: usize = 0x8010_AA01;
const UFFDIO_WAKE: usize = 0x8010_AA02;
const UFFDIO_COPY: usize = 0xC028_AA03;
const UFFDIO_ZEROPAGE: usize = 0xC020_AA04;
const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;
/// Bits of the ioctls a registered range supports: _UFFDIO_COPY and _UFFDIO_ZEROPAGE.
const COPY_AND_ZEROPAGE: u64 = (1 << 3) | (1 << 4);
const UFFD_EVENT_PAGEFAULT: u64 = 0x12;
const UFFD_PAGEFAULT_FLAG_WRITE: u64 = 1;
const EEXIST: isize = 17;
const EINTR: isize = 4;
const EAGAIN: isize = 11;
/// Pages filled by a fault out of order (64 KiB): a fault costs 9-20 µs here, 0.6-1.2 µs per
/// page of the batch; a program touching a page in sixteen pays for fifteen it never uses.
const MIN_BATCH: usize = 16;
/// The most pages one fault fills (2 MiB), when faults come in order.
const MAX_BATCH: usize = 512;

/// `--memory pool-demand` was asked for (the pool registers itself when it is reserved).
static CHOSEN: AtomicBool = AtomicBool::new(false);
/// This process's pool is registered (false in a forked child).
static ACTIVE: AtomicBool = AtomicBool::new(false);
static RUNNING: AtomicBool = AtomicBool::new(false);
static THREAD: super::Helper = super::Helper::new();
/// Set by `retire`: the handler ends after serving the doorbell's fault.
static STOP: AtomicBool = AtomicBool::new(false);
/// A page of the handler's own, registered too: a read of it wakes the handler out of its read(2)
/// (it takes no signal) when it is told to stop.
static DOORBELL: AtomicUsize = AtomicUsize::new(0);
static UFFD: AtomicIsize = AtomicIsize::new(-1);
/// The registered range, [start, end).
static mut RANGE: (usize, usize) = (0, 0);
/// MAX_BATCH pages of zeros to copy from (never written: the kernel's zero page behind them).
static mut ZERO_SOURCE: usize = 0;
/// The handler's own: where the last batch ended, and its size in pages.
static mut NEXT: (usize, usize) = (0, MIN_BATCH);

/// At process start: whether the pool's pages are to be filled on demand by the handler.
pub fn choose(on_demand: bool) {
    CHOSEN.store(on_demand, Relaxed);
}

/// Whether this process's pool is filled by the handler.
pub fn active() -> bool {
    ACTIVE.load(Acquire)
}

/// Whether the process has the handler thread.
pub fn running() -> bool {
    RUNNING.load(Acquire)
}

/// When chosen: registers the pool [base, base + size) with a userfaultfd and starts the
/// handler; nothing when the pool is the kernel's to fill. A process refused a userfaultfd has
/// its pool filled by the kernel, as under `--memory pool` (its figures page says which): the
/// launcher refuses pool-demand where the first process would be, so this is a descendant that
/// gave up the privilege (`su nobody`, `unshare -U`), which runs natively and must run here too.
pub fn register(base: usize, size: usize) {
    if !CHOSEN.load(Relaxed) {
        return;
    }
    let fd = unsafe { syscall3(USERFAULTFD, O_CLOEXEC, 0, 0) };
    if fd < 0 {
        return;
    }
    let fd = crate::own_fds::out_of_the_way(fd);
    let mut api = [UFFD_API, 0, 0];
    let mut reg = [base as u64, size as u64, UFFDIO_REGISTER_MODE_MISSING, 0];
    let doorbell = sys::map_anon(PAGE).unwrap_or_else(|| sys::die(&[b"out of memory for the fault handler"])) as usize;
    let mut bell = [doorbell as u64, PAGE as u64, UFFDIO_REGISTER_MODE_MISSING, 0];
    let ok = unsafe {
        syscall3(IOCTL, fd as usize, UFFDIO_API, api.as_mut_ptr() as usize) == 0
            && syscall3(IOCTL, fd as usize, UFFDIO_REGISTER, reg.as_mut_ptr() as usize) == 0
            && syscall3(IOCTL, fd as usize, UFFDIO_REGISTER, bell.as_mut_ptr() as usize) == 0
    };
    if !ok || reg[3] & COPY_AND_ZEROPAGE != COPY_AND_ZEROPAGE {
        sys::die(&[b"--memory pool-demand: the pool cannot be registered with userfaultfd"]);
    }
    DOORBELL.store(doorbell, Relaxed);
    let source = sys::map_anon(MAX_BATCH * PAGE).unwrap_or_else(|| sys::die(&[b"out of memory for the fault handler"]));
    unsafe {
        RANGE = (base, base + size);
        ZERO_SOURCE = source as usize;
    }
    UFFD.store(fd, Relaxed);
    ACTIVE.store(true, Release);
    RUNNING.store(true, Release);
    THREAD.spawn(handler_main, b"fault handler thread");
}

/// Before the pool moves pages with mremap (`super::mremap`): takes the userfaultfd off the range
/// they leave. Since Linux 6.17 mremap moves a range that spans several mappings (here: pages
/// moved by an earlier mremap, which the kernel left unregistered, beside pages registered
/// since the pool was reserved) only when none of them is registered; otherwise glibc's realloc
/// of a block growing twice in a row failed with EFAULT, and malloc aborted. `rearm` registers
/// the range again, and the range the pages went to. No-op when the pool is the kernel's to fill.
pub fn disarm(start: usize, len: usize) {
    registration(UFFDIO_UNREGISTER, start, len);
}

/// After a move (see `disarm`): [start, start + len) registered with the userfaultfd again.
pub fn rearm(start: usize, len: usize) {
    registration(UFFDIO_REGISTER, start, len);
}

fn registration(request: usize, start: usize, len: usize) {
    let fd = UFFD.load(Relaxed);
    if !active() || fd < 0 {
        return;
    }
    let mut range = [start as u64, len as u64, UFFDIO_REGISTER_MODE_MISSING, 0];
    if unsafe { syscall3(IOCTL, fd as usize, request, range.as_mut_ptr() as usize) } != 0 {
        sys::die(&[b"memory pool: pages moved by mremap cannot be registered with userfaultfd again"]);
    }
}

/// Ends the handler, if the process has one (see `super::retire`): rings the doorbell, waits
/// for the handler's end, then closes the userfaultfd, which unregisters the pool (the kernel
/// fills its pages from then on) and wakes any fault still waiting.
pub fn retire() {
    if !running() {
        return;
    }
    STOP.store(true, SeqCst);
    let doorbell = DOORBELL.load(Relaxed);
    unsafe { core::ptr::read_volatile(doorbell as *const u8) };
    THREAD.await_exit();
    ACTIVE.store(false, Release);
    unsafe {
        syscall3(CLOSE, UFFD.swap(-1, Relaxed) as usize, 0, 0);
        syscall3(MUNMAP, doorbell, PAGE, 0);
    }
    DOORBELL.store(0, Relaxed);
    STOP.store(false, Relaxed);
    RUNNING.store(false, Release);
}

/// In a forked child: the registration stayed with the parent, and so does the handler.
pub fn child_after_fork() {
    ACTIVE.store(false, Release);
    RUNNING.store(false, Release);
    let fd = UFFD.swap(-1, Relaxed);
    if fd >= 0 {
        unsafe { syscall3(CLOSE, fd as usize, 0, 0) };
    }
}

/// Fills [start, start + len) with zero pages (read) or copies of zeros (write), waking the
/// threads waiting on it; the bytes filled from `start` (0 on an error).
fn fill(fd: isize, start: usize, len: usize, write: bool) -> (usize, isize) {
    let (request, mut args) = if write {
        (UFFDIO_COPY, [start as u64, unsafe { ZERO_SOURCE } as u64, len as u64, 0, 0])
    } else {
        (UFFDIO_ZEROPAGE, [start as u64, len as u64, 0, 0, 0])
    };
    let r = unsafe { syscall3(IOCTL, fd as usize, request, args.as_mut_ptr() as usize) };
    let done = args[if write { 4 } else { 3 }] as i64;
    (done.max(0) as usize, r)
}

/// Serves the fault at `addr`: its batch (just past the previous one: twice as large), or where
/// the batch reaches another mapping or holds a filled page already, the page alone.
fn serve(fd: isize, addr: usize, write: bool) {
    let page = addr & !(PAGE - 1);
    let (lo, hi) = unsafe { RANGE };
    let (next, last) = unsafe { NEXT };
    let (start, batch) = if page == next {
        (page, (last * 2).min(MAX_BATCH))
    } else {
        ((page & !(MIN_BATCH * PAGE - 1)).max(lo), MIN_BATCH)
    };
    let (mut start, mut len) = (start, (start + batch * PAGE).min(hi) - start);
    let (mut done, mut r) = fill(fd, start, len, write);
    while done == 0 && r == -ENOENT && len > PAGE {
        // The batch reaches past the page's mapping (the pool's free pages beside a block are a
        // mapping of their own): the kernel refuses it whole. Narrow it to the page and what
        // follows it, then halve, rather than fill the rest of the block a page per fault (a
        // signal handler's 256 KiB took 18 faults, longer than its timer's period).
        if start < page {
            len -= page - start;
            start = page;
        } else {
            len = ((len / 2) & !(PAGE - 1)).max(PAGE);
        }
        (done, r) = fill(fd, start, len, write);
    }
    if page >= start && page < start + done {
        unsafe { NEXT = (start + done, len / PAGE) };
        return;
    }
    unsafe { NEXT = (page + PAGE, MIN_BATCH) };
    match fill(fd, page, PAGE, write) {
        (PAGE, _) => {}
        // Filled meanwhile (another thread's fault on the same page), or no longer registered:
        // another thread put a mapping of its own over the page (MAP_FIXED over pool pages it
        // holds) while the fault waited. Woken, the fault finds the page, or the new mapping.
        (_, r) if r == -EEXIST || r == -ENOENT => unsafe {
            let range = [page as u64, PAGE as u64];
            syscall3(IOCTL, fd as usize, UFFDIO_WAKE, range.as_ptr() as usize);
        },
        (_, r) => {
            let mut errno = [0u8; 20];
            sys::die(&[b"memory pool: the fault handler cannot fill a page: errno ", sys::fmt_u64(r.unsigned_abs() as u64, &mut errno)])
        }
    }
}

/// Reads fault messages and serves them, for the life of the process.
extern "C" fn handler_main(_: usize) {
    super::on_control_core();
    let fd = UFFD.load(Relaxed);
    // struct uffd_msg: 32 bytes, the event in the first byte, a fault's flags and address next.
    let mut msgs = [[0u64; 4]; 16];
    loop {
        let n = unsafe { syscall3(READ, fd as usize, msgs.as_mut_ptr() as usize, core::mem::size_of_val(&msgs)) };
        if n == -EINTR || n == -EAGAIN {
            continue;
        }
        if n <= 0 {
            let mut errno = [0u8; 20];
            sys::die(&[b"memory pool: the fault handler cannot read its userfaultfd: errno ", sys::fmt_u64(n.unsigned_abs() as u64, &mut errno)]);
        }
        for m in &msgs[..n as usize / 32] {
            if m[0] & 0xff != UFFD_EVENT_PAGEFAULT {
                continue;
            }
            let (addr, write) = (m[2] as usize, m[1] & UFFD_PAGEFAULT_FLAG_WRITE != 0);
            if STOP.load(SeqCst) && addr & !(PAGE - 1) == DOORBELL.load(Relaxed) {
                fill(fd, addr & !(PAGE - 1), PAGE, false);
                return;
            }
            serve(fd, addr, write);
        }
    }
}

/// The fault handler's buffer of zeros and its doorbell (address, bytes; 0 where none), mappings
/// of the service's own that mlockall neither counts nor locks (`lock`): populating the doorbell
/// would wake the handler to retire.
pub(super) fn own_ranges() -> [(usize, usize); 2] {
    let source = unsafe { ZERO_SOURCE };
    let bell = DOORBELL.load(Relaxed);
    [(source, if source == 0 { 0 } else { MAX_BATCH * PAGE }), (bell, if bell == 0 { 0 } else { PAGE })]
}
