"""Machine-wide settings a cell changes and must give back: IRQ affinities, the unbound
workqueue cpumask, the 2 MiB huge page pool and, on request, where block I/O completes and
where init's threads may run.
Originals are captured once, by the first cell."""

import errno
import os
from pathlib import Path

from coreplane.core.cpulist import format_cpu_list, parse_cpu_list

PROC_IRQ = Path("/proc/irq")
WQ_CPUMASK = Path("/sys/devices/virtual/workqueue/cpumask")
HUGEPAGES = Path("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")
SYS_BLOCK = Path("/sys/block")
# rq_affinity=2: a request completes on the CPU that submitted it, whatever CPU took the IRQ.
COMPLETE_ON_SUBMITTER = "2"
MANAGED = "managed by the kernel"


def mask_to_cpus(mask: str) -> list[int]:
    """Kernel hex mask ("3", "ff,00000001") to CPU numbers."""
    value = int(mask.replace(",", "").strip() or "0", 16)
    return [bit for bit in range(value.bit_length()) if value >> bit & 1]


def cpus_to_mask(cpus: list[int]) -> str:
    """CPU numbers to the kernel's hex mask, 32-bit words separated by commas."""
    value = sum(1 << c for c in set(cpus))
    words = []
    while True:
        words.append(f"{value & 0xFFFFFFFF:08x}")
        value >>= 32
        if not value:
            break
    return ",".join(reversed(words)).lstrip("0") or "0"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _write(path: Path, value: str) -> str | None:
    """Writes `value`; returns None or the kernel's reason for refusing."""
    try:
        path.write_text(value)
        return None
    except OSError as exc:
        if exc.errno in (errno.EIO, errno.EPERM):  # the kernel owns this IRQ's affinity
            return MANAGED
        return exc.strerror or str(exc)


def irq_numbers() -> list[int]:
    return sorted(int(p.name) for p in PROC_IRQ.iterdir() if p.name.isdigit())


def capture() -> dict:
    """The settings as they are now, to be given back when the last cell goes."""
    return {
        "irq_affinity": {str(i): _read(PROC_IRQ / str(i) / "smp_affinity_list") for i in irq_numbers()},
        "default_smp_affinity": _read(PROC_IRQ / "default_smp_affinity"),
        "workqueue_cpumask": _read(WQ_CPUMASK),
        "nr_hugepages": int(_read(HUGEPAGES) or 0),
        "rq_affinity": {p.parent.parent.name: _read(p) for p in sorted(SYS_BLOCK.glob("*/queue/rq_affinity"))},
        "init_affinity": {tid: sorted(cpus) for tid, cpus in _init_threads().items()},
    }


def _init_threads() -> dict[str, set[int]]:
    """init's threads and the CPUs each may run on now."""
    out = {}
    for task in Path("/proc/1/task").iterdir():
        try:
            out[task.name] = os.sched_getaffinity(int(task.name))
        except OSError:
            continue  # the thread ended meanwhile
    return out


def pin_init(original: dict, allowed: list[int]) -> dict[str, str]:
    """Keeps every thread of init on `allowed` CPUs (within where it was allowed before, or all of
    `allowed` when that would be empty); returns {tid: "set" or why not}."""
    before = original.get("init_affinity", {})
    out = {}
    for tid, now in _init_threads().items():
        target = set(before.get(tid, before.get("1", now))) & set(allowed) or set(allowed)
        try:
            os.sched_setaffinity(int(tid), target)
            out[tid] = "set"
        except OSError as exc:
            out[tid] = exc.strerror or str(exc)
    return out


def restore_init(original: dict) -> list[str]:
    """Gives init's threads their CPUs back (a thread born since gets what init's first had)."""
    before = original.get("init_affinity")
    if not before:
        return []
    problems = []
    for tid, now in _init_threads().items():
        target = set(before.get(tid, before.get("1", [])))
        if target and target != now:
            try:
                os.sched_setaffinity(int(tid), target)
            except OSError as exc:
                problems.append(f"init thread {tid}: cannot restore CPUs {format_cpu_list(sorted(target))}: "
                                f"{exc.strerror}")
    return problems


def steer(original: dict, allowed: list[int]) -> dict:
    """Keeps IRQs and unbound workqueues on `allowed` CPUs (intersected with where each was
    allowed before, or all of `allowed` when that would be empty); reports what was refused."""
    refused = {}
    steered = 0
    for irq, before in original["irq_affinity"].items():
        if before is None or not (PROC_IRQ / irq).is_dir():
            continue
        target = sorted(set(parse_cpu_list(before)) & set(allowed)) or allowed
        why = _write(PROC_IRQ / irq / "smp_affinity_list", format_cpu_list(target))
        if why:
            refused[irq] = why
        else:
            steered += 1
    result = {"irqs_steered": steered, "irqs_refused": refused}
    if original["default_smp_affinity"] is not None:
        result["default_smp_affinity"] = _write(PROC_IRQ / "default_smp_affinity", cpus_to_mask(allowed)) or "set"
    if original["workqueue_cpumask"] is not None:
        target = sorted(set(mask_to_cpus(original["workqueue_cpumask"])) & set(allowed)) or allowed
        result["workqueue_cpumask"] = _write(WQ_CPUMASK, cpus_to_mask(target)) or "set"
    return result


def complete_io_on_submitter(original: dict) -> dict[str, str]:
    """Makes every disk complete requests on the submitting CPU; returns {disk: "set" or why not}."""
    return {disk: _write(SYS_BLOCK / disk / "queue" / "rq_affinity", COMPLETE_ON_SUBMITTER) or "set"
            for disk, before in original.get("rq_affinity", {}).items() if before is not None}


def restore_io_completions(original: dict) -> list[str]:
    """Gives every disk its rq_affinity back; returns what could not be."""
    problems = []
    for disk, before in original.get("rq_affinity", {}).items():
        path = SYS_BLOCK / disk / "queue" / "rq_affinity"
        if before is not None and path.exists() and _read(path) != before and (why := _write(path, before)):
            problems.append(f"{path}: {why}")
    return problems


def restore_steering(original: dict) -> list[str]:
    """Gives back every IRQ affinity and the workqueue mask; returns what could not be."""
    problems = []
    settings = [(PROC_IRQ / irq / "smp_affinity_list", before) for irq, before in original["irq_affinity"].items()]
    settings += [(PROC_IRQ / "default_smp_affinity", original["default_smp_affinity"]),
                 (WQ_CPUMASK, original["workqueue_cpumask"])]
    for path, before in settings:
        # Only what differs is written back: an IRQ the kernel refused to move never changed.
        if before is not None and path.exists() and _read(path) != before and (why := _write(path, before)):
            problems.append(f"{path}: {why}")
    return problems


def set_hugepages(count: int) -> tuple[int, str | None]:
    """Asks for `count` 2 MiB pages in the pool; returns (pages the kernel has, refusal)."""
    why = _write(HUGEPAGES, str(count))
    return int(_read(HUGEPAGES) or 0), why
