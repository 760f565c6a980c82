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


def fit_capacity(comm: CommGraph, topo: Topology, placement: np.ndarray, capacity: int) -> np.ndarray:
    """A placement with no core over `capacity`: every process beyond a core's capacity (the one
    whose leaving costs least first) moves to the core with room where its traffic costs least.
    Scotch balances loads within a tolerance and may put two processes on a core meant for one."""
    placement = placement.copy()
    traffic = comm.traffic().tocsr()
    count = np.bincount(placement, minlength=topo.n_cores)
    for core in np.flatnonzero(count > capacity).tolist():
        while count[core] > capacity:
            best = None
            for p in np.flatnonzero(placement == core).tolist():
                nbrs = traffic.indices[traffic.indptr[p]:traffic.indptr[p + 1]]
                w = traffic.data[traffic.indptr[p]:traffic.indptr[p + 1]]
                room = np.flatnonzero(count < capacity)
                cost = topo.hops[np.ix_(room, placement[nbrs])] @ w - topo.hops[core, placement[nbrs]] @ w
                i = int(np.argmin(cost))
                if best is None or cost[i] < best[0]:
                    best = (cost[i], p, int(room[i]))
            _, p, target = best
            placement[p] = target
            count[core] -= 1
            count[target] += 1
    return placement


def portfolio(comm: CommGraph, topo: Topology, capacity: int) -> np.ndarray:
    """Compile-time portfolio: Scotch's mapping made to fit the capacity (fit_capacity) and the
    paper's greedy, each followed by coreplane's swap refinement (refine()); the one with fewer
    hop-bytes is kept. Refinement never raises hop-bytes, so the result is at most Scotch's
    whenever Scotch's own mapping already respects the capacity."""
    starts = [fit_capacity(comm, topo, baselines.scotch_map(comm, topo, capacity), capacity),
              greedy_map(comm, topo, capacity)]
    return min((refine(comm, topo, s, capacity) for s in starts), key=lambda p: hop_bytes(comm, topo, p))


METHODS = {
    "greedy": greedy_map,
    "greedy-refined": greedy_refined,
    "portfolio": portfolio,
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
