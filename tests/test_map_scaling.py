"""The scaling measure of greedy-rb and greedy-ml: the fit that tells P log P from P log^2 P, and one small run of each."""

import json

import numpy as np

from coreplane.map import scaling


def test_the_fit_is_flat_for_the_shape_the_times_follow_and_not_for_another():
    rows = [{"kind": "k", "processes": p, "cpu_s": 3e-6 * p * np.log2(p)} for p in (256, 1024, 4096)]
    fit = scaling.fit(rows)["k"]
    assert fit["p_log_p"]["t_over_fit"] == [1.0, 1.0, 1.0]
    assert fit["p_log_p"]["c"] == 3e-6
    falling = fit["p_log2_p"]["t_over_fit"]
    assert falling[0] > 1.0 > falling[-1]  # times that grow as P log P fall against P log^2 P
    assert 1.0 < fit["slope"] < 1.2


def test_a_small_run_writes_every_kind_and_its_parts(tmp_path):
    out = tmp_path / "s.json"
    scaling.main(out=out, repetitions=1, sizes="256,512", method="greedy-rb")
    doc = json.loads(out.read_text())
    assert {(r["kind"], r["processes"]) for r in doc["rows"]} == {(k, p) for k in scaling.KINDS for p in (256, 512)}
    assert all(r["cpu_s"] > 0 and r["walks_cpu_s"] > 0 and r["bisection_cpu_s"] > 0 for r in doc["rows"])
    assert set(doc["fit_cpu"]) == set(scaling.KINDS) and len(doc["tables"]) == 2


def test_a_greedy_ml_run_times_scotch_beside_it(tmp_path):
    out = tmp_path / "ml.json"
    scaling.main(out=out, repetitions=1, sizes="256", method="greedy-ml")
    doc = json.loads(out.read_text())
    assert doc["method"] == "greedy-ml" and len(doc["rows"]) == len(scaling.KINDS)
    for row in doc["rows"]:
        assert row["cpu_s"] > 0 and row["scotch_wall_s"] > 0 and "walks_cpu_s" not in row
        assert 0 < row["vs_scotch_hop_bytes"] < 1.2  # the goal's bound, on these bounded-degree graphs
