"""A cell's memory (issue 15 item 4): each pooled process publishes its pool (reserved, in use,
free, scrubbing, heap), `cell status` shows them for the cell's processes, a cell's budget bounds
its runs' pools, and bad budgets or huge page requests are one-line errors."""

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import CLI, build_program, run_cli
from coreplane.cell.memory import pool_figures

MIB = 1 << 20


@pytest.fixture(scope="module")
def semantics(tmp_path_factory) -> Path:
    return build_program(tmp_path_factory, "pool_semantics")


class Holding:
    """`pool_semantics hold` started by `argv`: it holds 24 MiB mapped and 3 MiB of heap until
    its stdin closes; `pid` is the program's."""

    def __init__(self, argv: list[str]):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        words = self.proc.stdout.readline().split()   # printed once it holds the memory
        assert words[:1] == ["hold"], self.proc.stderr.read() if self.proc.poll() is not None else words
        self.pid = int(words[1])

    def finish(self) -> str:
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err
        return out


def test_a_pooled_process_publishes_its_pool(semantics):
    held = Holding([*CLI, "run", "--memory", "pool", "--memory-budget", "256M", "--", str(semantics), "hold"])
    try:
        f = pool_figures(held.pid)
    finally:
        assert held.finish() == "hold ok\n"
    assert f is not None and f["mode"] == "pool" and f["reserved"] == 256 * MIB
    assert f["in_use"] == 27 * MIB and f["heap"] == 3 * MIB   # exactly what the program holds
    assert f["in_use"] + f["free"] + f["scrubbing"] == f["reserved"]


def settled(pid: int, done) -> dict:
    """The pool's figures once `done(figures)` holds (the scrubber works on its own thread),
    failing after 30 s."""
    deadline = time.monotonic() + 30
    while not done(f := pool_figures(pid)):
        assert time.monotonic() < deadline, f"pool of {pid} never settled: {f}"
        time.sleep(0.01)
    return f


def rss(pid: int) -> int:
    return next(int(l.split()[1]) * 1024 for l in Path(f"/proc/{pid}/status").read_text().splitlines()
                if l.startswith("VmRSS:"))


@pytest.mark.parametrize("give_back", [0, 100])
def test_freed_memory_goes_back_to_the_kernel_under_pressure(semantics, give_back):
    # The pressure threshold is the cell's (cell create --memory-give-back, passed on by cell
    # exec): 0 gives back always, 100 never (PSI's avg10 would have to be 100 %). The 8 MiB the
    # program freed are dropped, not kept populated, and counted as given back.
    held = Holding(["env", f"COREPLANE_CELL_MEMORY_GIVE_BACK={give_back}", *CLI, "run", "--memory", "pool",
                    "--memory-budget", "256M", "--", str(semantics), "hold"])
    try:
        f = settled(held.pid, lambda f: f["scrubbing"] == 0 and (give_back or f["given_back"] >= 8 * MIB))
        resident = rss(held.pid)
    finally:
        held.finish()
    assert f["in_use"] == 27 * MIB
    if give_back == 0:
        assert f["given_back"] == 8 * MIB and resident < f["in_use"] + 6 * MIB
    else:
        assert f["given_back"] == 0 and resident >= f["in_use"] + 8 * MIB


def test_the_launcher_grants_growth_only_to_its_own_processes(semantics):
    # coreplane-exec (the CLI replaces itself with it) listens on @coreplane-grow-PID for its
    # run's pools; a process outside its run (this test) is refused: closed, nothing granted.
    held = Holding([*CLI, "run", "--memory", "pool", "--memory-budget", "64M", "--memory-grow", "64M", "--",
                    str(semantics), "hold"])
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
            s.settimeout(10)
            s.connect(f"\0coreplane-grow-{held.proc.pid}")
            try:
                s.send((1024).to_bytes(8, "little"))
                answer = s.recv(8)
            except (BrokenPipeError, ConnectionResetError):
                answer = b""
    finally:
        assert held.finish() == "hold ok\n"
    assert answer == b""


def test_a_process_without_a_pool_publishes_nothing():
    assert pool_figures(os.getpid()) is None


@pytest.mark.parametrize("args,message", [
    (["--memory-budget", "64T"], "--memory-budget 65536.0 GiB: larger than this machine's memory"),
    (["--memory-budget", "2X"], "--memory-budget '2X': a size such as 512M or 2G"),
    (["--hugepages", "100000000"], "--hugepages 100000000: 195312.5 GiB of huge pages, more than this machine's"),
    (["--memory-give-back", "101"], "--memory-give-back 101: a memory pressure in %, 0 to 100"),
])
def test_bad_budgets_and_huge_pages_are_one_line(args, message):
    # Refused before the machine is touched (no cell, no huge page asked of the kernel).
    proc = run_cli("cell", "create", "--compute-cores", "1", "--control-cores", "0", *args)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
