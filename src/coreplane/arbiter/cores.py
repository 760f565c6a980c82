"""Emptying the arbiter's compute cores of every other process for an experiment: a cell over
them (other processes moved to the control cores, IRQs steered, init's threads kept off) that
the arbiter's many-core processes, in cpuset groups of their own, are not moved out of."""

from contextlib import contextmanager

from coreplane.cell import Cell, CellSpec
from coreplane.core.cpulist import parse_cpu_list


@contextmanager
def empty_compute_cores(status: dict):
    """While the block runs, only the arbiter's MCPs (and the kernel's per-CPU threads) run on
    its compute cores, as its `status` names them with its control cores; yields what the cell
    did. Machine-wide, like any cell, and given back when the block ends."""
    spec = CellSpec(compute=parse_cpu_list(status["compute_cores"]), control=parse_cpu_list(status["control_cores"]),
                    pin_init=True)
    with Cell.create(spec) as cell:
        machine = cell.record["machine"]
        yield {"compute": cell.compute, "control": cell.control,
               "processes_moved": machine.get("tasks", {}).get("moved"),
               "irqs_steered": machine.get("steering", {}).get("irqs_steered")}
