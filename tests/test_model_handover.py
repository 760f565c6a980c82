"""Processes that delegate side by side (a shell pipeline's stages, each with its own delegate on
the one control core): the closed model's control-core hand-overs and the spin through blocked
calls that the compute core shares (issue 13, session 12)."""

import re

import pytest

from conftest import REPO
from coreplane.model import calibration as calibrations
from coreplane.model.policies import Policy
from coreplane.model.queueing import BLOCKED_SHARE, _projected_load, closed
from coreplane.model.refined import Split
from coreplane.profile import io as profiles

TINY_MT = profiles.load(REPO / "tests" / "fixtures" / "profiles" / "tiny-mt.json")
FC, SPIN, YIELD = 10_000.0, 90_000.0, 30_000.0


def _stages(writes: int = 2000, reads: int = 200, pids: tuple[int, int] = (200, 201)):
    # Two processes alive together for 10 ms: a writer making `writes` writes of 1 µs and
    # computing the rest of its life, and a reader whose `reads` reads took 8 ms (blocked on
    # the pipe; 1 ms of CPU in all).
    doc = TINY_MT.to_dict()
    write = {"name": "write", "nr": 1, "count": writes, "errors": 0, "total_ns": writes * 1_000,
             "local": writes, "delegated": 0}
    read = {"name": "read", "nr": 0, "count": reads, "errors": 0, "total_ns": 8_000_000, "local": reads,
            "delegated": 0}
    doc["wall_ns"] = 10_000_000
    doc["syscalls"] = [read, write]
    doc["threads"] = [{"pid": pids[0], "tid": 200, "start_ns": 0, "end_ns": 10_000_000, "syscalls": [write]},
                      {"pid": pids[1], "tid": 201, "start_ns": 0, "end_ns": 10_000_000, "syscalls": [read]}]
    doc["processes"] = [{"pid": p, "ppid": 1, "start_ns": 0, "end_ns": 10_000_000, "user_ns": cpu, "sys_ns": 0}
                        for p, cpu in sorted({pids[0]: 10_000_000, pids[1]: 1_000_000}.items())]
    return profiles.from_dict(doc)


def _walls(result, profile):
    """(projected wall, native wall) of the model's network, from its speedup and time."""
    return result.time_ns * result.native_model_ns / profile.wall_ns, result.native_model_ns


def test_each_hand_over_costs_a_round_trip_and_a_yield():
    prof = _stages()
    without = closed(prof, 1.0, FC, Policy("all"), spin_ns=SPIN)
    with_ = closed(prof, 1.0, FC, Policy("all"), spin_ns=SPIN, yield_ns=YIELD)
    assert without.handovers == 0 and without.handover_ns == 0
    wall, native = _walls(without, prof)
    # One phase, the writer the main process: at most one hand-over per poll window and yield,
    # per write, and per read as often again as the phase is slowed down.
    count = min(wall / (SPIN + YIELD), 2000, 200 * max(1.0, wall / native))
    rho = min(1.0, 2000 * 2 * FC / wall)
    assert with_.handovers == pytest.approx(count)
    assert with_.handover_ns == pytest.approx(count * (2 * FC + YIELD) * rho)
    assert _walls(with_, prof)[0] == pytest.approx(wall + with_.handover_ns)


def test_a_reader_with_few_calls_hands_over_no_more_often_than_it_was_slowed():
    prof = _stages(reads=3)
    r = closed(prof, 1.0, FC, Policy("all"), spin_ns=SPIN, yield_ns=YIELD)
    wall, native = _walls(closed(prof, 1.0, FC, Policy("all"), spin_ns=SPIN), prof)
    assert r.handovers == pytest.approx(3 * wall / native)


def test_no_hand_overs_without_several_delegating_processes_or_with_a_core_each():
    # Threads of one process share its delegates; one process delegating alone, or each
    # process with a control core of its own, hands nothing over.
    one_process = _stages(pids=(200, 200))
    assert closed(one_process, 1.0, FC, Policy("all"), spin_ns=SPIN, yield_ns=YIELD).handovers == 0
    writer_only = Policy("explicit", names=frozenset({"write"}))
    assert closed(_stages(), 1.0, FC, writer_only, spin_ns=SPIN, yield_ns=YIELD).handovers == 0
    assert closed(_stages(), 1.0, FC, Policy("all"), control_cores=2, spin_ns=SPIN, yield_ns=YIELD).handovers == 0
    # A sequential profile: eq. 11, with or without the yield period.
    tiny = profiles.load(REPO / "tests" / "fixtures" / "profiles" / "tiny.json")
    assert closed(tiny, 1.0, FC, Policy("all"), yield_ns=YIELD).time_ns == closed(tiny, 1.0, FC, Policy("all")).time_ns


def test_a_spin_through_a_blocked_call_shares_the_compute_core(monkeypatch):
    # 10 calls whose 500 µs were 90 % blocked: each round trip is 50 µs + 2·f_c, under the spin
    # limit, of which the blocked 45 µs count at BLOCKED_SHARE on the compute core (the stage it
    # waits for runs beside it) and the rest as delay.
    part = Split(compute_ns=0.0, syscall_ns=500_000.0, remote_g_ns=500_000.0, remote_calls=10, local_ns=0.0)
    whole = _projected_load(part, 0.1, 0.0, 1.0, FC, SPIN)
    half = _projected_load(part, 0.1, 0.0, 1.0, FC, SPIN, BLOCKED_SHARE)
    assert whole.cpu == pytest.approx(50_000 + 2 * FC)
    assert half.cpu == pytest.approx(whole.cpu - (1 - BLOCKED_SHARE) * 45_000)
    assert half.cpu + half.control + half.delay == pytest.approx(whole.cpu + whole.control + whole.delay)
    # Applied only where another process delegates in the same phase: the reader delegating
    # alone spins through its blocked reads at full weight (the writer then waits in no call).
    from coreplane.model import queueing
    reads_only = Policy("explicit", names=frozenset({"read"}))
    shared = {p: closed(_stages(), 1.0, FC, p, spin_ns=SPIN).time_ns for p in (Policy("all"), reads_only)}
    monkeypatch.setattr(queueing, "BLOCKED_SHARE", 1.0)
    whole = {p: closed(_stages(), 1.0, FC, p, spin_ns=SPIN).time_ns for p in (Policy("all"), reads_only)}
    assert shared[reads_only] == whole[reads_only]
    assert shared[Policy("all")] < whole[Policy("all")]


def test_the_yield_period_is_the_runtimes_share_of_the_polling_window():
    cal = calibrations.load(REPO / "tests" / "fixtures" / "calibration.json").calibration
    assert calibrations.yield_ns(cal) == pytest.approx(cal.window_ns * 28_700 / 1_400_000)
    cal.window_ns = None
    assert calibrations.yield_ns(cal) is None


def test_the_delegates_constants_are_the_runtimes():
    # calibration.py mirrors two constants of the runtime's delegate loop; they must not drift.
    source = (REPO / "crates/runtime/src/bin/rt/delegate.rs").read_text()
    for name in ("DELEGATE_SPIN_NS", "YIELD_EVERY_NS"):
        value = re.search(rf"const {name}: u64 = ([\d_]+);", source).group(1)
        assert int(value.replace("_", "")) == getattr(calibrations, name), name
