"""The closed (finite-source) queueing model: MVA by hand, one thread = eq. 11, bounds the open model breaks."""

import pytest

from conftest import REPO
from coreplane.model.policies import Policy
from coreplane.model.queueing import _timeline_shares, closed, cpu_scale, mva, phases, queueing
from coreplane.model.refined import refined
from coreplane.profile import io as profiles
from coreplane.profile.records import CallStats, Profile

FIXTURES = REPO / "tests" / "fixtures" / "profiles"
TINY = profiles.load(FIXTURES / "tiny.json")
TINY_MT = profiles.load(FIXTURES / "tiny-mt.json")


def test_machine_repairman_two_sources_by_hand():
    # Two customers, one server of demand 1, think time 1 (M/M/1//2, service and think rate 1):
    # p_n ∝ 2!/(2−n)! → p0 : p1 : p2 = 1 : 2 : 2, so the server is busy 4/5 of the time and
    # each customer completes 0.4 cycles per unit time. MVA: Q({k}) = 1/2, R = 1·(1 + 1/2) = 1.5,
    # X_k = 1/(1.5 + 1) = 0.4.
    sol = mva([[1.0, 1.0], [1.0, 1.0]], [True, False])
    assert sol.exact
    assert sol.throughput == pytest.approx([0.4, 0.4])
    assert sol.residence[0] == pytest.approx([1.5, 1.5])
    # Three customers (M/M/1//3, ratio 1): p ∝ 1, 3, 6, 6 → utilisation 15/16, X_k = 5/16.
    three = mva([[1.0] * 3, [1.0] * 3], [True, False])
    assert three.throughput == pytest.approx([5 / 16] * 3)


def test_wait_never_exceeds_the_other_threads_work():
    # Finite source: with N customers a request waits behind at most N − 1 others, however high
    # the load; the open M/M/1 formula has no such bound (and saturates at load 1).
    for n in (2, 3, 5):
        sol = mva([[1.0] * n, [0.01] * n], [True, False])
        assert all(r - 1.0 <= (n - 1) * 1.0 + 1e-12 for r in sol.residence[0])


def test_schweitzer_approximates_exact_mva():
    # Used only above MVA_EXACT_LIMIT threads; on a small network it stays within ~10 % of exact MVA.
    import numpy as np
    from coreplane.model import queueing as q
    demands = np.array([[[1.0, 2.0, 0.5], [0.3, 0.1, 0.2], [2.0, 1.0, 4.0]]])
    kinds = np.array([True, True, False])
    exact, _ = q._mva_exact(demands, kinds)
    approx, _ = q._mva_schweitzer(demands, kinds)
    assert approx[0] == pytest.approx(exact[0], rel=0.12)
    # Symmetric machine repairman (exact 5/16 each): Schweitzer gives 1 − 1/√2 ≈ 0.293.
    sym, _ = q._mva_schweitzer(np.array([[[1.0] * 3, [1.0] * 3]]), np.array([True, False]))
    assert sym[0] == pytest.approx([1 - 2 ** -0.5] * 3, rel=1e-6)


def test_networks_solved_together_as_each_alone():
    # mva_many pads the larger networks to one size and solves networks of one size together:
    # each answer is the one it gets alone, exact below MVA_EXACT_LIMIT classes, approximate above.
    import random
    from coreplane.model import queueing as q
    rng = random.Random(7)
    kinds = [True, False, True, False, False]
    nets = [[[rng.choice([0.0, rng.expovariate(1.0)]) for _ in range(k)] for _ in kinds]
            for k in (1, 2, 2, 3, 12, 13, 20, 40)]
    together = q.mva_many(nets, kinds)
    for net, sol in zip(nets, together):
        alone = q.mva(net, kinds)
        assert sol.exact == alone.exact == (len(net[0]) <= q.MVA_EXACT_LIMIT)
        assert sol.throughput == pytest.approx(alone.throughput, rel=1e-9)
        assert [r for row in sol.residence for r in row] == pytest.approx(
            [r for row in alone.residence for r in row], rel=1e-9)


