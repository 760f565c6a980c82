"""NetworkedOS experiments for docs/benchmarks.md: (a) IPC pairs same- vs cross-core, (b) mapping
quality on meshes and real programs, (c) partition and mapping time against size, (d) mapping
quality on the generated family (families.py) and traced programs against Scotch, (e) the wall time
a mapping gains or loses real programs against default Linux placement.
(e') is (e)'s run-time mapping again, in many alternated pairs, with a confidence interval.

Run by `make bench` (JSON in target/bench/) and `make figures` (PNGs in docs/figures/):
    python -m coreplane.map.experiments ipc|quality|scaling|family|gain|gain-ci --out FILE.json
    python -m coreplane.map.experiments figures --bench DIR --figures DIR
"""

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import typer
from rich.console import Console

from coreplane.core.errors import CoreplaneError
from coreplane.core.machine import describe
from coreplane.core.native import REPO_ROOT
from coreplane.graph import io
from coreplane.graph.build import build
from coreplane.graph.partition import greedy_partition, layer_arrays
from coreplane.graph.quality import Model
from coreplane.graph.topology import parse_spec
from coreplane.map import families, mapfile, methods
from coreplane.map.comm import from_graph
from coreplane.map.greedy import default_capacity, greedy_map
from coreplane.map.patterns import PATTERNS, pattern

app = typer.Typer(help="NetworkedOS experiments (make bench / make figures).", no_args_is_help=True)
err = Console(stderr=True)
IPC = REPO_ROOT / "workloads" / "bin" / "ipc_pairs"
SIZES = (1024, 4096, 16384, 65536)
MESHES = ("mesh:4x4", "mesh:8x8", "mesh:8x16", "mesh:16x16")
QUALITY_METHODS = ("greedy", "greedy-refined", "scotch", "treematch", "round-robin", "random")


