"""The synthetic benchmark of paper 002 §4.1 (workloads/bin/gain_synth): a profile's mix, its command line, a run."""

import json
import subprocess
from functools import cache
from pathlib import Path

from coreplane.core.errors import CoreplaneError
from coreplane.core.native import REPO_ROOT
from coreplane.profile.records import Profile

BINARY = REPO_ROOT / "workloads" / "bin" / "gain_synth"


def binary() -> Path:
    """The built benchmark; `make workloads` builds it."""
    if not BINARY.is_file():
        raise CoreplaneError(f"{BINARY}: not built; run `make workloads`")
    return BINARY


@cache
def supported() -> frozenset[str]:
    """The syscalls gain_synth can replay (`gain_synth -l`)."""
    out = subprocess.run([str(binary()), "-l"], capture_output=True, text=True, check=True).stdout
    return frozenset(out.split())


def mix_from_profile(profile: Profile, phases: int) -> tuple[dict[str, int], list[str]]:
    """Calls per phase that replay the profile's n(s) over `phases` phases (rounded, at least 1 for a
    call the profile made), and the names gain_synth cannot replay (process set-up, waits on others)."""
    mix, dropped = {}, []
    for call in sorted(profile.syscalls, key=lambda c: -c.count):
        if call.name in supported():
            mix[call.name] = max(1, round(call.count / phases)) if call.count else 0
        else:
            dropped.append(call.name)
    return mix, dropped


def write_mix(mix: dict[str, int], path: str | Path, comment: str = "") -> Path:
    """Writes a mix file (docs/formats.md): one `NAME COUNT` line per call, per phase and thread."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    path.write_text(head + "".join(f"{name} {count}\n" for name, count in mix.items()))
    return path


def command(mix_path: str | Path | None = None, gamma: float = 1.0, trials: int = 200_000, phases: int = 100,
            threads: int = 1, io_bytes: int = 4096) -> list[str]:
    """The gain_synth command line, e.g. to hand to `coreplane run --`."""
    argv = [str(binary()), "-g", repr(float(gamma)), "-w", str(trials), "-p", str(phases),
            "-t", str(threads), "-b", str(io_bytes)]
    return argv + (["-m", str(mix_path)] if mix_path else [])


def run(argv: list[str], timeout: float = 600) -> dict:
    """Runs a gain_synth command; returns its JSON report (wall, compute and syscall ns, calls made)."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise CoreplaneError(proc.stderr.strip() or f"gain_synth: exit status {proc.returncode}")
    return json.loads(proc.stdout)


def trials_for(compute_ns: float, probe_trials: int = 2_000_000) -> int:
    """Monte Carlo trials that take about `compute_ns` on this machine (one timed probe phase)."""
    probe = run(command(trials=probe_trials, phases=1))
    return max(1, round(compute_ns * probe_trials / max(1, probe["compute_ns"])))
