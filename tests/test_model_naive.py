"""The naive model (paper 002 eq. 3): hand-computed vectors and its limits."""

import numpy as np
import pytest

from conftest import REPO
from coreplane.model.naive import naive, naive_speedup
from coreplane.profile import io as profiles

FIXTURES = REPO / "tests" / "fixtures" / "profiles"


@pytest.mark.parametrize("p,gamma,expected", [
    (0.2, 2.0, 1 / (0.2 + 0.8 / 2)),      # 1 / 0.6 = 1.6667
    (0.5, 4.0, 1 / (0.5 + 0.5 / 4)),      # 1 / 0.625 = 1.6
    (0.0, 3.0, 3.0),                      # no system share: the whole gain
    (1.0, 10.0, 1.0),                     # system only: nothing to gain
    (0.0374, 1.04, 1 / (0.0374 + 0.9626 / 1.04)),  # bzip2 of Table 1 at the estimated γ: 1.0385
])
def test_eq3_by_hand(p, gamma, expected):
    assert naive_speedup(p, gamma) == pytest.approx(expected)


def test_bound_is_one_over_p():
    # As γ → ∞, S_n → 1/p (Amdahl-like bound of §3.1).
    assert naive_speedup(0.25, 1e12) == pytest.approx(4.0)


def test_vectorised_over_gamma():
    s = naive_speedup(0.1, np.array([1.0, 2.0, 4.0]))
    assert s.shape == (3,) and np.all(np.diff(s) > 0) and s[0] == pytest.approx(1.0)


def test_profile_projection_by_hand():
    res = naive(profiles.load(FIXTURES / "tiny.json"), 2.0)
    # p = 0.2 → S_n = 1/0.6; projected time = 1 ms × 0.6 = 600 µs
    assert res.p == pytest.approx(0.2)
    assert res.speedup == pytest.approx(5 / 3)
    assert res.time_ns == pytest.approx(600_000)
