"""Multilevel greedy mapping (greedy-ml) in time linear in P + E: the machine's halves are taken coarse to fine, each part split on the coarsest copy of the process graph (heavy-edge matching) where it still has a few hundred vertices."""

import numpy as np
import scipy.sparse as sp

from coreplane.graph.topology import Topology
from coreplane.map.bisection import SWAP_PASSES, _cores, _domains, _rep, _split, share
from coreplane.map.comm import CommGraph

SPLIT_VERTICES = 256  # a part is split on the coarsest level where it has at least this many vertices (the
# resolution of a split: 128 left a 3-D stencil at 1.24x Scotch, stencil3d-256@mesh:16x16; 32 at 1.39x)
SHRINK = 0.9  # a matching that keeps more than this share of the vertices ends the levels (a star)
REPAIR_RADIUS = 4  # rings searched around a full core for room before the whole machine is


class _Levels:
    """The process graph coarsened by heavy-edge matching, level 0 the processes themselves: per
    level, each vertex's partners and bytes (Python lists, as _split reads them), the processes it
    stands for (size), its vertex one level up (parent) and its vertices one level down
    (children). A matching visits the vertices lightest first (so sizes stay even) and pairs each
    with its unmatched partner of heaviest edge; the coarse edges are the sums (a sparse product).
    Each level costs O(n_l + E_l) and the levels shrink by a factor (they stop when one would keep
    more than SHRINK of the vertices), so all of them cost O(P + E)."""

    def __init__(self, traffic: sp.csr_matrix):
        self.nbrs, self.wts, self.size, self.parent, self.children = [], [], [], [], []
        matrix, size = traffic, np.ones(traffic.shape[0], dtype=np.int64)
        while True:
            self._add(matrix, size)
            if matrix.shape[0] <= 2:
                break
            parent, n = _matching(matrix, size)
            if n > SHRINK * matrix.shape[0]:
                break
            merge = sp.csr_matrix((np.ones(len(parent)), (np.arange(len(parent)), parent)), shape=(len(parent), n))
            matrix = (merge.T @ matrix @ merge).tocsr()
            matrix.setdiag(0)
            matrix.eliminate_zeros()
            size = np.bincount(parent, weights=size, minlength=n).astype(np.int64)
            self.parent.append(parent.tolist())
            order = np.argsort(parent, kind="stable")
            bounds = np.searchsorted(parent[order], np.arange(n + 1))
            self.children.append([order[bounds[v]:bounds[v + 1]].tolist() for v in range(n)])
        self.parent.append([-1] * matrix.shape[0])  # the coarsest level has no level above

    def _add(self, matrix: sp.csr_matrix, size: np.ndarray) -> None:
        ptr, idx, data = matrix.indptr.tolist(), matrix.indices.tolist(), matrix.data.tolist()
        self.nbrs.append([idx[ptr[v]:ptr[v + 1]] for v in range(matrix.shape[0])])
        self.wts.append([data[ptr[v]:ptr[v + 1]] for v in range(matrix.shape[0])])
        self.size.append(size.tolist())

    @property
    def top(self) -> int:
        return len(self.size) - 1

    def below(self, level: int, verts: list[int]) -> list[int]:
        """The vertices one level down that `verts` stand for."""
        kids = self.children[level - 1]
        return [c for v in verts for c in kids[v]]


def _matching(matrix: sp.csr_matrix, size: np.ndarray) -> tuple[np.ndarray, int]:
    """Heavy-edge matching: each vertex's coarse vertex (numbered in order of first member) and
    how many there are."""
    ptr, idx, data = matrix.indptr.tolist(), matrix.indices.tolist(), matrix.data.tolist()
    n = matrix.shape[0]
    mate = [-1] * n
    for v in np.argsort(size, kind="stable").tolist():
        if mate[v] >= 0:
            continue
        best, best_w = v, 0.0
        for k in range(ptr[v], ptr[v + 1]):
            u = idx[k]
            if mate[u] < 0 and u != v and data[k] > best_w:
                best, best_w = u, data[k]
        mate[v], mate[best] = best, v
    parent, count = [-1] * n, 0
    for v in range(n):
        if parent[v] < 0:
            parent[v] = parent[mate[v]] = count
            count += 1
    return np.array(parent, dtype=np.int64), count


class _Fresh:
    """What is known of a vertex of one level: its own entry if it was ever in a part at this
    level, else its nearest ancestor's (parts go from coarse to fine, so that is the latest)."""

    def __init__(self, levels: _Levels, table: list[list[int]], level: int):
        self.levels, self.table, self.level = levels, table, level

    def __getitem__(self, v: int) -> int:
        level, table, parent = self.level, self.table, self.levels.parent
        while table[level][v] < 0:
            v, level = parent[level][v], level + 1
        return table[level][v]


