"""Quality T (eq. 1-4) by hand, the native partitioner against the reference T and a brute force."""

import itertools

import numpy as np
import pytest

from coreplane.graph.partition import greedy_partition
from coreplane.graph.quality import quality


def test_t_by_hand_chain_and_pair():
    # a->b->c (w 1 each), d->e (w 2); clusters {a,b} {c} {d,e}; N = 2.
    # W_ab = 1, W_c = 0, W_de = 2; one cut edge b->c of weight 1 -> W_c = S_ab + S_c = 1 + 1 = 2.
    # Cluster graph {ab}->{c}: depth 0 holds {ab} and {de} (parallel), depth 1 holds {c} alone.
    # W_seq = W_c(cluster) = 0, W_par = 1 + 2 = 3 -> T = 0 + 3/2 + 2/2 = 2.5
    q = quality([0, 1, 3], [1, 2, 4], [1, 1, 2], [0, 0, 1, 2, 2], cores=2)
    assert (q.w_seq, q.w_par, q.w_c, q.t) == (0.0, 3.0, 2.0, 2.5)
    # everything in one cluster: alone at depth 0 -> sequential: T = W = 4
    assert quality([0, 1, 3], [1, 2, 4], [1, 1, 2], [0] * 5, cores=2).t == 4.0


def test_t_by_hand_cycle_is_one_step():
    # a<->b (w 1 each way) in two clusters, {c,d} with c->d (w 3). The cycle {a},{b} is condensed
    # into one step at depth 0, which {c,d} shares: all clusters parallel.
    # W_par = 0 + 0 + 3 = 3; W_c = 2 cut edges x 2 ends = 4; N = 2 -> T = 3/2 + 4/2 = 3.5
    q = quality([0, 1, 2], [1, 0, 3], [1, 1, 3], [0, 1, 2, 2], cores=2)
    assert (q.w_seq, q.w_par, q.w_c, q.t, q.depths) == (0.0, 3.0, 4.0, 3.5, 1)


def test_t_by_hand_overlap():
    # s->a, s->b (w 1); clusters U = {s, a}, V = {b}; N = 2.
    # Disjoint: W_U = 1, cut s->b -> W_c = 2, U->V makes V depth 1: both alone -> T = 1 + 0 + 2/2 = 2.
    # s replicated into V: s->b internal to V (W_V = 1), no message, both at depth 0 -> T = (1+1)/2 = 1.
    assert quality([0, 0], [1, 2], [1, 1], [0, 0, 1], cores=2).t == 2.0
    q = quality([0, 0], [1, 2], [1, 1], [0, 0, 1], cores=2, replicas=[(0, 1)])
    assert (q.w_par, q.w_c, q.t) == (2.0, 0.0, 1.0)


def set_partitions(n):
    """Every partition of range(n) as a membership list (restricted growth strings)."""
    def grow(prefix, top):
        if len(prefix) == n:
            yield list(prefix)
            return
        for c in range(top + 2):
            yield from grow(prefix + [c], max(top, c))
    yield from grow([0], 0)


def random_dag(n, seed):
    rng = np.random.default_rng(seed)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.35]
    src = np.array([p[0] for p in pairs])
    dst = np.array([p[1] for p in pairs])
    return src, dst, rng.integers(1, 5, len(pairs)).astype(float)


@pytest.mark.parametrize("n,seed,cores", [(6, 1, 2), (7, 2, 4), (8, 3, 2), (8, 4, 8), (8, 5, 3)])
def test_greedy_reaches_brute_force_optimum(n, seed, cores):
    src, dst, w = random_dag(n, seed)
    best = min(quality(src, dst, w, m, cores).t for m in set_partitions(n))
    got = greedy_partition(n, src, dst, w, cores, seed=1, restarts=20, overlap=False)
    # the native T must be the reference T of the membership it returns
    assert got.quality.t == pytest.approx(quality(src, dst, w, got.membership, cores).t)
    assert got.quality.t == pytest.approx(best)


def test_overlap_never_worse_and_consistent():
    src, dst, w = random_dag(8, 7)
    plain = greedy_partition(8, src, dst, w, 4, restarts=5, overlap=False)
    over = greedy_partition(8, src, dst, w, 4, restarts=5, overlap=True)
    assert over.quality.t <= plain.quality.t + 1e-9
    assert over.quality.t == pytest.approx(quality(src, dst, w, over.membership, 4, over.replicas).t)


def test_native_and_reference_agree_on_a_larger_graph():
    rng = np.random.default_rng(11)
    n = 3000
    src = rng.integers(0, n - 1, 9000)
    dst = np.minimum(n - 1, src + rng.integers(1, 40, 9000))
    w = rng.integers(1, 3, 9000).astype(float)
    got = greedy_partition(n, src, dst, w, 16)
    ref = quality(src, dst, w, got.membership, 16, got.replicas)
    assert got.quality.t == pytest.approx(ref.t)
    assert got.quality.t < quality(src, dst, w, np.arange(n), 16).t  # better than the singletons it starts from
