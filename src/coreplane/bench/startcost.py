"""What the runtime adds to a process's start (issues 12 and 15): workloads that start many short
processes (dash and bash starting /bin/true, CPython's subprocess, gcc's four processes), each
natively, under this build's coreplane-exec, under it with every site rewritten at its first trap
(`--rewrite-at 1`), and under the coreplane-exec of other builds (`--build DIR`, a checkout whose
target/release holds one), in turn, ROUNDS times; per started process, the medians of wall time
and of CPU time (the whole tree's user + system).
`python -m coreplane.bench.startcost [--json | --from FILE] [--build DIR ...]`."""

import os
import statistics
import tempfile
from pathlib import Path

from coreplane.bench.memcorpus import timed
from coreplane.bench.memsvc import bench_main
from coreplane.core.native import binary
from coreplane.core.errors import CoreplaneError

ROUNDS = 11


def workloads(tmp: Path) -> dict[str, tuple[int, list[str]]]:
    """name -> (processes started, argv)."""
    src = tmp / "t.c"
    src.write_text("int main(void) { return 0; }\n")
    gcc = f"gcc -c -o {tmp / 't.o'} {src}"
    return {
        "sh (dash) starting /bin/true x200": (200, ["sh", "-c", "i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i+1)); done"]),
        "bash starting /bin/true x200": (200, ["bash", "-c", "for ((i=0;i<200;i++)); do /bin/true; done"]),
        "python3 subprocess.run x100": (100, ["python3", "-c", "import subprocess\nfor i in range(100): subprocess.run(['/bin/true'])"]),
        "gcc -c of an empty file x10": (10, ["sh", "-c", f"for i in 1 2 3 4 5 6 7 8 9 10; do {gcc}; done"]),
    }


def runtimes(builds: list[str]) -> dict[str, list[str]]:
    """name -> the prefix that starts a workload under it."""
    exe = str(binary("coreplane-exec"))
    out = {"native": [], "this build": [exe, "--"], "this build, --rewrite-at 1": [exe, "--rewrite-at", "1", "--"]}
    for d in builds:
        other = Path(d) / "target" / "release" / "coreplane-exec"
        if not other.is_file():
            raise CoreplaneError(f"--build {d}: no {other}")
        out[f"build {d}"] = [str(other), "--"]
    return out


def _timed(argv: list[str], tmp: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one run (memcorpus.timed), which must succeed."""
    wall, cpu, (status, _, err) = timed(argv, tmp, dict(os.environ), 600)
    if status != 0:
        raise CoreplaneError(f"{' '.join(argv[:6])}...: exit status {status}: {err.decode(errors='replace')[-200:]}")
    return wall, cpu


def measure(build: list[str] | None = None) -> dict:
    """Every workload under every runtime, in turn, ROUNDS times."""
    with tempfile.TemporaryDirectory() as tmp:
        work, runs = workloads(Path(tmp)), runtimes(build or [])
        samples = {(w, r): [] for w in work for r in runs}
        for _ in range(ROUNDS):
            for w, (n, argv) in work.items():
                for r, prefix in runs.items():
                    wall, cpu = _timed(prefix + argv, Path(tmp))
                    samples[(w, r)].append((wall / n * 1e6, cpu / n * 1e6))
    rows = []
    for w in work:
        native = statistics.median(s[0] for s in samples[(w, "native")])
        for r in runs:
            wall = statistics.median(s[0] for s in samples[(w, r)])
            cpu = statistics.median(s[1] for s in samples[(w, r)])
            rows.append({"workload": w, "runtime": r, "wall_us": wall, "cpu_us": cpu, "added_us": wall - native,
                         "ratio": wall / native})
    return {"format": "coreplane-startcost/1", "rounds": ROUNDS, "load": os.getloadavg(), "rows": rows}


def render(doc: dict) -> str:
    lines = [f"per started process, medians of {doc['rounds']} rounds (load at the end {doc['load'][0]:.2f})",
             f"{'workload':36s} {'runtime':28s} {'wall µs':>9s} {'cpu µs':>9s} {'added µs':>9s} {'÷ native':>9s}"]
    for r in doc["rows"]:
        lines.append(f"{r['workload']:36s} {r['runtime']:28s} {r['wall_us']:9.0f} {r['cpu_us']:9.0f} "
                     f"{r['added_us']:9.0f} {r['ratio']:9.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    bench_main("python -m coreplane.bench.startcost", __doc__.split("\n")[0], measure, render, argv,
               options={"build": {"action": "append", "metavar": "DIR", "help": "another checkout's build"}})


if __name__ == "__main__":
    main()
