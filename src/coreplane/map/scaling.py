"""Time of greedy-rb or greedy-ml (and of greedy-rb's parts) against process count (P = 256..8192), beside Scotch's, fitted to P and P log P: the measure of their O(P log P) and O(P) claims.

    python -m coreplane.map.scaling --out target/bench/netos-rb-scaling.json
    python -m coreplane.map.scaling --method greedy-ml --out target/bench/netos-ml-scaling.json

P processes on a mesh of P/2 cores, two per core (the largest mesh, 64 x 64, is the most cores a
topology spec accepts), for bounded-degree kinds of the development family. Each call's CPU time
(process time: less sensitive than the wall to other users of a shared machine) and wall time;
Scotch's (scotch_gmap, a child process: its CPU is the children's, read from os.times) on the same
graph beside them. The machine's tables (nearest cores, small rings, domain tree: O(C), distances
in closed form), built once per machine, are timed apart, with the memory they keep.
"""

import json
import os
import time
import tracemalloc
from pathlib import Path

import numpy as np
import typer
from rich.console import Console

from coreplane.core.machine import describe
from coreplane.graph.topology import parse_spec
from coreplane.map import families, methods
from coreplane.map.bisection import _DOMAINS, _domains, bisection_map
from coreplane.map.greedy import greedy_map, refine

app = typer.Typer(help=__doc__.splitlines()[0], add_completion=False)
err = Console(stderr=True)

MESHES = {256: "mesh:16x8", 512: "mesh:16x16", 1024: "mesh:32x16", 2048: "mesh:32x32", 4096: "mesh:64x32",
          8192: "mesh:64x64"}
CAPACITY = 2
KINDS = ("stencil2d", "geometric", "regular")  # bounded degree: 4, ~6 and 4 partners per process
SEED = 424_242  # outside both families' seed ranges


def _timed(fn) -> tuple[float, float, object]:
    """CPU seconds (this process and the children it waited for), wall seconds, fn's result."""
    wall, cpu = time.perf_counter(), _cpu()
    out = fn()
    return _cpu() - cpu, time.perf_counter() - wall, out


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


METHODS = ("greedy-rb", "greedy-ml")


def _loadavg() -> list[str]:
    return Path("/proc/loadavg").read_text().split()[:3]


def fit(rows: list[dict], key: str = "cpu_s") -> dict:
    """Per kind: c = median of t / (P log2 P), each point's t / (c P log2 P) (flat near 1 if the time
    grows as P log P), the same for P log2^2 P and for P, and the least-squares slope of log t
    against log P (1 for O(P); P log P between 256 and 8192 reads as about 1.1)."""
    out = {}
    for kind in sorted({r["kind"] for r in rows}):
        mine = sorted((r for r in rows if r["kind"] == kind), key=lambda r: r["processes"])
        p = np.array([r["processes"] for r in mine], dtype=float)
        t = np.array([r[key] for r in mine])
        shapes = {"p": p, "p_log_p": p * np.log2(p), "p_log2_p": p * np.log2(p) ** 2}
        out[kind] = {"processes": p.astype(int).tolist(), "slope": float(np.polyfit(np.log(p), np.log(t), 1)[0])}
        for name, shape in shapes.items():
            c = float(np.median(t / shape))
            out[kind][name] = {"c": c, "t_over_fit": (t / (c * shape)).round(3).tolist()}
    return out


@app.command()
def main(out: Path = typer.Option(..., "--out"), repetitions: int = typer.Option(3, "--repetitions"),
         sizes: str = typer.Option(",".join(map(str, MESHES)), "--sizes"),
         method: str = typer.Option("greedy-rb", "--method", help="greedy-rb (with its parts) or greedy-ml")) -> None:
    """Times `method` and Scotch (median of `repetitions` calls each) and, for greedy-rb, once each of its parts."""
    if method not in METHODS:
        raise typer.BadParameter(f"{method}: expected one of {', '.join(METHODS)}", param_hint="--method")
    rows, tables = [], []
    loads = [_loadavg()]
    for processes in (int(s) for s in sizes.split(",")):
        build = lambda t: (t.center, t.nearest, t.within(1), _domains(t))  # noqa: E731
        # Memory on a copy of its own: tracing slows the traced code 1.5-2x (0.58-0.61 s against
        # 0.27-0.39 s for mesh 64x64's tables), so the time is taken untraced.
        tracemalloc.start()
        build(parse_spec(MESHES[processes]))
        held, peak = tracemalloc.get_traced_memory()  # what the tables keep, and the most their building used
        tracemalloc.stop()
        topo = parse_spec(MESHES[processes])
        _DOMAINS.pop(topo.spec, None)  # kept per spec: the traced copy's must not be timed as this one's
        cpu, wall, _ = _timed(lambda: build(topo))
        tables.append({"topology": topo.spec, "cores": topo.n_cores, "cpu_s": cpu, "wall_s": wall,
                       "kept_mb": held / 1e6, "peak_mb": peak / 1e6})
        for kind in KINDS:
            comm = families.generate(kind, processes, SEED)
            runs = [_timed(lambda: methods.METHODS[method](comm, topo, CAPACITY)) for _ in range(repetitions)]
            scotch = [_timed(lambda: methods.scotch_valid(comm, topo, CAPACITY)) for _ in range(repetitions)]
            row = {"method": method, "kind": kind, "processes": processes, "topology": topo.spec,
                   "pairs": int(comm.traffic().nnz // 2),
                   "cpu_s": float(np.median([r[0] for r in runs])), "wall_s": float(np.median([r[1] for r in runs])),
                   "runs_cpu_s": [r[0] for r in runs],
                   "scotch_cpu_s": float(np.median([r[0] for r in scotch])),
                   "scotch_wall_s": float(np.median([r[1] for r in scotch])),
                   "vs_scotch_hop_bytes": methods.hop_bytes(comm, topo, runs[0][2])
                   / methods.hop_bytes(comm, topo, scotch[0][2])}
            if method == "greedy-rb":
                walks = _timed(lambda: greedy_map(comm, topo, CAPACITY))
                halves = _timed(lambda: bisection_map(comm, topo, CAPACITY))
                start = min((walks[2], halves[2]), key=lambda pl: methods.hop_bytes(comm, topo, pl))
                rounds = _timed(lambda: refine(comm, topo, start, CAPACITY, rounds=methods.GREEDY_RB_ROUNDS))
                row.update(walks_cpu_s=walks[0], bisection_cpu_s=halves[0], rounds_cpu_s=rounds[0])
            rows.append(row)
            err.print(f"{method} {kind}-{processes}@{topo.spec}: {row['cpu_s']:.3f} s CPU, Scotch "
                      f"{row['scotch_cpu_s']:.3f} s; hop-bytes {row['vs_scotch_hop_bytes']:.3f} x Scotch's")
    loads.append(_loadavg())
    doc = {"machine": describe(), "method": method, "load_average_before_after": loads, "capacity": CAPACITY,
           "tables": tables, "rows": rows, "fit_cpu": fit(rows), "fit_wall": fit(rows, "wall_s"),
           "fit_scotch_cpu": fit(rows, "scotch_cpu_s")}
    for kind, f in doc["fit_cpu"].items():
        err.print(f"{kind}: slope {f['slope']:.2f} (Scotch {doc['fit_scotch_cpu'][kind]['slope']:.2f}); "
                  f"t / (c P log P): {f['p_log_p']['t_over_fit']}; t / (c P): {f['p']['t_over_fit']}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    app()
