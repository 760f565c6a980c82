//! Notes to the launcher of the signals other processes sent the program, so that it passes on
//! only those the program did not get itself. coreplane-exec passes every signal sent to it on
//! to its child (`kill $!` is meant for the program), and a signal sent to their whole process
//! group (`kill -- -PGID`, `timeout`'s kill(0, ...)) reached both: the program got it twice, and
//! a program whose second SIGINT means "stop now" stopped at once. Only the launcher's own child
//! notes (not its descendants, which the launcher never signals): one datagram, the signal and
//! its sender, on a socket to "\0coreplane-signals-PID" connected at start. The launcher's side
//! is crates/exec/src/signals.rs. Signals the program takes by sigwaitinfo or a signalfd are not
//! noted (no handler of the program's runs for them).

use crate::sys::*;
use core::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, Ordering::Relaxed};

const SENDTO: usize = 44;
const SOCK_DGRAM: usize = 2;
const MSG_DONTWAIT: usize = 0x40;
const MSG_NOSIGNAL: usize = 0x4000;
/// siginfo_t: si_pid at 16.
const SI_PID_AT: usize = 16;

/// The connected socket (-1: none), the file it is (device, inode: not one of the runtime's kept
/// descriptors, which would send every close of the program through the runtime, so the
/// program may close it and reuse its number), and the process that connected it (a forked
/// child, which inherits all three, is not the launcher's child).
static FD: AtomicI64 = AtomicI64::new(-1);
static DEV: AtomicU64 = AtomicU64::new(0);
static INO: AtomicU64 = AtomicU64::new(0);
static OWNER: AtomicI32 = AtomicI32::new(0);

/// Connects to the launcher, if this process is the child of the launcher named in the
/// configuration (a no-op for every other process under the runtime).
pub fn connect() {
    let launcher = crate::env::config().launcher;
    if launcher == 0 || unsafe { syscall3(GETPPID, 0, 0, 0) } != launcher as isize {
        return;
    }
    let mut path = [0u8; 48];
    let fd = crate::own_fds::unix_connect_unkept(SOCK_DGRAM, crate::own_fds::abstract_name(b"coreplane-signals-", launcher, &mut path));
    if let Some((dev, ino)) = (fd >= 0).then(|| crate::own_fds::identity(fd as usize)).flatten() {
        DEV.store(dev, Relaxed);
        INO.store(ino, Relaxed);
        OWNER.store(getpid(), Relaxed);
        FD.store(fd as i64, Relaxed);
    }
}

/// Called on entry to a program handler for a signal another process sent (`program_signal`'s
/// assembly calls it for si_code SI_USER, SI_QUEUE and SI_TKILL only, before the handler runs):
/// notes it. Never blocks: a note the launcher's queue has no room for is
/// dropped, and the launcher then passes its copy on after a short wait.
#[no_mangle]
extern "C" fn coreplane_note_sent_signal(sig: i32, info: *const u8) {
    let fd = FD.load(Relaxed);
    if fd < 0 {
        return;
    }
    let sender = unsafe { core::ptr::read_unaligned(info.add(SI_PID_AT) as *const i32) };
    // No call of the runtime's where the program's seccomp allows none (strict mode kills the
    // process at getpid, a filter may at sendto): such a program's signals are not noted.
    let t = crate::thread::current();
    if t.strict || t.is_filtered() {
        return;
    }
    let pid = t.pid;
    if pid != OWNER.load(Relaxed) || sender == pid {
        return;
    }
    // Still the socket, not a descriptor of the program's that took its number.
    if crate::own_fds::identity(fd as usize) != Some((DEV.load(Relaxed), INO.load(Relaxed))) {
        FD.store(-1, Relaxed);
        return;
    }
    let note = [sig, sender];
    unsafe { syscall6(SENDTO, fd as usize, note.as_ptr() as usize, 8, MSG_DONTWAIT | MSG_NOSIGNAL, 0, 0) };
}
