"""Calls that name the calling thread implicitly (CLOCK_THREAD_CPUTIME_ID, pid 0 of the sched_*
calls and of get_robust_list, who 0 of setpriority/getpriority, RUSAGE_THREAD) or act on it alone
(personality) act on the caller under delegation too, not on the delegate that makes them
(crates/runtime/src/bin/rt/on_behalf.rs, presets.json's always_local); so do open, readlink and
the stat calls of a path under /proc/thread-self (dispatch.rs, `run_on_path`)."""

import subprocess
from pathlib import Path

import pytest

from conftest import REPO, build_program

EXEC = REPO / "target" / "release" / "coreplane-exec"


def same_as_natively(exe: Path, policy: str) -> None:
    """`exe` under `--delegate policy` exits 0 and prints what its native run prints, which says
    nothing is wrong."""
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert native.returncode == 0 and "DIFFERENT" not in native.stdout, native.stdout
    run = subprocess.run([str(EXEC), "--delegate", policy, "--", str(exe)], capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stdout) == (0, native.stdout), run.stderr


@pytest.mark.parametrize("policy", ["none", "all", "mckernel", "clock_gettime,setpriority,sched_setscheduler,getrusage,get_robust_list"])
def test_calls_about_the_calling_thread_act_on_it(tmp_path_factory, policy):
    same_as_natively(build_program(tmp_path_factory, "thread_self"), policy)


@pytest.mark.parametrize("policy", ["none", "all", "mos", "mckernel"])
def test_paths_under_proc_thread_self_name_the_caller(tmp_path_factory, policy):
    # Before, under every delegating policy: every line DIFFERENT (the delegate's comm, tid and
    # task directory).
    same_as_natively(build_program(tmp_path_factory, "thread_self_paths"), policy)


@pytest.mark.parametrize("policy", ["none", "all", "mos"])
def test_files_reached_through_proc_thread_self_are_opened_once(tmp_path_factory, policy):
    # Before, under delegation: the delegate's open was undone and made again, an O_EXCL create
    # failing with EEXIST and the undo's close dropping the process's POSIX lock.
    same_as_natively(build_program(tmp_path_factory, "thread_self_files"), policy)
