"""The paired gain of a mapping with its bootstrap interval (experiments.paired_gain)."""

import pytest

from coreplane.map.experiments import paired_gain


def test_a_constant_gain_has_a_point_interval():
    g = paired_gain([2.0] * 10, [1.0] * 10)
    assert g["median_ratio"] == 2.0 and g["ci95"] == [2.0, 2.0] and g["treated_won"] == 10


def test_noise_widens_the_interval_and_one_outlier_moves_the_median_little():
    baseline = [1.0, 1.2, 0.9, 1.1, 1.0, 1.3, 0.8, 1.0, 1.1, 30.0]  # one run stalled behind another job
    treated = [1.0] * 10
    g = paired_gain(baseline, treated)
    assert g["median_ratio"] == pytest.approx(1.05)
    assert g["ci95"][0] < 1.0 < g["ci95"][1]  # no gain that the noise cannot explain
    assert g["treated_won"] == 5 and g == paired_gain(baseline, treated)  # seeded: reproducible
