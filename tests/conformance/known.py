"""Why each known difference differs, with a minimal reproducer: the explanations
docs/conformance.md prints beside the measured differences (kept by hand as they are found).

Each entry matches case names by a regular expression (a whole class of strace tests shares one
cause) and says the cause, how sure it is, and a reproducer: a shell line or a program in
tests/programs/ or strace's own test (target/conformance/src/strace-*/tests/NAME)."""

import re

KNOWN: list[tuple[str, str]] = [
    (r"getppid|print_ppid_tracerpid",
     "Expected, not a runtime difference: the program prints its parent's pid, which natively is the "
     "corpus runner and under `coreplane run` is the launcher coreplane-exec."),
    (r"f?statfs|getdents(64)?-v",
     "Output that changes between runs on a busy machine (free blocks of a file system; the entries of a "
     "directory other processes write to): agreed in the two native runs, not in the third."),
    (r"sysinfo",
     "Expected, not a runtime difference: sysinfo's `procs` is the number of threads on the whole machine, "
     "to which the launcher (the coreplane CLI, coreplane-exec) and, under `all`, the delegates add, and "
     "which the other processes of a busy machine change: three alternating rounds printed procs 144/145/142 "
     "(native, `none`, `all`), 139/139/142, 138/141/140."),
]

# Causes of earlier differences that are fixed (what was wrong, the commit, the regression test), shown in
# docs/conformance.md after the differences that remain.
FIXED = (
    "Causes fixed since the full run of 2026-11-23 09:39 (95.6 % of `none`, 89.8 % of `all` identical), "
    "each with its commit and regression test:\n\n"
    "- **Delegate threads visible to the kernel** (51 programs, `all`: the `--pidns-translation` tests): "
    "unshare(CLONE_NEWUSER) is refused (EINVAL) in a process with other threads. The program's only thread "
    "now retires the delegates first (they end; parked delegates would still be threads) and the next "
    "delegated call starts new ones (791891a); after unshare(CLONE_NEWPID) the kernel refuses the process "
    "new threads, natively too, so its calls are then made locally (fb7f6f3). Test: "
    "tests/programs/unshare_user.c.\n"
    "- **A tracer saw the runtime's dispatch traps** (14 programs, both modes: ptrace*, printpath-umovestr, "
    "printstrn-umoven; and the real program strace-tracing, `all`, which saw the delegate threads): after "
    "PTRACE_TRACEME the thread disarms Syscall User Dispatch and makes its calls as made, and execve starts "
    "the new program without the runtime after PTRACE_TRACEME or when a tracer is attached (TracerPid) "
    "(cbdcf24, c863548). Tests: tests/programs/traceme.c, strace -f against native.\n"
    "- **Arguments read before the kernel's checks** (9 programs, both modes: rt_sigsuspend, "
    "rt_sigprocmask, ppoll*, clone3*): sigsets are read only after the size check and through "
    "process_vm_readv (EFAULT, not SIGSEGV in the runtime); clone3's struct is read and checked in the "
    "kernel's order before the child's start is written on its stack (791891a). Test: "
    "tests/programs/arg_edges.c, sigsuspend_size.c.\n"
    "- **execve from a thread after the leader's exit(2) returned ENOENT** (5 programs, threads-execve*): "
    "the runtime re-entered itself through /proc/self/exe, gone with the leader; now /proc/thread-self "
    "(791891a). Test: tests/programs/leader_exit_exec.c.\n"
    "- **ARCH_GET_GS into NULL killed the program** (4 programs, arch_prctl*): the virtual GS base now keeps "
    "the kernel's checks, EPERM beyond user space, EFAULT for an unwritable result (fb7f6f3). Test: "
    "arg_edges.c.\n"
    "- **The last thread's exit(2) did not end the process under `all`** (3 programs, stack-fcall*; SIGTERM "
    "could not end it either): program threads are counted apart from the delegates and the last one's exit "
    "ends the process with its code (791891a). Test: tests/programs/exit_last_thread.c.\n"
    "- **Seccomp strict mode and PR_TSC_SIGSEGV** (3 programs, both modes): both make rdtsc fault, and the "
    "runtime timed the calls with it (the SIGSEGV si_code SI_KERNEL); such a thread's calls are now untimed "
    "and local, and strict mode is entered with dispatch disarmed (dac0350). Test: tests/programs/no_tsc.c.\n"
    "- **A child cloned onto a one-page stack died of SIGSEGV** (2 programs, clone-flags, ioctl_nsfs): each "
    "dispatch trap put a ~7 KB frame on that page; such a child now gets the runtime's signal stack, which "
    "the program does not see (08b6fd8). Test: tests/programs/small_stack_child.c.\n"
    "- **What other processes saw of a program, and a caller's credentials at execve** (session 13, found "
    "with programs of many runtimes outside the corpora): /proc/PID/comm was `exe` (or `coreplane-rt`), "
    "cmdline `coreplane-rt /usr/bin/sleep sleep 2`, environ held the runtime's configuration, so ps, "
    "pgrep -x and pkill -f missed the program; and setpriv, which keeps CAP_DAC_OVERRIDE up to its execve, "
    "could not start a program only root may reach (126). The loader now names the process and publishes "
    "the program's strings and auxv (PR_SET_MM_MAP), and execve opens the program before the exec (bc9606e). "
    "Tests: the real program ps-pgrep-identity; tests/test_runtime_edges.py.\n"
    "- **Intermittent time-outs under `all`** (2 programs, nlattr_ifaddrmsg, nlattr_ifaddrlblmsg): not seen "
    "again after the hand-off fix (61ab790), likely the same lost completion."
)
PATTERNS = [(re.compile(p), why) for p, why in KNOWN]


