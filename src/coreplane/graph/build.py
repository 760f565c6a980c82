"""`coreplane graph build`: run a program, trace it, and assemble the four layers with their links."""

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from coreplane.core.errors import CoreplaneError
from coreplane.core.machine import describe
from coreplane.graph import io
from coreplane.graph.layers import frames, instructions, threads
from coreplane.graph.layers.cores import cores_layer
from coreplane.graph.model import MultiLayerGraph, merge
from coreplane.graph.topology import parse_spec


def trace_syscalls(argv: list[str], workdir: Path, interval: float) -> tuple[Path, frames.FrameSampler, dict]:
    """Runs the program once under strace (layer 1) while sampling pagemap and CPU times (layer 2).
    The program's stdout/stderr go to program.stdout and program.stderr in `workdir`."""
    strace = shutil.which("strace")
    if not strace:
        raise CoreplaneError("strace not found: install Debian's `strace` package (make apt)")
    log = workdir / "strace.txt"
    cmd = [strace, "-f", "-ttt", "-yy", "-qq", "-s", "0", "-e", f"trace={threads.STRACE_CALLS}", "-o", str(log), "--", *argv]
    started = time.perf_counter()
    with open(workdir / "program.stdout", "wb") as so, open(workdir / "program.stderr", "wb") as se:
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=so, stderr=se)
        except OSError as exc:
            raise CoreplaneError(f"cannot start strace: {exc}") from None
        sampler = frames.FrameSampler(proc.pid, interval)
        status = frames.wait_and_sample(proc, sampler)
    wall = time.perf_counter() - started
    if not log.is_file() or log.stat().st_size == 0:
        err = (workdir / "program.stderr").read_text(errors="replace").strip().splitlines()
        raise CoreplaneError(f"strace recorded nothing for {argv[0]}: {err[-1] if err else f'exit {status}'}")
    return log, sampler, {"exit_status": status, "wall_s": wall, "samples": sampler.rounds}


def build(argv: list[str], out: Path, topology: str = "host", layer0: bool = True, window: int = 200_000,
          windows: int = 4, start_ms: int = 0, period_ms: int = 100, sample_interval: float = 0.02,
          source: str = "strace", progress: Callable[[str], None] = lambda msg: None) -> MultiLayerGraph:
    """All four layers of `argv` (run twice: once traced for layers 1-2, once single-stepped for layer 0)."""
    if source not in threads.SOURCES:
        raise CoreplaneError(f"--source {source}: unknown, available: {', '.join(threads.SOURCES)}")
    topo = parse_spec(topology)
    meta: dict = {"program": argv[0], "argv": argv, "machine": describe(), "topology": topo.as_dict(), "runs": {}}
    with tempfile.TemporaryDirectory(prefix="coreplane-graph-") as tmp:
        tmp = Path(tmp)
        progress("layers 1-2: strace + pagemap sampling")
        log, sampler, run1 = trace_syscalls(argv, tmp, sample_interval)
        tasks, edges = threads.interactions(threads.SOURCES[source](log))
        t_nodes, t_edges, tid_index = threads.threads_layer(tasks, edges, sampler.cpu_ns)
        meta["runs"]["syscalls"] = {**run1, "source": source, "tasks": len(tasks),
                                    "method": f"strace -f -ttt -yy -e trace={threads.STRACE_CALLS}"}
        pid_index = {t.pid: tid_index[t.tid] for t in tasks.values() if t.tid == t.pid}
        f_nodes, f_links = frames.frames_layer(sampler.samples, sampler.shared, pid_index)
        meta["runs"]["frames"] = {"method": "/proc/PID/pagemap of writable mappings", "interval_s": sample_interval,
                                  "samples": sampler.rounds, "frames": len(f_nodes)}
        parts = [(t_nodes, t_edges), (f_nodes, f_links), cores_layer(topo)]
        if layer0:
            progress(f"layer 0: single-stepping {windows} window(s) of {window} instructions")
            prefix = tmp / "itrace"
            started = time.perf_counter()
            summary = instructions.trace(argv, prefix, window, windows, start_ms, period_ms)
            instructions.check_trace(summary)
            key_index = dict(zip(t_nodes["task"], t_nodes["id"]))
            i_nodes, i_edges, handoffs = instructions.instruction_layer(prefix, summary, key_index)
            parts = [(i_nodes, i_edges)] + parts + [(None, handoffs)]
            static = instructions.static_table(prefix)
            meta["runs"]["instructions"] = {**{k: v for k, v in summary.items() if k != "tasks"},
                                            "tracer_wall_s": time.perf_counter() - started}
        progress("assembling")
        graph = merge(parts, meta)
        extra = {name: tmp / name for name in ("program.stdout", "program.stderr")}
        if layer0:
            static.to_parquet(tmp / "static.parquet", index=False)
            extra["static.parquet"] = tmp / "static.parquet"
        io.save(graph, out, extra)
    return graph
