"""One run of one experiment point (`coreplane noise trial ...`): sets up the placement and
the interference, runs the workload or the detectors, takes everything down, returns numbers.
The experiments run these as sweeps; each trial stands alone and cleans up after itself."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from coreplane.cell import Cell, CellSpec
from coreplane.cell.spec import online_cpus
from coreplane.core.cpulist import format_cpu_list
from coreplane.core.errors import CoreplaneError
from coreplane.core.native import REPO_ROOT, workload
from coreplane.noise.inject import Injector
from coreplane.noise.measure import measure

# ROS §5.2.1: "each core receives an interrupt every 100ms and spins for 1ms" (1 % noise).
ROS_PERIOD_NS, ROS_SPIN_NS = 100_000_000, 1_000_000
PLACEMENTS = ("default", "pinned", "cell")
# What a gap on the cell's compute core is charged to (where_lost), from the traced context
# that names it (coreplane.noise.attribution.classify_gaps): the scheduler tick with the
# softirqs it raises, device IRQs with the block softirq and block work they cause, other
# threads, IPIs, other work items, and "hypervisor" when the guest traced nothing in the gap.
CAUSES = ("tick", "device_io", "thread", "ipi", "work", "hypervisor")
TICK_SOFTIRQS = ("TIMER", "RCU", "SCHED", "HRTIMER")
# The io experiment's cell variants: trial flags -> label.
IO_CUTS = {"--no-pin-init": "cell as it is", "--pin-init": "--pin-init",
           "--pin-init --io-completions": "--pin-init --io-completions"}


def cause(source: str) -> str:
    """The cause (CAUSES) of a gap named `source` by classify_gaps."""
    kind, _, name = source.partition(" ")
    if source == "nothing in the guest":
        return "hypervisor"
    if source == "vector local_timer" or (kind == "softirq" and name in TICK_SOFTIRQS):
        return "tick"
    if kind == "irq" or kind == "softirq" or (kind == "work" and name.startswith("blk_")):
        return "device_io"
    return {"vector": "ipi", "thread": "thread"}.get(kind, "work")


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


def enter_cell(stack: ExitStack, hugepages: int = 0, io_completions: bool = False, pin_init: bool = False) -> Cell:
    """Makes the trials' cell for the rest of `stack` and moves this process (so the workloads
    it starts from now on) into it; processes started before stay on the control cores."""
    compute, control = cell_layout()
    cell = stack.enter_context(Cell.create(CellSpec(compute=compute, control=control, hugepages=hugepages,
                                                    io_completions=io_completions, pin_init=pin_init)))
    cell.add_process(os.getpid())
    return cell


def background(stack: ExitStack, args: list) -> subprocess.Popen:
    """Starts a bundled workload in the background until `stack` closes."""
    proc = subprocess.Popen([str(a) for a in args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stack.callback(lambda: (proc.terminate(), proc.wait()))
    return proc


def io_neighbour(stack: ExitStack, writer_mib: int = 8) -> dict:
    """Starts, until `stack` closes, the neighbour of issue 14's item 5: two compiler loops (gcc
    -O2 on a bundled C file) and a writer that fsyncs to disk (dd conv=fsync of `writer_mib`
    MiB, over and over), in a scratch directory on disk (/var/tmp), placed by the scheduler."""
    scratch = Path(tempfile.mkdtemp(prefix="coreplane-io-neighbour-", dir="/var/tmp"))
    stack.callback(shutil.rmtree, scratch, True)
    source = REPO_ROOT / "workloads" / "src" / "barrier.c"
    loops = [f"while :; do gcc -O2 -c {source} -o {scratch}/cc{i}.o; done" for i in range(2)]
    loops.append(f"while :; do dd if=/dev/zero of={scratch}/fsync.dat bs=1M count={writer_mib} conv=fsync "
                 "status=none; done")
    groups = []
    for loop in loops:
        # Each loop leads its own process group, so that stopping it ends the gcc or dd it runs.
        proc = subprocess.Popen(["sh", "-c", loop], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        groups.append(proc)
        stack.callback(_end_group, proc)
    return {"pids": [p.pid for p in groups], "scratch": str(scratch), "writer_mib": writer_mib}


def _end_group(proc: subprocess.Popen) -> None:
    """Kills a loop's process group and waits until none of it is left: the gcc or dd it ran is
    the loop's child, reaped by init (not by us) after the kill, and was seen still exiting."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    give_up = time.monotonic() + 5
    while time.monotonic() < give_up:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)


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


def neighbour(kind: str, seconds: float = 3.0, threshold_ns: int = 5_000, trace: bool = False,
              io_completions: bool = False, pin_init: bool = False, writer_mib: int = 8) -> dict:
    """Experiment (b) and the goal benchmark: noise on the compute core with a noisy neighbour,
    under default placement and then in a cell, with the same neighbour, in one run. `trace`
    also says where the cell's lost time went (coreplane.noise.attribution); `io_completions`
    and `pin_init` are the cell's opt-in machine-wide cuts (CellSpec), given back with it."""
    compute, _ = cell_layout()
    online = online_cpus()
    duration_ns = int(seconds * 1e9)
    out = {"trial": "neighbour", "neighbour": kind, "cpu": compute[0], "seconds": seconds,
           "io_completions": io_completions, "pin_init": pin_init}
    with ExitStack() as stack:
        if kind == "hog":  # while(1) threads, one per CPU, placed by the scheduler
            background(stack, [workload("hog"), "-t", len(online), "-d", 4 * seconds + 30])
        elif kind == "injector":  # 10 % SCHED_FIFO noise on every CPU, random phase
            stack.enter_context(Injector(online, 10_000_000, 1_000_000, "random", limit_ns=4 * duration_ns + 30_000_000_000))
        elif kind == "io":
            out["writer_mib"] = io_neighbour(stack, writer_mib)["writer_mib"]
        elif kind != "none":
            raise CoreplaneError(f"--neighbour {kind}: expected hog, injector, io or none")
        default = measure(compute, duration_ns, threshold_ns, fwq=False, tracers=False)["summary"][0]
        with ExitStack() as in_cell:
            enter_cell(in_cell, io_completions=io_completions, pin_init=pin_init)
            if trace:
                from coreplane.noise.attribution import traced
                with traced(compute[0]) as recording:
                    doc = measure(compute, duration_ns, threshold_ns, fwq=False, tracers=False)
            else:
                doc = measure(compute, duration_ns, threshold_ns, fwq=False, tracers=False)
            cell = doc["summary"][0]
    for name, s in (("default", default), ("cell", cell)):
        out.update({f"{name}_lost_pct": s["lost_pct"], f"{name}_interruptions_per_s": s["interruptions_per_s"],
                    f"{name}_gap_p99_us": s["gap_p99_us"], f"{name}_gap_max_us": s["gap_max_us"]})
    out["lost_ratio"] = out["cell_lost_pct"] / out["default_lost_pct"] if out["default_lost_pct"] else None
    if trace:
        gap = doc["native"]["cpus"][0]["gap"]
        out.update(where_lost(recording, gap["timeline"], gap["runtime_ns"]))
    return out


def where_lost(recording, timeline: list, runtime_ns: float) -> dict:
    """The cell's lost time by cause (CAUSES), in % of the detector's run, each gap named by what
    the trace shows interrupting the detector in it; and the traced time of each source."""
    from coreplane.noise.attribution import by_kind, classify_gaps
    traced = recording.attribute({"coreplane-bench"})
    gaps = classify_gaps(timeline, runtime_ns, traced["interruptions"], list(traced["own_spans_ns"].values()))
    pct = 100 / runtime_ns
    causes = dict.fromkeys(CAUSES, 0.0)
    for c in gaps["classes"]:
        causes[cause(c["source"])] += c["lost_ns"] * pct
    out = {f"cell_lost_{name}_pct": round(v, 4) for name, v in causes.items()}
    out.update(cell_traced_lost_pct=traced["lost_pct"], cell_steal_ms=traced["steal_ns"] / 1e6,
               cell_trace_events_lost=traced["events_lost"], cell_gaps_aligned=gaps["aligned"],
               cell_traced_ms_by_kind={k: v / 1e6 for k, v in by_kind(traced["sources"]).items()},
               cell_top_sources=[{**s, "total_ms": s["total_ns"] / 1e6} for s in traced["sources"][:10]],
               cell_gap_classes=gaps["classes"][:12])
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
