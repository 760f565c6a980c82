"""vDSO calls under `--vdso intercept` (issue 12, item 4): they answer as natively, appear in the
profile under their syscall names, follow the delegation policy, and `mos` keeps them local;
`--vdso native` (the default) leaves them unseen and says so."""

import json
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli

PROGRAMS = Path(__file__).parent / "programs"
N = 2000
VDSO_CALLS = ("clock_gettime", "gettimeofday", "time")


@pytest.fixture(scope="module")
def vdso_calls(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("prog") / "vdso_calls"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(PROGRAMS / "vdso_calls.c")], check=True)
    return exe


def _profile(tmp_path: Path, exe: Path, *options: str) -> dict:
    prof = tmp_path / "p.json"
    proc = run_cli("run", "--profile", str(prof), *options, "--", str(exe), str(N))
    assert (proc.returncode, proc.stdout) == (0, f"{N} {N} {N} 1\n"), proc.stderr
    return json.loads(prof.read_text())


def _rows(doc: dict) -> dict:
    return {s["name"]: s for s in doc["syscalls"]}


@pytest.mark.parametrize("policy", ["none", "all", "mos"])
def test_intercepted_vdso_calls_are_profiled_and_follow_the_policy(vdso_calls, tmp_path, policy):
    doc = _profile(tmp_path, vdso_calls, "--vdso", "intercept", "--delegate", policy)
    rows = _rows(doc)
    assert doc["config"]["vdso"] == "intercept" and doc["not_intercepted"] == []
    # The program's own calls plus the C library's (a few at start-up).
    assert all(N <= rows[name]["count"] < N + 50 for name in VDSO_CALLS), {n: rows.get(n) for n in VDSO_CALLS}
    # clock_getres once, and the invalid clock's fallback to the kernel counted once.
    assert 1 <= rows["clock_getres"]["count"] < 10
    assert rows["clock_gettime"]["errors"] == 1
    delegated = {name: rows[name]["delegated"] for name in VDSO_CALLS}
    if policy == "all":
        assert delegated == {name: rows[name]["count"] for name in VDSO_CALLS}
    else:  # none, and mos, which keeps the clocks local as mOS does
        assert delegated == {name: 0 for name in VDSO_CALLS}
        assert all(rows[name]["timed"] == rows[name]["count"] for name in VDSO_CALLS)


def test_native_vdso_calls_stay_unseen(vdso_calls, tmp_path):
    doc = _profile(tmp_path, vdso_calls)
    rows = _rows(doc)
    assert doc["config"]["vdso"] == "native"
    assert set(VDSO_CALLS) <= set(doc["not_intercepted"])
    # Only the invalid clock reaches the kernel (the vDSO falls back to the syscall).
    assert rows["clock_gettime"]["count"] < 10 and "gettimeofday" not in rows



def test_bench_measures_a_vdso_call_each_way():
    from coreplane.bench.paths import vdso
    doc = vdso(1, 1, 0)
    assert set(doc["median_ns"]) == {"native", "runtime_vdso_native", "intercepted_local", "intercepted_delegated"}
    assert all(v > 0 for v in doc["median_ns"].values())
