"""The quality function T = W_seq + W_par/N + W_c/N of the NetworkedOS paper (eq. 1-4), for any partition.

This is the reference implementation (the Rust partitioner computes the same quantity on its hot
path; tests check that both agree). Definitions, for clusters u of the application layer:
  W_u   sum of w_ij over edges i->j with i and j both in u (eq. 2-3's W_u);
  d_u   depth of u: the longest path to u in the cluster graph (an edge u->v for every message
        from u to v) from a cluster without predecessors; clusters on a common cycle are
        condensed into one step, since they wait on each other;
  W_seq sum of W_u over clusters that are alone at their depth (eq. 2);
  W_par sum of W_u over clusters sharing their depth with a cluster of another condensed
        component (eq. 3);
  W_c   sum over u of S_u, the weight of edges with one end in u (eq. 4), i.e. every message
        counted at its sender and at its receiver;
  N     the number of available cores.
Overlapping clusters (instruction replication): node i may also belong to other clusters; an
edge i->j is then internal to every cluster holding both, and a message (i->j, v) exists for
every cluster v holding j but not i, counted at v and at i's home cluster.
"""

from collections import defaultdict
from dataclasses import asdict, dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components


@dataclass
class Quality:
    t: float
    w_seq: float
    w_par: float
    w_c: float
    clusters: int
    depths: int

    def as_dict(self) -> dict:
        return asdict(self)


def cluster_depths(k: int, qsrc: np.ndarray, qdst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(depth, component) of clusters 0..k-1 given cluster-graph edges qsrc->qdst."""
    graph = sp.coo_matrix((np.ones(len(qsrc)), (qsrc, qdst)), shape=(k, k)).tocsr()
    ncomp, comp = connected_components(graph, directed=True, connection="strong")
    cs, cd = comp[qsrc], comp[qdst]
    keep = cs != cd
    pairs = np.unique(np.stack([cs[keep], cd[keep]], axis=1), axis=0) if keep.any() else np.zeros((0, 2), int)
    succ: dict[int, list[int]] = defaultdict(list)
    indeg = np.zeros(ncomp, dtype=np.int64)
    for a, b in pairs.tolist():
        succ[a].append(b)
        indeg[b] += 1
    depth = np.zeros(ncomp, dtype=np.int64)
    ready = list(np.flatnonzero(indeg == 0))
    while ready:  # Kahn's order: a component's depth is final when it becomes ready
        a = ready.pop()
        for b in succ.get(a, ()):
            depth[b] = max(depth[b], depth[a] + 1)
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    return depth[comp], comp


def quality(src, dst, weight, membership, cores: float, replicas=()) -> Quality:
    """T of eq. (1) for the directed graph src->dst (weights) and a partition.

    membership[i] is node i's home cluster; replicas is an iterable of (node, cluster) extra
    memberships (overlapping clusters).
    """
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    weight, membership = np.asarray(weight, dtype=float), np.asarray(membership, dtype=np.int64)
    present = np.unique(membership)
    k = int(membership.max()) + 1 if len(membership) else 0
    home_s, home_d = membership[src], membership[dst]
    # consumer copies: (edge e, cluster v) for v = home of dst and every replica of dst
    rep = defaultdict(set)
    for node, cluster in replicas:
        rep[int(node)].add(int(cluster))
    e_idx, e_cl = [np.arange(len(src))], [home_d]
    if rep:
        extra = [(e, c) for e, j in enumerate(dst.tolist()) if j in rep for c in rep[j]]
        if extra:
            e_idx.append(np.array([e for e, _ in extra]))
            e_cl.append(np.array([c for _, c in extra]))
    e_idx, e_cl = np.concatenate(e_idx), np.concatenate(e_cl)
    inside = home_s[e_idx] == e_cl
    if rep:
        i_nodes = src[e_idx]
        inside |= np.array([c in rep.get(i, ()) for i, c in zip(i_nodes.tolist(), e_cl.tolist())], dtype=bool)
    w = weight[e_idx]
    w_u = np.bincount(e_cl[inside], weights=w[inside], minlength=k)
    msg = ~inside
    w_c = 2.0 * float(w[msg].sum())
    depth, comp = cluster_depths(k, home_s[e_idx][msg], e_cl[msg])
    at_depth: dict[int, set] = defaultdict(set)
    for c in present.tolist():
        at_depth[int(depth[c])].add(int(comp[c]))
    parallel = np.array([len(at_depth[int(depth[c])]) >= 2 for c in range(k)], dtype=bool)
    used = np.zeros(k, dtype=bool)
    used[present] = True
    w_par = float(w_u[parallel & used].sum())
    w_seq = float(w_u[~parallel & used].sum())
    return Quality(t=w_seq + w_par / cores + w_c / cores, w_seq=w_seq, w_par=w_par, w_c=w_c,
                   clusters=len(present), depths=len(at_depth))
