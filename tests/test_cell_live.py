"""Cells on this machine's real cgroups (root needed): nothing is left behind after destroy
or after the owner is killed, processes join and leave, bad input is one line. Cells here
live a second or two: while one lives, every other process of the machine runs on core 0."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CLI, build_program, cli_json, run_cli
from machine_lock import machine_lock
from test_memory_pool_elastic import MIB, Holding
from coreplane.cell import Cell, CellSpec
from coreplane.cell.cgroups import CpusetV2, detect
from coreplane.cell.spec import online_cpus
from coreplane.cell.state import STATE_DIR
from coreplane.core.cpulist import format_cpu_list
from coreplane.core.errors import CoreplaneError

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or len(online_cpus()) < 2, reason="needs root and 2 CPUs")
COMPUTE, CONTROL = [online_cpus()[-1]], [online_cpus()[0]]
MISSING = online_cpus()[-1] + 1   # a core this machine does not have
ONLINE = format_cpu_list(online_cpus())


def machine_state() -> dict:
    """What a cell changes and must give back."""
    irqs = {p.name: (p / "smp_affinity_list").read_text() for p in Path("/proc/irq").iterdir() if p.name.isdigit()}
    return {"irqs": irqs, "wq": Path("/sys/devices/virtual/workqueue/cpumask").read_text(),
            "hugepages": Path("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages").read_text()}


def cpuset_of(pid: int) -> tuple[str, str]:
    """(cpuset v1 group, Cpus_allowed_list) of a process."""
    group = next(line.split(":", 2)[2] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                 if ":cpuset:" in line)
    allowed = next(line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                   if line.startswith("Cpus_allowed_list"))
    return group, allowed


def gone(pid: int, seconds: float = 3) -> bool:
    """True once process `pid` has exited (waiting up to `seconds`)."""
    deadline = time.monotonic() + seconds
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not Path(f"/proc/{pid}").exists()


def leftovers() -> list[str]:
    base = detect().base
    return ([str(base)] if base.exists() else []) + [p.name for p in STATE_DIR.glob("*.json")]


@pytest.fixture(autouse=True)
def machine_alone():
    """Takes the machine from other test runs and waits for other users' cells to go (one cell
    at a time fits on 2 CPUs); afterwards nothing of ours stays."""
    with machine_lock():
        deadline = time.monotonic() + 60
        while Cell.live()[0]:
            if time.monotonic() > deadline:
                pytest.skip("another cell stayed live for a minute")
            time.sleep(0.5)
        yield
        for record in Cell.live()[0]:
            Cell.load(record["name"]).destroy()


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "60"])
    yield proc.pid
    proc.kill()
    proc.wait()


def test_create_destroy_leaves_nothing(sleeper):
    before = machine_state()
    assert cpuset_of(sleeper) == ("/", ONLINE)
    with Cell.create(CellSpec(compute=COMPUTE, control=CONTROL, name="t-live", hugepages=2)) as cell:
        assert cell.cpuset.cell_path("t-live").is_dir()
        assert cpuset_of(sleeper) == ("/coreplane/host", str(CONTROL[0]))
        assert machine_state()["wq"].strip() == str(1 << CONTROL[0])
        assert int(machine_state()["hugepages"]) == int(before["hugepages"]) + 2
        watchdog = cell.record["watchdog_pid"]
        assert Path(f"/proc/{watchdog}").exists()
    assert leftovers() == []
    assert cpuset_of(sleeper) == ("/", ONLINE)
    assert machine_state() == before
    assert gone(watchdog)


def test_process_and_its_children_join_the_cell(sleeper):
    with Cell.create(CellSpec(compute=COMPUTE, control=CONTROL, name="t-join"), watchdog=False) as cell:
        child = subprocess.Popen(["sh", "-c", "sleep 0.3; cat /proc/self/cgroup; grep Cpus_allowed_list /proc/self/status"],
                                 stdout=subprocess.PIPE, text=True)
        cell.add_process(child.pid)
        cell.add_process(sleeper)
        cell.pin_thread(sleeper, COMPUTE[0])
        out = child.communicate()[0]
        assert ":cpuset:/coreplane/cell-t-join" in out and format_cpu_list(CONTROL + COMPUTE) in out
        assert cpuset_of(sleeper) == ("/coreplane/cell-t-join", str(COMPUTE[0]))
        assert sleeper in cell.processes()
        with pytest.raises(CoreplaneError, match="core 5 is not one of its cores"):
            cell.pin_thread(sleeper, 5)
    # Leaving the cell, the process keeps the core it asked for (the kernel remembers it).
    assert cpuset_of(sleeper) == ("/", str(COMPUTE[0]))


OWNER = """
import subprocess, sys, time
from coreplane.cell import Cell, CellSpec
cell = Cell.create(CellSpec(compute=[{compute}], control=[{control}], name="t-crash"))
cell.add_process(int(sys.argv[1]))
print(cell.record["watchdog_pid"], flush=True)
time.sleep(120)
"""


def test_sigkill_of_the_owner_is_cleaned_up_by_the_watchdog(sleeper):
    before = machine_state()
    owner = subprocess.Popen([sys.executable, "-c", OWNER.format(compute=COMPUTE[0], control=CONTROL[0]),
                              str(sleeper)], stdout=subprocess.PIPE, text=True)
    watchdog = int(owner.stdout.readline())
    assert cpuset_of(sleeper)[0] == "/coreplane/cell-t-crash"
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    deadline = time.monotonic() + 10
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftovers() == []
    assert cpuset_of(sleeper) == ("/", ONLINE)
    assert machine_state() == before
    assert gone(watchdog)


def test_list_reaps_a_cell_whose_owner_died_without_watchdog():
    owner = subprocess.Popen(["sleep", "60"])
    Cell.create(CellSpec(compute=COMPUTE, control=CONTROL, name="t-stale"), watchdog=False, owner=owner.pid)
    assert [r["name"] for r in cli_json("cell", "list")["cells"]] == ["t-stale"]
    owner.kill()
    owner.wait()
    doc = cli_json("cell", "list")
    assert doc == {"cells": [], "reaped": ["t-stale"]}
    assert leftovers() == []


def test_cli_create_status_destroy():
    created = cli_json("cell", "create", "--compute-cores", str(COMPUTE[0]), "--control-cores", str(CONTROL[0]), "--name", "t-cli")
    try:
        assert created["owner"] is None and created["phase"] == "ready"
        status = cli_json("cell", "status", "t-cli", "--sample", "0.1")
        items = {c["item"]: c["state"] for c in status["checks"]}
        assert {"cpuset", "other tasks", "scheduler tick", "device IRQs", "unbound workqueues"} <= set(items)
        assert items["unbound workqueues"] == "isolated"
        assert all(s in ("isolated", "partial", "not isolated", "info") for s in items.values())
    finally:
        assert cli_json("cell", "destroy", "t-cli")["destroyed"].keys() == {"t-cli"}
    assert leftovers() == []


@pytest.mark.parametrize("args, message", [
    (["cell", "create", "--compute-cores", str(MISSING), "--control-cores", "0"],
     f"--compute-cores {MISSING}: core {MISSING} does not exist (online: {ONLINE})"),
    (["cell", "create", "--compute-cores", "1", "--control-cores", "0-1"], "--compute-cores and --control-cores overlap on core 1"),
    (["cell", "status", "nope"], "no cell named 'nope' (coreplane cell list)"),
])
def test_cli_bad_input_is_one_line(args, message):
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert proc.stderr == f"coreplane: error: {message}\n"
    assert leftovers() == []


def test_owner_must_exist():
    with pytest.raises(CoreplaneError, match="^--owner 999999999: no such process$"):
        Cell.create(CellSpec(compute=COMPUTE, control=CONTROL), owner=999999999)
    assert leftovers() == []


UNIFIED = Path("/sys/fs/cgroup/unified")


@pytest.mark.skipif(not (UNIFIED / "cgroup.procs").exists(), reason="no cgroup2 mount")
def test_cgroup2_mount_without_cpuset(sleeper):
    """This machine's cgroup2 lacks cpuset (bound to v1): the v2 cell fails in one line and
    leaves nothing; the v2 process moves themselves are exercised on the real cgroup2."""
    cpuset = CpusetV2(UNIFIED)
    with pytest.raises(CoreplaneError, match=r"cgroup.subtree_control: cannot write '\+cpuset'"):
        cpuset.create_cell("t-v2", COMPUTE, CONTROL, online_cpus(), [])
    assert not cpuset.base.exists()
    cell = cpuset.cell_path("t-v2")
    cell.mkdir(parents=True)
    try:
        cpuset.add_process("t-v2", sleeper)
        assert f"0::/coreplane/cell-t-v2" in Path(f"/proc/{sleeper}/cgroup").read_text()
        assert cpuset.remove_cell("t-v2", UNIFIED) == []
        assert "0::/\n" in Path(f"/proc/{sleeper}/cgroup").read_text()
        assert cpuset.remove_base_if_empty() is None
    finally:
        for p in (cell, cpuset.base):
            if p.exists():
                p.rmdir()
    assert not cpuset.base.exists()


def test_mlock_cell_locks_the_memory_of_a_program_under_the_runtime():
    """`cell create --mlock` lifts the limit; `cell exec` of a program under coreplane's runtime
    has its memory locked (the runtime calls mlockall); a program run without the runtime is
    left to lock its own (natively: nothing locked)."""
    read_vmlck = ["grep", "VmLck", "/proc/self/status"]
    cli_json("cell", "create", "--compute-cores", str(COMPUTE[0]), "--control-cores", str(CONTROL[0]),
             "--name", "t-mlock", "--mlock")
    try:
        under = run_cli("cell", "exec", "t-mlock", "--", *CLI, "run", "--", *read_vmlck)
        plain = run_cli("cell", "exec", "t-mlock", "--", *read_vmlck)
    finally:
        cli_json("cell", "destroy", "t-mlock")
    locked = lambda proc: int(proc.stdout.split()[1])
    assert under.returncode == 0 and locked(under) > 1000, under.stdout + under.stderr
    assert plain.returncode == 0 and locked(plain) == 0, plain.stdout
    assert leftovers() == []


def test_cell_status_shows_the_pools_of_its_processes_within_the_cell_budget(tmp_path_factory):
    """A cell made with --memory-budget bounds the pool of a run in it (the run asks for 256 MiB,
    the cell allows 64), and `cell status` shows that process's pool as its runtime publishes it."""
    exe = build_program(tmp_path_factory, "pool_semantics")
    cli_json("cell", "create", "--compute-cores", str(COMPUTE[0]), "--control-cores", str(CONTROL[0]),
             "--name", "t-pool", "--no-move-tasks", "--no-steer-irqs", "--memory-budget", "64M")
    try:
        held = Holding([*CLI, "cell", "exec", "t-pool", "--", *CLI, "run", "--memory", "pool",
                        "--memory-budget", "256M", "--", str(exe), "hold"])
        try:
            doc = cli_json("cell", "status", "t-pool", "--sample", "0.05")
        finally:
            held.finish()
    finally:
        cli_json("cell", "destroy", "t-pool")
    pools = {f["pid"]: f for f in doc["memory_pools"]}
    assert pools[held.pid]["reserved"] == 64 * MIB and pools[held.pid]["in_use"] == 27 * MIB
    check = next(c for c in doc["checks"] if c["item"] == "memory pools")
    assert "27.0 MiB in use of the cell's budget 64.0 MiB" in check["detail"]
    assert any(line.startswith(f"pid {held.pid} (pool): reserved 64.0 MiB, in use 27.0 MiB") for line in check["evidence"])
    assert leftovers() == []
