"""Recursive-bisection flavour of the paper's greedy: processes split along the machine's own halves, each split multilevel (coarsened by heavy edges, grown greedily, refined by swap passes level by level)."""

import heapq
from collections import deque

import numpy as np

from coreplane.graph.topology import Topology
from coreplane.map.comm import CommGraph

SWAP_PASSES = 2  # at most, Kernighan-Lin passes per level of a split (they stop when one gains nothing); each O(E_S)
GAIN_LEVELS = 1024  # a part's gains are ordered at 1/GAIN_LEVELS of its largest possible |gain|
NONE_LOCKED: frozenset[int] = frozenset()  # a growth locks no process
STALL = 50  # a swap pass stops after this many swaps without a new best prefix (the rest is undone anyway)


_DOMAINS: dict[str, tuple] = {}  # per topology spec


def _domains(topo: Topology) -> tuple:
    """The topology as a binary tree of domains, (left, right, cores, representative) per inner
    node (cores: how many) and a core number per leaf: a mesh or torus halves its longer side
    (Topology.hierarchy), a tree switch's children are halved into two groups. A domain's
    representative is its core nearest all its others (its medoid, from Topology.row_sums): the
    hops between two representatives stand for the hops between the domains. Built once per
    topology: O(C) entries."""
    if topo.spec in _DOMAINS:
        return _DOMAINS[topo.spec]

    def binary(node) -> tuple:
        """(domain, its cores) of a node of the hierarchy."""
        if isinstance(node, (int, np.integer)):
            return int(node), [int(node)]
        return halves([binary(child) for child in node])

    def halves(children) -> tuple:
        if len(children) == 1:
            return children[0]
        (left, lcores), (right, rcores) = halves(children[: len(children) // 2]), halves(children[len(children) // 2:])
        cores = lcores + rcores
        rep = cores[int(np.argmin(topo.row_sums(cores, cores)))]
        return (left, right, len(cores), rep), cores

    _DOMAINS[topo.spec] = binary(topo.hierarchy())[0]
    return _DOMAINS[topo.spec]


def _cores(domain) -> int:
    """How many cores a domain has."""
    return 1 if isinstance(domain, int) else domain[2]


def _rep(domain) -> int:
    return domain if isinstance(domain, int) else domain[3]


def bisection_map(comm: CommGraph, topo: Topology, capacity: int, passes: int = SWAP_PASSES) -> np.ndarray:
    """Core of every process by dual recursive bisection (the scheme of Scotch's static mapping,
    done greedily): domains are split breadth-first, so when a part is split every process
    outside it already sits in a domain of the same size; a process's traffic to those outside
    pulls it towards the half nearer them (hops between the domains' representatives), its traffic
    inside towards the half its partners join. Each split is multilevel (_bisect): the part's
    graph coarsened by heavy-edge matching, the coarsest grown greedily from several starts
    (always adding the vertex of highest gain, or breadth-first), and at every level up to
    `passes` Kernighan-Lin passes swap pairs while the cut improves. A part that fits in the first half
    stays whole (few processes on a large machine stay compact). The gains are kept in bucket
    queues (Fiduccia-Mattheyses), not heaps, and the parts' orders are bucket sorts, so a split
    of a part S with E_S pairs costs O(|S| + E_S): O(E) per level of the domain tree, O(E log C)
    in all (E pairs that communicate, C cores), O(P log P) at bounded degree and P >= C. (The
    domain tree is built once per machine, like the hop table.)"""
    traffic = comm.traffic()
    nbrs = [traffic.indices[traffic.indptr[p]:traffic.indptr[p + 1]].tolist() for p in range(comm.n)]
    wts = [traffic.data[traffic.indptr[p]:traffic.indptr[p + 1]].tolist() for p in range(comm.n)]
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
        c0, c1 = _cores(left), _cores(right)
        n = len(procs)
        want = share(n, c0, c1, capacity)
        r0, r1 = _rep(left), _rep(right)
        first = _split(procs, want, nbrs, wts, topo, rep_of, part_of, r0, r1, passes) if 0 < want < n else \
            (set(procs) if want == n else set())
        for half, rep, members in ((left, r0, [p for p in procs if p in first]),
                                   (right, r1, [p for p in procs if p not in first])):
            serial += 1
            for p in members:
                rep_of[p], part_of[p] = rep, serial
            if members:
                queue.append((half, members))
    return placement


def share(n: int, c0: int, c1: int, capacity: int) -> int:
    """Of n processes (or the sizes of coarse vertices) in a domain, how many its first half of
    c0 cores takes (the second has c1): all of them if they fit (few processes on a large
    machine stay compact), else a share proportional to the cores, within either half's room."""
    if n <= capacity * c0:
        return n
    return min(max(round(n * c0 / (c0 + c1)), n - capacity * c1), capacity * c0)


def _split(procs, want, nbrs, wts, topo, rep_of, part_of, r0, r1, passes, size=None) -> set[int]:
    """The `want` processes of `procs` that go to the half represented by core r0 (see
    bisection_map): the part's own graph, with each process's pull from its traffic outside the
    part, split by _bisect. `rep_of` and `part_of` need only be indexable (a multilevel caller
    looks a coarse vertex's domain up); `size`: what each of procs stands for (1 each if None)."""
    me = part_of[procs[0]]
    # pull[p]: what p saves by being in half 0 rather than half 1 through its traffic outside the
    # part: hops looked up for the outside pairs only (O(E_S)), never a whole row of the hop table
    inner, who, reps, out_w = {}, [], [], []
    for i, p in enumerate(procs):
        mine = []
        for q, w in zip(nbrs[p], wts[p]):
            if part_of[q] == me:
                mine.append((q, w))
            else:
                who.append(i)
                reps.append(rep_of[q])
                out_w.append(w)
        inner[p] = mine
    pulls = np.zeros(len(procs))
    if who:
        reps = np.asarray(reps)
        pulls = np.bincount(who, weights=np.asarray(out_w) * (topo.distance(r1, reps) - topo.distance(r0, reps)),
                            minlength=len(procs))
    pull = dict(zip(procs, pulls.tolist()))
    halves = _bisect(procs, size or dict.fromkeys(procs, 1), pull, inner, topo.hop(r0, r1), want, passes)
    return {p for p in procs if halves.side[p] == 0}


def _bisect(procs, size, pull, inner, h01, want, passes, coarsened: bool = False) -> "_Halves":
    """Half 0 of a graph whose vertices weigh `size` (processes each stands for), about `want` of
    them (exactly, when every size is 1), by multilevel bisection: while the graph has more than
    COARSEST vertices and shrinks, pairs joined by their heaviest edge are merged (_coarsen), the
    coarse graph is split, and its split projected back and improved here (rebalanced, then swap
    passes). The coarsest graph is split by greedy growth, by gain and breadth-first (and, if it
    stands for a larger graph, by gain from GROWTH_SEEDS far-apart vertices), each rebalanced and
    improved by swap passes, the cheapest kept. A growth on the fine graph alone was blind to
    shape: from a corner of a 3-D stencil, by gain, it grew a box that reached the middle and
    then spilled over in slabs, cutting 2x the 64 edges of the plane that halves an 8x8x8 grid
    (greedy-rb 1.22-1.26x Scotch on such stencils on non-square tori); on the coarse graph a few
    vertices stand for whole blocks, and the refinement at every level moves the cut by blocks
    before it moves it by processes. Each level costs O(|S| + E_S) and the levels shrink
    geometrically, so a split stays O(|S| + E_S)."""
    coarse = _coarsen(procs, size, pull, inner) if len(procs) > COARSEST else None
    if coarse is None:
        best = None
        growths = [(_grow_by_gain, None), (_grow_breadth_first, None)]
        if coarsened:  # a few vertices for a large part: its shape is decided here
            growths += [(_grow_by_gain, seed) for seed in _spread(procs, inner, GROWTH_SEEDS)]
        for grow, seed in growths:
            halves = _Halves(procs, pull, inner, h01, size)
            grow(halves, want, seed)
            _improve(halves, want, passes)
            if best is None or halves.cost() < best.cost():
                best = halves
        return best
    cprocs, csize, cpull, cinner, merged = coarse
    first = _bisect(cprocs, csize, cpull, cinner, h01, want, passes, coarsened=True)
    halves = _Halves(procs, pull, inner, h01, size)
    for c in cprocs:
        if first.side[c] == 0:
            for p in merged[c]:
                halves.move(p)
    _improve(halves, want, passes)
    return halves


GROWTH_SEEDS = 6  # extra growths by gain on the coarsest graph, from vertices far apart (_spread)
COARSEST = 64  # vertices below which a part is split directly (greedy growth)
SHRINK = 0.9  # a coarsening that keeps more than this share of the vertices stops the levels


def _coarsen(procs, size, pull, inner):
    """The graph with each vertex merged with its unmatched partner of heaviest edge (heavy-edge
    matching, visited lightest vertex first so that sizes stay even), or None if it would keep more
    than SHRINK of the vertices (a star). A coarse vertex is named by its first member and
    carries its members' summed size and pull; the edges between two coarse vertices are summed,
    those inside one dropped. O(|S| + E_S)."""
    mate: dict[int, int] = {}
    for p in sorted(procs, key=size.__getitem__):  # a stable sort: ties keep the part's order
        if p in mate:
            continue
        best, best_w = p, 0.0
        for q, w in inner[p]:
            if q not in mate and q != p and w > best_w:
                best, best_w = q, w
        mate[p], mate[best] = best, p
    cprocs = [p for p in procs if p <= mate[p]]
    if len(cprocs) > SHRINK * len(procs):
        return None
    name = {}
    for c in cprocs:
        name[c] = name[mate[c]] = c
    merged = {c: [c] if mate[c] == c else [c, mate[c]] for c in cprocs}
    csize = {c: sum(size[p] for p in merged[c]) for c in cprocs}
    cpull = {c: sum(pull[p] for p in merged[c]) for c in cprocs}
    cinner = {}
    for c in cprocs:
        edges: dict[int, float] = {}
        for p in merged[c]:
            for q, w in inner[p]:
                d = name[q]
                if d != c:
                    edges[d] = edges.get(d, 0.0) + w
        cinner[c] = list(edges.items())
    return cprocs, csize, cpull, cinner, merged


def _improve(halves: "_Halves", want: int, passes: int) -> None:
    """Brings half 0 to `want` (_rebalance), then up to `passes` swap passes while the cost falls."""
    _rebalance(halves, want)
    for _ in range(passes):
        if not _swap_pass(halves):
            break


def _rebalance(halves: "_Halves", want: int) -> None:
    """Moves vertices of highest gain from the fuller half to the other, each no larger than what
    half 0 is off by, until half 0 holds `want` processes (always reached when every size is 1)."""
    side, size, gain = halves.side, halves.size, halves.gain
    held = halves.held()
    while held != want:
        src = 0 if held > want else 1
        queue = halves.queue()
        for p in halves.procs:
            if side[p] == src and size[p] <= abs(held - want):
                queue.push(p, gain(p))
        p = queue.pop(halves, src, NONE_LOCKED)
        if p is None:
            return
        while p is not None:  # the queue is refilled whenever the room shrinks below a vertex
            halves.move(p)
            held += size[p] if src == 1 else -size[p]
            if held == want:
                return
            for q, _ in halves.inner[p]:
                if side[q] == src:
                    queue.push(q, gain(q))
            p = queue.pop(halves, src, NONE_LOCKED)
            if p is not None and size[p] > abs(held - want):
                break


class _Buckets:
    """A max-queue of processes by gain, the gain quantised to one of 2 x GAIN_LEVELS + 1 buckets
    spanning +-bound (Fiduccia-Mattheyses' bucket list), with a small heap of the keys of the
    non-empty buckets so that empty ones are never scanned: push and pop cost O(log K) for K
    non-empty buckets, K <= 2 x GAIN_LEVELS + 1 whatever P is (on a grid, a handful). Ties within
    a bucket go last in, first out (on a grid, the front goes on along the line it was growing).
    Whoever changes a process's gain pushes it again, so an entry whose process has moved or
    whose gain is no longer its bucket's is dropped when it comes up."""

    def __init__(self, bound: float):
        self.scale = GAIN_LEVELS / bound if bound > 0 else 0.0
        self.lists: dict[int, list[int]] = {}  # non-empty buckets only
        self.keys: list[int] = []  # their keys, negated (a min-heap)
        self.key_of: dict[int, int] = {}  # each process's key when last pushed: its current one

    def key(self, gain: float) -> int:
        return round(gain * self.scale)  # within +-GAIN_LEVELS: no gain exceeds the bound

    def push(self, p: int, gain: float) -> None:
        k = round(gain * self.scale)  # key(), inlined: a push is the bisection's commonest step
        self.key_of[p] = k
        bucket = self.lists.get(k)
        if bucket is None:
            self.lists[k] = [p]
            heapq.heappush(self.keys, -k)
        else:
            bucket.append(p)

    def pop(self, halves: "_Halves", side: int, locked: set[int]):
        """The process of highest gain on `side` of `halves` and not in `locked` (None if none is
        left). An entry is current if its process is still on `side`, unlocked, and was last
        pushed under this bucket's key (whoever changes a gain pushes the process again, so no
        gain is recomputed here)."""
        sides, key_of = halves.side, self.key_of
        while self.keys:
            k = -self.keys[0]
            bucket = self.lists[k]
            found = None
            while bucket and found is None:
                p = bucket.pop()
                if sides[p] == side and key_of[p] == k and p not in locked:
                    found = p
            if not bucket:
                del self.lists[k]
                heapq.heappop(self.keys)
            if found is not None:
                return found
        return None


class _Halves:
    """A part split in two: each process's side, and its traffic to either side inside the part.
    Every process starts in half 1."""

    def __init__(self, procs, pull, inner, h01, size=None):
        self.procs, self.pull, self.inner, self.h01 = procs, pull, inner, h01
        self.size = size or dict.fromkeys(procs, 1)  # processes each vertex stands for (coarse levels)
        self.side = dict.fromkeys(procs, 1)
        self.to0 = dict.fromkeys(procs, 0.0)
        self.to1 = {p: sum(w for _, w in inner[p]) for p in procs}
        # no gain can exceed a process's pull plus h01 x all its traffic inside the part
        self.bound = max((abs(pull[p]) + h01 * self.to1[p] for p in procs), default=0.0)

    def queue(self) -> _Buckets:
        return _Buckets(self.bound)

    def gain(self, p: int) -> float:
        """What moving p to the other half saves: its pull plus h01 x (traffic to its new side - to its old)."""
        g = self.pull[p] + self.h01 * (self.to0[p] - self.to1[p])
        return g if self.side[p] == 1 else -g

    def move(self, p: int) -> None:
        old = self.side[p]
        self.side[p] = 1 - old
        gone, joined = (self.to1, self.to0) if old == 1 else (self.to0, self.to1)
        for q, w in self.inner[p]:
            gone[q] -= w
            joined[q] += w

    def held(self) -> int:
        """Processes in half 0."""
        return sum(self.size[p] for p in self.procs if self.side[p] == 0)

    def cost(self) -> float:
        """Hop-bytes of the split up to a constant: pulls of half 0 forgone, h01 x the cut."""
        return sum(self.h01 * self.to1[p] - self.pull[p] for p in self.procs if self.side[p] == 0)


def _grow_by_gain(halves: _Halves, want: int, seed: int | None = None) -> None:
    """Half 0 grown by always adding the process of highest gain (compact on grids: whole rows),
    from `seed` if given."""
    side, gain = halves.side, halves.gain
    queue = halves.queue()
    taken = 0
    if seed is not None:
        halves.move(seed)
        taken = halves.size[seed]
    # none pulled to half 0: start from a rim, as far as can be from those pulled to half 1
    elif not any(g > 0 for g in halves.pull.values()):
        pushed = [p for p in halves.procs if halves.pull[p] < 0]
        seed = _far_layer(pushed, halves.inner)[0] if pushed else \
            _far_end(_far_end(halves.procs[0], halves.inner), halves.inner)
        halves.move(seed)
        taken = halves.size[seed]
    for p in halves.procs:
        if side[p] == 1:
            queue.push(p, gain(p))
    while taken < want:
        p = queue.pop(halves, 1, NONE_LOCKED)
        halves.move(p)
        taken += halves.size[p]
        for q, _ in halves.inner[p]:
            if side[q] == 1:
                queue.push(q, gain(q))


def _by_pull(halves: _Halves, procs) -> list[int]:
    """procs, the most pulled towards half 0 first: a bucket sort on the quantised pull, O(|S| log K)
    for K <= 2 x GAIN_LEVELS + 1 distinct keys."""
    queue = halves.queue()
    buckets: dict[int, list[int]] = {}
    for p in procs:
        buckets.setdefault(queue.key(halves.pull[p]), []).append(p)
    return [p for k in sorted(buckets, reverse=True) for p in buckets[k]]  # K <= 2 x GAIN_LEVELS + 1 keys


def _grow_breadth_first(halves: _Halves, want: int, seed: None = None) -> None:
    """(`seed` is never given: the growths are called alike.) Half 0 grown breadth-first from the processes pulled towards it (the most pulled first) or,
    if none is, from a rim: weights aside, so it does not follow heavy edges into tendrils (by
    gain, a geometric graph's root cut was 3x Scotch's)."""
    procs, pull, inner = halves.procs, halves.pull, halves.inner
    ordered = _by_pull(halves, procs)
    pulled = [p for p in ordered if pull[p] > 0]
    if not pulled:  # start as far as can be from those pulled to half 1, or from a rim
        pushed = [p for p in ordered if pull[p] < 0]
        pulled = _far_layer(pushed, inner) if pushed else [_far_end(_far_end(procs[0], inner), inner)]
    order = deque(pulled)
    queued = set(order)
    rest = iter(ordered)
    taken = 0
    while taken < want:
        if not order:  # the front ran out (another component): restart from the most pulled left
            p = next(q for q in rest if q not in queued)
            order.append(p)
            queued.add(p)
        p = order.popleft()
        halves.move(p)
        taken += halves.size[p]
        for q, _ in inner[p]:
            if q not in queued:
                queued.add(q)
                order.append(q)


def _spread(procs, inner, k: int) -> list[int]:
    """k vertices far apart (farthest-point sampling by breadth-first search): a rim's far end,
    then each time the vertex a search from all chosen so far reaches last."""
    chosen = [_far_end(_far_end(procs[0], inner), inner)]
    while len(chosen) < min(k, len(procs)):
        far = _far_layer(chosen, inner)[0]
        if far in chosen:
            break
        chosen.append(far)
    return chosen


def _far_layer(sources: list[int], inner) -> list[int]:
    """The processes a breadth-first search from all `sources` at once reaches last (its last layer)."""
    seen, layer = set(sources), list(sources)
    while True:
        nxt = []
        for p in layer:
            for q, _ in inner[p]:
                if q not in seen:
                    seen.add(q)
                    nxt.append(q)
        if not nxt:
            return layer
        layer = nxt


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
    pull, to0, to1 = halves.pull, halves.to0, halves.to1
    queues = (halves.queue(), halves.queue())
    for p in procs:  # gain(p), inlined here and below: the pass's commonest step
        g = pull[p] + h01 * (to0[p] - to1[p])
        queues[side[p]].push(p, g if side[p] == 1 else -g)
    locked: set[int] = set()
    done, total, best, best_at = [], 0.0, 1e-9, 0
    while True:
        a = queues[0].pop(halves, 0, locked)
        b = queues[1].pop(halves, 1, locked) if a is not None else None
        if b is None:
            break
        w_ab = 0.0
        for q, w in inner[a]:
            if q == b:
                w_ab += w
        step = gain(a) + gain(b) - 2 * h01 * w_ab
        for p in (a, b):
            move(p)
            locked.add(p)
        for p in (a, b):
            for q, _ in inner[p]:
                if q not in locked:
                    g = pull[q] + h01 * (to0[q] - to1[q])
                    queues[side[q]].push(q, g if side[q] == 1 else -g)
        done.append((a, b))
        total += step
        if total > best:
            best, best_at = total, len(done)
        if len(done) - best_at > STALL:
            break
    for a, b in reversed(done[best_at:]):
        move(a)
        move(b)
    return best_at > 0
