"""The `coreplane run` and `coreplane profile` commands."""

import json
import sys
from pathlib import Path

import typer

from rich.console import Console

from coreplane.run.launch import RunOptions, check, run as run_program, temporary_profile

DELEGATE_HELP = "Delegation policy: none | all | mckernel | mos | NAME,NAME,... | @FILE (names per line)."
TIME_EVERY_HELP = ("Profile: time one local call in N on average, after the first 8 of each syscall per thread "
                   "(1: every call); counts are exact, total_ns is scaled from the timed calls.")


def _options(ctx: typer.Context, delegate, local, forward_cost, compute_cores, control_cores, delegates,
             profile, cell, time_every: int, mapping: Path | None = None) -> RunOptions:
    placement = None
    if mapping:
        from coreplane.map.mapfile import cpu_lists
        placement = cpu_lists(mapping)
    return RunOptions(command=list(ctx.args), delegate=delegate, local=[n for n in (local or "").split(",") if n],
                      forward_cost_ns=forward_cost, compute_cores=compute_cores, control_cores=control_cores,
                      delegates=delegates, profile=profile, cell=cell, placement=placement, time_every=time_every)


def run(
    ctx: typer.Context,
    delegate: str = typer.Option("none", "--delegate", help=DELEGATE_HELP),
    local: str = typer.Option(None, "--local", help="Calls kept local whatever the policy (NAME,...)."),
    forward_cost: int = typer.Option(0, "--forward-cost", help="Delay per direction of a delegated call on the "
                                     "control core, ns (round trip: 2x, as 2·f_c in paper 002)."),
    compute_cores: str = typer.Option(None, "--compute-cores", help="Cores for the program, e.g. 1-3."),
    control_cores: str = typer.Option(None, "--control-cores", help="Cores for the delegates, e.g. 0."),
    delegates: int = typer.Option(1, "--delegates", help="Delegate threads to start with (the pool grows "
                                  "when all are blocked)."),
    profile: Path = typer.Option(None, "--profile", help="Write the profile JSON (coreplane-profile/1) here."),
    time_every: int = typer.Option(16, "--time-every", help=TIME_EVERY_HELP),
    cell: bool = typer.Option(None, "--cell/--no-cell", help="Give the compute cores to the program exclusively "
                              "(default: yes when compute cores are given and running as root)."),
    mapping: Path = typer.Option(None, "--map", help="Pin each thread and process where a mapping file "
                                 "(coreplane map --out, format coreplane-map/1) places its clone-tree key."),
    json_out: bool = typer.Option(False, "--json", help="A JSON summary of the run on stderr (stdout is "
                                  "the program's)."),
) -> None:
    """Run PROGRAM with every syscall intercepted: `coreplane run [OPTIONS] -- PROGRAM [ARGS...]`.
    Exits with the program's status (128+N if it died of signal N)."""
    opts = _options(ctx, delegate, local, forward_cost, compute_cores, control_cores, delegates, profile, cell,
                    time_every, mapping)
    resolved = check(opts)
    result = run_program(opts)
    if json_out:
        print(json.dumps({**result.as_dict(), "config": resolved}), file=sys.stderr)
    raise typer.Exit(result.shell_status)


def profile(
    ctx: typer.Context,
    delegate: str = typer.Option("none", "--delegate", help=DELEGATE_HELP),
    local: str = typer.Option(None, "--local", help="Calls kept local whatever the policy (NAME,...)."),
    forward_cost: int = typer.Option(0, "--forward-cost", help="Delay per direction of a delegated call, ns."),
    compute_cores: str = typer.Option(None, "--compute-cores", help="Cores for the program."),
    control_cores: str = typer.Option(None, "--control-cores", help="Cores for the delegates."),
    output: Path = typer.Option(None, "-o", "--output", help="Keep the profile JSON here."),
    time_every: int = typer.Option(16, "--time-every", help=TIME_EVERY_HELP),
    plot: Path = typer.Option(None, "--plot", help="Draw the syscall CDF and counts (paper 002 Fig. 6/12)."),
    json_out: bool = typer.Option(False, "--json", help="The summary as JSON on stdout, after the program's output."),
) -> None:
    """Profile PROGRAM (no delegation by default): a `strace -c`-style table with the system share p.
    `coreplane profile [OPTIONS] -- PROGRAM [ARGS...]`."""
    from coreplane.model.profile import load
    from coreplane.model.summary import plot_syscall_profile, render, summary

    keep = output is not None
    path = output or temporary_profile()
    opts = _options(ctx, delegate, local, forward_cost, compute_cores, control_cores, 1, path, None, time_every)
    check(opts)
    result = run_program(opts)
    try:
        prof = load(path)
    finally:
        if not keep:
            path.unlink(missing_ok=True)
    doc = {**summary(prof), "run": result.as_dict(), "overhead": prof.overhead}
    if plot:
        plot_syscall_profile([prof], plot)
        doc["plot"] = str(plot)
    if json_out:
        print(json.dumps(doc, default=str))
    else:
        render(doc, Console(stderr=True))  # like strace -c: stdout stays the program's
    raise typer.Exit(result.shell_status)
