"""The `coreplane sweep` command."""

import sys
from pathlib import Path

import typer
from rich.table import Table

from coreplane.core.output import console, emit
from coreplane.dse import expand
from coreplane.dse.specfile import load
from coreplane.dse.sweep import run_sweep


def _render_plan(doc: dict) -> None:
    table = Table(title=f"{doc['name']}: {len(doc['points'])} points x {doc['repetitions']} repetitions"
                        f" (+{doc['warmups']} warm-ups each)")
    for column in ("point", *doc["parameters"], "command"):
        table.add_column(column, overflow="fold")
    for p in doc["points"]:
        table.add_row(p["point_id"], *(str(p["params"][n]) for n in doc["parameters"]), p["command"])
    console.print(table)


def _render_summary(doc: dict) -> None:
    now = doc["this_invocation"]
    failed = ", ".join(f"{k} {v}" for k, v in sorted(doc["failed"].items())) or "none"
    console.print(f"[bold]{doc['name']}[/]: {doc['points']} points, {doc['ok']}/{doc['runs']} runs ok, "
                  f"failed: {failed}  ({doc['executor']}, {doc['elapsed_s']:.1f} s)", highlight=False)
    console.print(f"  this time: {now['ran']} runs + {now['warmups']} warm-ups, {now['kept_from_before']} kept "
                  f"from before, {now['topped_up_points']} points topped up for CV", highlight=False)
    console.print(f"  store: {doc['store']}   next: coreplane report {doc['out']}", highlight=False)


def sweep(
    spec_file: Path = typer.Argument(..., metavar="SPEC", help="Sweep spec: a .toml file, or a paper-001 INFOFILE."),
    out: Path = typer.Option(None, "--out", "-o", help="Sweep directory (store + logs); default sweeps/NAME."),
    resume: bool = typer.Option(False, "--resume", help="Continue the sweep in --out: run only missing, failed "
                                                        "or interrupted runs."),
    executor: str = typer.Option("local", "--executor", help="local or slurm."),
    parallel: int = typer.Option(1, "--parallel", "-j", help="Local runs at once, each on its own disjoint core set."),
    cores_per_run: int = typer.Option(None, "--cores-per-run", help="Cores in each parallel core set "
                                                                     "(default: allowed CPUs / --parallel)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the points and commands; run nothing."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout (no progress bar)."),
) -> None:
    """Run a parameter sweep with repetitions, time-outs and retries into an SQLite store (resumable)."""
    spec = load(spec_file)
    out = out or Path("sweeps") / spec.name
    if dry_run:
        points = expand.points(spec)
        emit({"name": spec.name, "parameters": list(spec.parameters), "repetitions": spec.repetitions,
              "warmups": spec.warmups, "points": [{"point_id": p.point_id, "params": p.params, "command": p.command,
                                                   "env": p.env} for p in points]}, json_out, _render_plan)
        return
    doc = run_sweep(spec, out, resume=resume, executor=executor, parallel=parallel, cores_per_run=cores_per_run,
                    progress=not json_out)
    emit(doc, json_out, _render_summary)
    if doc["failed"]:
        print(f"coreplane sweep: {sum(doc['failed'].values())} runs failed "
              f"({', '.join(f'{k} {v}' for k, v in sorted(doc['failed'].items()))}); logs in {out}/logs, "
              f"run them again with --resume", file=sys.stderr)
        raise typer.Exit(1)