def _ipc(pairs: int, size: int, transport: str, cpus: list[int], round_trips: int, attempts: int = 5) -> dict:
    """One ipc_pairs run. A failed pin is retried: on a shared machine another user's exclusive
    cpuset can make a CPU unavailable for a moment."""
    for attempt in range(attempts):
        proc = subprocess.run([str(IPC), "--pairs", str(pairs), "--size", str(size), "--transport", transport,
                               "--round-trips", str(round_trips), "--cpus", ",".join(map(str, cpus))],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode == 0:
            return json.loads(proc.stdout)
        time.sleep(1.0 + attempt)
    raise CoreplaneError(f"ipc_pairs: {proc.stderr.strip().splitlines()[0] if proc.stderr.strip() else proc.returncode}")


def _mapped_cpus(pairs: int, size: int, transport: str) -> tuple[list[int], dict]:
    """The placement `coreplane map` (greedy, host topology) gives the benchmark's processes,
    from a graph built by tracing one short run of it."""
    with tempfile.TemporaryDirectory(prefix="coreplane-ipc-") as tmp:
        g = build([str(IPC), "--pairs", str(pairs), "--size", str(size), "--transport", transport,
                   "--round-trips", "200"], Path(tmp, "g.cpg"), "host", layer0=False)
        comm = from_graph(g)
        topo = parse_spec("host")
        placement = greedy_map(comm, topo, default_capacity(comm.n, topo.n_cores))
        doc = {"placement": [{"task": comm.keys[p], "cpus": [topo.cpu_ids[int(c)]]} for p, c in enumerate(placement)]}
        mapfile.write(Path(tmp, "m.json"), doc)
        cpus = mapfile.cpu_lists(Path(tmp, "m.json"))
    # ipc_pairs forks process 2i+side as the (2i+side)-th child of the program: task "0.<k>"
    return [cpus[f"0.{k}"][0] for k in range(2 * pairs)], {"tasks": comm.n, "traffic_edges": int(len(comm.src))}


@app.command()
def ipc(out: Path = typer.Option(..., "--out"), repetitions: int = typer.Option(5, "--repetitions"),
        round_trips: int = typer.Option(2000, "--round-trips")) -> None:
    """(a) Pairs of processes exchanging 1-64 KiB messages, same-core vs cross-core vs mapped."""
    if not IPC.is_file():
        raise CoreplaneError(f"{IPC}: missing, run `make workloads`")
    rows = []
    for transport in ("pipe", "socket"):
        for pairs in (1, 2):
            mapped, graph_info = _mapped_cpus(pairs, 4096, transport)
            placements = {"same-core": [0, 0, 1, 1][: 2 * pairs], "cross-core": [0, 1, 0, 1][: 2 * pairs],
                          "mapped": mapped}
            for size in SIZES:
                for name, cpus in placements.items():
                    runs = [_ipc(pairs, size, transport, cpus, round_trips) for _ in range(repetitions)]
                    rt = [r["round_trip_ns_median"] for r in runs]
                    rows.append({"transport": transport, "pairs": pairs, "size": size, "placement": name,
                                 "cpus": cpus, "round_trip_ns": float(np.median(rt)), "runs": rt})
                    err.print(f"ipc {transport} pairs={pairs} size={size} {name}: {np.median(rt) / 1e3:.1f} µs")
    out.write_text(json.dumps({"machine": describe(), "round_trips": round_trips, "repetitions": repetitions,
                               "rows": rows}, indent=1))


def _real_graphs(workdir: Path) -> dict[str, Path]:
    """Graphs (layers 1-3) of three real programs: make -j2, xz -T2, sort | gzip."""
    data = workdir / "input.txt"
    rng = np.random.default_rng(0)
    data.write_text("\n".join(map(str, rng.integers(0, 10**9, 400_000))))
    src = workdir / "proj"
    shutil.copytree(REPO_ROOT / "workloads", src, ignore=shutil.ignore_patterns("bin"))
    programs = {
        "make -j2": ["make", "-j2", "-s", "-C", str(src)],
        "xz -T2": ["xz", "-T2", "-1", "--block-size=1MiB", "-c", str(data)],
        "sort | gzip": ["sh", "-c", f"sort {data} | gzip -c > /dev/null"],
    }
    graphs = {}
    for name, argv in programs.items():
        err.print(f"building the graph of {name}")
        graphs[name] = workdir / f"{name.split()[0]}.cpg"
        build(argv, graphs[name], "host", layer0=False)
    return graphs


@app.command()
def quality(out: Path = typer.Option(..., "--out")) -> None:
    """(b) hop-bytes and link load of every method on patterns x meshes and on real programs."""
    rows = []
    for spec in MESHES:
        topo = parse_spec(spec)
        for name in PATTERNS:
            comm = pattern(name, topo.n_cores, 1024.0, topo.dims if name == "stencil" else None)
            for method in QUALITY_METHODS:
                r = methods.run(method, comm, topo, 1)
                rows.append({"topology": spec, "workload": name, "method": method, "seconds": r["seconds"],
                             "violation": r["violation"], **{k: r["metrics"][k] for k in
                                                             ("hop_bytes", "max_link_load", "avg_packet_latency_cycles", "energy_nj")}})
            err.print(f"quality {spec} {name} done")
    with tempfile.TemporaryDirectory(prefix="coreplane-real-") as tmp:
        for name, path in _real_graphs(Path(tmp)).items():
            comm = from_graph(io.load(path))
            topo = parse_spec("mesh:4x4")
            cap = default_capacity(comm.n, topo.n_cores)
            for method in QUALITY_METHODS:
                r = methods.run(method, comm, topo, cap)
                rows.append({"topology": "mesh:4x4", "workload": name, "method": method, "seconds": r["seconds"],
                             "processes": comm.n, "capacity": cap, "violation": r["violation"],
                             **{k: r["metrics"][k] for k in ("hop_bytes", "max_link_load", "avg_packet_latency_cycles", "energy_nj")}})
            err.print(f"quality {name}: {comm.n} tasks")
    out.write_text(json.dumps({"machine": describe(), "rows": rows}, indent=1))


@app.command()
def scaling(out: Path = typer.Option(..., "--out"), max_window: int = typer.Option(200_000, "--window"),
            cores: int = typer.Option(16, "--cores")) -> None:
    """(c) partition time against layer-0 size (xz -T2, up to 5 windows = 10^6 instructions) and
    mapping time against process count."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="coreplane-scale-") as tmp:
        data = Path(tmp, "input.txt")
        data.write_text("\n".join(map(str, np.random.default_rng(1).integers(0, 10**12, 1_500_000))))
        argv = ["xz", "-T2", "-1", "--block-size=1MiB", "-c", str(data)]
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
        rows.append({"kind": "plain-run", "argv": argv, "seconds": time.perf_counter() - started})
        for windows in (1, 2, 5):
            for window in (max_window // 20, max_window // 4, max_window):
                if windows > 1 and window != max_window:
                    continue
                err.print(f"scaling: layer 0 of xz -T2, {windows} x {window} instructions")
                g = build(argv, Path(tmp, "x.cpg"), "host",
                          window=window, windows=windows, start_ms=50, period_ms=50)
                n, src, dst, w = layer_arrays(g, 0)
                part = greedy_partition(n, src, dst, w, Model(cores))
                rows.append({"kind": "partition", "nodes": n, "edges": int(len(src)), "seconds": part.seconds,
                             "native_s": part.detail["native_s"], "processes": part.summary()["processes"],
                             "t": part.quality.t, "t_singletons": part.detail["levels"][0]["t"],
                             "trace_s": g.meta["runs"]["instructions"]["tracer_wall_s"],
                             "trace_us_per_instruction": g.meta["runs"]["instructions"]["wall_s"] / n * 1e6})
    for side in (4, 8, 16, 32, 64):
        topo = parse_spec(f"mesh:{side}x{side}")
        _ = topo.nearest, topo.center  # topology tables are built once per machine
        comm = pattern("stencil", topo.n_cores, 1024.0, topo.dims)
        for method in ("greedy", "scotch"):
            started = time.perf_counter()
            methods.METHODS[method](comm, topo, 1)
            rows.append({"kind": "map", "method": method, "processes": comm.n,
                         "seconds": time.perf_counter() - started})
        err.print(f"scaling: mapping {comm.n} processes")
    out.write_text(json.dumps({"machine": describe(), "rows": rows}, indent=1))


# scotch: its default mapping (may put two processes on a core meant for one); scotch-valid: the
# reference of the goal, Scotch's mapping that respects the capacity (methods.scotch_valid)
FAMILY_METHODS = ("scotch", "scotch-valid", "greedy", "greedy-swap", "greedy-rb", "greedy-ml", "portfolio")


def family_rows(members: list, real: dict | None = None) -> list[dict]:
    """Hop-bytes and time of FAMILY_METHODS on every member (and on real programs' CommGraphs,
    mapped on mesh:4x4), each row with its ratio to the hop-bytes of Scotch's capacity-respecting
    mapping (vs_scotch) and of its default mapping (vs_scotch_default) on the same graph."""
    problems = [(m.name, m.kind, m.topology, m.capacity, m.graph()) for m in members]
    for name, comm in (real or {}).items():
        topo = parse_spec("mesh:4x4")
        problems.append((name, "traced", "mesh:4x4", default_capacity(comm.n, topo.n_cores), comm))
    rows = []
    for name, kind, spec, capacity, comm in problems:
        topo = parse_spec(spec)
        _ = topo.nearest, topo.center  # topology tables are built once per machine
        got = {method: methods.run(method, comm, topo, capacity) for method in FAMILY_METHODS}
        scotch, default = (got[m]["metrics"]["hop_bytes"] for m in ("scotch-valid", "scotch"))
        for method, r in got.items():
            hb = r["metrics"]["hop_bytes"]
            rows.append({"graph": name, "kind": kind, "topology": spec, "processes": comm.n, "capacity": capacity,
                         "method": method, "hop_bytes": hb, "seconds": r["seconds"], "violation": r["violation"],
                         "vs_scotch": _ratio(hb, scotch), "vs_scotch_default": _ratio(hb, default)})
        err.print(f"family {name}: " + " ".join(f"{r['method']} {r['vs_scotch']:.3f}" for r in rows[-len(got):]))
    return rows


def _ratio(hop_bytes: float, reference: float) -> float:
    return hop_bytes / reference if reference else (1.0 if hop_bytes == 0 else float("inf"))


def family_summary(rows: list[dict]) -> dict:
    """Per method: graphs at or below Scotch's hop-bytes, worst and median ratio, median time."""
    out = {}
    for method in FAMILY_METHODS:
        mine = [r for r in rows if r["method"] == method]
        ratio = np.array([r["vs_scotch"] for r in mine])
        out[method] = {"graphs": len(mine), "at_most_scotch": int((ratio <= 1.0 + 1e-12).sum()),
                       "within_1_2": int((ratio <= 1.2 + 1e-12).sum()), "worst": float(ratio.max()),
                       "at_most_scotch_default": sum(r["vs_scotch_default"] <= 1.0 + 1e-12 for r in mine),
                       "median": float(np.median(ratio)), "worst_graph": mine[int(ratio.argmax())]["graph"],
                       "violations": sum(r["violation"] is not None for r in mine),
                       "median_s": float(np.median([r["seconds"] for r in mine])),
                       "total_s": float(sum(r["seconds"] for r in mine))}
    return out


@app.command()
def family(out: Path = typer.Option(..., "--out"), real: bool = typer.Option(True, "--real/--no-real"),
           sizes: str = typer.Option(",".join(map(str, families.SIZES)), "--sizes"),
           heldout: bool = typer.Option(False, "--heldout", help="the held-out family (no traced programs)"),
           stencil3d: bool = typer.Option(True, "--stencil3d/--no-stencil3d",
                                          help="with the development side's 3-D stencils on other shapes")) -> None:
    """(d) scotch, the paper's greedy and the portfolio on the generated family and traced programs
    (and families.stencil3d_members), or on the held-out family (families.heldout_members)."""
    if heldout:
        members, real = families.heldout_members(), False
    else:
        members = families.members(tuple(int(s) for s in sizes.split(",")))
        members += families.stencil3d_members() if stencil3d else []
    traced = {}
    if real:
        with tempfile.TemporaryDirectory(prefix="coreplane-real-") as tmp:
            traced = {name: from_graph(io.load(path)) for name, path in _real_graphs(Path(tmp)).items()}
    rows = family_rows(members, traced)
    summary = family_summary(rows)
    for method, s in summary.items():
        err.print(f"{method}: <= scotch on {s['at_most_scotch']}/{s['graphs']} "
                  f"(<= its default mapping on {s['at_most_scotch_default']}), worst {s['worst']:.3f} "
                  f"({s['worst_graph']}), median time {s['median_s'] * 1e3:.0f} ms")
    out.write_text(json.dumps({"machine": describe(), "family": "heldout" if heldout else "development",
                               "load_average": Path("/proc/loadavg").read_text().split()[:3],
                               "summary": summary, "rows": rows}, indent=1))


ONLINE_TOPOLOGY = "mesh:2x1"  # run-time mapping of (e): two cores a hop apart, core i = the i-th CPU
GAIN_PIPELINE = "dd if=/dev/zero bs=512 count=200000 status=none | dd of=/dev/null bs=512 status=none"


def _timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=600)
    return time.perf_counter() - started


