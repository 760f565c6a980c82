"""Every mapping method by name, and running one with its time and metrics."""

import time

import numpy as np

from coreplane.core.errors import CoreplaneError
from coreplane.graph.topology import Topology
from coreplane.map import baselines
from coreplane.map.comm import CommGraph
from coreplane.map.greedy import greedy_map, refine
from coreplane.map.metrics import check_placement, evaluate


def hop_bytes(comm: CommGraph, topo: Topology, placement: np.ndarray) -> float:
    return float((comm.weight * topo.hops[placement[comm.src], placement[comm.dst]]).sum())


def greedy_refined(comm: CommGraph, topo: Topology, capacity: int) -> np.ndarray:
    """Compile-time variant: the better of the greedy walk and the hierarchical grouping as a
    start, then swap refinement (refine()). Not O(P); for when a mapping is computed ahead."""
    starts = [greedy_map(comm, topo, capacity), baselines.hierarchical_map(comm, topo, capacity)]
    start = min(starts, key=lambda p: hop_bytes(comm, topo, p))
    return refine(comm, topo, start, capacity)


METHODS = {
    "greedy": greedy_map,
    "greedy-refined": greedy_refined,
    "round-robin": baselines.round_robin,
    "random": baselines.random_map,
    "scotch": baselines.scotch_map,
    "treematch": baselines.hierarchical_map,
}


def run(method: str, comm: CommGraph, topo: Topology, capacity: int) -> dict:
    """Places comm on topo with `method`; returns placement, seconds, metrics and capacity validity."""
    if method not in METHODS:
        raise CoreplaneError(f"--method {method}: unknown, expected one of {', '.join(METHODS)}")
    if capacity * topo.n_cores < comm.n:
        raise CoreplaneError(f"{comm.n} processes do not fit {topo.n_cores} cores x capacity {capacity}")
    started = time.perf_counter()
    placement = np.asarray(METHODS[method](comm, topo, capacity), dtype=np.int64)
    seconds = time.perf_counter() - started
    try:
        check_placement(comm, topo, placement, capacity)
        valid = None
    except CoreplaneError as exc:  # Scotch balances loads within a tolerance and may overfill a core
        valid = str(exc)
    return {"method": method, "placement": placement, "seconds": seconds,
            "metrics": evaluate(comm, topo, placement), "violation": valid}
