"""The cpuset side of a cell on cgroup v1 or v2: finding the hierarchy, making the cell and
host groups, and moving processes between them."""

import errno
import os
import time
from abc import ABC, abstractmethod
from pathlib import Path

from coreplane.cell.state import stat_fields
from coreplane.core.cpulist import format_cpu_list, parse_cpu_list
from coreplane.core.errors import CoreplaneError

BASE = "coreplane"      # our directory below the cpuset root
HOST = "host"           # where the machine's other movable processes wait while cells live
CELL_PREFIX = "cell-"   # a cell's group is BASE/cell-NAME
# Never moved: init (on VMs and containers it is the machine's own supervisor) and
# kthreadd (kernel threads it forks later would inherit our group and pin it in place).
EXEMPT_PIDS = frozenset({1, 2})
PF_KTHREAD = 0x00200000          # task flags (include/linux/sched.h), field 9 of /proc/PID/stat
PF_NO_SETAFFINITY = 0x04000000   # the kernel binds this thread; no cgroup may move it


def task_flags(tid: int) -> int | None:
    fields = stat_fields(tid)
    return int(fields[6]) if fields else None


def _mounts(root: Path) -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, super options) of every mount in root's /proc/self/mountinfo."""
    out = []
    text = (root / "proc/self/mountinfo").read_text()
    for line in text.splitlines():
        head, _, tail = line.partition(" - ")
        fields, tail_fields = head.split(), tail.split()
        if len(fields) >= 5 and len(tail_fields) >= 3:
            out.append((fields[4].replace("\\040", " "), tail_fields[0], set(tail_fields[2].split(","))))
    return out


def write(path: Path, value: str | int) -> None:
    """One write(2) of `value` to a control file; the kernel's reason becomes a one-line error."""
    try:
        with open(path, "w") as f:
            f.write(str(value))
    except OSError as exc:
        raise CoreplaneError(f"{path}: cannot write {str(value)!r}: {exc.strerror}") from None


def read(path: Path) -> str:
    return path.read_text().strip()


def try_rmdir(path: Path, empty=None, seconds: float = 3.0) -> str | None:
    """Removes a cgroup directory, calling `empty()` before each attempt (processes keep
    forking into a busy group); returns None or the reason it is still there."""
    deadline = time.monotonic() + seconds
    while True:
        if empty:
            empty()
        try:
            path.rmdir()
            return None
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return exc.strerror
        if time.monotonic() > deadline:
            return "still busy (processes keep arriving)"
        time.sleep(0.01)


def move_processes(src: Path, dst: Path, exempt: frozenset[int] = frozenset()) -> tuple[int, dict[int, str]]:
    """Moves every process listed in src/cgroup.procs to dst, pass after pass until no new one
    appears (children forked meanwhile); returns (moved, {pid: why it could not move})."""
    moved, refused = 0, {}
    for _ in range(5):
        pids = [int(p) for p in read(src / "cgroup.procs").split()]
        todo = [p for p in pids if p not in exempt and p not in refused]
        if not todo:
            break
        for pid in todo:
            try:
                with open(dst / "cgroup.procs", "w") as f:
                    f.write(str(pid))
                moved += 1
            except OSError as exc:
                if exc.errno != errno.ESRCH:  # a process that exited needs no move
                    refused[pid] = exc.strerror
    return moved, refused


