"""A program that drops its privileges keeps none through the delegates (issue 12): a delegate is
a thread with credentials of its own, and before session 18 a program that dropped root still
opened /etc/shadow through them (crates/runtime/src/bin/rt/delegate.rs, `credentials_changed`).
A call that changes nothing leaves the delegates (`credentials.rs`). A Landlock domain is a thread's too."""

import os
import subprocess

import pytest

from conftest import CLI, build_program


@pytest.mark.skipif(os.geteuid() != 0, reason="drops root: needs root")
@pytest.mark.parametrize("policy", ["none", "all"])
def test_a_program_that_drops_root_opens_nothing_as_root_afterwards(tmp_path_factory, policy):
    exe = build_program(tmp_path_factory, "drop_root")
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    run = subprocess.run(CLI + ["run", "--delegate", policy, "--", str(exe)], capture_output=True, text=True, timeout=60)
    assert native.stdout == run.stdout == ("as root: opened\nafter a change of nothing: opened\n"
                                           "threads after a change of nothing: the same\nas nobody: refused\n"), run.stderr


@pytest.mark.parametrize("policy", ["none", "all"])
def test_a_program_that_restricts_itself_with_landlock_writes_nothing_afterwards(tmp_path_factory, tmp_path, policy):
    # Before: the delegates, started before landlock_restrict_self, made the open outside the domain.
    exe = build_program(tmp_path_factory, "landlock_self")
    native = subprocess.run([str(exe), str(tmp_path / "native")], capture_output=True, text=True, timeout=30)
    if native.returncode == 77:
        pytest.skip("no Landlock in this kernel")
    run = subprocess.run(CLI + ["run", "--delegate", policy, "--", str(exe), str(tmp_path / "run")], capture_output=True,
                         text=True, timeout=60)
    assert native.stdout == run.stdout == "write after landlock: refused\n", run.stderr
