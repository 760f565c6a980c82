"""The terminal summary of a validation document: calibration, programs, prediction errors, the goal."""

from __future__ import annotations

from rich.table import Table

from coreplane.core.output import console, human_ns
from coreplane.validate.predict import ESTIMATED, FITTED, HEADLINE, MODEL_NAMES, ROUND_ONLY


def pct(value) -> str:
    """A percentage to two decimals ("3.21 %"); "—" for none."""
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
                  f"caller polls 2·F + {human_ns(cal['spin_blocked_ns'])} on a blocked call "
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
    for model in (m for m in (*ESTIMATED, *FITTED, *ROUND_ONLY) if m in doc["mape"]):
        m = doc["mape"][model]
        table.add_row(MODEL_NAMES[model] + (" ◀ goal" if model == HEADLINE else ""), pct(m["mape_pct"]),
                      pct(m["accuracy_pct"]), pct(m["max_pct"]), pct(doc["mape_sequential"][model]),
                      pct(doc["mape_multithreaded"][model]), str(m["missing"]))
    console.print(table)
    floor = doc.get("noise_floor_pct") or {}
    if floor.get("all") is not None:
        console.print(f"measurement noise (bootstrap over the rounds; the MAPE even a model that knew every true speedup "
                      f"would show here): {pct(floor['all'])}, sequential {pct(floor['sequential'])}, "
                      f"multithreaded {pct(floor['multithreaded'])}", highlight=False)


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
                      pct(errors["naive"]), pct(errors["refined"]), pct(errors["closed"]), pct(errors["closed:loo"]))
    console.print(table)


def render(doc: dict) -> None:
    """The terminal summary of a validation."""
    render_calibration(doc)
    render_programs(doc)
    render_mape(doc)
    goal = doc["goal"]
    verdict = "[green]met[/]" if goal["met"] else "[red]not met[/]"
    console.print(f"goal (MAPE ≤ {goal['target_pct']:g} % with estimated parameters, ≥ 10 programs, ≥ 3 multithreaded): "
                  f"{verdict} — {goal['model']} {pct(goal['mape_pct'])} over {goal['programs']} programs, "
                  f"{goal['multithreaded_programs']} multithreaded", highlight=False)
    if doc["skipped"]:
        console.print(f"{len(doc['skipped'])} configuration(s) skipped as too long (see skipped[] in --json)")
    for f in doc["failed"]:
        console.print(f"[yellow]failed run[/] {f['run_id']} ({f['case']}): {f['status']} {f['message'] or ''}",
                      highlight=False)
    console.print(f"results: {doc['out']}/validation.json; figures: {doc['out']}/figures/", highlight=False)
