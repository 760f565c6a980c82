"""The `coreplane project` command: every model's speedup projection for a profile, and the answer (the closed model's)."""

import math
import os
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from coreplane.cell.spec import parse_cores
from coreplane.core import options as o, vocabulary as v
from coreplane.core.errors import CoreplaneError
from coreplane.core.output import console, emit, human_ns
from coreplane.model import calibration as calibrations, policies
from coreplane.model.calibration import delegated_run, profiled_startup_ns, shootdown_count
from coreplane.model.projection import project as project_all
from coreplane.profile import io as profiles
from coreplane.profile.records import WAIT_CALLS


# Processes alive at once from which `project` warns that a pipeline may be projected too fast.
PIPELINE_PROCESSES = 3


def _shootdowns(cal: dict) -> str:
    """The TLB-shootdown charge in words: the flushes counted, those charged (at most one per
    delegated call), each one's cost."""
    if cal["shootdowns"] is None:
        return "TLB shootdowns not counted"
    return (f"TLB shootdowns {cal['shootdowns_charged']:,} of {cal['shootdowns']:,} flushes charged × {human_ns(cal['shootdown_ns'])} "
            f"= {human_ns(cal['shootdowns_ns'])}")


def _render(doc: dict) -> None:
    par, pol = doc["parameters"], doc["policy"]
    console.print(f"[bold]{' '.join(doc['argv']) or doc['program']}[/] ({doc['profile']}): "
                  f"{doc['threads']} thread(s), wall {human_ns(doc['wall_ns'])}, system share p = {doc['p']:.3%}",
                  highlight=False)
    console.print(f"gain γ = {par['gamma']:g}, forward cost f_c = {human_ns(par['fc_ns'])} per direction (round trip "
                  f"{human_ns(par['round_trip_ns'])}), policy {pol['description']}: {len(pol['delegated'])} of {pol['distinct_calls']} syscalls, "
                  f"{pol['delegated_calls']:,} of {pol['calls']:,} calls delegated", highlight=False)
    cal = doc["calibration"]
    if cal is None:
        console.print("no calibration (`coreplane calibrate` measures one): f_c exactly as given, no "
                      "interposition or start-up cost", highlight=False)
    else:
        console.print(f"calibration {cal['file']} ({cal['machine'].get('hostname', '?')}, {cal['created']}): f_c "
                      f"{human_ns(cal['fc_ns'])} per direction at this forward cost, start-up "
                      f"{human_ns(cal['startup_ns'])} less the profiled run's own "
                      f"{human_ns(cal['profiled_startup_ns'])} (its wall time holds that and the interposition of "
                      f"every call), {_shootdowns(cal)}", highlight=False)
    table = Table()
    for col in ("model", "speedup", "projected time", "notes"):
        table.add_column(col, justify="left" if col in ("model", "notes") else "right")
    n, r, q, c = doc["naive"], doc["refined"], doc["queueing"], doc["closed"]
    table.add_row("naive (eq. 3)", f"{n['speedup']:.4f}", human_ns(n["time_ns"]), "every call delegated, no forwarding cost")
    table.add_row("refined (eq. 4–11)", f"{r['speedup']:.4f}", human_ns(r["time_ns"]),
                  f"forwarding {human_ns(r['forward_ns'])} in total")
    if not q["applicable"]:
        table.add_row("open queue (eq. 12–13)", "—", "—", "not applicable: one thread at a time", style="dim")
    elif q["saturated"]:
        table.add_row(f"open queue {q['model']} (eq. 12–13)", "saturated", "—",
                      f"load {q['load']:.3f} ≥ 1: the delegates cannot keep up", style="bold red")
    else:
        table.add_row(f"open queue {q['model']} (eq. 12–13)", f"{q['speedup']:.4f}", human_ns(q["time_ns"]),
                      f"load {q['load']:.3f}, mean wait {human_ns(q['wait_ns'])} per delegated call")
    handovers = (f", {c['handovers']:,.0f} hand-overs between processes' delegates {human_ns(c['handover_ns'])}"
                 if c.get("handovers") else "")
    if c.get("unseen_ns"):
        handovers += f", {human_ns(c['unseen_ns'])} of the profile's wall not rebuilt (no timed call, no CPU time), added to both runs"
    table.add_row(f"closed MVA ◀ answer", f"{c['speedup']:.4f}", human_ns(c["time_ns"]),
                  f"{c['threads']} thread(s) on {c['compute_cores']} compute / {c['control_cores']} control core(s), "
                  f"mean wait {human_ns(c['wait_ns'])} per delegated call{handovers}", style="bold")
    console.print(table)
    a = doc["answer"]
    console.print(f"answer: speedup [bold]{a['speedup']:.4f}[/] ({human_ns(a['time_ns'])}) by the {a['model']} model, "
                  "the one `coreplane validate` scores as its headline", highlight=False)
    if a.get("placements"):
        pl = a["placements"]
        speed = "–".join("saturated" if x is None else f"{x:.4f}" for x in pl["speedup"])
        console.print(f"the host moved the vCPUs while calibrating (round trip {human_ns(pl['round_trip_ns'][0])} to "
                      f"{human_ns(pl['round_trip_ns'][1])} at no forward cost): speedup {speed} between those "
                      "placements; which one a run gets is the host's choice", highlight=False)
    for warning in doc["warnings"]:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    for path in doc["plots"]:
        console.print(f"figure: {path}", highlight=False)


