//! Signals sent to the launcher are the program's: a shell's `$!`, a supervisor's or a service
//! manager's pid for `coreplane run` is the launcher's, and `kill -QUIT $!` must stop nginx
//! gracefully as it does natively. Every signal another process sent (si_code SI_USER, SI_QUEUE,
//! SI_TKILL) is passed on to the program with its value; the kernel's own (the terminal's INT,
//! QUIT, TSTP and WINCH, which reach the program's process group by themselves, the program's
//! SIGCHLD at its end) are not, nor are the launcher's own. When the program stops for job
//! control, the launcher stops too, so that a shell sees the job stopped, and a continue sent to
//! it continues the program. A fault of the launcher's own
//! (SIGSEGV and the like from the kernel) still kills it. Before session 17 only TERM, HUP,
//! USR1 and USR2 were passed on: INT and QUIT from a script were lost, ALRM, SYS, TRAP or
//! XCPU killed the launcher and left the program running orphaned, and TSTP stopped only it.
//!
//! A signal sent to the launcher's and the program's whole process group (`kill -- -PGID`,
//! `timeout`'s kill(0, ...)) reached the program itself and through the launcher: twice. So the
//! handler only queues what it got, and a thread of the launcher's decides: a signal the program
//! got itself from the same sender (its runtime notes each one, crates/runtime/src/bin/rt/
//! launcher_notes.rs, on the datagram socket "\0coreplane-signals-PID"), or one still pending
//! in the program (a second one natively merges with it), is not passed on. A signal the
//! program has a handler for, and whose copy may be in delivery at that moment, waits up to
//! `NOTE_WAIT` for the note: the delay such a signal passed on now has. Not covered: a program that takes the signal by
//! sigwaitinfo or a signalfd (no note) gets a group's signal twice, as before.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

static PROGRAM: AtomicI32 = AtomicI32::new(0);
/// Signals the launcher was started with ignored (bit sig − 1): the program inherits them
/// ignored, as it would natively (`nohup`, a shell's `trap '' INT`, background jobs).
static INHERITED_IGNORED: AtomicU64 = AtomicU64::new(0);
/// The write end of the queue from the handler to the passing-on thread (-1 before `install`).
static QUEUE: AtomicI32 = AtomicI32::new(-1);
/// Senders' codes (siginfo si_code): kill(2), sigqueue(3), tgkill(2).
const SI_USER: i32 = 0;
const SI_QUEUE: i32 = -1;
const SI_TKILL: i32 = -6;
/// How long a signal waits for the program's note before it is passed on: the program may have
/// taken its own copy off its pending set a moment ago and not yet noted it.
const NOTE_WAIT: Duration = Duration::from_millis(2);
/// A note older than this is not matched with a signal the launcher got (it was the program's
/// alone, sent to its pid).
const NOTE_LIFE: Duration = Duration::from_secs(1);
const SIGINFO_SIZE: usize = std::mem::size_of::<libc::siginfo_t>();

/// The program is process `program`: signals sent to the launcher go there from now on.
pub fn program_started(program: libc::pid_t) {
    PROGRAM.store(program, Ordering::Relaxed);
}

