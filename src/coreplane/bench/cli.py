"""The `coreplane bench` commands."""

from pathlib import Path

import typer
from rich.table import Table

from coreplane.bench.cores import default_core_pair
from coreplane.core import vocabulary as v
from coreplane.core.documents import read_json
from coreplane.core.errors import CoreplaneError
from coreplane.core.machine import describe
from coreplane.core.native import run_json
from coreplane.core.output import console, emit

app = typer.Typer(help="Native micro-benchmarks (crates/bench).", no_args_is_help=True)

FLOOR_ROWS = [
    ("cacheline_pingpong_ns", "cache-line ping-pong round trip"),
    ("null_syscall_ns", "raw getppid syscall"),
    ("futex_wake_round_trip_ns", "futex wake-up round trip"),
]


def _render_floor(doc: dict) -> None:
    m = doc["machine"]
    table = Table(title=f"physical floor on cores {doc['cores'][0]},{doc['cores'][1]} "
                        f"({m['cpu']}, {m['cpus']} CPUs, {'VM' if m['virtual'] else 'bare metal'})")
    table.add_column("what")
    for col in ("n", "min", "p50", "p90", "p99", "max"):
        table.add_column(col if col == "n" else f"{col} ns", justify="right")
    for key, label in FLOOR_ROWS:
        s = doc[key]
        table.add_row(label, str(s["n"]), *(f"{s[c]:.1f}" for c in ("min", "p50", "p90", "p99", "max")))
    console.print(table)


@app.command()
def floor(
    cores: str = typer.Option(None, "--cores", help="Two cores 'A,B' (default: the last two allowed)."),
    round_trips: int = typer.Option(200_000, "--round-trips", help="Timed ping-pong round trips (>= 100000)."),
    from_file: Path = typer.Option(None, "--from", help="Show a saved `--json` result instead of measuring."),
    plot: Path = typer.Option(None, "--plot", help="Also draw the CDFs into this PNG."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
) -> None:
    """Cache-line ping-pong, raw null syscall and futex wake-up: the floors later figures are divided by."""
    if round_trips < 100_000:
        raise CoreplaneError(f"--round-trips {round_trips}: at least 100000 are needed for a stable p99")
    if from_file:
        doc = read_json(from_file)
        # The result has no format field: its summaries are what the table and the plot read.
        missing = [key for key, _ in FLOOR_ROWS + [("cores", ""), ("machine", "")]
                   if not isinstance(doc, dict) or key not in doc]
        if missing:
            raise CoreplaneError(f"{from_file}: {missing[0]}: missing (not a `coreplane bench floor --json` result)")
    else:
        doc = run_json("coreplane-bench", "floor", "--cores", cores or default_core_pair(),
                       "--round-trips", str(round_trips))
        doc["machine"] = describe()
    if plot:
        from coreplane.bench.plot import floor_cdf
        floor_cdf(doc, FLOOR_ROWS, str(plot))
    emit(doc, json_out, _render_floor)


def _render_paths(doc: dict) -> None:
    r = doc["paths"]["ratios"]
    table = Table(title="syscall paths under coreplane (medians)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("goal", justify="right")
    table.add_row("(a) delegated null syscall ÷ ping-pong, same run", f"{r['a_delegated_over_pingpong']:.2f}", "≤ 1.5")
    table.add_row("    ÷ (ping-pong + native null syscall)", f"{r['a_delegated_over_pingpong_plus_native']:.2f}", "≤ 1.1")
    table.add_row("(b) fast-path null syscall − native", f"{r['b_fast_path_minus_native_ns']:.0f} ns", "≤ 10 ns")
    table.add_row("    floor: dispatch armed, nothing trapping", f"{r['b_floor_dispatch_armed_ns']:.0f} ns", "")
    if "dd" in doc:
        ratio = doc["dd"]["ratio_to_native"]
        table.add_row("(c) profile-only dd ÷ native", f"{ratio['coreplane_profile']:.2f}", "≤ 1.15")
        table.add_row("    with --vdso intercept", f"{ratio['coreplane_profile_vdso']:.2f}", "")
        table.add_row("    strace -c ÷ native", f"{ratio['strace_c']:.1f}", "")
        table.add_row("    perf trace -s ÷ native", f"{ratio['perf_trace_s']:.1f}", "")
    table.add_row("(d) first call at a site (trap)", f"{r['d_first_call_ns'] / 1000:.1f} µs", "")
    table.add_row(f"    call {r['d_rewrite_at']}, which rewrites the site", f"{r['d_rewrite_call_ns'] / 1000:.1f} µs", "")
    table.add_row("    the call after it (fast path)", f"{r['d_after_rewrite_ns']:.0f} ns", "")
    table.add_row("(e) signal to a handler ÷ native, in program code", f"{r['e_tgkill_over_native']:.2f}", "")
    table.add_row("    in a call the runtime serves", f"{r['e_unblock_over_native']:.2f}", "")
    if "vdso" in doc:
        v = doc["vdso"]["median_ns"]
        table.add_row("clock_gettime: vDSO, natively", f"{v['native']:.0f} ns", "")
        for key, label in (("runtime_vdso_native", "under the runtime, vDSO left alone"),
                           ("intercepted_local", "--vdso intercept, local"),
                           ("intercepted_delegated", "--vdso intercept, delegated")):
            table.add_row(f"    {label}", f"{v[key]:.0f} ns", "")
    console.print(table)


@app.command()
def paths(
    compute: int = typer.Option(1, v.COMPUTE_CORES, metavar="CORE", help="The compute core (one)."),
    control: int = typer.Option(0, v.CONTROL_CORES, metavar="CORE", help="The control core (one)."),
    calls: int = typer.Option(100_000, "--calls", help="Timed null syscalls and ping-pong round trips per run."),
    dd_repetitions: int = typer.Option(5, "--dd-repetitions", help="Alternating dd runs per tool (0: skip dd)."),
    cell: bool = typer.Option(True, "--cell/--no-cell", help="Run everything inside a cell on these cores."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
) -> None:
    """The runtime's syscall paths: delegated ÷ ping-pong, fast path − native, profile-only dd ÷ native
    (with strace -c and perf trace -s, and with --vdso intercept), the first call at a site, and
    a vDSO call natively, intercepted and delegated."""
    from coreplane.bench.paths import dd, paths as measure, vdso
    doc = {"machine": describe(), "paths": measure(compute, control, calls, cell)}
    if dd_repetitions > 0:
        doc["dd"] = dd(dd_repetitions)
        doc["vdso"] = vdso(dd_repetitions, compute, control)
    emit(doc, json_out, _render_paths)
