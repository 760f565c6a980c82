"""Baseline mappings to compare the greedy one against: round-robin, random, Scotch and hierarchical grouping."""

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from coreplane.core.errors import CoreplaneError
from coreplane.graph.topology import Topology
from coreplane.map.comm import CommGraph

SCOTCH_GMAP = "scotch_gmap"  # Debian package `scotch`
SCOTCH_MAX_EDGE_WEIGHT = 10_000  # Scotch wants integer weights; sums must stay within int32


def round_robin(comm: CommGraph, topo: Topology, capacity: int) -> np.ndarray:
    """Process i on core i mod C: what a launcher does with no information."""
    return np.arange(comm.n, dtype=np.int64) % topo.n_cores


def random_map(comm: CommGraph, topo: Topology, capacity: int, seed: int = 0) -> np.ndarray:
    """A uniformly random placement that respects the capacity."""
    slots = np.repeat(np.arange(topo.n_cores), capacity)
    return np.random.default_rng(seed).permutation(slots)[: comm.n].astype(np.int64)


def _scotch_target(topo: Topology) -> str:
    if topo.kind == "mesh":
        return f"mesh2D\n{topo.dims[0]} {topo.dims[1]}\n"
    if topo.kind == "torus":
        return f"torus2D\n{topo.dims[0]} {topo.dims[1]}\n"
    levels = topo.arities
    if not levels or int(np.prod(levels)) != topo.n_cores:
        raise CoreplaneError(f"scotch: topology {topo.spec} is not a uniform tree Scotch's tleaf can describe")
    # crossing the switch at level i (root = 0) costs 2*(L - i) hops
    pairs = " ".join(f"{a} {2 * (len(levels) - i)}" for i, a in enumerate(levels))
    return f"tleaf\n{len(levels)} {pairs}\n"


def scotch_graph(comm: CommGraph) -> str:
    """The traffic as a Scotch source graph (.grf): unit vertex loads, integer edge weights."""
    traffic = comm.traffic().tocsr()
    scale = SCOTCH_MAX_EDGE_WEIGHT / traffic.data.max() if traffic.nnz else 1.0
    lines = ["0", f"{comm.n} {traffic.nnz}", "0 010"]
    for p in range(comm.n):
        lo, hi = traffic.indptr[p], traffic.indptr[p + 1]
        w = np.maximum(1, np.rint(traffic.data[lo:hi] * scale)).astype(np.int64)
        lines.append(" ".join([str(hi - lo)] + [f"{a} {b}" for a, b in zip(w.tolist(), traffic.indices[lo:hi].tolist())]))
    return "\n".join(lines) + "\n"


def scotch_map(comm: CommGraph, topo: Topology, capacity: int, imbalance: float | None = None,
               strategy: str | None = None) -> np.ndarray:
    """Scotch's static mapping (dual recursive bipartitioning) via the `scotch_gmap` program, with
    its default load-imbalance tolerance (5 %) unless `imbalance` is given (0: strict balance) and
    its default strategy unless `strategy` names gmap's -c flags (q: quality, b: balance, s: speed)."""
    return scotch_maps(comm, topo, capacity, [{"imbalance": imbalance, "strategy": strategy}])[0]


def scotch_maps(comm: CommGraph, topo: Topology, capacity: int, variants: list[dict]) -> list[np.ndarray]:
    """scotch_map() for several option sets (keys imbalance, strategy) on one graph: the graph and
    target are written once and the `scotch_gmap` processes run at the same time."""
    exe = shutil.which(SCOTCH_GMAP)
    if not exe:
        raise CoreplaneError(f"{SCOTCH_GMAP} not found: install Debian's `scotch` package (make apt)")
    with tempfile.TemporaryDirectory(prefix="coreplane-scotch-") as tmp:
        grf, tgt = Path(tmp, "g.grf"), Path(tmp, "t.tgt")
        grf.write_text(scotch_graph(comm))
        tgt.write_text(_scotch_target(topo))
        outs, procs = [], []
        for i, variant in enumerate(variants):
            imbalance, strategy = variant.get("imbalance"), variant.get("strategy")
            options = ([] if imbalance is None else [f"-b{imbalance}"]) + ([f"-c{strategy}"] if strategy else [])
            outs.append(Path(tmp, f"m{i}.map"))
            procs.append(subprocess.Popen([exe, "-Cd", *options, str(grf), str(tgt), str(outs[-1])],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        stderrs = [proc.communicate()[1] for proc in procs]  # every one waited for before any error
        for proc, stderr in zip(procs, stderrs):
            if proc.returncode != 0:
                raise CoreplaneError(f"scotch_gmap failed: {(stderr.strip() or 'no message').splitlines()[-1]}")
        return [_read_scotch_mapping(out, comm.n) for out in outs]


def _read_scotch_mapping(path: Path, n: int) -> np.ndarray:
    placement = np.full(n, -1, dtype=np.int64)
    for line in path.read_text().split("\n")[1:]:
        if line.strip():
            vertex, part = line.split()
            placement[int(vertex)] = int(part)
    return placement


def hierarchical_map(comm: CommGraph, topo: Topology, capacity: int) -> np.ndarray:
    """TreeMatch-style grouping along the topology's hierarchy (Topology.hierarchy()).

    Top-down: at every tree node the processes are split among its subtrees in proportion to
    their core counts, each group grown greedily from the most communicating remaining process
    by adding the process with the most traffic into the group, so heavy partners share the
    deepest possible subtree. (TreeMatch proper groups bottom-up; both keep a heavy pair below
    their lowest common switch.)
    """
    if capacity < -(-comm.n // topo.n_cores):
        raise CoreplaneError(f"capacity {capacity} cannot hold {comm.n} processes on {topo.n_cores} cores")
    traffic = comm.traffic().tocsr()
    placement = np.full(comm.n, -1, dtype=np.int64)

    def leaves(node) -> list[int]:
        return [node] if isinstance(node, int) else [c for child in node for c in leaves(child)]

    def assign(node, procs: list[int]) -> None:
        if isinstance(node, int):
            placement[procs] = node
            return
        sizes = [len(leaves(child)) for child in node]
        total = sum(sizes)
        share = [len(procs) * s // total for s in sizes]
        for i in np.argsort([-(len(procs) * s % total) for s in sizes], kind="stable")[: len(procs) - sum(share)]:
            share[i] += 1
        remaining = set(procs)
        for child, want in zip(node, share):
            group: list[int] = []
            if want and remaining:
                rest = sorted(remaining)
                sub = traffic[rest][:, rest]
                seed = rest[int(np.argmax(np.asarray(sub.sum(axis=1)).ravel()))]
                group.append(seed)
                remaining.discard(seed)
                pull = np.asarray(traffic[seed].todense()).ravel()
                while len(group) < want and remaining:
                    cand = np.fromiter(remaining, dtype=np.int64)
                    nxt = int(cand[np.argmax(pull[cand])])
                    group.append(nxt)
                    remaining.discard(nxt)
                    pull += np.asarray(traffic[nxt].todense()).ravel()
            assign(child, group)

    assign(topo.hierarchy(), list(range(comm.n)))
    return placement
