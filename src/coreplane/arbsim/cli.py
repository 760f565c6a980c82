"""`coreplane arbsim`: the SimPy model of the arbiter run over core counts, as a table, JSON and a figure (all simulated)."""

from pathlib import Path

import typer

from coreplane.core.errors import CoreplaneError
from coreplane.core.options import json_flag
from coreplane.core.output import console, emit, human_ns


def _cores(text: str) -> list[int]:
    try:
        cores = [int(part) for part in text.split(",")]
    except ValueError:
        raise CoreplaneError(f"--cores {text!r}: expected a comma-separated list of core counts, e.g. 1,16,32,64")
    if any(n < 1 or n > 4096 for n in cores):
        raise CoreplaneError(f"--cores {text!r}: each core count must be in 1..4096")
    return cores


def arbsim(
    cores: str = typer.Option("1,16,32,64", "--cores", metavar="LIST", help="Compute core counts to simulate."),
    trials: int = typer.Option(1000, "--trials", min=1, metavar="N", help="Simulated trials per operation and core count."),
    costs: Path = typer.Option(None, "--costs", metavar="FILE",
                               help='JSON {"cost": [lo_ns, hi_ns]} replacing measured defaults.'),
    seed: int = typer.Option(1, "--seed", help="Seed of the cost draws."),
    batch_cpusets: bool = typer.Option(False, "--batch-cpusets",
                                       help="What if: rewrite each cpuset once per request, not once per vcore "
                                            "as the arbiter does today."),
    figure: Path = typer.Option(None, "--figure", metavar="PNG", help="Also draw p50 against cores here."),
    check: Path = typer.Option(None, "--check", metavar="JSON",
                               help="The real arbiter's benchmark (coreplane arbiter tables --json) to "
                                    "compare the model with at this machine's compute cores."),
    machine_cores: int = typer.Option(1, "--machine-cores", min=1, metavar="N",
                                      help="Compute cores of the machine --check was measured on."),
    as_json: bool = json_flag(),
):
    """SIMULATED ROS Tables 1–2 at many compute cores: a SimPy model of the arbiter, from costs measured here.

    Grant (warm, cold, max), preempt, warn-preempt and kill of a many-core process, each timed end to end
    over --trials draws of the measured costs; min, p50 and p99 beside ROS's Nehalem-EX figures."""
    from coreplane.arbsim import costs as cost_table
    from coreplane.arbsim.model import table

    used = cost_table.load(costs)
    rows = table(_cores(cores), used, trials, seed, batch_cpusets)
    result = {"simulated": True, "batch_cpusets": batch_cpusets, "costs": {k: vars(c) for k, c in used.items()},
              "rows": rows}
    if figure:
        from coreplane.arbsim.plot import draw
        result["figure"] = str(draw(rows, figure))
    if check:
        from coreplane.arbsim.check import compare
        result["check"] = compare(check, machine_cores, used, trials, seed)

    def render(data):
        from rich.table import Table
        t = Table(title="SIMULATED arbiter (SimPy; costs measured on these machines)")
        for col in ("operation", "cores", "min", "p50", "p99", "ROS Nehalem-EX (32 cores)"):
            t.add_column(col)
        for r in data["rows"]:
            t.add_row(r["operation"], str(r["cores"]), human_ns(r["min_ns"]), human_ns(r["p50_ns"]),
                      human_ns(r["p99_ns"]), f"{r['ros_nehalem_us']} µs")
        console.print(t)
        for c in data.get("check", []):
            console.print(f"check {c['operation']} at {c['cores']} core(s): simulated p50 {c['simulated_p50_us']} µs, "
                          f"measured {c['measured_p50_us']} µs ({c['measured_as']}): "
                          f"ratio {c['simulated_over_measured']}")
        if "figure" in data:
            console.print(f"figure: {data['figure']}")
    emit(result, as_json, render)
