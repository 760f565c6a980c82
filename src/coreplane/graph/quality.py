"""Quality functions T of a partition: the NetworkedOS paper's equations (1)-(4), and coreplane's critical-path T.

This is the reference implementation (the Rust partitioner computes the same quantities on its hot
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
Eq. (1), model "eq1": T = W_seq + W_par/N + W_c/N. Its optimum on real programs is the set of
connected components: at depth 0 they are all "parallel", so T = W/N whatever their sizes.
Model "critical": a cluster is a process and runs on one core, handling its own messages, so a
depth cannot end before its largest condensed step, nor before its load spread over N cores:
  L_u = W_u + a*S_u,  T = sum over depths d of max(max_{step X at d} L_X, sum_{X at d} L_X / N),
a being the cost of one unit of message weight in units of internal work. With a = 1 and every
depth balanced it is eq. (1), except that a lone cluster's messages count whole, not /N.
Overlapping clusters (instruction replication): node i may also belong to other clusters; an
edge i->j is then internal to every cluster holding both, and a message (i->j, v) exists for
every cluster v holding j but not i, counted at v and at i's home cluster.
"""

from collections import defaultdict
from dataclasses import asdict, dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components


MODELS = ("critical", "eq1")
# a: a message between processes (a pipe or futex hand-off, >= 2 us here, table (a) of
# docs/benchmarks.md) against one dependency inside a process (about one instruction, ~1 ns)
MESSAGE_COST = 1000.0
# packing may raise the critical T by this fraction to need fewer processes: a process is kept
# only when it saves more than 5 % of T
SLACK = 0.05


@dataclass(frozen=True)
class Model:
    """Which T to minimise, for N cores (and, for the critical model, the message cost a)."""

    cores: float
    kind: str = "critical"
    message_cost: float = MESSAGE_COST


@dataclass
class Quality:
    """T and its parts. eq1: W_seq, W_par, W_c of eq. (1)-(4). critical: w_seq is the charge of
    depths whose largest step dominates (the critical path), w_par the load of the other depths
    (charged /N), w_c the sum of S_u (inside the loads); width is the most clusters at one depth."""

    t: float
    w_seq: float
    w_par: float
    w_c: float
    clusters: int
    depths: int
    width: int

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


def quality(src, dst, weight, membership, model: Model, replicas=()) -> Quality:
    """T of `model` for the directed graph src->dst (weights) and a partition.

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
    s_u = np.bincount(e_cl[msg], weights=w[msg], minlength=k) + np.bincount(home_s[e_idx][msg], weights=w[msg], minlength=k)
    w_c = float(s_u.sum())
    depth, comp = cluster_depths(k, home_s[e_idx][msg], e_cl[msg])
    n_depths = int(depth[present].max()) + 1 if len(present) else 0
    width = int(np.bincount(depth[present]).max()) if len(present) else 0
    cores = model.cores
    if model.kind == "eq1":
        at_depth: dict[int, set] = defaultdict(set)
        for c in present.tolist():
            at_depth[int(depth[c])].add(int(comp[c]))
        parallel = np.array([len(at_depth[int(depth[c])]) >= 2 for c in present], dtype=bool)
        w_par = float(w_u[present[parallel]].sum())
        w_seq = float(w_u[present[~parallel]].sum())
        t = w_seq + w_par / cores + w_c / cores
    else:
        load = w_u + model.message_cost * s_u
        steps, step_of = np.unique(comp[present], return_inverse=True)
        step_load = np.bincount(step_of, weights=load[present])
        step_depth = np.zeros(len(steps), dtype=np.int64)
        step_depth[step_of] = depth[present]
        largest = np.zeros(n_depths)
        np.maximum.at(largest, step_depth, step_load)
        total = np.bincount(step_depth, weights=step_load, minlength=n_depths)
        critical = largest >= total / cores
        w_seq, w_par = float(largest[critical].sum()), float(total[~critical].sum())
        t = w_seq + w_par / cores
    return Quality(t=t, w_seq=w_seq, w_par=w_par, w_c=w_c, clusters=len(present), depths=n_depths, width=width)
