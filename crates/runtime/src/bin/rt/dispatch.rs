//! Dispatch: where a syscall goes once the runtime has it, from the trap or the fast path.
//! It is answered by the runtime (process and signal families), delegated to a control core, or
//! run locally; the calls passed on are recorded in the profile.

use crate::sys::{self, *};
use crate::{delegate, process, profile, signals, thread};
use crate::memsvc::lock::{MLOCK, MLOCK2, MUNLOCK, MUNLOCKALL};

/// seccomp(SET_MODE_FILTER) flag: the filter goes on every thread of the process.
const SECCOMP_FILTER_FLAG_TSYNC: usize = 1;

/// Any call but those in `call_kinds::needs_trap`, from the trap or from the fast path. A thread
/// in seccomp strict mode makes its calls as it gave them but exit: the kernel kills it for any
/// other than read and write, as natively, where the runtime might answer one itself.
pub fn handle(nr: usize, a: &[usize; 6]) -> isize {
    let t = thread::current();
    if t.traced && !matches!(nr, EXECVE | EXECVEAT) || t.strict && nr != EXIT {
        return unsafe { syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
    }
    match nr {
        RT_SIGACTION => signals::rt_sigaction(a[0], a[1], a[2], a[3]),
        RT_SIGPROCMASK | RT_SIGSUSPEND | PPOLL | PSELECT6 | EPOLL_PWAIT | EPOLL_PWAIT2 => signals::masked_call(nr, a),
        FORK => process::fork(),
        EXECVE => process::execve(a[0], a[1], a[2]),
        EXECVEAT => process::execveat(a),
        EXIT => process::exit_thread(a[0]),
        EXIT_GROUP => process::exit_group(a[0]),
        OPEN | OPENAT | OPENAT2 => {
            let fd = run_on_path(nr, a, if nr == OPEN { 0 } else { 1 });
            crate::task_view::after_open(nr, a, process::open_self_exe(nr, a, fd))
        }
        READ if crate::task_view::watching() => crate::task_view::after_read(a, run(nr, a)),
        GETDENTS | GETDENTS64 if crate::task_view::watching() => crate::task_view::listing(nr, a, || run(nr, a)),
        READLINK | READLINKAT => process::readlink_self_exe(nr, a, |args, here| if here { run_here(nr, args) } else { run(nr, args) }),
        PRCTL if a[0] == PR_SET_SYSCALL_USER_DISPATCH => crate::program_sud::set(a),
        PRCTL if a[0] == PR_SET_SECCOMP && a[1] == 1 /* SECCOMP_MODE_STRICT */ => process::strict_mode(nr, a),
        PRCTL if a[0] == PR_SET_TSC => process::set_tsc(a),
        PRCTL if a[0] == PR_SET_SECCOMP => {
            crate::fastpath::rewrite_counted_sites();
            process::before_filter(false, a[2]);
            filtered_from_now(|| run(nr, a), 0)
        }
        SECCOMP if a[0] == 0 /* SET_MODE_STRICT */ => process::strict_mode(nr, a),
        SECCOMP if a[0] == 1 /* SET_MODE_FILTER */ => {
            crate::fastpath::rewrite_counted_sites();
            process::before_filter(a[1] & SECCOMP_FILTER_FLAG_TSYNC != 0, a[2]);
            filtered_from_now(|| run(nr, a), a[1])
        }
        MUNMAP | MREMAP if thread::current().program_signal_stack[1] != 0 => {
            let r = mapping_call(nr, a);
            crate::program_signal::after_unmap(nr, a, r);
            r
        }
        MMAP | MUNMAP | MPROTECT | MREMAP | BRK => mapping_call(nr, a),
        MSEAL => {
            let r = run(nr, a);
            crate::memsvc::seal::after_mseal(a[0], a[1], r);
            r
        }
        // A segment attached over what was mapped there, text perhaps, whose remembered answer
        // would let a rewrite patch the segment (`textmap`: shared code is never rewritten); or
        // executable, where a library's text being added (`textmap::text_mapped`) may have lain.
        SHMAT if a[2] & (SHM_REMAP | SHM_EXEC) != 0 => {
            let r = run(nr, a);
            crate::textmap::mappings_changed();
            r
        }
        STAT | LSTAT => crate::task_view::after_stat(nr, a, run_on_path(nr, a, 0)),
        NEWFSTATAT | STATX => crate::task_view::after_stat(nr, a, run_on_path(nr, a, 1)),
        n if crate::call_kinds::stat_family(n) => crate::task_view::after_stat(nr, a, run(nr, a)),
        CLOSE if crate::task_view::watching() => {
            crate::task_view::closing(a[0]);
            crate::own_fds::close(a[0]).unwrap_or_else(|| run(nr, a))
        }
        CLOSE if let Some(r) = crate::own_fds::close(a[0]) => r,
        CLOSE_RANGE if let Some(r) = crate::own_fds::close_range(a[0], a[1], a[2], |args| run(nr, args)) => r,
        DUP2 | DUP3 if let Some(r) = crate::own_fds::dup_onto(a[1]) => r,
        MLOCKALL => {
            let quiet = thread::current().calls_may_kill();
            if profile::shrink_pending(a[0], quiet) {
                // Under the lock every clone of a new process takes: none copies the profile's
                // mapping half-shrunk.
                let locked = crate::rewrite_lock::lock();
                profile::before_mlockall(a[0], quiet, false);
                if locked {
                    crate::rewrite_lock::unlock();
                }
            }
            if crate::memsvc::lock::serves_mlockall(quiet) {
                // The pool's reservation would count against RLIMIT_MEMLOCK and be locked whole.
                return local(nr, || crate::memsvc::lock::mlockall(a[0]));
            }
            run(nr, a)
        }
        MUNLOCKALL => {
            crate::memsvc::lock::munlockall();
            run(nr, a)
        }
        MLOCK | MLOCK2 | MUNLOCK => match crate::memsvc::lock::lock_range(nr, a) {
            // Pool pages the program does not hold: ENOMEM, answered here, and counted in the
            // profile as the kernel's answer would be.
            Some(r) => local(nr, || r),
            None => run(nr, a),
        },
        SIGALTSTACK if thread::current().lent_stack => process::sigaltstack_lent(a),
        SIGALTSTACK if thread::current().withdrawn_signal_stack[2] != 0 => crate::program_signal::sigaltstack_withdrawn(a, || run(nr, a)),
        SIGALTSTACK => crate::program_signal::sets_signal_stack(a[0], || run(nr, a)),
        PTRACE if a[0] == PTRACE_TRACEME => process::traced(run(nr, a)),
        SETUID | SETREUID | SETRESUID | SETFSUID | SETGID | SETREGID | SETRESGID | SETFSGID | SETGROUPS | CAPSET => {
            if let Some(uid) = profile::changes_file_user(nr, a) {
                profile::before_credentials(uid, thread::current().calls_may_kill());
            }
            let pid = thread::current().pid;
            let before = delegate::has_delegates(pid).then(crate::credentials::Credentials::now).flatten();
            let r = run(nr, a);
            if r >= 0 && (before.is_none() || before != crate::credentials::Credentials::now()) {
                delegate::credentials_changed(pid);
            }
            r
        }
        // A Landlock domain is the calling thread's, and its new threads': the delegates, started
        // before, made the program's calls outside it (a write it denied succeeded).
        LANDLOCK_RESTRICT_SELF => {
            let r = run(nr, a);
            if r == 0 {
                delegate::credentials_changed(thread::current().pid);
            }
            r
        }
        UNSHARE => {
            process::before_unshare(a[0]);
            let r = process::after_apart(|| a[0] as u64, run(nr, a));
            crate::mcp::resume();
            r
        }
        SETNS => {
            process::before_setns(a[0], a[1]);
            let r = process::after_apart(|| process::setns_types(a[0], a[1]), run(nr, a));
            crate::mcp::resume();
            r
        }
        ARCH_PRCTL if a[0] == ARCH_SET_GS || a[0] == ARCH_GET_GS => arch_gs(a[0], a[1]),
        _ => run(nr, a),
    }
}

/// mmap, munmap, mprotect, mremap and brk: served by the memory pool where it holds the memory,
/// else made, and `textmap` told.
fn mapping_call(nr: usize, a: &[usize; 6]) -> isize {
    if let Some(r) = crate::memsvc::serve(nr, a) {
        return r;
    }
    if nr == MMAP {
        if let Some(flags) = crate::memsvc::lock::future() {
            // The program's mlockall(MCL_FUTURE), kept by the memory service (`memsvc::lock`).
            return crate::memsvc::lock::mmap_locked(a, flags, |a| kernel_mapping_call(nr, a));
        }
    }
    kernel_mapping_call(nr, a)
}

/// A mapping call the pool does not serve, made, and `textmap` told.
fn kernel_mapping_call(nr: usize, a: &[usize; 6]) -> isize {
    match nr {
        // A mapping at a place the kernel picks replaces nothing, so it changes no answer of
        // `textmap`, unless it executes: new text (a JIT's, or a library dlopen maps whole with
        // its executable first segment) was else left off a complete map, and its sites trapped
        // for good (`exec_map`).
        MMAP if a[3] & MAP_FIXED == 0 && a[2] & PROT_EXEC == 0 => run(nr, a),
        // A file's text mapped private and read-execute (ld.so loading a library): new text,
        // added to what `textmap` remembers rather than making it read /proc/self/maps again.
        MMAP if a[2] == PROT_READ | PROT_EXEC && a[3] & (MAP_TYPE | MAP_ANONYMOUS) == MAP_PRIVATE => {
            let before = crate::textmap::generation();
            let r = run(nr, a);
            if r >= 0 {
                crate::textmap::text_mapped(r as usize, (r as usize).saturating_add(page_up(a[1])), before);
            } else {
                crate::textmap::range_changed(nr, a);
            }
            r
        }
        BRK => run(nr, a),
        _ => {
            // After the change, not before: a rewrite that read the maps in between would cache
            // the old layout under the new generation.
            let r = run(nr, a);
            crate::textmap::range_changed(nr, a);
            r
        }
    }
}

/// Rust side of the fast path (fastpath.rs's entry calls it by name) for calls that are not
/// plain local ones.
#[no_mangle]
extern "C" fn coreplane_fast_dispatch(nr: usize, args: *const [usize; 6]) -> isize {
    crate::program_signal::fast_call_begins();
    handle(nr, unsafe { &*args })
}

/// A seccomp filter now applies to the calling thread (to every thread with
/// SECCOMP_FILTER_FLAG_TSYNC), and not to the delegates, so from now on its calls are made where
/// the filter sees them: locally. Installed means 0, or a listener's descriptor
/// (SECCOMP_FILTER_FLAG_NEW_LISTENER); a TSYNC that failed returns the tid of a thread it could
/// not synchronise. The thread counts as sandboxed from before the call (`install`) is made, and
/// again not where it fails: a signal pending meanwhile is delivered as the call returns, after
/// the filter applies, and the trap of its handler's rt_sigreturn, served before this thread
/// was marked, came back through rt_sigreturn, which the filter killed for (a 50 µs interval
/// timer, every run: `sandboxed_timer.c`). Marked early, that trap's return is made by hand.
/// With TSYNC every thread is so marked until the call has returned and the process is
/// (`thread::SandboxingEveryThread`).
fn filtered_from_now(install: impl FnOnce() -> isize, flags: usize) -> isize {
    const NEW_LISTENER: usize = 8;
    let everywhere = flags & SECCOMP_FILTER_FLAG_TSYNC != 0;
    let t = thread::current();
    let was = t.sandboxed;
    t.sandboxed = true;
    let _marked = everywhere.then(thread::SandboxingEveryThread::begin);
    let result = install();
    if result == 0 || (result > 0 && flags & NEW_LISTENER != 0) {
        t.now_filtered(everywhere, true);
    } else {
        t.sandboxed = was;
    }
    result
}

/// The program's GS base is virtual: the real one points at the runtime's thread state. The
/// kernel's checks stay: a base beyond user space is EPERM, an unwritable result EFAULT.
fn arch_gs(op: usize, arg: usize) -> isize {
    let t = thread::current();
    if op == ARCH_SET_GS {
        if arg as u64 >= TASK_SIZE_MAX {
            return -EPERM;
        }
        t.program_gs = arg;
        0
    } else if t.write_program(arg, &t.program_gs.to_ne_bytes()) {
        0
    } else {
        -EFAULT
    }
}

/// Runs an ordinary call where the delegation policy says, recording it in the profile.
fn run(nr: usize, a: &[usize; 6]) -> isize {
    run_unless_undone(nr, a, |_| false)
}

/// An opening or stat call `nr` whose path is the argument at `path`, run as `run` runs it; but
/// one a delegate made successfully on a path under /proc/thread-self, which names the thread
/// that makes the call (libselinux's getcon reads /proc/thread-self/attr/current; a delegate's
/// comm and tid were read), is undone (its descriptor closed) and made here, unless it opened a
/// file the delegates share (`process::opens_shared_file`). The kernel has read the path, so it
/// is read in place: no cost to a call on another path but the comparison.
fn run_on_path(nr: usize, a: &[usize; 6], path: usize) -> isize {
    run_unless_undone(nr, a, |r| {
        let name = if r >= 0 && a[path] != 0 { unsafe { process::accepted_path(a[path]) } } else { b"" };
        let opening = matches!(nr, OPEN | OPENAT | OPENAT2);
        let again = process::names_thread_self(name) && !(opening && process::opens_shared_file(name));
        if again && opening {
            unsafe { syscall3(CLOSE, r as usize, 0, 0) };
        }
        again
    })
}

/// `run`, where a delegate's result `r` for which `undone(r)` (which has undone the call) is
/// passed over and the call made here instead, recorded once.
fn run_unless_undone(nr: usize, a: &[usize; 6], undone: impl FnOnce(isize) -> bool) -> isize {
    let t = thread::current();
    if t.no_tsc {
        return unsafe { syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
    }
    if crate::env::config().delegated.contains(nr) {
        if let Some((r, start, ticks, queued)) =
            crate::on_behalf::args_for(nr, a, t.tid).and_then(|args| delegate::call(t, nr, &args)).filter(|d| !undone(d.0))
        {
            profile::record(t.prof, nr, r, start, ticks, Some(queued));
            if r == -EPIPE || r == -EFBIG {
                signals::raise_for_delegated(nr, a, r);
            }
            return r;
        }
    }
    run_here(nr, a)
}

/// Runs an ordinary call here, recording it in the profile.
fn run_here(nr: usize, a: &[usize; 6]) -> isize {
    local(nr, || unsafe { syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]) })
}

/// Call `nr`, made here by `make`, timed and recorded in the profile.
pub fn local(nr: usize, make: impl FnOnce() -> isize) -> isize {
    let t = thread::current();
    if t.no_tsc {
        return make();
    }
    let t0 = sys::rdtsc();
    let r = make();
    profile::record(t.prof, nr, r, t0, sys::rdtsc() - t0, None);
    r
}
