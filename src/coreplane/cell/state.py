"""Where cells are remembered between processes and after crashes: one JSON file per cell
and one for the machine-wide originals, under /run/coreplane/cells, behind one lock."""

import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path

from coreplane.core import documents

STATE_DIR = Path(os.environ.get("COREPLANE_CELL_DIR", "/run/coreplane/cells"))
HOST_FILE = STATE_DIR.parent / "host.json"   # apart from the cells: a cell may be called "host"


def _dir() -> Path:
    STATE_DIR.mkdir(parents=True, exist_ok=True, mode=0o755)
    return STATE_DIR


@contextmanager
def locked():
    """Serialises every cell change on this machine (create, destroy, reap)."""
    with open(_dir() / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def save(name: str, record: dict) -> None:
    documents.write(_dir() / f"{name}.json", record, indent=2)


def load(name: str) -> dict | None:
    try:
        return json.loads((_dir() / f"{name}.json").read_text())
    except FileNotFoundError:
        return None


def forget(name: str) -> None:
    (_dir() / f"{name}.json").unlink(missing_ok=True)


def load_host() -> dict | None:
    """The machine-wide originals, recorded while any cell lives."""
    try:
        return json.loads(HOST_FILE.read_text())
    except FileNotFoundError:
        return None


def save_host(record: dict | None) -> None:
    """Records the originals, or forgets them (None) once they are given back."""
    if record is None:
        HOST_FILE.unlink(missing_ok=True)
        return
    _dir()
    documents.write(HOST_FILE, record, indent=2)


def cell_records() -> dict[str, dict]:
    """Every recorded cell, by name."""
    out = {}
    for path in sorted(_dir().glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
    return out


def stat_fields(tid: int) -> list[str] | None:
    """Fields of /proc/TID/stat after the command name (state first), or None if it is gone."""
    try:
        stat = Path(f"/proc/{tid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def start_time(pid: int) -> int | None:
    """Clock ticks after boot at which `pid` started (tells a live owner from a reused pid);
    None once it has exited, zombies included."""
    fields = stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def owner_alive(owner: dict | None) -> bool:
    """True for cells without an owner, or while the very process that owns it runs."""
    if not owner:
        return True
    return start_time(owner["pid"]) == owner["start_time"]
