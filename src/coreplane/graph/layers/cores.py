"""Layer 3 as graph tables: the network nodes (cores, then switches) and links of a Topology."""

from coreplane.graph.model import edge_frame, node_frame
from coreplane.graph.topology import Topology


def cores_layer(topo: Topology):
    """Nodes: cores (named cpuN with the OS CPU number) then switches; edges: undirected links."""
    n_nodes = topo.n_cores + (len(topo.parent) - topo.n_cores if topo.parent else 0)
    names = [f"cpu{topo.cpu_ids[i]}" for i in range(topo.n_cores)] + \
            [f"switch{i}" for i in range(topo.n_cores, n_nodes)]
    nodes = node_frame(3, names, None, core=[i if i < topo.n_cores else -1 for i in range(n_nodes)])
    links = topo.links()
    return nodes, edge_frame(3, [a for a, _ in links], 3, [b for _, b in links], [1.0] * len(links), "link")
