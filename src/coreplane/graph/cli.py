"""The `coreplane graph` commands: build the multi-layer graph of a program, partition it by T."""

from pathlib import Path

import numpy as np
import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from coreplane.core.errors import CoreplaneError
from coreplane.core.output import console, emit
from coreplane.graph import io
from coreplane.graph.baselines import BASELINES, RUNNERS
from coreplane.graph.build import build as build_graph
from coreplane.graph.partition import greedy_partition, layer_arrays
from coreplane.graph.quality import MESSAGE_COST, MODELS, SLACK, Model

app = typer.Typer(help="NetworkedOS multi-layer graphs: build (layers 0-3) and partition (quality T).",
                  no_args_is_help=True)
progress_console = Console(stderr=True)


def _render_build(doc: dict) -> None:
    table = Table(title=f"{doc['path']}: {' '.join(doc['argv'])}")
    table.add_column("what")
    table.add_column("count", justify="right")
    for name, n in doc["counts"]["nodes"].items():
        table.add_row(f"nodes: {name}", str(n))
    for name, n in doc["counts"]["edges"].items():
        table.add_row(f"edges {name}", str(n))
    console.print(table)
    runs = doc["runs"]
    if "instructions" in runs:
        r = runs["instructions"]
        console.print(f"layer 0: {r['instructions']} instructions in {r['windows']} window(s), "
                      f"{r['wall_s']:.2f} s traced ({r['wall_s'] / max(r['instructions'], 1) * 1e6:.1f} µs per instruction)")
    console.print(f"layers 1-2: {runs['syscalls']['tasks']} tasks, {runs['frames']['frames']} frames in "
                  f"{runs['frames']['samples']} pagemap samples, traced run {runs['syscalls']['wall_s']:.2f} s")


@app.command()
def build(
    argv: list[str] = typer.Argument(..., help="PROGRAM [ARGS...] (after --)."),
    out: Path = typer.Option(Path("graph.cpg"), "--out", "-o", help="Graph directory to write (coreplane-graph/1)."),
    topology: str = typer.Option("host", "--topology", "-t", help="Layer 3: host, mesh:XxY, torus:XxY, tree:A,B,..."),
    no_layer0: bool = typer.Option(False, "--no-layer0", help="Skip the single-stepped run (layers 1-3 only)."),
    window: int = typer.Option(200_000, "--window", help="Layer 0: instructions per window."),
    windows: int = typer.Option(4, "--windows", help="Layer 0: number of windows."),
    start_ms: int = typer.Option(0, "--start-ms", help="Layer 0: full-speed time before the first window."),
    period_ms: int = typer.Option(100, "--period-ms", help="Layer 0: full-speed time between windows."),
    interval: float = typer.Option(0.02, "--sample-interval", help="Layer 2: seconds between pagemap samples."),
    source: str = typer.Option("strace", "--source", help="Layer 1 syscall trace source."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
) -> None:
    """Run PROGRAM and build its four layers: instructions, threads, frames, cores (with inter-layer links)."""
    if window < 1 or windows < 1:
        raise CoreplaneError("--window and --windows must be at least 1")
    say = (lambda msg: None) if json_out else (lambda msg: progress_console.print(f"[dim]graph build:[/] {msg}"))
    graph = build_graph(list(argv), out, topology, not no_layer0, window, windows, start_ms, period_ms,
                        interval, source, say)
    emit({"path": str(out), "argv": list(argv), "counts": graph.counts(), "runs": graph.meta["runs"]},
         json_out, _render_build)


def _render_partition(doc: dict) -> None:
    table = Table(title=f"{doc['path']} layer {doc['layer']}: {doc['nodes']} nodes, {doc['edges']} edges, "
                        f"N = {doc['cores']} cores, T: {doc['model']}")
    for col in ("method", "procs", "threads", "T", "W_seq", "W_par", "W_c", "cut", "copies", "s"):
        table.add_column(col, justify="left" if col == "method" else "right", no_wrap=True)
    for r in doc["results"]:
        table.add_row(r["method"], str(r["processes"]), str(r["threads"]), f"{r['t']:.6g}", f"{r['w_seq']:.6g}", f"{r['w_par']:.6g}",
                      f"{r['w_c']:.6g}", f"{r['cut']:.6g}", str(r["replicas"]), f"{r['seconds']:.2f}")
    console.print(table)
    console.print(f"proposed: {doc['threads']} thread(s) at once ({doc['processes']} processes); "
                  f"saved in {doc['path']}/partition.json for `coreplane map`")
    if doc.get("out"):
        console.print(f"clusters written to {doc['out']}")


@app.command()
def partition(
    graph_dir: Path = typer.Argument(..., help="A graph directory from `coreplane graph build`."),
    cores: int = typer.Option(..., "--cores", "-N", help="N: the number of available cores."),
    model: str = typer.Option("critical", "--model", help=f"T to minimise: {' or '.join(MODELS)} (the paper's eq. 1)."),
    message_cost: float = typer.Option(MESSAGE_COST, "--message-cost", help="critical: one unit of message weight "
                                       "in units of work inside a process."),
    slack: float = typer.Option(SLACK, "--slack", help="critical: packing may raise T by this fraction for fewer processes."),
    layer: int = typer.Option(0, "--layer", help="Layer to partition (0 = instructions, as in the paper)."),
    baselines: str = typer.Option("", "--baselines", help=f"Comma list of {', '.join(BASELINES)} (or 'all')."),
    parts: int = typer.Option(0, "--parts", help="k for METIS/KaHIP (default: N, the core count)."),
    restarts: int = typer.Option(1, "--restarts", min=1, help="Greedy runs from different random orders; best T kept."),
    seed: int = typer.Option(1, "--seed"),
    no_overlap: bool = typer.Option(False, "--no-overlap", help="Disjoint clusters only."),
    out: Path = typer.Option(None, "--out", help="Write clusters as Parquet (node, cluster, replica)."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
) -> None:
    """Minimise T (critical: sum over depths of max(largest process, load/N); eq1: W_seq + W_par/N + W_c/N)
    by greedy multilevel local moving, packing and overlapping clusters; report the number of
    processes and threads it proposes (saved in the graph directory for `coreplane map`), and baselines."""
    if model not in MODELS:
        raise CoreplaneError(f"--model {model}: unknown, expected {' or '.join(MODELS)}")
    cost = Model(float(cores), model, message_cost)
    graph = io.load(graph_dir)
    n, src, dst, weight = layer_arrays(graph, layer)
    names = list(BASELINES) if baselines == "all" else [b for b in baselines.split(",") if b]
    for b in names:
        if b not in RUNNERS:
            raise CoreplaneError(f"--baselines: '{b}' unknown, expected {', '.join(BASELINES)}")
    if not json_out:
        progress_console.print(f"[dim]graph partition:[/] greedy on {n} nodes, {len(src)} edges")
    result = greedy_partition(n, src, dst, weight, cost, seed, restarts, not no_overlap, slack)
    results = [result]
    k = parts or max(2, cores)
    for b in names:
        if not json_out:
            progress_console.print(f"[dim]graph partition:[/] {b} (k = {k})")
        results.append(RUNNERS[b](n, src, dst, weight, min(k, n), cost))
    if out:
        rows = pd.DataFrame({"node": np.arange(n), "cluster": result.membership, "replica": False})
        reps = pd.DataFrame({"node": [r[0] for r in result.replicas], "cluster": [r[1] for r in result.replicas],
                             "replica": True})
        pd.concat([rows, reps], ignore_index=True).to_parquet(out, index=False)
    doc = {"path": str(graph_dir), "layer": layer, "nodes": n, "edges": int(len(src)), "cores": cores,
           "model": model, "message_cost": message_cost, "processes": int(len(np.unique(result.membership))),
           "threads": result.threads, "out": str(out) if out else None,
           "results": [r.summary() for r in results]}
    io.save_partition(graph_dir, doc)
    emit(doc, json_out, _render_partition)
