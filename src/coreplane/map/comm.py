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
    keys: list[str] = None  # clone-tree keys of real tasks ("0", "0.1", ...), for the mapping file
    start: np.ndarray = None  # when each process was alive (s); None: all the whole time
    end: np.ndarray = None

    def __post_init__(self):
        self.src = np.asarray(self.src, dtype=np.int64)
        self.dst = np.asarray(self.dst, dtype=np.int64)
        self.weight = np.asarray(self.weight, dtype=float)
        if self.keys is None:
            self.keys = list(self.names)
        if self.start is None or self.end is None:
            self.start, self.end = np.zeros(len(self.names)), np.ones(len(self.names))
        self.start = np.nan_to_num(np.asarray(self.start, dtype=float), nan=0.0)
        self.end = np.nan_to_num(np.asarray(self.end, dtype=float), nan=np.inf)
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


PAGE_BYTES = 4096
TRAFFIC_KINDS = ("pipe", "socket", "file", "futex", "cacheline")  # `spawn` edges carry no data


def from_graph(graph) -> CommGraph:
    """The mapping problem of a built graph: layer-1 tasks, their traffic (bytes), their loads
    (CPU ns, else syscalls) and lifetimes, and shared memory = frames of MAP_SHARED mappings two processes
    both map (x 4 KiB)."""
    tasks = graph.layer_nodes(1)
    if not len(tasks):
        raise CoreplaneError("graph has no layer-1 (threads) nodes to map")
    e = graph.layer_edges(1)
    e = e[e["kind"].isin(TRAFFIC_KINDS) & (e["weight"] > 0)]
    links = graph.layer_edges(1, 2)
    frames = graph.layer_nodes(2)
    s_src = s_dst = np.zeros(0, dtype=np.int64)
    s_w = np.zeros(0)
    if len(links) and "shared" in frames:
        shared_ids = set(frames.loc[frames["shared"].astype(bool), "id"].tolist())
        links = links[links["dst"].isin(shared_ids)]
        if len(links):
            m = sp.coo_matrix((np.ones(len(links)), (links["src"], links["dst"])),
                              shape=(len(tasks), len(frames))).tocsr()
            m.data[:] = 1.0
            both = sp.triu(m @ m.T, k=1).tocoo()
            s_src, s_dst, s_w = both.row.astype(np.int64), both.col.astype(np.int64), both.data * PAGE_BYTES
    return CommGraph(names=tasks["name"].tolist(), keys=tasks["task"].tolist() if "task" in tasks else None,
                     src=e["src"].to_numpy(), dst=e["dst"].to_numpy(), weight=e["weight"].to_numpy(float),
                     load=tasks["weight"].to_numpy(float), shared_src=s_src, shared_dst=s_dst, shared_weight=s_w,
                     start=tasks["start_s"].to_numpy(float) if "start_s" in tasks else None,
                     end=tasks["end_s"].to_numpy(float) if "end_s" in tasks else None)
