"""`coreplane noise measure`: the native detectors on each CPU, then the figures derived
from them, the interrupts that fired meanwhile, and the kernel tracers where present."""

import os
import time

from coreplane.cell.spec import online_cpus, parse_cores
from coreplane.core.cpulist import format_cpu_list
from coreplane.core.errors import CoreplaneError
from coreplane.core.machine import describe
from coreplane.core.native import run_json
from coreplane.noise.analysis import counter_deltas, ftq_spectrum, proc_counters, summarise_cpu
from coreplane.noise.tracefs import kernel_tracers

UNITS = {
    "json": "ns for every duration and timestamp (fields ending in _ns), like the osnoise trace events",
    "summary": "us for gaps and % of time lost, like rtla osnoise (Noise, % CPU Aval, Max Single); "
               "interruptions per second like sysjitter",
    "ftq": "loop iterations per quantum; spectrum amplitude in iterations, frequency in Hz",
}


def check_cpus(text: str) -> list[int]:
    """The --cpus list, each online and allowed to this process (a cell may forbid some)."""
    cpus = parse_cores(text, "--cpus")
    online, allowed = online_cpus(), os.sched_getaffinity(0)
    for c in cpus:
        if c not in online:
            raise CoreplaneError(f"--cpus {text}: CPU {c} does not exist (online: {format_cpu_list(online)})")
        if c not in allowed:
            raise CoreplaneError(f"--cpus {text}: CPU {c} is outside this process's cpuset "
                                 f"({format_cpu_list(sorted(allowed))}): is a cell holding it?")
    return cpus


def measure(cpus: list[int], duration_ns: int, threshold_ns: int, ftq_quantum_ns: int = 100_000,
            fwq: bool = True, tracers: bool = True, fifo: int = 0) -> dict:
    """Measures noise on `cpus` (all at once) and returns the full document; `fifo` > 0 runs
    the detectors as SCHED_FIFO at that priority, so ordinary tasks cannot interrupt them."""
    args = ["noise", "measure", "--cpus", format_cpu_list(cpus), "--duration-ns", str(duration_ns),
            "--threshold-ns", str(threshold_ns), "--ftq-quantum-ns", str(ftq_quantum_ns), "--fifo", str(fifo)]
    if not fwq:
        args.append("--no-fwq")
    before, t0 = proc_counters(), time.monotonic()
    native = run_json("coreplane-bench", *args)
    seconds = time.monotonic() - t0
    after = proc_counters()
    for cpu_doc in native["cpus"]:
        cpu_doc["ftq"]["spectrum"] = ftq_spectrum(cpu_doc["ftq"]["counts"], cpu_doc["ftq"]["quantum_ns"])
    doc = {
        "tool": "coreplane noise measure",
        "machine": describe(),
        "cpus": cpus,
        "duration_ns": duration_ns,
        "threshold_ns": threshold_ns,
        "fifo_priority": fifo,
        "units": UNITS,
        "summary": [summarise_cpu(c) for c in native["cpus"]],
        "interrupts_per_s": counter_deltas(before, after, cpus, seconds),
        "native": native,
    }
    if tracers:
        doc["kernel_tracers"] = kernel_tracers(cpus, duration_ns / 1e9, threshold_ns)
    return doc
