"""The `coreplane map` command: place a program's threads (or a standard pattern) on a topology."""

import math
from pathlib import Path

import scipy.sparse as sp
import typer
from rich.table import Table

from coreplane.core.errors import CoreplaneError
from coreplane.core.output import console, emit
from coreplane.graph.topology import parse_spec
from coreplane.map import mapfile, methods
from coreplane.map.comm import from_graph
from coreplane.map.greedy import default_capacity
from coreplane.map.patterns import PATTERNS, pattern


def traffic_by_key(comm) -> list[dict]:
    """Bytes between each pair of tasks that communicated, by clone-tree key: what the run-time
    mapper (`--online-map SPEC@FILE`) weighs partners by."""
    pairs = sp.triu(comm.traffic(), k=1).tocoo()
    return [{"a": comm.keys[a], "b": comm.keys[b], "bytes": int(round(w))}
            for a, b, w in zip(pairs.row.tolist(), pairs.col.tolist(), pairs.data.tolist())]


def load_problem(source: str, topo, message_bytes: float):
    """A CommGraph from a graph directory or `pattern:NAME[:P]` (P defaults to the core count)."""
    if source.startswith("pattern:"):
        parts = source.split(":")
        if len(parts) not in (2, 3) or parts[1] not in PATTERNS:
            raise CoreplaneError(f"'{source}': expected pattern:NAME[:P] with NAME one of {', '.join(PATTERNS)}")
        try:
            p = int(parts[2]) if len(parts) == 3 else topo.n_cores
        except ValueError:
            raise CoreplaneError(f"'{source}': process count '{parts[2]}' is not an integer") from None
        if p < 1:
            raise CoreplaneError(f"'{source}': process count {p}: at least 1")
        if not (message_bytes > 0 and math.isfinite(message_bytes)):   # NaN reached the mappers
            raise CoreplaneError(f"--message-bytes {message_bytes}: must be a positive number")
        grid = topo.dims if parts[1] == "stencil" and topo.dims and p == topo.n_cores else None
        return pattern(parts[1], p, message_bytes, grid)
    from coreplane.graph import io  # pandas and pyarrow: loaded only for a graph
    return from_graph(io.load(source))


def _render(doc: dict) -> None:
    t = doc["topology"]
    table = Table(title=f"{doc['source']}: {doc['processes']} processes on {t['spec']} ({t['cores']} cores), capacity {doc['capacity']}")
    for col in ("method", "hop-bytes", "hops", "max link", "lat cyc", "nJ", "ms", "note"):
        table.add_column(col, justify="left" if col in ("method", "note") else "right", no_wrap=col != "note")
    for r in doc["results"]:
        m = r["metrics"]
        table.add_row(r["method"], f"{m['hop_bytes']:.4g}", f"{m['avg_hops']:.2f}", f"{m['max_link_load']:.4g}",
                      f"{m['avg_packet_latency_cycles']:.1f}", f"{m['energy_nj']:.4g}", f"{r['seconds'] * 1e3:.1f}",
                      r["violation"] or "")
    console.print(table)
    if doc.get("threads"):
        console.print(f"the graph's partition proposes {doc['threads']} thread(s): `coreplane run --map` puts "
                      "that number in place of {threads} in the program's arguments")
    if doc.get("out"):
        console.print(f"mapping written to {doc['out']}")


def map_command(
    source: str = typer.Argument(..., help="A graph directory (coreplane graph build) or pattern:NAME[:P]."),
    topology: str = typer.Option("host", "--topology", "-t", help="mesh:XxY, torus:XxY, tree:A,B,... or host."),
    method: str = typer.Option("greedy", "--method", "-m", help=f"One of {', '.join(methods.METHODS)}, or 'all'."),
    capacity: int = typer.Option(0, "--capacity", min=0, help="Processes per core (default: the fewest that fit)."),
    message_bytes: float = typer.Option(1024.0, "--message-bytes", help="Bytes per pattern edge (patterns only)."),
    out: Path = typer.Option(None, "--out", help="Write the mapping (first method) as coreplane-map/1 JSON."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
) -> None:
    """Thread-to-core mapping: the paper's greedy O(P) mapping or a baseline, with hop-bytes,
    link load under XY routing and the NoC latency/energy model."""
    topo = parse_spec(topology)
    comm = load_problem(source, topo, message_bytes)
    capacity = capacity or default_capacity(comm.n, topo.n_cores)
    names = list(methods.METHODS) if method == "all" else method.split(",")
    results = [methods.run(name, comm, topo, capacity) for name in names]
    threads = None
    if not source.startswith("pattern:"):
        from coreplane.graph import io
        threads = io.proposed_threads(source)
    if out:
        first = results[0]
        mapfile.write(out, {
            "source": source, "topology": topo.as_dict(), "method": first["method"], "capacity": capacity,
            **({"threads": threads} if threads else {}),
            "placement": [{"task": comm.keys[p], "name": comm.names[p], "core": int(c), "cpus": [topo.cpu_ids[int(c)]]}
                          for p, c in enumerate(first["placement"].tolist())],
            **({} if source.startswith("pattern:") else {"traffic": traffic_by_key(comm)}),
            "metrics": first["metrics"]})
    doc = {"source": source, "topology": topo.as_dict(), "processes": comm.n, "capacity": capacity, "threads": threads,
           "out": str(out) if out else None,
           "results": [{**{k: v for k, v in r.items() if k != "placement"},
                        "placement": r["placement"].tolist()} for r in results]}
    emit(doc, json_out, _render)
