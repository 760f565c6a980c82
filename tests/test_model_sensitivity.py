"""Sensitivity sweeps over γ, f_c and the share (paper 002 Fig. 4, 5, 7, 8, 9): values and figures."""

import numpy as np
import pytest

from conftest import REPO
from coreplane.model import sensitivity
from coreplane.model.policies import Policy
from coreplane.model.refined import refined
from coreplane.profile import io as profiles

FIXTURES = REPO / "tests" / "fixtures" / "profiles"
BZIP2 = profiles.load(FIXTURES / "bzip2.json")


def test_sweep_matches_the_model_pointwise():
    pol = Policy("min-frequency", 0.9)
    grid = sensitivity.sweep(BZIP2, pol, sensitivity.GAMMAS[:, None], sensitivity.FC_NS[None, :])
    assert grid.shape == (sensitivity.GAMMAS.size, sensitivity.FC_NS.size)
    for i, j in ((0, 0), (10, 30), (45, 60)):
        expected = refined(BZIP2, sensitivity.GAMMAS[i], sensitivity.FC_NS[j], pol).speedup
        assert grid[i, j] == pytest.approx(expected)


def test_share_sweep_falls_as_more_is_delegated():
    # Fig. 7/8: with a cost per call, delegating a larger share (least frequent first) never helps.
    s = sensitivity.sweep_share(BZIP2, "min-frequency", 2.0, np.array([10_000.0]))[:, 0]
    assert s.shape == sensitivity.SHARES.shape
    assert np.all(np.diff(s) <= 1e-12) and s[0] == pytest.approx(refined(BZIP2, 2.0, 0, Policy("none")).speedup)
    # bzip2's skew: the steepest drop comes when read and write (the last 10 %) are delegated.
    drops = -np.diff(s)
    assert drops.argmax() >= len(drops) - 2


def test_draw_all(tmp_path):
    profs = [BZIP2, profiles.load(FIXTURES / "gcc.json")]
    done = []
    paths = sensitivity.draw_all(profs, tmp_path, 2.0, 10_000.0, 0.9, progress=lambda d, t, n: done.append((d, t)))
    assert len(paths) == 6 and all(p.stat().st_size > 20_000 for p in paths)
    assert done == [(i, 6) for i in range(1, 7)]
