"""The `coreplane arbiter` commands: the daemon (foreground or --daemon) and its status."""

import os
import time
from pathlib import Path

import typer
from rich.live import Live
from rich.table import Table

from coreplane.arbiter.client import DEFAULT_STATE_DIR, Client, Daemon, socket_path
from coreplane.core.output import console, emit

app = typer.Typer(help="The core arbiter of many-core processes: provisions, allocations, loans, warn-then-preempt.",
                  invoke_without_command=True)
JSON_OPT = typer.Option(False, "--json", help="One JSON document on stdout.")
REPETITIONS_OPT = typer.Option(2, "--repetitions", min=1, help="Runs of each configuration, interleaved.")
EMPTY_OPT = typer.Option(False, "--empty-cores", help="Keep every other process off the compute cores meanwhile "
                         "(a cell over them, with --pin-init: machine-wide while it lives, given back after).")
STATE_OPT = typer.Option(DEFAULT_STATE_DIR, "--state-dir", metavar="DIR", help="Where the arbiter's socket lives.")


@app.callback()
def arbiter(
    ctx: typer.Context,
    state_dir: Path = STATE_OPT,
    compute_cores: str = typer.Option(None, "--compute-cores", metavar="LIST",
                                      help="Compute cores to arbitrate (default: every CPU but the first)."),
    trust_uid: str = typer.Option(None, "--trust-uid", metavar="UID,...", help="Users besides root who may provision."),
    warn_us: int = typer.Option(1000, "--warn-us", min=0, help="Warning time before a revoked vcore is preempted, µs."),
    fifo: int = typer.Option(None, "--fifo", min=0, metavar="PRIO",
                             help="The arbiter's SCHED_FIFO priority (0: ordinary scheduling; default 10 where allowed)."),
    gang_stop: bool = typer.Option(False, "--gang-stop", help="Freeze a many-core process that holds no compute core "
                                   "(cgroup freezer) until one is granted to it, instead of letting it run on the "
                                   "control cores (MCPs made with gang_stop false are exempt)."),
    daemon: bool = typer.Option(False, "--daemon", help="Run in the background; print its pid."),
    json_flag: bool = JSON_OPT,
) -> None:
    """Runs the arbiter (in the foreground unless --daemon); `coreplane arbiter status` shows it."""
    if ctx.invoked_subcommand:
        return
    options = ["--warn-us", str(warn_us)]
    options += ["--compute-cores", compute_cores] if compute_cores else []
    options += ["--trust-uid", trust_uid] if trust_uid else []
    options += ["--fifo", str(fifo)] if fifo is not None else []
    options += ["--gang-stop"] if gang_stop else []
    daemon_ = Daemon(state_dir, options)
    if not daemon:
        os.execv(daemon_.argv[0], daemon_.argv)
    daemon_.start(detach=True)
    emit({"pid": daemon_.proc.pid, "socket": str(daemon_.socket)}, json_flag,
         lambda d: console.print(f"arbiter pid {d['pid']}, socket {d['socket']}"))


def _table(doc: dict) -> Table:
    c = doc["counters"]
    table = Table(title=f"arbiter: compute cores {doc['compute_cores']} (control {doc['control_cores']}), "
                        f"{doc['provisioned']} provisioned, {doc['free']} free, "
                        f"{doc['pending_preemptions']} preemptions pending")
    for col in ("MCP pid", "uid", "provision", "max", "held", "on loan", "owed", "vcores (vcore:cpu)", "dropped", "gang"):
        table.add_column(col)
    for m in doc["mcps"]:
        vcores = " ".join(f"{v['vcore']}:{v['cpu']}{'!' if v['preempt_deadline_ns'] else ''}" for v in m["vcores"])
        table.add_row(str(m["pid"]), str(m["uid"]), str(m["provision"]), str(m["max"]), str(m["held"]),
                      str(m["on_loan"]), str(m["owed"]), vcores or "-", str(m["dropped_notifications"]),
                      "stopped" if m["stopped"] else "running" if m["gang_stop"] else "-")
    table.caption = ("grants warm/cold {grants_warm}/{grants_cold}, yields {yields}, warned {warned}, yielded in time "
                     "{yielded_in_time}, preempted {preempted}, refused provisions {refused_provisions}, "
                     "MCP exits {exits}, gang stops/resumes {gang_stops}/{gang_resumes}; ! = preemption pending").format(**c)
    return table


