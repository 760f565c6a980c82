"""A cell: exclusive compute cores for one application, the machine's other work on control
cores. The one implementation behind `coreplane cell` and `coreplane run`."""

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

from coreplane.cell import state, steering
from coreplane.cell.cgroups import HOST, Cpuset, all_cpus, detect
from coreplane.cell.spec import CellSpec, default_name, online_cpus, validate
from coreplane.core.cpulist import format_cpu_list
from coreplane.core.errors import CoreplaneError

WATCHDOG_MODULE = "coreplane.cell.watchdog"


def _union(records, key: str, flag: str | None = None) -> list[int]:
    cores = set()
    for r in records:
        if flag is None or r["spec"][flag]:
            cores.update(r[key])
    return sorted(cores)


def _reconcile(cpuset: Cpuset, live: dict[str, dict]) -> dict:
    """Brings the machine-wide settings in line with the `live` cells: other processes, IRQs
    and unbound workqueues kept off every compute core, the huge page pool sized for all
    cells, or everything given back when no cell is left. Idempotent; safe after a crash."""
    host = state.load_host()
    cells = list(live.values())
    problems: list[str] = []
    if not cells:
        if host is not None:
            problems += cpuset.release_host()
            problems += steering.restore_steering(host["steering"])
            if host.get("io_completions_set"):
                problems += steering.restore_io_completions(host["steering"])
            if host.get("init_pinned"):
                problems += steering.restore_init(host["steering"])
            if host.get("hugepages_touched"):
                steering.set_hugepages(host["steering"]["nr_hugepages"])
            if why := cpuset.remove_base_if_empty():
                problems.append(f"{cpuset.base}: {why}")
            # The originals are forgotten only once all is given back; else the next
            # `cell list`, create or destroy tries again.
            state.save_host(None if not problems else {**host, "problems": problems})
        return {"problems": problems}
    if host is None:
        host = {"steering": steering.capture(), "since": time.time()}
        state.save_host(host)
    elif missing := {k: v for k, v in steering.capture().items() if k not in host["steering"]}:
        # Settings a cell of an older coreplane did not capture (so never changed): as they are now.
        host = {**host, "steering": {**host["steering"], **missing}}
        state.save_host(host)
    online = [c for c in online_cpus() if c in all_cpus(cpuset)]
    summary: dict = {}
    kept_off = _union(cells, "compute", "move_tasks")
    if kept_off:
        moved, refused = cpuset.set_host([c for c in online if c not in kept_off])
        summary["tasks"] = {"moved": moved, "refused": {str(p): why for p, why in refused.items()}}
    else:
        problems += cpuset.release_host()
    steered_off = _union(cells, "compute", "steer_irqs")
    if steered_off:
        summary["steering"] = steering.steer(host["steering"], [c for c in online if c not in steered_off])
    else:
        problems += steering.restore_steering(host["steering"])
    # The opt-in machine-wide cuts are given back only where a cell made them (others may change
    # these settings meanwhile, and nothing of ours should undo that).
    if any(r["spec"].get("io_completions") for r in cells):
        host = {**host, "io_completions_set": True}
        state.save_host(host)
        summary["io_completions"] = steering.complete_io_on_submitter(host["steering"])
    elif host.get("io_completions_set"):
        problems += steering.restore_io_completions(host["steering"])
        host = {k: v for k, v in host.items() if k != "io_completions_set"}
        state.save_host(host)
    pinned_off = _union([r for r in cells if r["spec"].get("pin_init")], "compute")
    if pinned_off:
        host = {**host, "init_pinned": True}
        state.save_host(host)
        summary["init"] = steering.pin_init(host["steering"], [c for c in online if c not in pinned_off])
    elif host.get("init_pinned"):
        problems += steering.restore_init(host["steering"])
        host = {k: v for k, v in host.items() if k != "init_pinned"}
        state.save_host(host)
    extra = sum(r["spec"]["hugepages"] for r in cells)
    if extra or host.get("hugepages_touched"):
        # The pool is only touched for cells that asked, and given back to its original size.
        wanted = host["steering"]["nr_hugepages"] + extra
        have, why = steering.set_hugepages(wanted)
        summary["hugepages"] = {"pool": have, "wanted": wanted, **({"refused": why} if why else {})}
        state.save_host({**host, "hugepages_touched": True})
    summary["problems"] = problems
    return summary


