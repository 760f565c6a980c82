"""The paper's greedy run-time mapping (Sec. II-C): shared memory -> one core, communicating -> adjacent, independent -> far apart."""

from collections import deque
from itertools import product

import numpy as np

from coreplane.graph.topology import Topology
from coreplane.map.comm import CommGraph

# Cost of moving one byte one hop, in the unit of the processes' loads (ns): a 64-byte
# cache-line hand-off between two cores costs ~100 ns on this machine (`coreplane bench floor`).
BYTE_HOP_NS = 1.5
NEIGHBOURS_CONSIDERED = 8  # k: the heaviest partners of a process that steer its placement
CANDIDATE_CORES = 8  # m: free cores examined per placement
FAR_RING = 4  # past this distance a walk looks for room over the whole machine at once (vectorised)
UNFOLD_ROWS = 256  # cores whose distances to every core are computed at once (O(C) memory)


def default_capacity(n_processes: int, n_cores: int) -> int:
    """Processes per core when the caller gives none: the fewest that fit them all."""
    return max(1, -(-n_processes // n_cores))


def _top_neighbours(matrix, k: int) -> list[list[tuple[int, float]]]:
    """Per process, its k heaviest partners (descending weight)."""
    out = []
    for p in range(matrix.shape[0]):
        lo, hi = matrix.indptr[p], matrix.indptr[p + 1]
        nbrs, w = matrix.indices[lo:hi], matrix.data[lo:hi]
        if len(nbrs) > k:
            keep = np.argpartition(-w, k)[:k]
            nbrs, w = nbrs[keep], w[keep]
        order = np.argsort(-w, kind="stable")
        out.append(list(zip(nbrs[order].tolist(), w[order].tolist())))
    return out


def greedy_map(comm: CommGraph, topo: Topology, capacity: int, byte_hop_ns: float = BYTE_HOP_NS) -> np.ndarray:
    """Core index of every process (the paper's O(P) run-time mapping), best of two starts.

    Processes are visited breadth-first, heaviest partners first, so a process usually finds a
    partner already placed. Following the three observations of Sec. II-C:
      1. a process sharing memory with a placed partner q joins q's core when eq. (1) says the
         pair is faster together: T_same = L_p + L_q (one core, N = 1, no messages) against
         T_apart = (L_p + L_q)/2 + 2*B_pq*byte_hop_ns/2 (N = 2, W_c = both ends of the traffic
         B_pq crossing one hop);
      2. otherwise it takes, among the m free cores nearest its heaviest placed partner, the one
         minimising byte_hop_ns * sum_q w_pq * hops(core, core_q) over its k heaviest placed
         partners plus the load already on that core from processes alive at the same time (ties:
         the core with fewest free neighbours, which keeps the placed region compact);
      3. a process with no placed partner (a new independent group) starts on the free core
         farthest from everything placed so far.
    The walk is run from two starts -- the most communicating process on the topology's centre
    (right for hubs), and the least connected process on a least connected core (right for
    meshes and rings, which then unroll from a corner) -- each breadth-first and depth-first
    (a depth-first walk places a whole subtree before its siblings', so a reduction tree keeps
    its subtrees compact, where breadth-first scattered the deep levels once the region around
    their parents was full: 5.6x Scotch's hop-bytes at 1,024 processes), and the placement with
    the fewest hop-bytes is kept. Each step costs O(k*m) for bounded k and m: O(P) per walk.
    """
    traffic, sharing = comm.traffic(), comm.sharing()
    combined = (traffic + sharing).tocsr()
    partners = _top_neighbours(combined, NEIGHBOURS_CONSIDERED)
    strength = np.asarray(combined.sum(axis=1)).ravel()
    degree = np.diff(combined.indptr)
    core_degree = np.array([len(n) for n in topo.nearest])
    hub_first = np.argsort(-strength, kind="stable")
    rim_first = np.lexsort((-strength, degree))
    rim_core = int(np.lexsort((-topo.total_hops, core_degree))[0])
    best, best_cost = None, np.inf
    starts = ((hub_first, topo.center), (rim_first, rim_core))
    rings: dict[tuple[int, int], np.ndarray] = {}  # the rings the walks have read: O(their work), freed after
    for (order, first_core), depth_first in product(starts, (False, True)):
        placement = _walk(comm, topo, capacity, byte_hop_ns, partners, traffic, sharing, order, first_core,
                          depth_first, rings)
        cost = float((comm.weight * topo.distance(placement[comm.src], placement[comm.dst])).sum())
        if cost < best_cost:
            best, best_cost = placement, cost
    return best


def _walk(comm, topo, capacity, byte_hop_ns, partners, traffic, sharing, order, first_core,
          depth_first: bool, rings: dict) -> np.ndarray:
    """One greedy pass from order[0] (placed near first_core), breadth- or depth-first; see greedy_map.
    A step looks at O(k*m) entries, never a whole row of the machine's tables: the cores around
    a core are read ring by ring (Topology.ring: all the cores at one distance, made in closed
    form), a core's leading full rings skipped once for all (cores only fill up), and the
    distance of every core to the placed ones, which only a new independent group needs, is
    brought up to date then."""
    placement = np.full(comm.n, -1, dtype=np.int64)
    free = np.full(topo.n_cores, capacity, dtype=np.int64)
    on_core: list[list[int]] = [[] for _ in range(topo.n_cores)]
    nearest = topo.nearest

    def ring(core: int, d: int) -> np.ndarray:
        """Topology.ring as an array, made once per greedy_map call (`rings`)."""
        if (core, d) not in rings:
            rings[core, d] = np.array(topo.ring(core, d), dtype=np.int64)
        return rings[core, d]

    load, start, end = comm.load.tolist(), comm.start.tolist(), comm.end.tolist()
    unset = np.iinfo(np.int32).max
    dist_to_placed = np.full(topo.n_cores, unset, dtype=np.int64)
    unfolded: list[int] = []  # cores placed on since dist_to_placed was last brought up to date
    first_room = [(0, 0)] * topo.n_cores  # per core: (distance, place in that ring) of the first core that may have room

    def place(p: int, core: int) -> None:
        placement[p] = core
        free[core] -= 1
        on_core[core].append(p)
        unfolded.append(core)

    def with_room(core: int, m: int) -> list[int]:
        """The first m cores with room by distance from core (ties by core number), read ring by
        ring from the first core that may have room (the full ones before it are skipped for good)."""
        (d, i), out = first_room[core], []
        while len(out) < m and d <= min(FAR_RING, topo.max_distance):
            cores = ring(core, d)[i:]
            room = np.flatnonzero(free[cores] > 0)  # one numpy step per ring, however full it is
            if not out:
                first_room[core] = (d, i + int(room[0])) if len(room) else (d + 1, 0)
            out += cores[room[:m - len(out)]].tolist()
            d, i = d + 1, 0
        if len(out) == m or d > topo.max_distance:
            return out
        # beyond FAR_RING the rings are many and long: every core with room at once, vectorised
        # (the same m cores, in the same order, as reading on ring by ring)
        spare = np.flatnonzero(free > 0)
        dist = topo.distance(core, spare)
        if len(spare) > m:  # the m nearest, ties at the m-th distance by core number
            near = dist <= np.partition(dist, m - 1)[m - 1]
            spare, dist = spare[near], dist[near]
        return spare[np.lexsort((spare, dist))[:m]].tolist()

    def start_core() -> int:
        if not unfolded and dist_to_placed[0] == unset:  # nothing placed yet: near first_core
            return with_room(first_core, 1)[0]
        if unfolded:
            every = np.arange(topo.n_cores)
            for i in range(0, len(unfolded), UNFOLD_ROWS):  # O(C) memory whatever the machine
                near = topo.distance(np.array(unfolded[i:i + UNFOLD_ROWS])[:, None], every[None, :]).min(axis=0)
                np.minimum(dist_to_placed, near, out=dist_to_placed)
            unfolded.clear()
        return int(np.argmax(np.where(free > 0, dist_to_placed, -1)))

    def best_core(p: int) -> int:
        placed_partners = [(q, w) for q, w in partners[p] if placement[q] >= 0]
        if not placed_partners:
            return start_core()
        q0, _ = placed_partners[0]
        share = sharing[p, q0] if sharing.nnz else 0.0
        if share > 0 and free[placement[q0]] > 0:
            together = load[p] + load[q0]
            apart = together / 2 + (share + traffic[p, q0]) * byte_hop_ns
            if together <= apart:
                return int(placement[q0])
        candidates = np.array(with_room(int(placement[q0]), CANDIDATE_CORES))
        cores = placement[[q for q, _ in placed_partners]]
        weights = np.array([w for _, w in placed_partners])
        # eq. (1) in ns: bytes moved times hops, plus the work on that core of processes alive at
        # the same time as p (N = 1 there); a process that ended before p started costs nothing
        busy = [sum(load[q] for q in on_core[c] if start[q] < end[p] and start[p] < end[q])
                for c in candidates.tolist()]
        cost = byte_hop_ns * (topo.distance(candidates[:, None], cores[None, :]) @ weights) + np.array(busy)
        free_nbrs = [sum(1 for n in nearest[c] if free[n] > 0) for c in candidates.tolist()]
        return int(candidates[np.lexsort((free_nbrs, cost))[0]])

    seen = np.zeros(comm.n, dtype=bool)
    for root in order:
        if seen[root]:
            continue
        queue = deque([int(root)])
        seen[root] = True
        while queue:
            p = queue.pop() if depth_first else queue.popleft()
            place(p, best_core(p))
            for q, _ in (reversed(partners[p]) if depth_first else partners[p]):
                if not seen[q]:
                    seen[q] = True
                    queue.append(q)
    return placement


def refine(comm: CommGraph, topo: Topology, placement: np.ndarray, capacity: int, rounds: int = 20) -> np.ndarray:
    """Local search after the run-time mapping (not part of the paper's O(P) step): move a process
    to a core with room, or swap it with a process there, whenever hop-bytes fall. Candidates
    are the cores at most one hop from its partners' cores (two on a tree). The first round
    visits every process; a later one only those near a move of the round before: the processes
    moved, those on the cores they left or joined, and all their partners. (A process elsewhere
    keeps its own costs; it may miss a core freed or a new resident to swap with, until a later
    move touches it: that is what makes rounds after the first cheap.) Each step touches a
    handful of processes and cores, so the loop runs on Python lists where it can (numpy's
    per-call overhead on arrays of a few elements was most of the portfolio's time); it never
    reads a row of hops (distances come from Topology.hop and Topology.distance, in closed form), so a
    round costs O(P d m) for degree d and m candidate cores, and the machine's tables are O(C)."""
    traffic = comm.traffic()
    hop, hop_sum = topo.hop, topo.hop_sum
    near_of = topo.within(2 if topo.kind == "tree" else 1)
    rng = np.random.default_rng(0)
    place = placement.tolist()
    count = np.bincount(placement, minlength=topo.n_cores).tolist()
    # a process's partners and the bytes to each: one Python copy of the traffic matrix's rows,
    # (partner, bytes) pairs for the loops; the products read the matrix's own bytes (views)
    weights = [traffic.data[traffic.indptr[p]:traffic.indptr[p + 1]] for p in range(comm.n)]
    row = [list(zip(traffic.indices[traffic.indptr[p]:traffic.indptr[p + 1]].tolist(), weights[p].tolist()))
           for p in range(comm.n)]
    on_core: list[set[int]] = [set() for _ in range(topo.n_cores)]
    for p, c in enumerate(place):
        on_core[c].add(p)

    def cost(p: int, core: int) -> float:
        return hop_sum(core, row[p], place)

    current: list[float | None] = [None] * comm.n  # cost(p, place[p]), None once p or a partner moved

    def cost_here(p: int) -> float:
        if current[p] is None:
            current[p] = cost(p, place[p])
        return current[p]

    visit = rng.permutation(comm.n).tolist()
    for _ in range(rounds):
        touched: set[int] = set()
        for p in visit:
            if not row[p]:
                continue
            here = place[p]
            partner_cores = [place[q] for q, _ in row[p]]
            near = sorted({c for pc in partner_cores for c in near_of[pc]})
            # p's cost on every candidate core at once: one numpy product instead of a Python sum per core
            on_near = (topo.distance(np.array(near)[:, None], np.array(partner_cores)[None, :]) @ weights[p]).tolist()
            stay = cost_here(p)
            weight_to = None  # p's bytes to each partner, looked up only if a swap is weighed
            best_gain, best = 1e-9, None
            for c, there in zip(near, on_near):
                if c == here:
                    continue
                if count[c] < capacity:
                    if stay - there > best_gain:
                        best_gain, best = stay - there, (c, None)
                    continue
                h = hop(here, c)
                if weight_to is None:
                    weight_to = dict(row[p])
                for r in on_core[c]:
                    # p to c, r to here; their own edge keeps its length h, which `there` and
                    # cost(r, here) count as 0 and `stay` and cost(r, c) as h
                    w = weight_to.get(r, 0.0)
                    gain = stay - there + cost_here(r) - 2 * w * h
                    if gain <= best_gain:  # cost(r, here) >= 0 cannot help
                        continue
                    gain -= cost(r, here)
                    if gain > best_gain:
                        best_gain, best = gain, (c, r)
            if best:
                c, r = best
                on_core[here].discard(p)
                on_core[c].add(p)
                place[p] = c
                moved = [p]
                if r is None:
                    count[here] -= 1
                    count[c] += 1
                else:
                    on_core[c].discard(r)
                    on_core[here].add(r)
                    place[r] = here
                    moved.append(r)
                for x in moved:
                    current[x] = None
                    for q, _ in row[x]:
                        current[q] = None
                for x in moved + list(on_core[here]) + list(on_core[c]):
                    touched.add(x)
                    touched.update(q for q, _ in row[x])
        if not touched:
            break
        visit = [p for p in rng.permutation(comm.n).tolist() if p in touched]
    return np.array(place, dtype=np.int64)
