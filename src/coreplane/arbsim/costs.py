"""The costs the arbiter model is built from: each a range measured on these machines (reference table), overridable from a JSON file."""

from dataclasses import dataclass, replace
from pathlib import Path

from coreplane.core.documents import read_json
from coreplane.core.errors import CoreplaneError


@dataclass(frozen=True)
class Cost:
    """One measured cost as the range it was seen in, ns; a trial draws uniformly inside it."""

    lo: float
    hi: float
    source: str


# Measured on dev-kvm-epyc2-class guests (/work/shared/reference/measured-costs.md, medians per probe).
# Where the arbiter's mechanism needs a cost nobody measured, the nearest measured one stands in and
# the source says so.
DEFAULTS = {
    "syscall": Cost(130, 210, "getppid syscall"),
    "wake": Cost(10_000, 11_000, "cross-CPU futex wake, until the woken thread runs"),
    "ipi_send": Cost(5_000, 5_600, "KVM exit round trip: what the waker pays per cross-CPU wake-up in this guest"),
    "signal": Cost(13_000, 15_000, "cross-CPU tgkill until the handler runs"),
    # A cpuset rewrite: the reference table's 100-140 µs; the real arbiter's own spans on this machine
    # (cold minus warm grant: 14-18 µs, preempt reply minus warm grant: 21-32 µs, p50s of 1,000
    # trials in two runs; docs/benchmarks.md) put adding a CPU and taking one away far lower.
    "cpuset_grow": Cost(14_000, 18_000, "add a CPU to cpuset.cpus (the real arbiter: cold - warm grant p50)"),
    "cpuset_shrink": Cost(21_000, 32_000, "take a CPU from cpuset.cpus (the real arbiter: preempt reply - warm grant p50)"),
    "cgroup_dir": Cost(100_000, 140_000, "a cpuset group's mkdir, rmdir or first write (reference: rewrite cpuset.cpus)"),
    "procs_write": Cost(450_000, 550_000, "write a pid to a cpuset's tasks/cgroup.procs"),
    "move": Cost(90_000, 120_000, "a running thread seen on its new CPU after the cpuset shrank (mover SCHED_FIFO)"),
    "page": Cost(10_600, 10_600, "mmap + touch + munmap of 4 KiB (an MCP's shared pages)"),
}

# The shared pages of one MCP: procinfo, and per vcore a queue of 64 notifications of 24 bytes.
PAGE_BYTES = 4096
QUEUE_BYTES = 64 * 24


def shm_pages(max_vcores: int) -> int:
    """Pages of procinfo and procdata for an MCP of `max_vcores` vcores."""
    return 1 + -(-max_vcores * QUEUE_BYTES // PAGE_BYTES)


def load(path: Path | None) -> dict[str, Cost]:
    """The default costs, with those named in the JSON file `path` ({"name": [lo_ns, hi_ns]}) replaced."""
    costs = dict(DEFAULTS)
    if path is None:
        return costs
    data = read_json(path)
    if not isinstance(data, dict):
        raise CoreplaneError(f"{path}: costs must be a JSON object of name: [lo_ns, hi_ns]")
    for name, value in data.items():
        if name not in costs:
            raise CoreplaneError(f"{path}: field {name!r}: unknown cost (known: {', '.join(sorted(costs))})")
        ok = (isinstance(value, list) and len(value) == 2 and all(isinstance(x, (int, float)) for x in value)
              and 0 <= value[0] <= value[1])
        if not ok:
            raise CoreplaneError(f"{path}: field {name!r}: expected [lo_ns, hi_ns] with 0 <= lo <= hi, got {value!r}")
        costs[name] = replace(costs[name], lo=float(value[0]), hi=float(value[1]), source=f"{path}")
    return costs