@pytest.mark.parametrize("fc", [0.0, 1000.0, 50_000.0])
def test_one_thread_is_eq_11(fc):
    # A sequential program never queues behind itself: the closed model is the refined model,
    # while the open M/M/1 model still adds a wait.
    for policy in (Policy("all"), Policy("min-frequency", 0.5)):
        c = closed(TINY, 2.0, fc, policy)
        assert c.speedup == pytest.approx(refined(TINY, 2.0, fc, policy).speedup)
        assert c.wait_ns == 0
        assert c.threads == 1 and c.exact


def test_sleeping_callers_overlap_on_one_core_by_hand():
    # tiny-mt with both threads alive for the whole run (one phase): main C = 1 000 000 −
    # (10 000 clone + 490 000 futex + 100 000 read) = 400 000, its busy calls clone (always
    # local) and read (100 × 1000 ns), 490 000 ns blocked in futex; worker C = 1 000 000 −
    # (1000 futex + 200 000 write) = 799 000, write 400 × 500 ns, 1000 blocked.
    # `all` delegates read and write; γ = 1, f_c = 50 µs, callers sleep at once (spin_ns = 0), one
    # compute core: each delegated call is 1000 (or 500) ns at the control core and a 100 µs delay,
    # so one thread computes while the other waits.
    doc = TINY_MT.to_dict()
    doc["threads"][1]["start_ns"] = 0
    together = profiles.from_dict(doc)
    c = closed(together, 1.0, 50_000.0, Policy("all"), compute_cores=1, spin_ns=0.0)
    # Per cycle (one delegated call): main cpu (400 000 + 10 000)/100 = 4100, control 1000,
    # delay 100 000 + 490 000/100 = 104 900; worker cpu 799 000/400 = 1997.5, control 500,
    # delay 100 000 + 1000/400 = 100 002.5.
    a = [4100.0, 1997.5]
    b = [1000.0, 500.0]
    z = [104_900.0, 100_002.5]
    # Populations {main}, {worker}: X = 1/(a + b + z); Q_cpu = X·a, Q_ctl = X·b.
    x_m1, x_w1 = 1 / (a[0] + b[0] + z[0]), 1 / (a[1] + b[1] + z[1])
    r_m = [a[0] * (1 + x_w1 * a[1]), b[0] * (1 + x_w1 * b[1])]
    r_w = [a[1] * (1 + x_m1 * a[0]), b[1] * (1 + x_m1 * b[0])]
    x_m, x_w = 1 / (sum(r_m) + z[0]), 1 / (sum(r_w) + z[1])
    wall_d = (100 * a[0] + 400 * a[1]) / (x_m * a[0] + x_w * a[1])
    # Native: one cycle each, cpu = C + busy g, delay = blocked time (main 490 000, worker 1000).
    n_a, n_z = [510_000.0, 999_000.0], [490_000.0, 1000.0]
    x_m1, x_w1 = 1 / (n_a[0] + n_z[0]), 1 / (n_a[1] + n_z[1])
    x_m = 1 / (n_a[0] * (1 + x_w1 * n_a[1]) + n_z[0])
    x_w = 1 / (n_a[1] * (1 + x_m1 * n_a[0]) + n_z[1])
    wall_nd = sum(n_a) / (x_m * n_a[0] + x_w * n_a[1])
    assert c.speedup == pytest.approx(wall_nd / wall_d)
    # The open model cannot see the overlap: the refined model's summed busy times are far slower.
    assert c.speedup > 1.5 * refined(together, 1.0, 50_000.0, Policy("all")).speedup


def test_spinning_callers_do_not_overlap():
    # A caller that spins through its whole round trip holds its core: on one compute core the
    # threads' busy times add up, which is the refined model's Σ t_nd / Σ t_d.
    spin = closed(TINY_MT, 2.0, 1000.0, Policy("all"), compute_cores=1)
    sleep = closed(TINY_MT, 2.0, 1000.0, Policy("all"), compute_cores=1, spin_ns=0.0)
    assert sleep.speedup > spin.speedup
    assert 0 < spin.compute_busy <= 1.0