class Cpuset(ABC):
    """Operations shared by both hierarchies; `root` is the mount point of the cpuset controller."""

    version = 0

    def __init__(self, root: Path):
        self.root = root
        self.base = root / BASE

    def cell_path(self, name: str) -> Path:
        return self.base / f"{CELL_PREFIX}{name}"

    def cell_names(self) -> list[str]:
        if not self.base.is_dir():
            return []
        return sorted(p.name[len(CELL_PREFIX):] for p in self.base.iterdir()
                      if p.is_dir() and p.name.startswith(CELL_PREFIX))

    def add_process(self, name: str, pid: int) -> None:
        """Puts process `pid` (all its threads, and its future children) into the cell."""
        try:
            with open(self.cell_path(name) / "cgroup.procs", "w") as f:
                f.write(str(pid))
        except OSError as exc:
            raise CoreplaneError(f"cell {name}: cannot add process {pid}: {exc.strerror}") from None

    def processes(self, path: Path) -> list[int]:
        try:
            return [int(p) for p in read(path / "cgroup.procs").split()]
        except OSError:
            return []

    def set_host(self, cpus: list[int]) -> tuple[int, dict[int, str]]:
        """Creates or resizes the host group to `cpus` and moves the root's processes into it."""
        host = self.base / HOST
        self._make_group(host, cpus)
        pinned = {p for p in self.processes(self.root) if (task_flags(p) or 0) & PF_NO_SETAFFINITY}
        return move_processes(self.root, host, EXEMPT_PIDS | pinned)

    def release_host(self) -> list[str]:
        """Moves the host group's processes back to the root and removes our directories;
        returns what could not be undone."""
        problems = []
        host = self.base / HOST
        if host.is_dir():
            refused: dict[int, str] = {}
            if why := try_rmdir(host, lambda: refused.update(move_processes(host, self.root)[1])):
                problems += [f"process {p} stays in {host}: {r}" for p, r in refused.items()]
                problems.append(f"{host}: {why}")
        return problems

    def remove_base_if_empty(self) -> str | None:
        if self.base.is_dir() and not any(p.is_dir() for p in self.base.iterdir()):
            return try_rmdir(self.base)
        return None

    @abstractmethod
    def _make_group(self, path: Path, cpus: list[int]) -> None:
        """Creates (or updates) a group holding `cpus`."""

    @abstractmethod
    def create_cell(self, name: str, compute: list[int], control: list[int], all_cpus: list[int],
                    all_compute: list[int]) -> dict:
        """Makes the cell's group; returns {"version", "path", "partition"}."""

    @abstractmethod
    def remove_cell(self, name: str, dest: Path) -> list[str]:
        """Moves the cell's processes to `dest`, removes its group; returns what stayed behind."""

    @abstractmethod
    def place_thread(self, name: str, tid: int, compute: bool) -> None:
        """Lets thread `tid` of a cell process run on compute (or control) cores."""


class CpusetV1(Cpuset):
    """cgroup v1: cpus and mems must be set before a task may join; no partitions, so the
    compute cores are made exclusive by moving every other movable process off them."""

    version = 1

    def _make_group(self, path: Path, cpus: list[int]) -> None:
        path.mkdir(exist_ok=True)
        write(path / "cpuset.mems", read(self.root / "cpuset.mems"))
        write(path / "cpuset.cpus", format_cpu_list(cpus))

    def create_cell(self, name: str, compute: list[int], control: list[int], all_cpus: list[int],
                    all_compute: list[int]) -> dict:
        """Makes BASE (all CPUs) and BASE/cell-NAME (compute and control cores)."""
        if not self.base.is_dir():
            self._make_group(self.base, all_cpus)
        self._make_group(self.cell_path(name), compute + control)
        return {"version": 1, "path": str(self.cell_path(name)), "partition": "none (cgroup v1)"}

    def remove_cell(self, name: str, dest: Path) -> list[str]:
        path = self.cell_path(name)
        if not path.is_dir():
            return []
        refused: dict[int, str] = {}
        if why := try_rmdir(path, lambda: refused.update(move_processes(path, dest)[1])):
            return [f"process {p} stays in {path}: {r}" for p, r in refused.items()] + [f"{path}: {why}"]
        return []

    def place_thread(self, name: str, tid: int, compute: bool) -> None:
        return  # the v1 cell's cpuset already spans compute and control cores


