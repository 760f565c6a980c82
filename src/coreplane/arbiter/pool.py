"""An adaptive work-stealing pool over the vcore API (one worker per granted vcore, pinned to it,
leaving at its warning) against the same work on a fixed number of threads, while an owner
takes its provisioned core back and lends it again."""

import json
from contextlib import ExitStack
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from coreplane.arbiter.client import Daemon, env_for
from coreplane.arbiter.cores import empty_compute_cores
from coreplane.core.cpulist import parse_cpu_list
from coreplane.core.errors import CoreplaneError
from coreplane.core.machine import describe

# The program, a best-effort MCP: TASKS tasks (an 8x8 DCT, quantisation and inverse DCT of a slab
# of blocks, ~1 ms each), dealt round-robin onto one deque per vcore slot. "adaptive": a worker
# per held vcore, pinned to it, pops its own deque and steals from the others' far ends; warned,
# it finishes its task and yields (its deque stays for the others). "fixed N": N threads, not
# pinned, taking tasks from the same deques whatever cores the MCP holds. Its main thread asks
# for vcores again every ms while it holds fewer than its max. Prints one JSON line: wall time,
# and per task the CPU it ended on.
PROGRAM = r"""
import collections, ctypes, json, os, sys, threading, time
import numpy as np, scipy.fft
from coreplane.arbiter.vcore import Vcores
mode, threads, tasks, slots = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
v, clock, libc = Vcores(), time.monotonic, ctypes.CDLL(None)
blocks = np.random.default_rng(0).integers(0, 256, (tasks, 8, 160, 8, 8)).astype(np.float32)
deques = [collections.deque(range(i, tasks, slots)) for i in range(slots)]
lock, ended_on, running = threading.Lock(), [], set()

def take(own):
    with lock:
        if deques[own]:
            return deques[own].pop()
        victim = max(range(slots), key=lambda i: len(deques[i]))
        return deques[victim].popleft() if deques[victim] else None

def work(task):
    q = np.round(scipy.fft.dctn(blocks[task], axes=(-2, -1), norm="ortho") / 16)
    scipy.fft.idctn(q * 16, axes=(-2, -1), norm="ortho")
    ended_on.append(libc.sched_getcpu())

def vcore_worker(slot, cpu):
    try:
        try:
            os.sched_setaffinity(0, {cpu})
        except OSError:   # the vcore went before the worker got there (its cpuset changed)
            return
        while v.preempt_deadline(slot) is None and v.cpu(slot) == cpu:
            task = take(slot)
            if task is None:
                break
            work(task)   # an error here is the program's: it must not vanish with the task
        os.sched_setaffinity(0, range(os.cpu_count()))
        try:
            v.yield_vcore(slot)
        except Exception:   # preempted at the deadline before it yielded
            pass
    finally:
        running.discard(slot)

def plain_worker(index):
    while (task := take(index % slots)) is not None:
        work(task)

start = last = clock()
done_before = 0
pool = [threading.Thread(target=plain_worker, args=(i,)) for i in range(threads)] if mode == "fixed" else []
for t in pool:
    t.start()
while len(ended_on) < tasks:
    held = sum(v.cpu(i) >= 0 for i in range(slots))
    if held < slots:
        v.request(slots - held)
    for slot in range(slots):
        cpu = v.cpu(slot)
        if mode == "adaptive" and cpu >= 0 and slot not in running and v.preempt_deadline(slot) is None:
            running.add(slot)
            threading.Thread(target=vcore_worker, args=(slot, cpu), daemon=True).start()
    time.sleep(0.001)
    if len(ended_on) > done_before:
        done_before, last = len(ended_on), clock()
    elif clock() - last > 30:
        sys.exit(f"no task ended in 30 s ({len(ended_on)} of {tasks} done)")
print(json.dumps({"wall_s": clock() - start, "ended_on": ended_on}), flush=True)
"""

