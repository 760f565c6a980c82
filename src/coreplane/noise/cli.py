"""The `coreplane noise` commands: measure, inject, trial, experiment."""

import os
from contextlib import nullcontext
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from coreplane.core.cpulist import format_cpu_list
from coreplane.core.errors import CoreplaneError
from coreplane.core.output import console, emit, human_ns
from coreplane.noise.measure import check_cpus
from coreplane.noise.units import parse_duration

app = typer.Typer(help="OS noise: measure it (gap detector, FWQ, FTQ, osnoise/timerlat) and inject it.",
                  no_args_is_help=True)
progress = Console(stderr=True)
JSON_OPT = typer.Option(False, "--json", help="One JSON document on stdout.")


def _default_cpus() -> str:
    return format_cpu_list(sorted(os.sched_getaffinity(0)))


def _render_measure(doc: dict) -> None:
    table = Table(title=f"OS noise, {doc['duration_ns'] / 1e9:g} s per detector, gaps > "
                        f"{human_ns(doc['threshold_ns'])} ({doc['machine']['cpu']}"
                        f"{', VM' if doc['machine']['virtual'] else ''})")
    cols = [("cpu", "cpu"), ("interruptions/s", "interruptions_per_s"), ("lost %", "lost_pct"),
            ("gap p50 us", "gap_p50_us"), ("gap p99 us", "gap_p99_us"), ("max us", "gap_max_us"),
            ("FTQ lost %", "ftq_lost_pct"), ("FWQ lost %", "fwq_lost_pct"), ("FTQ peaks Hz", "ftq_peaks_hz")]
    for label, _ in cols:
        table.add_column(label, justify="right")
    for s in doc["summary"]:
        table.add_row(*(", ".join(map(str, s[k])) if isinstance(s.get(k), list) else
                        f"{s[k]:.3g}" if isinstance(s.get(k), float) else str(s.get(k, "-")) for _, k in cols))
    console.print(table)
    top = sorted(doc["interrupts_per_s"].items(), key=lambda kv: -sum(kv[1].values()))[:8]
    if top:
        console.print("interrupts and softirqs per second on the measured CPUs: " +
                      "; ".join(f"{k} {sum(v.values()):.0f}" for k, v in top), highlight=False)
    kt = doc.get("kernel_tracers")
    if kt:
        console.print(f"kernel tracers: {'available' if kt['available'] else kt['reason']}", highlight=False)
        for s in kt.get("osnoise", {}).get("sources", [])[:8]:
            console.print(f"  CPU {s['cpu']} {s['kind']} {s['source']}: {s['count']} x, {human_ns(s['total_ns'])}")
    for path in doc.get("plots", []):
        console.print(f"plot: {path}")


@app.command("measure")
def measure_cmd(
    cpus: str = typer.Option(None, "--cpus", help="CPUs to measure at once (default: all this process may use)."),
    duration: str = typer.Option("5s", "--duration", help="Length of each detector phase (bare number: seconds)."),
    threshold: str = typer.Option("5us", "--threshold", help="Gaps longer than this are interruptions (bare number: us)."),
    ftq_quantum: str = typer.Option("100us", "--ftq-quantum", help="FTQ quantum (bare number: us)."),
    fwq: bool = typer.Option(True, "--fwq/--no-fwq", help="Also run FWQ after the gap/FTQ phase."),
    tracers: bool = typer.Option(True, "--tracers/--no-tracers", help="Also run osnoise/timerlat where the kernel has them."),
    plot: Path = typer.Option(None, "--plot", help="Write timeline, histogram and spectrum PNGs into this directory."),
    json_out: bool = JSON_OPT,
) -> None:
    """Gap detector (interruptions/s, gap percentiles, max, % lost), FTQ with its spectrum, FWQ."""
    cpu_list = check_cpus(cpus or _default_cpus())
    duration_ns = parse_duration(duration, "--duration", "s")
    threshold_ns = parse_duration(threshold, "--threshold", "us")
    quantum_ns = parse_duration(ftq_quantum, "--ftq-quantum", "us")
    if duration_ns < 10_000_000:
        raise CoreplaneError(f"--duration {duration}: at least 10ms")
    from coreplane.noise.measure import measure
    phases = 2 if fwq else 1
    with progress.status(f"measuring CPUs {format_cpu_list(cpu_list)} for {phases} x {duration_ns / 1e9:g} s",
                         spinner="dots") if not json_out else nullcontext():
        doc = measure(cpu_list, duration_ns, threshold_ns, quantum_ns, fwq=fwq, tracers=tracers)
    if plot:
        from coreplane.noise.plot import all_plots
        doc["plots"] = all_plots(doc, plot)
    emit(doc, json_out, _render_measure)


