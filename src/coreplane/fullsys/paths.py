"""Where full-system artefacts live: the plugin, the guest programs, the image cache, the runs, all under target/fullsys."""

from pathlib import Path

from coreplane.core.errors import CoreplaneError
from coreplane.core.native import REPO_ROOT

ROOT = REPO_ROOT / "target" / "fullsys"
IMAGES = ROOT / "images"
RUNS = ROOT / "runs"
PLUGIN = ROOT / "plugins" / "libosact.so"
# Loaded into every guest of several vCPUs under -icount (fullsys/guest.py).
TURNS_PLUGIN = ROOT / "plugins" / "libturns.so"
# Loaded into every node of a run with a common clock (fullsys run --common-clock).
LOCKSTEP_PLUGIN = ROOT / "plugins" / "liblockstep.so"
# The guests' static programs (workloads/fullsys/, built by `make fullsys-setup`).
PROGRAMS = ROOT / "bin"
GUEST_PROGRAMS = ("matmul", "dmm", "dfmm", "netup")
# The OpenMPI baseline's: its remote-shell agent (static) and its multiply, linked against Open
# MPI (`make fullsys-mpi-setup`, with Debian's libopenmpi-dev), put on its runs' disks only.
MPI_PROGRAMS = ("mpirsh", "mpimm")
GUEST_INIT = Path(__file__).with_name("guest_init.sh")
# The Debian suites the study compares (paper 001's "distributions").
SUITES = ("bullseye", "bookworm", "trixie", "sid")
# The regression run's image (fullsys/minimal.py): Debian's kernel, busybox as the user land.
MINIMAL = "minimal"
# Image variants, named SUITE+VARIANT: the suite's image with more Debian packages (the OpenMPI
# baseline's ranks run on SUITE+openmpi).
VARIANTS = {"openmpi": ("openmpi-bin",)}
OPENMPI = "openmpi"


def check_suite(suite: str) -> str:
    """`suite` if it is one of SUITES (alone or +VARIANT) or the minimal image, else a one-line error."""
    base, _, variant = suite.partition("+")
    if base not in (*SUITES, MINIMAL) or (variant and (base == MINIMAL or variant not in VARIANTS)):
        raise CoreplaneError(f"unknown suite {suite!r}: one of {', '.join(SUITES)} (or {MINIMAL}), "
                             f"optionally +{' or +'.join(VARIANTS)}")
    return suite


def variant_packages(suite: str) -> tuple[str, ...]:
    """The Debian packages a SUITE+VARIANT image has beyond its suite's (none for a plain suite)."""
    return VARIANTS[check_suite(suite).partition("+")[2]] if "+" in suite else ()


def built(path: Path) -> Path:
    """`path` if make has built it, else a one-line error naming the target that builds it
    (`make fullsys-mpi-setup` for the OpenMPI baseline's programs, `make fullsys-setup` else)."""
    if not path.exists():
        target = "fullsys-mpi-setup" if path.name in MPI_PROGRAMS else "fullsys-setup"
        raise CoreplaneError(f"{path} is missing: run `make {target}` first")
    return path