def test_busy_cores_and_saturation_is_not_a_state():
    # On one core at most one thread computes at a time; on two, both can.
    for fc in (0.0, 2000.0):
        one = closed(TINY_MT, 1.5, fc, Policy("all"), compute_cores=1)
        two = closed(TINY_MT, 1.5, fc, Policy("all"), compute_cores=2)
        assert 0 < one.compute_busy <= 1.0
        assert 1.0 < two.compute_busy <= 2.0
    # Where the open model reports saturation, the closed one still has an answer: a finite
    # number of threads cannot overload a delegate without end.
    assert queueing(TINY_MT, 2.0, 1000.0, Policy("all")).saturated
    assert closed(TINY_MT, 2.0, 1000.0, Policy("all")).speedup > 0


def _compute_shares(prof: Profile) -> tuple[list[list[tuple[int, float]]], set[int]]:
    """phases() as (thread, compute share) per phase."""
    cuts, parents = phases(prof)
    return [[(s.thread, pytest.approx(s.compute)) for s in phase] for phase in cuts], parents


def test_threads_that_do_not_overlap_are_solved_one_after_another():
    doc = profiles.load(FIXTURES / "tiny-mt.json").to_dict()
    doc["threads"][1]["start_ns"] = 1_000_000
    doc["threads"][1]["end_ns"] = 2_000_000
    prof = profiles.from_dict(doc)
    assert _compute_shares(prof)[0] == [[(0, 1.0)], [(1, 1.0)]]
    # In tiny-mt the main thread runs alone for the 10 µs before it starts the worker.
    assert _compute_shares(TINY_MT) == ([[(0, 0.01)], [(0, 0.99), (1, 1.0)]], set())


def test_call_timeline_places_calls_in_phases():
    # Five calls of 0.2 ms from 1 ms to the end of the last, started at 2.8 ms, over spans cut
    # at 0, 2 and 4 ms: spread evenly over 1-3 ms, half in each span.
    cuts = [0, 2_000_000, 4_000_000]
    call = CallStats("read", 5, 1_000_000.0, first_ns=1_000_000, last_ns=2_800_000)
    assert _timeline_shares(call, cuts, 0, 4_000_000) == pytest.approx({0: 0.5, 1: 0.5})
    one = CallStats("openat", 1, 0.0, first_ns=4_000_000, last_ns=4_000_000)
    assert _timeline_shares(one, cuts, 0, 4_000_000) == {1: 1.0}
    # A wait of 2 ms from 1.5 ms lies a quarter in the first span; one that outlives the thread
    # is cut at its end (1.5-4 ms: a fifth).
    wait = CallStats("futex", 1, 2_000_000.0, first_ns=1_500_000, last_ns=1_500_000)
    assert _timeline_shares(wait, cuts, 0, 4_000_000) == pytest.approx({0: 0.25, 1: 0.75})
    wait.total_ns = 3_000_000.0
    assert _timeline_shares(wait, cuts, 0, 4_000_000) == pytest.approx({0: 0.2, 1: 0.8})
    assert _timeline_shares(CallStats("read", 5, 5000.0), [0, 1], 0, 1) is None


def _start_up_call(first_ns: int | None) -> Profile:
    # As xz -T2: main (0-10 ms) makes one openat alone before it starts a worker (1-10 ms) that
    # computes while main waits in futex.
    def thread(tid, start, calls):
        return {"pid": 1, "tid": tid, "start_ns": start, "end_ns": 10_000_000, "syscalls": calls}
    openat = {"name": "openat", "count": 1, "total_ns": 1000, "first_ns": first_ns, "last_ns": first_ns}
    futex = {"name": "futex", "count": 1, "total_ns": 8_900_000, "first_ns": 1_100_000, "last_ns": 1_100_000}
    return profiles.from_dict({
        "format": "coreplane-profile/1", "program": "xz", "wall_ns": 10_000_000,
        "syscalls": [{"name": "openat", "count": 1, "total_ns": 1000}, {"name": "futex", "count": 1, "total_ns": 8_900_000}],
        "threads": [thread(1, 0, [openat, futex]), thread(2, 1_000_000, [])]})


