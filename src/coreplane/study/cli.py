"""The `coreplane study` command: the main job `make demo` runs."""

from __future__ import annotations

from pathlib import Path

import typer

from coreplane.core.output import console, emit
from coreplane.study import pipeline
from coreplane.validate import engine
from coreplane.validate.render import pct, render_mape


def _render(doc: dict) -> None:
    console.rule("what delegation would do to each program")
    for text in doc["sentences"].values():
        console.print(f"• {text}", highlight=False)
    console.rule("validation")
    render_mape(doc["validation"])
    goal = doc["validation"]["goal"]
    verdict = "[green]met[/]" if goal["met"] else "[red]not met[/]"
    console.print(f"goal (MAPE ≤ {goal['target_pct']:g} %, estimated parameters, ≥ 10 programs, ≥ 3 multithreaded): "
                  f"{verdict} — {goal['model']} {pct(goal['mape_pct'])} over {goal['programs']} programs "
                  f"({goal['multithreaded_programs']} multithreaded)", highlight=False)
    console.print(f"report: {doc['report']} ({doc['elapsed_s']:.0f} s)", highlight=False)


def study(
    quick: bool = typer.Option(False, "--quick", help="The quick suite and grid (CI: about 2 minutes)."),
    repetitions: int = typer.Option(5, "--repetitions", "-r", help="Rounds of every configuration."),
    until_noise: float = typer.Option(2.0, "--until-noise", metavar="PCT", help="After --repetitions rounds, more "
                                      "while the measurements' own noise floor (a bootstrap over the rounds) is "
                                      "above PCT percent (0: no more; ignored with --quick)."),
    max_repetitions: int = typer.Option(15, "--max-repetitions", help="The most rounds --until-noise runs."),
    nice: int = typer.Option(None, "--nice", help="Autogroup nice of every run (default -20 as root)."),
    out: Path = typer.Option(None, "--out", help="Output directory (default studies/study-TIME)."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted study in --out."),
    json_out: bool = typer.Option(False, "--json", help="The study document (coreplane-study/1) on stdout."),
) -> None:
    """Profile, project and validate the bundled workloads and real Debian programs, and write an HTML report:
    what delegating which calls would cost or gain each program, and how well the models predicted it."""
    options = engine.Options(quick=quick, repetitions=repetitions, until_noise_pct=None if quick or not until_noise
                             else until_noise, max_repetitions=max_repetitions, max_run_s=1.0 if quick else 3.0,
                             nice=engine.default_nice() if nice is None else (nice or None),
                             progress=not json_out, resume=resume)
    doc = pipeline.run(out or engine.default_out("studies", "study"), options)
    emit(doc, json_out, _render)