def explain(case: str) -> str | None:
    """The known explanation of a case's difference, or None."""
    return next((why for pattern, why in PATTERNS if pattern.fullmatch(case)), None)

# What the stress tests (tests/test_stress.py, `make stress`) found in the runtime.
STRESS = (
    "- **Hang after fork (both modes), fixed in fd166cb after this corpus found it** (fork_rewrite 3 of 3 "
    "and the fork stress tests end since): a thread forks while another thread holds the fast path's "
    "rewrite lock (`fastpath::REWRITE_LOCK`, held while a site is checked against /proc/self/maps and "
    "rewritten after its first trap); the child inherits the lock word taken, its only thread traps at "
    "a new site and spins in `fastpath::lock()` forever (gdb: `lock <- maybe_rewrite <- trap::on_sigsys`, "
    "the child at 100 % CPU). Reproducer: tests/programs/fork_rewrite.c (4 threads making first calls "
    "while the main thread forks and execs /bin/true): `coreplane run --delegate none -- ./fork_rewrite` "
    "hung in 2 of 3 runs, natively 2.4 s; `stress_blocking 64 100` hung in 5 of 6 runs with `none`. A "
    "killed run leaves the spinning child behind (re-parented to init). Fix: take the lock around fork "
    "in the parent and release it in both, as pthread_atfork handlers do. A second lock of the same kind, the delegate pool's (taken while the pool grows), was left taken in a child forked meanwhile; the child frees both since 2896372.\n"
    "- **A delegated request claimed twice, fixed in 61ab790; the next three findings were all it** "
    "(`all` only): a delegate read a request slot's `posted` number before its `taken` number. Preempted "
    "between the two loads while other delegates claimed request n, completed it and claimed n + 1, its "
    "compare-and-swap moved `taken` from n + 1 back to n: request n + 1 ran twice (a pipe read twice for "
    "one call: a byte skipped; the caller's stack buffer written after it returned) and a completion "
    "numbered n was stored after n + 1, so the caller took another call's result or never saw its own "
    "(the hang: every thread in FUTEX_WAIT on the runtime's words). Signals made it likely, because "
    "EINTR returns churn the slots' numbers, but did not cause it. Fix: `taken` is read first "
    "(crates/runtime/src/handoff.rs, whose unit test, 6 claimers racing one caller, fails 3 of 3 with "
    "the old order); eintr_read 1000: old order 4 wrong and 1 hang in 5 runs, new order 5 of 5 in order; "
    "the stress tests below pass since.\n"
    "- **Bytes lost when a signal interrupts a delegated read** (`all` only, fixed in 61ab790): the reader got "
    "EINTR after the delegate's read consumed the data. Reproducer: tests/programs/eintr_read.c "
    "(`coreplane run --delegate all -- ./eintr_read 3000` printed `byte 285: read 1 bytes, value 30`, "
    "exit 1, in 3 of 4 runs; natively and with `none` 3 of 3 in order). The same in the pipe ring of "
    "tests/programs/stress_blocking.c: `thread 25: iteration 46 read 45`.\n"
    "- **Wrong bytes or a hang without any signal** (`all` only, after fd166cb; fixed in 61ab790): `stress_blocking 64 30 0` "
    "(no signals, forks as usual) under `--delegate all` failed 2 of 15 runs (5 per forward cost 0, 1 µs, "
    "20 µs): one never ended (1 µs), one read `thread 38: iteration 27 read 29` (20 µs); with no forks "
    "either (the fork lines removed) `thread 20: iteration 18 read 17` in 1 of 4 runs at 1 µs. A read "
    "that returns 1 with the byte of an earlier iteration suggests a completion taken by the wrong caller "
    "or a stale one, not only an interrupted call.\n"
    "- **A lost completion wake-up** (`all`; fixed in 61ab790: a stale completion number): a hung `eintr_read 2000` (fc 0, 2 of 10 runs hung) had "
    "printed its last line (so its final delegated write was made) while its only application thread "
    "slept in FUTEX_WAIT_PRIVATE on a word in the runtime's memory and all 4 delegates slept on another "
    "word of the same mapping, no CPU time growing: the issue's hang signature.\n"
    "- **A process whose application threads are gone cannot be ended by SIGTERM** (`all`; fixed in "
    "791891a: the last program thread's exit(2) ends the process, tests/programs/exit_last_thread.c): after "
    "`syscall(SYS_exit)` in the last application thread (see stack-fcall) only delegate threads remain, "
    "they block SIGTERM, so `timeout 10 coreplane run --delegate all -- ./sys_exit` waits forever "
    "(launcher alive, the program a zombie leader); only SIGKILL ends it."
)
