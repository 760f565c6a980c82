"""Locating and calling coreplane's Rust binaries (target/release/ in a checkout)."""

import json
import os
import shutil
import subprocess
from pathlib import Path

from coreplane.core.errors import CoreplaneError

# src/coreplane/core/native.py -> repository root
REPO_ROOT = Path(__file__).resolve().parents[3]


def binary(name: str) -> Path:
    """Path of Rust binary `name`: $COREPLANE_BIN_DIR, then the checkout's target/release, then PATH."""
    candidates = []
    if os.environ.get("COREPLANE_BIN_DIR"):
        candidates.append(Path(os.environ["COREPLANE_BIN_DIR"]) / name)
    candidates.append(REPO_ROOT / "target" / "release" / name)
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    found = shutil.which(name)
    if found:
        return Path(found)
    raise CoreplaneError(f"{name}: native binary not found (looked in {candidates[-1].parent}); run `make` first")


def run_json(name: str, *args: str) -> dict:
    """Runs a Rust binary that prints one JSON document; its stderr becomes the error."""
    proc = subprocess.run([str(binary(name)), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        msg = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit status {proc.returncode}"
        raise CoreplaneError(msg, proc.returncode or 2)
    return json.loads(proc.stdout)