@app.command()
def tables(trials: int = typer.Option(1000, "--trials", min=1, help="Trials of each short operation (a tenth, "
                                      "at least 50, of the slow ones)."),
           fifo: int = typer.Option(None, "--fifo", min=0, metavar="PRIO", help="The private arbiter's SCHED_FIFO "
                                    "priority (0: ordinary scheduling; default: its own)."),
           guest_cpus: int = typer.Option(None, "--guest-cpus", min=3, metavar="N", help="Instead: the rows that need "
                                          "several compute cores (get/preempt max, preempt-and-get max) in a QEMU/TCG "
                                          "guest of N vCPUs (N-1 compute cores); emulated, not comparable to hardware "
                                          "times (needs qemu-system-x86_64 and the kernel `make arbiter-cgroup2` fetches)."),
           json_flag: bool = JSON_OPT) -> None:
    """ROS Tables 1-2: min/p50/p99 latency of creating an SCP and an MCP, getting, yielding,
    preempting and warn-preempting vcores, and reclaiming a killed MCP, on a private arbiter."""
    if guest_cpus is not None:
        return _guest_tables(guest_cpus, trials, json_flag)
    from coreplane.arbiter import bench
    from coreplane.arbiter.fig6 import machine_line
    doc = bench.document(trials, fifo)
    table = Table(title=f"ROS Tables 1-2 ({machine_line(doc)}, arbiter SCHED_FIFO {fifo if fifo is not None else 'default'})")
    for col in ("operation", "n", "min µs", "p50 µs", "p99 µs", "goal"):
        table.add_column(col, justify="right")
    for name, s in doc["ops"].items():
        g = doc["goals"].get(name)
        table.add_row(name, str(s["n"]), f"{s['min_us']:.1f}", f"{s['p50_us']:.1f}", f"{s['p99_us']:.1f}",
                      f"{g['statistic']} ≤ {g['goal_us']:g}: {'met' if g['met'] else 'MISSED'}" if g else "")
        for part, p in s.get("parts", {}).items():   # the interval taken apart (bench.Parts)
            table.add_row(f"  ↳ {part}", str(p["n"]), f"{p['min_us']:.1f}", f"{p['p50_us']:.1f}", f"{p['p99_us']:.1f}", "")
    emit(doc, json_flag, lambda d: console.print(table))


def _guest_tables(cpus: int, trials: int, json_flag: bool) -> None:
    from coreplane.arbiter import guest
    doc = guest.max_tables(cpus, trials)
    table = Table(title=f"ROS Tables 1-2, max rows: {doc['compute_cores']} compute cores, {doc['label']}")
    for col in ("operation", "cores", "n", "min µs", "p50 µs", "p99 µs"):
        table.add_column(col, justify="right")
    for name, s in doc["ops"].items():
        table.add_row(name, str(s["cores"]), str(s["n"]), f"{s['min_us']:.1f}", f"{s['p50_us']:.1f}", f"{s['p99_us']:.1f}")

    def render(d):
        console.print(table)
        console.print("shape (ratios of p50): " + ", ".join(f"{k} {v:g}" for k, v in d["shape"].items()))
    emit(doc, json_flag, render)


@app.command()
def fig6(frames: int = typer.Option(150, "--frames", min=2, help="Frames per run."),
         fps: float = typer.Option(15.0, "--fps", min=0.1, help="Frame arrival rate."),
         repetitions: int = REPETITIONS_OPT,
         warn_us: int = typer.Option(1000, "--warn-us", min=0, help="Warning before a loaned core is taken back, µs."),
         figure: Path = typer.Option(None, "--figure", metavar="PNG", help="Draw the figure here."),
         empty_cores: bool = EMPTY_OPT,
         json_flag: bool = JSON_OPT) -> None:
    """ROS Fig. 6: a frame-driven encoder provisioned every compute core, alone and beside a
    best-effort borrower (cooperating, and one that never yields), on a private arbiter."""
    from coreplane.arbiter import fig6 as experiment
    doc = experiment.measure(frames=frames, fps=fps, repetitions=repetitions, warn_us=warn_us, empty_cores=empty_cores)
    if figure:
        experiment.plot(doc, figure)
    emit(doc, json_flag, lambda d: console.print(_fig6_table(d)))


def _fig6_table(doc: dict) -> Table:
    from coreplane.arbiter.fig6 import machine_line
    table = Table(title=f"Fig. 6 ({machine_line(doc)}, {doc['warn_us']} µs warning): per-frame time "
                        f"within {doc['goals']['frame_ratio_max']}x of alone, borrower ≥ {doc['goals']['borrower_share_min']} "
                        "of the idle core time")
    for col in ("borrower", "runs", "frame p50 ms", "÷ alone", "get cores p50 ms", "idle core held", "idle core ran", "goal"):
        table.add_column(col)
    for name, c in doc["configs"].items():
        table.add_row(name, str(c["runs"]), str(c["frame_p50_ms"]), str(c["frame_ratio"]), str(c.get("get_cores_p50_ms", "-")),
                      str(c.get("borrower_held_share", "-")), str(c.get("borrower_share", "-")),
                      "-" if "met" not in c else ("met" if c["met"] else "missed"))
    return table