def test_a_start_up_call_holds_up_the_run():
    # Delegated at 1 ms per direction, main's one start-up call adds its whole 2 ms round trip:
    # nothing else can run yet. Spread over main's life instead (no timeline), most of it would
    # overlap the worker's computation.
    at_start = closed(_start_up_call(500_000), 1.0, 1_000_000.0, Policy("openat"), spin_ns=0.0)
    assert at_start.time_ns == pytest.approx(10_000_000 + 2_000_000, rel=0.01)
    spread = closed(_start_up_call(None), 1.0, 1_000_000.0, Policy("openat"), spin_ns=0.0)
    assert spread.time_ns < 10_000_000 + 1_000_000


def _driver_and_children(driver_reads: int) -> Profile:
    # As cc runs cc1 then as: a driver (pid 1) alive 0-4 ms that works 0-1 ms (its own reads,
    # 10 µs each) and waits in wait4 while child 2 (1-2.5 ms) and child 3 (2.5-4 ms) run, each
    # making 100 reads of 1 µs.
    def thread(tid, start, end, calls):
        return {"pid": tid, "tid": tid, "start_ns": start, "end_ns": end, "syscalls": calls}
    reads = [{"name": "read", "count": 100, "total_ns": 100_000}]
    own = [{"name": "read", "count": driver_reads, "total_ns": driver_reads * 10_000}] if driver_reads else []
    wait = [{"name": "wait4", "count": 2, "total_ns": 3_000_000}]
    return profiles.from_dict({
        "format": "coreplane-profile/1", "program": "cc", "wall_ns": 4_000_000, "syscalls": reads,
        "threads": [thread(1, 0, 4_000_000, own + wait), thread(2, 1_000_000, 2_500_000, reads),
                    thread(3, 2_500_000, 4_000_000, reads)],
        "processes": [{"pid": 1, "ppid": 0, "start_ns": 0, "end_ns": 4_000_000},
                      {"pid": 2, "ppid": 1, "start_ns": 1_000_000, "end_ns": 2_500_000},
                      {"pid": 3, "ppid": 1, "start_ns": 2_500_000, "end_ns": 4_000_000}]})


def test_a_parent_works_while_its_children_do_not_run():
    prof = _driver_and_children(driver_reads=50)
    # The driver's load all falls before its children; they share no phase with each other.
    assert _compute_shares(prof) == ([[(0, 1.0)], [(1, 1.0)], [(2, 1.0)]], {0})
    # Delegating every read at 10 µs per direction adds 20 µs per call one after the other, as
    # in the sequential eq. 11: (50 + 100 + 100) x 20 µs on top of 4 ms.
    r = closed(prof, 1.0, 10_000.0, Policy("read"))
    assert r.time_ns == pytest.approx(4_000_000 + 250 * 20_000, rel=0.01)
    # A timeline that spreads the driver's reads over its whole life (first at 0, last at the
    # end) still leaves them out of its children's phases: it cannot call while it waits.
    doc = prof.to_dict()
    doc["threads"][0]["syscalls"][0].update(first_ns=0, last_ns=3_990_000)
    spread = closed(profiles.from_dict(doc), 1.0, 10_000.0, Policy("read"))
    assert spread.time_ns == pytest.approx(r.time_ns, rel=1e-6)
    # Without its own work the driver is alive beside each child, but it still does not compete.
    idle = _driver_and_children(driver_reads=0)
    assert closed(idle, 1.0, 10_000.0, Policy("read")).time_ns == pytest.approx(4_000_000 + 200 * 20_000, rel=0.01)


