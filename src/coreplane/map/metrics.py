"""Quality of a placement: hop-bytes, link loads under XY routing, and an analytic NoC latency/energy model."""

from collections import defaultdict
from dataclasses import asdict, dataclass

import numpy as np

from coreplane.core.errors import CoreplaneError
from coreplane.graph.topology import Topology
from coreplane.map.comm import CommGraph


@dataclass(frozen=True)
class NocModel:
    """Analytic network-on-chip parameters (model assumptions, not measurements).

    A packet crossing H links is buffered in H+1 routers: zero-load latency
    (H+1)*router_cycles + H*link_cycles + (flits-1) serialisation cycles. Energy per bit is
    (H+1)*router_pj_per_bit + H*link_pj_per_bit; traffic between threads on one core stays off the
    network (0 cycles, 0 pJ). Defaults are of the order published for 2-D mesh NoCs at ~1 GHz.
    """

    router_cycles: float = 3.0
    link_cycles: float = 1.0
    flit_bytes: int = 16
    packet_bytes: int = 64
    router_pj_per_bit: float = 1.0
    link_pj_per_bit: float = 0.4


def check_placement(comm: CommGraph, topo: Topology, placement: np.ndarray, capacity: int) -> None:
    """Raises unless every process sits on an existing core and no core holds more than `capacity`."""
    placement = np.asarray(placement)
    if placement.shape != (comm.n,):
        raise CoreplaneError(f"placement has {placement.shape[0]} entries for {comm.n} processes")
    if comm.n and (placement.min() < 0 or placement.max() >= topo.n_cores):
        raise CoreplaneError(f"placement uses core {int(placement.max())}, the topology has {topo.n_cores}")
    counts = np.bincount(placement, minlength=topo.n_cores)
    if counts.max(initial=0) > capacity:
        raise CoreplaneError(f"core {int(counts.argmax())} holds {int(counts.max())} processes, capacity is {capacity}")


def link_loads(comm: CommGraph, topo: Topology, placement: np.ndarray) -> dict[tuple[int, int], float]:
    """Bytes on every directed link (network node pair) when each message follows topo.route."""
    a, b = placement[comm.src], placement[comm.dst]
    cross = a != b
    pair_bytes: dict[tuple[int, int], float] = defaultdict(float)
    for u, v, w in zip(a[cross].tolist(), b[cross].tolist(), comm.weight[cross].tolist()):
        pair_bytes[(u, v)] += w
    loads: dict[tuple[int, int], float] = defaultdict(float)
    for (u, v), w in pair_bytes.items():
        for link in topo.route(u, v):
            loads[link] += w
    return loads


def evaluate(comm: CommGraph, topo: Topology, placement: np.ndarray, model: NocModel = NocModel()) -> dict:
    """Every metric of one placement, as a JSON-able dict."""
    placement = np.asarray(placement, dtype=np.int64)
    # distance() in closed form, not the C x C table (O(C²) memory the mapping avoided).
    hops = topo.distance(placement[comm.src], placement[comm.dst]).astype(float)
    total = float(comm.weight.sum())
    hop_bytes = float((comm.weight * hops).sum())
    loads = link_loads(comm, topo, placement)
    flits = -(-model.packet_bytes // model.flit_bytes)
    on_noc = hops > 0
    latency = np.where(on_noc, (hops + 1) * model.router_cycles + hops * model.link_cycles + flits - 1, 0.0)
    energy_pj = (comm.weight * 8 * np.where(on_noc, (hops + 1) * model.router_pj_per_bit
                                            + hops * model.link_pj_per_bit, 0.0)).sum()
    max_load = max(loads.values(), default=0.0)
    per_core = np.bincount(placement, minlength=topo.n_cores)
    return {
        "hop_bytes": hop_bytes,
        "total_bytes": total,
        "avg_hops": hop_bytes / total if total else 0.0,
        "max_link_load": max_load,
        "links_used": len(loads),
        "avg_packet_latency_cycles": float((comm.weight * latency).sum() / total) if total else 0.0,
        "bottleneck_cycles": max_load / model.flit_bytes,
        "energy_nj": float(energy_pj) / 1000.0,
        "max_processes_per_core": int(per_core.max(initial=0)),
        "cores_used": int((per_core > 0).sum()),
        "model": asdict(model),
    }
