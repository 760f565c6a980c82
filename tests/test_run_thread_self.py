"""Calls that name the calling thread implicitly (CLOCK_THREAD_CPUTIME_ID, pid 0 of the sched_*
calls and of get_robust_list, who 0 of setpriority/getpriority, RUSAGE_THREAD) or act on it alone
(personality) act on the caller under delegation too, not on the delegate that makes them
(crates/runtime/src/bin/rt/on_behalf.rs, presets.json's always_local)."""

import subprocess
from pathlib import Path

import pytest

from conftest import REPO, build_program

EXEC = REPO / "target" / "release" / "coreplane-exec"


@pytest.fixture(scope="module")
def thread_self(tmp_path_factory) -> Path:
    return build_program(tmp_path_factory, "thread_self")


@pytest.mark.parametrize("policy", ["none", "all", "mckernel", "clock_gettime,setpriority,sched_setscheduler,getrusage,get_robust_list"])
def test_calls_about_the_calling_thread_act_on_it(thread_self, policy):
    native = subprocess.run([str(thread_self)], capture_output=True, text=True, timeout=60)
    assert native.returncode == 0, native.stdout
    run = subprocess.run([str(EXEC), "--delegate", policy, "--", str(thread_self)], capture_output=True, text=True,
                         timeout=60)
    assert (run.returncode, run.stdout) == (0, native.stdout), run.stderr