def _core_counts(prof, compute_cores: str | None, control_cores: str | None) -> tuple[int, int]:
    """How many compute and control cores the projected run has (the closed model's stations)."""
    config = prof.config or {}
    control = len(parse_cores(control_cores, v.CONTROL_CORES)) if control_cores else len(config.get("control_cores") or [0])
    if compute_cores:
        return len(parse_cores(compute_cores, v.COMPUTE_CORES)), control
    return len(config.get("compute_cores") or []) or max(1, len(os.sched_getaffinity(0)) - control), control


def _calibration(path: Path | None):
    """The calibration to use: the file given, else the per-user one if it exists (else None)."""
    if path is None:
        path = calibrations.default_path()
        if not path.exists():
            return None
    return calibrations.load(path)


def project(
    profile_path: Path = typer.Argument(..., metavar="PROFILE", help="A profile JSON (coreplane-profile/1)."),
    gamma: float = typer.Option(1.0, "--gamma", help="Gain γ of the compute cores over Linux (1 = none)."),
    forward_cost: float = o.forward_cost(0.0, help="Forwarding cost f_c per direction in ns, as `coreplane run "
                                         "--forward-cost`: a delegated call pays 2·f_c (eq. 5)."),
    policy: str = o.delegate("all", help="Delegation policy: all | none | min-frequency | max-frequency | random | "
                             "mckernel | mos | NAME,NAME,... | @FILE."),
    share: float = typer.Option(0.9, "--share", metavar="X",
                                help="Share of the profile's syscalls delegated by min-/max-frequency and random."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random policy."),
    delegates: int = o.delegate_threads(help="Delegate threads c: M/M/1 for 1, M/M/c above."),
    compute_cores: str = o.compute_cores(help="Compute cores of the projected run, for the closed model "
                                         "(default: the profile's, else every CPU allowed here but one)."),
    control_cores: str = o.control_cores(help="Control cores of the projected run (default: the profile's, else one)."),
    calibration: Path = typer.Option(None, "--calibration", metavar="FILE", help="The runtime's measured costs "
                                     "(coreplane calibrate; default: the per-user file when there is one)."),
    no_calibration: bool = typer.Option(False, "--no-calibration", help="The paper's models alone: f_c exactly "
                                        "as given, no interposition or start-up cost."),
    plot: Path = typer.Option(None, "--plot", metavar="DIR", help="Draw the sensitivity figures (paper Fig. 2, 4, 5, 7, 8, 9) into DIR."),
    json_out: bool = o.json_flag(),
) -> None:
    """Projects the speedup of delegating a profiled program's syscalls by every model; the answer is the closed model's."""
    # NaN passes `gamma <= 0` and infinity passes click's range: either made NaN speedups (not
    # JSON) or a division by zero.
    if not (gamma > 0 and math.isfinite(gamma)):
        raise CoreplaneError(f"--gamma {gamma}: must be positive")
    if not math.isfinite(forward_cost):
        raise CoreplaneError(f"--forward-cost {forward_cost}: must be a number of ns")
    prof = profiles.load(profile_path)
    pol = policies.parse(policy, share=share, seed=seed)
    compute, control = _core_counts(prof, compute_cores, control_cores)
    warnings = []
    stored = None if no_calibration else _calibration(calibration)
    if stored is None:
        models = project_all(prof, gamma, forward_cost, pol, delegates, compute, control)
        used = None
    else:
        cal = stored.calibration
        # The profile was taken under the runtime: its wall time already holds the start-up of
        # its own run and the interposition of every call, which a run under the runtime pays
        # again the same way; only the start-up's difference is added.
        recorded = profiled_startup_ns(prof, cal)

        def calibrated(c):
            cost = delegated_run(prof, pol, c, gamma, forward_cost)
            return cost, project_all(prof, gamma, cost.fc_ns, pol, delegates, compute, control,
                                     spin_ns=c.spin_ns(forward_cost), startup_ns=cost.added_ns - recorded,
                                     yield_ns=calibrations.yield_ns(c))
        cost, models = calibrated(cal)
        fc = cost.fc_ns
        placements = cal.placement_range()
        if placements and pol.kind != "none":
            # The answer where the host puts the vCPUs at either end of what calibration saw.
            ends = [calibrated(cal.at_round_trip(rt))[1]["answer"] for rt in placements]
            models["answer"]["placements"] = {"round_trip_ns": list(placements),
                                              "speedup": [a["speedup"] for a in ends],
                                              "time_ns": [a["time_ns"] for a in ends]}
        used = {"file": str(stored.path), "machine": stored.machine, "created": stored.created, "fc_ns": fc,
                "round_trip_ns": 2 * fc, "spin_ns": cal.spin_ns(forward_cost),
                "startup_ns": cost.startup_ns, "profiled_startup_ns": recorded, "shootdowns": shootdown_count(prof),
                "shootdowns_charged": cost.shootdowns, "shootdown_ns": cal.shootdown_ns,
                "shootdowns_ns": cost.shootdowns * cost.shootdown_ns, "yield_ns": calibrations.yield_ns(cal)}
        if used["shootdowns"] is None and pol.kind != "none":
            warnings.append(f"the profile has no count of TLB flushes (profiling needs root, CAP_PERFMON or "
                            f"kernel.perf_event_paranoid <= 1 to count them): the projection leaves out the "
                            f"{human_ns(cal.shootdown_ns)} each costs once a delegate polls on a control core")
        taken_on = (prof.extra.get("machine") or {}).get("id")
        if taken_on is None:
            warnings.append(f"the profile does not say which machine it was taken on; the calibration "
                            f"{stored.path} is of {stored.machine.get('hostname', '?')}")
        elif taken_on != stored.machine.get("id"):
            warnings.append(f"the calibration {stored.path} belongs to another machine "
                            f"({stored.machine.get('hostname', '?')}) than the profile "
                            f"({prof.extra['machine'].get('hostname', '?')}): run `coreplane calibrate` there")
    never = sorted(pol.names - set(prof.counts()))
    if never:
        warnings.append(f"--delegate: the profile never made {', '.join(never)}: nothing of it to delegate")
    if pol.kind != "none" and prof.most_processes_at_once() >= PIPELINE_PROCESSES:
        warnings.append(f"{prof.most_processes_at_once()} of the program's processes ran at once: the closed model "
                        "charges the hand-overs of the control core between their delegates, but a profile cannot "
                        "show how a pipeline's stages batch their reads once delegated; on 17 shell pipelines of 2-5 "
                        "stages at forward costs of 0-20 us the projected time was 10-14 % off on average, up to "
                        "40 % (docs/architecture.md)")
    if prof.measured_with_delegation():
        warnings.append(f"the profile was measured with delegation (policy {(prof.config or {}).get('policy', '?')}): "
                        "its g(s) include forwarding and queueing; project from a profile taken with --delegate none")
    if prof.multithreaded:
        warnings.append("multithreaded profile: the models apply to the threads' summed busy time; time in "
                        f"{', '.join(sorted(WAIT_CALLS))} (waiting for other threads) is left out")
    plots = []
    if plot:
        from coreplane.model.sensitivity import draw_all
        with Progress(console=Console(stderr=True), disable=json_out, transient=True) as bar:
            task = bar.add_task("sensitivity figures", total=None)
            plots = [str(p) for p in draw_all([prof], plot, gamma, forward_cost, share, seed, progress=lambda done, total, name:
                                              bar.update(task, completed=done, total=total, description=name))]
    doc = {
        "profile": str(profile_path), "program": prof.program, "argv": prof.argv,
        "threads": max(1, len(prof.threads)), "wall_ns": prof.wall_ns, "p": prof.system_share(),
        "parameters": {"gamma": gamma, "fc_ns": forward_cost, "round_trip_ns": 2 * forward_cost, "delegates": delegates,
                       "compute_cores": compute, "control_cores": control},
        "calibration": used,
        "policy": {"name": policy, "description": pol.describe(), "delegated": models["refined"]["delegated"],
                   "distinct_calls": len(prof.syscalls), "delegated_calls": models["refined"]["delegated_calls"],
                   "calls": sum(c.count for c in prof.syscalls)},
        **models,
        "warnings": warnings,
        "plots": plots,
    }
    emit(doc, json_out, _render)
