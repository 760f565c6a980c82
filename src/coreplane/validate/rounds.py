"""Validation runs through the experiment engine, in rounds: every case once per round, so drift hits all alike."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from coreplane import dse
from coreplane.core.errors import CoreplaneError
from coreplane.core.progress import Tracker, bars
from coreplane.dse.store import STORE_NAME
from coreplane.validate.commands import MEASURE


@dataclass(frozen=True)
class Case:
    """One point of a validation sweep: its name (unique in the sweep, e.g. `bzip2|mos|fc0|g1`)
    and its shell command."""

    case: str
    command: str


def spec(name: str, cases: list[Case], workdir: Path, timeout_s: float) -> dict:
    """A sweep spec (dict form) whose points are exactly `cases`: the name and the command move
    together (one zip group) instead of forming a product."""
    if not cases:
        raise CoreplaneError(f"{name}: nothing to run")
    params = {"case": [c.case for c in cases], "cmd": [c.command for c in cases]}
    return {
        "name": name, "command": "{cmd}", "workdir": str(workdir.resolve()), "repetitions": 1, "warmups": 0,
        "timeout": timeout_s, "retries": {"count": 2, "backoff": 2.0, "on": ["exit", "timeout", "signal"]},
        "parameters": params, "expand": {"zip": [["case", "cmd"]]},
        "metrics": [{"source": "json", "file": MEASURE,
                     "fields": {"wall_ns": "wall_ns", "user_ns": "user_ns", "sys_ns": "sys_ns"}}],
        "statistics": {"metric": "wall_ns"},
    }


def run(name: str, cases: list[Case], out: Path, rounds: int, warmups: int, timeout_s: float,
        progress: bool, strict: bool = False, more: Callable[[], bool] | None = None,
        max_rounds: int | None = None) -> dict:
    """Runs every case `rounds` times, one round after another (the experiment engine's repetition
    target grows by one per round, and `resume` keeps what earlier rounds stored); `warmups` runs
    of each case precede the first round. After `rounds`, further rounds follow while `more()`
    says so, up to `max_rounds`. Returns the engine's summary of the last round.
    `strict`: a failed run (after the engine's retries) stops everything, naming the case."""
    doc = spec(name, cases, out.parent, timeout_s)
    summary: dict = {}
    with bars(progress) as progress_bars:
        # One bar for every round, so the time left is the whole step's; runs a resumed step
        # stored before do not run again, and the sweeps raise the total only when they retry.
        tracker = Tracker(progress_bars, f"{name} ({rounds} rounds of {len(cases)})",
                          total=max(0, len(cases) * (rounds + warmups) - _stored_ok(out)))
        r = 0
        while r < rounds or (more is not None and r < (max_rounds or rounds) and more()):
            r += 1
            if r > rounds:
                tracker.expect(len(cases))
                tracker.describe(f"{name} (round {r}, at most {max_rounds}, of {len(cases)})")
            doc["repetitions"], doc["warmups"] = r, warmups if r == 1 else 0
            summary = dse.run_sweep(doc, out, resume=True, progress=tracker)
            if strict and summary["failed"]:
                bad = failures(out)[0]
                raise CoreplaneError(f"{out}: {name} case {bad['case']} failed ({bad['message']}): "
                                     f"{_last_line(out, bad['run_id'])}")
    return summary


def _stored_ok(out: Path) -> int:
    """Runs (warm-ups included) already stored as ok in the step's sweep, if there is one."""
    if not (out / STORE_NAME).exists():
        return 0
    runs = dse.load_runs(out)
    return int((runs["status"] == "ok").sum())


def _last_line(out: Path, run_id: str) -> str:
    """The last line the failed run wrote on stderr, which usually says why."""
    try:
        lines = (out / "logs" / run_id / "stderr").read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no stderr"
    return lines[-1] if lines else "nothing on stderr"


def medians(out: Path) -> dict[str, dict]:
    """Per point (by its `case` parameter): n, median, mean, CI and CV of wall_ns over the ok runs."""
    stats = dse.summary(out, metrics=["wall_ns"])
    return {row["case"]: {k: row[k] for k in ("n", "median", "mean", "sd", "ci_low", "ci_high", "cv", "min", "max")}
            for _, row in stats.iterrows()}


def run_files(out: Path, name: str) -> dict[str, list[Path]]:
    """Per case, the file `name` of each ok, measured run (e.g. stdout, measure.json), by round."""
    return {case: [p for _, p in sorted(by.items())] for case, by in run_files_by_round(out, name).items()}


def run_files_by_round(out: Path, name: str) -> dict[str, dict[int, Path]]:
    """Per case and round (the run's repetition number), the file `name` of the ok, measured run."""
    runs = dse.load_runs(out)
    ok = runs[(runs["status"] == "ok") & (~runs["warmup"])]
    files: dict[str, dict[int, Path]] = {}
    for _, row in ok.iterrows():
        files.setdefault(row["case"], {})[int(row["rep"])] = Path(row["log_dir"]) / name
    return files


def walls_by_round(out: Path) -> dict[str, dict[int, float]]:
    """Per case and round, the wall time (ns) of the ok, measured run (from its MEASURE file)."""
    files = run_files_by_round(out, MEASURE)
    return {case: {r: float(read_json(p)["wall_ns"]) for r, p in by.items()} for case, by in files.items()}


def read_json(path: Path) -> dict:
    """A JSON file a run wrote; a one-line error naming it otherwise."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CoreplaneError(f"{path}: cannot read the run's output: {exc}") from None


def failures(out: Path) -> list[dict]:
    """Measured runs that did not end ok: case, status and message."""
    runs = dse.load_runs(out)
    bad = runs[(runs["status"] != "ok") & (~runs["warmup"])]
    return [{"case": r["case"], "run_id": r["run_id"], "status": r["status"], "message": r["message"]}
            for _, r in bad.iterrows()]
