"""The greedy's recursive-bisection flavour (greedy-rb) and the worklist swap refinement: optima on matching grids, compact small jobs, bounded ratios to Scotch."""

import numpy as np
import pytest

from coreplane.graph.topology import parse_spec
from coreplane.map import baselines, families, methods
from coreplane.map.bisection import _bisect, _Buckets, _coarsen, _Halves, _rebalance, _swap_pass, bisection_map
from coreplane.map.comm import CommGraph
from coreplane.map.experiments import family_rows, family_summary
from coreplane.map.greedy import refine
from coreplane.map.metrics import check_placement
from coreplane.map.patterns import pattern


def _part(comm) -> dict[int, list[tuple[int, float]]]:
    """Every process's (partner, bytes) pairs: a whole graph as one part to split."""
    traffic = comm.traffic()
    return {p: list(zip(traffic.indices[traffic.indptr[p]:traffic.indptr[p + 1]].tolist(),
                        traffic.data[traffic.indptr[p]:traffic.indptr[p + 1]].tolist())) for p in range(comm.n)}


def _pulled_geometric(seed: int, n: int):
    """A random geometric graph of n processes as one part, each pulled at random: (rng, procs, inner, pull)."""
    rng = np.random.default_rng(seed)
    comm = families.generate("geometric", n, seed)
    procs = list(range(comm.n))
    return rng, procs, _part(comm), dict(zip(procs, rng.normal(0, 2000, comm.n).tolist()))


@pytest.mark.parametrize("dims", [(8, 8), (16, 8), (16, 16)])
def test_a_stencil_that_matches_the_mesh_is_mapped_one_hop_per_message(dims):
    topo = parse_spec(f"mesh:{dims[0]}x{dims[1]}")
    comm = pattern("stencil", topo.n_cores, 1024.0, dims)
    placement = methods.greedy_rb(comm, topo, 1)
    check_placement(comm, topo, placement, 1)
    assert methods.hop_bytes(comm, topo, placement) == comm.weight.sum()


@pytest.mark.parametrize("dims", [(8, 8), (16, 8)])
def test_the_bisection_alone_comes_close_on_a_matching_stencil(dims):
    # a corner's 2 x 2 block may be split across its rows or across its columns at one cost as the
    # domain representatives see it, so the bisection alone is not always optimal (1.62x on a
    # 16 x 16 mesh: the walks of greedy-rb cover it); within 10 % on these two
    topo = parse_spec(f"mesh:{dims[0]}x{dims[1]}")
    comm = pattern("stencil", topo.n_cores, 1024.0, dims)
    alone = bisection_map(comm, topo, 1)
    check_placement(comm, topo, alone, 1)
    assert methods.hop_bytes(comm, topo, alone) <= 1.1 * comm.weight.sum()


def test_bucket_queue_pops_the_highest_current_gain_and_drops_stale_entries():
    # four processes with no traffic inside the part: each one's gain is its pull
    halves = _Halves([0, 1, 2, 3], {0: 5.0, 1: -3.0, 2: 9.0, 3: 0.0}, {p: [] for p in range(4)}, 1)
    queue = _Buckets(10.0)
    for p in range(4):
        queue.push(p, halves.gain(p))
    halves.pull[2] = -9.0  # 2's gain fell: pushed again under its new gain, its old entry is stale
    queue.push(2, halves.gain(2))
    order = [queue.pop(halves, 1, {3}) for _ in range(4)]  # 3 is locked
    assert order == [0, 1, 2, None]


@pytest.mark.parametrize("seed", range(4))
def test_a_swap_pass_never_raises_the_cost_of_a_split(seed):
    rng, procs, inner, pull = _pulled_geometric(seed, 128)
    halves = _Halves(procs, pull, inner, 2)
    for p in rng.choice(len(procs), 64, replace=False).tolist():
        halves.move(p)
    before = halves.cost()
    improved = _swap_pass(halves)
    assert sum(halves.side[p] == 0 for p in procs) == 64
    assert (halves.cost() < before) if improved else (halves.cost() == pytest.approx(before))


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


@pytest.mark.parametrize("seed", range(3))
def test_a_coarse_split_costs_what_its_projection_costs(seed):
    # heavy-edge matching merges pairs: sizes and pulls add up, and the cost of any split of the
    # coarse graph is the cost of the same split of the processes (edges inside a pair never cut)
    rng, procs, inner, pull = _pulled_geometric(seed, 200)
    size = dict.fromkeys(procs, 1)
    cprocs, csize, cpull, cinner, merged = _coarsen(procs, size, pull, inner)
    assert len(cprocs) <= 0.9 * len(procs) and sum(csize.values()) == len(procs)
    assert sorted(p for c in cprocs for p in merged[c]) == procs
    assert sum(cpull.values()) == pytest.approx(sum(pull.values()))
    coarse, fine = _Halves(cprocs, cpull, cinner, 3, csize), _Halves(procs, pull, inner, 3, size)
    for c in rng.choice(cprocs, len(cprocs) // 2, replace=False).tolist():
        coarse.move(c)
        for p in merged[c]:
            fine.move(p)
    assert coarse.held() == fine.held()
    assert coarse.cost() == pytest.approx(fine.cost())


def test_rebalancing_brings_half_0_to_exactly_what_is_wanted():
    comm = families.generate("regular", 100, 5)
    procs, inner = list(range(comm.n)), _part(comm)
    halves = _Halves(procs, dict.fromkeys(procs, 0.0), inner, 1)
    for p in procs[:70]:
        halves.move(p)
    _rebalance(halves, 50)
    assert halves.held() == 50
    _rebalance(halves, 61)
    assert halves.held() == 61


def test_the_multilevel_split_of_a_3d_stencil_is_exact_and_cuts_little():
    # an 8x8x4 stencil halved: the plane across its long side cuts 32 pairs; grown on the fine graph
    # alone (session 8) the split found it on 7 of these 20 seeds, mean 42.9 pairs, worst 59
    cuts = []
    for seed in range(20):
        comm = families.generate("stencil3d", 256, seed)
        procs, inner = list(range(comm.n)), _part(comm)
        halves = _bisect(procs, dict.fromkeys(procs, 1), dict.fromkeys(procs, 0.0), inner, 1, 128, 2)
        assert halves.held() == 128
        cuts.append(sum(1 for p in procs if halves.side[p] == 0 for q, _ in inner[p] if halves.side[q] == 1))
    assert cuts.count(32) >= 10 and np.mean(cuts) <= 40 and max(cuts) <= 52, cuts


def test_greedy_rb_within_1_2_of_scotch_on_3d_stencils_folded_onto_other_shapes():
    # the development side's 3-D stencils on non-square tori and meshes (families.stencil3d_members):
    # before the multilevel split, 1.26x on stencil3d-256@torus:32x8 (seed 20001)
    ratios = {}
    for m in (m for m in families.stencil3d_members() if m.processes <= 256):
        comm, topo = m.graph(), parse_spec(m.topology)
        placement = methods.greedy_rb(comm, topo, m.capacity)
        check_placement(comm, topo, placement, m.capacity)
        scotch = methods.hop_bytes(comm, topo, methods.scotch_valid(comm, topo, m.capacity))
        ratios[(m.name, m.seed)] = methods.hop_bytes(comm, topo, placement) / scotch
    assert len(ratios) == 24 and max(ratios.values()) <= 1.2, max(ratios.items(), key=lambda kv: kv[1])
