"""The multi-layer graph of Definition 1: nodes and edges of layers 0-3 and the links between layers."""

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

LAYERS = {0: "instructions", 1: "threads", 2: "frames", 3: "cores"}
NODE_COLUMNS = {"layer": "int8", "id": "int64", "name": "string", "weight": "float64"}
EDGE_COLUMNS = {"src_layer": "int8", "src": "int64", "dst_layer": "int8", "dst": "int64",
                "weight": "float64", "kind": "string"}


def node_frame(layer: int, names, weight=None, **extra) -> pd.DataFrame:
    """Nodes of one layer with ids 0..n-1 in the order given."""
    n = len(names)
    frame = pd.DataFrame({"layer": np.full(n, layer, dtype=np.int8), "id": np.arange(n, dtype=np.int64),
                          "name": pd.array(list(names), dtype="string"),
                          "weight": np.ones(n) if weight is None else np.asarray(weight, dtype=float)})
    for col, values in extra.items():
        frame[col] = values
    return frame


def edge_frame(src_layer: int, src, dst_layer: int, dst, weight, kind) -> pd.DataFrame:
    """Edges (intra-layer when src_layer == dst_layer, else inter-layer links); `kind` is a str or per-edge list."""
    src = np.asarray(src, dtype=np.int64)
    kinds = [kind] * len(src) if isinstance(kind, str) else list(kind)
    return pd.DataFrame({"src_layer": np.full(len(src), src_layer, dtype=np.int8), "src": src,
                         "dst_layer": np.full(len(src), dst_layer, dtype=np.int8),
                         "dst": np.asarray(dst, dtype=np.int64), "weight": np.asarray(weight, dtype=float),
                         "kind": pd.array(kinds, dtype="string")})


@dataclass
class MultiLayerGraph:
    """G = (V^i, E^ij, W^ij | i, j in {0,1,2,3}) (Definition 1) as two tables plus metadata."""

    nodes: pd.DataFrame
    edges: pd.DataFrame
    meta: dict = field(default_factory=dict)

    def layer_nodes(self, layer: int) -> pd.DataFrame:
        return self.nodes[self.nodes["layer"] == layer].reset_index(drop=True)

    def layer_edges(self, src_layer: int, dst_layer: int | None = None) -> pd.DataFrame:
        """Edges E^ij: intra-layer when dst_layer is None or equal, else the links between the layers."""
        dst_layer = src_layer if dst_layer is None else dst_layer
        sel = (self.edges["src_layer"] == src_layer) & (self.edges["dst_layer"] == dst_layer)
        return self.edges[sel].reset_index(drop=True)

    def counts(self) -> dict:
        """Nodes per layer and edges per (src_layer, dst_layer, kind): the summary commands print."""
        nodes = {LAYERS[int(k)]: int(v) for k, v in self.nodes.groupby("layer").size().items()}
        edges = {f"{int(a)}-{int(b)} {k}": int(v)
                 for (a, b, k), v in self.edges.groupby(["src_layer", "dst_layer", "kind"]).size().items()}
        return {"nodes": nodes, "edges": edges}


def merge(parts: list[tuple[pd.DataFrame, pd.DataFrame]], meta: dict) -> MultiLayerGraph:
    """One graph from per-layer (nodes, edges) pieces."""
    nodes = pd.concat([p[0] for p in parts if p[0] is not None and len(p[0])], ignore_index=True)
    edge_parts = [p[1] for p in parts if p[1] is not None and len(p[1])]
    edges = pd.concat(edge_parts, ignore_index=True) if edge_parts else edge_frame(0, [], 0, [], [], "none")
    return MultiLayerGraph(nodes=nodes, edges=edges, meta=meta)
