"""Running one sweep run: its process group, time-out, retries with back-off and failure class."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from coreplane.dse.expand import fill_builtins
from coreplane.dse.metrics import TIME_FILE, ParseError, extract, time_signal
from coreplane.dse.spec import Metric, Retries, Spec, Timeout
from coreplane.dse.store import Attempt, RunResult, Store

TIME_BINARY = "/usr/bin/time"


@dataclass
class RunTask:
    """One run to execute: a repetition (or warm-up) of a point."""
    run_id: str
    point_id: str
    rep: int                  # 0.. for measured runs; -1, -2, ... for warm-ups
    warmup: bool
    command: str              # parameters filled in, built-ins not yet
    env: dict[str, str]
    log_dir: str
    size_class: str
    timeout_s: float | None = None   # fixed at submission for remote executors; else decided at start


@dataclass
class RunSettings:
    """What every run of a sweep shares: metrics, retries, working directory."""
    metrics: list[Metric] = field(default_factory=list)
    retries: Retries = field(default_factory=Retries)
    workdir: str | None = None

    @classmethod
    def of(cls, spec: Spec) -> "RunSettings":
        # Absolute, so runs on a Slurm node start where they would here.
        base = Path(spec.source).resolve().parent if Path(spec.source).is_file() else Path.cwd()
        return cls(list(spec.metrics), spec.retries, str(base / spec.workdir if spec.workdir else base))

    @property
    def uses_time(self) -> bool:
        return any(m.source == "time" for m in self.metrics)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict) -> "RunSettings":
        return cls([Metric(**m) for m in doc["metrics"]],
                   Retries(**{**doc["retries"], "on": tuple(doc["retries"]["on"])}), doc["workdir"])


def size_class(params: dict, names: tuple[str, ...] | None) -> str:
    """Key of the runs an adaptive time-out learns from: the values of the size-class parameters."""
    chosen = params if names is None else {n: params[n] for n in names}
    return json.dumps(chosen, sort_keys=True)


class TimeoutPolicy:
    """Fixed time-outs, or adaptive ones: `factor` x the slowest completed run of the size class, at least `floor`."""

    def __init__(self, timeout: Timeout):
        self.timeout = timeout
        self._slowest: dict[str, float] = {}
        self._lock = threading.Lock()

    def learn(self, size_class_key: str, wall_s: float) -> None:
        with self._lock:
            self._slowest[size_class_key] = max(wall_s, self._slowest.get(size_class_key, 0.0))

    def limit(self, size_class_key: str) -> float | None:
        t = self.timeout
        if t.seconds is not None:
            return t.seconds
        if not t.adaptive:
            return None
        with self._lock:
            slowest = self._slowest.get(size_class_key)
        if slowest is None:
            return None if t.initial is None else max(t.initial, t.floor)
        return max(t.floor, t.factor * slowest)


class LiveGroups:
    """Process groups of runs in flight, so an interrupted sweep leaves none behind."""

    def __init__(self):
        self._groups: set[int] = set()
        self._lock = threading.Lock()
        self.stopping = threading.Event()

    def add(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)

    def discard(self, pgid: int) -> None:
        with self._lock:
            self._groups.discard(pgid)

    def kill_all(self) -> None:
        """Stops everything: no retry starts after this, and every live group gets SIGKILL."""
        self.stopping.set()
        with self._lock:
            for pgid in self._groups:
                kill_group(pgid)


@dataclass
class RunContext:
    """What an executor needs from the sweep: settings, time-outs, live groups, and where results go."""
    settings: RunSettings
    policy: TimeoutPolicy
    live: LiveGroups
    store: Store
    on_start: Callable[[RunTask, int, str | None], None]   # local runs: (task, pid, cpus) when it started
    on_result: Callable[[RunResult], None]                  # every finished run, as it finishes


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def process_start_ticks(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot (/proc/PID/stat field 22): tells a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _wait(proc: subprocess.Popen, limit: float | None) -> bool:
    """Waits for the child to exit without reaping it; True if it did before `limit` seconds."""
    fd = os.pidfd_open(proc.pid)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                if poller.poll(None if left is None else int(left * 1000) + 1):
                    return True
            except InterruptedError:
                continue
            if deadline is not None and time.monotonic() >= deadline:
                return False
    finally:
        os.close(fd)


def _classify(returncode: int, timed_out: bool, limit: float | None, run_dir: Path, uses_time: bool) -> Attempt:
    if timed_out:
        return Attempt("timeout", timeout_s=limit, exit_code=returncode,
                       message=f"killed (with its process group) at the {limit:.3g} s time-out")
    if returncode < 0:
        return Attempt("signal", signal=-returncode, message=f"killed by {signal.Signals(-returncode).name}")
    sig = time_signal(run_dir) if uses_time and returncode else None
    if sig is None and 128 < returncode <= 128 + 64:
        sig = returncode - 128   # the shell's way of saying its child died of a signal
    if sig is not None:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return Attempt("signal", exit_code=returncode, signal=sig, message=f"killed by {name}")
    if returncode:
        return Attempt("exit", exit_code=returncode, message=f"exit status {returncode}")
    return Attempt("ok", exit_code=0)


def _attempt(task: RunTask, settings: RunSettings, limit: float | None, cpus: str | None,
             live: LiveGroups, on_start: Callable[[int], None] | None) -> tuple[Attempt, dict[str, float]]:
    run_dir = Path(task.log_dir)
    values = {"rep": task.rep, "run_id": task.run_id, "rundir": run_dir, "cpus": cpus or "", "point_id": task.point_id}
    argv = ["/bin/sh", "-c", fill_builtins(task.command, values)]
    if settings.uses_time:
        argv = [TIME_BINARY, "-v", "-o", str(run_dir / TIME_FILE)] + argv
    env = {**os.environ, **{k: fill_builtins(v, values) for k, v in task.env.items()},
           "COREPLANE_RUN_ID": task.run_id, "COREPLANE_RUN_DIR": str(run_dir)}
    with open(run_dir / "stdout", "wb") as out, open(run_dir / "stderr", "wb") as err:
        start = time.perf_counter()
        # A session of its own: the run and everything it starts share one process group to kill.
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=settings.workdir,
                                env=env, start_new_session=True)
    live.add(proc.pid)
    try:
        if on_start:
            on_start(proc.pid)
        exited = _wait(proc, limit)
        wall = time.perf_counter() - start
        # Still unreaped, so the group id cannot have been reused: kill the group, and with it
        # whatever the run left behind in the background.
        kill_group(proc.pid)
        returncode = proc.wait()
    except BaseException:
        kill_group(proc.pid)   # interrupted while waiting: take the run down with us
        proc.wait()
        raise
    finally:
        live.discard(proc.pid)
    attempt = _classify(returncode, not exited, limit, run_dir, settings.uses_time)
    attempt.wall_s, attempt.timeout_s = wall, limit
    metrics: dict[str, float] = {}
    if attempt.status == "ok":
        try:
            metrics = {"wall_s": wall, **extract(settings.metrics, run_dir)}
        except ParseError as exc:
            attempt.status, attempt.message = "parse", str(exc)
    return attempt, metrics


def execute(task: RunTask, settings: RunSettings, limit: float | None, live: LiveGroups, cpus: str | None = None,
            on_start: Callable[[int], None] | None = None, executor: str = "local") -> RunResult | None:
    """Runs a task until it succeeds or its retries are spent; None if the sweep was stopped meanwhile.

    A retry waits backoff x 2^(k-1) seconds; a retry after a time-out gets twice the time."""
    Path(task.log_dir).mkdir(parents=True, exist_ok=True)
    started = time.time()
    attempts: list[Attempt] = []
    metrics: dict[str, float] = {}
    for k in range(settings.retries.count + 1):
        if live.stopping.is_set():
            return None
        timeouts = sum(a.status == "timeout" for a in attempts)
        attempt, metrics = _attempt(task, settings, None if limit is None else limit * 2 ** timeouts,
                                    cpus, live, on_start)
        if live.stopping.is_set():
            return None
        attempts.append(attempt)
        if attempt.status == "ok" or attempt.status not in settings.retries.on or k == settings.retries.count:
            break
        live.stopping.wait(settings.retries.backoff * 2 ** k)
    return RunResult(task.run_id, task.point_id, task.rep, task.warmup, attempts, metrics, started, cpus,
                     socket.gethostname(), executor, task.log_dir)
