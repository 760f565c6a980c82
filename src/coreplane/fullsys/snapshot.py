"""Booted snapshots: a guest of an image booted once per configuration and stopped where it waits for its workload disk, its whole state saved to a file in the image's cache directory; runs start from that state (QEMU's -incoming) instead of booting."""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from coreplane.core.errors import CoreplaneError
from coreplane.fullsys import guest, workdisk

WAITING = "coreplane-fullsys: waiting for a workload disk"
# On the kernel's command line: guest_init.sh waits for a workload disk (kept on restored runs:
# the command lines of the saving and the restoring QEMU stay alike).
APPEND = "coreplane.snapshot"
# The saved guest's NIC is on a QEMU hub of its own (nothing of the host's network is needed);
# a restored run brings its own network.
SAVE_NETDEV = "hubport,hubid=0"
SAVE_MAC = "52:54:00:16:ff:01"
BOOT_TIMEOUT_S = 900
SAVE_TIMEOUT_S = 300


def _qemu_version() -> str:
    return subprocess.run([guest.QEMU, "--version"], capture_output=True, text=True).stdout.split("\n", 1)[0]


def state_path(image: Path, memory_mb: int, vcpus: int) -> Path:
    """Where the booted state of `image` with this memory and these vCPUs is kept: keyed by the QEMU
    that saved it (another QEMU may not load it) and the guest's init (what it waits for)."""
    key = hashlib.sha256(f"{_qemu_version()}\0{memory_mb}\0{vcpus}\0".encode()
                         + (Path(__file__).with_name("guest_init.sh")).read_bytes()).hexdigest()[:12]
    return image / "snapshots" / f"booted-{memory_mb}M-{vcpus}c-{key}.state"


class _Qmp:
    """A QMP connection: one command at a time, events skipped."""

    def __init__(self, path: Path, deadline: float):
        self.sock = socket.socket(socket.AF_UNIX)
        while True:  # QEMU creates the socket while it starts
            try:
                self.sock.connect(str(path))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() > deadline:
                    raise CoreplaneError(f"QEMU opened no QMP socket at {path}") from None
                time.sleep(0.05)
        self.lines = self.sock.makefile("r")
        self._reply()  # the greeting
        self.command("qmp_capabilities")

    def _reply(self) -> dict:
        while True:
            line = self.lines.readline()
            if not line:
                raise CoreplaneError("QEMU closed its QMP socket")
            message = json.loads(line)
            if "event" not in message:
                return message

    def command(self, name: str, **arguments) -> dict:
        self.sock.sendall(json.dumps({"execute": name, "arguments": arguments}).encode() + b"\n")
        reply = self._reply()
        if "error" in reply:
            raise CoreplaneError(f"QMP {name}: {reply['error'].get('desc', reply['error'])}")
        return reply.get("return", {})


def _wait_for_console(running: guest.Running, marker: str, deadline: float) -> None:
    """Until `marker` is on the guest's console; one-line errors when QEMU ends or time runs out."""
    while marker not in running.log.read_text(errors="replace"):
        if running.proc.poll() is not None or time.monotonic() > deadline:
            guest.stop(running)
            message = " ".join(running.log.with_suffix(".stderr").read_text(errors="replace").split())[:200]
            raise CoreplaneError(f"the snapshot's guest never waited for its workload: console ends "
                                 f"'{guest.console_tail(running.log.read_text(errors='replace'))}'"
                                 f"{', qemu: ' + repr(message) if message else ''} (full log {running.log})")
        time.sleep(0.2)


def save(image: Path, memory_mb: int, vcpus: int) -> Path:
    """Boots `image` with a blank workload disk and a NIC, stops it once it waits for its workload,
    saves its state (migration into a file) and quits; the state's path."""
    final = state_path(image, memory_mb, vcpus)
    work = final.with_name(f".{final.stem}.{os.getpid()}")
    work.mkdir(parents=True, exist_ok=True)
    blank = work / "blank.ext4"
    with open(blank, "wb") as f:
        f.truncate(workdisk.DISK_BYTES)
    # A UNIX socket's path has at most 107 bytes: the cache's paths are longer.
    sockets = Path(tempfile.mkdtemp(prefix="coreplane-qmp-"))
    qmp_path = sockets / "qmp.sock"
    extras = guest.Extras(blank, SAVE_NETDEV, SAVE_MAC, qmp=qmp_path)
    running = guest.start(image, work / "console.log", append=APPEND, memory_mb=memory_mb, vcpus=vcpus,
                          extras=extras)
    try:
        _wait_for_console(running, WAITING, running.started + BOOT_TIMEOUT_S)
        qmp = _Qmp(qmp_path, time.monotonic() + 30)
        # Migrated running, not stopped first: the state records the run state, and a guest saved
        # paused would stay paused when restored.
        partial = work / "state"
        qmp.command("migrate", uri=f"exec:cat > {partial}")
        deadline = time.monotonic() + SAVE_TIMEOUT_S
        while (status := qmp.command("query-migrate").get("status")) not in ("completed", "failed", "cancelled"):
            if time.monotonic() > deadline:
                raise CoreplaneError(f"saving {image.name}'s booted state took over {SAVE_TIMEOUT_S} s")
            time.sleep(0.1)
        if status != "completed":
            raise CoreplaneError(f"saving {image.name}'s booted state {status} (console {running.log})")
        qmp.command("quit")
        running.proc.wait(timeout=60)
        partial.rename(final)
    finally:
        guest.stop(running)
        shutil.rmtree(sockets, ignore_errors=True)
    for leftover in work.iterdir():
        leftover.unlink()
    work.rmdir()
    return final


def ensure(image: Path, memory_mb: int, vcpus: int) -> tuple[Path, float]:
    """`image`'s booted state for this configuration from the cache, saved first when missing; the
    path and the seconds spent saving it (0 when cached)."""
    path = state_path(image, memory_mb, vcpus)
    if path.exists():
        return path, 0.0
    started = time.monotonic()
    return save(image, memory_mb, vcpus), time.monotonic() - started
