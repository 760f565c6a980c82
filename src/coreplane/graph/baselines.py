"""Baseline partitioners on the same layer: METIS (pymetis), KaHIP (kahip) and Leiden (leidenalg)."""

import time

import numpy as np
import scipy.sparse as sp

from coreplane.graph.partition import Partition, evaluate
from coreplane.graph.quality import Model

BASELINES = ("metis", "kahip", "leiden")


def _undirected_csr(n: int, src, dst, weight) -> sp.csr_matrix:
    """Symmetric integer-weighted adjacency without self loops (what METIS and KaHIP accept)."""
    w = np.maximum(1, np.rint(np.asarray(weight, dtype=float))).astype(np.int64)
    m = sp.coo_matrix((w, (src, dst)), shape=(n, n)).tocsr()
    m = (m + m.T).tocsr()
    m.setdiag(0)
    m.eliminate_zeros()
    m.sort_indices()
    return m


def metis(n, src, dst, weight, parts: int, model: Model) -> Partition:
    """k-way METIS with k = parts."""
    import pymetis  # imported on use: the partitioners' libraries take seconds to load
    adj = _undirected_csr(n, src, dst, weight)
    started = time.perf_counter()
    _, membership = pymetis.part_graph(parts, xadj=adj.indptr, adjncy=adj.indices, eweights=adj.data)
    return evaluate("metis", np.asarray(membership), src, dst, weight, model, time.perf_counter() - started)


def kahip_fast(n, src, dst, weight, parts: int, model: Model) -> Partition:
    """KaHIP kaffpa (FAST preset, 3 % imbalance) with k = parts."""
    import kahip
    adj = _undirected_csr(n, src, dst, weight)
    started = time.perf_counter()
    _, membership = kahip.kaffpa([1] * n, adj.indptr.tolist(), adj.data.tolist(), adj.indices.tolist(),
                                 parts, 0.03, True, 1, kahip.FAST)
    return evaluate("kahip", np.asarray(membership), src, dst, weight, model, time.perf_counter() - started)


def leiden(n, src, dst, weight, parts: int, model: Model) -> Partition:
    """Leiden modularity clustering (it chooses the number of clusters itself)."""
    import igraph as ig
    import leidenalg
    adj = _undirected_csr(n, src, dst, weight)
    upper = sp.triu(adj).tocoo()
    g = ig.Graph(n=n, edges=np.stack([upper.row, upper.col], axis=1).tolist(), directed=False)
    started = time.perf_counter()
    part = leidenalg.find_partition(g, leidenalg.ModularityVertexPartition, weights=upper.data.astype(float), seed=1)
    return evaluate("leiden", np.asarray(part.membership), src, dst, weight, model, time.perf_counter() - started)


RUNNERS = {"metis": metis, "kahip": kahip_fast, "leiden": leiden}
