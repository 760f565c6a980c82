"""Queueing at the delegates (paper 002 eq. 12–13): M/M/1 and M/M/c by hand, saturation, limits."""

import pytest

from conftest import REPO
from coreplane.model.policies import Policy
from coreplane.model.queueing import erlang_c, mean_wait_ns, queueing
from coreplane.model.refined import refined
from coreplane.profile import io as profiles

FIXTURES = REPO / "tests" / "fixtures" / "profiles"
TINY = profiles.load(FIXTURES / "tiny.json")
TINY_MT = profiles.load(FIXTURES / "tiny-mt.json")


def test_erlang_c_by_hand():
    # c = 1: P(wait) = ρ. c = 2, a = 1: P = a²/(2 + a) = 1/3.
    # c = 3, a = 2: P = (a³/3!·3/(3−a)) / (1 + a + a²/2 + a³/3!·3/(3−a)) = 4 / (1 + 2 + 2 + 4) = 4/9
    assert erlang_c(1, 0.3) == pytest.approx(0.3)
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert erlang_c(3, 2.0) == pytest.approx(4 / 9)


def test_mm1_is_eq13():
    # λ = 0.5/µs, µ = 1/µs: W = 1/(µ − λ) − 1/µ = 2 − 1 = 1 µs
    assert mean_wait_ns(0.5e-3, 1000.0) == pytest.approx(1000.0)


def test_wait_grows_without_bound_and_saturates_at_load_one():
    service = 1000.0
    waits = [mean_wait_ns(rho / service, service) for rho in (0.5, 0.9, 0.99, 0.999)]
    assert all(a < b for a, b in zip(waits, waits[1:]))
    assert waits[-1] > 900 * service
    assert mean_wait_ns(1.0 / service, service) is None
    assert mean_wait_ns(1.5 / service, service) is None
    assert mean_wait_ns(1.5 / service, service, servers=2) is not None


def test_sequential_mm1_by_hand():
    # tiny, γ = 2, f_c = 1 µs, min-frequency 50 % (mmap, write): 60 delegated calls,
    # t_remote = 190 000, t_d = 720 000, t_nd = 1 000 000 (see test_model_refined).
    # D = 1e6 · 720 000/1e6 = 720 000 → λ = 60/720 000 = 1/12 000 per ns
    # 1/µ = 190 000/60 = 9500/3 ns; ρ = (9500/3)/12 000 = 19/72
    # W = (1/µ)·ρ/(1 − ρ) = (9500/3)·(19/53) = 180 500/159 ns
    # S_q = 1e6 / (720 000 + 60·W)
    q = queueing(TINY, 2.0, 1000.0, Policy("min-frequency", 0.5))
    assert q.model == "M/M/1" and not q.saturated
    assert q.load == pytest.approx(19 / 72)
    assert q.service_ns == pytest.approx(9500 / 3)
    assert q.arrival_per_s == pytest.approx(1e9 / 12_000)
    assert q.wait_ns == pytest.approx(180_500 / 159)
    assert q.speedup == pytest.approx(1e6 / (720_000 + 60 * 180_500 / 159))


def test_mm2_by_hand():
    # Same λ and µ, c = 2: a = λ/µ = 19/72, P(wait) = a²/(2 + a) = 361/11 736,
    # 2µ − λ = 6/9500 − 1/12 000 = 1/1824 per ns → W = 1824 · 361/11 736 ns
    q = queueing(TINY, 2.0, 1000.0, Policy("min-frequency", 0.5), delegates=2)
    assert q.model == "M/M/2"
    assert q.wait_ns == pytest.approx(1824 * 361 / 11_736)


def test_multithreaded_saturation_is_reported_not_a_number():
    # tiny-mt, γ = 2, f_c = 1 µs, all: main t_remote = 100 000 + 2000·100 = 300 000, t_d = 510 000;
    # worker t_remote = 200 000 + 2000·400 = 1 000 000, t_d = 1 394 500.
    # D = 1e6 · 1 904 500 / 1 499 000 = 1 270 514 ns, busy time at the delegate 1 300 000 → load 1.023
    q = queueing(TINY_MT, 2.0, 1000.0, Policy("all"))
    assert q.saturated and q.speedup is None and q.wait_ns is None and q.time_ns is None
    assert q.load == pytest.approx(1_300_000 / (1e6 * 1_904_500 / 1_499_000))
    # per thread λ_k = n_k / t_d,k: 100/510 000 and 400/1 394 500 per ns
    assert q.thread_arrival_per_s == pytest.approx([1e9 * 100 / 510_000, 1e9 * 400 / 1_394_500])
    # A second delegate halves the load and gives a finite projection.
    two = queueing(TINY_MT, 2.0, 1000.0, Policy("all"), delegates=2)
    assert not two.saturated and two.load == pytest.approx(q.load / 2) and two.speedup > 0


@pytest.mark.parametrize("name", ["tiny", "tiny-mt", "bzip2", "xz-T2", "gcc"])
def test_never_above_refined_and_equal_without_delegation(name):
    prof = profiles.load(FIXTURES / f"{name}.json")
    for policy in (Policy("all"), Policy("mos"), Policy("min-frequency", 0.9)):
        q = queueing(prof, 1.5, 3140.0, policy, delegates=2)
        assert q.saturated or q.speedup <= refined(prof, 1.5, 3140.0, policy).speedup
    none = queueing(prof, 1.5, 3140.0, Policy("none"))
    assert none.wait_ns == 0 and none.load == 0
    assert none.speedup == pytest.approx(refined(prof, 1.5, 3140.0, Policy("none")).speedup)


def test_more_delegates_never_wait_longer():
    waits = [queueing(TINY_MT, 2.0, 500.0, Policy("all"), delegates=c).wait_ns for c in (1, 2, 3, 4)]
    assert all(a > b for a, b in zip(waits, waits[1:]))
