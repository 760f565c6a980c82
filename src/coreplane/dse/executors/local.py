"""The local executor: batches one after another, or in parallel on disjoint core sets."""

from __future__ import annotations

import os
import socket
import threading

from coreplane.core.cpulist import format_cpu_list
from coreplane.core.errors import CoreplaneError
from coreplane.dse.runner import RunContext, execute, kill_group, process_start_ticks


def core_sets(parallel: int, cores_per_run: int | None) -> list[list[int] | None]:
    """Disjoint sets of this process's allowed CPUs, one per parallel worker (None: no pinning)."""
    if parallel < 1:
        raise CoreplaneError(f"--parallel {parallel}: must be at least 1")
    if parallel == 1 and not cores_per_run:
        return [None]
    allowed = sorted(os.sched_getaffinity(0))
    per = cores_per_run or len(allowed) // parallel
    if per < 1 or per * parallel > len(allowed):
        raise CoreplaneError(f"--parallel {parallel} x {per} cores per run needs {parallel * max(per, 1)} CPUs; "
                             f"this process may use {len(allowed)} ({format_cpu_list(allowed)})")
    return [allowed[i * per:(i + 1) * per] for i in range(parallel)]


class LocalExecutor:
    """Runs batches (warm-ups then repetitions of a point) on this machine."""

    name = "local"

    def __init__(self, parallel: int = 1, cores_per_run: int | None = None):
        self.sets = core_sets(parallel, cores_per_run)

    def describe(self) -> str:
        if self.sets == [None]:
            return "local, serial"
        return f"local, {len(self.sets)} in parallel on cores " + " | ".join(format_cpu_list(s) for s in self.sets)

    def recover(self, ctx: RunContext) -> int:
        """Kills the process groups of runs a killed runner left behind on this host; returns how many."""
        host, killed = socket.gethostname(), 0
        for row in ctx.store.in_flight():
            if row["executor"] == "local" and row["host"] == host and row["pid"] and \
                    process_start_ticks(row["pid"]) == row["pid_start"]:
                kill_group(row["pid"])
                killed += 1
        return killed

    def run(self, batches: list, ctx: RunContext) -> None:
        """Executes every task of every batch; `ctx.on_result` gets each finished run as it ends."""
        live = ctx.live
        queue = list(reversed(batches))
        lock = threading.Lock()
        errors: list[BaseException] = []

        def worker(cpus: list[int] | None) -> None:
            if cpus is not None:
                # Pins this thread only; the runs it forks inherit the mask.
                os.sched_setaffinity(0, cpus)
            label = format_cpu_list(cpus) if cpus is not None else None
            while not live.stopping.is_set():
                with lock:
                    if not queue:
                        return
                    batch = queue.pop()
                for task in batch.tasks:
                    result = execute(task, ctx.settings, ctx.policy.limit(task.size_class), live, label,
                                     lambda pid, t=task, c=label: ctx.on_start(t, pid, c))
                    if result is None:
                        return
                    ctx.on_result(result)

        if self.sets == [None]:
            worker(None)
            return

        def guarded(cpus):
            try:
                worker(cpus)
            except BaseException as exc:   # surfaced in the main thread below
                errors.append(exc)
                live.kill_all()

        threads = [threading.Thread(target=guarded, args=(s,), daemon=True) for s in self.sets]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(0.2)
        except BaseException:
            live.kill_all()
            raise
        if errors:
            raise errors[0]
