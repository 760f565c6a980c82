"""The Slurm executor: job arrays bundling many runs per allocation, below MaxSubmit, states from sacct.

The submitting process writes a bundle (JSON) and a job script into OUT/slurm/<stamp>/, submits one
array, and ingests the results each array task writes as OUT/slurm/<stamp>/results/<run_id>.json (so
OUT must be on a file system the compute nodes share; the SQLite store is written only here). Runs
whose result never appeared get the state sacct reports for their array task. Run as
`python -m coreplane.dse.executors.slurm BUNDLE INDEX`, this module is the array task itself.
"""

from __future__ import annotations

import getpass
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from coreplane.core.cpulist import format_cpu_list
from coreplane.core.errors import CoreplaneError
from coreplane.dse.runner import LiveGroups, RunContext, RunSettings, RunTask, execute
from coreplane.dse.spec import SlurmOptions
from coreplane.dse.store import Attempt, RunResult

BUNDLE_FORMAT = "coreplane-slurm-bundle/1"
TOOLS = ("sbatch", "squeue", "sacct", "scontrol", "scancel")
POLL_S = 1.0
# sacct state -> failure class of a run its array task never reported.
SACCT_CLASS = {"TIMEOUT": "timeout", "DEADLINE": "timeout", "FAILED": "exit", "COMPLETED": "exit",
               "OUT_OF_MEMORY": "signal", "CANCELLED": "signal", "NODE_FAIL": "signal", "PREEMPTED": "signal",
               "BOOT_FAIL": "signal", "REVOKED": "signal"}
TERMINAL = set(SACCT_CLASS)


def _slurm(*args: str, check: bool = True) -> str:
    """Runs a Slurm command; its last stderr line becomes the one-line error."""
    proc = subprocess.run(args, capture_output=True, text=True)
    if check and proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise CoreplaneError(f"--executor slurm: `{' '.join(args[:2])}` failed: {last}")
    return proc.stdout


