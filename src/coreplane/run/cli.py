"""The `coreplane run` and `coreplane profile` commands (a plain `run` never gets here:
run/direct.py hands it to coreplane-exec first)."""

import json
import os
import sys
from pathlib import Path

import typer

from coreplane.core import options as o
from coreplane.core.errors import CoreplaneError
from coreplane.run.launch import RunOptions, check, run as run_program, temporary_profile

TIME_EVERY_HELP = ("Profile: time one local call in N on average, after the first 8 of each syscall per thread "
                   "(1: every call); counts are exact, total_ns is scaled from the timed calls.")
MEMORY_HELP = ("Anonymous private memory: linux (the kernel's), pool (served in user space by the runtime from "
               "a pool of --memory-budget, freed memory zeroed on a control core) or pool-demand (the same, its "
               "pages filled by the runtime's userfaultfd handler); docs/architecture.md.")
REWRITE_AT_HELP = ("Rewrite a syscall site for the fast path at its Nth trap (1: its first); until then its calls "
                   "trap (≈ 2 µs each). Default: the runtime's (docs/architecture.md, fast path).")
SLED_HELP = ("Fast path through a sled at address 0 instead of relocated sites (the default, page 0 unmapped): "
             "a NULL call then enters the runtime, and without protection keys page 0 reads as sled bytes.")


def _options(ctx: typer.Context, delegate, local, forward_cost, compute_cores, control_cores, delegate_threads,
             profile, cell, time_every: int, null_page_sled: bool, vdso: str, mapping: Path | None = None,
             online_map: str | None = None, rewrite_at: int | None = None) -> RunOptions:
    placement, command = None, list(ctx.args)
    if mapping:
        from coreplane.map.mapfile import cpu_lists, with_threads
        placement = cpu_lists(mapping)
        command = with_threads(mapping, command)  # {threads}: the count the graph's partition proposes
    return RunOptions(command=command, delegate=delegate, local=[n for n in (local or "").split(",") if n],
                      forward_cost_ns=forward_cost, compute_cores=compute_cores, control_cores=control_cores,
                      delegate_threads=delegate_threads, profile=profile, cell=cell, placement=placement,
                      time_every=time_every, null_page_sled=null_page_sled, vdso=vdso, online_map=online_map,
                      rewrite_at=rewrite_at)


def _check_json_out(json_out: Path | None) -> None:
    """Rejects a --json-out that could not be written before the program runs: written after its
    end, the run's document would otherwise be lost with the run."""
    if json_out is None:
        return
    folder = json_out.parent
    problem = ("is a directory" if json_out.is_dir() else f"no directory {folder}" if not folder.is_dir()
               else f"cannot write in {folder}" if not os.access(folder, os.W_OK | os.X_OK) else None)
    if problem:
        raise CoreplaneError(f"--json-out {json_out}: {problem}")


def _emit(doc: dict, json_flag: bool, json_out: Path | None) -> None:
    """The run's JSON document: last on stderr (--json; stdout is the program's) and/or in a file."""
    text = json.dumps(doc, default=str)
    if json_out:
        json_out.write_text(text + "\n")
    if json_flag:
        print(text, file=sys.stderr)


