"""Benchmark (f) of docs/benchmarks.md: the number of threads each quality T proposes for traced real programs, and graph -> map -> run with it.

For programs that take a thread count: build layer 0 (4 windows of 50,000 instructions), partition
it under eq. (1) and under the critical T for N = 16 and N = this machine's CPUs (and, at N = 16,
message costs a = 1 ... 10^4), then run the program through `coreplane graph partition` ->
`coreplane map --out` -> `coreplane run --map -- PROGRAM {threads}` against the traced thread count,
arms alternated. Run by `make bench`:
    python -m coreplane.map.proposal --out target/bench/netos-proposal.json
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import typer
from rich.console import Console
from scipy.sparse.csgraph import connected_components

from coreplane.core.machine import describe
from coreplane.graph.build import build
from coreplane.graph.partition import greedy_partition, layer_arrays
from coreplane.graph.quality import MESSAGE_COST, Model

err = Console(stderr=True)
# name -> (argv with {threads} for the count, the count traced); {big} / {small}: the input files
PROGRAMS = {
    "xz -T1": (["xz", "-T{threads}", "-1", "--block-size=1MiB", "-c", "{big}"], 1),
    "xz -T4": (["xz", "-T{threads}", "-1", "--block-size=1MiB", "-c", "{big}"], 4),
    "xz -T8, 19 blocks": (["xz", "-T{threads}", "-1", "--block-size=1MiB", "-c", "{big}"], 8),
    "xz -T8, 3 blocks": (["xz", "-T{threads}", "-1", "--block-size=1MiB", "-c", "{small}"], 8),
    "pigz -p4": (["pigz", "-p", "{threads}", "-c", "{big}"], 4),
    "zstd -T4": (["zstd", "-T{threads}", "-3", "-c", "{big}"], 4),
    "sort --parallel=4": (["sort", "--parallel={threads}", "-S", "64M", "{big}"], 4),
}
RUN = ("xz -T8, 3 blocks", "xz -T8, 19 blocks", "pigz -p4")  # the pipeline timed end to end
COSTS = (1.0, 10.0, 100.0, MESSAGE_COST, 10_000.0)


def _argv(template: list[str], threads: int | str, files: dict[str, Path]) -> list[str]:
    return [a.replace("{threads}", str(threads)).replace("{big}", str(files["big"])).replace("{small}", str(files["small"]))
            for a in template]


def _row(program: str, model: Model, part, work: float) -> dict:
    return {"program": program, "cores": model.cores, "model": model.kind, "message_cost": model.message_cost,
            "processes": part.summary()["processes"], "threads": part.threads,
            "t_over_w": part.quality.t / work, "seconds": part.seconds}


def _coreplane_run(coreplane: str, args: list[str], argv: list[str], out: Path) -> float:
    """Wall time of the program as `coreplane run` measured it."""
    subprocess.run([coreplane, "run", "--json-out", str(out), *args, "--", *argv], check=True,
                   stdout=subprocess.DEVNULL, timeout=600)
    return float(json.loads(out.read_text())["wall_s"])


def main(out: Path = typer.Option(..., "--out"), repetitions: int = typer.Option(7, "--repetitions")) -> None:
    """Partition rows for every program, model and N, then the timed pipeline for RUN."""
    coreplane = str(Path(sys.executable).with_name("coreplane"))
    host = len(os.sched_getaffinity(0))
    rows, runs = [], {}
    with tempfile.TemporaryDirectory(prefix="coreplane-proposal-") as tmp:
        tmp = Path(tmp)
        text = "\n".join(map(str, np.random.default_rng(1).integers(0, 10**12, 1_500_000))).encode()
        files = {"big": tmp / "big.txt", "small": tmp / "small.txt"}
        files["big"].write_bytes(text)  # 19 MB: 19 blocks of 1 MiB
        files["small"].write_bytes(text[:3_000_000])  # 3 blocks
        for program, (template, traced) in PROGRAMS.items():
            err.print(f"proposal: layer 0 of {program}")
            graph = tmp / f"{len(rows)}.cpg"
            g = build(_argv(template, traced, files), graph, "host", window=50_000, windows=4, start_ms=50, period_ms=50)
            n, src, dst, w = layer_arrays(g, 0)
            k, label = connected_components(sp.coo_matrix((w, (src, dst)), shape=(n, n)), directed=False)
            shares = np.sort(np.bincount(label[src], weights=w, minlength=k))[::-1] / w.sum()
            models = [Model(c, kind) for c in (16, host) for kind in ("eq1", "critical")]
            models += [Model(16, "critical", a) for a in COSTS if a != MESSAGE_COST]
            for model in models:
                rows.append({**_row(program, model, greedy_partition(n, src, dst, w, model), w.sum()),
                             "traced": traced, "tasks": int(len(g.layer_nodes(1))), "nodes": n,
                             "components": int(k), "largest_component_share": float(shares[0]),
                             "component_shares": [round(float(x), 4) for x in shares[:8]]})
            if program not in RUN:
                continue
            # the pipeline as a user runs it, for this machine's cores
            mapping = tmp / f"{len(rows)}.map.json"
            subprocess.run([coreplane, "graph", "partition", str(graph), "--cores", str(host), "--json"],
                           check=True, stdout=subprocess.DEVNULL)
            subprocess.run([coreplane, "map", str(graph), "--out", str(mapping), "--json"], check=True,
                           stdout=subprocess.DEVNULL)
            proposed = json.loads(mapping.read_text())["threads"]
            arms = {f"traced ({traced} threads), Linux placement": ([], _argv(template, traced, files)),
                    f"proposed ({proposed}), Linux placement": ([], _argv(template, proposed, files)),
                    f"proposed ({proposed}), run --map": (["--map", str(mapping)], _argv(template, "{threads}", files))}
            times: dict[str, list[float]] = {arm: [] for arm in arms}
            for _ in range(repetitions):
                for arm, (args, argv) in arms.items():
                    times[arm].append(_coreplane_run(coreplane, args, argv, tmp / "run.json"))
            runs[program] = {"proposed": proposed, "cores": host, **{
                arm: {"median_s": float(np.median(v)), "min_s": min(v), "max_s": max(v), "runs": v}
                for arm, v in times.items()}}
            err.print(f"proposal: {program}: " + ", ".join(f"{arm} {np.median(v):.3f} s" for arm, v in times.items()))
    doc = {"machine": describe(), "load_average": Path("/proc/loadavg").read_text().split()[:3],
           "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": rows, "runs": runs}
    out.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    typer.run(main)
