"""A whole sweep: plan the missing runs, hand them to an executor, store results, top up noisy points, resume."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from coreplane.core.documents import check_output_dir
from coreplane.core.errors import CoreplaneError
from coreplane.core.progress import Tracker, bars
from coreplane.dse import expand
from coreplane.dse.expand import Point
from coreplane.dse.runner import (LiveGroups, RunContext, RunSettings, RunTask, TimeoutPolicy,
                                  process_start_ticks, size_class)
from coreplane.dse.spec import Spec, from_dict
from coreplane.dse.specfile import load
from coreplane.dse.stats import cv_too_high
from coreplane.dse.store import STORE_NAME, RunResult, Store


@dataclass
class Batch:
    """The runs of one point handed to a worker together: its warm-ups, then its repetitions."""
    point: Point
    tasks: list[RunTask]


def run_id(point_id: str, rep: int) -> str:
    """`<point>-<rep>` for a measured repetition, `<point>-w<k>` for the k-th warm-up."""
    return f"{point_id}-{rep}" if rep >= 0 else f"{point_id}-w{-rep - 1}"


def plan(spec: Spec, store: Store, points: list[Point], out: Path, skip: set[str]) -> list[Batch]:
    """Batches for every measured run that is not stored as ok (and did not just fail, for `skip`)."""
    done, targets = store.ok_runs() | skip, store.targets()
    batches = []
    for p in points:
        reps = [r for r in range(targets[p.point_id]) if run_id(p.point_id, r) not in done]
        if not reps:
            continue
        klass = size_class(p.params, spec.timeout.size_class)
        reps = [-(k + 1) for k in range(spec.warmups)] + reps
        batches.append(Batch(p, [RunTask(run_id(p.point_id, r), p.point_id, r, r < 0, p.command, p.env,
                                         str(out / "logs" / run_id(p.point_id, r)), klass) for r in reps]))
    return batches


def top_up(spec: Spec, store: Store, points: list[Point], failed: set[str]) -> int:
    """Raises the repetition target of complete points whose CV is above the threshold; returns how many."""
    st = spec.statistics
    if st.cv_threshold is None:
        return 0
    raised = 0
    targets = store.targets()
    for p in points:
        target = targets[p.point_id]
        if target >= st.max_repetitions or any(run_id(p.point_id, r) in failed for r in range(target)):
            continue
        values = store.values(p.point_id, st.metric)
        if len(values) >= target and cv_too_high(values, st.cv_threshold):
            store.raise_target(p.point_id, min(st.max_repetitions, target + spec.repetitions))
            raised += 1
    return raised


def make_executor(name: str, parallel: int, cores_per_run: int | None, spec: Spec, out: Path):
    """The executor named on the command line; each has describe(), recover(ctx) and run(batches, ctx)."""
    if name == "local":
        from coreplane.dse.executors.local import LocalExecutor
        return LocalExecutor(parallel, cores_per_run)
    if name == "slurm":
        from coreplane.dse.executors.slurm import SlurmExecutor
        return SlurmExecutor(spec.slurm, out)
    raise CoreplaneError(f"--executor {name}: expected local or slurm")


def _sigterm_interrupts():
    """Makes SIGTERM stop the sweep like Ctrl-C (runs killed, store consistent); returns the old handler."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:   # not the main thread (Python API from a thread): leave SIGTERM alone
        return None


