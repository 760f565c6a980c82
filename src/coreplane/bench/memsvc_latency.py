"""Request latency beside a memory-hungry neighbour, with and without the pool (issue 15, XOS Fig. 6): a request server in a cell, stress-ng --vm on the control core, the latency CDF and p99.
The server is the bundled workload `memserve` (workloads/src/memserve.c): each request mallocs
a 1 MiB buffer (a fresh mmap: glibc's threshold fixed at 128 KiB), writes and sums it, frees
it. Its load generator sends RATE requests per second on a fixed schedule over one connection
and records every request's latency from its scheduled time. In a cell (compute core: the
server and its client; control core: every other task of the machine, the pool's threads and
the neighbour, `stress-ng --vm 1 --vm-bytes 512M --vm-method write64`, which maps, writes and
unmaps 512 MiB over and over), the server runs natively (`linux`) or under `--memory pool`,
each with and without the neighbour, and beside the neighbour under the pool with its scrubber
under SCHED_FIFO 1 (`pool-fifo`, --scrubber-priority fifo; left out where that is refused); first, outside any cell, `default`: the same server and
neighbour where the kernel's scheduler puts them. Configurations alternate, repetitions are
pooled. `python -m coreplane.bench.memsvc_latency --json [--figure PNG]`."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from coreplane.bench.memcorpus import pool_layout
from coreplane.bench.memsvc import bench_main, conditions, under
from coreplane.cell.cell import Cell
from coreplane.cell.spec import CellSpec
from coreplane.core.cpulist import format_cpu_list
from coreplane.core.errors import CoreplaneError
from coreplane.core.native import binary, workload

RATE = 200
SECONDS = 8.0
KIB = 1024
REPETITIONS = 3
BUDGET = "512M"
NEIGHBOUR_WARMUP_S = 1.0  # the neighbour's first 512 MiB mapped before the first request
PERCENTILES = [50, 90, 99, 99.9]
# pool-fifo: the pool with its scrubber under SCHED_FIFO 1 (--scrubber-priority fifo).
CELL_CONFIGS = ["linux", "pool", "linux+neighbour", "pool+neighbour", "pool-fifo+neighbour"]


def neighbour(cores: list[int] | None) -> subprocess.Popen:
    """stress-ng's vm stressor, one worker, on `cores` (None: wherever the scheduler puts it)."""
    exe = shutil.which("stress-ng")
    if exe is None:
        raise CoreplaneError("stress-ng: not installed (make setup installs it)")
    pin = ["--taskset", format_cpu_list(cores)] if cores else []
    return subprocess.Popen([exe, "--vm", "1", "--vm-bytes", "512M", "--vm-method", "write64", *pin, "-q",
                             "--timeout", f"{int(SECONDS + NEIGHBOUR_WARMUP_S + 30)}s"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    """Ends a neighbour and its workers (its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def one_run(config: str, cell: Cell | None, layout: dict, sock: str) -> list[float]:
    """Every request's latency (µs) of one configuration."""
    memory = "pool" if config.startswith("pool") else "linux"
    compute = format_cpu_list(layout["compute_cores"])
    enter = (lambda: cell.add_process(os.getpid())) if cell else None
    pin = ["taskset", "-c", compute] if cell else []
    noisy = neighbour(layout["control_cores"] if cell else None) if config.endswith("neighbour") else None
    try:
        if noisy:
            time.sleep(NEIGHBOUR_WARMUP_S)
        server_argv = [str(workload("memserve")), "server", sock, str(KIB)]
        fifo = ("--scrubber-priority", "fifo") if config.startswith("pool-fifo") else ()
        server_argv = under("pool", BUDGET, server_argv, fifo) if memory == "pool" else pin + server_argv
        server = subprocess.Popen(server_argv, stdout=subprocess.PIPE, text=True, preexec_fn=enter)
        try:
            if server.stdout.readline().strip() != "ready":  # the socket listens: the client may connect
                raise CoreplaneError(f"memserve server ({config}) did not start: status {server.wait()}")
            client = subprocess.run([*pin, str(workload("memserve")), "client", sock, str(RATE), str(SECONDS), str(KIB)],
                                    capture_output=True, text=True, preexec_fn=enter, timeout=SECONDS * 20 + 60)
            if client.returncode != 0:
                raise CoreplaneError(f"memserve client ({config}): {client.stderr.strip()}")
        finally:
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:   # a client that failed left it waiting: its error stands
                server.kill()
                server.wait()
    finally:
        if noisy:
            stop(noisy)
    return json.loads(client.stdout)["latency_us"]


def summary(latencies: list[float]) -> dict:
    """Percentiles (µs) and the count."""
    values = np.percentile(latencies, PERCENTILES)
    return {"requests": len(latencies), **{f"p{p:g}_us": float(v) for p, v in zip(PERCENTILES, values)}}


def cell_configs(fifo_allowed: bool) -> list[str]:
    """The configurations run in the cell: pool-fifo only where SCHED_FIFO is allowed."""
    return [c for c in CELL_CONFIGS if fifo_allowed or not c.startswith("pool-fifo")]


def fifo_allowed(exe: str) -> bool:
    """Whether coreplane-exec may run the scrubber under SCHED_FIFO here (it checks before --check)."""
    argv = [exe, "--memory", "pool", "--scrubber-priority", "fifo", "--check", "--", "true"]
    return subprocess.run(argv, capture_output=True).returncode == 0


def measure() -> dict:
    """The default configuration outside a cell, then the others inside one, alternating."""
    doc = conditions()
    exe = str(binary("coreplane-exec"))
    layout = pool_layout(exe, "pool")
    configs = cell_configs(fifo_allowed(exe))
    runs = {c: [] for c in ["default+neighbour", *configs]}
    p99_each = {c: [] for c in runs}  # per repetition: how far one run's tail moves
    with tempfile.TemporaryDirectory(prefix="coreplane-memserve-") as tmp:
        sock = str(Path(tmp) / "memserve.sock")
        for _ in range(REPETITIONS):
            latencies = one_run("default+neighbour", None, layout, sock)
            runs["default+neighbour"] += latencies
            p99_each["default+neighbour"].append(float(np.percentile(latencies, 99)))
        spec = CellSpec(compute=layout["compute_cores"], control=layout["control_cores"], pin_init=True)
        with Cell.create(spec) as cell:
            doc["cell"] = {"compute": cell.compute, "control": cell.control,
                           "processes_moved": cell.record["machine"].get("tasks", {}).get("moved")}
            for rep in range(REPETITIONS):
                for config in (configs if rep % 2 == 0 else configs[::-1]):
                    latencies = one_run(config, cell, layout, sock)
                    runs[config] += latencies
                    p99_each[config].append(float(np.percentile(latencies, 99)))
                    print(f"{config}: p99 {p99_each[config][-1]:.0f} µs", file=sys.stderr, flush=True)
    stats = {c: {**summary(v), "p99_each_us": p99_each[c]} for c, v in runs.items()}
    gains = {"p99_gain_vs_linux": stats["linux+neighbour"]["p99_us"] / stats["pool+neighbour"]["p99_us"],
             "p99_gain_vs_default": stats["default+neighbour"]["p99_us"] / stats["pool+neighbour"]["p99_us"]}
    if "pool-fifo+neighbour" in stats:
        gains["p99_gain_fifo_vs_linux"] = stats["linux+neighbour"]["p99_us"] / stats["pool-fifo+neighbour"]["p99_us"]
    return {**doc, "load_after": os.getloadavg(), "layout": layout, "rate": RATE, "seconds": SECONDS, "kib": KIB,
            "repetitions": REPETITIONS, "configs": stats, "latency_us": runs, **gains}


def render(doc: dict) -> str:
    """The percentiles per configuration and the p99 gains."""
    lines = [f"load average {doc['load_before'][0]:.1f} before, {doc['load_after'][0]:.1f} after; {doc['rate']} "
             f"requests/s of {doc['kib']} KiB for {doc['seconds']:.0f} s × {doc['repetitions']} per configuration; cell: "
             f"compute {doc['cell']['compute']}, control {doc['cell']['control']}", "",
             "| configuration | requests | p50 (µs) | p90 (µs) | p99 (µs) | p99.9 (µs) | p99 of each run (µs) |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {name} | {s['requests']} | {s['p50_us']:.0f} | {s['p90_us']:.0f} | {s['p99_us']:.0f} | {s['p99.9_us']:.0f} | "
              f"{', '.join(f'{v:.0f}' for v in s['p99_each_us'])} |"
              for name, s in doc["configs"].items()]
    c = doc["configs"]
    lines += ["", f"beside the neighbour: p50 pool {c['pool+neighbour']['p50_us']:.0f} µs, linux "
                  f"{c['linux+neighbour']['p50_us']:.0f} µs in the cell "
                  f"({c['linux+neighbour']['p50_us'] / c['pool+neighbour']['p50_us']:.2f}× better with the pool); p99 pool "
                  f"{c['pool+neighbour']['p99_us']:.0f} µs, linux {c['linux+neighbour']['p99_us']:.0f} µs "
                  f"({doc['p99_gain_vs_linux']:.2f}× better with the pool; goal ≥ 3×), default placement "
                  f"{c['default+neighbour']['p99_us']:.0f} µs (the cell with the pool {doc['p99_gain_vs_default']:.2f}× "
                  f"better, the cell with linux {c['default+neighbour']['p99_us'] / c['linux+neighbour']['p99_us']:.2f}×)"]
    if "p99_gain_fifo_vs_linux" in doc:  # runs since session 9 measure the scrubber under SCHED_FIFO too
        lines += ["", f"with the scrubber under SCHED_FIFO 1: p50 {c['pool-fifo+neighbour']['p50_us']:.0f} µs, p99 "
                      f"{c['pool-fifo+neighbour']['p99_us']:.0f} µs ({doc['p99_gain_fifo_vs_linux']:.2f}× better than linux)"]
    return "\n".join(lines)


def plot(doc: dict, path: Path) -> None:
    """The latency CDFs, one line per configuration, log time axis."""
    from coreplane.core.figures import plt, save, style
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, values in doc["latency_us"].items():
        ms = np.sort(values) / 1e3
        ax.plot(ms, np.arange(1, len(ms) + 1) / len(ms), label=f"{name} (p99 {doc['configs'][name]['p99_us'] / 1e3:.2f} ms)")
    style(ax, "request latency from its scheduled time (ms)", "fraction of requests",
          f"memserve, {doc['rate']}/s of {doc['kib']} KiB, stress-ng --vm on the control core; "
          f"load {doc['load_before'][0]:.1f}-{doc['load_after'][0]:.1f}", logx=True)
    save(fig, path)


def main(argv: list[str] | None = None) -> None:
    """Fig. 6: see memsvc.bench_main (`--figure PNG`: the latency CDFs)."""
    bench_main("coreplane.bench.memsvc_latency", __doc__, measure, render, argv, plot)


if __name__ == "__main__":
    main()
