"""The memory service's threads step aside for a call the kernel allows only in a single-threaded
process (issue 15): after frees (the pool's scrubber runs), or from the start under pool-demand
(its fault handler), unshare(CLONE_NEWUSER) failed with EINVAL where natively the process has
no other thread (strace's *--pidns-translation tests under pool-demand)."""

import subprocess
from pathlib import Path

import pytest

from conftest import build_program, run_cli
from test_memory_service import MEMORY_MODES


@pytest.fixture(scope="module")
def unshare_user(tmp_path_factory) -> Path:
    return build_program(tmp_path_factory, "memory_unshare_user")


@pytest.mark.parametrize("memory", MEMORY_MODES)
@pytest.mark.parametrize("delegate", ["none", "all"])
def test_unshare_of_a_user_namespace_after_the_pool_started(unshare_user, memory, delegate):
    native = subprocess.run([str(unshare_user)], capture_output=True, text=True, timeout=60)
    if native.returncode != 0:
        pytest.skip(f"unshare(CLONE_NEWUSER) refused natively here: {native.stdout.strip()}")
    proc = run_cli("run", "--memory", memory, "--memory-budget", "256M", "--delegate", delegate, "--",
                   str(unshare_user), timeout=120)
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr


@pytest.fixture(scope="module")
def tsync_pool(tmp_path_factory) -> Path:
    return build_program(tmp_path_factory, "seccomp_tsync_pool")


@pytest.mark.parametrize("memory", MEMORY_MODES)
@pytest.mark.parametrize("delegate", ["none", "all"])
@pytest.mark.parametrize("how", ["alone", "threads"])
def test_a_filter_on_every_thread_leaves_the_memory_services_threads_out(tsync_pool, memory, delegate, how):
    # Before: killed by SIGSYS (-31): the filter, synchronised onto every thread, landed on the
    # scrubber and pool-demand's fault handler, whose calls (pread64, ioctl) it kills on.
    native = subprocess.run([str(tsync_pool), how], capture_output=True, text=True, timeout=60)
    assert (native.returncode, native.stdout) == (0, "ok 12\n"), native.stderr
    proc = run_cli("run", "--memory", memory, "--memory-budget", "512M", "--delegate", delegate, "--",
                   str(tsync_pool), how, timeout=120)
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr
