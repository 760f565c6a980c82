"""The `coreplane doctor` command."""

import sys
from pathlib import Path

import typer

from coreplane.core.errors import CoreplaneError
from coreplane.core.output import console, emit
from coreplane.doctor.checks import FAIL, diagnose
from coreplane.doctor.host import Host

STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "info": "cyan"}


def _render(report: dict) -> None:
    console.print(f"[bold]coreplane doctor[/] ({'this machine' if report['live'] else report['root']})")
    for f in report["findings"]:
        v = f["verdict"]
        console.print(f"[{STYLE[v]}]{v:>4}[/]  [bold]{f['name']}[/]: {f['summary']}", highlight=False)
        for line in f["evidence"]:
            console.print(f"        [dim]{line}[/]", highlight=False)
    console.print("coreplane can run here." if report["can_run"] else "[bold red]coreplane cannot run here.[/]")


def doctor(
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
    root: Path = typer.Option(Path("/"), "--root", help="Read a captured host tree instead of this machine."),
    capture: Path = typer.Option(None, "--capture", help="Copy every file doctor read into DIR (a snapshot)."),
) -> None:
    """What this machine offers coreplane: each line a verdict and its evidence; non-zero exit on blockers."""
    if not root.is_dir():
        raise CoreplaneError(f"--root {root}: not a directory")
    host = Host(root)
    findings = diagnose(host)
    blockers = [f for f in findings if f.verdict == FAIL]
    report = {"root": str(root), "live": host.live, "can_run": not blockers,
              "findings": [f.as_dict() for f in findings]}
    if capture:
        report["captured_files"] = host.capture(capture)
    emit(report, json_out, _render)
    for f in blockers:
        print(f"coreplane doctor: blocker: {f.name}: {f.summary}", file=sys.stderr)
    if blockers:
        raise typer.Exit(1)
