"""Layer 3 of the NetworkedOS graph: cores and links, from a spec (mesh/torus/tree) or this host's sysfs."""

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from coreplane.core.cpulist import parse_cpu_list
from coreplane.core.errors import CoreplaneError
from coreplane.doctor.host import Host

MAX_CORES = 4096  # beyond this a spec is a typo more often than a plan
ROW_SUM_ENTRIES = 1 << 20  # distances computed at once by row_sums (8 MB of int64)
RING_CACHE_RADIUS = 3  # rings this small are kept: O(C) entries in all

SPEC_HELP = "expected mesh:XxY, torus:XxY, tree:A,B,... (arity per level, root first) or host"


@dataclass
class Topology:
    """Cores 0..n_cores-1 and the network joining them.

    Network nodes are the cores (0..n_cores-1) followed by switches (trees only). For a mesh or
    torus, core = y*X + x (the numbering Scotch's mesh2D/torus2D targets use), one router per core.
    For a tree, cores are the leaves and every message climbs to the lowest common switch.
    """

    spec: str
    kind: str  # mesh | torus | tree
    n_cores: int
    dims: tuple[int, int] | None = None
    parent: list[int] | None = None  # trees: parent network node of each node (-1 = root)
    arities: list[int] | None = None  # trees: children per level, root first
    cpu_ids: list[int] = field(default_factory=list)  # OS CPU number of each core (host), else 0..n-1
    _within: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # within()'s tables
    _rings: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # ring()'s small rings

    def __post_init__(self):
        if not self.cpu_ids:
            self.cpu_ids = list(range(self.n_cores))

    # ---- distances ----------------------------------------------------------------------------
    # Every distance is computed in closed form from O(C) tables: a mesh's or torus's coordinates,
    # a tree's chains of switches. `hops`, the C x C matrix, is kept for callers that want one
    # (metrics, the baselines) and for small machines; the mapping methods never build it.
    @cached_property
    def hops(self) -> np.ndarray:
        """All-pairs hop counts between cores (int32, C x C)."""
        idx = np.arange(self.n_cores)
        return self.distance(idx[:, None], idx[None, :]).astype(np.int32)

    def distance(self, a, b) -> np.ndarray:
        """Hops between cores a and b (integers or arrays, broadcast together): |dx| + |dy| on a
        mesh, each the shorter way round on a torus; on a tree twice the levels below the lowest
        common switch."""
        a, b = np.asarray(a), np.asarray(b)
        if self.kind in ("mesh", "torus"):
            X, Y = self.dims
            dx, dy = np.abs(a % X - b % X), np.abs(a // X - b // X)
            if self.kind == "torus":
                dx, dy = np.minimum(dx, X - dx), np.minimum(dy, Y - dy)
            return dx + dy
        anc = self._ancestors
        common = np.cumprod(anc[a] == anc[b], axis=-1).sum(axis=-1)  # levels shared from the root down
        return 2 * (anc.shape[1] - common)

    @cached_property
    def hop(self):
        """distance() for two core numbers as a plain Python function (a loop that reads one
        distance at a time pays far less than a numpy call per read)."""
        if self.kind in ("mesh", "torus"):
            X, Y = self.dims
            xs, ys = [c % X for c in range(self.n_cores)], [c // X for c in range(self.n_cores)]
            if self.kind == "mesh":
                return lambda a, b: abs(xs[a] - xs[b]) + abs(ys[a] - ys[b])

            def torus_hop(a: int, b: int) -> int:
                dx, dy = abs(xs[a] - xs[b]), abs(ys[a] - ys[b])
                return (dx if 2 * dx <= X else X - dx) + (dy if 2 * dy <= Y else Y - dy)
            return torus_hop
        chains, depth = self._ancestors.tolist(), self._ancestors.shape[1]

        def tree_hop(a: int, b: int) -> int:
            ca, cb, k = chains[a], chains[b], 0
            while k < depth and ca[k] == cb[k]:
                k += 1
            return 2 * (depth - k)
        return tree_hop

    @cached_property
    def hop_sum(self):
        """A plain Python function f(core, pairs, where) = sum of w x hops(core, where[q]) over the
        (q, w) of `pairs`: a process's traffic priced on a core, the arithmetic of hop() inlined
        (one call per process and core instead of one per partner)."""
        hop = self.hop
        if self.kind in ("mesh", "torus"):
            X, Y = self.dims
            xs, ys = [c % X for c in range(self.n_cores)], [c // X for c in range(self.n_cores)]
            if self.kind == "mesh":
                def mesh_sum(core: int, pairs, where) -> float:
                    x, y = xs[core], ys[core]
                    return sum(w * (abs(x - xs[where[q]]) + abs(y - ys[where[q]])) for q, w in pairs)
                return mesh_sum

            def torus_sum(core: int, pairs, where) -> float:
                x, y, total = xs[core], ys[core], 0.0
                for q, w in pairs:
                    dx, dy = abs(x - xs[where[q]]), abs(y - ys[where[q]])
                    total += w * ((dx if 2 * dx <= X else X - dx) + (dy if 2 * dy <= Y else Y - dy))
                return total
            return torus_sum
        return lambda core, pairs, where: sum(w * hop(core, where[q]) for q, w in pairs)

    def hop_row(self, core: int) -> np.ndarray:
        """Hops from `core` to every core (one row of `hops`, computed)."""
        return self.distance(core, np.arange(self.n_cores))

    @cached_property
    def _ancestors(self) -> np.ndarray:
        """Trees: row c = the chain of network nodes from the root down to core c (inclusive)."""
        chains = []
        for core in range(self.n_cores):
            chain, node = [], core
            while node != -1:
                chain.append(node)
                node = self.parent[node]
            chains.append(chain[::-1])
        depth = max(len(c) for c in chains)
        return np.array([c + [-1 - i for i in range(depth - len(c))] for c in chains])

    def row_sums(self, rows, cols) -> np.ndarray:
        """Per core of `rows`, its hops to all of `cols` summed: in chunks of rows, so that memory
        stays O(C) however large the machine (the time is |rows| x |cols| distances)."""
        rows, cols = np.asarray(rows), np.asarray(cols)
        chunk = max(1, ROW_SUM_ENTRIES // max(1, len(cols)))
        return np.concatenate([self.distance(rows[i:i + chunk, None], cols[None, :]).sum(axis=1)
                               for i in range(0, len(rows), chunk)] or [np.zeros(0, dtype=np.int64)])

    @cached_property
    def total_hops(self) -> np.ndarray:
        """Per core, its hops to every other core summed."""
        every = np.arange(self.n_cores)
        return self.row_sums(every, every)

    @cached_property
    def center(self) -> int:
        """The core with the smallest total distance to all others."""
        return int(np.argmin(self.total_hops))

    @cached_property
    def max_distance(self) -> int:
        """A bound on the hop count between two cores: the largest on a mesh and a torus; on a
        tree, twice its depth, which a level of arity 1 makes more than any pair has (tree:1,4
        gives 4 where no pair is more than 2 apart). Used to bound loops."""
        if self.kind == "mesh":
            return self.dims[0] + self.dims[1] - 2
        if self.kind == "torus":
            return self.dims[0] // 2 + self.dims[1] // 2
        return 2 * (self._ancestors.shape[1] - 1)

    def ring(self, core: int, d: int) -> list[int]:
        """The cores exactly d hops from `core`, in core order: O(d) to make on a mesh or torus
        (a diamond of offsets, wrapped on a torus, kept if its distance is d), a switch's leaves
        on a tree. Rings of radius up to RING_CACHE_RADIUS are kept (O(C) in all), larger ones
        made when asked. The rings of increasing d are a row of `hops` sorted, never stored."""
        key = (core, d)
        if key in self._rings:
            return self._rings[key]
        if self.kind == "tree":
            out = self._tree_ring(core, d)
        elif d == 0:
            out = [core]
        else:
            X, Y = self.dims
            x0, y0 = core % X, core // X
            if self.kind == "mesh":  # the diamond's offsets inside the mesh, row by row: in core order
                out = [y * X + x for y in range(max(0, y0 - d), min(Y - 1, y0 + d) + 1)
                       for rest in (d - abs(y - y0),) for x in ((x0 - rest, x0 + rest) if rest else (x0,))
                       if 0 <= x < X]
            else:  # wrapped; where the diamond wraps onto itself, kept only if the short way is d long
                hop = self.hop
                out = sorted({((y0 + dy) % Y) * X + (x0 + dx) % X for dy in range(-d, d + 1)
                              for dx in {d - abs(dy), abs(dy) - d}})
                if 2 * d > min(X, Y) - 1:
                    out = [c for c in out if hop(core, c) == d]
        if d <= RING_CACHE_RADIUS:
            self._rings[key] = out
        return out

    def _tree_ring(self, core: int, d: int) -> list[int]:
        if d % 2:
            return []
        chain = self._ancestors[core]
        depth = len(chain)
        up = d // 2
        if up == 0:
            return [core]
        if up >= depth:
            return []
        leaves = self._leaves
        return sorted(set(leaves[int(chain[depth - 1 - up])]) - set(leaves[int(chain[depth - up])]))

    @cached_property
    def _leaves(self) -> dict[int, list[int]]:
        """Trees: the cores below each network node (O(C x depth))."""
        out: dict[int, list[int]] = {}
        for core, chain in enumerate(self._ancestors.tolist()):
            for node in chain:
                out.setdefault(node, []).append(core)
        return out

    @cached_property
    def nearest(self) -> list[list[int]]:
        """Per core, the other cores at its smallest hop distance (a mesh's adjacent routers, a
        tree's siblings): what a placement looks up instead of a row of the hop table."""
        out = []
        for core in range(self.n_cores):
            d = 1
            while d <= self.max_distance and not self.ring(core, d):
                d += 1
            out.append(self.ring(core, d) if d <= self.max_distance else [])
        return out

    def within(self, reach: int) -> list[list[int]]:
        """Per core, the cores at most `reach` hops from it (itself included, in core order);
        built once per reach."""
        if reach not in self._within:
            self._within[reach] = [sorted(c for d in range(reach + 1) for c in self.ring(core, d))
                                   for core in range(self.n_cores)]
        return self._within[reach]

    # ---- routing ---------------------------------------------------------------------------
    def route(self, a: int, b: int) -> list[tuple[int, int]]:
        """Directed links (network node pairs) a message from core a to core b crosses.

        Mesh and torus use XY (dimension-order) routing, the torus taking the shorter way round
        in each dimension; a tree goes up to the lowest common switch and down.
        """
        if a == b:
            return []
        if self.kind in ("mesh", "torus"):
            X, Y = self.dims
            path = [a]
            x, y = a % X, a // X
            for axis, size, target in ((0, X, b % X), (1, Y, b // X)):
                cur = x if axis == 0 else y
                step = 1 if target > cur else -1
                if self.kind == "torus" and abs(target - cur) > size - abs(target - cur):
                    step = -step
                while cur != target:
                    cur = (cur + step) % size
                    if axis == 0:
                        x = cur
                    else:
                        y = cur
                    path.append(y * X + x)
            return list(zip(path[:-1], path[1:]))
        up_a = [int(n) for n in self._ancestors[a][::-1]]
        up_b = [int(n) for n in self._ancestors[b][::-1]]
        common = next(n for n in up_a if n in set(up_b))
        up = up_a[: up_a.index(common) + 1]
        down = up_b[: up_b.index(common)][::-1]
        path = up + down
        return list(zip(path[:-1], path[1:]))

    # ---- hierarchy (TreeMatch) ----------------------------------------------------------------
    def hierarchy(self) -> list:
        """The cores as a nested list: a tree's own levels; a mesh/torus by recursive bisection
        of its longer side (so every subtree is a compact rectangle)."""
        if self.kind == "tree":
            children: dict[int, list[int]] = {}
            for node, par in enumerate(self.parent):
                children.setdefault(par, []).append(node)

            def build(node: int):
                return node if node < self.n_cores else [build(c) for c in children[node]]

            return build(children[-1][0])
        X, Y = self.dims

        def split(x0, x1, y0, y1):
            if x1 - x0 == 1 and y1 - y0 == 1:
                return y0 * X + x0
            if x1 - x0 >= y1 - y0:
                m = (x0 + x1) // 2
                return [split(x0, m, y0, y1), split(m, x1, y0, y1)]
            m = (y0 + y1) // 2
            return [split(x0, x1, y0, m), split(x0, x1, m, y1)]

        return split(0, X, 0, Y)

    def as_dict(self) -> dict:
        """JSON-able description (what `coreplane map --json` echoes)."""
        d = {"spec": self.spec, "kind": self.kind, "cores": self.n_cores, "cpu_ids": self.cpu_ids}
        if self.dims:
            d["dims"] = list(self.dims)
        if self.arities:
            d["arities"] = self.arities
        return d

    def links(self) -> list[tuple[int, int]]:
        """Undirected links between network nodes (each once, lower node first)."""
        if self.kind == "tree":
            return [(min(n, p), max(n, p)) for n, p in enumerate(self.parent) if p != -1]
        X, Y = self.dims
        out = set()
        for core in range(self.n_cores):
            x, y = core % X, core // X
            for nx, ny in ((x + 1, y), (x, y + 1)):
                if self.kind == "torus":
                    nx, ny = nx % X, ny % Y
                if nx < X and ny < Y and (nx, ny) != (x, y):
                    other = ny * X + nx
                    out.add((min(core, other), max(core, other)))
        return sorted(out)


def _positive_ints(spec: str, text: str, sep: str) -> list[int]:
    parts = text.split(sep)
    if not parts or not all(re.fullmatch(r"[1-9][0-9]*", p) for p in parts):
        raise CoreplaneError(f"topology '{spec}': '{text}' is not a '{sep}'-separated list of positive integers; {SPEC_HELP}")
    return [int(p) for p in parts]


def _tree(spec: str, arities: list[int], cpu_ids: list[int] | None = None) -> Topology:
    n_cores = int(np.prod(arities))
    # switches numbered after the cores, level by level from the root
    parent = [-1] * n_cores
    level_nodes = [len(parent)]
    parent.append(-1)  # root switch
    for depth, arity in enumerate(arities):
        last = depth == len(arities) - 1
        nxt = []
        for i, node in enumerate(level_nodes):
            for k in range(arity):
                if last:
                    parent[i * arity + k] = node
                else:
                    nxt.append(len(parent))
                    parent.append(node)
        level_nodes = nxt
    return Topology(spec=spec, kind="tree", n_cores=n_cores, parent=parent, arities=arities,
                    cpu_ids=cpu_ids or [])


def parse_spec(spec: str, root: str = "/") -> Topology:
    """Topology from `mesh:8x16`, `torus:4x4`, `tree:2,4,8` or `host`; a malformed spec is one clear error."""
    spec = (spec or "").strip()
    if spec == "host":
        return host_topology(root)
    kind, sep, arg = spec.partition(":")
    if not sep or not arg:
        raise CoreplaneError(f"topology '{spec}': {SPEC_HELP}")
    if kind in ("mesh", "torus"):
        dims = _positive_ints(spec, arg, "x")
        if len(dims) != 2:
            raise CoreplaneError(f"topology '{spec}': {kind} needs exactly two dimensions XxY")
        n = dims[0] * dims[1]
        if n > MAX_CORES:
            raise CoreplaneError(f"topology '{spec}': {n} cores, at most {MAX_CORES} are supported")
        return Topology(spec=spec, kind=kind, n_cores=n, dims=(dims[0], dims[1]))
    if kind == "tree":
        arities = _positive_ints(spec, arg, ",")
        n = int(np.prod(arities))
        if n > MAX_CORES:
            raise CoreplaneError(f"topology '{spec}': {n} cores, at most {MAX_CORES} are supported")
        return _tree(spec, arities)
    raise CoreplaneError(f"topology '{spec}': unknown kind '{kind}'; {SPEC_HELP}")


def host_topology(root: str = "/") -> Topology:
    """This machine (or a captured snapshot below `root`) as a tree read from sysfs:
    package -> last-level-cache domain -> core -> hardware thread."""
    host = Host(root)
    cpus = parse_cpu_list(host.read("/sys/devices/system/cpu/online"))
    if not cpus:
        raise CoreplaneError(f"{root}sys/devices/system/cpu/online: unreadable, cannot describe this host")
    keys = []
    for cpu in cpus:
        base = f"/sys/devices/system/cpu/cpu{cpu}"
        llc = ""
        for index in host.glob(f"{base}/cache/index*"):
            level = host.read(f"{index}/level") or "0"
            if int(level) >= int(llc.split("|")[0] or 0):
                llc = f"{level}|{host.read(f'{index}/shared_cpu_list') or cpu}"
        keys.append((host.read(f"{base}/topology/physical_package_id") or "0", llc,
                     host.read(f"{base}/topology/core_id") or str(cpu), cpu))
    # build the tree: one switch per distinct prefix (package), (package, llc), (package, llc, core)
    parent = [-1] * len(cpus)
    switches: dict[tuple, int] = {}

    def switch(prefix: tuple) -> int:
        if prefix not in switches:
            up = switch(prefix[:-1]) if prefix else -1
            switches[prefix] = len(parent)
            parent.append(up)
        return switches[prefix]

    for i, (pkg, llc, core, _cpu) in enumerate(keys):
        parent[i] = switch((pkg, llc, core))
    arities = [len({k[0] for k in keys})]
    topo = Topology(spec="host", kind="tree", n_cores=len(cpus), parent=parent, arities=None,
                    cpu_ids=cpus)
    topo.arities = arities + [len(set(k[:2] for k in keys)) // arities[0],
                              len(set(k[:3] for k in keys)) // len(set(k[:2] for k in keys)),
                              len(cpus) // len(set(k[:3] for k in keys))]
    return topo
