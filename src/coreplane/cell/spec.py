"""What a cell is made of (compute and control cores, options) and the checks on it."""

import os
import re
from dataclasses import asdict, dataclass

from coreplane.cell.memory import HUGE_PAGE, check_budget, machine_bytes
from coreplane.core import vocabulary as v
from coreplane.core.cpulist import format_cpu_list, parse_cpu_list
from coreplane.core.errors import CoreplaneError

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")


@dataclass(frozen=True)
class CellSpec:
    """A cell request: `compute` cores run the application alone, `control` cores run its
    delegates and every other movable task of the machine while the cell lives."""

    compute: list[int]
    control: list[int]
    name: str | None = None
    move_tasks: bool = True
    steer_irqs: bool = True
    hugepages: int = 0
    mlock: bool = False
    # Block I/O completes on the CPU that submitted it (rq_affinity=2 on every disk), not on the
    # compute core a device's managed IRQ lands on: machine-wide, so opt-in, given back with the cell.
    io_completions: bool = False
    # init's threads (pid 1 is never moved between groups) kept off the compute cores by their
    # CPU affinity: machine-wide, so opt-in, given back with the cell.
    pin_init: bool = False
    # Bytes each pooled process of the cell may hold (its pool's budget at most this); 0: none.
    memory_budget: int = 0
    # The memory pressure (PSI some avg10, %) from which the pools give freed memory back to the
    # kernel; None: the runtime's default (10).
    memory_give_back: int | None = None

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "CellSpec":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def parse_cores(text: str | list[int], what: str) -> list[int]:
    """A core list from "1", "0-3,8" or a list of ints; a one-line error names `what`."""
    if isinstance(text, (list, tuple)):
        cores = list(text)
    else:
        try:
            cores = parse_cpu_list(text)
        except ValueError:
            raise CoreplaneError(f"{what} {text!r}: not a CPU list such as 1 or 0-3,8") from None
    if not cores:
        raise CoreplaneError(f"{what}: no core given")
    if any(not isinstance(c, int) or c < 0 for c in cores):
        raise CoreplaneError(f"{what} {cores}: cores are non-negative integers")
    if len(set(cores)) != len(cores):
        shown = text if isinstance(text, str) else ",".join(map(str, cores))
        raise CoreplaneError(f"{what} {shown}: a core is listed twice")
    return sorted(cores)


def online_cpus() -> list[int]:
    """CPUs the kernel has online (what a cell may be made of)."""
    with open("/sys/devices/system/cpu/online") as f:
        return parse_cpu_list(f.read())


def validate(spec: CellSpec, online: list[int], taken: dict[str, tuple[list[int], list[int]]]) -> CellSpec:
    """Checks `spec` against the online CPUs and the live cells' (compute, control) cores;
    returns it with sorted core lists. Every failure is one line naming the field."""
    compute = parse_cores(spec.compute, v.COMPUTE_CORES)
    control = parse_cores(spec.control, v.CONTROL_CORES)
    for what, cores in ((v.COMPUTE_CORES, compute), (v.CONTROL_CORES, control)):
        missing = [c for c in cores if c not in online]
        if missing:
            raise CoreplaneError(f"{what} {format_cpu_list(cores)}: core {format_cpu_list(missing)} does not exist "
                                 f"(online: {format_cpu_list(online)})")
    both = sorted(set(compute) & set(control))
    if both:
        raise CoreplaneError(f"{v.COMPUTE_CORES} and {v.CONTROL_CORES} overlap on core {format_cpu_list(both)}")
    if spec.name is not None and not NAME_RE.fullmatch(spec.name):
        raise CoreplaneError(f"--name {spec.name!r}: use 1-40 letters, digits, '-' or '_', starting with a letter or digit")
    if spec.hugepages < 0:
        raise CoreplaneError(f"--hugepages {spec.hugepages}: must be >= 0")
    if spec.hugepages * HUGE_PAGE > machine_bytes():
        raise CoreplaneError(f"--hugepages {spec.hugepages}: {spec.hugepages * HUGE_PAGE / 2**30:.1f} GiB of huge pages, "
                             f"more than this machine's memory ({machine_bytes() / 2**30:.1f} GiB)")
    if spec.memory_budget:
        check_budget(spec.memory_budget)
    if spec.memory_give_back is not None and not 0 <= spec.memory_give_back <= 100:
        raise CoreplaneError(f"--memory-give-back {spec.memory_give_back}: a memory pressure in %, 0 to 100")
    for other, (o_compute, o_control) in taken.items():
        clash = sorted(set(compute + control) & set(o_compute))
        if clash:
            raise CoreplaneError(f"core {format_cpu_list(clash)} is a compute core of live cell {other!r}")
        clash = sorted(set(compute) & set(o_control))
        if clash:
            raise CoreplaneError(f"{v.COMPUTE_CORES} {format_cpu_list(compute)}: core {format_cpu_list(clash)} "
                                 f"is a control core of live cell {other!r}")
    return CellSpec(compute=compute, control=control, name=spec.name, move_tasks=spec.move_tasks,
                    steer_irqs=spec.steer_irqs, hugepages=spec.hugepages, mlock=spec.mlock,
                    io_completions=spec.io_completions, pin_init=spec.pin_init, memory_budget=spec.memory_budget,
                    memory_give_back=spec.memory_give_back)


def default_name(existing: set[str]) -> str:
    """"pid<owner>" or "pid<owner>-<n>" when the owner already has cells."""
    base = f"pid{os.getpid()}"
    name, n = base, 1
    while name in existing:
        n += 1
        name = f"{base}-{n}"
    return name
