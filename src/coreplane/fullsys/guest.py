"""Booting one QEMU/TCG guest from an image, with or without the osact plugin, and classifying how it ended."""

import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from coreplane.core.errors import CoreplaneError

QEMU = "qemu-system-x86_64"
BOOT_MARKER = "coreplane-fullsys: booted"
WORKLOAD_MARKER = "coreplane-fullsys: workload exit"
TAIL_CHARS = 160


@dataclass(frozen=True)
class Boot:
    """What one guest did: its console, how long it took, and the plugin's counts file if any."""

    console: str
    console_path: Path
    wall_s: float


def console_tail(text: str) -> str:
    """The console's last characters on one line, for an error message; a kernel panic's own line
    when there is one (the tail is then the end of its stack trace)."""
    panic = re.search(r"Kernel panic - .*", text)
    flat = " ".join((panic.group(0) if panic else text).split())
    return flat[-TAIL_CHARS:] if flat else "(empty)"


# Under -icount the kernel's early TSC calibration polls the PIT through port I/O, each read ending
# a translation block: billions of instructions before the first console line. The TSC runs at the
# virtual clock's 1 GHz (shift=0), so the kernel is told so.
ICOUNT_APPEND = "tsc_early_khz=1000000"


def command(image: Path, memory_mb: int, vcpus: int, append: str, plugin: str | None, icount: bool) -> list[str]:
    """The QEMU command line: TCG, with -icount when asked (one instruction per virtual ns, idle
    time skipped) so repetitions execute the same instruction stream; the image's own kernel
    booted directly; the disk opened copy-on-write so runs never change the cached image."""
    if shutil.which(QEMU) is None:
        raise CoreplaneError(f"{QEMU} is missing: run `make fullsys-setup` first")
    timing = ["-icount", "shift=0,sleep=off", "-rtc", "clock=vm"] if icount else []
    append = f"{append} {ICOUNT_APPEND}" if icount else append
    cmd = [QEMU, "-accel", "tcg", *timing, "-m", str(memory_mb), "-smp", str(vcpus), "-no-user-config", "-vga", "none", "-display", "none",
           "-monitor", "none",
           "-no-reboot", "-kernel", str(image / "vmlinuz"), "-initrd", str(image / "initrd.img"),
           "-append", f"console=ttyS0 root=/dev/vda ro init=/coreplane/init panic=-1 quiet {append}",
           "-drive", f"file={image / 'rootfs.ext4'},if=virtio,format=raw,snapshot=on",
           "-serial", "stdio", "-nic", "none"]
    return cmd + (["-plugin", plugin] if plugin else [])


def boot(image: Path, log: Path, *, append: str = "", plugin: str | None = None, memory_mb: int = 1024,
         vcpus: int = 1, icount: bool = True, timeout_s: float = 900, expect: str = BOOT_MARKER) -> Boot:
    """Boots `image` until it powers off, console to `log`; one-line errors for a plugin that does
    not load, a guest that never prints `expect`, and a time-out."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(command(image, memory_mb, vcpus, append, plugin, icount), stdout=out,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            _, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            text = log.read_text(errors="replace")
            raise CoreplaneError(f"guest {image.name} did not finish in {timeout_s:.0f} s: console ends "
                                 f"'{console_tail(text)}' (full log {log})") from None
    wall = time.monotonic() - started
    text = log.read_text(errors="replace")
    message = stderr.decode(errors="replace").strip()
    if proc.returncode != 0 and plugin and "plugin" in message.lower():
        raise CoreplaneError(f"plugin {plugin.split(',')[0]} failed to load: {' '.join(message.split())[:200]}")
    if proc.returncode != 0:
        how = (f"was killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
               else f"exited {proc.returncode}")
        raise CoreplaneError(f"qemu {how} for {image.name}{' with plugin ' + plugin if plugin else ''}: "
                             f"'{' '.join(message.split())[:200]}' (console {log})")
    if expect not in text:
        raise CoreplaneError(f"image {image.name} did not boot (no '{expect}' on the console): console ends "
                             f"'{console_tail(text)}' (full log {log})")
    return Boot(text, log, wall)
