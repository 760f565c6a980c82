"""The program break with and without the pool (issue 15, XOS Fig. 3's sbrk): grow, touch every page, lower.
The bundled workload `sbrktouch` (workloads/src/sbrktouch.c) times each iteration; its median
is the figure. Each size runs natively, under the runtime with `--memory linux` (the kernel's
break, the runtime's trap path), and under `--memory pool` / `pool-demand` (the break served
from the pool), three rounds, the modes in turn, in reverse order every other round (drifting
load falls on all of them); the figure is the median of the rounds.
`python -m coreplane.bench.membrk [--json | --from FILE]`."""

import json
import statistics
import subprocess

from coreplane.bench.memsvc import bench_main, conditions, pools, under
from coreplane.core.errors import CoreplaneError
from coreplane.core.native import workload

SIZES_KIB = [4, 64, 1024, 16 << 10, 64 << 10, 256 << 10]
ROUNDS = 3
BUDGET = "1G"


def iterations(kib: int) -> int:
    """About 0.1-0.5 s a run natively here: many repetitions of the small sizes."""
    return max(8, min(2000, (256 << 10) // kib))


def sbrktouch(kib: int, mode: str) -> int:
    """Median ns of one iteration of `kib` natively (`native`), under the runtime with the
    kernel's memory (`linux`), or under the pool (`pool`, `pool-demand`)."""
    argv = [str(workload("sbrktouch")), str(kib), str(iterations(kib))]
    if mode != "native":
        argv = under(mode, BUDGET, argv)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise CoreplaneError(f"sbrktouch {kib} ({mode}): {proc.stderr.strip() or proc.returncode}")
    return json.loads(proc.stdout)["median_ns"]


def measure() -> dict:
    """Every size in every mode, ROUNDS times, the order of the modes reversed every other round."""
    modes = ["native", "linux", *pools()]
    before = conditions()
    runs = {kib: {m: [] for m in modes} for kib in SIZES_KIB}
    for rnd in range(ROUNDS):
        for kib in SIZES_KIB:
            for mode in (modes if rnd % 2 == 0 else modes[::-1]):
                runs[kib][mode].append(sbrktouch(kib, mode))
    rows = [{"kib": kib, **{m: statistics.median(v) for m, v in runs[kib].items()}, "runs": runs[kib]}
            for kib in SIZES_KIB]
    return {"benchmark": "membrk", "conditions": before, "load_after": conditions()["load_before"],
            "modes": modes, "rows": rows}


def size(kib: int) -> str:
    return f"{kib >> 20} GiB" if kib >= 1 << 20 else f"{kib >> 10} MiB" if kib >= 1024 else f"{kib} KiB"


def render(doc: dict) -> str:
    """Median time of one grow + touch + lower, and the pool's gain over Linux (native / pool)."""
    pooled = [m for m in doc["modes"] if m.startswith("pool")]
    head = "| size | native | --memory linux | " + " | ".join(pooled) + " | " + \
        " | ".join(f"{m} vs native" for m in pooled) + " |"
    lines = [head, "|" + "---|" * (3 + 2 * len(pooled))]
    for r in doc["rows"]:
        times = [f"{r[m] / 1000:.1f} µs" for m in ["native", "linux", *pooled]]
        gains = [f"{r['native'] / r[m]:.1f}×" for m in pooled]
        lines.append(f"| {size(r['kib'])} | " + " | ".join(times + gains) + " |")
    m, load = doc["conditions"]["machine"], doc["conditions"]["load_before"]
    lines.append(f"\n{m['cpu']}, {m['cpus']} CPUs, Linux {m['kernel']}; load {load[0]:.1f} before, "
                 f"{doc['load_after'][0]:.1f} after")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """The sbrk figure: see bench_main."""
    bench_main("coreplane.bench.membrk", __doc__, measure, render, argv)


if __name__ == "__main__":
    main()
