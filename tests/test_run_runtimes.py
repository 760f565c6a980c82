"""Programs of other runtimes under coreplane run (issue 12): Go's static and cgo binaries
start (Go asks rt_sigaction about every signal), and a Go program with goroutines, a child
process and a loopback HTTP round trip prints what it prints natively, in both modes."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, run_cli

GO_PROGRAM = Path(__file__).parent / "programs" / "gowork"
GO = shutil.which("go") or "/usr/local/go/bin/go"


@pytest.fixture(scope="module", params=["static", "cgo"])
def go_binary(request, tmp_path_factory) -> Path:
    if not Path(GO).exists():
        pytest.skip("no Go toolchain on this machine")
    exe = tmp_path_factory.mktemp("go") / f"gowork-{request.param}"
    env = {**os.environ, "GOCACHE": str(REPO / "target" / "gocache"), "GOFLAGS": "-mod=mod",
           "CGO_ENABLED": "1" if request.param == "cgo" else "0"}
    subprocess.run([GO, "build", "-C", str(GO_PROGRAM), "-o", str(exe), "."], check=True, env=env, timeout=300)
    return exe


@pytest.mark.parametrize("policy", ["none", "all"])
def test_go_program_behaves_as_natively(go_binary, policy):
    native = subprocess.run([str(go_binary)], capture_output=True, text=True, timeout=60)
    assert native.returncode == 0, native.stderr
    proc = run_cli("run", "--delegate", policy, "--", str(go_binary), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == native.stdout


def test_go_reads_its_clocks_through_the_intercepted_vdso(go_binary, tmp_path):
    # Go parses the vDSO itself (AT_SYSINFO_EHDR, versioned symbols) for nanotime and walltime.
    native = subprocess.run([str(go_binary)], capture_output=True, text=True, timeout=60)
    prof = tmp_path / "go.json"
    proc = run_cli("run", "--vdso", "intercept", "--profile", str(prof), "--", str(go_binary), timeout=120)
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr[-2000:]
    rows = {s["name"]: s for s in json.loads(prof.read_text())["syscalls"]}
    assert rows["clock_gettime"]["count"] > 10 and rows["clock_gettime"]["delegated"] == 0
