"""The greedy's recursive-bisection flavour (greedy-rb) and the worklist swap refinement: optima on matching grids, compact small jobs, bounded ratios to Scotch."""

import numpy as np
import pytest

from coreplane.graph.topology import parse_spec
from coreplane.map import baselines, families, methods
from coreplane.map.bisection import bisection_map
from coreplane.map.comm import CommGraph
from coreplane.map.experiments import family_rows, family_summary
from coreplane.map.greedy import refine
from coreplane.map.metrics import check_placement
from coreplane.map.patterns import pattern


def test_a_stencil_that_matches_the_mesh_is_mapped_one_hop_per_message():
    topo = parse_spec("mesh:8x8")
    comm = pattern("stencil", 64, 1024.0, (8, 8))
    placement = bisection_map(comm, topo, 1)
    check_placement(comm, topo, placement, 1)
    assert methods.hop_bytes(comm, topo, placement) == comm.weight.sum()


def test_a_small_job_on_a_large_machine_stays_compact():
    # six processes in a ring on 64 cores: a part that fits in one half is not split, so the
    # ring ends up inside one 2x4 quarter-of-a-quarter, not spread proportionally over the mesh
    topo = parse_spec("mesh:8x8")
    n = 6
    ring = CommGraph(names=[str(i) for i in range(n)], src=np.arange(n), dst=(np.arange(n) + 1) % n,
                     weight=np.ones(n))
    placement = bisection_map(ring, topo, 1)
    check_placement(ring, topo, placement, 1)
    assert topo.hops[np.ix_(placement, placement)].max() <= 4


@pytest.mark.parametrize("spec,per_core", [("torus:8x8", 1), ("tree:4,4,4", 2)])
def test_refinement_never_adds_hop_bytes_nor_overfills_a_core(spec, per_core):
    topo = parse_spec(spec)
    for kind in ("regular", "smallworld", "stencil3d"):
        comm = families.generate(kind, topo.n_cores * per_core, 11)
        start = baselines.random_map(comm, topo, per_core, seed=3)
        refined = refine(comm, topo, start, per_core)
        check_placement(comm, topo, refined, per_core)
        assert methods.hop_bytes(comm, topo, refined) < methods.hop_bytes(comm, topo, start)
        again = refine(comm, topo, refined, per_core)  # a local optimum of its own search stays put
        assert methods.hop_bytes(comm, topo, again) <= methods.hop_bytes(comm, topo, refined) + 1e-6


def test_greedy_rb_within_1_2_of_scotch_on_the_small_development_family():
    # the paper's walks alone: up to 1.61x here (3-D stencils and tori, regular graphs)
    rows = family_rows(families.members((16, 64)))
    summary = family_summary(rows)
    assert summary["greedy-rb"]["within_1_2"] == summary["greedy-rb"]["graphs"] == 54, summary["greedy-rb"]
    assert summary["greedy-rb"]["violations"] == 0
