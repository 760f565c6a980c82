"""Signals sent to `coreplane run`'s pid reach the program (issue 12): that pid is the launcher's
(a shell's `$!`, a supervisor's child), and natively the program's. Before session 17 only TERM,
HUP, USR1 and USR2 were passed on: `kill -QUIT $!` never stopped nginx, ALRM, SYS, TRAP or XCPU
killed the launcher and left the program running orphaned, and TSTP stopped the launcher alone."""

import ctypes
import os
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import CLI, build_program

PROGRAMS = Path(__file__).parent / "programs"
SENT = [signal.SIGQUIT, signal.SIGINT, signal.SIGALRM, signal.SIGUSR1, signal.SIGPIPE, signal.SIGWINCH,
        signal.SIGCHLD, signal.SIGSYS, signal.SIGTRAP, signal.SIGXCPU, signal.SIGHUP]


@pytest.fixture(scope="module")
def sig_echo(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("prog") / "sig_echo"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(PROGRAMS / "sig_echo.c")], check=True)
    return exe


def wait_for(predicate, what: str, seconds: float = 10.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def end_group(launcher: subprocess.Popen) -> None:
    """Ends the launcher and its program (a launcher that died of a signal left it orphaned)."""
    try:
        os.killpg(launcher.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    launcher.wait()


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@contextmanager
def echoing(sig_echo: Path, tmp_path: Path, policy: str):
    """`coreplane run` of sig_echo in a process group of its own, its handlers in place: yields
    the launcher and a function returning the lines printed so far; ends the group afterwards."""
    ready, out = tmp_path / "ready", tmp_path / "out"
    with open(out, "wb") as sink:
        launcher = subprocess.Popen(CLI + ["run", "--delegate", policy, "--", str(sig_echo), str(ready)], stdout=sink,
                                    process_group=0)
    try:
        wait_for(ready.exists, "the program's handlers")
        yield launcher, lambda: out.read_text().splitlines()
    finally:
        end_group(launcher)


@pytest.mark.parametrize("policy", ["none", "all"])
def test_every_signal_sent_to_the_launcher_reaches_the_program(sig_echo, tmp_path, policy):
    with echoing(sig_echo, tmp_path, policy) as (launcher, lines):
        for sig in SENT:
            os.kill(launcher.pid, sig)
            wait_for(lambda: lines()[-1:] == [str(int(sig))], f"signal {sig.name}")
            assert launcher.poll() is None, f"the launcher died of {sig.name}"
        # sigqueue's value goes with it (the union is passed as one register).
        assert ctypes.CDLL(None, use_errno=True).sigqueue(launcher.pid, signal.SIGRTMIN + 3, ctypes.c_long(42)) == 0
        rt = f"{int(signal.SIGRTMIN) + 3} value 42"
        wait_for(lambda: lines()[-1:] == [rt], "the queued signal")
        os.kill(launcher.pid, signal.SIGTERM)
        assert launcher.wait(timeout=10) == 0
    assert lines() == [str(int(s)) for s in SENT] + [rt, str(int(signal.SIGTERM))]


@pytest.mark.parametrize("policy", ["none", "all"])
def test_a_signal_sent_to_the_whole_process_group_reaches_the_program_once(sig_echo, tmp_path, policy):
    # Before: the program got a group's signal itself and again through the launcher (a
    # program whose second SIGINT means "stop now" stopped at once under `timeout`).
    with echoing(sig_echo, tmp_path, policy) as (launcher, lines):
        senders = [lambda: os.killpg(launcher.pid, signal.SIGUSR1)] * 8 + [
            # From inside the group, as `timeout` and a script's `kill 0` send.
            lambda: subprocess.run(["sh", "-c", "kill -USR1 0"], process_group=launcher.pid),
            # To the launcher alone: passed on, as before.
            lambda: os.kill(launcher.pid, signal.SIGUSR2)]
        for n, send in enumerate(senders, 1):
            send()
            wait_for(lambda: len(lines()) >= n, f"signal {n}")
            time.sleep(0.1)  # a second copy, if any, arrives within milliseconds
        os.kill(launcher.pid, signal.SIGTERM)
        assert launcher.wait(timeout=10) == 0
    assert lines() == ["10"] * 9 + ["12", "15"]


def test_the_launcher_stops_and_continues_with_the_program(tmp_path):
    # In a process group of its own whose parent (this test) shares its session: the kernel
    # discards a stop signal to an orphaned group (CI's is), natively too.
    launcher = subprocess.Popen(CLI + ["run", "--", "sleep", "30"], process_group=0)
    try:
        children = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children")
        wait_for(lambda: children.read_text().split() != [], "the program")
        program = int(children.read_text().split()[0])
        wait_for(lambda: Path(f"/proc/{program}/comm").read_text() == "sleep\n", "the program's start")
        os.kill(launcher.pid, signal.SIGTSTP)
        wait_for(lambda: (state(launcher.pid), state(program)) == ("T", "T"), "both stopped")
        os.kill(launcher.pid, signal.SIGCONT)
        wait_for(lambda: "T" not in (state(launcher.pid), state(program)), "both running again")
        os.kill(launcher.pid, signal.SIGTERM)
        assert launcher.wait(timeout=10) == -signal.SIGTERM
    finally:
        end_group(launcher)


def test_a_program_that_stops_itself_and_is_continued_by_another_ends_the_run():
    # Before (review of this session's first version): the launcher stopped with the program
    # and, the program continued by its own child, stayed stopped over its zombie for good.
    script = "(sleep 0.3; kill -CONT $$) & kill -STOP $$; echo continued"
    native = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=10)
    proc = subprocess.run(CLI + ["run", "--", "sh", "-c", script], capture_output=True, text=True, timeout=20)
    assert (proc.returncode, proc.stdout) == (native.returncode, native.stdout) == (0, "continued\n")


def test_signals_the_launcher_was_started_with_ignored_stay_ignored_in_the_program():
    # Before (session 17's launcher): its handlers for every signal became the default at the
    # program's execve, so `nohup coreplane run ...` lost the ignored SIGHUP and a script's
    # `trap '' INT` no longer protected the program.
    def ignore():
        for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_IGN)

    show = ["grep", "SigIgn", "/proc/self/status"]
    native = subprocess.run(show, capture_output=True, text=True, preexec_fn=ignore, timeout=10)
    under = subprocess.run(CLI + ["run", "--"] + show, capture_output=True, text=True, preexec_fn=ignore, timeout=30)
    # Signals 1-31, the launcher's to keep: in one full `make test` run the program also had
    # signal 32 ignored (glibc reserves 32 and 33, which the launcher can neither read nor set,
    # so it came from the CLI's side; not explained yet), never in a run of this file alone.
    standard = lambda out: int(out.split()[1], 16) & 0x7fff_ffff  # noqa: E731
    assert standard(native.stdout) == standard(under.stdout) == (1 << 0) | (1 << 1) | (1 << 11), under.stdout


