"""Profiles of programs that leave the launcher's view of the file system: a chroot, a mount
namespace with a /dev/shm of its own. Their processes are profiled as any other, and one that
cannot be (nor one whose file cannot be mapped) is noted and runs unprofiled, as natively.

Before (session 23's finding): every process started there exited with status 127 ("cannot
create profile file in /dev/shm/coreplane-prof-..."): the runtime created each new image's file
by the profile directory's path, which the chroot or the namespace lacked or had read-only."""

import io
import json
import os
import shutil
import subprocess
import sys

import pytest
from rich.console import Console

from conftest import CLI, build_program
from coreplane.profile import io as profiles
from coreplane.profile.summary import render, summary
from test_stress import watched

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chroot and mount namespaces need root")

# A private /dev/shm: the launcher's profile directory is not in it.
PRIVATE_SHM = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs none /dev/shm && exec "$@"', "sh"]


def counts(profile: dict, exe_suffix: str) -> dict:
    """Calls by name of the threads of the processes whose exe ends with `exe_suffix`."""
    pids = {p["pid"] for p in profile["processes"] if p["exe"].endswith(exe_suffix)}
    # An image whose /proc is out of reach (the chroot has none) cannot name its exe.
    pids = pids or {p["pid"] for p in profile["processes"] if p["exe"] == ""}
    total: dict = {}
    for thread in profile["threads"]:
        if thread["pid"] in pids:
            for call in thread["syscalls"]:
                total[call["name"]] = total.get(call["name"], 0) + call["count"]
    return total


def profiled(argv: list[str], tmp_path, mode: str) -> tuple[subprocess.CompletedProcess, dict]:
    """`coreplane run --delegate MODE --profile` of argv: the run and its profile."""
    out = tmp_path / "p.json"
    proc = watched(CLI + ["run", "--delegate", mode, "--profile", str(out), "--", *argv])
    return proc, json.loads(out.read_text()) if out.exists() else {}


@pytest.fixture
def static_root(tmp_path):
    """A root directory holding only a static busybox, as /bin/busybox."""
    if shutil.which("busybox") is None:
        pytest.skip("no busybox")
    root = tmp_path / "root"
    (root / "bin").mkdir(parents=True)
    shutil.copy(shutil.which("busybox"), root / "bin" / "busybox")
    if "statically linked" not in subprocess.run(["file", "-L", str(root / "bin" / "busybox")],
                                                 capture_output=True, text=True).stdout:
        pytest.skip("busybox here is not static")
    return root


@needs_root
@pytest.mark.parametrize("mode", ["none", "all"])
def test_a_chrooted_program_is_profiled(static_root, tmp_path, mode):
    # The shell in the chroot forks and execs busybox echo: both images there have a file.
    argv = ["chroot", str(static_root), "/bin/busybox", "sh", "-c", "echo in; /bin/busybox echo exec; exit 3"]
    native = watched(argv)
    assert (native.returncode, native.stdout) == (3, "in\nexec\n"), native.stderr
    proc, profile = profiled(argv, tmp_path, mode)
    assert (proc.returncode, proc.stdout) == (3, "in\nexec\n"), proc.stderr
    assert counts(profile, "busybox").get("write") == 2, profile["processes"]
    assert len(profile["processes"]) == 4, profile["processes"]  # chroot, sh, its child, echo
    assert profile["overhead"]["unprofiled_processes"] == []


@needs_root
@pytest.mark.parametrize("mode", ["none", "all"])
def test_a_program_with_a_dev_shm_of_its_own_is_profiled(tmp_path, mode):
    argv = PRIVATE_SHM + ["/bin/echo", "hi"]
    native = watched(argv)
    assert (native.returncode, native.stdout) == (0, "hi\n"), native.stderr
    proc, profile = profiled(argv, tmp_path, mode)
    assert (proc.returncode, proc.stdout) == (0, "hi\n"), proc.stderr
    assert counts(profile, "/echo").get("write") == 1, profile["processes"]
    assert profile["overhead"]["unprofiled_processes"] == []


@needs_root
def test_a_process_that_cannot_reach_the_profile_runs_unprofiled_and_is_named(tmp_path):
    # The program closes every descriptor beyond 2 (the runtime's of the profile directory too)
    # where the directory's path is not there: its forked child and the image its execve starts
    # cannot create a file. They run as natively, and the parent's file names both.
    code = ("import os, sys\n"
            "os.closerange(3, 1 << 16)\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n"
            "print(os.getpid(), pid, flush=True)\n"
            "os.execv('/bin/echo', ['echo', 'hi'])\n")
    argv = PRIVATE_SHM + [sys.executable, "-c", code]
    native = watched(argv)
    assert (native.returncode, native.stdout.split("\n")[1:]) == (0, ["hi", ""]), native.stderr
    proc, profile = profiled(argv, tmp_path, "none")
    assert proc.returncode == 0, proc.stderr
    parent, child = (int(n) for n in proc.stdout.split("\n")[0].split())
    assert proc.stdout.split("\n")[1:] == ["hi", ""]
    assert sorted(profile["overhead"]["unprofiled_processes"], key=lambda p: p["at"]) == [
        {"pid": parent, "at": "execve"}, {"pid": child, "at": "fork"}]
    buf = io.StringIO()
    render(summary(profiles.load(tmp_path / "p.json")), Console(file=buf, width=140))
    assert f"note: process {child} not profiled (a forked child without the profile directory)" in buf.getvalue()


def test_a_process_that_cannot_map_its_file_runs_unprofiled_and_is_named(tmp_path):
    # Under an address-space limit below the file's 219 MB mapping. Before: "cannot map profile
    # file", status 127, and the merge failed on the file left unwritten.
    argv = ["sh", "-c", "ulimit -v 150000 && exec /bin/echo hi"]
    native = watched(argv)
    assert (native.returncode, native.stdout) == (0, "hi\n"), native.stderr
    proc, profile = profiled(argv, tmp_path, "none")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "hi\n", "")
    [shell] = profile["processes"]
    assert profile["overhead"]["unprofiled_processes"] == [{"pid": shell["pid"], "at": "map"}]


@pytest.mark.parametrize("mode", ["none", "all"])
def test_a_spawned_child_that_closes_descriptors_leaves_its_parent_the_directory(tmp_path_factory, tmp_path, mode):
    # Its vfork child closes every descriptor beyond 2, then execs: it opens the directory again
    # for the new image. Before, it remembered that descriptor in the memory it shares with its
    # parent, and the parent's forked child opened the directory once more: one descriptor more
    # than its parent's.
    exe = build_program(tmp_path_factory, "spawn_then_fork_fds")
    native = watched([str(exe)])
    assert (native.returncode, native.stdout) == (0, "the forked child has its parent's descriptors\n")
    proc, profile = profiled([str(exe)], tmp_path, mode)
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr
    assert len(profile["processes"]) == 3, profile["processes"]  # the program, true, the forked child
    assert profile["overhead"]["unprofiled_processes"] == []

