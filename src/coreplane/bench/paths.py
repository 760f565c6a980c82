"""The syscall-path benchmarks of the runtime: the same null-syscall loop natively, through the
fast path and delegated (each beside a ping-pong of the same cores in the same run), the cost of
the first call at a site, a profile-only dd against strace -c and perf trace -s, and what a vDSO
call costs natively, intercepted (`--vdso intercept`) and delegated."""

import json
import os
import statistics
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from coreplane.core.errors import CoreplaneError
from coreplane.core.native import binary, workload
from coreplane.run.launch import RunOptions, exec_argv

DD_BYTES = 64 << 20


def _bench_json(argv: list[str]) -> dict:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CoreplaneError(f"{' '.join(argv[:3])}...: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout)


def paths(compute: int, control: int, calls: int, cell: bool) -> dict:
    """Null syscall natively, with the fast path (profile only) and delegated; sites cold/hot;
    signal delivery natively and under the runtime."""
    bench = str(binary("coreplane-bench"))
    loop = [bench, "paths", "--cores", f"{compute},{control}", "--calls", str(calls), "--round-trips", str(calls)]
    cores = dict(compute_cores=str(compute), control_cores=str(control))
    out = {}
    with ExitStack() as stack:
        if cell:
            from coreplane.cell import Cell, CellSpec  # cgroups only when asked for
            stack.enter_context(Cell.create(CellSpec(compute=[compute], control=[control]))).add_process(os.getpid())
        with tempfile.TemporaryDirectory() as tmp:
            prof = Path(tmp) / "p.json"
            out["native"] = _bench_json(loop)
            out["native_dispatch_armed"] = _bench_json([*loop, "--dispatch-armed"])
            out["fast_path"] = _bench_json(exec_argv(RunOptions(command=loop, delegate="none", profile=prof, **cores)))
            out["fast_path"]["overhead"] = json.loads(prof.read_text())["overhead"]
            out["delegated"] = _bench_json(exec_argv(RunOptions(command=loop, delegate="getppid", **cores)))
            out["sites_native"] = _bench_json([bench, "sites"])
            out["sites_runtime"] = _bench_json(exec_argv(RunOptions(command=[bench, "sites"], **cores)))
            out["signals_native"] = _bench_json([bench, "signals"])
            out["signals_runtime"] = _bench_json(exec_argv(RunOptions(command=[bench, "signals"], **cores)))
    p50 = lambda run, key: run[key]["p50"]  # noqa: E731
    d = out["delegated"]
    out["ratios"] = {
        "a_delegated_over_pingpong": p50(d, "null_syscall_ns") / p50(d, "cacheline_pingpong_ns"),
        # Issue 12's form: the round trip against what it cannot avoid, a ping-pong of the same
        # cores in the same run plus the call itself natively.
        "a_delegated_over_pingpong_plus_native": p50(d, "null_syscall_ns")
        / (p50(d, "cacheline_pingpong_ns") + p50(out["native"], "null_syscall_ns")),
        "b_fast_path_minus_native_ns": p50(out["fast_path"], "null_syscall_ns") - p50(out["native"], "null_syscall_ns"),
        "b_floor_dispatch_armed_ns": p50(out["native_dispatch_armed"], "null_syscall_ns")
        - p50(out["native"], "null_syscall_ns"),
        **_site_calls(out["sites_runtime"]),
        **{f"e_{case}_over_native": p50(out["signals_runtime"], f"{case}_ns") / p50(out["signals_native"], f"{case}_ns")
           for case in ("tgkill", "unblock")},
    }
    return out


def _site_calls(sites: dict) -> dict:
    """The first calls at a site under the runtime: the first (a trap), the call that rewrites the
    site (the dearest, the runtime's Nth) and the one after it (the fast path)."""
    calls = [c["p50"] for c in sites["calls_ns"]]
    at = max(range(len(calls)), key=calls.__getitem__)
    return {"d_first_call_ns": calls[0], "d_rewrite_at": at + 1, "d_rewrite_call_ns": calls[at],
            "d_after_rewrite_ns": calls[min(at + 1, len(calls) - 1)]}


def _wall(argv: list[str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise CoreplaneError(f"{argv[0]} exited {proc.returncode}")
    return time.perf_counter() - started


def dd(repetitions: int) -> dict:
    """dd bs=512 over 64 MiB: native, coreplane profile, strace -c, perf trace -s; medians of
    alternating repetitions, and each tool's median over native's."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "in.bin"
        data.write_bytes(bytes(DD_BYTES))
        ddcmd = ["dd", f"if={data}", "of=/dev/null", "bs=512"]
        prof = Path(tmp) / "p.json"
        tools = {
            "native": ddcmd,
            "coreplane_profile": exec_argv(RunOptions(command=ddcmd, profile=prof)),
            "coreplane_profile_vdso": exec_argv(RunOptions(command=ddcmd, profile=prof, vdso="intercept")),
            "strace_c": ["strace", "-c", "-o", str(Path(tmp) / "s.txt"), *ddcmd],
            "perf_trace_s": ["perf", "trace", "-s", "-o", str(Path(tmp) / "p.txt"), "--", *ddcmd],
        }
        times = {k: [] for k in tools}
        _wall(ddcmd)  # page cache warm
        for _ in range(repetitions):
            for name, argv in tools.items():
                times[name].append(_wall(argv))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"repetitions": repetitions, "median_s": med, "samples_s": times,
            "ratio_to_native": {k: v / med["native"] for k, v in med.items()}}


def vdso(repetitions: int, compute: int, control: int) -> dict:
    """ns per clock_gettime (workloads/bin/clock_loop, 10^6 calls): natively, under the runtime
    with the vDSO left alone, intercepted and kept local, intercepted and delegated; medians of
    alternating repetitions, and each one's median minus native's."""
    loop = [str(workload("clock_loop")), "-n", "1000000"]
    cores = dict(compute_cores=str(compute), control_cores=str(control))
    cases = {
        "native": loop,
        "runtime_vdso_native": exec_argv(RunOptions(command=loop, **cores)),
        "intercepted_local": exec_argv(RunOptions(command=loop, vdso="intercept", **cores)),
        "intercepted_delegated": exec_argv(RunOptions(command=loop, vdso="intercept", delegate="clock_gettime", **cores)),
    }
    ns = {k: [] for k in cases}
    for _ in range(repetitions):
        for name, argv in cases.items():
            ns[name].append(_bench_json(argv)["ns_per_call"])
    med = {k: statistics.median(v) for k, v in ns.items()}
    return {"repetitions": repetitions, "median_ns": med, "samples_ns": ns,
            "minus_native_ns": {k: v - med["native"] for k, v in med.items()}}
