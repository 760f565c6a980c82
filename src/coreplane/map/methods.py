"""Every mapping method by name, and running one with its time and metrics."""

import time

import numpy as np
from scipy.optimize import linear_sum_assignment

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
    """A placement with no core over `capacity`, as close as possible to `placement`: processes
    are assigned to core slots (capacity per core) minimising, for each, its traffic's hop-bytes
    to its partners where they are now (a linear assignment, scipy's linear_sum_assignment).
    Scotch balances loads within a tolerance and may put two processes on a core meant for one."""
    if np.bincount(placement, minlength=topo.n_cores).max() <= capacity:
        return placement
    cost = comm.traffic() @ topo.hops[:, placement].T.astype(float)  # P x C: p's traffic if p were on c
    slots = np.repeat(np.arange(topo.n_cores), capacity)
    rows, cols = linear_sum_assignment(np.asarray(cost)[:, slots])
    fitted = np.empty(comm.n, dtype=np.int64)
    fitted[rows] = slots[cols]
    return fitted


def scotch_valid(comm: CommGraph, topo: Topology, capacity: int) -> np.ndarray:
    """Scotch's mapping that respects the capacity: its default one (5 % load imbalance allowed)
    if no core is over capacity, otherwise the one with strict balance (scotch_gmap -b0)."""
    mapping = baselines.scotch_map(comm, topo, capacity)
    if np.bincount(mapping, minlength=topo.n_cores).max() <= capacity:
        return mapping
    return baselines.scotch_map(comm, topo, capacity, imbalance=0.0)


def portfolio(comm: CommGraph, topo: Topology, capacity: int) -> np.ndarray:
    """Compile-time portfolio: Scotch's default mapping made to fit the capacity (fit_capacity),
    Scotch's strictly balanced mapping and the paper's greedy, each followed by coreplane's swap
    refinement (refine()); the one with fewer hop-bytes is kept. Refinement never raises
    hop-bytes, so the result is at most scotch_valid()'s whenever that respects the capacity."""
    default = baselines.scotch_map(comm, topo, capacity)
    starts = [fit_capacity(comm, topo, default, capacity), greedy_map(comm, topo, capacity)]
    if np.bincount(default, minlength=topo.n_cores).max() > capacity:
        starts.append(baselines.scotch_map(comm, topo, capacity, imbalance=0.0))
    return min((refine(comm, topo, s, capacity) for s in starts), key=lambda p: hop_bytes(comm, topo, p))


METHODS = {
    "greedy": greedy_map,
    "greedy-refined": greedy_refined,
    "portfolio": portfolio,
    "round-robin": baselines.round_robin,
    "random": baselines.random_map,
    "scotch": baselines.scotch_map,
    "scotch-valid": scotch_valid,
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