def _render_inject(doc: dict) -> None:
    rep = doc.get("injector", doc)
    console.print(f"injected {human_ns(rep['spin_ns'])} every {human_ns(rep['period_ns'])} ({rep['phase']} phase, "
                  f"SCHED_FIFO {rep['priority']}) for {rep['elapsed_ns'] / 1e9:.1f} s")
    for c in rep["cpus"]:
        lat = c["wake_latency_ns"]
        console.print(f"  CPU {c['cpu']}: {c['activations']} activations, {c['missed']} missed, wake-up latency "
                      f"p50 {human_ns(lat['p50']) if lat else '-'}, max {human_ns(lat['max']) if lat else '-'}")
    if "ok" in doc:
        for c in doc["cpus"]:
            console.print(f"  measured on CPU {c['cpu']}: {c['injected_gaps']} gaps of median "
                          f"{human_ns(c['spin_ns'] or 0)}, {c['rate_per_s']:.2f}/s, period "
                          f"{human_ns(c['period_ns'] or 0)}: {'[green]ok[/]' if c['ok'] else '[bold red]off[/]'}")
        console.print("[green]check passed[/]" if doc["ok"] else "[bold red]check failed[/]")


@app.command("inject")
def inject_cmd(
    cpus: str = typer.Option(None, "--cpus", help="CPUs to disturb (default: all this process may use)."),
    period: str = typer.Option("100ms", "--period", help="One activation per period (bare number: ms)."),
    spin: str = typer.Option("1ms", "--spin", help="Busy time per activation (bare number: ms)."),
    duration: str = typer.Option("10s", "--duration", help="How long; 0 runs until Ctrl-C (bare number: s)."),
    phase: str = typer.Option("sync", "--phase", help="sync: all CPUs at once; random: independent random phases."),
    priority: int = typer.Option(10, "--priority", help="SCHED_FIFO priority 1-99."),
    check: bool = typer.Option(False, "--check", help="Measure the same CPUs meanwhile and compare with the request."),
    threshold: str = typer.Option("5us", "--threshold", help="Gap threshold of the check (bare number: us)."),
    json_out: bool = JSON_OPT,
) -> None:
    """SCHED_FIFO noise injectors: wake every period, spin, sleep (ROS: 1 ms every 100 ms = 1 %)."""
    from coreplane.noise.inject import check as check_injection, inject
    if phase not in ("sync", "random"):
        raise CoreplaneError(f"--phase {phase!r}: sync or random")
    cpu_list = check_cpus(cpus or _default_cpus())
    period_ns = parse_duration(period, "--period", "ms")
    spin_ns = parse_duration(spin, "--spin", "ms")
    duration_ns = 0 if duration.strip() in ("0", "0s") else parse_duration(duration, "--duration", "s")
    if spin_ns >= period_ns:
        raise CoreplaneError(f"--spin {human_ns(spin_ns)} must be shorter than --period {human_ns(period_ns)}")
    if check:
        if not duration_ns:
            raise CoreplaneError("--check needs a --duration above 0")
        with progress.status(f"injecting and measuring for {duration_ns / 1e9:g} s", spinner="dots") \
                if not json_out else nullcontext():
            doc = check_injection(cpu_list, period_ns, spin_ns, phase, priority, duration_ns,
                                  parse_duration(threshold, "--threshold", "us"))
        emit(doc, json_out, _render_inject)
        if not doc["ok"]:
            raise typer.Exit(1)
        return
    if not json_out:
        progress.print(f"injecting on CPUs {format_cpu_list(cpu_list)}"
                       f"{f' for {duration_ns / 1e9:g} s' if duration_ns else ' until Ctrl-C'}")
    emit(inject(cpu_list, period_ns, spin_ns, phase, priority, duration_ns), json_out, _render_inject)


def _render_trial(doc: dict) -> None:
    console.print(", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in doc.items()
                            if not isinstance(v, (list, dict))), highlight=False)
    for c in doc.get("cell_gap_classes", []):
        console.print(f"  cell gaps from {c['source']}: {c['gaps']}, {human_ns(c['lost_ns'])} lost, "
                      f"longest {human_ns(c['max_ns'])}", highlight=False)


