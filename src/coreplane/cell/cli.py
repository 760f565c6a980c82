"""The `coreplane cell` commands: create, status, list, destroy, exec."""

import os
import time

import typer
from rich.table import Table

from coreplane.cell.cell import Cell
from coreplane.cell.memory import CELL_BUDGET_VARIABLE, CELL_GIVE_BACK_VARIABLE, parse_size
from coreplane.cell.spec import CellSpec, parse_cores
from coreplane.core import options as o, vocabulary as v
from coreplane.core.cpulist import format_cpu_list
from coreplane.core.errors import CoreplaneError
from coreplane.core.output import console, emit

app = typer.Typer(help="Cells: exclusive compute cores, the machine's other work on control cores.",
                  no_args_is_help=True)
# coreplane-exec's variable for a cell made with --mlock (crates/exec/src/main.rs).
CELL_MLOCK_VARIABLE = "COREPLANE_CELL_MLOCK"
STYLE = {"isolated": "green", "partial": "yellow", "not isolated": "bold red", "info": "cyan"}
JSON_OPT = typer.Option(False, "--json", help="One JSON document on stdout.")


def _render_created(doc: dict) -> None:
    m = doc.get("machine", {})
    tasks = m.get("tasks", {})
    console.print(f"cell [bold]{doc['name']}[/]: compute {format_cpu_list(doc['compute'])}, "
                  f"control {format_cpu_list(doc['control'])} ({doc['cgroup']['path']})")
    if tasks:
        console.print(f"  {tasks['moved']} processes moved to the control cores, {len(tasks['refused'])} refused")
    if "steering" in m:
        s = m["steering"]
        console.print(f"  {s['irqs_steered']} IRQs steered, {len(s['irqs_refused'])} refused; "
                      f"workqueue cpumask: {s.get('workqueue_cpumask')}")
    owner = doc.get("owner")
    console.print(f"  owner pid {owner['pid']} (watchdog {doc['watchdog_pid']})" if owner
                  else f"  no owner: it lives until `coreplane cell destroy {doc['name']}`")


def _render_status(doc: dict) -> None:
    console.print(f"[bold]cell {doc['name']}[/]: compute {format_cpu_list(doc['compute'])}, control "
                  f"{format_cpu_list(doc['control'])}, processes {doc['processes'] or 'none'}")
    for check in doc["checks"]:
        console.print(f"[{STYLE[check['state']]}]{check['state']:>12}[/]  [bold]{check['item']}[/]: "
                      f"{check['detail']}", highlight=False)
        for line in check["evidence"]:
            console.print(f"{'':14}[dim]{line}[/]", highlight=False)


def _render_list(doc: dict) -> None:
    table = Table(title="cells")
    for col in ("name", "compute", "control", "owner", "processes", "age", "phase"):
        table.add_column(col)
    for r in doc["cells"]:
        owner = r.get("owner")
        table.add_row(r["name"], format_cpu_list(r["compute"]), format_cpu_list(r["control"]),
                      str(owner["pid"]) if owner else "-", str(len(r.get("processes", []))),
                      f"{time.time() - r['created']:.0f} s", r.get("phase", "?"))
    console.print(table)
    if doc["reaped"]:
        console.print(f"reaped stale cells (owner dead): {', '.join(doc['reaped'])}")


