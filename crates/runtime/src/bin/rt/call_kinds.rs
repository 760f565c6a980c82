//! Which calls the runtime must see with their trap frame, and which it answers or adjusts
//! itself rather than passing them on: what the fast path's tables send past its assembly, and
//! what dispatch serves.

use crate::sys::*;
use crate::memsvc::lock::{MLOCK, MLOCK2, MUNLOCK, MUNLOCKALL};

/// Calls that need the trap's ucontext: they are never served by the fast path.
pub fn needs_trap(nr: usize) -> bool {
    matches!(nr, RT_SIGRETURN | CLONE | CLONE3 | VFORK) || nr >= coreplane_runtime::sysset::MAX_SYSCALLS
}

/// Calls the runtime answers or adjusts itself, rather than passing them on (the mapping calls
/// because they may change what an address is, see `textmap`; the opening calls for
/// /proc/self/exe, see `process::open_self_exe`; brk when the memory pool serves it;
/// the closing calls because the runtime keeps descriptors of its own, see `own_fds`; mlockall,
/// before which the profile's mapping shrinks, see `profile::before_mlockall`; the stat
/// calls where delegates may run, see `task_view`; the credential calls and Landlock's
/// restriction, after which the delegates are retired, see `delegate::credentials_changed`).
pub fn answered_by_runtime(nr: usize) -> bool {
    matches!(nr, RT_SIGACTION | RT_SIGPROCMASK | RT_SIGSUSPEND | PPOLL | PSELECT6 | EPOLL_PWAIT | EPOLL_PWAIT2
        | FORK | VFORK | EXECVE | EXECVEAT | EXIT | EXIT_GROUP | OPEN | OPENAT | OPENAT2 | READLINK | READLINKAT | PRCTL | ARCH_PRCTL | SECCOMP | UNSHARE | PTRACE | SIGALTSTACK
        | MUNMAP | MPROTECT | MREMAP | MMAP | SHMAT | SETUID | SETREUID | SETRESUID | SETFSUID | SETNS
        | SETGID | SETREGID | SETRESGID | SETFSGID | SETGROUPS | CAPSET | LANDLOCK_RESTRICT_SELF
        | CLOSE_RANGE | DUP2 | DUP3 | MLOCKALL)
        || nr == BRK && crate::env::config().memory_pool > 0
        // Locking under the pool (`memsvc::lock`): mlock2 and munlock of pool pages are checked,
        // munlockall ends the MCL_FUTURE the service keeps.
        || matches!(nr, MLOCK | MLOCK2 | MUNLOCK | MUNLOCKALL) && crate::env::config().memory_pool > 0
        // A seal on pool memory, which the pool's own munmap must then refuse (`memsvc::seal`).
        || nr == MSEAL && crate::env::config().memory_pool > 0
        // close is frequent: through the runtime (+35 ns) only where it may hold descriptors.
        || nr == CLOSE && (crate::env::config().memory_pool > 0 || crate::own_fds::any())
        // Not for the pool's threads alone: its scrubber starts late, if ever, and a stat at a
        // rewritten site would pay the Rust path (+35 ns) in every program.
        || stat_family(nr) && crate::env::config().delegated != coreplane_runtime::sysset::SysSet::EMPTY
}

/// The stat calls, whose answer for /proc/PID/task `task_view` adjusts.
pub fn stat_family(nr: usize) -> bool {
    matches!(nr, STAT | FSTAT | LSTAT | NEWFSTATAT | STATX)
}
