"""The supervisor's profile directory does not outlive a killed run (issue 12): a coreplane-exec
killed by SIGKILL with its program (as a timeout kills a process group) cannot remove its
directory of per-process profile files, so the next run with a profile removes every such
directory that no live supervisor holds, and leaves those of live runs alone."""

import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path

from conftest import REPO

EXEC = REPO / "target" / "release" / "coreplane-exec"
BASE = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())


def started(tmp_path: Path, name: str) -> tuple[subprocess.Popen, Path]:
    """A profiled run of a shell that says "ready" (its supervisor's directory exists by then)
    and then waits for its input; the run and its directory."""
    proc = subprocess.Popen([str(EXEC), "--profile", str(tmp_path / f"{name}.json"), "--", "sh", "-c", "echo ready; cat"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout.readline() == "ready\n"
    dirs = list(BASE.glob(f"coreplane-prof-{proc.pid}-*"))
    assert len(dirs) == 1, dirs
    return proc, dirs[0]


def test_a_killed_runs_directory_is_removed_by_the_next_run(tmp_path):
    killed, leftover = started(tmp_path, "killed")
    live, live_dir = started(tmp_path, "live")
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait(timeout=60)
    assert leftover.is_dir()  # nothing could remove it
    proc = subprocess.run([str(EXEC), "--profile", str(tmp_path / "next.json"), "--", "true"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert not leftover.exists()
    # A live run keeps its directory, and its profile.
    assert live_dir.is_dir()
    live.stdin.close()
    assert live.wait(timeout=60) == 0
    assert not live_dir.exists()
    assert json.loads((tmp_path / "live.json").read_text())["exit"] == {"status": 0}


def test_bad_input_leaves_no_directory(tmp_path):
    # Before: the directory was made before the last checks, and a refused --online-map left it.
    proc = subprocess.Popen([str(EXEC), "--delegate", "all", "--online-map", "mesh:2x1", "--profile",
                             str(tmp_path / "p.json"), "--", "true"], stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "--online-map" in err
    assert not list(BASE.glob(f"coreplane-prof-{proc.pid}-*"))