def multilevel_map(comm: CommGraph, topo: Topology, capacity: int, passes: int = SWAP_PASSES) -> np.ndarray:
    """Core of every process by dual recursive bisection taken coarse to fine on both sides: the
    machine's domain tree (bisection._domains: halves of a mesh's longer side, groups of a tree's
    switches) is walked breadth-first, and a part is split on the coarsest level of the process
    graph (_Levels) where it has at least SPLIT_VERTICES vertices, by the same split as greedy-rb's
    (bisection._split: a vertex's traffic outside the part pulls it towards the half nearer its
    partners' domains, its traffic inside towards the half its partners join; grown greedily,
    rebalanced, refined by swap passes); a coarse partner's domain is the latest known of it or of
    its ancestors (_Fresh). A leaf core takes the processes its vertices stand for; cores left
    over capacity by coarse vertices that did not divide evenly give their extra processes to the
    nearest cores with room (_repair), and greedy-rb's swap rounds follow (the caller's).

    Cost, for P processes with E communicating pairs on C cores, bounded degree: the levels
    O(P + E). A split of a part with s vertices and e pairs costs O(s + e) (bisection._split).
    At domain depth d there are 2^d parts; a part whose vertices are coarse has fewer than
    2 x SPLIT_VERTICES of them (a vertex has at most two below it), a part at level 0 its processes; so
    depth d costs O(min(2^d x SPLIT_VERTICES, P)) (times the degree). Summed over the depths,
    the coarse ones form a geometric series up to O(P), and the depths where parts are at level 0
    are those where 2^d x SPLIT_VERTICES >= P, at most log2(SPLIT_VERTICES x C / P) + 1 of them:
    O(P log SPLIT_VERTICES) = O(P) for P >= C, against greedy-rb's O(P log C), whose every depth
    splits every process. A coarse partner's domain is read in O(1) amortised (its ancestors
    are at most the levels between two neighbouring parts, a constant on graphs that match well).
    A graph that does not coarsen (a star: the matching stalls) is split at level 0 throughout,
    greedy-rb's own O(P log C). The domain tree is built once per machine, as for greedy-rb."""
    levels = _Levels(comm.traffic())
    root = _domains(topo)
    placement = np.full(comm.n, -1, dtype=np.int64)
    rep_at = [[-1] * len(s) for s in levels.size]  # per level and vertex: its domain's representative core
    part_at = [row[:] for row in rep_at]  # and its part's serial number (-1: never in a part at this level)
    top = levels.top
    everyone = list(range(len(levels.size[top])))
    for v in everyone:
        rep_at[top][v], part_at[top][v] = _rep(root), 0
    serial = 0
    queue = [(root, top, everyone)]
    for domain, level, verts in queue:  # breadth-first: the queue grows behind the loop
        while level > 0 and (isinstance(domain, int) or len(verts) < SPLIT_VERTICES):
            verts = levels.below(level, verts)
            level -= 1
            me = part_at[level + 1][levels.parent[level][verts[0]]]
            for v in verts:
                part_at[level][v], rep_at[level][v] = me, rep_at[level + 1][levels.parent[level][v]]
        if isinstance(domain, int):
            placement[verts] = domain
            continue
        left, right = domain[0], domain[1]
        size = levels.size[level]
        sizes = {v: size[v] for v in verts}
        n = sum(sizes.values())
        want = share(n, _cores(left), _cores(right), capacity)
        r0, r1 = _rep(left), _rep(right)
        if 0 < want < n:
            first = _split(verts, want, levels.nbrs[level], levels.wts[level], topo,
                           _Fresh(levels, rep_at, level), _Fresh(levels, part_at, level), r0, r1, passes, sizes)
        else:
            first = set(verts) if want == n else set()
        for half, rep, members in ((left, r0, [v for v in verts if v in first]),
                                   (right, r1, [v for v in verts if v not in first])):
            serial += 1
            for v in members:
                rep_at[level][v], part_at[level][v] = rep, serial
            if members:
                queue.append((half, level, members))
    return _repair(comm, topo, placement, capacity)


def _repair(comm: CommGraph, topo: Topology, placement: np.ndarray, capacity: int) -> np.ndarray:
    """No core over `capacity`: each core's extra processes (those of least traffic to the others
    there first) go to the nearest core with room, looked for ring by ring up to REPAIR_RADIUS and
    then over the whole machine. A coarse vertex's processes all go to one side of a split, so
    a side may end a few processes over; the few moved are what the swap rounds then place well.
    O(P) plus the search per process moved."""
    count = np.bincount(placement, minlength=topo.n_cores)
    if count.max(initial=0) <= capacity:
        return placement
    placement = placement.copy()
    room = (capacity - count).tolist()
    traffic = comm.traffic()
    order = np.argsort(placement, kind="stable")
    bounds = np.searchsorted(placement[order], np.arange(topo.n_cores + 1))
    for core in np.flatnonzero(count > capacity).tolist():
        here = order[bounds[core]:bounds[core + 1]]
        inside = np.asarray(traffic[here][:, here].sum(axis=1)).ravel()
        for p in here[np.argsort(inside, kind="stable")][:count[core] - capacity].tolist():
            target = next((c for d in range(1, REPAIR_RADIUS + 1) for c in topo.ring(core, d) if room[c] > 0), None)
            if target is None:
                spare = np.flatnonzero(np.array(room) > 0)
                target = int(spare[np.argmin(topo.distance(core, spare))])
            placement[p] = target
            room[target] -= 1
            room[core] += 1
    return placement