def test_cpu_scale_from_the_process_cpu_time():
    # Two threads of one process alive 1 s each on one core but 1 s of CPU in all: half of
    # each lifetime was waiting for the core.
    doc = TINY_MT.to_dict()
    doc["processes"] = [{"pid": 100, "user_ns": 0, "sys_ns": 0}]
    assert cpu_scale(profiles.from_dict(doc)) == [1.0, 1.0]   # no CPU time: no scaling
    busy = sum(s.compute_ns + s.syscall_ns for s in TINY_MT.segments())
    doc["processes"] = [{"pid": 100, "user_ns": int(busy / 2), "sys_ns": 0}]
    assert cpu_scale(profiles.from_dict(doc)) == pytest.approx([0.5, 0.5], rel=1e-6)
    assert cpu_scale(TINY) == [1.0]


def _pipeline_stages(reader_cpu_ns: int) -> Profile:
    # Two processes side by side for 1 ms on one compute core: a writer busy all the time (800 µs
    # computing, 200 µs writing), and a reader whose 50 reads took 900 µs of its 1 ms.
    doc = TINY_MT.to_dict()
    read = {"name": "read", "nr": 0, "count": 50, "errors": 0, "total_ns": 900_000, "local": 50, "delegated": 0}
    write = {"name": "write", "nr": 1, "count": 50, "errors": 0, "total_ns": 200_000, "local": 50, "delegated": 0}
    doc["syscalls"] = [read, write]
    doc["threads"] = [{"pid": 200, "tid": 200, "start_ns": 0, "end_ns": 1_000_000, "syscalls": [write]},
                      {"pid": 201, "tid": 201, "start_ns": 0, "end_ns": 1_000_000, "syscalls": [read]}]
    doc["processes"] = [{"pid": 200, "ppid": 1, "start_ns": 0, "end_ns": 1_000_000, "user_ns": 800_000, "sys_ns": 200_000},
                        {"pid": 201, "ppid": 1, "start_ns": 0, "end_ns": 1_000_000, "user_ns": 0,
                         "sys_ns": reader_cpu_ns}]
    return profiles.from_dict(doc)


def test_time_blocked_in_a_call_is_no_cpu_demand():
    # The reader's CPU time says 50 µs of its 1 ms were on a core: the rest of its time, most of
    # it in read, was blocked, and the model's native run fits in the 1 ms the profile lasted
    # (2 ms if the reader had needed the one core all the time, as its CPU time would then say).
    blocked = closed(_pipeline_stages(50_000), 1.0, 0.0, Policy("none"), compute_cores=1)
    assert blocked.native_model_ns == pytest.approx(1_000_000, rel=0.06)
    busy = closed(_pipeline_stages(1_000_000), 1.0, 0.0, Policy("none"), compute_cores=1)
    assert busy.native_model_ns == pytest.approx(2_000_000, rel=0.02)
    # Delegated, a blocked read waits in the delegate: its blocked part stays a delay, and the
    # control core serves only its CPU part.
    d = closed(_pipeline_stages(50_000), 1.0, 10_000.0, Policy("explicit", names=frozenset({"read"})),
               compute_cores=1, spin_ns=0.0)
    assert d.wait_ns < 1_000


def test_calls_longer_than_their_thread_are_scaled_to_its_life():
    # --time-every N scales a sampled call by N: one sampled read that blocked 1 ms stands for
    # N ms. A thread's calls cannot outlast the thread.
    doc = TINY_MT.to_dict()
    doc["threads"][1]["syscalls"][1]["total_ns"] = 3_960_000   # write: 4x the thread's life
    seg = profiles.from_dict(doc).segments()[1]
    assert seg.compute_ns == 0
    assert sum(g for _, g in seg.calls.values()) == pytest.approx(990_000 * 3_960_000 / 3_961_000)


