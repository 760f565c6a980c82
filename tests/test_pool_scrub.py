"""Freed pool memory comes back zeroed when a program thread zeroes it itself instead of waiting
for the scrubber (issue 15: memsvc::scrub::claim/help), alone and with two threads mapping and
unmapping at once (tests/programs/pool_reuse.c)."""

import subprocess
from pathlib import Path

import pytest

from conftest import build_program, run_cli
from test_memory_service import MEMORY_MODES


@pytest.fixture(scope="module")
def pool_reuse(tmp_path_factory) -> Path:
    return build_program(tmp_path_factory, "pool_reuse")


@pytest.mark.parametrize("memory", MEMORY_MODES)
@pytest.mark.parametrize("threads,mib,budget", [(1, 64, "160M"), (2, 32, "96M")])
def test_reused_memory_reads_zero(pool_reuse, memory, threads, mib, budget):
    # A pool of two or three blocks: each map after the first waits for the last one's pages,
    # and its thread helps zero them (a step from the newest run's end while the scrubber takes
    # the oldest's start). Every byte is checked before it is overwritten.
    argv = [str(pool_reuse), str(threads), str(mib), "20"]
    native = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert (native.returncode, native.stdout) == (0, "pool_reuse ok\n"), native.stderr
    proc = run_cli("run", "--memory", memory, "--memory-budget", budget, "--", *argv, timeout=120)
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr
