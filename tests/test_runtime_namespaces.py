"""Namespaces and contexts a thread leaves with unshare(2) or setns(2) while delegates run
(`process::before_unshare`, `after_apart`): its network, UTS and IPC namespaces, its filesystem
context, joined by the program's only thread (the delegates are retired and start again from
it) or by one thread of two (its calls, and those of the threads it creates, are made where it
is), compared with the native run; and a new pid namespace, which the caller's children enter
(clone and fork are never delegated). Each run is wrapped in new UTS and IPC namespaces of its
own, and a private mount namespace: under a runtime whose delegates stayed behind, the
program's sethostname named the host, and `ip netns exec` replaced the host's /sys.
Needs root; skipped where the kernel refuses the namespaces."""

import os
import shutil
import subprocess

import pytest

from conftest import CLI, build_program
from test_stress import watched

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                reason="needs root and util-linux's unshare")

WRAP = ["unshare", "--uts", "--ipc", "--mount", "--propagation", "private", "--"]


@pytest.fixture(scope="module")
def ns_apart(tmp_path_factory):
    return build_program(tmp_path_factory, "ns_apart")


@pytest.mark.parametrize("mode", ["none", "all", "mos"])
@pytest.mark.parametrize("case", ["alone", "setns", "thread", "fs", "pid", "mount"])
def test_calls_after_unshare_or_setns_see_the_callers_namespaces(ns_apart, case, mode):
    # Before, under all and mos: the delegates' namespaces ("interfaces 4, ... key inside yes",
    # "setns 0, interfaces 4", "thread: interfaces 4"), and the main thread's cwd was the one a
    # thread with its own filesystem context changed to ("cwd /").
    native = watched(WRAP + [str(ns_apart), case])
    if native.returncode == 77:
        pytest.skip(f"the kernel refuses the namespaces of {case!r} here")
    assert native.returncode == 0, native.stderr
    proc = watched(WRAP + CLI + ["run", "--delegate", mode, "--", str(ns_apart), case])
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr


@pytest.fixture(scope="module")
def ns_filtered_setns(tmp_path_factory):
    return build_program(tmp_path_factory, "ns_filtered_setns")


@pytest.mark.parametrize("mode", ["none", "all", "mos"])
@pytest.mark.parametrize("action", ["errno", "kill"])
def test_setns_of_a_filtered_thread_asks_its_filter_nothing(ns_filtered_setns, action, mode):
    # Before, under all and mos: the runtime's NS_GET_NSTYPE ioctl met the program's filter, which
    # killed the program (SIGSYS) or refused it, and the delegates stayed ("Invalid argument").
    exe = ns_filtered_setns
    native = watched(WRAP + [str(exe), action])
    if native.returncode == 77:
        pytest.skip("the kernel refuses a mount namespace here")
    assert native.returncode == 0, native.stderr
    proc = watched(WRAP + CLI + ["run", "--delegate", mode, "--", str(exe), action])
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr
