"""The `coreplane validate` and `coreplane calibrate` commands: score the models' predictions on
real runs, and measure once per machine what the models need."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import typer

from coreplane.core import options as o
from coreplane.core.machine import identity
from coreplane.core.output import console, emit, human_ns
from coreplane.model import calibration as calibrations
from coreplane.validate import engine, suite as suites
from coreplane.validate.commands import Machine
from coreplane.validate.render import render


def validate(
    suite: str = typer.Argument(None, metavar="[SUITE]", help="default | quick | synthetic | a suite file (TOML)."),
    quick: bool = typer.Option(False, "--quick", help="Fewer configurations and forward costs, 1 s runs at most "
                               "(the quick suite unless SUITE is given)."),
    repetitions: int = typer.Option(5, "--repetitions", "-r", help="Rounds: every configuration runs once per round."),
    until_noise: float = typer.Option(None, "--until-noise", metavar="PCT", help="After --repetitions rounds, more "
                                      "while the measurements' own noise floor (a bootstrap over the rounds) is "
                                      "above PCT percent."),
    max_repetitions: int = typer.Option(15, "--max-repetitions", help="The most rounds --until-noise runs."),
    statistic: str = typer.Option("mean", "--fc-statistic", help="Summary of the micro-benchmark used as f_c: "
                                  "min | median | mean | max."),
    max_run: float = typer.Option(None, "--max-run", metavar="SECONDS", help="Skip configurations projected to run "
                                  "longer (default 3, 1 with --quick)."),
    compute_cores: str = o.compute_cores(help="Compute cores for the programs (coreplane run's default)."),
    control_cores: str = o.control_cores(help="Control cores for the delegates."),
    nice: int = typer.Option(None, "--nice", help="Autogroup nice of every run (default -20 as root, else unchanged)."),
    out: Path = typer.Option(None, "--out", help="Output directory (default validations/SUITE-TIME)."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted validation in --out."),
    rescore: Path = typer.Option(None, "--rescore", metavar="DIR", help="Score a finished validation DIR again "
                                 "with the current models, from its stored runs (nothing runs); written to "
                                 "DIR/rescored/."),
    json_out: bool = typer.Option(False, "--json", help="The result document (coreplane-validation/1) on stdout."),
) -> None:
    """Run a suite natively and under `coreplane run` configurations, and compare the models' predictions with
    the measurements (MAPE per model; paper 002 Figs 11, 13 and 15 as figures)."""
    if rescore is not None:
        emit(engine.rescore(rescore), json_out, render)
        return
    name = suite or ("quick" if quick else "default")
    chosen = suites.load(name)
    options = engine.Options(quick=quick, repetitions=repetitions, until_noise_pct=until_noise,
                             max_repetitions=max_repetitions, statistic=statistic,
                             max_run_s=max_run or (1.0 if quick else 3.0), compute_cores=compute_cores, control_cores=control_cores, nice=engine.default_nice() if nice is None else (nice or None),
                             progress=not json_out, resume=resume)
    doc = engine.validate(chosen, out or engine.default_out("validations", chosen.name), options)
    emit(doc, json_out, render)


def _render_calibration(doc: dict) -> None:
    cal = doc["calibration"]
    fc = {int(k): v for k, v in cal["forward"].items()}
    use = ("`coreplane project` uses it by default" if doc["file"] == str(calibrations.default_path())
           else f"use it with `coreplane project --calibration {doc['file']}`")
    console.print(f"calibration of {doc['machine']['hostname']} written to [bold]{doc['file']}[/] "
                  f"({doc['elapsed_s']:.0f} s); {use}", highlight=False)
    console.print("round trip 2·f_c of a delegated call (mean): " + ", ".join(
        f"{human_ns(f)} → {human_ns(v['mean'])}" for f, v in sorted(fc.items())), highlight=False)
    console.print(f"interposed local call +{human_ns(cal['local_ns'])}, a caller polls 2·F + "
                  f"{human_ns(cal['spin_blocked_ns'])} on a blocked call before sleeping, "
                  f"start-up {human_ns(cal['startup_ns'])} ({human_ns(cal['startup_delegating_ns'])} delegating)",
                  highlight=False)


def calibrate(
    quick: bool = typer.Option(False, "--quick", help="Fewer forward costs (0, 10 µs, 1 ms) and 3 rounds."),
    repetitions: int = typer.Option(5, "--repetitions", "-r", help="Rounds of every micro-benchmark."),
    compute_cores: str = o.compute_cores(help="The compute core the micro-benchmarks run on (coreplane run's default)."),
    control_cores: str = o.control_cores(help="The control core of their delegate."),
    nice: int = typer.Option(None, "--nice", help="Autogroup nice of every run (default -20 as root, else unchanged)."),
    out: Path = typer.Option(None, "--out", metavar="FILE", help="The calibration file (default: the per-user "
                             "one, $XDG_CACHE_HOME/coreplane/calibration.json, which `project` reads)."),
    json_out: bool = o.json_flag(help="The calibration file's document on stdout."),
) -> None:
    """Measure once per machine what the models need: the round trip of a delegated call per forward cost, the
    interposed local call, how long a caller spins, cold calls, start-up; `coreplane project` then uses it."""
    options = engine.Options(quick=quick, repetitions=3 if quick and repetitions == 5 else repetitions,
                             compute_cores=compute_cores, control_cores=control_cores,
                             nice=engine.default_nice() if nice is None else (nice or None), progress=not json_out)
    options.check()
    machine = Machine.resolve(options.compute_cores, options.control_cores, options.nice)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="coreplane-calibrate-") as work:
        cal = engine.measure_calibration(machine, set(), Path(work) / "calibrate", options)
    where = {**identity(), "compute_cores": machine.compute, "control_cores": machine.control}
    path = calibrations.save(cal, where, out or calibrations.default_path())
    doc = {"format": calibrations.FORMAT, "file": str(path), "machine": where, "calibration": cal.to_dict(),
           "elapsed_s": round(time.monotonic() - started, 1)}
    emit(doc, json_out, _render_calibration)
