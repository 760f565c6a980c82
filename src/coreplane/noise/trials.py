"""One run of one experiment point (`coreplane noise trial ...`): sets up the placement and
the interference, runs the workload or the detectors, takes everything down, returns numbers.
The experiments run these as sweeps; each trial stands alone and cleans up after itself."""

import json
import os
import subprocess
from contextlib import ExitStack
from pathlib import Path

from coreplane.cell import Cell, CellSpec
from coreplane.cell.spec import online_cpus
from coreplane.core.cpulist import format_cpu_list
from coreplane.core.errors import CoreplaneError
from coreplane.core.native import workload
from coreplane.noise.inject import Injector
from coreplane.noise.measure import measure

# ROS §5.2.1: "each core receives an interrupt every 100ms and spins for 1ms" (1 % noise).
ROS_PERIOD_NS, ROS_SPIN_NS = 100_000_000, 1_000_000
PLACEMENTS = ("default", "pinned", "cell")


def run_workload(args: list) -> dict:
    """Runs a bundled workload to completion and returns the JSON line it prints."""
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise CoreplaneError(f"{Path(str(args[0])).name}: {proc.stderr.strip() or f'exit status {proc.returncode}'}")
    return json.loads(proc.stdout)


def cell_layout() -> tuple[list[int], list[int]]:
    """Compute and control cores of the trials' cell: the last online core computes, the first
    controls (on a 2-CPU machine the only layout)."""
    online = online_cpus()
    if len(online) < 2:
        raise CoreplaneError(f"a cell needs 2 online CPUs, this machine has {format_cpu_list(online)}")
    return online[-1:], online[:1]


def enter_cell(stack: ExitStack, hugepages: int = 0) -> Cell:
    """Makes the trials' cell for the rest of `stack` and moves this process (so the workloads
    it starts from now on) into it; processes started before stay on the control cores."""
    compute, control = cell_layout()
    cell = stack.enter_context(Cell.create(CellSpec(compute=compute, control=control, hugepages=hugepages)))
    cell.add_process(os.getpid())
    return cell


