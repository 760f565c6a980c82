"""ROS Tables 1-2 on this machine: the latency of creating processes and MCPs, granting,
yielding, revoking and preempting vcores, and reclaiming a killed MCP, against a private arbiter
(`coreplane arbiter tables`)."""

import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from coreplane.arbiter.client import Daemon, env_for
from coreplane.arbiter.vcore import Vcores
from coreplane.core.errors import CoreplaneError
from coreplane.core.machine import describe

CONTROL_CPU = 0
# Goals of issue 14, in µs, with the statistic each bounds: warm grant p50, cooperative
# warn-preempt p50, an uncooperative vcore off its core after the deadline (every time: p99).
GOALS = {"get_one_vcore_warm": ("p50_us", 50.0), "warn_preempt_one_cooperative": ("p50_us", 100.0),
         "preempt_uncooperative_after_deadline": ("p99_us", 1000.0)}

# A child MCP: "coop" yields at its safe point when warned; "spin" pins itself to its vcore's CPU
# and never yields, printing when it last ran there and when it first found itself elsewhere
# (CLOCK_MONOTONIC ns: it left the core between the two).
CHILD = r"""
import ctypes, os, sys, time
from coreplane.arbiter.vcore import Vcores
sys.stdin.readline()   # provisioned
mode, v, libc = sys.argv[1], Vcores(), ctypes.CDLL(None)
while True:
    while v.request(1) == 0:
        pass
    cpu = v.cpu(0)
    if mode == "spin":
        os.sched_setaffinity(0, {cpu})
    print("granted", flush=True)
    if mode == "coop":
        while v.cpu(0) >= 0 and v.preempt_deadline(0) is None:
            pass
        try:
            v.yield_vcore(0)
        except Exception:   # preempted before it yielded (the bench counts it)
            pass
        continue
    last_on = 0
    while True:   # the clock first: when the CPU then still is the vcore's, it ran there after
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if libc.sched_getcpu() != cpu:
            break
        last_on = now
    print(last_on, time.clock_gettime_ns(time.CLOCK_MONOTONIC), flush=True)
"""


def stats(samples_ns: list[float]) -> dict:
    us = np.asarray(samples_ns, dtype=float) / 1e3
    return {"n": len(us), "min_us": round(float(us.min()), 2), "p50_us": round(float(np.median(us)), 2),
            "p99_us": round(float(np.percentile(us, 99)), 2)}


def timed(fn) -> int:
    t = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - t


class Child:
    """A child MCP provisioned one core, in mode `mode`."""

    def __init__(self, state: Path, mode: str, admin):
        self.admin = admin
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env_for(state))
        admin.checked("provision", pid=self.proc.pid, cores=1)
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def line(self) -> str:
        return self.proc.stdout.readline().strip()

    def stop(self):
        """Kills the child and waits until the arbiter has reclaimed what it held."""
        self.proc.kill()
        self.proc.wait()
        while any(m["pid"] == self.proc.pid for m in self.admin.checked("status")["mcps"]):
            time.sleep(0.001)


def measure(trials: int, fifo: int | None = None) -> dict:
    """Every operation, `trials` times where it is short (a tenth, at least 50, where it is not),
    against a private arbiter at SCHED_FIFO priority `fifo` (0: ordinary scheduling; None: its default)."""
    os.sched_setaffinity(0, {CONTROL_CPU})
    # The private arbiter's state directory goes with the measurement (one was left per run).
    with tempfile.TemporaryDirectory(prefix="coreplane-arbiter-bench-") as state:
        return _operations(Path(state), trials, fifo)