# The owner of the compute cores (provisioned all of them): holds them for ON ms, spinning
# pinned on each, gives them back for OFF ms, until SIGTERM.
OWNER = r"""
import os, signal, sys, time
from coreplane.arbiter.vcore import Vcores
on, off, cores = float(sys.argv[1]) / 1e3, float(sys.argv[2]) / 1e3, int(sys.argv[3])
v, stop = Vcores(), []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
while not stop:
    time.sleep(off)
    v.request(cores)
    while any(v.cpu(i) < 0 for i in range(cores)) and not stop:
        pass
    os.sched_setaffinity(0, {v.cpu(0)})
    end = time.monotonic() + on
    while time.monotonic() < end and not stop:
        pass
    os.sched_setaffinity(0, range(os.cpu_count()))
    for i in range(cores):
        try:
            v.yield_vcore(i)
        except Exception:   # taken at a deadline, or the arbiter is gone at the end
            pass
"""


def one_run(state: Path, admin, mode: str, threads: int, tasks: int, on_ms: float, off_ms: float,
            gang_stop: bool = False) -> dict:
    """The program once, in `mode`, beside the owner taking the cores on_ms of every on+off ms.
    With `gang_stop` (the arbiter's), the fixed program is frozen while it holds no core; the
    owner and the adaptive pool, which cooperate, are exempt."""
    exempt = {"gang_stop": False} if gang_stop else {}
    cores = len(parse_cpu_list(admin.checked("status")["compute_cores"]))
    control = set(parse_cpu_list(admin.checked("status")["control_cores"]))
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(on_ms), str(off_ms), str(cores)], env=env_for(state))
    admin.checked("provision", pid=owner.pid, cores=cores, **exempt)
    program = subprocess.Popen([sys.executable, "-c", PROGRAM, mode, str(threads), str(tasks), str(cores)],
                               stdout=subprocess.PIPE, text=True, env=env_for(state))
    admin.checked("provision", pid=program.pid, cores=0, **(exempt if mode == "adaptive" else {}))
    out, _ = program.communicate(timeout=300)
    owner.send_signal(signal.SIGTERM)
    owner.wait(10)
    if program.returncode != 0:
        raise CoreplaneError(f"the pool program failed (exit {program.returncode})")
    doc = json.loads(out)
    on_control = sum(cpu in control for cpu in doc["ended_on"])
    return {"mode": mode, "threads": threads, "tasks": tasks, "gang_stop": gang_stop, "wall_s": round(doc["wall_s"], 3),
            "tasks_on_control_cores": on_control, "share_on_control_cores": round(on_control / tasks, 3)}


def measure(tasks: int = 400, on_ms: float = 50.0, off_ms: float = 50.0, repetitions: int = 2, warn_us: int = 200,
            empty_cores: bool = False, gang_stop: bool = False) -> dict:
    """The adaptive pool and fixed thread counts (one per compute core, and one more), each
    `repetitions` times interleaved, on a private arbiter (with `gang_stop`, its gang stop); with
    `empty_cores`, every other process is kept off the compute cores meanwhile (cores.empty_compute_cores)."""
    state = Path(tempfile.mkdtemp(prefix="coreplane-pool-"))
    runs = []
    with ExitStack() as stack:
        options = ["--warn-us", str(warn_us)] + (["--gang-stop"] if gang_stop else [])
        daemon = stack.enter_context(Daemon(state, options, f"coreplane-pool-{os.getpid()}"))
        admin = stack.enter_context(daemon.client())
        emptied = stack.enter_context(empty_compute_cores(admin.checked("status"))) if empty_cores else None
        cores = len(parse_cpu_list(admin.checked("status")["compute_cores"]))
        # Keyed the same on every machine: "fixed" has a thread per compute core, "fixed+1" one more.
        configs = {"adaptive": ("adaptive", 0), "fixed": ("fixed", cores), "fixed+1": ("fixed", cores + 1)}
        for _ in range(repetitions):
            for mode, threads in configs.values():
                runs.append(one_run(state, admin, mode, threads, tasks, on_ms, off_ms, gang_stop))
                while admin.checked("status")["mcps"]:
                    time.sleep(0.01)
    summary = {}
    for name, (mode, threads) in configs.items():
        mine = [r for r in runs if (r["mode"], r["threads"]) == (mode, threads)]
        summary[name] = {"threads": threads, "wall_s_median": round(float(np.median([r["wall_s"] for r in mine])), 3),
                         "share_on_control_cores": round(float(np.mean([r["share_on_control_cores"] for r in mine])), 3)}
    return {"machine": describe(), "load_average": os.getloadavg(), "on_ms": on_ms, "off_ms": off_ms,
            "warn_us": warn_us, "gang_stop": gang_stop, "emptied_cores": emptied, "configs": summary, "runs": runs}