@app.command("trial")
def trial_cmd(
    kind: str = typer.Argument(..., help="barrier | neighbour | cache | colour"),
    threads: int = typer.Option(1, "--threads", help="barrier: threads."),
    noise: str = typer.Option("none", "--noise", help="barrier: none | sync | random (ROS 1 ms per 100 ms)."),
    placement: str = typer.Option("default", "--placement", help="barrier: default | pinned | cell."),
    neighbour: str = typer.Option("hog", "--neighbour", help="neighbour: hog | injector | io (two gcc loops and "
                                  "a writer that fsyncs) | none."),
    seconds: float = typer.Option(3.0, "--seconds", help="neighbour: seconds per placement."),
    trace: bool = typer.Option(False, "--trace", help="neighbour: say where the cell's lost time went (a private "
                               "tracefs instance on the compute core; gaps named by what interrupted them)."),
    io_completions: bool = typer.Option(False, "--io-completions/--no-io-completions", help="neighbour: the cell "
                                        "completes block I/O "
                                        "on the submitting CPU (machine-wide rq_affinity=2, given back after)."),
    pin_init: bool = typer.Option(False, "--pin-init/--no-pin-init", help="neighbour: the cell keeps init's "
                                  "threads off the compute core (machine-wide affinity, given back after)."),
    writer_mib: int = typer.Option(8, "--writer-mib", min=1, help="neighbour io: MiB per fsync of the writer."),
    buster: str = typer.Option("off", "--buster", help="cache: on | off."),
    working_set: float = typer.Option(4.0, "--working-set", help="cache: MiB chased by the barrier thread."),
    colours: int = typer.Option(8, "--colours", help="colour: use 1 colour in C."),
    json_out: bool = JSON_OPT,
) -> None:
    """One run of one experiment point (what `coreplane noise experiment` sweeps over)."""
    from coreplane.noise import trials
    runners = {
        "barrier": lambda: trials.barrier(threads, noise, placement),
        "neighbour": lambda: trials.neighbour(neighbour, seconds, trace=trace, io_completions=io_completions,
                                              pin_init=pin_init, writer_mib=writer_mib),
        "cache": lambda: trials.cache(buster, working_set),
        "colour": lambda: trials.colour(colours),
    }
    if kind not in runners:
        raise CoreplaneError(f"trial {kind!r}: choose from {', '.join(runners)}")
    emit(runners[kind](), json_out, _render_trial)


def _render_experiment(doc: dict) -> None:
    console.print(f"[bold]experiment {doc['experiment']}[/]: {doc['title']}")
    table = Table()
    rows = doc["summary"]
    params = [k for k in rows[0] if k not in ("point_id", "metric", "n", "mean", "sd", "median", "min", "max",
                                             "ci_low", "ci_high", "cv", "cv_flag")] if rows else []
    for col in params + ["metric", "n", "median", "min", "max"]:
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(*(str(r[p]) for p in params), r["metric"], str(r["n"]),
                      *(f"{r[k]:.4g}" for k in ("median", "min", "max")))
    console.print(table)
    if "goal" in doc:
        for kind, g in doc["goal"]["neighbours"].items():
            console.print(f"goal ({kind}): cell/default lost = {g['ratio']:.4f} (target <= {doc['goal']['target_ratio']}): "
                          f"{'[green]met[/]' if g['met'] else '[bold red]not met[/]'}")
    if doc.get("figure"):
        console.print(f"figure: {doc['figure']}")
    console.print(f"sweep: {doc['sweep']}")


@app.command("experiment")
def experiment_cmd(
    name: str = typer.Argument(..., help="a | b | c | colour | io"),
    repetitions: int = typer.Option(5, "--repetitions", help="Runs per point."),
    out: Path = typer.Option(None, "--out", help="Sweep directory (default target/experiments/noise-NAME-TIME)."),
    figures: Path = typer.Option(Path("docs/figures"), "--figures", help="Where the figure goes."),
    check_goal: bool = typer.Option(False, "--check-goal", help="b, io: exit 1 when the 1/10 goal is not met."),
    json_out: bool = JSON_OPT,
) -> None:
    """Runs an experiment as a sweep (DSE engine) of `coreplane noise trial`, then draws it."""
    from coreplane.noise.experiments import run
    if repetitions < 1:
        raise CoreplaneError(f"--repetitions {repetitions}: at least 1")
    doc = run(name, repetitions, out, figures, progress=not json_out)
    emit(doc, json_out, _render_experiment)
    if check_goal and not doc.get("goal", {}).get("met", True):
        raise typer.Exit(1)
