"""The `coreplane bench` commands."""

import json
from pathlib import Path

import typer
from rich.table import Table

from coreplane.bench.machine import default_core_pair, describe
from coreplane.core.errors import CoreplaneError
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
        try:
            doc = json.loads(from_file.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CoreplaneError(f"{from_file}: not a floor result: {exc}") from None
    else:
        doc = run_json("coreplane-bench", "floor", "--cores", cores or default_core_pair(),
                       "--round-trips", str(round_trips))
        doc["machine"] = describe()
    if plot:
        from coreplane.bench.plot import floor_cdf
        floor_cdf(doc, FLOOR_ROWS, str(plot))
    emit(doc, json_out, _render_floor)
