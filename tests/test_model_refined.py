"""The refined model (paper 002 eq. 4–11): hand-computed vectors and the properties the paper states."""

import itertools

import numpy as np
import pytest

from conftest import REPO
from coreplane.model.naive import naive
from coreplane.model.policies import Policy
from coreplane.model.refined import interposed_local_ns, refined
from coreplane.profile import io as profiles

FIXTURES = REPO / "tests" / "fixtures" / "profiles"
TINY = profiles.load(FIXTURES / "tiny.json")
TINY_MT = profiles.load(FIXTURES / "tiny-mt.json")
ALL = [profiles.load(p) for p in sorted(FIXTURES.glob("*.json"))]
POLICIES = [Policy("all"), Policy("none"), Policy("min-frequency", 0.9), Policy("max-frequency", 0.5),
            Policy("random", 0.7, 3), Policy("mckernel"), Policy("mos")]


def test_all_delegated_by_hand():
    # tiny, γ = 2, f_c = 1 µs. Delegated: getppid, mmap, read, write (futex stays local).
    # n = 1000 + 10 + 100 + 50 = 1160; Σ b·g = 20 000 + 20 000 + 100 000 + 50 000 = 190 000
    # t_remote = 190 000 + 2·1000·1160 = 2 510 000 (eq. 5, 8); t_local = g(futex) = 10 000 (eq. 7)
    # t_d = 800 000/2 + 2 510 000 + 10 000 = 2 920 000 (eq. 9); S_r = 1 000 000 / 2 920 000 (eq. 10)
    r = refined(TINY, 2.0, 1000.0, Policy("all"))
    assert r.t_remote_ns == 2_510_000 and r.t_local_ns == 10_000 and r.t_d_ns == 2_920_000
    assert r.speedup == pytest.approx(1_000_000 / 2_920_000)
    assert r.forward_ns == 2_320_000 and r.delegated_calls == 1160
    assert r.time_ns == pytest.approx(2_920_000)


def test_min_and_max_frequency_by_hand():
    # min-frequency 50 %: mmap (10) and write (50). t_remote = 70 000 + 2·1000·60 = 190 000;
    # t_local = 100 000 + 20 000 + 10 000 = 130 000; t_d = 400 000 + 190 000 + 130 000 = 720 000.
    assert refined(TINY, 2.0, 1000.0, Policy("min-frequency", 0.5)).speedup == pytest.approx(1e6 / 720_000)
    # max-frequency 50 %: getppid (1000) and read (100). t_remote = 120 000 + 2·1000·1100 = 2 320 000;
    # t_local = 50 000 + 20 000 + 10 000 = 80 000; t_d = 400 000 + 2 320 000 + 80 000 = 2 800 000.
    assert refined(TINY, 2.0, 1000.0, Policy("max-frequency", 0.5)).speedup == pytest.approx(1e6 / 2_800_000)


def test_local_implementation_g_prime_by_hand():
    # g'(read) = 40 000 (the compute-side read is 2.5× faster), read kept local, write delegated:
    # t_local = 40 000 + 20 000 (getppid) + 20 000 (mmap) + 10 000 (futex) = 90 000
    # t_remote = 50 000 + 2·500·50 = 100 000; t_d = 800 000/1.5 + 190 000 = 723 333.3
    r = refined(TINY, 1.5, 500.0, Policy("explicit", names=frozenset({"write"})), local_ns={"read": 40_000})
    assert r.t_local_ns == pytest.approx(90_000)
    assert r.speedup == pytest.approx(1e6 / (800_000 / 1.5 + 190_000))


def test_multithreaded_by_hand():
    # tiny-mt, γ = 2, f_c = 500 ns, all delegated (read in main, write in the worker):
    # main:   t_nd = 400 000 + 110 000 = 510 000; t_d = 200 000 + (100 000 + 1000·100) + 10 000 = 410 000
    # worker: t_nd = 789 000 + 200 000 = 989 000; t_d = 394 500 + (200 000 + 1000·400) = 994 500
    # S_r = 1 499 000 / 1 404 500
    r = refined(TINY_MT, 2.0, 500.0, Policy("all"))
    assert r.speedup == pytest.approx(1_499_000 / 1_404_500)
    assert r.delegated == ["read", "write"]


@pytest.mark.parametrize("prof", ALL, ids=lambda p: p.label)
def test_never_above_gamma_when_g_prime_is_g(prof):
    for policy, gamma, fc in itertools.product(POLICIES, (1.0, 1.04, 2.0, 10.0), (0.0, 1e3, 1e6)):
        assert refined(prof, gamma, fc, policy).speedup <= gamma * (1 + 1e-12), (policy, gamma, fc)


@pytest.mark.parametrize("prof", ALL, ids=lambda p: p.label)
def test_falls_as_forward_cost_grows(prof):
    for policy in POLICIES:
        s = [refined(prof, 2.0, fc, policy) for fc in (0.0, 10.0, 1e3, 1e5, 1e7)]
        if s[0].delegated_calls:
            assert all(a.speedup > b.speedup for a, b in zip(s, s[1:])), policy
        else:
            assert len({x.speedup for x in s}) == 1


@pytest.mark.parametrize("prof", ALL, ids=lambda p: p.label)
def test_equals_naive_without_forwarding_cost(prof):
    for gamma in (1.0, 1.04, 2.0, 7.5):
        expected = naive(prof, gamma).speedup
        # nothing forwarded, f_c = 0; and everything forwarded for free (the naive model's own case)
        assert refined(prof, gamma, 0.0, Policy("none")).speedup == pytest.approx(expected, rel=1e-12)
        assert refined(prof, gamma, 0.0, Policy("all")).speedup == pytest.approx(expected, rel=1e-12)


def test_skewed_profile_is_sensitive_to_the_policy():
    # Paper 002 Fig. 4: bzip2 (read/write dominate) loses far more with max- than with min-frequency.
    bzip2 = profiles.load(FIXTURES / "bzip2.json")
    low = refined(bzip2, 2.0, 10_000.0, Policy("min-frequency", 0.9)).speedup
    high = refined(bzip2, 2.0, 10_000.0, Policy("max-frequency", 0.9)).speedup
    assert low > 1.5 > high


def test_gamma_one_and_no_cost_is_no_change():
    for prof in ALL:
        assert refined(prof, 1.0, 0.0, Policy("mos")).speedup == pytest.approx(1.0)


def test_result_is_json_ready():
    doc = refined(TINY, 2.0, 1000.0, Policy("all")).to_dict()
    assert isinstance(doc["speedup"], float) and not isinstance(doc["t_d_ns"], np.ndarray)


def test_interposition_cost_on_local_calls_by_hand():
    # tiny with a runtime overhead of 100 ns per intercepted call, nothing delegated, γ = 1:
    # g' = g + 100·n → t_local = 200 000 + 100·1164 = 316 400; S = 1e6 / (800 000 + 316 400)
    doc = TINY.to_dict()
    doc["overhead"] = {"interposed_call_ns": 100.0, "method": "hand"}
    prof = profiles.from_dict(doc)
    local = interposed_local_ns(prof)
    assert local["read"] == 100_000 + 100 * 100
    r = refined(prof, 1.0, 0.0, Policy("none"), local_ns=local)
    assert r.t_local_ns == pytest.approx(316_400)
    assert r.speedup == pytest.approx(1e6 / 1_116_400)
    assert interposed_local_ns(TINY) == {c.name: c.total_ns for c in TINY.syscalls}  # 0 ns overhead
    # A measured per-call cost (validate's micro-benchmark) overrides the profile's own.
    assert interposed_local_ns(TINY, 100.0) == local