def test_a_signal_sent_to_the_program_alone_does_not_hide_a_later_one_sent_to_the_launcher(sig_echo, tmp_path):
    # Before (review of this session's first version): the program's note of a signal sent to
    # it directly was read, and dated, only when a later one reached the launcher, and matched it:
    # the later signal was dropped.
    with echoing(sig_echo, tmp_path, "none") as (launcher, lines):
        program = int(Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read_text().split()[0])
        os.kill(program, signal.SIGUSR1)
        wait_for(lambda: len(lines()) == 1, "the first signal")
        time.sleep(1.5)  # longer than a note is kept
        os.kill(launcher.pid, signal.SIGUSR1)
        wait_for(lambda: len(lines()) == 2, "the second signal")
        os.kill(launcher.pid, signal.SIGTERM)
        assert launcher.wait(timeout=10) == 0
    assert lines() == ["10", "10", "15"]


@pytest.mark.parametrize("policy", ["none", "all"])
def test_a_program_that_signals_its_own_process_group_gets_the_signal_once(tmp_path_factory, policy):
    # Before (review of session 18): the launcher, in the program's group, passed the signal
    # back to the program, which handled it twice.
    exe = build_program(tmp_path_factory, "kill_own_group")
    # In a group of its own, so that the signal reaches nothing but the program (and the launcher).
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30, process_group=0)
    run = subprocess.run(CLI + ["run", "--delegate", policy, "--", str(exe)], capture_output=True, text=True,
                         timeout=60, process_group=0)
    assert native.stdout == run.stdout == "handled 1\n", run.stderr


@pytest.mark.parametrize("front", [[], ["--json"]])
def test_a_launcher_killed_with_sigkill_takes_the_program_with_it(tmp_path, front):
    # SIGKILL cannot be passed on: the program dies with the launcher that started it (the
    # kernel's parent-death signal), as it dies natively; `--json` keeps the Python front end
    # between them, which takes coreplane-exec with it the same way. Before: the program ran on,
    # orphaned (`timeout -s KILL coreplane run ...` left it behind).
    marker = tmp_path / "alive"
    script = f"while :; do touch {marker}; sleep 0.05; done"
    launcher = subprocess.Popen(CLI + ["run", *front, "--", "sh", "-c", script], start_new_session=True,
                                stdout=subprocess.DEVNULL)
    try:
        wait_for(marker.exists, "the program's first tick")
        launcher.kill()
        launcher.wait()
        time.sleep(0.5)
        marker.unlink()
        time.sleep(0.5)
        assert not marker.exists(), "the program outlived its launcher"
    finally:
        end_group(launcher)
