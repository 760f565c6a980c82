"""The `coreplane validate` command: run a suite natively and delegated, and score the models' predictions."""

from __future__ import annotations

import os
import time
from pathlib import Path

import typer
from rich.table import Table

from coreplane.core.output import console, emit, human_ns
from coreplane.validate import engine, suite as suites
from coreplane.validate.predict import ESTIMATED, FITTED, HEADLINE

MODEL_NAMES = {"naive": "naive (eq. 3)", "refined": "refined (eq. 4–11)", "queueing": "open M/M/1 (eq. 12–13)",
               "closed": "closed MVA", "naive:median": "naive, γ = median fit (in-sample)",
               "refined:median": "refined, γ = median fit (in-sample)",
               "refined:loo": "refined, γ = median of the other programs", "closed:loo": "closed, γ = median of the others"}


def default_out(kind: str, name: str) -> Path:
    """A fresh directory per invocation: kind/NAME-YYYYmmdd-HHMMSS."""
    return Path(kind) / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


def default_nice() -> int | None:
    """Root raises the runs' autogroup priority to −20 (other sessions' work cannot preempt them
    much); others leave it."""
    return -20 if os.geteuid() == 0 else None


def _pct(value) -> str:
    return "—" if value is None else f"{value:.2f} %"


def render_calibration(doc: dict) -> None:
    cal = doc["calibration"]
    table = Table(title="micro-benchmark: delegated getppid round trip 2·f_c (minus native), per forward cost F")
    for col in ("F per direction", "trials", "min", "median", "mean", "max", "caller CPU per call"):
        table.add_column(col, justify="right")
    for f, fc in sorted(cal["forward"].items(), key=lambda kv: int(kv[0])):
        table.add_row(human_ns(int(f)) if int(f) else "0", str(fc["trials"]), human_ns(fc["min"]),
                      human_ns(fc["median"]), human_ns(fc["mean"]), human_ns(fc["max"]),
                      human_ns(cal["cpu_per_call_ns"][f]))
    console.print(table)
    gam = ", ".join(f"-g {g} → γ {v:.3f}" for g, v in cal["gammas"].items() if float(g) != 1.0) or "none emulated"
    cold = cal["cold"]
    console.print(f"native getppid {human_ns(cal['native_call_ns'])}; local call under the runtime +{human_ns(cal['local_ns'])}; "
                  f"caller spins {human_ns(cal['spin_ns']) if cal['spin_ns'] else 'through every round trip'} "
                  f"before sleeping; delegate polls {human_ns(cal['window_ns']) if cal['window_ns'] else '(no cold calls seen)'} "
                  f"before sleeping; a cold call's round trip: median {human_ns(cold['median'])}, mean {human_ns(cold['mean'])} "
                  f"({cold['trials']} trials); start-up {human_ns(cal['startup_ns'])} ({human_ns(cal['startup_delegating_ns'])} "
                  f"with a delegate), each further process {human_ns(cal['child_ns'])} "
                  f"({human_ns(cal['child_delegating_ns'])}); gain_synth {gam}", highlight=False)


def render_mape(doc: dict) -> None:
    table = Table(title=f"prediction error over {len(doc['rows'])} configurations of {len(doc['per_program'])} programs "
                        f"(f_c = {doc['fc_statistic']} of the micro-benchmark)")
    for col in ("model", "MAPE", "accuracy", "worst", "sequential", "multithreaded", "saturated"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for model in (*ESTIMATED, *FITTED):
        m = doc["mape"][model]
        table.add_row(MODEL_NAMES[model] + (" ◀ goal" if model == HEADLINE else ""), _pct(m["mape_pct"]),
                      _pct(m["accuracy_pct"]), _pct(m["max_pct"]), _pct(doc["mape_sequential"][model]),
                      _pct(doc["mape_multithreaded"][model]), str(m["missing"]))
    console.print(table)


def render_programs(doc: dict) -> None:
    fits = doc["gamma_fit"]
    table = Table(title="per program (Table 4 style: γ fitted on the program's own runs, relative to the estimate)")
    for col in ("program", "threads", "configs", "native", "γ fit", "γ used (LOO)", "naive", "refined", "closed",
                "closed, γ LOO"):
        table.add_column(col, justify="left" if col == "program" else "right")
    for program, errors in doc["per_program"].items():
        rows = [r for r in doc["rows"] if r["program"] == program]
        fit = fits["per_program"].get(program)
        loo = fits["loo"].get(program)
        table.add_row(program, str(rows[0]["threads"]), str(len(rows)), human_ns(rows[0]["native_ns"]),
                      "—" if fit is None else f"{fit:.3f}", "—" if loo is None else f"{loo:.3f}",
                      _pct(errors["naive"]), _pct(errors["refined"]), _pct(errors["closed"]), _pct(errors["closed:loo"]))
    console.print(table)


def render(doc: dict) -> None:
    """The terminal summary of a validation."""
    render_calibration(doc)
    render_programs(doc)
    render_mape(doc)
    goal = doc["goal"]
    verdict = "[green]met[/]" if goal["met"] else "[red]not met[/]"
    console.print(f"goal (MAPE ≤ {goal['target_pct']:g} % with estimated parameters, ≥ 10 programs, ≥ 3 multithreaded): "
                  f"{verdict} — {goal['model']} {_pct(goal['mape_pct'])} over {goal['programs']} programs, "
                  f"{goal['multithreaded_programs']} multithreaded", highlight=False)
    if doc["skipped"]:
        console.print(f"{len(doc['skipped'])} configuration(s) skipped as too long (see skipped[] in --json)")
    for f in doc["failed"]:
        console.print(f"[yellow]failed run[/] {f['run_id']} ({f['case']}): {f['status']} {f['message'] or ''}",
                      highlight=False)
    console.print(f"results: {doc['out']}/validation.json; figures: {doc['out']}/figures/", highlight=False)


def validate(
    suite: str = typer.Argument(None, metavar="[SUITE]", help="default | quick | synthetic | a suite file (TOML)."),
    quick: bool = typer.Option(False, "--quick", help="Fewer configurations and forward costs, 1 s runs at most "
                               "(the quick suite unless SUITE is given)."),
    repetitions: int = typer.Option(5, "--repetitions", "-r", help="Rounds: every configuration runs once per round."),
    statistic: str = typer.Option("mean", "--fc-statistic", help="Summary of the micro-benchmark used as f_c: "
                                  "min | median | mean | max."),
    max_run: float = typer.Option(None, "--max-run", metavar="SECONDS", help="Skip configurations projected to run "
                                  "longer (default 3, 1 with --quick)."),
    compute_cores: str = typer.Option(None, "--compute-cores", help="Cores for the programs (coreplane run's default)."),
    control_cores: str = typer.Option(None, "--control-cores", help="Cores for the delegates."),
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
                             control_cores=control_cores, nice=default_nice() if nice is None else (nice or None),
                             progress=not json_out, resume=resume)
    doc = engine.validate(chosen, out or default_out("validations", chosen.name), options)
    emit(doc, json_out, render)
