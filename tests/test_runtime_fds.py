"""The runtime's own descriptors survive a program that closes every descriptor it did not open
(close_range, closefrom, a loop of close; crates/runtime/src/bin/rt/own_fds.rs). Before, under
`--memory pool-demand` the fault handler's userfaultfd was closed with the rest and the handler
died on its next read, taking the process with it (erl_child_setup does this at every Erlang
start), and under `--memory pool` the growth supervisor's socket and the scrubber's /proc files
went the same way, silently."""

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