/// Takes over the launcher's signals before it forks the program, so that none sent while the
/// program starts stops or kills the launcher (one sent before `program_started` is dropped);
/// the program's execve gives it the default actions back. Starts the thread that passes them
/// on, and listens for the program's notes (the runtime connects when the configuration names
/// this launcher's pid, `lpid`).
pub fn install() {
    let mut queue = [0; 2];
    if unsafe { libc::pipe2(queue.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } == 0 {
        // The reading end blocks; the handler's end never does.
        unsafe { libc::fcntl(queue[0], libc::F_SETFL, 0) };
        let notes = listen_for_notes();
        std::thread::Builder::new()
            .name("pass-on".into())
            .spawn(move || pass_on_thread(queue[0], notes))
            .map(|_| QUEUE.store(queue[1], Ordering::Relaxed))
            .ok();
    }
    for sig in 1..=libc::SIGRTMAX() {
        if matches!(sig, libc::SIGKILL | libc::SIGSTOP) {
            continue;
        }
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            // Python (whose `coreplane run` execs this launcher) ignores SIGPIPE and SIGXFSZ
            // whatever it inherited, and Rust's std SIGPIPE: those two start at the default.
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
                && !matches!(sig, libc::SIGPIPE | libc::SIGXFSZ)
            {
                INHERITED_IGNORED.fetch_or(1 << (sig - 1), Ordering::Relaxed);
            }
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigfillset(&mut act.sa_mask);
            // A signal the launcher's own libc reserves (glibc's 32 and 33) is refused: left so.
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
}

/// In the forked child, just before its execve: the dispositions the program starts with, as it
/// would natively. The launcher's handlers become the default at execve; what the launcher was
/// started with ignored stays ignored (before session 18 the handlers installed for every signal
/// made `nohup coreplane run ...` lose its ignored SIGHUP); SIGPIPE and SIGXFSZ are the default
/// (without that, programs got EPIPE or EFBIG instead of dying of the signal).
pub fn as_inherited() {
    let ignored = INHERITED_IGNORED.load(Ordering::Relaxed);
    for sig in 1..=64 {
        if holds(ignored, sig) {
            unsafe { libc::signal(sig, libc::SIG_IGN) };
        }
    }
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
    }
}

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
    let info = unsafe { &*info };
    // The launcher's own (a write to a closed pipe raises SIGPIPE as if sent by the writer, abort
    // sends SIGABRT to itself) are its, not the program's.
    let own = unsafe { info.si_pid() } == unsafe { libc::getpid() };
    let sent = matches!(info.si_code, SI_USER | SI_QUEUE | SI_TKILL) && !own;
    if !sent && matches!(sig, libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP | libc::SIGSYS) {
        // The launcher's own fault: the default action when the instruction runs again.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
        return;
    }
    let program = PROGRAM.load(Ordering::Relaxed);
    if !sent || program <= 0 {
        return;
    }
    let queue = QUEUE.load(Ordering::Relaxed);
    let queued = queue >= 0
        && unsafe { libc::write(queue, info as *const libc::siginfo_t as *const libc::c_void, SIGINFO_SIZE) }
            == SIGINFO_SIZE as isize;
    if !queued {
        pass_on(program, sig, info);
    }
}

/// Sends the program `sig` as the launcher got it: a queued value with it, with its sender's
/// pid and uid.
fn pass_on(program: libc::pid_t, sig: libc::c_int, info: &libc::siginfo_t) {
    if info.si_code == SI_QUEUE {
        let copy = *info;
        unsafe { libc::syscall(libc::SYS_rt_sigqueueinfo, program, sig, &copy as *const libc::siginfo_t) };
    } else {
        unsafe { libc::kill(program, sig) };
    }
}

/// A signal the program noted: number, sender, when the launcher read the note.
struct Note {
    sig: i32,
    sender: i32,
    at: Instant,
}

/// Passes on, in the order they came, the signals the handler queued that the program did not
/// get itself. Notes are read as they come, so that each is dated when it was sent: one left
/// unread until a later signal would count from then, and drop that signal.
fn pass_on_thread(queue: RawFd, notes: Option<RawFd>) {
    let mut noted: Vec<Note> = Vec::new();
    loop {
        let mut fds = [
            libc::pollfd { fd: queue, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: notes.unwrap_or(-1), events: libc::POLLIN, revents: 0 },
        ];
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        let program = PROGRAM.load(Ordering::Relaxed);
        if let (Some(fd), true) = (notes, fds[1].revents != 0) {
            read_notes(fd, program, &mut noted);
        }
        if fds[0].revents == 0 {
            continue;
        }
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let n = unsafe { libc::read(queue, &mut info as *mut libc::siginfo_t as *mut libc::c_void, SIGINFO_SIZE) };
        if n != SIGINFO_SIZE as isize {
            if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        // One the program sent (to its process group, which holds the launcher, or to its
        // parent, which natively is not the launcher) is not sent back to it.
        let from_program = unsafe { info.si_pid() } == program;
        if program > 0 && !from_program && !program_got_it(program, &info, notes, &mut noted) {
            pass_on(program, info.si_signo, &info);
        }
    }
}

/// Whether the program got `info`'s signal itself: it noted one from the same sender, or one
/// is pending in it. A signal the program has a handler for waits up to `NOTE_WAIT` for a note;
/// one it has none for is noted by nobody and decided at once.
fn program_got_it(program: libc::pid_t, info: &libc::siginfo_t, notes: Option<RawFd>, noted: &mut Vec<Note>) -> bool {
    let (sig, sender) = (info.si_signo, unsafe { info.si_pid() });
    let deadline = Instant::now() + NOTE_WAIT;
    loop {
        if let Some(fd) = notes {
            read_notes(fd, program, noted);
        }
        noted.retain(|n| n.at.elapsed() < NOTE_LIFE);
        if let Some(i) = noted.iter().position(|n| n.sig == sig && n.sender == sender) {
            noted.remove(i);
            return true;
        }
        let Some(state) = SignalState::of(program) else { return false };
        if state.pending(sig) {
            return true;
        }
        let (Some(fd), Some(left), true) = (notes, deadline.checked_duration_since(Instant::now()), state.caught(sig))
        else {
            return false;
        };
        let timeout = libc::timespec { tv_sec: 0, tv_nsec: left.as_nanos() as libc::c_long };
        let mut poll = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        unsafe { libc::ppoll(&mut poll, 1, &timeout, std::ptr::null()) };
    }
}

/// The datagram socket the program's runtime notes its signals on; None if it cannot be made
/// (then only a signal still pending in the program is not passed on).
fn listen_for_notes() -> Option<RawFd> {
    let name = format!("coreplane-signals-{}", std::process::id());
    let fd = crate::abstract_socket::bind(libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, &name).ok()?;
    let on: libc::c_int = 1;
    if unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_PASSCRED, &on as *const libc::c_int as *const libc::c_void, 4) } != 0 {
        unsafe { libc::close(fd) };
        return None;
    }
    Some(fd)
}

