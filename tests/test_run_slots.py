"""Delegate request slots are recycled: threads that come and go, more of them than the runtime
has slots (4096), all delegate, whether they exit through the runtime or are killed unseen, and
a delegated call does not outlive the thread that made it, and a thread that once found no
slot delegates again once one is free (tests/programs/slot_churn.c)."""

import json
from pathlib import Path

import pytest

import test_stress
from conftest import CLI, build_program
from test_stress import watched

THREADS = 4300  # more than the runtime's 4096 request slots
FORWARD_COST_NS = 5000
# 4300 threads started under the runtime: 5-10 s at load 7, over 20 s at load 15.
CHURN_WATCHDOG_S = 120


@pytest.fixture(scope="module")
def slot_churn(tmp_path_factory) -> Path:
    return build_program(tmp_path_factory, "slot_churn")


@pytest.mark.parametrize("ending", ["churn", "killed"])
def test_threads_beyond_the_slot_count_still_delegate(slot_churn, ending, tmp_path, monkeypatch):
    # A delegated call takes at least twice the forward cost (the delegate spends it on both
    # ways), a local one about 1 us. Before: the 204 threads after the 4096th had no slot and
    # made their calls locally (local_threads=204), whichever way the threads ended.
    monkeypatch.setattr(test_stress, "WATCHDOG_S", CHURN_WATCHDOG_S)
    prof = tmp_path / "p.json"
    run = watched(CLI + ["run", "--delegate", "getppid", "--forward-cost", str(FORWARD_COST_NS), "--profile",
                         str(prof), "--", str(slot_churn), ending, str(THREADS), "2", str(2 * FORWARD_COST_NS)])
    assert run.returncode == 0, run.stderr
    assert run.stdout == "local_threads=0\nok\n"
    assert json.loads(prof.read_text())["overhead"]["slotless_calls"] == 0


@pytest.mark.parametrize("policy", ["read", "all"])
def test_a_delegated_read_ends_with_its_thread(slot_churn, policy):
    # A thread blocked in a delegated read exits from a signal handler (SA_RESTART); the byte
    # written next is the main thread's to read. Before: the delegate went on reading for the
    # dead thread, took the byte, and the main thread's read never ended (a hang, every run).
    run = watched(CLI + ["run", "--delegate", policy, "--", str(slot_churn), "abandon", "100"])
    assert (run.returncode, run.stdout) == (0, "ok\n"), run.stderr


@pytest.mark.parametrize("ending", ["released", "killed"])
def test_a_thread_that_found_no_slot_delegates_again_once_one_is_free(slot_churn, ending, tmp_path, monkeypatch):
    # 4096 threads hold every slot while the main thread makes its first calls (local, counted),
    # then end: through exit(2), which gives their slots back, or killed unseen, whose slots come
    # free without notice (found at the 4096th call without one). Before: the main thread never
    # looked again, its 8,196 calls were all local (then=local).
    monkeypatch.setattr(test_stress, "WATCHDOG_S", CHURN_WATCHDOG_S)
    prof = tmp_path / "p.json"
    run = watched(CLI + ["run", "--delegate", "getppid", "--forward-cost", str(FORWARD_COST_NS), "--profile",
                         str(prof), "--", str(slot_churn), "retry", "4096", str(2 * FORWARD_COST_NS), ending])
    assert (run.returncode, run.stdout) == (0, "first=local then=delegated\nok\n"), run.stderr
    slotless = json.loads(prof.read_text())["overhead"]["slotless_calls"]
    assert slotless == (4 if ending == "released" else 4096)
