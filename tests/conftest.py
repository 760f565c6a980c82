"""Shared test helpers: the CLI as a subprocess, and the fixture hosts."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HOSTS = REPO / "tests" / "fixtures" / "hosts"
CLI = [str(Path(sys.executable).with_name("coreplane"))]
# Per-user files (the calibration `coreplane project` reads by default) come from a directory of
# the test run's own, never from the home directory of whoever runs the tests.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="coreplane-test-cache-")


def build_program(tmp_path_factory, name: str) -> Path:
    """tests/programs/NAME.c compiled (-O2 -pthread) into a fresh temporary directory."""
    exe = tmp_path_factory.mktemp("prog") / name
    subprocess.run(["cc", "-O2", "-pthread", "-o", str(exe), str(REPO / "tests" / "programs" / f"{name}.c")],
                   check=True)
    return exe


def run_cli(*args: str, check: bool = False, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    """Runs `coreplane ARGS` as a user would; returns the completed process (text mode)."""
    proc = subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "120"}, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"coreplane {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def cli_json(*args: str) -> dict:
    return json.loads(run_cli(*args, "--json", check=True).stdout)


@pytest.fixture
def hosts() -> Path:
    return HOSTS
