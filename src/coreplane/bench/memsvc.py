"""The memory service's benchmarks (issue 15): parts of XOS's Figure 3 and Table III, with and without the pool.
mmap + touch every page + munmap (and every sixteenth page: where demand paging's batches are
wasted), natively and under the pool, filled by the kernel (`pool`) or by the runtime's
userfaultfd handler (`pool-demand`, where userfaultfd is allowed); malloc + touch + free with
glibc, jemalloc and mimalloc preloaded, and glibc under the pool; the read and write cost of
pool memory against kernel memory (five alternations). Medians of the bundled workload `memtouch`, all in one run:
`python -m coreplane.bench.memsvc --json`."""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from coreplane.core import documents
from coreplane.core.errors import CoreplaneError
from coreplane.core.machine import describe
from coreplane.core.native import binary, workload
from coreplane.doctor.probes import userfaultfd

MMAP_MIB = [64, 256, 1024]
MALLOC_MIB = [1, 16, 64, 256, 1024]
RW_MIB = 256
# Table III alternates the two sides: one run of each moved by -35 % to +53 % under load (session 7).
RW_REPS = 5
# Debian's libjemalloc2 and libmimalloc2.0 (APT_PACKAGES), preloaded into the native runs.
PRELOADS = {"jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
            "mimalloc": "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"}