def _operations(state: Path, trials: int, fifo: int | None) -> dict:
    """`measure`'s trials against a private arbiter whose state is in `state`."""
    os.environ["COREPLANE_ARBITER_SOCKET"] = str(state / "arbiter.sock")
    short, slow = trials, max(trials // 10, 50)
    out = {}
    options = ["--fifo", str(fifo)] if fifo is not None else []
    with Daemon(state, options, f"coreplane-arbiter-bench-{os.getpid()}") as daemon, daemon.client() as admin:
        out["create_scp"] = stats([timed(lambda: subprocess.run(["/bin/true"])) for _ in range(slow)])

        samples = []
        for _ in range(slow):
            child = subprocess.Popen(["sleep", "60"])
            samples.append(timed(lambda: admin.checked("provision", pid=child.pid, cores=0)))
            child.kill()
            child.wait()
        out["create_mcp"] = stats(samples)

        # Before this process is an MCP, whose children would belong to it.
        out["warn_preempt_one_runtime"] = followed(state, admin, slow)

        # The benchmark itself as an MCP: grants and yields from this process (on the control core).
        admin.checked("provision", pid=os.getpid(), cores=1)
        me = Vcores()
        warm, cold, preempt = [], [], []
        me.request(1)
        me.yield_vcore(0)
        for _ in range(short):
            warm.append(timed(lambda: me.request(1)))
            me.yield_vcore(0)
        out["get_one_vcore_warm"] = stats(warm)
        out["yield_one_vcore"] = stats([_yield_time(me) for _ in range(short)])
        for _ in range(short):
            cold.append(timed(lambda: me.request(1)))
            preempt.append(timed(lambda: admin.checked("revoke", pid=os.getpid(), vcore=0, warn_us=0, wait=True)))
        out["get_one_vcore_cold"] = stats(cold)
        out["get_max_vcores_cold"] = {**stats(cold), "max": 1, "note": "one compute core here: the same trials"}
        out["preempt_one_no_warning"] = stats(preempt)
        admin.checked("provision", pid=os.getpid(), cores=0)

        coop = Child(state, "coop", admin)
        parts = Parts()
        for _ in range(short):
            assert coop.line() == "granted"
            parts.revoke(admin, coop.proc.pid, 10_000)
        coop.stop()
        out["warn_preempt_one_cooperative"] = {**stats(parts.total), "missed_10ms_deadline": parts.missed,
                                                "parts": parts.stats()}

        out.update(uncooperative(state, admin, slow))

        samples = []
        for _ in range(slow):
            child = Child(state, "spin", admin)
            assert child.line() == "granted"
            t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            child.proc.send_signal(signal.SIGKILL)
            while True:
                exits = {e["pid"]: e["reclaimed_ns"] for e in admin.checked("status")["exits"]}
                if child.proc.pid in exits:
                    samples.append(exits[child.proc.pid] - t0)
                    break
            child.proc.wait()
        out["kill_mcp_reclaimed"] = stats(samples)
    return out


def followed(state: Path, admin, trials: int) -> dict:
    """An unmodified program (sh spinning) under coreplane's runtime, a delegating MCP borrowing the
    compute core (`coreplane run --mcp --max 1 --delegate getppid`): its vcore revoked with a 1 s
    warning, which the runtime's monitor (rt/mcp.rs) answers by yielding it, the time from the
    revoke to the yield; the monitor then asks for the core again, and the next trial waits for it."""
    cli = Path(sys.executable).with_name("coreplane")
    # Not pinned to the control core as this process is: the run's layout (control and compute
    # cores, hence its delegates and its runtime's following) comes from the CPUs it may use.
    every_cpu = set(range(os.cpu_count() or 1))
    program = subprocess.Popen([str(cli), "run", "--mcp", "--max", "1", "--delegate", "getppid", "--arbiter-state-dir",
                                str(state), "--", "sh", "-c", "while :; do :; done"], stdin=subprocess.DEVNULL,
                               start_new_session=True,  # its group: the launcher, coreplane-exec and sh
                               preexec_fn=lambda: os.sched_setaffinity(0, every_cpu))
    parts = Parts()
    try:
        for _ in range(trials):
            give_up = time.monotonic() + 10
            while not any(m["pid"] == program.pid and m["held"] for m in admin.checked("status")["mcps"]):
                if program.poll() is not None:
                    raise CoreplaneError(f"coreplane run --mcp exited {program.returncode}")
                if time.monotonic() > give_up:
                    raise CoreplaneError("the runtime of coreplane run --mcp did not ask for its core again within 10 s")
                time.sleep(0.001)
            parts.revoke(admin, program.pid, 1_000_000)
    finally:
        try:
            os.killpg(program.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it ended by itself (the error above says why)
        program.wait()
    return {**stats(parts.total), "missed_1s_deadline": parts.missed, "parts": parts.stats()}


class Parts:
    """Warn-preempt trials timed by the caller, from before the revoke to its answer (the
    arbiter's own span covers only its release work), and that interval taken apart on one clock
    (CLOCK_MONOTONIC) with the arbiter's times and the yielder's, where it sent them (the runtime
    does): the arbiter posts the warning, the yielder wakes to it, sends its yield, the arbiter
    begins the release, ends it (the cpuset write, when the CPU leaves), the caller sees the answer."""

    SPANS = (("warned", None, "warned_ns"), ("yielder_woke", "warned_ns", "yielder_woke_ns"),
             ("yield_sent", "yielder_woke_ns", "yielder_sent_ns"), ("release_began", "yielder_sent_ns", "started_ns"),
             ("released", "started_ns", "released_ns"), ("caller_saw", "released_ns", None))

    def __init__(self):
        self.total, self.missed = [], 0
        self.spans = {name: [] for name, _, _ in self.SPANS}

    def revoke(self, admin, pid: int, warn_us: int):
        """Revokes vcore 0 of `pid` with `warn_us` of warning and waits for it; a yield is a sample."""
        t = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        outcome = admin.checked("revoke", pid=pid, vcore=0, warn_us=warn_us, wait=True)["revoked"][0]
        end = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if outcome["outcome"] != "yielded":
            self.missed += 1
            return
        self.total.append(end - t)
        times = {**outcome, None: None}
        for name, start, stop in self.SPANS:
            begin, finish = (t if start is None else times.get(start)), (end if stop is None else times.get(stop))
            if begin is not None and finish is not None:
                self.spans[name].append(finish - begin)

    def stats(self) -> dict:
        """Each span's statistics, in order, for the spans timed."""
        return {name: stats(samples) for name, samples in self.spans.items() if samples}


def uncooperative(state: Path, admin, trials: int) -> dict:
    """A pinned spinner that never yields, preempted at a 1 ms deadline, times after the deadline:
    the arbiter began taking the CPU; the spinner was last seen on it; the arbiter's cpuset write
    returned (the kernel returns once it has moved the spinner: it left its core between these
    two, and the later one is the goal's measure); the spinner next ran, elsewhere (after a wait
    for a turn on the control core, which has nothing to do with the core taken)."""
    spin = Child(state, "spin", admin)
    spans = {"arbiter_woke": [], "last_seen_on_core": [], "off_core": [], "running_elsewhere": []}
    for _ in range(trials):
        assert spin.line() == "granted"
        time.sleep(0.002)
        revoked = admin.checked("revoke", pid=spin.proc.pid, vcore=0, warn_us=1000, wait=True)["revoked"][0]
        assert revoked["outcome"] == "preempted"
        last_on, elsewhere = map(int, spin.line().split())
        deadline = revoked["deadline_ns"]
        for name, t in zip(spans, (revoked["started_ns"], last_on, revoked["released_ns"], elsewhere)):
            spans[name].append(t - deadline)
    spin.stop()
    out = {f"preempt_uncooperative_{name}": stats(samples) for name, samples in spans.items()}
    out["preempt_uncooperative_after_deadline"] = out.pop("preempt_uncooperative_off_core")
    return out


def _yield_time(me: Vcores) -> int:
    me.request(1)
    return timed(lambda: me.yield_vcore(0))


def document(trials: int, fifo: int | None = None) -> dict:
    """The measurement with the machine, its load and the goals."""
    ops = measure(trials, fifo)
    return {"machine": describe(), "load_average": os.getloadavg(), "trials": trials, "fifo": fifo, "ops": ops,
            "goals": goals(ops)}


def goals(ops: dict) -> dict:
    return {name: {"goal_us": goal, "statistic": stat, "us": ops[name][stat], "met": ops[name][stat] <= goal}
            for name, (stat, goal) in GOALS.items()}
