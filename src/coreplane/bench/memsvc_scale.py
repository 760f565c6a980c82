"""The memory calls' scalability with and without the pool (issue 15, XOS Fig. 5 style): will-it-scale's page_fault, mmap and brk loops at 1 and 2 threads.
Each loop is the bundled workload `memscale` (workloads/src/memscale.c): every thread repeats
its operation, the ops are counted over a fixed window in 0.25 s samples, and the median
sample is the figure. Four runs per loop and thread count, in one sitting: natively (the
kernel's scheduler on every CPU), under the runtime with `--memory linux` on the compute cores
the pool leaves the program (so the pool's ratio is the service's, not the cores'), and under
`--memory pool` / `pool-demand`. `python -m coreplane.bench.memsvc_scale --json`."""

import json
import os
import subprocess
import sys

from coreplane.bench.memcorpus import pool_layout
from coreplane.bench.memsvc import bench_main, conditions, markdown_table, pools, under
from coreplane.core.errors import CoreplaneError
from coreplane.core.native import binary, workload

TESTS = ["page_fault", "mmap", "brk"]
THREADS = [1, 2]
WINDOW_S = 2.0
# Two threads' 128 MiB blocks, each while the previous one is scrubbed, and the program's own.
BUDGET = "2G"


def memscale(test: str, threads: int, mode: str, cell_cores: list[int]) -> dict:
    """One window of `test` with `threads` threads: natively (`native`), or under the runtime with
    --memory linux on `cell_cores` (`linux`), or under the pool (`pool`, `pool-demand`)."""
    argv = [str(workload("memscale")), test, str(threads), str(WINDOW_S)]
    if mode == "linux":
        argv = under("linux", BUDGET, argv, ("--compute-cores", ",".join(map(str, cell_cores))))
    elif mode != "native":
        argv = under(mode, BUDGET, argv)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60 + 4 * WINDOW_S)
    if proc.returncode != 0:
        raise CoreplaneError(f"memscale {test} {threads} ({mode}): {proc.stderr.strip() or proc.returncode}")
    return json.loads(proc.stdout)


def measure() -> dict:
    """Every loop at every thread count in every mode, one window each."""
    doc = conditions()
    layout = pool_layout(str(binary("coreplane-exec")), "pool")
    modes = ["native", "linux", *pools()]
    rows = []
    for test in TESTS:
        for threads in THREADS:
            ops = {m: memscale(test, threads, m, layout["compute_cores"])["median_ops_per_s"] for m in modes}
            rows.append({"test": test, "threads": threads, **{f"{m.replace('-', '_')}_ops_s": v for m, v in ops.items()},
                         **{f"{m.replace('-', '_')}_vs_native": ops[m] / ops["native"] for m in modes[2:]},
                         **{f"{m.replace('-', '_')}_vs_linux": ops[m] / ops["linux"] for m in modes[2:]}})
            print(f"{test} x{threads}: " + ", ".join(f"{m} {v:.0f}/s" for m, v in ops.items()), file=sys.stderr, flush=True)
    return {**doc, "load_after": os.getloadavg(), "layout": layout, "window_s": WINDOW_S, "rows": rows}


def times(ratio: float) -> str:
    """A ratio with the digits it needs (the pool's untouched mmap loop is hundreds of times slower)."""
    return f"{ratio:.2f}×" if ratio >= 0.1 else f"{ratio:.4f}×"


def render(doc: dict) -> str:
    """The table: ops/s per mode and the pool's ratios."""
    demand = "pool_demand_ops_s" in doc["rows"][0]
    cores = doc["layout"]
    lines = [f"load average {doc['load_before'][0]:.1f} before, {doc['load_after'][0]:.1f} after; {doc['window_s']:.0f} s "
             f"windows; `linux` and the pools: program on cores {cores['compute_cores']}, the pool's threads on "
             f"{cores['control_cores']}", ""]
    lines += markdown_table(
        ["loop", "threads", "native (ops/s)", "--memory linux (ops/s)", "pool (ops/s)", "pool vs native", "pool vs linux"]
        + (["pool-demand (ops/s)", "pool-demand vs native"] if demand else []),
        [[r["test"], str(r["threads"]), f"{r['native_ops_s']:,.0f}", f"{r['linux_ops_s']:,.0f}", f"{r['pool_ops_s']:,.0f}",
          times(r["pool_vs_native"]), times(r["pool_vs_linux"])]
         + ([f"{r['pool_demand_ops_s']:,.0f}", times(r["pool_demand_vs_native"])] if demand else [])
         for r in doc["rows"]])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Fig. 5: see memsvc.bench_main."""
    bench_main("coreplane.bench.memsvc_scale", __doc__, measure, render, argv)


if __name__ == "__main__":
    main()