def run(
    ctx: typer.Context,
    delegate: str = o.delegate(),
    local: str = typer.Option(None, "--local", metavar="NAME,...", help="Calls kept local whatever the policy."),
    forward_cost: int = o.forward_cost(),
    compute_cores: str = o.compute_cores(help="Compute cores for the program, e.g. 1-3."),
    control_cores: str = o.control_cores(help="Control cores for the delegates, e.g. 0."),
    delegate_threads: int = o.delegate_threads(),
    profile: Path = typer.Option(None, "--profile", metavar="FILE", help="Write the profile JSON "
                                 "(coreplane-profile/1) here."),
    time_every: int = typer.Option(16, "--time-every", metavar="N", min=1, help=TIME_EVERY_HELP),
    null_page_sled: bool = typer.Option(False, "--null-page-sled", help=SLED_HELP),
    rewrite_at: int = typer.Option(None, "--rewrite-at", metavar="N", min=1, max=127, help=REWRITE_AT_HELP),
    vdso: str = o.vdso(),
    memory: str = typer.Option("linux", "--memory", metavar="linux|pool|pool-demand", help=MEMORY_HELP),
    memory_budget: str = typer.Option("1G", "--memory-budget", metavar="SIZE", help="The memory pool's size "
                                      "(K, M, G); an mmap beyond it fails with ENOMEM, as the pool does not grow."),
    scrubber_priority: str = typer.Option("normal", "--scrubber-priority", metavar="normal|fifo", help="The pool's "
                                          "scrubber as an ordinary task on the control cores, or under SCHED_FIFO "
                                          "priority 1, ahead of ordinary tasks there (needs CAP_SYS_NICE)."),
    memory_grow: str = typer.Option("0", "--memory-grow", metavar="SIZE", help="How much the run's pools may "
                                    "grow beyond --memory-budget altogether, granted by the launcher as each "
                                    "pool reaches its budget (0: never)."),
    cell: bool = typer.Option(None, "--cell/--no-cell", help="Give the compute cores to the program exclusively "
                              "(default: yes when compute cores are given and running as root)."),
    mapping: Path = typer.Option(None, "--map", metavar="FILE", help="Pin each thread and process where a mapping "
                                 "file (coreplane map --out, format coreplane-map/1) places its clone-tree key; "
                                 "{threads} in the program's arguments becomes the thread count it proposes."),
    online_map: str = typer.Option(None, "--online-map", metavar="SPEC", help="Place each task as it appears "
                                   "(fork, thread, exec) by the run-time greedy on this topology (mesh:XxY, torus:XxY, "
                                   "tree:A,B,...; core i = the i-th allowed CPU, modulo), next to the tasks it shares "
                                   "pipes or sockets with; needs CAP_NET_ADMIN; not with --map or delegation."),
    json_flag: bool = typer.Option(False, "--json", help="The run's JSON summary as the last line of stderr, "
                                   "after the program's end (stdout is the program's)."),
    json_out: Path = o.json_out(),
    mcp: bool = typer.Option(False, "--mcp", help="Make the program a many-core process of the running arbiter "
                             "(`coreplane arbiter`): its cores grow and shrink at run time."),
    provision: int = typer.Option(0, "--provision", metavar="N", min=0, help="With --mcp: cores provisioned "
                                  "(guaranteed) to it; 0 = best effort, borrowing idle cores."),
    max_vcores: int = typer.Option(None, "--max", metavar="M", min=0, help="With --mcp: at most M vcores."),
    arbiter_state_dir: Path = typer.Option(Path("/run/coreplane"), "--arbiter-state-dir", metavar="DIR",
                                           help="With --mcp: where the arbiter's socket is."),
) -> None:
    """Run PROGRAM with every syscall intercepted: `coreplane run [OPTIONS] -- PROGRAM [ARGS...]`.
    Ends as the program did: its exit status, or death by the same signal (a shell shows 128+N)."""
    opts = _options(ctx, delegate, local, forward_cost, compute_cores, control_cores, delegate_threads, profile,
                    cell, time_every, null_page_sled, vdso, mapping, online_map, rewrite_at)
    opts.memory, opts.memory_budget, opts.scrubber_priority = memory, memory_budget, scrubber_priority
    opts.memory_grow = memory_grow
    resolved = check(opts)
    _check_json_out(json_out)
    if mcp:
        from coreplane.arbiter.mcp import become_mcp
        # With delegates (control cores in the layout) the MCP's cpuset keeps the control cores.
        resolved["mcp"] = become_mcp(provision, max_vcores, arbiter_state_dir,
                                     delegates=bool(resolved.get("control_cores")))
    result = run_program(opts)
    _emit({**result.as_dict(), "config": resolved}, json_flag, json_out)
    result.end_as_program()


def profile(
    ctx: typer.Context,
    delegate: str = o.delegate(),
    local: str = typer.Option(None, "--local", metavar="NAME,...", help="Calls kept local whatever the policy."),
    forward_cost: int = o.forward_cost(),
    compute_cores: str = o.compute_cores(help="Compute cores for the program."),
    control_cores: str = o.control_cores(help="Control cores for the delegates."),
    out: Path = typer.Option(None, "--out", "-o", metavar="FILE", help="Keep the profile JSON here."),
    time_every: int = typer.Option(16, "--time-every", metavar="N", min=1, help=TIME_EVERY_HELP),
    null_page_sled: bool = typer.Option(False, "--null-page-sled", help=SLED_HELP),
    rewrite_at: int = typer.Option(None, "--rewrite-at", metavar="N", min=1, max=127, help=REWRITE_AT_HELP),
    vdso: str = o.vdso(),
    plot: Path = typer.Option(None, "--plot", metavar="FILE", help="Draw the syscall CDF and counts "
                              "(paper 002 Fig. 6/12)."),
    json_flag: bool = typer.Option(False, "--json", help="The summary as JSON, the last line of stderr "
                                   "instead of the table (stdout is the program's)."),
    json_out: Path = o.json_out(),
) -> None:
    """Profile PROGRAM (no delegation by default): a `strace -c`-style table with the system share p.
    `coreplane profile [OPTIONS] -- PROGRAM [ARGS...]`."""
    from rich.console import Console

    from coreplane.profile.io import load
    from coreplane.profile.summary import render, summary

    path = out or temporary_profile()
    try:
        opts = _options(ctx, delegate, local, forward_cost, compute_cores, control_cores, 1, path, None, time_every,
                        null_page_sled, vdso, rewrite_at=rewrite_at)
        opts.count_tlb_flushes = True   # what `coreplane project` charges once a delegate polls
        check(opts)
        _check_json_out(json_out)
        result = run_program(opts)
        prof = load(path)
    finally:
        # The temporary profile goes whatever happened: bad options left one in /tmp per call.
        if out is None:
            path.unlink(missing_ok=True)
    doc = {**summary(prof), "run": result.as_dict(), "overhead": prof.overhead}
    if plot:
        from coreplane.profile.figures import plot_syscall_profile
        doc["plot"] = str(plot_syscall_profile([prof], plot))
    _emit(doc, json_flag, json_out)
    if not json_flag:
        render(doc, Console(stderr=True))  # like strace -c: stdout stays the program's
    result.end_as_program()
