"""Memory locking under the memory service (issue 15, `--memory pool` and `pool-demand`; the
runtime's `memsvc/lock.rs`): mlockall, mlock2, munlock and munlockall do what they do natively,
for root and for an unprivileged user, at RLIMIT_MEMLOCK's default and below it.

Before (session 23): the pool's reservation (three times budget and growth, PROT_NONE) counted in
the process's total_vm, so an unprivileged mlockall(MCL_CURRENT) failed with ENOMEM (strace's
`mlockall` test as user nobody) and a privileged one locked the whole reservation (VmLck of GiBs);
MCL_FUTURE left the memory the pool handed out later unlocked; munmap of locked pool memory left
it locked; mlock of pool pages the program had unmapped locked them. And with the fix's first
version, an mremap growing locked pool memory left VmLck 1 MiB too high after its munmap (the
kernel's MREMAP_DONTUNMAP, with which the pool moves page tables, clears the old range's lock
without uncounting it). Its second version locked an mremap's growth by MCL_FUTURE (natively a
mapping keeps its own lock, or its lack, as it grows: a mapping made before mlockall(MCL_FUTURE)
grew unlocked natively and 4 MiB locked under the pool), moved memory locked with MLOCK_ONFAULT
was locked again populated (1 024 pages resident where natively 1), and a locked mapping grown
past RLIMIT_MEMLOCK without MCL_FUTURE succeeded (natively EAGAIN)."""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import CLI, REPO
from coreplane.doctor.probes import userfaultfd
from test_stress import watched

UFFD_OK, UFFD_WHY = userfaultfd()
MEMORY_MODES = ["pool", pytest.param("pool-demand", marks=pytest.mark.skipif(not UFFD_OK, reason=UFFD_WHY))]
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
# Each case prints what it did in words that are the same natively and under the pool (VmLck in
# ranges: the runtime's own mappings add to it); tests/programs/pool_mlock.c says what each checks.
CASES = [["current"], ["future"], ["limit", "64"], ["limit", "0"], ["future_limit"], ["range"], ["remap", "future"],
         ["remap", "mlock"], ["remap_unlocked"], ["remap_onfault"], ["remap_limit"], ["range_errors"]]


@pytest.fixture(scope="module")
def program():
    # In a directory every user may enter: the unprivileged runs execute it as nobody.
    d = Path(tempfile.mkdtemp(prefix="pool-mlock-"))
    d.chmod(0o755)
    exe = d / "pool_mlock"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(REPO / "tests" / "programs" / "pool_mlock.c")], check=True)
    exe.chmod(0o755)
    yield exe
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("memory", MEMORY_MODES)
@pytest.mark.parametrize("who", ["root", "nobody"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(c))
def test_locking_under_the_pool_is_as_native(program, memory, who, case):
    if os.geteuid() != 0:
        pytest.skip("runs as root and as nobody: needs root")
    drop = NOBODY if who == "nobody" else []
    native = watched([*drop, str(program), *case])
    assert native.returncode == 0, native.stderr
    proc = watched(CLI + ["run", "--memory", memory, "--memory-budget", "256M", "--", *drop, str(program), *case])
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr


def test_the_expected_native_answers():
    # What the cases above compare against, as this machine's kernel gives it (RLIMIT_MEMLOCK of
    # 8 MiB for nobody): mlockall succeeds for nobody at the default limit, ENOMEM below what the
    # program maps, EPERM under a zero limit; a later locked mapping past the limit is refused.
    if os.geteuid() != 0:
        pytest.skip("runs as nobody: needs root")
    d = Path(tempfile.mkdtemp(prefix="pool-mlock-"))
    try:
        d.chmod(0o755)
        exe = d / "pool_mlock"
        subprocess.run(["cc", "-O2", "-o", str(exe), str(REPO / "tests" / "programs" / "pool_mlock.c")], check=True)
        exe.chmod(0o755)
        run = lambda *a: watched([*NOBODY, str(exe), *a]).stdout  # noqa: E731
        if "mlockall 0" not in run("current"):
            pytest.skip("nobody's RLIMIT_MEMLOCK here is below a small program's size")
        assert run("limit", "64").startswith("mlockall 12 ")
        assert run("limit", "0").startswith("mlockall 1 ")
        assert run("future_limit") == "mlockall 0\nmmap 16 MiB 11\nsbrk 16 MiB 12\nlocked small 1\n"
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("memory", MEMORY_MODES)
def test_a_mlock_cell_locks_the_program_not_the_pool(program, memory):
    # A cell made with --mlock has `cell exec` set COREPLANE_CELL_MLOCK=1, and the runtime locks
    # the program's memory at its start. Before: under the pool that was the kernel's mlockall,
    # and the reservation was locked whole (VmLck 791 748 kB for a 256 MiB budget), and the pool's
    # memory handed out later was not. Compared with the same run with the kernel's memory.
    if os.geteuid() != 0:
        pytest.skip("locking a whole program needs CAP_IPC_LOCK (root here)")
    runs = {m: watched(["env", "COREPLANE_CELL_MLOCK=1", *CLI, "run", "--memory", m, "--memory-budget", "256M",
                        "--", str(program), "cell"]) for m in ("linux", memory)}
    assert runs["linux"].stdout == "locked at start 1 small 1\nmmap locked 1 resident 1\nmunmap unlocks 1\n"
    assert (runs[memory].returncode, runs[memory].stdout) == (0, runs["linux"].stdout), runs[memory].stderr


@pytest.mark.parametrize("memory", MEMORY_MODES)
def test_refused_mlocks_are_in_the_profile(program, memory, tmp_path):
    # mlock and munlock of pool pages the program unmapped are answered by the runtime (ENOMEM, as
    # natively; `range` makes one of each): before, those answers were missing from the profile
    # (mlock counted once with no error, where natively twice with one).
    counts = {}
    for m in ("linux", memory):
        prof = tmp_path / f"{m}.json"
        proc = watched(CLI + ["run", "--memory", m, "--memory-budget", "256M", "--profile", str(prof), "--",
                              str(program), "range"])
        assert proc.returncode == 0, proc.stderr
        calls = {c["name"]: c for c in json.loads(prof.read_text())["syscalls"]}
        counts[m] = {n: (c["count"], c["errors"]) for n, c in calls.items() if "lock" in n}
    assert counts[memory] == counts["linux"]
