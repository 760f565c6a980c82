"""The mapping problem's input: processes, their traffic, shared memory and loads."""

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from coreplane.core.errors import CoreplaneError


@dataclass
class CommGraph:
    """P processes (or threads) with directed traffic src->dst of `weight` bytes (or counts),
    optional shared-memory weights (frames two processes both use) and per-process loads."""

    names: list[str]
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    load: np.ndarray = None
    shared_src: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    shared_dst: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    shared_weight: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self):
        self.src = np.asarray(self.src, dtype=np.int64)
        self.dst = np.asarray(self.dst, dtype=np.int64)
        self.weight = np.asarray(self.weight, dtype=float)
        if self.load is None:
            self.load = np.ones(len(self.names))
        self.load = np.asarray(self.load, dtype=float)
        n = len(self.names)
        for arr in (self.src, self.dst, self.shared_src, self.shared_dst):
            if len(arr) and (arr.min() < 0 or arr.max() >= n):
                raise CoreplaneError(f"communication graph: an edge names process {int(arr.max())}, only {n} exist")

    @property
    def n(self) -> int:
        return len(self.names)

    def traffic(self) -> sp.csr_matrix:
        """Symmetric P x P traffic: entry (u, v) = bytes u->v plus v->u (no self traffic)."""
        m = sp.coo_matrix((self.weight, (self.src, self.dst)), shape=(self.n, self.n)).tocsr()
        m = (m + m.T).tocsr()
        m.setdiag(0)
        m.eliminate_zeros()
        return m

    def sharing(self) -> sp.csr_matrix:
        """Symmetric P x P shared-memory weights (e.g. frames both processes map)."""
        m = sp.coo_matrix((np.asarray(self.shared_weight, dtype=float),
                           (self.shared_src, self.shared_dst)), shape=(self.n, self.n)).tocsr()
        m = (m + m.T).tocsr()
        m.setdiag(0)
        m.eliminate_zeros()
        return m
