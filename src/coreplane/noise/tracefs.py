"""The kernel's own noise tracers (osnoise, timerlat) through tracefs, when the kernel has
them: their figures per CPU and the noise attributed by source (IRQ, softirq, thread, NMI, HW)."""

import re
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from coreplane.core.cpulist import format_cpu_list

TRACEFS = Path("/sys/kernel/tracing")
# osnoise per-period summary: TASK-PID [CPU] FLAGS TIMESTAMP: RUNTIME NOISE %AVAIL MAX HW NMI IRQ SIRQ THREAD
SUMMARY_RE = re.compile(r"^\s*\S.*?-\d+\s+\[(\d+)\]\s+\S+\s+[\d.]+:\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(\d+)"
                        r"\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$")
# osnoise events: irq_noise / softirq_noise / thread_noise / nmi_noise: SOURCE start T duration N ns
EVENT_RE = re.compile(r"\[(\d+)\].*?\b(irq|softirq|thread|nmi)_noise:\s*(.*?)\s*start\s+[\d.]+\s+duration\s+(\d+)\s+ns")
# timerlat: #N context irq|thread timer_latency N ns
TIMERLAT_RE = re.compile(r"\[(\d+)\].*?context\s+(irq|thread)\s+timer_latency\s+(\d+)\s+ns")
COUNT_KINDS = ("hw", "nmi", "irq", "softirq", "thread")


def tracefs_dir() -> tuple[Path | None, str]:
    """Where tracefs is mounted (mounting it at /sys/kernel/tracing if it is nowhere), and how."""
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if fields[2] == "tracefs":
            return Path(fields[1]), "mounted"
    proc = subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True, text=True)
    if proc.returncode != 0:
        return None, f"cannot mount tracefs at {TRACEFS}: {proc.stderr.strip()}"
    return TRACEFS, "mounted by coreplane"


def available_tracers(tracefs: Path) -> list[str]:
    return (tracefs / "available_tracers").read_text().split()


@contextmanager
def _saved(tracefs: Path, names: list[str]):
    """Gives the listed tracefs files their values back whatever happens inside (the tracer
    is stopped first, and the original tracer set again last)."""
    saved = {}
    for name in names:
        try:
            saved[name] = (tracefs / name).read_text().strip()
        except OSError:
            continue
    try:
        yield
    finally:
        order = [("current_tracer", "nop")] + [(n, v) for n, v in saved.items() if n != "current_tracer"]
        order.append(("current_tracer", saved.get("current_tracer", "nop")))
        for name, value in order:
            try:
                (tracefs / name).write_text(value)
            except OSError:
                continue  # e.g. a mixed "X" state of an events directory cannot be written back


def parse_osnoise(text: str) -> dict:
    """Per-CPU totals of the osnoise summary rows (µs and counts, as the tracer prints them)
    and the noise events grouped by (CPU, kind, source) with their durations in ns."""
    cpus: dict[str, dict] = {}
    for line in text.splitlines():
        m = SUMMARY_RE.match(line)
        if not m:
            continue
        cpu, runtime, noise, _, max_single, *counts = m.groups()
        c = cpus.setdefault(cpu, {"runtime_us": 0, "noise_us": 0, "max_single_noise_us": 0,
                                  **{k: 0 for k in COUNT_KINDS}})
        c["runtime_us"] += int(runtime)
        c["noise_us"] += int(noise)
        c["max_single_noise_us"] = max(c["max_single_noise_us"], int(max_single))
        for kind, n in zip(COUNT_KINDS, counts):
            c[kind] += int(n)
    for c in cpus.values():
        c["cpu_available_pct"] = 100 * (1 - c["noise_us"] / c["runtime_us"]) if c["runtime_us"] else None
    sources: dict[tuple, list[int]] = {}
    for m in EVENT_RE.finditer(text):
        cpu, kind, source, duration = m.groups()
        sources.setdefault((cpu, kind, source.strip()), []).append(int(duration))
    return {
        "cpus": cpus,
        "sources": sorted(({"cpu": k[0], "kind": k[1], "source": k[2], "count": len(v), "total_ns": sum(v),
                            "max_ns": max(v)} for k, v in sources.items()), key=lambda s: -s["total_ns"]),
    }


def parse_timerlat(text: str) -> dict:
    """Timer latency per CPU and context (irq, thread), in ns, as percentiles."""
    lat: dict[tuple, list[int]] = {}
    for m in TIMERLAT_RE.finditer(text):
        lat.setdefault((m.group(1), m.group(2)), []).append(int(m.group(3)))
    out: dict[str, dict] = {}
    for (cpu, ctx), values in lat.items():
        v = np.asarray(values)
        out.setdefault(cpu, {})[ctx] = {"n": len(v), "p50_ns": float(np.percentile(v, 50)),
                                        "p99_ns": float(np.percentile(v, 99)), "max_ns": int(v.max())}
    return {"cpus": out}


def _run_tracer(tracefs: Path, tracer: str, cpus: list[int], seconds: float, threshold_us: int) -> str:
    with _saved(tracefs, ["current_tracer", "tracing_thresh", "osnoise/cpus", "tracing_on",
                          "events/osnoise/enable"]):
        (tracefs / "osnoise/cpus").write_text(format_cpu_list(cpus))
        (tracefs / "tracing_thresh").write_text(str(threshold_us))
        if (tracefs / "events/osnoise/enable").exists():
            (tracefs / "events/osnoise/enable").write_text("1")
        (tracefs / "trace").write_text("")
        (tracefs / "tracing_on").write_text("1")
        (tracefs / "current_tracer").write_text(tracer)
        time.sleep(seconds)
        (tracefs / "tracing_on").write_text("0")
        return (tracefs / "trace").read_text()


def kernel_tracers(cpus: list[int], seconds: float, threshold_ns: int) -> dict:
    """Runs osnoise then timerlat on `cpus` when the kernel has them; else says why not."""
    tracefs, how = tracefs_dir()
    if tracefs is None:
        return {"available": False, "reason": how}
    try:
        tracers = available_tracers(tracefs)
        missing = [t for t in ("osnoise", "timerlat") if t not in tracers]
        out: dict = {"available": not missing, "tracefs": str(tracefs), "how": how,
                     "units": "summary rows in us (as the tracer prints them); events and latencies in ns"}
        if missing:
            out["reason"] = (f"{tracefs}/available_tracers lists {' '.join(tracers)}: no {' or '.join(missing)} "
                             "(kernel built without CONFIG_OSNOISE_TRACER / CONFIG_TIMERLAT_TRACER)")
        if "osnoise" in tracers:
            out["osnoise"] = parse_osnoise(_run_tracer(tracefs, "osnoise", cpus, seconds, max(1, threshold_ns // 1000)))
        if "timerlat" in tracers:
            out["timerlat"] = parse_timerlat(_run_tracer(tracefs, "timerlat", cpus, seconds, 0))
        return out
    finally:
        if how == "mounted by coreplane":
            subprocess.run(["umount", str(tracefs)], capture_output=True)
