"""Topologies (layer 3): specs, hop counts, XY routes, the host tree; malformed specs rejected."""

import pytest

from conftest import run_cli
from coreplane.core.errors import CoreplaneError
from coreplane.graph.topology import host_topology, parse_spec


@pytest.mark.parametrize("spec", ["mesh:8x", "mesh:0x4", "mesh:3x3x3", "torus:4", "tree:", "tree:2,,4",
                                  "tree:2,-1", "ring:8", "mesh", "mesh:axb", "torus:100x100", ""])
def test_malformed_specs_are_one_line_errors(spec):
    with pytest.raises(CoreplaneError, match=f"topology '{spec}'"):
        parse_spec(spec)


def test_cli_rejects_a_malformed_spec_with_one_line():
    proc = run_cli("map", "pattern:ring", "--topology", "mesh:8x")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("coreplane: error: topology 'mesh:8x'")


def test_mesh_hops_and_xy_route():
    t = parse_spec("mesh:8x16")
    assert t.n_cores == 128
    a, b = 0 * 8 + 1, 5 * 8 + 6  # (1,0) -> (6,5)
    route = t.route(a, b)
    assert len(route) == t.hops[a, b] == 10
    # XY: all of x first, then y
    assert [v - u for u, v in route] == [1] * 5 + [8] * 5


def test_torus_wraps_the_short_way():
    t = parse_spec("torus:4x4")
    assert t.hops[0, 3] == 1 and t.hops[0, 15] == 2
    assert t.route(0, 3) == [(0, 3)]


def test_tree_hops_climb_to_the_common_switch():
    t = parse_spec("tree:2,4,8")
    assert t.n_cores == 64
    assert t.hops[0, 1] == 2  # same leaf switch
    assert t.hops[0, 8] == 4  # same middle switch
    assert t.hops[0, 63] == 6  # through the root
    assert len(t.route(0, 63)) == 6


def test_host_tree_from_sysfs(tmp_path):
    # a captured 4-CPU host: 2 cores x 2 SMT threads sharing one L3
    for cpu, core in ((0, 0), (1, 1), (2, 0), (3, 1)):
        topo = tmp_path / f"sys/devices/system/cpu/cpu{cpu}/topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text("0\n")
        (topo / "core_id").write_text(f"{core}\n")
        cache = tmp_path / f"sys/devices/system/cpu/cpu{cpu}/cache/index3"
        cache.mkdir(parents=True)
        (cache / "level").write_text("3\n")
        (cache / "shared_cpu_list").write_text("0-3\n")
    (tmp_path / "sys/devices/system/cpu/online").write_text("0-3\n")
    t = host_topology(str(tmp_path))
    assert t.cpu_ids == [0, 1, 2, 3]
    assert t.hops[0, 2] == 2  # SMT siblings share a core
    assert t.hops[0, 1] == 4  # different cores, same L3


@pytest.mark.parametrize("spec", ["mesh:7x5", "torus:7x5", "torus:8x4", "torus:2x3", "mesh:1x6", "tree:2,3,4"])
def test_closed_form_distances_and_rings_are_the_hop_table(spec):
    # the mapping methods read distances, rings and row sums in closed form (O(C) tables); each
    # must be what the C x C table says
    import networkx as nx
    import numpy as np

    t = parse_spec(spec)
    every = np.arange(t.n_cores)
    table = t.distance(every[:, None], every[None, :])
    # the reference is independent of distance(): shortest paths over the topology's links
    links = nx.Graph(t.links())
    lengths = dict(nx.all_pairs_shortest_path_length(links))
    assert np.array_equal(table, [[lengths[a][b] for b in every] for a in every])
    assert np.array_equal(table, t.hops) and table.max() == t.max_distance
    assert all(t.hop(a, b) == table[a, b] for a in range(t.n_cores) for b in range(t.n_cores))
    assert np.array_equal(t.total_hops, table.sum(axis=1))
    for c in range(t.n_cores):
        rings = [t.ring(c, d) for d in range(t.max_distance + 2)]
        assert [x for ring in rings for x in ring] == np.argsort(table[c], kind="stable").tolist()
        assert rings[-1] == []


def test_a_large_machine_is_mapped_without_its_hop_table():
    # 4,096 cores: greedy-rb reads distances in closed form; the C x C table (64 MB) is never built
    from coreplane.map import families, methods

    t = parse_spec("mesh:64x64")
    comm = families.generate("stencil2d", 256, 3)
    placement = methods.greedy_rb(comm, t, 1)
    assert len(set(placement.tolist())) == 256
    assert "hops" not in t.__dict__