/// Reads the notes waiting on `fd`, keeping those the program itself sent (its credentials, as
/// the kernel attaches them, name its pid: no other process can make the launcher drop a signal).
fn read_notes(fd: RawFd, program: libc::pid_t, noted: &mut Vec<Note>) {
    loop {
        let mut note = [0i32; 2];
        let mut iov = libc::iovec { iov_base: note.as_mut_ptr() as *mut libc::c_void, iov_len: 8 };
        let mut control = [0u64; 8];
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control);
        if unsafe { libc::recvmsg(fd, &mut msg, 0) } != 8 {
            return;
        }
        let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        let from_program = !cmsg.is_null()
            && unsafe { (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_CREDENTIALS }
            && unsafe { (*(libc::CMSG_DATA(cmsg) as *const libc::ucred)).pid } == program;
        if from_program {
            noted.push(Note { sig: note[0], sender: note[1], at: Instant::now() });
        }
    }
}

/// A process's signal sets as /proc/PID/status shows them: pending for the process as a whole
/// (ShdPnd, where a signal sent to a process or a process group waits until a thread takes it)
/// and caught (SigCgt: the signals it has handlers for).
struct SignalState {
    pending: u64,
    caught: u64,
}

impl SignalState {
    fn of(pid: libc::pid_t) -> Option<SignalState> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let set = |name: &str| {
            status.lines().find_map(|l| l.strip_prefix(name)).and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        };
        Some(SignalState { pending: set("ShdPnd:")?, caught: set("SigCgt:")? })
    }

    fn pending(&self, sig: libc::c_int) -> bool {
        holds(self.pending, sig)
    }

    fn caught(&self, sig: libc::c_int) -> bool {
        holds(self.caught, sig)
    }
}

/// Whether the signal set `set` (bit sig − 1) holds `sig`.
fn holds(set: u64, sig: libc::c_int) -> bool {
    (1..=64).contains(&sig) && set & (1u64 << (sig - 1)) != 0
}

/// The program stopped with `status` (wait4 with WUNTRACED): for a job-control stop (TSTP,
/// TTIN, TTOU) the launcher stops too, so that a shell sees the job stopped, and a SIGCONT that
/// continues it is passed on above. Not for a stop the program may leave without the launcher
/// (a SIGSTOP it raised and another process continues), and not if it runs again already: the
/// launcher would stay stopped over a program that ended.
pub fn program_stopped(status: libc::c_int) {
    let program = PROGRAM.load(Ordering::Relaxed);
    let job_control = matches!(libc::WSTOPSIG(status), libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU);
    if job_control && still_stopped(program) {
        unsafe { libc::raise(libc::SIGSTOP) };
    }
}

/// The program has ended and been reaped: its pid may be another process's from now on.
pub fn program_ended() {
    PROGRAM.store(0, Ordering::Relaxed);
}

/// Whether process `pid` is stopped now ('T' in /proc/PID/stat).
fn still_stopped(pid: libc::pid_t) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
}
