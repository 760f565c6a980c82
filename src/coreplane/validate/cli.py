"""The `coreplane validate` command: run a suite natively and delegated, and score the models' predictions."""

from __future__ import annotations

from pathlib import Path

import typer

from coreplane.core import options as o
from coreplane.core.output import emit
from coreplane.validate import engine, suite as suites
from coreplane.validate.render import render


def validate(
    suite: str = typer.Argument(None, metavar="[SUITE]", help="default | quick | synthetic | a suite file (TOML)."),
    quick: bool = typer.Option(False, "--quick", help="Fewer configurations and forward costs, 1 s runs at most "
                               "(the quick suite unless SUITE is given)."),
    repetitions: int = typer.Option(5, "--repetitions", "-r", help="Rounds: every configuration runs once per round."),
    statistic: str = typer.Option("mean", "--fc-statistic", help="Summary of the micro-benchmark used as f_c: "
                                  "min | median | mean | max."),
    max_run: float = typer.Option(None, "--max-run", metavar="SECONDS", help="Skip configurations projected to run "
                                  "longer (default 3, 1 with --quick)."),
    compute_cores: str = o.compute_cores(help="Compute cores for the programs (coreplane run's default)."),
    control_cores: str = o.control_cores(help="Control cores for the delegates."),
    nice: int = typer.Option(None, "--nice", help="Autogroup nice of every run (default -20 as root, else unchanged)."),
    out: Path = typer.Option(None, "--out", help="Output directory (default validations/SUITE-TIME)."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted validation in --out."),
    json_out: bool = typer.Option(False, "--json", help="The result document (coreplane-validation/1) on stdout."),
) -> None:
    """Run a suite natively and under `coreplane run` configurations, and compare the models' predictions with
    the measurements (MAPE per model, paper 002 Fig. 11/13/15-style figures)."""
    name = suite or ("quick" if quick else "default")
    chosen = suites.load(name)
    options = engine.Options(quick=quick, repetitions=repetitions, statistic=statistic,
                             max_run_s=max_run or (1.0 if quick else 3.0), compute_cores=compute_cores,
                             control_cores=control_cores, nice=engine.default_nice() if nice is None else (nice or None),
                             progress=not json_out, resume=resume)
    doc = engine.validate(chosen, out or engine.default_out("validations", chosen.name), options)
    emit(doc, json_out, render)
