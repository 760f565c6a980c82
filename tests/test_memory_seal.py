"""Sealed memory under the memory service (issue 15; the runtime's `memsvc/seal.rs`): munmap and
a shrinking mremap of pool memory the program sealed with mseal fail with EPERM as natively.

Before (session 24's sweep): the pool freed the sealed pages itself, and munmap returned 0 where
natively EPERM."""

import subprocess

import pytest

from conftest import CLI, REPO
from test_memory_lock import MEMORY_MODES
from test_stress import watched


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    exe = tmp_path_factory.mktemp("seal") / "pool_mseal"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(REPO / "tests" / "programs" / "pool_mseal.c")], check=True)
    return exe


@pytest.mark.parametrize("memory", MEMORY_MODES)
@pytest.mark.parametrize("case", [[], ["many"]], ids=["one", "many"])
def test_sealed_pool_memory_is_not_freed(program, memory, case):
    native = watched([str(program), *case])
    if native.returncode == 3:
        pytest.skip("no mseal in this kernel")
    assert native.returncode == 0, native.stderr
    assert "refused %d of %d" % ((2, 2) if not case else (80, 80)) in native.stdout
    proc = watched(CLI + ["run", "--memory", memory, "--memory-budget", "256M", "--", str(program), *case])
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr
