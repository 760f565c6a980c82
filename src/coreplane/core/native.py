"""Locating and calling coreplane's Rust binaries (target/release/ in a checkout) and its
bundled C workloads (workloads/bin/)."""

import json
import os
import subprocess
from pathlib import Path

from coreplane.core import binaries
from coreplane.core.errors import CoreplaneError

REPO_ROOT = Path(binaries.REPO_ROOT)
WORKLOADS = REPO_ROOT / "workloads" / "bin"


def binary(name: str) -> Path:
    """Path of Rust binary `name` (core/binaries.py says where it is looked for)."""
    found = binaries.locate(name)
    if found:
        return Path(found)
    raise CoreplaneError(f"{name}: native binary not found (looked in {REPO_ROOT / 'target' / 'release'} "
                         "and $PATH); run `make` first")


def workload(name: str) -> Path:
    """A bundled workload binary; `make workloads` builds them."""
    path = WORKLOADS / name
    if not os.access(path, os.X_OK):
        raise CoreplaneError(f"{path}: not built; run `make workloads`")
    return path


def error_line(stderr: str, returncode: int) -> str:
    """The one line of a Rust binary's failure: its own errors are one last line, but clap's
    (a bad argument) end with "For more information, try '--help'." after the "error:" line."""
    lines = stderr.strip().splitlines()
    clap = [line for line in lines if line.startswith("error: ")]
    return clap[0] if clap else lines[-1] if lines else f"exit status {returncode}"


def run_json(name: str, *args: str) -> dict:
    """Runs a Rust binary that prints one JSON document; its stderr becomes the error."""
    proc = subprocess.run([str(binary(name)), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise CoreplaneError(error_line(proc.stderr, proc.returncode), proc.returncode or 2)
    return json.loads(proc.stdout)
