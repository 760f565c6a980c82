"""A generated family of communication graphs and target machines, with fixed seeds, for judging mappings on graphs nobody tuned for."""

from dataclasses import dataclass

import networkx as nx
import numpy as np

from coreplane.core.errors import CoreplaneError
from coreplane.map.comm import CommGraph

KINDS = ("stencil2d", "stencil3d", "geometric", "tree", "smallworld", "regular", "pipeline", "unbalanced")
SIZES = (16, 64, 256, 1024)
# one target per size and kind of network; P = cores (capacity 1) unless a member says otherwise
TOPOLOGIES = {
    16: ("mesh:4x4", "torus:4x4", "tree:2,8"),
    64: ("mesh:8x8", "torus:8x8", "tree:4,4,4"),
    256: ("mesh:16x16", "torus:16x16", "tree:4,8,8"),
    1024: ("mesh:32x32", "torus:32x32", "tree:8,8,16"),
}
MESSAGE_BYTES = 1024.0


@dataclass(frozen=True)
class Member:
    """One graph of the family on one topology: regenerated identically from (kind, processes, seed)."""

    kind: str
    processes: int
    topology: str
    seed: int
    capacity: int = 1

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.processes}@{self.topology}"

    def graph(self) -> CommGraph:
        return generate(self.kind, self.processes, self.seed)


def _factor(p: int, parts: int) -> list[int]:
    """p as a product of `parts` factors as equal as possible (largest first)."""
    dims = [1] * parts
    for prime in _primes(p):
        dims.sort()
        dims[0] *= prime
    return sorted(dims, reverse=True)


def _primes(p: int) -> list[int]:
    out, d = [], 2
    while d * d <= p:
        while p % d == 0:
            out.append(d)
            p //= d
        d += 1
    return sorted(out + ([p] if p > 1 else []), reverse=True)


def _stencil(dims: list[int]) -> list[tuple[int, int]]:
    """Nearest-neighbour pairs of a non-periodic grid of the given dims (row-major ranks)."""
    idx = np.arange(int(np.prod(dims))).reshape(dims)
    pairs = []
    for axis in range(len(dims)):
        a = np.take(idx, range(dims[axis] - 1), axis=axis).ravel()
        b = np.take(idx, range(1, dims[axis]), axis=axis).ravel()
        pairs += list(zip(a.tolist(), b.tolist()))
    return pairs


def _edges(kind: str, p: int, rng: np.random.Generator, seed: int) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Undirected pairs and their bytes per direction."""
    if kind == "stencil2d":
        pairs = _stencil(_factor(p, 2))
    elif kind == "stencil3d":
        pairs = _stencil(_factor(p, 3))
    elif kind == "geometric":  # radius for a mean degree of ~6, then joined into one component
        g = nx.random_geometric_graph(p, np.sqrt(6.0 / (np.pi * p)), seed=seed)
        pos = nx.get_node_attributes(g, "pos")
        comps = [sorted(c) for c in nx.connected_components(g)]
        for a, b in zip(comps, comps[1:]):  # link each component to the next at their closest points
            u, v = min(((u, v) for u in a for v in b), key=lambda e: np.hypot(*np.subtract(pos[e[0]], pos[e[1]])))
            g.add_edge(u, v)
        pairs = list(g.edges())
    elif kind == "tree":  # binary reduction: rank i sends to (i-1)//2
        pairs = [((i - 1) // 2, i) for i in range(1, p)]
    elif kind == "smallworld":
        pairs = list(nx.connected_watts_strogatz_graph(p, 4, 0.1, seed=seed).edges())
    elif kind == "regular":
        pairs = list(nx.random_regular_graph(4, p, seed=seed).edges())
    elif kind == "pipeline":  # P/8 independent 8-stage pipelines, bytes rising downstream as data is expanded
        stages = 8 if p >= 8 else p
        pairs = [(s * stages + i, s * stages + i + 1) for s in range(p // stages) for i in range(stages - 1)]
        return pairs, MESSAGE_BYTES * (1 + np.array([b % stages for _, b in pairs], dtype=float))
    elif kind == "unbalanced":  # a 2-D stencil whose edges carry heavy-tailed (Pareto) volumes
        pairs = _stencil(_factor(p, 2))
        return pairs, MESSAGE_BYTES * (1 + rng.pareto(1.2, len(pairs)))
    else:
        raise CoreplaneError(f"family kind '{kind}': unknown, expected one of {', '.join(KINDS)}")
    return pairs, MESSAGE_BYTES * rng.uniform(0.5, 2.0, len(pairs))


def generate(kind: str, p: int, seed: int) -> CommGraph:
    """The family's graph `kind` with p processes; ranks are shuffled (seeded) so that no method
    profits from ranks numbered in the topology's own order."""
    rng = np.random.default_rng(seed)
    pairs, w = _edges(kind, p, rng, seed)
    rank = rng.permutation(p)
    a = rank[np.array([u for u, _ in pairs], dtype=np.int64)]
    b = rank[np.array([v for _, v in pairs], dtype=np.int64)]
    load = rng.lognormal(0.0, 1.0, p) if kind == "unbalanced" else np.ones(p)
    return CommGraph(names=[f"{kind}{i}" for i in range(p)], src=np.concatenate([a, b]),
                     dst=np.concatenate([b, a]), weight=np.concatenate([w, w]), load=load)


def members(sizes: tuple[int, ...] = SIZES, kinds: tuple[str, ...] = KINDS) -> list[Member]:
    """Every (kind, size, topology) of the family; the seed is fixed per kind and size. Pipelines
    also run at two processes per core, the case where capacity decides who shares a core."""
    out = []
    for size in sizes:
        for k, kind in enumerate(kinds):
            for topo in TOPOLOGIES[size]:
                out.append(Member(kind, size, topo, seed=1000 * k + size))
                if kind == "pipeline":
                    out.append(Member(kind, 2 * size, topo, seed=1000 * k + size, capacity=2))
    return out