def _spread(seconds: list[float]) -> dict:
    return {"median_s": float(np.median(seconds)), "min_s": min(seconds), "max_s": max(seconds), "runs": seconds}


@app.command()
def gain(out: Path = typer.Option(..., "--out"), repetitions: int = typer.Option(7, "--repetitions")) -> None:
    """(e) graph -> map -> run --map against default Linux placement: a 512-byte dd | dd pipeline
    under `coreplane run` (mapped by the greedy; everything on one CPU; and placed while it runs,
    run --online-map mesh:2x1) and the ipc_pairs ping-pong (mapped as in (a)); arms alternated,
    wall time of every run."""
    coreplane = str(Path(sys.executable).with_name("coreplane"))
    command = ["sh", "-c", GAIN_PIPELINE]
    with tempfile.TemporaryDirectory(prefix="coreplane-gain-") as tmp:
        comm = from_graph(build(command, Path(tmp, "g.cpg"), "host", layer0=False))
        topo = parse_spec("host")
        placement = greedy_map(comm, topo, comm.n)  # room for all on one core: the greedy decides
        arms = {"mapped": [int(c) for c in placement], "one core": [0] * comm.n}
        files = {arm: Path(tmp, arm.replace(" ", "-") + ".json") for arm in arms}
        for arm, cores in arms.items():
            mapfile.write(files[arm], {"placement": [
                {"task": comm.keys[p], "cpus": [topo.cpu_ids[c]]} for p, c in enumerate(cores)]})
        runs: dict[str, list[float]] = {"default": [], **{arm: [] for arm in arms}, "online": []}
        ipc_cpus, _ = _mapped_cpus(1, 1024, "pipe")
        ipc_runs: dict[str, list[float]] = {"default": [], "mapped": []}
        for _ in range(repetitions):
            runs["default"].append(_timed([coreplane, "run", "--", *command]))
            for arm in arms:
                runs[arm].append(_timed([coreplane, "run", "--map", str(files[arm]), "--", *command]))
            runs["online"].append(_timed([coreplane, "run", "--online-map", ONLINE_TOPOLOGY, "--", *command]))
            for arm, cpus in (("default", []), ("mapped", ipc_cpus)):
                ipc_runs[arm].append(_ipc(1, 1024, "pipe", cpus, 20_000)["wall_ns"] / 1e9)
    doc = {"machine": describe(), "load_average": Path("/proc/loadavg").read_text().split()[:3],
           "pipeline": {"command": GAIN_PIPELINE, "placement": {comm.keys[p]: arms["mapped"][p] for p in range(comm.n)},
                        **{arm: _spread(v) for arm, v in runs.items()}},
           "ipc_pairs": {"cpus": ipc_cpus, **{arm: _spread(v) for arm, v in ipc_runs.items()}}}
    for name in ("pipeline", "ipc_pairs"):
        err.print(name + ": " + ", ".join(f"{arm} {v['median_s'] * 1e3:.0f} ms ({v['min_s'] * 1e3:.0f}-"
                                          f"{v['max_s'] * 1e3:.0f})" for arm, v in doc[name].items() if isinstance(v, dict) and "median_s" in v))
    out.write_text(json.dumps(doc, indent=1))


