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

use std::sync::atomic::{AtomicI32, Ordering};

static PROGRAM: AtomicI32 = AtomicI32::new(0);
/// Senders' codes (siginfo si_code): kill(2), sigqueue(3), tgkill(2).
const SI_USER: i32 = 0;
const SI_QUEUE: i32 = -1;
const SI_TKILL: i32 = -6;

/// The program is process `program`: signals sent to the launcher go there from now on.
pub fn program_started(program: libc::pid_t) {
    PROGRAM.store(program, Ordering::Relaxed);
}

/// Takes over the launcher's signals before it forks the program, so that none sent while the
/// program starts stops or kills the launcher (one sent before `program_started` is dropped);
/// the program's execve gives it the default actions back.
pub fn install() {
    for sig in 1..=libc::SIGRTMAX() {
        if matches!(sig, libc::SIGKILL | libc::SIGSTOP) {
            continue;
        }
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = pass_on as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigfillset(&mut act.sa_mask);
            // A signal the launcher's own libc reserves (glibc's 32 and 33) is refused: left so.
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
}

extern "C" fn pass_on(sig: libc::c_int, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
    let info = unsafe { &*info };
    let program = PROGRAM.load(Ordering::Relaxed);
    // The launcher's own (a write to a closed pipe raises SIGPIPE as if sent by the writer, abort
    // sends SIGABRT to itself) are its, not the program's.
    let own = unsafe { info.si_pid() } == unsafe { libc::getpid() };
    let sent = matches!(info.si_code, SI_USER | SI_QUEUE | SI_TKILL) && !own;
    if !sent && matches!(sig, libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP | libc::SIGSYS) {
        // The launcher's own fault: the default action when the instruction runs again.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
        return;
    }
    if sent && program > 0 {
        if info.si_code == SI_QUEUE {
            // The sender's siginfo as it is: its value, and its pid and uid.
            let copy = *info;
            unsafe { libc::syscall(libc::SYS_rt_sigqueueinfo, program, sig, &copy as *const libc::siginfo_t) };
        } else {
            unsafe { libc::kill(program, sig) };
        }
    }
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
