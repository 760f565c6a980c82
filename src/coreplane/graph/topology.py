"""Layer 3 of the NetworkedOS graph: cores and links, from a spec (mesh/torus/tree) or this host's sysfs."""

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from coreplane.core.cpulist import parse_cpu_list
from coreplane.core.errors import CoreplaneError
from coreplane.doctor.host import Host

MAX_CORES = 4096  # the all-pairs hop matrix is C x C; beyond this a spec is a typo more often than a plan

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

    def __post_init__(self):
        if not self.cpu_ids:
            self.cpu_ids = list(range(self.n_cores))

    # ---- distances -------------------------------------------------------------------------
    @cached_property
    def hops(self) -> np.ndarray:
        """All-pairs hop counts between cores (int32, C x C)."""
        if self.kind in ("mesh", "torus"):
            X, Y = self.dims
            idx = np.arange(self.n_cores)
            x, y = idx % X, idx // X
            dx = np.abs(x[:, None] - x[None, :])
            dy = np.abs(y[:, None] - y[None, :])
            if self.kind == "torus":
                dx = np.minimum(dx, X - dx)
                dy = np.minimum(dy, Y - dy)
            return (dx + dy).astype(np.int32)
        anc = self._ancestors
        equal = anc[:, None, :] == anc[None, :, :]
        common = np.cumprod(equal, axis=2).sum(axis=2)  # levels shared from the root down
        return (2 * (anc.shape[1] - common)).astype(np.int32)

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

    @cached_property
    def hop_rows(self) -> list[list[int]]:
        """The hop table as Python lists, for loops that read it one entry at a time (a list
        read costs a fraction of a numpy scalar read); built once per machine, like `hops`."""
        return self.hops.tolist()

    @cached_property
    def total_hops(self) -> np.ndarray:
        """Per core, its hops to every other core summed."""
        return self.hops.sum(axis=1)

    @cached_property
    def center(self) -> int:
        """The core with the smallest total distance to all others."""
        return int(np.argmin(self.total_hops))

    @cached_property
    def nearest(self) -> list[list[int]]:
        """Per core, the other cores at its smallest hop distance (a mesh's adjacent routers, a
        tree's siblings): what a placement looks up instead of a row of the hop table."""
        out = []
        for row in self.hops:
            others = row[row > 0]
            out.append(np.flatnonzero(row == others.min()).tolist() if len(others) else [])
        return out

    def within(self, reach: int) -> list[list[int]]:
        """Per core, the cores at most `reach` hops from it (itself included); built once per reach."""
        if reach not in self._within:
            self._within[reach] = [np.flatnonzero(row <= reach).tolist() for row in self.hops]
        return self._within[reach]

    @cached_property
    def by_distance(self) -> np.ndarray:
        """Row c: all cores sorted by hop distance from c (c first), ties by core number."""
        return np.argsort(self.hops, axis=1, kind="stable")

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