def _config() -> dict[str, str]:
    """`scontrol show config` as a dict (also the check that a controller answers)."""
    out = {}
    for line in _slurm("scontrol", "show", "config").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _int_or_none(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def submit_limit(config: dict[str, str]) -> tuple[int, str]:
    """How many array tasks one submission may have now, and why: MaxArraySize, and MaxSubmitJobs of
    the user's associations and QOS minus the jobs already queued (sacctmgr; skipped if unavailable)."""
    limits = {"MaxArraySize": int(config.get("MaxArraySize", "1001"))}
    user = getpass.getuser()
    if shutil.which("sacctmgr"):
        assoc = _slurm("sacctmgr", "-n", "-P", "show", "assoc", "where", f"user={user}",
                       f"cluster={config.get('ClusterName', '')}", "format=MaxSubmit,QOS", check=False)
        qos_names = set()
        for line in assoc.splitlines():
            max_submit, _, qos = line.partition("|")
            if (value := _int_or_none(max_submit)) is not None:
                limits["MaxSubmitJobs"] = min(value, limits.get("MaxSubmitJobs", value))
            qos_names.update(q for q in qos.split(",") if q)
        for line in _slurm("sacctmgr", "-n", "-P", "show", "qos", "format=Name,MaxSubmitPU", check=False).splitlines():
            name, _, value = line.partition("|")
            if name in qos_names and (v := _int_or_none(value)) is not None:
                limits["MaxSubmitPU"] = min(v, limits.get("MaxSubmitPU", v))
    queued = len(_slurm("squeue", "-h", "-r", "-u", user, "-o", "%i").split())
    room = {k: v - (queued if k != "MaxArraySize" else 0) for k, v in limits.items()}
    key = min(room, key=room.get)
    return room[key], f"{key}={limits[key]}" + (f" with {queued} jobs queued" if key != "MaxArraySize" else "")


def bundles(batches: list, count: int) -> list[list[RunTask]]:
    """Deals whole batches (a point's warm-ups and repetitions) round-robin into `count` array tasks."""
    out: list[list[RunTask]] = [[] for _ in range(min(count, len(batches)))]
    for i, batch in enumerate(batches):
        out[i % len(out)].extend(batch.tasks)
    return out


def time_limit(parts: list[list[RunTask]], settings: RunSettings) -> str | None:
    """--time (minutes) of the longest array task: each run's worst case over its retries (time-outs
    double), plus a minute; None (the partition's default) when a run has no time-out."""
    if any(t.timeout_s is None for part in parts for t in part):
        return None
    r = settings.retries
    worst = max(sum(t.timeout_s * (2 ** (r.count + 1) - 1) + r.backoff * (2 ** r.count - 1) for t in part)
                for part in parts)
    return str(math.ceil((worst + 60) / 60))


class SlurmExecutor:
    """Submits the sweep's runs as a Slurm job array and waits for them."""

    name = "slurm"

    def __init__(self, options: SlurmOptions, out: Path):
        missing = [t for t in TOOLS if shutil.which(t) is None]
        if missing:
            raise CoreplaneError(f"--executor slurm: {', '.join(missing)} not found on PATH; this machine has no "
                                 f"Slurm client (Debian: apt-get install slurm-client) — use --executor local")
        self.options = options
        self.out = Path(out).resolve()
        self.config = _config()

    def describe(self) -> str:
        return f"slurm, cluster {self.config.get('ClusterName', '?')}"

    def recover(self, ctx: RunContext) -> int:
        """Waits for arrays an earlier (killed) submitter left running, and ingests what they wrote."""
        jobs = ctx.store.active_slurm_jobs()
        reported = {r["run_id"] for r in ctx.store.query("SELECT run_id FROM runs WHERE status != 'running'")}
        for row in jobs:
            self._wait(row["job_id"], Path(row["dir"]), ctx, reported)
        return len(jobs)

    def run(self, batches: list, ctx: RunContext) -> None:
        """One array per call: as many array tasks as the submit limit allows, whole batches in each."""
        room, why = submit_limit(self.config)
        if room < 1:
            raise CoreplaneError(f"--executor slurm: no room to submit ({why}); wait for queued jobs to end")
        count = min(room, self.options.max_array or room)
        for batch in batches:
            for task in batch.tasks:
                task.timeout_s = ctx.policy.limit(task.size_class)
        parts = bundles(batches, count)
        directory = self.out / "slurm" / time.strftime("%Y%m%d-%H%M%S")
        while directory.exists():
            directory = directory.with_name(directory.name + "+")
        (directory / "results").mkdir(parents=True)
        bundle = directory / "bundle.json"
        bundle.write_text(json.dumps({"format": BUNDLE_FORMAT, "settings": ctx.settings.to_json(),
                                      "results": str(directory / "results"),
                                      "tasks": [[t.__dict__ for t in part] for part in parts]}))
        script = directory / "job.sh"
        script.write_text(f"#!/bin/sh\nexec '{sys.executable}' -m coreplane.dse.executors.slurm "
                          f"'{bundle}' \"$SLURM_ARRAY_TASK_ID\"\n")
        script.chmod(0o755)
        args = ["sbatch", "--parsable", f"--array=0-{len(parts) - 1}", f"--job-name=coreplane-{directory.parent.parent.name}",
                f"--output={directory}/%A_%a.out", f"--cpus-per-task={self.options.cpus_per_task}",
                f"--chdir={directory}"]
        limit = self.options.time or time_limit(parts, ctx.settings)
        if limit:
            args.append(f"--time={limit}")
        if self.options.partition:
            args.append(f"--partition={self.options.partition}")
        if self.options.account:
            args.append(f"--account={self.options.account}")
        args += [*self.options.options, str(script)]
        job_id = _slurm(*args).strip().split(";")[0]
        tasks = [t for part in parts for t in part]
        ctx.store.add_slurm_job(job_id, len(parts), len(tasks), str(directory))
        ctx.store.mark_many_running(tasks, f"slurm:{job_id}")
        try:
            self._wait(job_id, directory, ctx)
        except KeyboardInterrupt:
            _slurm("scancel", job_id, check=False)
            ctx.store.finish_slurm_job(job_id, "cancelled")
            raise

    def _wait(self, job_id: str, directory: Path, ctx: RunContext, reported: set[str] | None = None) -> None:
        """Ingests result files until the array has left the queue, then classifies runs never reported.
        `reported`: runs the store already has a result for (a resumed wait does not record them twice)."""
        seen = set(reported or ())
        while True:
            active = _slurm("squeue", "-h", "-j", job_id, "-o", "%i", check=False).split()
            self._ingest(directory, seen, ctx)
            if not active:
                break
            time.sleep(POLL_S)
        self._ingest(directory, seen, ctx)
        doc = json.loads((directory / "bundle.json").read_text())
        states = self._sacct(job_id, len(doc["tasks"]))
        for index, part in enumerate(doc["tasks"]):
            state, code = states.get(index, ("UNKNOWN", "?:?"))
            exit_code, _, sig = code.partition(":")
            status = "signal" if sig.isdigit() and int(sig) else SACCT_CLASS.get(state, "exit")
            for t in part:
                if t["run_id"] in seen:
                    continue
                message = (f"Slurm array task {job_id}_{index} ended {state} (exit {code}) before this run "
                           f"reported; see {directory}/{job_id}_{index}.out")
                ctx.on_result(RunResult(t["run_id"], t["point_id"], t["rep"], t["warmup"],
                                        [Attempt(status, timeout_s=t["timeout_s"], message=message,
                                                 exit_code=int(exit_code) if exit_code.isdigit() else None,
                                                 signal=int(sig) if sig.isdigit() and int(sig) else None)],
                                        executor=f"slurm:{job_id}_{index}", log_dir=t["log_dir"]))
        ctx.store.finish_slurm_job(job_id, ",".join(sorted({s for s, _ in states.values()})) or "unknown")

    @staticmethod
    def _ingest(directory: Path, seen: set[str], ctx: RunContext) -> None:
        for path in sorted((directory / "results").glob("*.json")):
            if path.stem not in seen:
                seen.add(path.stem)
                ctx.on_result(RunResult.from_json(json.loads(path.read_text())))

    @staticmethod
    def _sacct(job_id: str, count: int) -> dict[int, tuple[str, str]]:
        """Final (State, ExitCode) of each array task; slurmdbd may lag the queue by a few seconds.
        Without accounting (sacct fails) the states stay unknown rather than delaying the sweep."""
        states: dict[int, tuple[str, str]] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            proc = subprocess.run(["sacct", "-n", "-P", "-X", "-j", job_id, "--format=JobID,State,ExitCode"],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                break
            for line in proc.stdout.splitlines():
                job, _, rest = line.partition("|")
                state, _, code = rest.partition("|")
                _, _, index = job.partition("_")
                if index.isdigit():
                    states[int(index)] = (state.split()[0] if state else "UNKNOWN", code)
            if len(states) >= count and all(s in TERMINAL for s, _ in states.values()):
                break
            time.sleep(POLL_S)
        return states


def _write_result(results: Path, result: RunResult) -> None:
    """Atomically: the submitter never reads half a file."""
    tmp = results / f".{result.run_id}.tmp"
    tmp.write_text(json.dumps(result.to_json()))
    tmp.rename(results / f"{result.run_id}.json")


def work(bundle_path: str, index: int) -> int:
    """The array task: runs its share of the bundle and writes one result file per run."""
    doc = json.loads(Path(bundle_path).read_text())
    if doc.get("format") != BUNDLE_FORMAT:
        print(f"{bundle_path}: not a {BUNDLE_FORMAT} bundle", file=sys.stderr)
        return 2
    settings = RunSettings.from_json(doc["settings"])
    live = LiveGroups()

    def stop(signum, frame):   # scancel or the time limit: take the current run down, report nothing more
        live.kill_all()
    signal.signal(signal.SIGTERM, stop)
    cpus = format_cpu_list(sorted(os.sched_getaffinity(0)))
    label = f"slurm:{os.environ.get('SLURM_ARRAY_JOB_ID', '?')}_{index}"
    for task in (RunTask(**t) for t in doc["tasks"][index]):
        result = execute(task, settings, task.timeout_s, live, cpus, executor=label)
        if result is None:
            return 143
        _write_result(Path(doc["results"]), result)
    return 0


if __name__ == "__main__":
    sys.exit(work(sys.argv[1], int(sys.argv[2])))