def _stop_watchdog(record: dict) -> None:
    """Ends the cell's watchdog, making sure the pid still is that watchdog."""
    pid = record.get("watchdog_pid")
    if not pid or pid == os.getpid():
        return
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return
    if WATCHDOG_MODULE.encode() in cmdline and record["name"].encode() in cmdline:
        os.kill(pid, signal.SIGTERM)


def _teardown(name: str, cpuset: Cpuset) -> dict:
    """Removes cell `name` and reconciles the machine; called with the lock held."""
    record = state.load(name)
    if record is None:
        return {"problems": []}
    _stop_watchdog(record)
    others = {n: r for n, r in state.cell_records().items() if n != name}
    keeps_host = any(r["spec"]["move_tasks"] for r in others.values()) and (cpuset.base / HOST).is_dir()
    problems = cpuset.remove_cell(name, cpuset.base / HOST if keeps_host else cpuset.root)
    if problems:
        record.update(phase="leftover", problems=problems)
        state.save(name, record)
    else:
        state.forget(name)
    summary = _reconcile(cpuset, others)
    summary["problems"] = problems + summary["problems"]
    return summary


def _reap_stale(cpuset: Cpuset) -> list[str]:
    """Tears down every cell whose owner has died; returns their names."""
    reaped = []
    for name, record in state.cell_records().items():
        if not state.owner_alive(record.get("owner")):
            _teardown(name, cpuset)
            reaped.append(name)
    return reaped


