"""The arbiter's experiments as DSE sweeps (issue 14 item 4): every sweep's command is one the
CLI accepts, and a real (short) sweep stores its runs, checks the goals, draws its figure and
is continued, not repeated, with --resume."""

import os
import shlex

import pytest

from machine_lock import machine_lock

from coreplane.arbexp import experiments
from coreplane.arbiter.cli import app
from coreplane.core.errors import CoreplaneError


@pytest.mark.parametrize("name", list(experiments.EXPERIMENTS))
def test_each_sweep_command_is_one_the_cli_accepts(name):
    """Every point's command parses (its options exist), so no sweep fails on its first run."""
    spec = experiments.spec(name, repetitions=2, short=True)
    e = experiments.EXPERIMENTS[name]
    assert spec.repetitions == 2 and set(spec.parameters) == set(e["parameters"])
    values = {k: v[0] for k, v in {**e["parameters"], **e["short"]}.items()}
    for key, options in e["parameters"].items():
        for value in options:
            argv = shlex.split(e["command"].format(**{**values, key: value}))
            assert argv[1:3] == ["arbiter", {"table1": "tables"}.get(name, name)]
            parsed = app(argv[2:] + ["--help"], standalone_mode=False)   # parses every option, then --help exits
            assert parsed == 0


def test_an_unknown_experiment_is_one_line_error(tmp_path):
    with pytest.raises(CoreplaneError, match="no experiment 'fig7'"):
        experiments.run("fig7", 1, tmp_path / "x", None)


@pytest.mark.skipif(os.geteuid() != 0 or (os.cpu_count() or 1) < 2, reason="needs root, a cpuset hierarchy and two CPUs")
def test_table1_sweep_runs_checks_its_goals_draws_and_resumes(tmp_path):
    out, figures = tmp_path / "sweep", tmp_path / "figures"
    with machine_lock():
        doc = experiments.run("table1", 1, out, figures, short=True, progress=False)
        assert doc["runs"]["ok"] == 2                       # fifo 0 and 10, one run each
        assert set(doc["goals"]) == {"fifo 0", "fifo 10"}
        assert all(g["us"] > 0 for point in doc["goals"].values() for g in point.values())
        assert (figures / "arbiter-experiment-table1.png").stat().st_size > 10_000
        again = experiments.run("table1", 1, out, None, short=True, resume=True, progress=False)
    assert again["runs"]["this_invocation"]["ran"] == 0 and again["runs"]["this_invocation"]["kept_from_before"] == 2
    with pytest.raises(CoreplaneError, match="already holds a sweep"):
        experiments.run("table1", 1, out, None, short=True, progress=False)
