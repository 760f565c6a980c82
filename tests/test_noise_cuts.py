"""The cell's opt-in machine-wide cuts of issue 14 item 5, live: --pin-init keeps init's threads
off the compute core and --io-completions makes every disk complete requests on the submitting
CPU while the cell lives; both are given back when it goes, and neither happens by default."""

import os
from pathlib import Path

import pytest

from machine_lock import machine_lock
from coreplane.cell import Cell, CellSpec
from coreplane.cell.spec import online_cpus

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or len(online_cpus()) < 2, reason="needs root and 2 CPUs")
COMPUTE, CONTROL = [online_cpus()[-1]], [online_cpus()[0]]


def init_cpus() -> dict[str, set[int]]:
    return {t.name: os.sched_getaffinity(int(t.name)) for t in Path("/proc/1/task").iterdir()}


def rq_affinity() -> dict[str, str]:
    return {p.parent.parent.name: p.read_text().strip() for p in Path("/sys/block").glob("*/queue/rq_affinity")}


def test_cuts_hold_while_the_cell_lives_and_are_given_back():
    with machine_lock():
        init_before, rq_before = init_cpus(), rq_affinity()
        with Cell.create(CellSpec(compute=COMPUTE, control=CONTROL)):
            assert init_cpus() == init_before and rq_affinity() == rq_before  # not by default
        with Cell.create(CellSpec(compute=COMPUTE, control=CONTROL, pin_init=True, io_completions=True)) as cell:
            assert all(not cpus & set(COMPUTE) for cpus in init_cpus().values())
            assert set(rq_affinity().values()) <= {"2"}
            assert all(v == "set" for v in cell.record["machine"]["init"].values())
        assert rq_affinity() == rq_before
        after = init_cpus()
        assert all(after[t] == init_before[t] for t in after.keys() & init_before.keys())