def test_a_caller_spins_through_its_delegated_call_blocking():
    # The caller cannot tell a blocked read from a slow round trip: it polls through both, up to
    # its spin limit, on the one compute core the writer needs. 50 reads blocked 855 µs in all.
    stages, reads = _pipeline_stages(50_000), Policy("explicit", names=frozenset({"read"}))
    spins = closed(stages, 1.0, 10_000.0, reads, compute_cores=1)
    sleeps = closed(stages, 1.0, 10_000.0, reads, compute_cores=1, spin_ns=0.0)
    assert spins.time_ns > sleeps.time_ns + 800_000
    # The writer's 1 ms, then each read: 18 µs (its CPU part and what it was blocked) + 2·f_c.
    assert spins.time_ns == pytest.approx((1_000_000 + 50 * (18_000 + 20_000)) / spins.native_model_ns * 1_000_000,
                                          rel=0.02)


def _fio_like(sleep_ns: int) -> Profile:
    # fio's shape (heldout10): a main thread that computes 100 ms and then sleeps `sleep_ns` in a
    # call the profiler did not time (a site's 9th clock_nanosleep, sampled away), and a job
    # thread alive beside it that makes 1000 writes of 5 µs each after the sleep. One compute core.
    doc = TINY_MT.to_dict()
    write = {"name": "write", "nr": 1, "count": 1000, "errors": 0, "total_ns": 5_000_000, "local": 1000,
             "delegated": 0, "first_ns": 100_000_000 + sleep_ns, "last_ns": 100_000_000 + sleep_ns + 9_900_000}
    nap = {"name": "clock_nanosleep", "nr": 230, "count": 13, "errors": 0, "total_ns": 1_300_000, "local": 13,
           "delegated": 0, "first_ns": 99_000_000, "last_ns": 100_000_000}
    end = 110_000_000 + sleep_ns
    doc["wall_ns"] = end
    doc["syscalls"] = [nap, write]
    doc["threads"] = [{"pid": 100, "tid": 100, "start_ns": 0, "end_ns": end, "cpu_ns": 100_000_000, "syscalls": [nap]},
                      {"pid": 100, "tid": 101, "start_ns": 0, "end_ns": end, "cpu_ns": 10_000_000, "syscalls": [write]}]
    doc["processes"] = [{"pid": 100, "ppid": 1, "start_ns": 0, "end_ns": end, "user_ns": 105_000_000,
                         "sys_ns": 5_000_000}]
    return profiles.from_dict(doc)


@pytest.mark.parametrize("fc", [0.0, 5_000.0, 20_000.0])
def test_time_the_profile_does_not_show_is_not_scaled_with_the_run(fc):
    # A sleep the profiler did not time is left in the thread's computation beyond its CPU time,
    # which the network drops: the model's native run is ~100 ms short of the profile's wall.
    # That time passes as it did in the delegated run; the delegated calls cost what they cost
    # without the sleep, not that scaled by wall ÷ native model (1.9× here).
    writes = Policy("explicit", names=frozenset({"write"}))
    awake, asleep = _fio_like(0), _fio_like(100_000_000)
    # The caller spins through each round trip on the one compute core: 1000 × (4.5 µs + 2·f_c).
    quiet = closed(awake, 1.0, fc, writes, compute_cores=1)
    slept = closed(asleep, 1.0, fc, writes, compute_cores=1)
    added = slept.time_ns - asleep.wall_ns
    assert added == pytest.approx(quiet.time_ns - awake.wall_ns, rel=0.05)
    assert added == pytest.approx(1000 * (4_500 + 2 * fc), rel=0.05)
    # The time left unseen: ~100 ms, none without the sleep. Scaled with the run instead, the
    # calls would cost wall ÷ native model (1.9×) as much.
    assert quiet.unseen_ns < 0.02 * awake.wall_ns
    assert slept.unseen_ns == pytest.approx(asleep.wall_ns - slept.native_model_ns)
    assert slept.unseen_ns > 0.4 * asleep.wall_ns
    assert asleep.wall_ns / slept.native_model_ns > 1.5
