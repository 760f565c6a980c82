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
            pinned, completions = cell.record["machine"]["init"], cell.record["machine"]["io_completions"]
            assert pinned.get("1") == "set", cell.record["machine"]
            # Threads born since keep their creator's mask: every thread of init is off the core.
            assert all(not cpus & set(COMPUTE) for cpus in init_cpus().values())
            # A disk whose setting the kernel refuses (a read-only sysfs) is reported, not hidden.
            now = rq_affinity()
            assert set(completions) == set(rq_before)
            if not any(how == "set" for how in completions.values()):
                pytest.skip(f"the kernel refused rq_affinity on every disk: {completions}")
            assert all(now[disk] == "2" for disk, how in completions.items() if how == "set")
        assert rq_affinity() == rq_before
        after = init_cpus()
        assert all(after[t] == init_before[t] for t in after.keys() & init_before.keys())


@pytest.mark.skipif(not os.path.isdir("/sys/kernel/tracing/instances"), reason="needs tracefs instances")
def test_io_neighbour_trial_charges_the_cells_loss_and_leaves_nothing():
    """`coreplane noise trial neighbour --neighbour io --trace`: the cell's lost time is split by
    cause (adding up to what the detector lost, when the gaps could be put on the trace clock),
    and the compiler loops, the writer and their scratch directory are gone afterwards."""
    from coreplane.noise import trials
    scratch_dirs = set(Path("/var/tmp").glob("coreplane-io-neighbour-*"))
    with machine_lock():
        doc = trials.neighbour("io", seconds=0.5, trace=True)
    # Which placement loses more in a 0.5 s trial is the benchmark's question (make bench, 5 trials
    # of 3 s), not this test's: on a quiet machine default placement lost 0.85-1.6 % against the
    # cell's 1.1-1.7 % in 3 of 5 runs.
    assert doc["default_lost_pct"] >= 0 and doc["cell_lost_pct"] >= 0
    causes = sum(doc[f"cell_lost_{c}_pct"] for c in trials.CAUSES)
    if doc["cell_gaps_aligned"]:
        assert abs(causes - doc["cell_lost_pct"]) < 0.05 + 0.05 * doc["cell_lost_pct"], doc
    assert set(Path("/var/tmp").glob("coreplane-io-neighbour-*")) == scratch_dirs
    loops = [p for p in Path("/proc").glob("[0-9]*") if _cmdline(p).find("coreplane-io-neighbour-") >= 0]
    assert not loops, [_cmdline(p) for p in loops]


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
