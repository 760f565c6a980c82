"""The runtime's own descriptors survive a program that closes every descriptor it did not open
(close_range, closefrom, a loop of close; crates/runtime/src/bin/rt/own_fds.rs). Before, under
`--memory pool-demand` the fault handler's userfaultfd was closed with the rest and the handler
died on its next read, taking the process with it (erl_child_setup does this at every Erlang
start), and under `--memory pool` the growth supervisor's socket and the scrubber's /proc files
went the same way, silently."""

import resource
import subprocess
from pathlib import Path

import pytest

from conftest import build_program, run_cli
from test_memory_service import MEMORY_MODES


@pytest.fixture(scope="module")
def close_all(tmp_path_factory) -> Path:
    return build_program(tmp_path_factory, "close_all")


@pytest.mark.parametrize("memory", MEMORY_MODES)
@pytest.mark.parametrize("how,delegate", [("close_range", "all"), ("close_range", "none"), ("unshare", "all"),
                                          ("loop", "all")])
def test_closing_every_descriptor_leaves_the_runtime_whole(close_all, memory, how, delegate):
    native = subprocess.run([str(close_all), how], capture_output=True, text=True, timeout=60)
    assert native.returncode == 0, native.stdout + native.stderr
    proc = run_cli("run", "--memory", memory, "--memory-budget", "256M", "--delegate", delegate, "--",
                   str(close_all), how, timeout=120)
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr


def fd_table_size(*run: str) -> int:
    """FDSize (/proc/PID/status: the descriptor table's size) of a program run as `run` from here,
    a process whose table holds 64 descriptors (subprocess closes the others)."""
    argv = ["sh", "-c", "grep FDSize /proc/self/status"]
    out = (run_cli(*run, "--", *argv, timeout=60) if run else subprocess.run(argv, capture_output=True, text=True)).stdout
    return int(out.split()[1])


@pytest.mark.parametrize("options", [("--delegate", "all"), ("--memory", "pool"), ("--delegate", "none")])
def test_the_descriptor_table_is_grown_before_the_runtimes_threads_start(options):
    # The kernel grows a table shared by several threads only after an RCU grace period. Before,
    # every growth of a delegating program's table (bfs's directories passing 64, 128, ...) paid
    # one: bfs under --delegate all took twice its native time; grown while the process has one
    # thread, it takes its native time (docs/benchmarks.md, session 13).
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 1024:
        pytest.skip("the soft RLIMIT_NOFILE is below 1024: the runtime grows the table to that limit")
    # Under --delegate none too: the runtime keeps its own binary open at 900 or above
    # (exe::adopt_runtime), which grows the table while the process has one thread, whatever
    # the options.
    assert fd_table_size() < 1024
    assert fd_table_size("run", *options) == 1024


@pytest.mark.parametrize("options", [("--delegate", "none"), ("--delegate", "all"), ("--delegate", "all", "--profile", "P"),
                                     ("--memory", "pool")])
def test_under_a_small_descriptor_limit_the_runtimes_descriptors_leave_the_low_numbers(options, tmp_path_factory, tmp_path):
    # Under `ulimit -n 64` the runtime's descriptors cannot reach 900: before, they stayed at the
    # lowest free numbers, and the program's first open returned 5 (6 with --profile).
    exe = build_program(tmp_path_factory, "first_descriptor")
    options = tuple(str(tmp_path / "p.json") if o == "P" else o for o in options)
    small = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, preexec_fn=small)
    assert native.stdout == "first descriptor: 3\n"
    proc = run_cli("run", *options, "--", "sh", "-c", f"{exe}; {exe}", timeout=120, preexec_fn=small)
    assert (proc.returncode, proc.stdout) == (0, native.stdout * 2), proc.stderr