def run_sweep(spec: Spec | dict | str | Path, out: str | Path, *, resume: bool = False, executor: str = "local",
              parallel: int = 1, cores_per_run: int | None = None, progress: bool | Tracker = True) -> dict:
    """Runs every missing run of `spec` (a Spec, a spec dict, or a spec file) into the sweep
    directory `out` and returns a summary.

    `resume=True` continues a sweep already in `out`: runs stored as ok are kept, missing,
    failed and interrupted ones run again. Raises CoreplaneError on bad input; failed runs are
    counted in the summary, not raised."""
    if isinstance(spec, dict):
        spec = from_dict(spec)
    elif not isinstance(spec, Spec):
        spec = load(spec)
    out = Path(out).resolve()  # commands run in the spec's directory; their log paths must not be relative
    points = expand.points(spec)
    if not points:
        raise CoreplaneError(f"{spec.source}: every combination is excluded; nothing to run")
    check_output_dir(out)
    runner = make_executor(executor, parallel, cores_per_run, spec, out)
    store = Store(out / STORE_NAME)
    try:
        existing = store.query("SELECT count(*) AS n FROM runs")[0]["n"]
        if existing and not resume:
            raise CoreplaneError(f"{out}: already holds a sweep ({existing} runs); continue it with --resume "
                                 f"or choose another --out")
        from coreplane.core.machine import describe
        store.set_meta(name=spec.name, source=spec.source, spec=spec.text, tags=spec.tags,
                       parameters=list(spec.parameters), metric=spec.statistics.metric,
                       confidence=spec.statistics.confidence, cv_threshold=spec.statistics.cv_threshold,
                       machine=describe(), updated=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        store.add_points(points, spec.repetitions)
        return _loop(spec, store, points, out, runner, progress)
    finally:
        store.close()


def _loop(spec: Spec, store: Store, points: list[Point], out: Path, runner, progress: bool | Tracker) -> dict:
    settings = RunSettings.of(spec)
    policy = TimeoutPolicy(spec.timeout)
    by_id = {p.point_id: p for p in points}
    for pid, wall in store.completed_walls():
        if pid in by_id:
            policy.learn(size_class(by_id[pid].params, spec.timeout.size_class), wall)
    live = LiveGroups()
    counts: Counter = Counter()
    failed: set[str] = set()
    already_ok = store.query("SELECT count(*) AS n FROM runs WHERE status = 'ok' AND warmup = 0")[0]["n"]
    topped_up = 0
    started = time.monotonic()

    with ExitStack() as stack:
        if isinstance(progress, Tracker):
            tracker = progress
        else:
            tracker = Tracker(stack.enter_context(bars(progress)), spec.name)

        def on_start(t: RunTask, pid: int, cpus: str | None) -> None:
            # Recorded with the process's start time, so `recover` can tell the pid was not reused.
            store.mark_running(t.run_id, t.point_id, t.rep, t.warmup, "local", pid, process_start_ticks(pid),
                               socket.gethostname(), cpus, t.log_dir)

        results_lock = threading.Lock()

        def on_result(result: RunResult) -> None:
            with results_lock:   # parallel workers report concurrently
                _record(result)

        def _record(result: RunResult) -> None:
            store.record(result)
            status = result.final.status
            counts[("warmup " if result.warmup else "") + status] += 1
            if status != "ok":
                failed.add(result.run_id)
            elif result.point_id in by_id:
                policy.learn(size_class(by_id[result.point_id].params, spec.timeout.size_class),
                             result.final.wall_s)
            tracker.done(note=f"failed {sum(v for k, v in counts.items() if not k.endswith('ok'))}")

        ctx = RunContext(settings, policy, live, store, on_start, on_result)
        previous = _sigterm_interrupts()
        try:
            recovered = runner.recover(ctx)
            while True:
                batches = plan(spec, store, points, out, failed)
                if not batches:
                    raised = top_up(spec, store, points, failed)
                    topped_up += raised
                    if not raised:
                        break
                    continue
                tracker.expect(sum(len(b.tasks) for b in batches))
                runner.run(batches, ctx)
        except KeyboardInterrupt:
            live.kill_all()
            raise CoreplaneError(f"interrupted; finished runs are stored, continue with "
                                 f"`coreplane sweep {spec.source} --out {out} --resume`", 130) from None
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    statuses = Counter(r["status"] for r in store.query("SELECT status FROM runs WHERE warmup = 0"))
    return {
        "name": spec.name, "out": str(out), "store": str(out / STORE_NAME), "executor": runner.describe(),
        "points": len(points), "runs": sum(statuses.values()),
        "ok": statuses.get("ok", 0),
        "failed": {k: v for k, v in statuses.items() if k not in ("ok", "running")},
        "this_invocation": {"ran": sum(v for k, v in counts.items() if not k.startswith("warmup")),
                            "warmups": sum(v for k, v in counts.items() if k.startswith("warmup")),
                            "kept_from_before": already_ok, "topped_up_points": topped_up,
                            "recovered": recovered, "by_status": dict(counts)},
        "elapsed_s": round(time.monotonic() - started, 3),
    }
