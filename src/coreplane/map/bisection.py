"""Recursive-bisection flavour of the paper's greedy: processes split along the machine's own halves, each split grown greedily and improved by bounded swap passes."""

import heapq
from collections import deque

import numpy as np

from coreplane.graph.topology import Topology
from coreplane.map.comm import CommGraph

SWAP_PASSES = 2  # Kernighan-Lin passes per bisection; each is O(E_S log |S|) on the part S it splits


_DOMAINS: dict[str, tuple] = {}  # per topology spec


def _domains(topo: Topology) -> tuple:
    """The topology as a binary tree of domains, (left, right, cores, representative) per inner
    node and a core number per leaf: a mesh or torus halves its longer side (Topology.hierarchy),
    a tree switch's children are halved into two groups. A domain's representative is its core
    nearest all its others (its medoid): the hops between two representatives stand for the hops
    between the domains. Built once per topology, like its hop table."""
    if topo.spec in _DOMAINS:
        return _DOMAINS[topo.spec]
    hops = topo.hops

    def binary(node):
        if isinstance(node, (int, np.integer)):
            return int(node)
        return halves([binary(child) for child in node])

    def halves(children):
        if len(children) == 1:
            return children[0]
        left, right = halves(children[: len(children) // 2]), halves(children[len(children) // 2:])
        cores = _cores(left) + _cores(right)
        rep = cores[int(np.argmin(hops[np.ix_(cores, cores)].sum(axis=1)))]
        return (left, right, cores, rep)

    _DOMAINS[topo.spec] = binary(topo.hierarchy())
    return _DOMAINS[topo.spec]


def _cores(domain) -> list[int]:
    return [domain] if isinstance(domain, int) else domain[2]


def _rep(domain) -> int:
    return domain if isinstance(domain, int) else domain[3]


def bisection_map(comm: CommGraph, topo: Topology, capacity: int, passes: int = SWAP_PASSES) -> np.ndarray:
    """Core of every process by dual recursive bisection (the scheme of Scotch's static mapping,
    done greedily): domains are split breadth-first, so when a part is split every process
    outside it already sits in a domain of the same size; a process's traffic to those outside
    pulls it towards the half nearer them (hops between the domains' representatives), its traffic
    inside towards the half its partners join. Each split grows the first half from the process
    that most wants it, always adding the process with the highest gain (a heap), then `passes`
    Kernighan-Lin passes swap pairs while the cut improves. A part that fits in the first half
    stays whole (few processes on a large machine stay compact). Work: O(E log P) per level of
    the domain tree, O(E log P log C) in all (E pairs that communicate, C cores); with bounded
    degree, O(P log^2 P)."""
    traffic = comm.traffic()
    nbrs = [traffic.indices[traffic.indptr[p]:traffic.indptr[p + 1]].tolist() for p in range(comm.n)]
    wts = [traffic.data[traffic.indptr[p]:traffic.indptr[p + 1]].tolist() for p in range(comm.n)]
    hops = topo.hops.tolist()
    root = _domains(topo)
    placement = np.full(comm.n, -1, dtype=np.int64)
    rep_of = [_rep(root)] * comm.n  # representative core of each process's current domain
    part_of = [0] * comm.n  # serial number of the part each process is in (who is "outside")
    serial = 0
    queue = deque([(root, list(range(comm.n)))])
    while queue:
        domain, procs = queue.popleft()
        if isinstance(domain, int):
            placement[procs] = domain
            continue
        left, right = domain[0], domain[1]
        c0, c1 = len(_cores(left)), len(_cores(right))
        n = len(procs)
        if n <= capacity * c0:
            want = n  # all fit in the first half: keep them together
        else:
            want = min(max(round(n * c0 / (c0 + c1)), n - capacity * c1), capacity * c0)
        r0, r1 = _rep(left), _rep(right)
        first = _split(procs, want, nbrs, wts, hops, rep_of, part_of, r0, r1, passes) if 0 < want < n else \
            (set(procs) if want == n else set())
        for half, rep, members in ((left, r0, [p for p in procs if p in first]),
                                   (right, r1, [p for p in procs if p not in first])):
            serial += 1
            for p in members:
                rep_of[p], part_of[p] = rep, serial
            if members:
                queue.append((half, members))
    return placement


def _split(procs, want, nbrs, wts, hops, rep_of, part_of, r0, r1, passes) -> set[int]:
    """The `want` processes of `procs` that go to the half represented by core r0 (see
    bisection_map): half 0 grown in two ways (by gain, breadth-first), each improved by swap
    passes, the cheaper kept."""
    me = part_of[procs[0]]
    row0, row1 = hops[r0], hops[r1]
    # pull[p]: what p saves by being in half 0 rather than half 1 through its traffic outside the part
    pull, inner = {}, {}
    for p in procs:
        out = 0.0
        mine = []
        for q, w in zip(nbrs[p], wts[p]):
            if part_of[q] == me:
                mine.append((q, w))
            else:
                rq = rep_of[q]
                out += w * (row1[rq] - row0[rq])
        pull[p], inner[p] = out, mine
    best = None
    for grow in (_grow_by_gain, _grow_breadth_first):
        halves = _Halves(procs, pull, inner, hops[r0][r1])
        grow(halves, want)
        for _ in range(passes):
            if not _swap_pass(halves):
                break
        if best is None or halves.cost() < best.cost():
            best = halves
    return {p for p in procs if best.side[p] == 0}


class _Halves:
    """A part split in two: each process's side, and its traffic to either side inside the part.
    Every process starts in half 1."""

    def __init__(self, procs, pull, inner, h01):
        self.procs, self.pull, self.inner, self.h01 = procs, pull, inner, h01
        self.side = dict.fromkeys(procs, 1)
        self.to0 = dict.fromkeys(procs, 0.0)
        self.to1 = {p: sum(w for _, w in inner[p]) for p in procs}

    def gain(self, p: int) -> float:
        """What moving p to the other half saves: its pull plus h01 x (traffic to its new side - to its old)."""
        g = self.pull[p] + self.h01 * (self.to0[p] - self.to1[p])
        return g if self.side[p] == 1 else -g

    def move(self, p: int) -> None:
        old = self.side[p]
        self.side[p] = 1 - old
        for q, w in self.inner[p]:
            if old == 1:
                self.to1[q] -= w
                self.to0[q] += w
            else:
                self.to0[q] -= w
                self.to1[q] += w

    def cost(self) -> float:
        """Hop-bytes of the split up to a constant: pulls of half 0 forgone, h01 x the cut."""
        return sum(self.h01 * self.to1[p] - self.pull[p] for p in self.procs if self.side[p] == 0)


def _grow_by_gain(halves: _Halves, want: int) -> None:
    """Half 0 grown by always adding the process of highest gain (compact on grids: whole rows)."""
    heap = [(-halves.gain(p), p) for p in halves.procs]
    heapq.heapify(heap)
    taken = 0
    if not any(halves.pull.values()):  # nothing outside yet: start from a rim
        seed = _far_end(_far_end(halves.procs[0], halves.inner), halves.inner)
        halves.move(seed)
        taken = 1
        for q, _ in halves.inner[seed]:
            heapq.heappush(heap, (-halves.gain(q), q))
    while taken < want:
        g, p = heapq.heappop(heap)
        if halves.side[p] == 0:
            continue
        if -g != halves.gain(p):  # stale entry
            heapq.heappush(heap, (-halves.gain(p), p))
            continue
        halves.move(p)
        taken += 1
        for q, _ in halves.inner[p]:
            if halves.side[q] == 1:
                heapq.heappush(heap, (-halves.gain(q), q))


def _grow_breadth_first(halves: _Halves, want: int) -> None:
    """Half 0 grown breadth-first from the processes pulled towards it (the most pulled first) or,
    if none is, from a rim: weights aside, so it does not follow heavy edges into tendrils (by
    gain, a geometric graph's root cut was 3x Scotch's)."""
    procs, pull, inner = halves.procs, halves.pull, halves.inner
    pulled = sorted((p for p in procs if pull[p] > 0), key=lambda p: -pull[p])
    order = deque(pulled or [_far_end(_far_end(procs[0], inner), inner)])
    queued = set(order)
    rest = iter(sorted(procs, key=lambda p: -pull[p]))
    taken = 0
    while taken < want:
        if not order:  # the front ran out (another component): restart from the most pulled left
            p = next(q for q in rest if q not in queued)
            order.append(p)
            queued.add(p)
        p = order.popleft()
        halves.move(p)
        taken += 1
        for q, _ in inner[p]:
            if q not in queued:
                queued.add(q)
                order.append(q)


def _far_end(start: int, inner) -> int:
    """The last process a breadth-first search from `start` reaches inside the part."""
    seen, queue, last = {start}, deque([start]), start
    while queue:
        last = queue.popleft()
        for q, _ in inner[last]:
            if q not in seen:
                seen.add(q)
                queue.append(q)
    return last


def _swap_pass(halves: _Halves) -> bool:
    """One Kernighan-Lin pass: repeatedly swap the best unlocked process of each half (the pair's
    gain corrected for their own edge), each process at most once, then undo the swaps after the
    best prefix. Returns whether the cut improved."""
    procs, side, inner, gain, move, h01 = halves.procs, halves.side, halves.inner, halves.gain, halves.move, halves.h01
    heaps = ([], [])
    for p in procs:
        heaps[side[p]].append((-gain(p), p))
    for h in heaps:
        heapq.heapify(h)
    locked: set[int] = set()
    done, total, best, best_at = [], 0.0, 1e-9, 0

    def top(s: int):
        h = heaps[s]
        while h:
            g, p = h[0]
            if p in locked or side[p] != s or -g != gain(p):
                heapq.heappop(h)
                if p not in locked and side[p] == s:
                    heapq.heappush(h, (-gain(p), p))
                continue
            return p
        return None

    while True:
        a, b = top(0), top(1)
        if a is None or b is None:
            break
        w_ab = sum(w for q, w in inner[a] if q == b)
        step = gain(a) + gain(b) - 2 * h01 * w_ab
        for p in (a, b):
            move(p)
            locked.add(p)
            for q, _ in inner[p]:
                if q not in locked:
                    heapq.heappush(heaps[side[q]], (-gain(q), q))
        done.append((a, b))
        total += step
        if total > best:
            best, best_at = total, len(done)
        if len(done) - best_at > 50:  # no improvement for a while: the rest is rolled back anyway
            break
    for a, b in reversed(done[best_at:]):
        move(a)
        move(b)
    return best_at > 0
