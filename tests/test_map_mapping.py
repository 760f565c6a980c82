"""Mapping invariants for every method, the greedy on patterns with known optima, metrics by hand."""

import json

import numpy as np
import pytest

from conftest import cli_json, run_cli
from coreplane.core.errors import CoreplaneError
from coreplane.graph.topology import parse_spec
from coreplane.map import mapfile, methods
from coreplane.map.cli import traffic_by_key
from coreplane.map.comm import CommGraph
from coreplane.map.metrics import evaluate
from coreplane.map.patterns import PATTERNS, pattern


@pytest.mark.parametrize("spec", ["mesh:4x4", "torus:4x4", "tree:2,2,4"])
@pytest.mark.parametrize("per_core", [1, 2])
def test_every_process_placed_and_capacity_respected(spec, per_core):
    topo = parse_spec(spec)
    for name in PATTERNS:
        comm = pattern(name, topo.n_cores * per_core)
        for method in methods.METHODS:
            r = methods.run(method, comm, topo, per_core)
            p = r["placement"]
            assert len(p) == comm.n and p.min() >= 0 and p.max() < topo.n_cores, (method, name)
            if method != "scotch":  # Scotch balances within a tolerance; run() reports any overflow
                assert r["violation"] is None, (method, name, r["violation"])
                assert np.bincount(p, minlength=topo.n_cores).max() <= per_core


@pytest.mark.parametrize("name,optimum_hops", [("ring", 64 * 2), ("stencil", 2 * 2 * 8 * 7), ("masterworker", None)])
def test_greedy_is_optimal_on_simple_patterns(name, optimum_hops):
    topo = parse_spec("mesh:8x8")
    comm = pattern(name, 64, message_bytes=1.0, grid=(8, 8))
    got = evaluate(comm, topo, methods.METHODS["greedy"](comm, topo, 1))["hop_bytes"]
    if optimum_hops is None:  # master in the centre: workers at distance 1 (4), 2 (8), ... summed, both ways
        optimum_hops = 2 * np.sort(topo.hops[topo.center])[1:].sum()
    assert got == optimum_hops


def test_metrics_by_hand():
    # mesh 3x1, 100 bytes from core 0 to core 2: 2 hops -> hop-bytes 200, links (0,1) (1,2) carry 100.
    # latency: (H+1)*3 + H*1 + (64/16 - 1) = 9 + 2 + 3 = 14 cycles; energy 800 bits * (3*1.0 + 2*0.4) pJ = 3.04 nJ
    comm = CommGraph(names=["a", "b"], src=[0], dst=[1], weight=[100.0])
    m = evaluate(comm, parse_spec("mesh:3x1"), np.array([0, 2]))
    assert m["hop_bytes"] == 200 and m["max_link_load"] == 100 and m["links_used"] == 2
    assert m["avg_packet_latency_cycles"] == 14 and m["energy_nj"] == pytest.approx(3.04)
    same = evaluate(comm, parse_spec("mesh:3x1"), np.array([1, 1]))
    assert same["hop_bytes"] == 0 and same["energy_nj"] == 0


def test_greedy_puts_memory_sharers_together_when_eq1_says_so():
    # two processes sharing 1 MiB and exchanging nothing else, light loads: same core wins
    comm = CommGraph(names=["a", "b"], src=[], dst=[], weight=[], load=[10.0, 10.0],
                     shared_src=np.array([0]), shared_dst=np.array([1]), shared_weight=np.array([2.0**20]))
    topo = parse_spec("mesh:2x2")
    p = methods.METHODS["greedy"](comm, topo, 2)
    assert p[0] == p[1]
    # heavy loads, little sharing: apart
    comm.load[:] = 1e9
    comm.shared_weight[:] = 64
    p = methods.METHODS["greedy"](comm, topo, 2)
    assert p[0] != p[1]


def test_map_cli_writes_a_mapping_file_run_can_apply(tmp_path):
    out = tmp_path / "m.json"
    doc = cli_json("map", "pattern:butterfly:16", "--topology", "mesh:4x4", "--method", "greedy,scotch", "--out", str(out))
    assert [r["method"] for r in doc["results"]] == ["greedy", "scotch"]
    cpus = mapfile.cpu_lists(out)
    assert len(cpus) == 16 and all(len(c) == 1 for c in cpus.values())
    assert sorted(c[0] for c in cpus.values()) == list(range(16))
    # a pattern carries no proposed thread count: {threads} in the arguments is then an error
    assert mapfile.with_threads(out, ["xz", "-T2"]) == ["xz", "-T2"]
    with pytest.raises(CoreplaneError, match=r"m.json: field 'threads' is None"):
        mapfile.with_threads(out, ["xz", "-T{threads}"])


def test_a_graphs_traffic_is_written_by_clone_tree_key_for_the_run_time_mapper():
    # a -> b twice and b -> a once add up into one pair; c talks to nobody and is in no pair
    comm = CommGraph(names=["0 sh", "0.0 seq", "0.1 gzip"], keys=["0", "0.0", "0.1"], src=[1, 1, 2],
                     dst=[2, 2, 1], weight=[1000.0, 500.0, 24.0])
    assert traffic_by_key(comm) == [{"a": "0.0", "b": "0.1", "bytes": 1524}]


def test_malformed_mapping_file_rejected(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "coreplane-map/1", "placement": [{"task": "0", "cpus": []}]}))
    with pytest.raises(CoreplaneError, match=r"placement\[0\]"):
        mapfile.cpu_lists(bad)
    bad.write_text("{")
    with pytest.raises(CoreplaneError, match="line 1"):
        mapfile.cpu_lists(bad)


def test_unknown_pattern_and_method_are_errors():
    assert "pattern:NAME" in run_cli("map", "pattern:spiral", "-t", "mesh:4x4").stderr
    assert "--method bogus" in run_cli("map", "pattern:ring", "-t", "mesh:4x4", "-m", "bogus").stderr
