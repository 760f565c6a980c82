"""A node's workload disk: coreplane's static programs, the node's script and room for what the guest writes back, an ext4 file made per run and read back with debugfs."""

import shutil
import subprocess
from pathlib import Path

from coreplane.core.errors import CoreplaneError
from coreplane.fullsys.paths import GUEST_PROGRAMS, PROGRAMS, built

# The programs are ~1 MiB each; the guest's text symbols (/proc/kallsyms) ~5 MiB.
DISK_BYTES = 32 << 20


def make(directory: Path, script: str, programs: tuple[str, ...] = GUEST_PROGRAMS) -> Path:
    """Writes `script` (run by the guest's init as `sh /mnt/run`, with `programs` beside it) and
    an empty out/ into a new ext4 file in `directory`; returns the file."""
    staging = directory / "disk"
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "out").mkdir(parents=True)
    for name in programs:
        shutil.copy2(built(PROGRAMS / name), staging / name)
    (staging / "run").write_text(script)
    disk = directory / "workload.ext4"
    done = subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "workload", "-d", str(staging), str(disk),
                           f"{DISK_BYTES // 1024}k"], capture_output=True, text=True)
    shutil.rmtree(staging)
    if done.returncode != 0:
        raise CoreplaneError(f"mkfs.ext4 of {disk} failed: {' '.join(done.stderr.split())[:200]}")
    return disk


def read_back(disk: Path, into: Path) -> Path:
    """Copies the guest's out/ from `disk` into `into`/out (debugfs: no mount, no root needed)."""
    into.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["debugfs", "-R", f"rdump /out {into}", str(disk)], capture_output=True, text=True)
    if done.returncode != 0 or not (into / "out").is_dir():
        raise CoreplaneError(f"cannot read the guest's outputs from {disk}: {' '.join(done.stderr.split())[:200]}")
    return into / "out"
