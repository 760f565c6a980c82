"""Benchmark: the sweep engine's orchestration overhead per run, against a plain shell loop.

`python -m coreplane.dse.overhead [--runs N] [--trials K] [--json] [--from FILE]` (used by
`make bench`). Each trial runs /bin/true N times through `run_sweep` (store, logs, process group,
time-out machinery) and N times in a `sh` while-loop, back to back; the overhead per run is the
difference per run. Also times one end-to-end `coreplane sweep` (interpreter start-up included).
"""

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import typer

from coreplane.core.machine import describe
from coreplane.core.output import console, emit
from coreplane.dse.spec import from_dict
from coreplane.dse.store import Store
from coreplane.dse.sweep import run_sweep

POINTS = 20


def _spec(runs: int) -> dict:
    return {"name": "overhead", "command": "/bin/true", "parameters": {"i": list(range(POINTS))},
            "repetitions": runs // POINTS, "timeout": 60}


def _loop_s(runs: int) -> float:
    start = time.perf_counter()
    subprocess.run(["/bin/sh", "-c", f'i=0; while [ $i -lt {runs} ]; do /bin/true; i=$((i+1)); done'], check=True)
    return time.perf_counter() - start


def _sweep_s(runs: int, out: Path) -> tuple[float, list[float]]:
    """Total seconds of run_sweep, and the start-to-start cycle of consecutive runs."""
    start = time.perf_counter()
    run_sweep(from_dict(_spec(runs)), out, progress=False)
    total = time.perf_counter() - start
    store = Store(out / "store.sqlite", create=False)
    starts = sorted(r["started_at"] for r in store.query("SELECT started_at FROM runs"))
    store.close()
    return total, [b - a for a, b in zip(starts, starts[1:])]


def measure(runs: int, trials: int) -> dict:
    """Median over trials of the per-run overhead (ms), with the loop's per-run cost beside it."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="coreplane-overhead-") as tmp:
        for trial in range(trials):
            loop = _loop_s(runs)
            total, cycles = _sweep_s(runs, Path(tmp) / f"t{trial}")
            rows.append({"loop_ms_per_run": 1e3 * loop / runs, "sweep_ms_per_run": 1e3 * total / runs,
                         "cycle_ms_median": 1e3 * statistics.median(cycles)})
        spec = Path(tmp) / "overhead.toml"
        spec.write_text(f'command = "/bin/true"\nrepetitions = {runs // POINTS}\ntimeout = 60\n'
                        f"[parameters]\ni = {{ start = 1, stop = {POINTS} }}\n")
        start = time.perf_counter()
        subprocess.run([str(Path(sys.executable).with_name("coreplane")), "sweep", str(spec), "--out",
                        str(Path(tmp) / "cli"), "--json"], check=True, capture_output=True)
        cli = time.perf_counter() - start
    median = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    # Per run: the median start-to-start cycle of the sweep less the loop's cost of one /bin/true.
    overhead = [r["cycle_ms_median"] - r["loop_ms_per_run"] for r in rows]
    return {
        "runs_per_trial": runs - runs % POINTS, "trials": trials, "command": "/bin/true",
        "loop_ms_per_run": median["loop_ms_per_run"], "sweep_ms_per_run": median["sweep_ms_per_run"],
        "cycle_ms_median": median["cycle_ms_median"],
        "overhead_ms_per_run": statistics.median(overhead),
        "overhead_ms_per_run_trials": overhead,
        # Whole sweep (store creation and the closing WAL checkpoint included), spread over its runs.
        "overhead_ms_per_run_total": statistics.median(r["sweep_ms_per_run"] - r["loop_ms_per_run"] for r in rows),
        "ratio_sweep_to_loop": median["sweep_ms_per_run"] / median["loop_ms_per_run"],
        "cli_end_to_end_ms_per_run": 1e3 * cli / (runs - runs % POINTS),
        "goal_ms": 20.0, "machine": describe(),
    }


def _render(doc: dict) -> None:
    ok = doc["overhead_ms_per_run"] <= doc["goal_ms"]
    console.print(f"overhead per run of a sweep of {doc['command']}: [{'green' if ok else 'red'}]"
                  f"{doc['overhead_ms_per_run']:.2f} ms[/] median (goal <= {doc['goal_ms']:.0f} ms): a run starts "
                  f"every {doc['cycle_ms_median']:.2f} ms (median), a shell loop runs one every "
                  f"{doc['loop_ms_per_run']:.2f} ms; {doc['trials']} trials of {doc['runs_per_trial']} runs.\n"
                  f"Whole sweep {doc['sweep_ms_per_run']:.2f} ms/run (x{doc['ratio_sweep_to_loop']:.1f} the loop, "
                  f"{doc['overhead_ms_per_run_total']:.2f} ms/run over it); CLI end to end "
                  f"{doc['cli_end_to_end_ms_per_run']:.2f} ms/run", highlight=False)


def main(
    runs: int = typer.Option(400, "--runs", help="Runs per trial (a multiple of 20)."),
    trials: int = typer.Option(5, "--trials", help="Trials; the median is reported."),
    from_file: Path = typer.Option(None, "--from", help="Show a saved --json result instead of measuring."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
) -> None:
    """Orchestration overhead per run of `coreplane sweep` against a plain shell loop."""
    doc = json.loads(from_file.read_text()) if from_file else measure(max(runs, POINTS), trials)
    emit(doc, json_out, _render)


if __name__ == "__main__":
    typer.run(main)
