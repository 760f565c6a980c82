"""strace's own test programs as a corpus: the Debian source package fetched through a private
apt configuration, built with its own build system, each program run directly without arguments.

Nothing of the system's apt configuration is read or changed: the sources list (one deb-src line
for this machine's suite), apt's state and its cache live under target/conformance/apt. The
build is cached: configure and `make -C tests check TESTS=` (the check programs, none run) are
redone only when the tree is missing."""

import subprocess
from pathlib import Path

from .compare import REPO, Case

ROOT = REPO / "target" / "conformance"
APT = ROOT / "apt"
SRC = ROOT / "src"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# Helper programs of the suite that need arguments or a tracer to mean anything are still run
# (they are real programs with real exit statuses); only these would run until the timeout by
# design, waiting for a signal or a tracer that never comes, and are left out.
WAIT_FOREVER: set[str] = set()


def suite() -> str:
    """The Debian suite this machine runs (VERSION_CODENAME of /etc/os-release)."""
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip('"')
    raise SystemExit("conformance: /etc/os-release: no VERSION_CODENAME (not Debian?)")


def apt_options() -> list[str]:
    """apt-get options that point every file apt reads or writes into target/conformance/apt."""
    etc = APT / "etc"
    for d in (etc / "sources.list.d", etc / "preferences.d", APT / "state" / "lists" / "partial",
              APT / "cache" / "archives" / "partial"):
        d.mkdir(parents=True, exist_ok=True)
    (etc / "sources.list").write_text(
        f"deb-src [signed-by={KEYRING}] http://deb.debian.org/debian {suite()} main\n")
    return ["-o", f"Dir::Etc::SourceList={etc / 'sources.list'}",
            "-o", f"Dir::Etc::SourceParts={etc / 'sources.list.d'}",
            "-o", f"Dir::Etc::Preferences={etc / 'preferences'}",
            "-o", f"Dir::Etc::PreferencesParts={etc / 'preferences.d'}",
            "-o", f"Dir::State={APT / 'state'}", "-o", f"Dir::Cache={APT / 'cache'}",
            "-o", "Debug::NoLocking=1"]


def source_tree() -> Path:
    """The unpacked strace source (apt-get source), fetched once."""
    trees = sorted(SRC.glob("strace-*/configure"))
    if not trees:
        SRC.mkdir(parents=True, exist_ok=True)
        opts = apt_options()
        subprocess.run(["apt-get", *opts, "-qq", "update"], check=True)
        subprocess.run(["apt-get", *opts, "-qq", "source", "strace"], cwd=SRC, check=True)
        trees = sorted(SRC.glob("strace-*/configure"))
    return trees[-1].parent


def build(tree: Path) -> Path:
    """Configures (no multi-personality tests: x86-64 only) and builds the check programs."""
    tests = tree / "tests"
    stamp = ROOT / f"{tree.name}.built"
    if not stamp.exists():
        if not (tree / "Makefile").exists():
            subprocess.run(["./configure", "--enable-mpers=no", "--disable-dependency-tracking", "-q"],
                           cwd=tree, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["make", "-s", "-j2", "-C", str(tests), "check", "TESTS="], check=True,
                       stdout=subprocess.DEVNULL)
        stamp.touch()
    return tests


def programs(tests: Path) -> list[str]:
    """The suite's check_PROGRAMS, as its own Makefile lists them."""
    printer = "print-check-programs:\n\t@echo $(check_PROGRAMS)\n"
    out = subprocess.run(["make", "-s", "-f", "Makefile", "-f", "-", "print-check-programs"], cwd=tests,
                         input=printer, capture_output=True, text=True, check=True).stdout
    return sorted(set(out.split()) - WAIT_FOREVER)


def cases(limit: list[str] | None = None) -> list[Case]:
    """One case per built test program (or per name in `limit`)."""
    tests = build(source_tree())
    names = limit or programs(tests)
    return [Case(name, [str(tests / name)], timeout=20, group="strace") for name in names]
