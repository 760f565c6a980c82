"""Run-time mapping in the launcher (coreplane-exec --online-map): tasks are pinned as they appear."""

import os
import subprocess

import pytest

from conftest import run_cli
from coreplane.core.native import binary

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or len(os.sched_getaffinity(0)) < 2,
                                reason="the process-events connector needs CAP_NET_ADMIN; two CPUs needed")


def _allowed(line: str) -> str:
    return line.split(":")[1].strip()


# The launcher pins a task when the kernel's process-events connector reports it, a moment after
# the task starts (up to ~0.2 s on a loaded machine), and a forked child runs on its parent's CPU
# until then. A fixed sleep raced with that. These shells instead poll their own CPU list (read
# with builtins from /proc/self, so the shell itself is the task looked at) until it is one CPU
# and, for a forked subshell, no longer the root shell's ($$), for at most ~60 s; then report it.
def _wait_pinned(forked: bool) -> str:
    read = 'while read -r key value; do [ "$key" = Cpus_allowed_list: ] && {var}=$value; done < {path}; '
    root = read.format(var="root", path="/proc/$$/status") if forked else ""
    parent = '"$root") ;; ' if forked else ""
    return ("i=0; while [ $i -lt 6000 ]; do " + read.format(var="cpus", path="/proc/self/status") + root
            + f"case $cpus in *[,-]*) ;; {parent}*) break;; esac; i=$((i + 1)); sleep 0.01; done; "
            "echo Cpus_allowed_list: $cpus")


def test_forked_child_goes_next_door_exec_stays():
    cpus = sorted(os.sched_getaffinity(0))[:2]
    # tree:4 on the first two allowed CPUs: core i is CPU cpus[i % 2]. The root is placed on core 0;
    # the subshell, a fork, on the nearest other core (1); its grep (exec, no partner seen) stays.
    script = f"({_wait_pinned(True)}; grep Cpus_allowed_list /proc/self/status); {_wait_pinned(False)}"
    proc = subprocess.run(["taskset", "-c", ",".join(map(str, cpus)), str(binary("coreplane-exec")),
                           "--online-map", "tree:4", "--", "sh", "-c", script],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    child_before_exec, child, root = proc.stdout.splitlines()
    assert _allowed(root) == str(cpus[0]) and _allowed(child_before_exec) == _allowed(child) == str(cpus[1]), \
        proc.stdout


def test_online_map_refuses_bad_spec_and_delegation():
    exe = str(binary("coreplane-exec"))
    bad = subprocess.run([exe, "--online-map", "ring:3", "--", "true"], capture_output=True, text=True)
    assert bad.returncode == 2 and "ring:3" in bad.stderr and len(bad.stderr.splitlines()) == 1
    # SPEC@FILE: the profile a mapping file carries; a missing one is named
    gone = subprocess.run([exe, "--online-map", "tree:2@/nonexistent/map.json", "--", "true"],
                          capture_output=True, text=True)
    assert gone.returncode == 2 and "/nonexistent/map.json" in gone.stderr and len(gone.stderr.splitlines()) == 1
    deleg = subprocess.run([exe, "--online-map", "tree:2", "--delegate", "all", "--", "true"],
                           capture_output=True, text=True)
    assert deleg.returncode == 2 and "delegation policy" in deleg.stderr


@pytest.mark.parametrize("full", [False, True])
def test_coreplane_run_passes_online_map(tmp_path, full):
    # `coreplane run --online-map` reaches the launcher both when the CLI becomes coreplane-exec
    # (plain run) and through the full command (--json-out): the root is pinned to core 0
    first = min(os.sched_getaffinity(0))  # core 0 of the topology: the launcher's first allowed CPU
    extra = ["--json-out", str(tmp_path / "run.json")] if full else []
    proc = run_cli("run", "--online-map", "tree:4", *extra, "--", "sh", "-c", _wait_pinned(False))
    assert proc.returncode == 0, proc.stderr
    assert _allowed(proc.stdout.strip()) == str(first), proc.stdout