@app.command()
def create(
    compute: str = o.compute_cores(..., help="Compute cores, e.g. 1 or 2-7."),
    control: str = o.control_cores(..., help="Control cores (the machine's other work), e.g. 0."),
    name: str = typer.Option(None, "--name", help="Cell name (default pid<owner>)."),
    owner: int = typer.Option(None, "--owner", help="Destroy the cell when this process dies (a watchdog waits for it)."),
    pids: list[int] = typer.Option([], "--pid", help="Put this process into the cell (repeatable)."),
    move_tasks: bool = typer.Option(True, "--move-tasks/--no-move-tasks", help="Move the machine's other processes to the control cores."),
    steer_irqs: bool = typer.Option(True, "--steer-irqs/--no-steer-irqs", help="Steer IRQs and unbound workqueues off the compute cores."),
    hugepages: int = typer.Option(0, "--hugepages", help="2 MiB huge pages to add to the pool for the cell."),
    io_completions: bool = typer.Option(False, "--io-completions", help="Complete block I/O on the CPU that "
                                        "submitted it (rq_affinity=2 on every disk), not on a compute core that a "
                                        "disk's managed IRQ lands on; machine-wide, given back with the last cell."),
    pin_init: bool = typer.Option(False, "--pin-init", help="Keep init's threads (pid 1, never moved) off the "
                                  "compute cores by their CPU affinity; machine-wide, given back with the last cell."),
    mlock: bool = typer.Option(False, "--mlock", help="Lift the memory-lock limit of the cell's processes; "
                               "programs run by `cell exec` under coreplane's runtime have their memory "
                               "locked (mlockall)."),
    memory_budget: str = typer.Option(None, "--memory-budget", metavar="SIZE", help="Memory each pooled process "
                                      "of the cell may hold (heap and mappings), e.g. 512M: `coreplane run --memory "
                                      "pool` in the cell takes the smaller of its --memory-budget and this."),
    memory_give_back: int = typer.Option(None, "--memory-give-back", metavar="PCT", help="The memory pressure "
                                         "(/proc/pressure/memory's some avg10, %) from which the pools of the cell's "
                                         "processes give freed memory back to the kernel (default 10; 0: always)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Creates a cell; without --owner it lives until `coreplane cell destroy`."""
    budget = parse_size(memory_budget, "--memory-budget") if memory_budget is not None else 0
    spec = CellSpec(compute=parse_cores(compute, v.COMPUTE_CORES), control=parse_cores(control, v.CONTROL_CORES),
                    name=name, move_tasks=move_tasks, steer_irqs=steer_irqs, hugepages=hugepages, mlock=mlock,
                    io_completions=io_completions, pin_init=pin_init, memory_budget=budget,
                    memory_give_back=memory_give_back)
    cell = Cell.create(spec, watchdog=owner is not None, owner=owner)
    for pid in pids:
        cell.add_process(pid)
    emit(cell.record, json_out, _render_created)


@app.command()
def status(name: str = typer.Argument(..., help="Cell name."),
           sample: float = typer.Option(0.2, "--sample", help="Seconds of interrupt sampling on the compute cores."),
           json_out: bool = JSON_OPT) -> None:
    """What the cell isolates and what it cannot (tick, kernel threads, IRQs...), with evidence."""
    if not 0 < sample <= 60:
        raise CoreplaneError(f"--sample {sample}: between 0 and 60 seconds")
    emit(Cell.load(name).status(sample), json_out, _render_status)


@app.command("list")
def list_cells(json_out: bool = JSON_OPT) -> None:
    """Live cells; cells whose owner has died are reaped on the way."""
    cells, reaped = Cell.live()
    emit({"cells": cells, "reaped": reaped}, json_out, _render_list)


@app.command()
def destroy(name: str = typer.Argument(None, help="Cell name."),
            all_cells: bool = typer.Option(False, "--all", help="Destroy every cell."),
            json_out: bool = JSON_OPT) -> None:
    """Moves the cell's processes out, removes its cgroups and gives the machine back."""
    if bool(name) == all_cells:
        raise CoreplaneError("give a cell name or --all")
    names = [r["name"] for r in Cell.live()[0]] if all_cells else [name]
    done = {n: Cell.load(n).destroy() for n in names}
    emit({"destroyed": done}, json_out,
         lambda d: console.print(f"destroyed: {', '.join(d['destroyed']) or 'nothing'}"))


@app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def exec_in(ctx: typer.Context, name: str = typer.Argument(..., help="Cell name.")) -> None:
    """Runs a command inside the cell: `coreplane cell exec NAME -- taskset -c 1 ./app`."""
    if not ctx.args:
        raise CoreplaneError("nothing to run: coreplane cell exec NAME -- COMMAND [ARGS]")
    cell = Cell.load(name)
    cell.add_process(os.getpid())
    if cell.record["spec"]["mlock"]:
        os.environ[CELL_MLOCK_VARIABLE] = "1"   # coreplane-exec's runtime then calls mlockall
    if cell.record["spec"].get("memory_budget"):
        os.environ[CELL_BUDGET_VARIABLE] = str(cell.record["spec"]["memory_budget"])
    if cell.record["spec"].get("memory_give_back") is not None:
        os.environ[CELL_GIVE_BACK_VARIABLE] = str(cell.record["spec"]["memory_give_back"])
    try:
        os.execvp(ctx.args[0], ctx.args)
    except OSError as exc:
        raise CoreplaneError(f"{ctx.args[0]}: {exc.strerror}") from None
