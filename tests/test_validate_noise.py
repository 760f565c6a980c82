"""The measurement-noise floor of a validation: a bootstrap over rounds of each configuration's speedup."""

import numpy as np

from coreplane.validate.predict import measurement_noise, noise_floor


def test_identical_rounds_have_no_noise():
    assert measurement_noise([100.0, 200.0, 300.0], [50.0, 100.0, 150.0]) == 0.0


def test_one_round_has_no_estimate():
    assert measurement_noise([100.0], [90.0]) is None
    assert noise_floor([{"noise": None}]) is None


def test_pairs_stay_together():
    # Each round's native and run moved together (a placement shared by both): no noise in the ratio.
    assert measurement_noise([100.0, 150.0, 90.0, 120.0], [200.0, 300.0, 180.0, 240.0]) == 0.0


def test_bootstrap_tracks_the_true_error_of_the_median():
    # Rounds drawn around a known speedup of 1: the bootstrap's estimate of |measured − true|
    # must be of the same size as the real one (it is slightly below it for small n).
    rng = np.random.default_rng(7)
    for rounds, sigma in ((5, 0.05), (7, 0.02)):
        actual, estimated = [], []
        for _ in range(300):
            natives, runs = np.exp(rng.normal(0, sigma, rounds)), np.exp(rng.normal(0, sigma, rounds))
            actual.append(abs(float(np.median(natives / runs)) - 1.0))
            estimated.append(measurement_noise(list(natives), list(runs), draws=400))
        ratio = np.mean(estimated) / np.mean(actual)
        assert 0.75 < ratio < 1.1, (rounds, sigma, ratio)


def test_floor_is_the_mean_in_percent():
    assert abs(noise_floor([{"noise": 0.02}, {"noise": 0.04}, {"noise": None}, {}]) - 3.0) < 1e-9


def test_rounds_continue_while_asked_and_stop_at_the_most(tmp_path):
    from coreplane.validate import rounds
    from coreplane.validate.commands import MEASURE, RUN_DIR

    def write(wall: int) -> str:
        return f'echo \'{{"wall_ns": {wall}, "user_ns": 0, "sys_ns": 0}}\' > {RUN_DIR}/{MEASURE}'
    cases = [rounds.Case("a", write(1000)), rounds.Case("b", write(2000))]
    asked = []

    def more() -> bool:
        asked.append(len(asked))
        return len(asked) < 3   # two more rounds, then enough

    rounds.run("t", cases, tmp_path / "t", 2, 0, 30.0, False, more=more, max_rounds=10)
    assert {case: sorted(by) for case, by in rounds.walls_by_round(tmp_path / "t").items()} == \
        {"a": [0, 1, 2, 3], "b": [0, 1, 2, 3]}
    rounds.run("u", cases, tmp_path / "u", 2, 0, 30.0, False, more=lambda: True, max_rounds=3)
    assert sorted(rounds.walls_by_round(tmp_path / "u")["a"]) == [0, 1, 2]


def test_until_noise_is_checked():
    import pytest

    from coreplane.core.errors import CoreplaneError
    from coreplane.validate.engine import Options

    with pytest.raises(CoreplaneError, match="--until-noise"):
        Options(until_noise_pct=0.0).check()
    with pytest.raises(CoreplaneError, match="--max-repetitions 3: below --repetitions 5"):
        Options(until_noise_pct=2.0, max_repetitions=3).check()
    Options(repetitions=20).check()   # no --until-noise: the most does not apply
