"""Growth of a pool by the supervisor's grants (issue 15, `--memory-grow`): brk asks as mmap does,
a forked child does not inherit its parent's grants, and grants return to the run's allowance
when a process gives memory back or ends. Budget 64 MiB and an allowance of 64 MiB throughout:
one process reaches 128 MiB at most, 1 MiB at a time (tests/programs/pool_grow.c)."""

import subprocess
from pathlib import Path

import pytest

from conftest import build_program, run_cli
from test_memory_service import MEMORY_MODES


@pytest.fixture(scope="module")
def pool_grow(tmp_path_factory) -> Path:
    return build_program(tmp_path_factory, "pool_grow")


def grown(program: Path, mode: str, memory: str) -> list[str]:
    """`pool_grow MODE` under a 64 MiB pool with 64 MiB of growth: its output's words."""
    proc = run_cli("run", "--memory", memory, "--memory-budget", "64M", "--memory-grow", "64M", "--",
                   str(program), mode, timeout=60)
    words = proc.stdout.split()
    assert proc.returncode == 0 and words[:1] == [mode], proc.stdout + proc.stderr
    return words[1:]


def test_natively_every_loop_reaches_its_cap(pool_grow):
    # The figures below are the pool's limits, not the program's or the machine's.
    out = [subprocess.run([str(pool_grow), m], capture_output=True, text=True, timeout=60).stdout
           for m in ("brk", "fork", "giveback", "twice")]
    assert out == ["brk 250 none\n", "fork 154\n", "giveback 250 250\n", "twice 250 250\n"]


@pytest.mark.parametrize("memory", MEMORY_MODES)
def test_brk_asks_for_growth(pool_grow, memory):
    # Before: the break stopped at the budget (64 MiB) whatever the allowance.
    reached, *error = grown(pool_grow, "brk", memory)
    assert 120 <= int(reached) <= 128 and " ".join(error) == "Cannot allocate memory"


@pytest.mark.parametrize("memory", MEMORY_MODES)
def test_a_forked_child_does_not_inherit_grants(pool_grow, memory):
    # The parent holds 96 MiB (its 64 and 32 or more granted), and so does its child, by the
    # copies fork made: the child needs 32 MiB of the allowance for what it already holds, and
    # at most 32 are left. Before: the child's budget was its parent's, grants included, and it
    # mapped on from there.
    assert grown(pool_grow, "fork", memory) == ["0"]


@pytest.mark.parametrize("memory", MEMORY_MODES)
def test_memory_given_back_returns_to_the_allowance(pool_grow, memory):
    # The parent reaches 128 MiB, unmaps it all and lives on; its child then reaches 128 MiB
    # too, from the allowance the parent's munmaps gave back (it would stop at 64 otherwise).
    parent, child = map(int, grown(pool_grow, "giveback", memory))
    assert 120 <= parent <= 128 and 120 <= child <= 128


@pytest.mark.parametrize("memory", MEMORY_MODES)
def test_a_process_that_ends_returns_its_grants(pool_grow, memory):
    # A child reaches 128 MiB and exits holding it; then its parent reaches 128 MiB. Before: the
    # child's grants were never returned and the parent stopped at 64.
    child, parent = map(int, grown(pool_grow, "twice", memory))
    assert 120 <= child <= 128 and 120 <= parent <= 128