def background(stack: ExitStack, args: list) -> subprocess.Popen:
    """Starts a bundled workload in the background until `stack` closes."""
    proc = subprocess.Popen([str(a) for a in args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stack.callback(lambda: (proc.terminate(), proc.wait()))
    return proc


def barrier(threads: int, noise: str, placement: str, steps: int = 1000, quantum_us: int = 1000) -> dict:
    """Experiment (a): the bulk-synchronous benchmark under `placement`, with or without the
    ROS 1 % noise (every CPU, sync or random phase). Injectors start before the cell, as OS
    background work exists before an application arrives."""
    if noise not in ("none", "sync", "random") or placement not in PLACEMENTS:
        raise CoreplaneError(f"--noise {noise} / --placement {placement}: expected none|sync|random, "
                             f"{'|'.join(PLACEMENTS)}")
    compute, _ = cell_layout()
    online = online_cpus()
    if placement == "cell" and threads > len(compute):
        raise CoreplaneError(f"--threads {threads}: the cell has {len(compute)} compute core(s)")
    cmd = [workload("barrier"), "-t", threads, "-s", steps, "-q", quantum_us]
    if placement != "default":
        cmd += ["-c", format_cpu_list(compute if placement == "cell" else online)]
    with ExitStack() as stack:
        if noise != "none":
            stack.enter_context(Injector(online, ROS_PERIOD_NS, ROS_SPIN_NS, noise, limit_ns=600_000_000_000))
        if placement == "cell":
            enter_cell(stack)
        out = run_workload(cmd)
    s = out["step_us"]
    return {"trial": "barrier", "threads": threads, "noise": noise, "placement": placement,
            "runtime_s": out["runtime_s"], "slowdown": out["runtime_s"] / out["ideal_s"],
            "step_p50_us": s["p50"], "step_p99_us": s["p99"], "step_max_us": s["max"]}


def neighbour(kind: str, seconds: float = 3.0, threshold_ns: int = 5_000) -> dict:
    """Experiment (b) and the goal benchmark: noise on the compute core with a noisy neighbour,
    under default placement and then in a cell, with the same neighbour, in one run."""
    compute, _ = cell_layout()
    online = online_cpus()
    duration_ns = int(seconds * 1e9)
    with ExitStack() as stack:
        if kind == "hog":  # while(1) threads, one per CPU, placed by the scheduler
            background(stack, [workload("hog"), "-t", len(online), "-d", 4 * seconds + 30])
        elif kind == "injector":  # 10 % SCHED_FIFO noise on every CPU, random phase
            stack.enter_context(Injector(online, 10_000_000, 1_000_000, "random", limit_ns=4 * duration_ns + 30_000_000_000))
        elif kind != "none":
            raise CoreplaneError(f"--neighbour {kind}: expected hog, injector or none")
        default = measure(compute, duration_ns, threshold_ns, fwq=False, tracers=False)["summary"][0]
        with ExitStack() as in_cell:
            enter_cell(in_cell)
            cell = measure(compute, duration_ns, threshold_ns, fwq=False, tracers=False)["summary"][0]
    out = {"trial": "neighbour", "neighbour": kind, "cpu": compute[0], "seconds": seconds}
    for name, s in (("default", default), ("cell", cell)):
        out.update({f"{name}_lost_pct": s["lost_pct"], f"{name}_interruptions_per_s": s["interruptions_per_s"],
                    f"{name}_gap_p99_us": s["gap_p99_us"], f"{name}_gap_max_us": s["gap_max_us"]})
    out["lost_ratio"] = out["cell_lost_pct"] / out["default_lost_pct"] if out["default_lost_pct"] else None
    return out


def cache(buster: str, working_set_mib: float, steps: int = 500, loads: int = 20_000) -> dict:
    """Experiment (c): the barrier benchmark (1 thread, a working set chased at random) on the
    cell's compute core, with the cache buster (2 x LLC, 64-byte stride) on the control core."""
    if buster not in ("on", "off"):
        raise CoreplaneError(f"--buster {buster}: on or off")
    compute, _ = cell_layout()
    with ExitStack() as stack:
        if buster == "on":
            background(stack, [workload("cachebuster"), "-d", 600])
        enter_cell(stack)
        out = run_workload([workload("barrier"), "-t", 1, "-c", format_cpu_list(compute), "-s", steps,
                            "-m", working_set_mib, "-n", loads])
    s = out["step_us"]
    return {"trial": "cache", "buster": buster, "working_set_mib": working_set_mib,
            "step_p50_us": s["p50"], "step_mean_us": s["mean"], "ns_per_load": s["p50"] * 1e3 / loads}


def colour(colours: int, sizes_mib: str = "1,2,4", rounds: int = 5) -> dict:
    """Experiment (c), page colouring: can 2 MiB pages be coloured on this machine? Runs
    llc_colour on the compute core of a cell that reserves the huge pages it needs."""
    compute, _ = cell_layout()
    sizes = [float(x) for x in sizes_mib.split(",")]
    arena_mib = max(max(sizes) * colours, 64)
    with ExitStack() as stack:
        enter_cell(stack, hugepages=int(arena_mib // 2) + 1)
        out = run_workload(["taskset", "-c", format_cpu_list(compute), workload("llc_colour"), "-c", colours,
                            "-w", sizes_mib, "-a", 64, "-r", rounds])
    doc = {"trial": "colour", "colours": colours, "dram_ns": out["beyond_llc"]["all_colours_ns"]}
    for p in out["points"]:
        key = f"{p['working_set_mib']:g}mib"
        doc.update({f"all_{key}_ns": p["all_colours_ns"], f"few_{key}_ns": p["few_colours_ns"],
                    f"few_over_all_{key}": p["few_colours_ns"] / p["all_colours_ns"]})
    return doc