class Cell:
    """A live cell. Use `Cell.create(spec)` (also as a context manager) or `Cell.load(name)`."""

    def __init__(self, record: dict, cpuset: Cpuset):
        self.record = record
        self.cpuset = cpuset

    name = property(lambda self: self.record["name"])
    compute = property(lambda self: list(self.record["compute"]))
    control = property(lambda self: list(self.record["control"]))
    spec = property(lambda self: CellSpec.from_dict(self.record["spec"]))

    @classmethod
    def create(cls, spec: CellSpec, watchdog: bool = True, owner: int | None = 0) -> "Cell":
        """Makes the cell. `owner` is the process whose death ends the cell (0: this process,
        None: nobody, the cell lives until destroyed); `watchdog` starts a detached process
        that destroys the cell when the owner dies, even by SIGKILL."""
        owner_pid = os.getpid() if owner == 0 else owner
        cpuset = detect()
        with state.locked():
            _reap_stale(cpuset)
            records = state.cell_records()
            online = [c for c in online_cpus() if c in all_cpus(cpuset)]
            spec = validate(spec, online, {n: (r["compute"], r["control"]) for n, r in records.items()})
            name = spec.name or default_name(set(records))
            if name in records:
                raise CoreplaneError(f"--name {name}: a cell of that name exists (coreplane cell destroy {name})")
            if owner_pid is not None and state.start_time(owner_pid) is None:
                raise CoreplaneError(f"--owner {owner_pid}: no such process")
            record = {
                "name": name, "compute": spec.compute, "control": spec.control,
                "spec": {**spec.as_dict(), "name": name},
                "owner": owner_pid and {"pid": owner_pid, "start_time": state.start_time(owner_pid)},
                "created": time.time(), "phase": "creating", "processes": [], "watchdog_pid": None,
            }
            state.save(name, record)  # first, so that a crash from here on can be reaped
            try:
                all_compute = _union(records.values(), "compute") + spec.compute
                record["cgroup"] = cpuset.create_cell(name, spec.compute, spec.control, online, all_compute)
                state.save(name, record)
                record["machine"] = _reconcile(cpuset, {**records, name: record})
                huge = record["machine"].get("hugepages")
                if spec.hugepages and huge and huge["pool"] < huge["wanted"]:
                    raise CoreplaneError(f"--hugepages {spec.hugepages}: the kernel gave {huge['pool']} of the "
                                         f"{huge['wanted']} huge pages wanted ({huge.get('refused', 'memory too fragmented?')})")
                if watchdog and owner_pid is not None:
                    record["watchdog_pid"] = _spawn_watchdog(name)
                record["phase"] = "ready"
                state.save(name, record)
            except BaseException:
                _teardown(name, cpuset)
                raise
        return cls(record, cpuset)

    @classmethod
    def load(cls, name: str) -> "Cell":
        record = state.load(name)
        if record is None:
            raise CoreplaneError(f"no cell named {name!r} (coreplane cell list)")
        return cls(record, detect())

    @classmethod
    def live(cls) -> tuple[list[dict], list[str]]:
        """(records of the live cells, names of stale cells reaped on the way)."""
        cpuset = detect()
        with state.locked():
            reaped = _reap_stale(cpuset)
            records = state.cell_records()
            if not records and state.load_host() is not None:
                _reconcile(cpuset, {})  # a give-back that failed before: try again
            return list(records.values()), reaped

    def add_process(self, pid: int) -> None:
        """Puts process `pid` and its future children into the cell; its threads may then be
        pinned on any compute or control core (on cgroup v2 partitions, via pin_thread)."""
        if state.start_time(pid) is None:
            raise CoreplaneError(f"cell {self.name}: no process {pid}")
        self.cpuset.add_process(self.name, pid)
        if self.record["spec"]["mlock"]:
            # The cell lifts the limit; locking happens inside the program's image (locks end at
            # execve): coreplane's runtime calls mlockall when `coreplane cell exec` runs it
            # (COREPLANE_CELL_MLOCK), a program run without it locks its memory itself or not.
            try:
                resource.prlimit(pid, resource.RLIMIT_MEMLOCK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            except PermissionError:
                # Raising the hard limit needs CAP_SYS_RESOURCE (a container may not grant it);
                # the soft one goes up to it, and CAP_IPC_LOCK, where held, locks past both.
                hard = resource.prlimit(pid, resource.RLIMIT_MEMLOCK)[1]
                resource.prlimit(pid, resource.RLIMIT_MEMLOCK, (hard, hard))
        with state.locked():
            record = state.load(self.name) or self.record
            record["processes"] = sorted(set(record["processes"]) | {pid})
            state.save(self.name, record)
            self.record = record

    def pin_thread(self, tid: int, cpu: int) -> None:
        """Pins thread `tid` of a cell process on `cpu`, one of the cell's cores."""
        if cpu not in self.compute + self.control:
            raise CoreplaneError(f"cell {self.name}: core {cpu} is not one of its cores "
                                 f"({format_cpu_list(self.compute + self.control)})")
        self.cpuset.place_thread(self.name, tid, cpu in self.compute)
        try:
            os.sched_setaffinity(tid, {cpu})
        except OSError as exc:
            raise CoreplaneError(f"cell {self.name}: cannot pin thread {tid} on core {cpu}: {exc.strerror}") from None

    def processes(self) -> list[int]:
        return self.cpuset.processes(self.cpuset.cell_path(self.name))

    def status(self, sample_s: float = 0.2) -> dict:
        """What is isolated and what is not, with the evidence (see coreplane.cell.status)."""
        from coreplane.cell.status import report
        return report(self.record, self.cpuset, sample_s)

    def destroy(self) -> dict:
        """Moves the cell's processes out, removes its groups, gives the machine back when it
        was the last cell. Returns what was done; raises if something stayed behind."""
        with state.locked():
            summary = _teardown(self.name, self.cpuset)
        if summary["problems"]:
            raise CoreplaneError(f"cell {self.name}: left behind: {'; '.join(summary['problems'])}")
        return summary

    def __enter__(self) -> "Cell":
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()


def _spawn_watchdog(name: str) -> int:
    """Starts the detached watchdog (it forks away at once) and returns its pid."""
    proc = subprocess.Popen([sys.executable, "-m", WATCHDOG_MODULE, name], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
                            close_fds=True, text=True)
    line = proc.stdout.readline()
    proc.wait()
    if not line.strip().isdigit():
        raise CoreplaneError(f"cell {name}: the watchdog did not start (exit status {proc.returncode})")
    return int(line)


def teardown_if_owner_dead(name: str) -> bool:
    """The watchdog's last act: tears the cell down unless its owner still lives."""
    cpuset = detect()
    with state.locked():
        record = state.load(name)
        if record is None or state.owner_alive(record.get("owner")):
            return False
        _teardown(name, cpuset)
        return True
