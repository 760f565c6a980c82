"""A cell's memory: its budget, the memory pools of its processes as their runtimes publish them,
and the huge pages its processes truly hold (the kernel's huge page pool is system-wide)."""

import re
import struct
from pathlib import Path

from coreplane.core.errors import CoreplaneError

# The runtime's published figures (crates/runtime/src/bin/rt/memsvc/stats.rs, docs/formats.md).
FIGURES_MAPPING = "/memfd:coreplane-memsvc"
FIGURES_MAGIC = b"CPMEMSV1"
FIGURES_WORDS = ("magic", "seq", "budget", "in_use", "scrubbing", "heap", "given_back", "mode")
MODES = {1: "pool", 2: "pool-demand"}
# `cell exec` tells coreplane-exec the cell's budget through this variable (crates/exec/src/memory.rs).
CELL_BUDGET_VARIABLE = "COREPLANE_CELL_MEMORY_BUDGET"
CELL_GIVE_BACK_VARIABLE = "COREPLANE_CELL_MEMORY_GIVE_BACK"
HUGE_PAGE = 2 << 20
SIZE_RE = re.compile(r"(\d+)([KMGT]?)", re.IGNORECASE)


def parse_size(text: str, option: str) -> int:
    """Bytes from "512M", "2G" or "4096"; a one-line error names `option`."""
    m = SIZE_RE.fullmatch(text.strip())
    if not m or int(m.group(1)) == 0:
        raise CoreplaneError(f"{option} {text!r}: a size such as 512M or 2G (K, M, G or T)")
    return int(m.group(1)) << (10 * " KMGT".index(m.group(2).upper() or " "))


def machine_bytes() -> int:
    """The machine's memory (MemTotal)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise CoreplaneError("/proc/meminfo: no MemTotal line")


def check_budget(budget: int) -> None:
    """A cell's budget must fit the machine: a one-line error otherwise."""
    machine = machine_bytes()
    if budget > machine:
        raise CoreplaneError(f"--memory-budget {budget / 2**30:.1f} GiB: larger than this machine's memory "
                             f"({machine / 2**30:.1f} GiB)")


def pool_figures(pid: int) -> dict | None:
    """The memory pool of process `pid` as its runtime publishes it, in bytes (reserved = its
    budget, in use = heap and mapped pages it holds, scrubbing = freed pages being zeroed, free =
    the rest); None for a process without a pool, or one this user may not read."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
        line = next((l for l in maps.splitlines() if FIGURES_MAPPING in l), None)
        if line is None:
            return None
        at = int(line.split("-", 1)[0], 16)
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            for _ in range(100):   # a seqlock: the runtime writes while the sequence is odd
                mem.seek(at)
                first = mem.read(8 * len(FIGURES_WORDS))
                mem.seek(at)
                again = mem.read(8 * len(FIGURES_WORDS))
                words = dict(zip(FIGURES_WORDS, struct.unpack(f"<{len(FIGURES_WORDS)}Q", first)))
                if first == again and words["seq"] % 2 == 0:
                    break
            else:
                return None
    except (OSError, ValueError):
        return None
    if first[:8] != FIGURES_MAGIC:
        return None
    free = words["budget"] - words["in_use"] - words["scrubbing"]
    return {"pid": pid, "mode": MODES.get(words["mode"], "?"), "reserved": words["budget"],
            "in_use": words["in_use"], "free": max(free, 0), "scrubbing": words["scrubbing"],
            "heap": words["heap"], "given_back": words["given_back"]}


def huge_pages_held(pids: list[int]) -> dict:
    """Huge pages the processes hold: hugetlb pages (HugetlbPages) and transparent ones
    (AnonHugePages), in bytes; the kernel's pool itself belongs to no cell."""
    hugetlb = thp = 0
    for pid in pids:
        try:
            hugetlb += _kib(Path(f"/proc/{pid}/status").read_text(), "HugetlbPages:")
            thp += _kib(Path(f"/proc/{pid}/smaps_rollup").read_text(), "AnonHugePages:")
        except OSError:
            continue
    return {"hugetlb": hugetlb, "transparent": thp}


def _kib(text: str, key: str) -> int:
    line = next((l for l in text.splitlines() if l.startswith(key)), None)
    return int(line.split()[1]) * 1024 if line else 0


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"
