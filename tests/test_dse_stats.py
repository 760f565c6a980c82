"""Statistics of repetitions against hand-computed values and scipy."""

import math

import pytest
from scipy import stats as sps

from coreplane.dse.stats import cv_too_high, describe, welch


def test_describe_matches_hand_values():
    s = describe([1, 2, 3, 4, 5])
    sd = math.sqrt(2.5)
    half = 2.7764451051977987 * sd / math.sqrt(5)      # t(0.975, 4) from tables
    assert (s["n"], s["mean"], s["median"], s["min"], s["max"]) == (5, 3.0, 3.0, 1.0, 5.0)
    assert s["sd"] == pytest.approx(sd)
    assert (s["ci_low"], s["ci_high"]) == pytest.approx((3 - half, 3 + half))
    assert s["cv"] == pytest.approx(sd / 3)


def test_describe_99_percent_interval_is_wider():
    assert describe([10, 12, 11, 13], 0.99)["ci_low"] < describe([10, 12, 11, 13], 0.95)["ci_low"]


def test_single_value_has_no_spread():
    s = describe([4.0])
    assert s["n"] == 1 and s["mean"] == 4.0 and math.isnan(s["sd"]) and math.isnan(s["ci_low"])
    assert not cv_too_high([4.0], 0.01)


def test_cv_flag_threshold():
    assert cv_too_high([1, 11, 1, 11], 0.1)
    assert not cv_too_high([10, 10.1, 9.9], 0.1)
    assert not cv_too_high([1, 11], None)


def test_welch_matches_hand_computation_and_scipy():
    a, b = [1, 2, 3, 4], [2, 4, 6, 8, 10]
    va, vb = 5 / 3 / 4, 10 / 5                         # variance of each mean
    t = (6 - 2.5) / math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 4)  # Welch-Satterthwaite
    r = welch(a, b)
    assert r["t"] == pytest.approx(t) and r["dof"] == pytest.approx(dof)
    assert r["p"] == pytest.approx(2 * sps.t.sf(t, dof))
    assert r["p"] == pytest.approx(sps.ttest_ind(b, a, equal_var=False).pvalue)