def iterations(mib: int) -> int:
    """More repetitions of the small sizes; a 1 GiB touch costs about a second natively here."""
    return max(3, min(40, 2048 // mib))


def budget(mib: int) -> str:
    """A pool that holds two blocks of the size and the program's own, so that one block is
    scrubbed while the next is used."""
    return f"{max(512, 3 * mib)}M"


def pools() -> list[str]:
    """The pool modes this machine can run: pool-demand needs userfaultfd (doctor's probe)."""
    return ["pool", "pool-demand"] if userfaultfd()[0] else ["pool"]


def under(memory: str, pool_budget: str, argv: list[str], options: tuple[str, ...] = ()) -> list[str]:
    """argv run under coreplane-exec with `--memory memory` and a pool of `pool_budget`."""
    return [str(binary("coreplane-exec")), "--memory", memory, "--memory-budget", pool_budget, *options, "--", *argv]


def conditions() -> dict:
    """Which machine and how loaded: recorded with every run of the section's benchmarks."""
    return {"machine": describe(), "load_before": os.getloadavg()}


def memtouch(mode: str, mib: int, memory: str = "linux", preload: str | None = None) -> dict:
    """One memtouch run: natively (optionally with an allocator preloaded) or under the pool
    (`memory` pool or pool-demand)."""
    argv = [str(workload("memtouch")), mode, str(mib), str(iterations(mib) if mode != "rw" else 15)]
    env = dict(os.environ)
    if memory != "linux":
        argv = under(memory, budget(mib), argv)
    elif preload:
        if not Path(PRELOADS[preload]).exists():
            raise CoreplaneError(f"{PRELOADS[preload]}: missing (make setup installs it)")
        env["LD_PRELOAD"] = PRELOADS[preload]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise CoreplaneError(f"memtouch {mode} {mib} (--memory {memory}): {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def measure() -> dict:
    """Every figure of the section, in one run."""
    doc = conditions()
    modes = pools()
    mmap_rows = []
    for mode in ("mmap", "sparse"):
        for mib in MMAP_MIB:
            ns = {m: memtouch(mode, mib, m)["median_ns"] for m in ["linux", *modes]}
            mmap_rows.append({"touch": mode, "mib": mib, **{f"{m.replace('-', '_')}_ms": v / 1e6 for m, v in ns.items()},
                              **{f"speedup_{m.replace('-', '_')}": ns["linux"] / ns[m] for m in modes}})
    malloc_rows = []
    for mib in MALLOC_MIB:
        row = {"mib": mib}
        for name, kw in (("glibc", {}), ("jemalloc", {"preload": "jemalloc"}), ("mimalloc", {"preload": "mimalloc"}),
                         ("glibc_pool", {"memory": "pool"})):
            row[f"{name}_ms"] = memtouch("malloc", mib, **kw)["median_ns"] / 1e6
        row["speedup_vs_glibc"] = row["glibc_ms"] / row["glibc_pool_ms"]
        row["speedup_vs_best_other"] = min(row["jemalloc_ms"], row["mimalloc_ms"]) / row["glibc_pool_ms"]
        malloc_rows.append(row)
    runs = {"linux": [], "pool": []}
    for rep in range(RW_REPS):
        for side in (("linux", "pool") if rep % 2 == 0 else ("pool", "linux")):
            runs[side].append(memtouch("rw", RW_MIB, side))
    rw = {"mib": RW_MIB, "reps": RW_REPS}
    for op in ("read", "write"):
        each = {side: [r[f"{op}_ns_per_page"] for r in runs[side]] for side in runs}
        rw.update({f"{side}_{op}_ns_per_page": statistics.median(v) for side, v in each.items()})
        rw[f"{op}_ratio_each"] = [p / n for n, p in zip(each["linux"], each["pool"])]
    return {**doc, "load_after": os.getloadavg(), "mmap_touch_munmap": mmap_rows, "malloc_touch_free": malloc_rows,
            "read_write": rw}


def markdown_table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table's lines: the head, its rule, one line per row."""
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def render(doc: dict) -> str:
    """The section's tables in markdown."""
    demand = "pool_demand_ms" in doc["mmap_touch_munmap"][0]
    lines = [f"load average {doc['load_before'][0]:.1f} before, {doc['load_after'][0]:.1f} after", ""]
    lines += markdown_table(
        ["mmap + touch + munmap", "Linux (ms)", "pool (ms)", "pool speed-up"]
        + (["pool-demand (ms)", "pool-demand speed-up"] if demand else []),
        [[f"{r['mib']} MiB, {'every page' if r['touch'] == 'mmap' else 'every 16th page'}", f"{r['linux_ms']:.2f}",
          f"{r['pool_ms']:.2f}", f"{r['speedup_pool']:.2f}×"]
         + ([f"{r['pool_demand_ms']:.2f}", f"{r['speedup_pool_demand']:.2f}×"] if demand else [])
         for r in doc["mmap_touch_munmap"]])
    lines += ["", "| malloc + touch + free | glibc (ms) | jemalloc (ms) | mimalloc (ms) | glibc, pool (ms) "
                  "| vs glibc | vs best of je/mi |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['mib']} MiB | {r['glibc_ms']:.2f} | {r['jemalloc_ms']:.2f} | {r['mimalloc_ms']:.2f} | "
              f"{r['glibc_pool_ms']:.2f} | {r['speedup_vs_glibc']:.1f}× | {r['speedup_vs_best_other']:.1f}× |"
              for r in doc["malloc_touch_free"]]
    rw = doc["read_write"]
    lines += ["", f"| {rw['mib']} MiB, ns per 4 KiB page | read | write |", "|---|---|---|",
              f"| kernel memory | {rw['linux_read_ns_per_page']:.1f} | {rw['linux_write_ns_per_page']:.1f} |",
              f"| pool memory | {rw['pool_read_ns_per_page']:.1f} | {rw['pool_write_ns_per_page']:.1f} |"]
    if "read_ratio_each" in rw:  # runs since session 8 alternate the sides
        lines += [f"| pool / kernel, each of {rw['reps']} alternations | "
                  + " | ".join(", ".join(f"{x:.2f}" for x in rw[f"{op}_ratio_each"]) for op in ("read", "write")) + " |"]
    return "\n".join(lines)


def bench_main(prog: str, description: str, measure_fn, render_fn, argv: list[str] | None, plot_fn=None,
               options: dict[str, dict] | None = None) -> None:
    """The section's benchmark command line: `--json` measures and prints the document, `--from
    FILE` prints the tables of a saved run, neither measures and prints the tables; `--figure
    PNG` (where the benchmark has a figure) draws it too; `options` are more options (name:
    argparse keywords: type, default, help, choices) passed to measure_fn by name."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--json", action="store_true", help="measure; print JSON")
    parser.add_argument("--from", dest="source", type=Path, help="print the tables of a saved run")
    if plot_fn:
        parser.add_argument("--figure", type=Path, help="draw the figure here (PNG)")
    for name, keywords in (options or {}).items():
        parser.add_argument(f"--{name}", **keywords)
    args = parser.parse_args(argv)
    try:
        doc = (documents.read_json(args.source) if args.source else
               measure_fn(**{name: getattr(args, name) for name in options or {}}))
    except CoreplaneError as e:
        sys.exit(f"coreplane: error: {e}")
    if plot_fn and args.figure:
        plot_fn(doc, args.figure)
    print(json.dumps(doc) if args.json and not args.source else render_fn(doc))


def main(argv: list[str] | None = None) -> None:
    """Fig. 3 and Table III: see bench_main."""
    bench_main("coreplane.bench.memsvc", __doc__, measure, render, argv)


if __name__ == "__main__":
    main()
