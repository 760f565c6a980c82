"""The memory service against the corpora (issue 15): each program of the run corpus and the conformance real-program corpus timed under the runtime with `--memory linux` and with the pool.
Both modes run on the same compute cores, those `--memory pool` leaves the program (the pool's
scrubber takes a control core: on 2 CPUs the program gets one, where `--memory linux` alone
would spread it over both), so the ratio is the service's cost, not the reserved core's.
Repetitions alternate the modes (and their order), so drifting load falls on both; each
program's median wall time per mode, their ratio, and whether every run printed the same
bytes and status. The corpora are the tests' own (tests/test_run_corpus.py,
tests/conformance/real_programs.py), read from the checkout:
`python -m coreplane.bench.memcorpus --reps 5 [--memory pool-demand] [--only NAME,...] [--json]`."""

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coreplane.bench.memsvc import bench_main
from coreplane.core.errors import CoreplaneError
from coreplane.core.machine import describe
from coreplane.core.native import REPO_ROOT, binary

BUDGET = "1G"  # coreplane-exec's default


def cases(root: Path) -> list[tuple[str, list[str], object]]:
    """(name, argv, prepare) per program; prepare(dir) -> (cwd, env, timeout) lays out its inputs,
    under `root` (the caller removes it)."""
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    try:
        import test_run_corpus  # the run corpus: one prepared directory, shared by its programs
        from conformance import compare, real_programs
    except ImportError as e:
        raise CoreplaneError(f"the corpora are read from a checkout's tests/ ({e})") from e
    (root / "shared").mkdir()
    shared = test_run_corpus.make_inputs(root / "shared")
    out = [(f"run:{name}", argv, lambda _d, w=shared: (w, dict(os.environ), 300.0))
           for name, argv in sorted(test_run_corpus.CASES.items())]
    work = root / "work"
    work.mkdir()

    def prepare(case):
        def fresh(_d):
            d = compare.fresh_dir(work, case)
            return d, compare.base_env(d, case.env), case.timeout * 2
        return fresh

    programs, _missing = real_programs.cases()
    out += [(f"real:{c.name}", c.argv, prepare(c)) for c in programs]
    return out


def timed(argv: list[str], cwd: Path, env: dict, timeout: float) -> tuple[float, float, tuple]:
    """One run: wall seconds, CPU seconds of its processes, and (status, stdout, stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, (proc.returncode, proc.stdout, proc.stderr)


def pool_layout(exe: str, memory: str) -> dict:
    """The compute and control cores coreplane-exec gives a program under `memory`."""
    proc = subprocess.run([exe, "--memory", memory, "--check", "--", "true"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise CoreplaneError(f"coreplane-exec --memory {memory}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def measure(reps: int, memory: str, only: str | None) -> dict:
    """Every program (or those of the comma-separated `only`), `reps` alternating repetitions per mode."""
    only = set(only.split(",")) if only else None
    exe = str(binary("coreplane-exec"))
    modes = ("linux", memory)
    layout = pool_layout(exe, memory)
    same_cores = {"linux": ["--compute-cores", ",".join(map(str, layout["compute_cores"]))]
                  if layout["compute_cores"] else [], memory: []}
    rows, load = [], os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="coreplane-memcorpus-") as root:
        for name, argv, prepare in cases(Path(root)):
            if only and name.split(":", 1)[1] not in only and name not in only:
                continue
            wall = {m: [] for m in modes}
            cpu = {m: [] for m in modes}
            outputs = {m: set() for m in modes}
            for rep in range(reps):
                for mode in (modes if rep % 2 == 0 else modes[::-1]):
                    cwd, env, timeout = prepare(None)
                    argv_mode = [exe, "--memory", mode, "--memory-budget", BUDGET, *same_cores[mode], "--", *argv]
                    try:
                        w, c, out = timed(argv_mode, cwd, env, timeout)
                    except subprocess.TimeoutExpired as e:
                        raise CoreplaneError(f"{name} under --memory {mode}: timed out after {timeout:.0f} s") from e
                    wall[mode].append(w)
                    cpu[mode].append(c)
                    outputs[mode].add(out)
            med = {m: statistics.median(wall[m]) for m in modes}
            rows.append({"program": name, "linux_s": med["linux"], "pool_s": med[memory],
                         "ratio": med[memory] / med["linux"],
                         "cpu_ratio": statistics.median(cpu[memory]) / max(statistics.median(cpu["linux"]), 1e-9),
                         # Same bytes and status in every run of both modes (a program printing
                         # times or pids is only self-consistent in neither).
                         "identical": len(outputs["linux"] | outputs[memory]) == 1,
                         "linux_consistent": len(outputs["linux"]) == 1})
            print(f"{name}: {rows[-1]['ratio']:.3f}", file=sys.stderr, flush=True)
    return {"machine": describe(), "memory": memory, "reps": reps, "layout": layout, "load_before": load,
            "load_after": os.getloadavg(), "programs": rows}


def render(doc: dict) -> str:
    """The table, worst first, and the worst slowdown."""
    rows = sorted(doc["programs"], key=lambda r: -r["ratio"])
    cores = doc.get("layout", {})
    lines = [f"{doc['memory']} vs linux, {doc['reps']} alternating repetitions, medians; load average "
             f"{doc['load_before'][0]:.1f} before, {doc['load_after'][0]:.1f} after; program on cores "
             f"{cores.get('compute_cores', '?')} in both modes, the pool's threads on {cores.get('control_cores', '?')}", "",
             f"| program | linux (s) | {doc['memory']} (s) | ratio | CPU ratio | same output |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['program']} | {r['linux_s']:.3f} | {r['pool_s']:.3f} | {r['ratio']:.3f} | {r['cpu_ratio']:.3f} | "
              f"{'yes' if r['identical'] else 'no' if r['linux_consistent'] else 'varies natively'} |" for r in rows]
    if rows:
        lines += ["", f"worst: {rows[0]['program']} {rows[0]['ratio']:.3f}; median ratio "
                      f"{statistics.median(r['ratio'] for r in rows):.3f}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """The corpora: see memsvc.bench_main (`--reps`, `--memory`, `--only`)."""
    bench_main("coreplane.bench.memcorpus", __doc__, measure, render, argv,
               options={"reps": {"type": int, "default": 5, "help": "repetitions per mode"},
                        "memory": {"default": "pool", "choices": ["pool", "pool-demand"], "help": "the pool's mode"},
                        "only": {"help": "comma-separated program names"}})


if __name__ == "__main__":
    main()