@app.command()
def pool(tasks: int = typer.Option(1000, "--tasks", min=1, help="Tasks of the job (~1 ms each)."),
         on_ms: float = typer.Option(50.0, "--on-ms", min=1, help="The owner holds its cores this long ..."),
         off_ms: float = typer.Option(50.0, "--off-ms", min=1, help="... then lends them this long."),
         repetitions: int = REPETITIONS_OPT,
         empty_cores: bool = EMPTY_OPT,
         gang_stop: bool = typer.Option(False, "--gang-stop/--no-gang-stop", help="The arbiter freezes the fixed programs while "
                                        "they hold no core (see `coreplane arbiter --gang-stop`)."),
         json_flag: bool = JSON_OPT) -> None:
    """The adaptive work-stealing pool over the vcore API against fixed thread counts, while the
    cores' owner takes them back and lends them again."""
    from coreplane.arbiter import pool as experiment
    from coreplane.arbiter.fig6 import machine_line
    doc = experiment.measure(tasks=tasks, on_ms=on_ms, off_ms=off_ms, repetitions=repetitions, empty_cores=empty_cores,
                             gang_stop=gang_stop)
    table = Table(title=f"{tasks} tasks, the owner holding the cores {on_ms} ms of every {on_ms + off_ms} ms"
                        f"{', gang stop' if gang_stop else ''} "
                        f"({machine_line(doc)})")
    for col in ("program", "wall time, median (s)", "tasks ended on a control core"):
        table.add_column(col)
    for name, c in doc["configs"].items():
        table.add_row(f"{name} ({c['threads']} threads)" if c["threads"] else name, str(c["wall_s_median"]),
                      str(c["share_on_control_cores"]))
    emit(doc, json_flag, lambda d: console.print(table))


@app.command()
def experiment(name: str = typer.Argument(..., help="table1 | fig6 | pool"),
               repetitions: int = typer.Option(3, "--repetitions", min=1, help="Runs per point."),
               short: bool = typer.Option(False, "--short", help="Fewer trials, frames and tasks per run (make bench)."),
               out: Path = typer.Option(None, "--out", metavar="DIR",
                                        help="Sweep directory (default target/experiments/arbiter-NAME-TIME)."),
               resume: bool = typer.Option(False, "--resume", help="Continue the sweep in --out (after a kill): "
                                           "runs stored as done are kept, the others run again."),
               figures: Path = typer.Option(Path("docs/figures"), "--figures", metavar="DIR", help="Where the figure goes."),
               json_flag: bool = JSON_OPT) -> None:
    """Runs an experiment of issue 14 as a sweep (DSE engine, SQLite store, resumable) of
    `coreplane arbiter tables|fig6|pool`, checks it against its goals and draws its figure."""
    from coreplane.arbexp.experiments import run
    doc = run(name, repetitions, out, figures, short=short, resume=resume, progress=not json_flag)
    emit(doc, json_flag, _render_experiment)


def _render_experiment(doc: dict) -> None:
    console.print(f"[bold]experiment {doc['experiment']}[/]: {doc['title']}")
    table = Table()
    rows = doc["summary"]
    stats = ("point_id", "metric", "n", "mean", "sd", "median", "min", "max", "ci_low", "ci_high", "cv", "cv_flag")
    params = [k for k in rows[0] if k not in stats]
    for col in params + ["metric", "n", "median", "min", "max"]:
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(*(str(r[p]) for p in params), r["metric"], str(r["n"]), *(f"{r[k]:.4g}" for k in ("median", "min", "max")))
    console.print(table)
    console.print_json(data=doc["goals"])
    if doc.get("figure"):
        console.print(f"figure: {doc['figure']}")
    console.print(f"sweep: {doc['sweep']}")


@app.command()
def status(state_dir: Path = STATE_OPT, json_flag: bool = JSON_OPT,
           watch: float = typer.Option(None, "--watch", metavar="SECONDS", help="Redraw every SECONDS until Ctrl-C.")) -> None:
    """Provisions, allocations, loans and pending preemptions of the running arbiter."""
    with Client(socket_path(state_dir)) as client:
        if watch is None:
            emit(client.checked("status"), json_flag, lambda d: console.print(_table(d)))
            return
        with Live(_table(client.checked("status")), console=console) as live:
            try:
                while True:
                    time.sleep(watch)
                    live.update(_table(client.checked("status")))
            except KeyboardInterrupt:
                pass