def paired_gain(baseline: list[float], treated: list[float], resamples: int = 10_000, seed: int = 0) -> dict:
    """Gain of `treated` over `baseline` from runs taken in alternated pairs: the median of the
    per-pair ratios baseline/treated with a 95 % percentile-bootstrap interval (pairs resampled;
    the median, not the mean, because a loaded machine's runs have long tails), and how many
    pairs the treated arm won."""
    ratio = np.asarray(baseline) / np.asarray(treated)
    rng = np.random.default_rng(seed)
    medians = np.median(ratio[rng.integers(0, len(ratio), (resamples, len(ratio)))], axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return {"pairs": len(ratio), "median_ratio": float(np.median(ratio)), "ci95": [float(low), float(high)],
            "treated_won": int((ratio > 1).sum()), "ratios": ratio.tolist()}


@app.command("gain-ci")
def gain_ci(out: Path = typer.Option(..., "--out"), pairs: int = typer.Option(40, "--pairs"),
            program: str = typer.Option("dd", "--program", help="dd: the 512-byte dd | dd under `coreplane "
                                        "run`, default against --online-map mesh:2x1; ipc: the 1 KiB ipc_pairs "
                                        "ping-pong, default against graph -> map (greedy) -> pinned")) -> None:
    """(e') A mapping's gain with its uncertainty: default Linux placement against the mapping in
    `pairs` alternated pairs (the arm that goes first alternates too), and paired_gain() of the
    walls."""
    if program == "dd":
        coreplane = str(Path(sys.executable).with_name("coreplane"))
        command = ["sh", "-c", GAIN_PIPELINE]
        arms = {"default": lambda: _timed([coreplane, "run", "--", *command]),
                "mapped": lambda: _timed([coreplane, "run", "--online-map", ONLINE_TOPOLOGY, "--", *command])}
        what = {"command": GAIN_PIPELINE, "topology": ONLINE_TOPOLOGY}
    elif program == "ipc":
        cpus, _ = _mapped_cpus(1, 1024, "pipe")
        arms = {"default": lambda: _ipc(1, 1024, "pipe", [], 20_000)["wall_ns"] / 1e9,
                "mapped": lambda: _ipc(1, 1024, "pipe", cpus, 20_000)["wall_ns"] / 1e9}
        what = {"command": "ipc_pairs --pairs 1 --size 1024 --transport pipe --round-trips 20000", "cpus": cpus}
    else:
        raise CoreplaneError(f"--program {program}: unknown, expected dd or ipc")
    runs: dict[str, list[float]] = {arm: [] for arm in arms}
    loads = [Path("/proc/loadavg").read_text().split()[:3]]
    arms["default"]()  # warm-up: page cache, the binaries
    for i in range(pairs):
        for arm in (("default", "mapped") if i % 2 == 0 else ("mapped", "default")):
            runs[arm].append(arms[arm]())
    loads.append(Path("/proc/loadavg").read_text().split()[:3])
    doc = {"machine": describe(), "load_average_before_after": loads, "program": program, **what,
           **{arm: _spread(v) for arm, v in runs.items()}, "gain": paired_gain(runs["default"], runs["mapped"])}
    g = doc["gain"]
    err.print(f"{program}, mapped over default: median ratio {g['median_ratio']:.2f} (95 % CI "
              f"{g['ci95'][0]:.2f}-{g['ci95'][1]:.2f}), mapped won {g['treated_won']}/{g['pairs']} pairs")
    out.write_text(json.dumps(doc, indent=1))


@app.command()
def figures(bench: Path = typer.Option(..., "--bench"), out_dir: Path = typer.Option(..., "--figures")) -> None:
    """Draws netos-ipc.png, netos-quality.png, netos-scaling.png, netos-rb-scaling.png,
    netos-ml-scaling.png, netos-family.png, netos-heldout.png and netos-proposal.png from the JSON results."""
    from coreplane.map.plots import (family_figure, ipc_figure, proposal_figure, quality_figure, rb_scaling_figure,
                                     scaling_figure)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, fn in (("ipc", ipc_figure), ("quality", quality_figure), ("scaling", scaling_figure),
                     ("rb-scaling", rb_scaling_figure), ("ml-scaling", rb_scaling_figure), ("family", family_figure),
                     ("heldout", family_figure), ("proposal", proposal_figure)):
        src = bench / f"netos-{name}.json"
        if src.is_file():
            fn(json.loads(src.read_text()), out_dir / f"netos-{name}.png")
            err.print(f"wrote {out_dir / f'netos-{name}.png'}")


if __name__ == "__main__":
    try:
        app()
    except CoreplaneError as exc:
        err.print(f"coreplane: error: {exc}")
        raise SystemExit(exc.exit_code)