class CpusetV2(Cpuset):
    """cgroup v2: where the kernel has cpuset partitions, the compute cores become an
    isolated (remote) partition in a threaded child BASE/cell-NAME/compute, so the kernel
    itself takes them from every other group, from load balancing and from unbound workqueues."""

    version = 2
    COMPUTE = "compute"

    def _enable_cpuset(self, parent: Path) -> None:
        if "cpuset" not in read(parent / "cgroup.subtree_control").split():
            write(parent / "cgroup.subtree_control", "+cpuset")

    def _make_group(self, path: Path, cpus: list[int]) -> None:
        self._enable_cpuset(path.parent)
        path.mkdir(exist_ok=True)
        write(path / "cpuset.cpus", format_cpu_list(cpus))

    def create_cell(self, name: str, compute: list[int], control: list[int], all_cpus: list[int],
                    all_compute: list[int]) -> dict:
        """Makes BASE/cell-NAME over compute+control cores, then tries the isolated partition;
        `all_compute` is every live cell's compute cores (BASE must grant them all)."""
        self._enable_cpuset(self.root)
        self.base.mkdir(exist_ok=True)
        self._enable_cpuset(self.base)
        cell = self.cell_path(name)
        self._make_group(cell, compute + control)
        info = {"version": 2, "path": str(cell), "partition": "unsupported by this kernel"}
        if (cell / "cpuset.cpus.partition").exists() and (cell / "cpuset.cpus.exclusive").exists():
            info["partition"] = self._isolate(cell, compute, sorted(set(all_compute + compute)))
        return info

    def _isolate(self, cell: Path, compute: list[int], all_compute: list[int]) -> str:
        """A remote isolated partition for `compute`: every ancestor below the root must list
        the CPUs in cpuset.cpus.exclusive. Returns "isolated" or the kernel's reason."""
        try:
            write(self.base / "cpuset.cpus.exclusive", format_cpu_list(all_compute))
            write(cell / "cpuset.cpus.exclusive", format_cpu_list(compute))
            part = cell / self.COMPUTE
            part.mkdir(exist_ok=True)
            write(part / "cgroup.type", "threaded")
            self._enable_cpuset(cell)
            write(part / "cpuset.cpus", format_cpu_list(compute))
            write(part / "cpuset.cpus.exclusive", format_cpu_list(compute))
            write(part / "cpuset.cpus.partition", "isolated")
            state = read(part / "cpuset.cpus.partition")
        except CoreplaneError as exc:
            state = f"refused: {exc}"
        if state != "isolated":
            self._drop_partition(cell)
        return state

    def _drop_partition(self, cell: Path) -> list[str]:
        part = cell / self.COMPUTE
        problems = []
        if part.is_dir():
            for attempt in (lambda: write(part / "cpuset.cpus.partition", "member"),
                            lambda: [write(cell / "cgroup.threads", t) for t in read(part / "cgroup.threads").split()]):
                try:
                    attempt()
                except (CoreplaneError, OSError) as exc:
                    problems.append(str(exc))
            if why := try_rmdir(part):
                problems.append(f"{part}: {why}")
        for group in (cell, self.base):
            if (group / "cpuset.cpus.exclusive").exists():
                try:
                    write(group / "cpuset.cpus.exclusive", "")
                except CoreplaneError as exc:
                    problems.append(str(exc))
        return problems

    def partitioned(self, name: str) -> bool:
        part = self.cell_path(name) / self.COMPUTE
        return part.is_dir() and read(part / "cpuset.cpus.partition") == "isolated"

    def place_thread(self, name: str, tid: int, compute: bool) -> None:
        """With a partition, a thread must sit in the compute child to run on compute cores
        (and in the cell itself to run on control cores)."""
        if not self.partitioned(name):
            return
        cell = self.cell_path(name)
        write((cell / self.COMPUTE if compute else cell) / "cgroup.threads", tid)

    def remove_cell(self, name: str, dest: Path) -> list[str]:
        path = self.cell_path(name)
        if not path.is_dir():
            return []
        problems = self._drop_partition(path)
        refused: dict[int, str] = {}
        if why := try_rmdir(path, lambda: refused.update(move_processes(path, dest)[1])):
            problems += [f"process {p} stays in {path}: {r}" for p, r in refused.items()] + [f"{path}: {why}"]
        return problems


def detect(root: Path = Path("/")) -> Cpuset:
    """The cpuset hierarchy of the machine whose files are below `root`: v1 if a v1 hierarchy
    has the cpuset controller, else v2 if the cgroup2 root offers it."""
    try:
        mounts = _mounts(root)
    except OSError as exc:
        raise CoreplaneError(f"{root / 'proc/self/mountinfo'}: {exc.strerror}") from None
    v1 = [m for m, fs, opts in mounts if fs == "cgroup" and "cpuset" in opts]
    if v1:
        return CpusetV1(root / v1[0].lstrip("/"))
    v2 = [m for m, fs, _ in mounts if fs == "cgroup2"]
    for mount in v2:
        path = root / mount.lstrip("/")
        if "cpuset" in read(path / "cgroup.controllers").split():
            return CpusetV2(path)
    where = f"cgroup2 at {', '.join(v2)} lacks the cpuset controller" if v2 else "no cgroup hierarchy is mounted"
    raise CoreplaneError(f"cannot make a cell: {where} and no cgroup v1 hierarchy has it")


def all_cpus(cpuset: Cpuset) -> list[int]:
    """The CPUs the cpuset root may use."""
    name = "cpuset.cpus.effective" if cpuset.version == 2 else "cpuset.cpus"
    return parse_cpu_list(read(cpuset.root / name))
