"""`coreplane graph partition`: minimise T (critical-path or eq. 1-4) with the native greedy multilevel partitioner."""

import json
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from coreplane.core.errors import CoreplaneError
from coreplane.core.native import binary, error_line
from coreplane.graph.model import MultiLayerGraph
from coreplane.graph.quality import SLACK, Model, Quality, quality

EDGE_RECORD = np.dtype([("src", "<u4"), ("dst", "<u4"), ("weight", "<f4"), ("kind", "<u4")])


@dataclass
class Partition:
    """Clusters of one layer: home cluster per node, replicas (overlaps), and T."""

    method: str
    membership: np.ndarray
    replicas: list[tuple[int, int]]
    quality: Quality
    cut: float
    seconds: float
    cores: float  # N the partition was computed for
    detail: dict = field(default_factory=dict)

    @property
    def threads(self) -> int:
        """The number of threads the partition proposes: the most processes at one depth (they run
        at once), capped at the N cores it was computed for. The one place this count is derived."""
        return min(self.quality.width, int(self.cores))

    def summary(self) -> dict:
        sizes = np.bincount(self.membership) if len(self.membership) else np.zeros(0, int)
        sizes = sizes[sizes > 0]
        return {"method": self.method, "processes": int(len(sizes)), **self.quality.as_dict(),
                "threads": self.threads,
                "cut": self.cut, "replicas": len(self.replicas), "seconds": round(self.seconds, 4),
                "largest_cluster": int(sizes.max(initial=0)),
                "median_cluster": float(np.median(sizes)) if len(sizes) else 0.0, **self.detail}


def layer_arrays(graph: MultiLayerGraph, layer: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """(node count, src, dst, weight) of one layer's intra-layer edges."""
    n = int((graph.nodes["layer"] == layer).sum())
    if n == 0:
        raise CoreplaneError(f"graph has no layer-{layer} nodes (build it with that layer enabled)")
    e = graph.layer_edges(layer)
    return n, e["src"].to_numpy(np.int64), e["dst"].to_numpy(np.int64), e["weight"].to_numpy(float)


def cut_weight(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, membership: np.ndarray) -> float:
    """Weight of the edges whose ends lie in different clusters."""
    return float(weight[membership[src] != membership[dst]].sum())


def greedy_partition(n: int, src, dst, weight, model: Model, seed: int = 1, restarts: int = 1,
                     overlap: bool = True, slack: float = SLACK) -> Partition:
    """The paper's greedy multilevel local moving, then (critical model) the clusters of each depth
    packed into as few processes as T allows within `slack`, then overlapping clusters (native,
    crates/netos). The result's `threads` (Partition.threads) is how many it proposes to run at once."""
    if model.cores < 1:
        raise CoreplaneError(f"--cores {model.cores:g}: N must be at least 1")
    if not (model.message_cost >= 0 and slack >= 0):   # NaN too
        raise CoreplaneError(f"--message-cost {model.message_cost:g} and --slack {slack:g} must not be negative")
    with tempfile.TemporaryDirectory(prefix="coreplane-part-") as tmp:
        edges = np.zeros(len(src), dtype=EDGE_RECORD)
        edges["src"], edges["dst"], edges["weight"] = src, dst, weight
        edges.tofile(Path(tmp, "g.edges"))
        args = [str(binary("coreplane-partition")), "--edges", str(Path(tmp, "g.edges")), "--nodes", str(n),
                "--cores", str(model.cores), "--out", str(Path(tmp, "p")), "--seed", str(seed),
                "--restarts", str(restarts), "--model", model.kind, "--message-cost", str(model.message_cost),
                "--slack", str(slack)] + ([] if overlap else ["--no-overlap"])
        started = time.perf_counter()
        proc = subprocess.run(args, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if proc.returncode != 0:
            raise CoreplaneError(error_line(proc.stderr, proc.returncode))
        doc = json.loads(proc.stdout)
        membership = np.fromfile(Path(tmp, "p.membership"), dtype="<u4").astype(np.int64)
        replicas = [tuple(r) for r in np.fromfile(Path(tmp, "p.replicas"), dtype="<u4").reshape(-1, 2).tolist()]
    q = Quality(t=doc["t"], w_seq=doc["w_seq"], w_par=doc["w_par"], w_c=doc["w_c"],
                clusters=int(len(np.unique(membership))), depths=doc["depths"], width=doc["width"])
    return Partition("greedy", membership, replicas, q, cut_weight(src, dst, weight, membership), seconds, model.cores,
                     {"model": model.kind, "message_cost": model.message_cost, "levels": doc["levels"],
                      "t_disjoint": doc["t_disjoint"], "clusters_before_packing": doc["clusters_before_packing"],
                      "native_s": doc["total_s"]})


def evaluate(method: str, membership: np.ndarray, src, dst, weight, model: Model, seconds: float) -> Partition:
    """A Partition for any membership (baselines), with T from the reference quality()."""
    return Partition(method, membership, [], quality(src, dst, weight, membership, model),
                     cut_weight(src, dst, weight, membership), seconds, model.cores)
