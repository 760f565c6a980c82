"""Real programs with and without the pool (issue 15, XOS's data-analysis workloads): sort, grep, wc and a word-frequency count over a generated text of at least 1 GiB, and python3 and node programs that allocate heavily.
The text is made by the bundled `textgen` (workloads/src/textgen.c: Zipf-distributed words of
a fixed vocabulary, as BigDataBench's text generator makes its data-analysis input) in a
temporary directory, removed afterwards. Each program runs under the runtime with
`--memory linux` and with `--memory pool` on the same compute cores (those the pool leaves the
program), repetitions alternating the modes; medians of wall time, the CPU time of its
processes, and whether every run printed the same bytes (sha256 of stdout) with the same
status (a status other than the program's success, WORKED, ends the benchmark with its stderr). `python -m coreplane.bench.memsvc_programs --json [--mib 1024] [--reps 2]`."""

import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coreplane.bench.memcorpus import pool_layout
from coreplane.bench.memsvc import bench_main, conditions, under
from coreplane.core.errors import CoreplaneError
from coreplane.core.native import REPO_ROOT, binary, workload

BUDGET = "4G"  # sort's buffer for a 1 GiB input, and the scrubber's backlog
SCRIPTS = REPO_ROOT / "workloads" / "scripts"
WORD_COUNT = '{for (i = 1; i <= NF; i++) n[$i]++} END {PROCINFO["sorted_in"] = "@ind_str_asc"; for (w in n) print w, n[w]}'


# The statuses a program ends with when it worked (grep: 1 when no line matched, counted as 0).
WORKED = {"grep": (0, 1)}


def programs(text: Path) -> dict[str, list[str]]:
    """Name -> argv; the text programs read `text`, the allocators run Debian's interpreters."""
    return {
        "sort": ["sort", str(text)],
        "grep": ["grep", "-c", "-E", "(ka|zo)[a-z]*bu|^hikig.*tipus$", str(text)],
        "wc": ["wc", "-l", "-w", "-c", str(text)],
        "word-frequency (gawk)": ["gawk", WORD_COUNT, str(text)],
        "python3 memalloc.py": ["/usr/bin/python3", str(SCRIPTS / "memalloc.py"), "10"],
        "node memalloc.js": ["/usr/bin/node", str(SCRIPTS / "memalloc.js"), "10"],
    }


def timed(argv: list[str], out: Path, env: dict, worked: tuple[int, ...]) -> tuple[float, float, tuple[int, str]]:
    """One run with stdout to `out`: wall seconds, CPU seconds of its processes, (status, sha256);
    an error unless its status is one of `worked`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(out, "wb") as sink:
        proc = subprocess.run(argv, stdout=sink, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, timeout=1800)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    digest = hashlib.sha256()
    with open(out, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    out.unlink()
    if proc.returncode not in worked:
        raise CoreplaneError(f"{' '.join(argv)} exited {proc.returncode}: "
                             f"{proc.stderr.decode(errors='replace').strip()[-300:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), (proc.returncode, digest.hexdigest())


def measure(mib: int, reps: int) -> dict:
    """The text made once, then every program `reps` times per mode, alternating."""
    doc = conditions()
    layout = pool_layout(str(binary("coreplane-exec")), "pool")
    cores = ("--compute-cores", ",".join(map(str, layout["compute_cores"])))
    rows = []
    with tempfile.TemporaryDirectory(prefix="coreplane-memprograms-") as tmp:
        d = Path(tmp)
        text = d / "text.txt"
        start = time.perf_counter()
        with open(text, "wb") as sink:
            subprocess.run([str(workload("textgen")), str(mib), "1"], stdout=sink, check=True)
        doc["text"] = {"bytes": text.stat().st_size, "seconds": time.perf_counter() - start}
        env = {**os.environ, "LC_ALL": "C", "TMPDIR": tmp}
        modes = ("linux", "pool")
        for name, argv in programs(text).items():
            wall, cpu, outputs = ({m: [] for m in modes} for _ in range(3))
            for rep in range(reps):
                for mode in (modes if rep % 2 == 0 else modes[::-1]):
                    w, c, out = timed(under(mode, BUDGET, argv, cores), d / "stdout", env, WORKED.get(argv[0], (0,)))
                    wall[mode].append(w)
                    cpu[mode].append(c)
                    outputs[mode].append(out)
            med = {m: statistics.median(wall[m]) for m in modes}
            rows.append({"program": name, "linux_s": med["linux"], "pool_s": med["pool"], "ratio": med["pool"] / med["linux"],
                         "cpu_ratio": statistics.median(cpu["pool"]) / max(statistics.median(cpu["linux"]), 1e-9),
                         "identical": len(set(outputs["linux"] + outputs["pool"])) == 1, "stdout_sha256": outputs["linux"][0][1]})
            print(f"{name}: {med['linux']:.2f} s / {med['pool']:.2f} s", file=sys.stderr, flush=True)
    return {**doc, "load_after": os.getloadavg(), "layout": layout, "mib": mib, "reps": reps, "programs": rows}


def render(doc: dict) -> str:
    """The table: medians, ratios, same output."""
    lines = [f"load average {doc['load_before'][0]:.1f} before, {doc['load_after'][0]:.1f} after; text "
             f"{doc['text']['bytes'] / 2**30:.2f} GiB (made in {doc['text']['seconds']:.0f} s); {doc['reps']} alternating "
             f"repetitions; program on cores {doc['layout']['compute_cores']} in both modes, the pool's threads on "
             f"{doc['layout']['control_cores']}", "",
             "| program | --memory linux (s) | --memory pool (s) | pool / linux | CPU ratio | same output |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['program']} | {r['linux_s']:.2f} | {r['pool_s']:.2f} | {r['ratio']:.3f} | {r['cpu_ratio']:.3f} | "
              f"{'yes' if r['identical'] else 'NO'} |" for r in doc["programs"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Real programs: see memsvc.bench_main (`--mib`, `--reps`)."""
    bench_main("coreplane.bench.memsvc_programs", __doc__, measure, render, argv,
               options={"mib": {"type": int, "default": 1024, "help": "size of the generated text (MiB)"},
                        "reps": {"type": int, "default": 2, "help": "repetitions per mode"}})


if __name__ == "__main__":
    main()
