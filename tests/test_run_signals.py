"""Synchronous signals under coreplane run (issue 12, item 2): a write to a closed pipe kills
with SIGPIPE and a write past RLIMIT_FSIZE with SIGXFSZ, as natively, whether the call ran
locally or on a delegate; a handler sees the kernel's siginfo on the calling thread."""

import subprocess
from pathlib import Path

import pytest

from conftest import run_cli

PROGRAMS = Path(__file__).parent / "programs"
POLICIES = ["none", "all"]


@pytest.fixture(scope="module")
def sync_signals(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("prog") / "sync_signals"
    subprocess.run(["cc", "-O2", "-pthread", "-o", str(exe), str(PROGRAMS / "sync_signals.c")], check=True)
    return exe


@pytest.mark.parametrize("policy", POLICIES)
def test_pipeline_reader_that_stops_early(policy):
    # sort dies of SIGPIPE silently when head exits; with SIGPIPE lost it printed an error.
    cmd = "seq 1 200000 | sort -rn | head -3; yes | head -c 100000 | wc -c"
    native = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True)
    proc = run_cli("run", "--delegate", policy, "--", "sh", "-c", cmd)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, native.stdout, native.stderr) == (0, "200000\n199999\n199998\n100000\n", "")


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("program,signal", [
    ("import os; r, w = os.pipe(); os.close(r); os.write(w, b'x')", 13),
    ("import resource, os; resource.setrlimit(resource.RLIMIT_FSIZE, (1, -1)); "
     "fd = os.open('/dev/shm/coreplane-xfsz-%d' % os.getpid(), os.O_CREAT | os.O_WRONLY | os.O_TRUNC); "
     "os.unlink('/dev/shm/coreplane-xfsz-%d' % os.getpid()); os.write(fd, b'xy'); os.write(fd, b'z')", 25),
])
def test_program_dies_of_the_signal(policy, program, signal):
    # Python ignores SIGPIPE and SIGXFSZ itself; the default comes back first, as C programs have it.
    code = ("import signal; signal.signal(signal.SIGPIPE, signal.SIG_DFL); "
            "signal.signal(signal.SIGXFSZ, signal.SIG_DFL); " + program)
    assert subprocess.run(["python3", "-c", code]).returncode == -signal
    for summary in ([], ["--json"]):  # handed to the launcher, or through the full command
        proc = run_cli("run", *summary, "--delegate", policy, "--", "python3", "-c", code)
        assert proc.returncode == -signal, proc.stderr


@pytest.mark.parametrize("policy", POLICIES)
def test_programs_start_with_the_default_disposition_of_sigxfsz(policy):
    # Python, which starts the launcher, ignores SIGXFSZ; head must still die of it.
    cmd = "ulimit -f 1; head -c 5000 /dev/zero > /dev/shm/coreplane-xfsz-$$; echo $?; rm /dev/shm/coreplane-xfsz-$$"
    native = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True)
    proc = run_cli("run", "--delegate", policy, "--", "sh", "-c", cmd)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, native.stdout, native.stderr)
    assert native.stdout == "153\n"  # 128 + SIGXFSZ; sh says "File size limit exceeded" on stderr


@pytest.mark.parametrize("policy", POLICIES)
def test_handler_sees_the_kernels_siginfo_on_the_calling_thread(sync_signals, policy):
    native = subprocess.run([str(sync_signals)], capture_output=True, text=True)
    assert "signal=PIPE code=0 from_self=1 same_thread=1" in native.stdout
    proc = run_cli("run", "--delegate", policy, "--", str(sync_signals))
    assert proc.returncode == 0 and proc.stdout == native.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("policy", POLICIES)
def test_mask_and_signal_stack_set_from_the_trap_path_stay_set(tmp_path, policy):
    # The first call at a site is served from the SIGSYS handler, whose return restored the
    # mask and signal stack of before the call: the blocked SIGUSR1 was lost and pbzip2's
    # sigwait thread died of it.
    exe = tmp_path / "thread_state"
    subprocess.run(["cc", "-O2", "-pthread", "-o", str(exe), str(PROGRAMS / "thread_state.c")], check=True)
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert native.stdout.splitlines() == ["main blocks USR1: 1 TERM: 1", "signal stack set: 1 size 65536",
                                          "thread blocks USR1: 1", "thread got signal 10 from sigwait", "main done"]
    proc = run_cli("run", "--delegate", policy, "--", str(exe), timeout=60)
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr


@pytest.fixture(scope="module")
def seccomp_trap(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("prog") / "seccomp_trap"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(PROGRAMS / "seccomp_trap.c")], check=True)
    return exe


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("mode", ["handler", "default"])
def test_programs_own_seccomp_trap_reaches_its_handler_or_kills(seccomp_trap, policy, mode):
    # A SIGSYS of the program's own seccomp filter was taken for a Syscall User Dispatch trap.
    native = subprocess.run([str(seccomp_trap), mode], capture_output=True, text=True)
    proc = run_cli("run", "--delegate", policy, "--", str(seccomp_trap), mode)
    assert (proc.returncode, proc.stdout) == (native.returncode, native.stdout), proc.stderr
    if mode == "handler":
        assert native.stdout == "4242 4242 code=1 nr=110\n"
    else:
        assert native.returncode == -31 and proc.returncode in (-31, 128 + 31)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("mode", ["handler", "ignore", "default"])
def test_the_runtimes_own_signal_is_the_programs_too(tmp_path, policy, mode):
    # The runtime interrupts delegates with signal 63; sent to the program it was swallowed
    # (no handler ran, and the default action did not kill).
    exe = tmp_path / "signal_63"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(PROGRAMS / "signal_63.c")], check=True)
    native = subprocess.run([str(exe), mode], capture_output=True, text=True)
    proc = run_cli("run", "--delegate", policy, "--", str(exe), mode)
    assert (proc.returncode in (native.returncode, 128 - native.returncode), proc.stdout) == (True, native.stdout)
    assert native.stdout == {"handler": "signal 63 seen 63007\n", "ignore": "signal 63 seen -1\n", "default": ""}[mode]
