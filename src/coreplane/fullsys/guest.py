"""Booting QEMU/TCG guests from an image, with or without the osact plugin, a workload disk and a network, and classifying how each ended."""

import re
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from coreplane.core.errors import CoreplaneError
from coreplane.fullsys.paths import TURNS_PLUGIN, built

QEMU = "qemu-system-x86_64"
BOOT_MARKER = "coreplane-fullsys: booted"
WORKLOAD_MARKER = "coreplane-fullsys: workload exit"
TAIL_CHARS = 160
# Every guest runs at this niceness above its caller: QEMU/TCG takes a whole CPU for minutes, and
# the machines running it are shared (the regression run in `make test` included).
NICENESS = 10


@dataclass(frozen=True)
class Extras:
    """What a guest gets beyond the image: its workload disk (written by the guest), its NIC on a
    QEMU network shared with other guests (a -netdev specification and the NIC's MAC), a QMP socket
    to control it, a saved state to start from instead of booting (fullsys/snapshot.py), more
    plugins ("PATH,ARGS": the lockstep plugin of a common clock), and the interval (virtual µs)
    at which frames the NIC receives are released, held until then (0: at once)."""

    disk: Path | None = None
    netdev: str | None = None
    mac: str | None = None
    qmp: Path | None = None
    incoming: Path | None = None
    plugins: tuple[str, ...] = ()
    link_interval_us: int = 0


@dataclass
class Running:
    """A started guest: the QEMU process, its console log and what it must print to count as done."""

    proc: subprocess.Popen
    image: Path
    log: Path
    plugin: str | None
    expect: str
    started: float


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
# Under -icount QEMU 7.2 lets one vCPU of a guest run to the next timer deadline while the others
# wait: a guest of several vCPUs hangs at its SMP boot. The turns plugin (plugins/turns.c) ends
# every vCPU's turn after this many instructions (0.1 ms of virtual time).
TURN_INSTRUCTIONS = 100_000


def command(image: Path, memory_mb: int, vcpus: int, append: str, plugin: str | None, icount: bool,
            extras: Extras = Extras(), idle_sleep: bool = False) -> list[str]:
    """The QEMU command line: TCG, with -icount when asked (one instruction per virtual ns) so
    repetitions execute the same instruction stream; an idle guest's clock leaps to its next timer
    (sleep=off) or, with `idle_sleep`, follows the host's clock while the guest waits (sleep=on:
    a guest waiting for a peer does not race through its timers); the image's own kernel
    booted directly; the image's disk opened copy-on-write so runs never change the cached image,
    the workload disk (second virtio disk, /dev/vdb) read-write; a virtio NIC when a netdev is
    given; a QMP socket and a saved state to start from when `extras` has them; with several
    vCPUs under -icount the turns plugin, which lets them take turns."""
    if shutil.which(QEMU) is None:
        raise CoreplaneError(f"{QEMU} is missing: run `make fullsys-setup` first")
    sleep = "on" if idle_sleep else "off"
    timing = ["-icount", f"shift=0,sleep={sleep}", "-rtc", "clock=vm"] if icount else []
    append = f"{append} {ICOUNT_APPEND}" if icount else append
    cmd = [QEMU, "-accel", "tcg", *timing, "-m", str(memory_mb), "-smp", str(vcpus), "-no-user-config", "-vga", "none", "-display", "none",
           "-monitor", "none",
           "-no-reboot", "-kernel", str(image / "vmlinuz"), "-initrd", str(image / "initrd.img"),
           "-append", f"console=ttyS0 root=/dev/vda ro init=/coreplane/init panic=-1 quiet {append}",
           "-drive", f"file={image / 'rootfs.ext4'},if=virtio,format=raw,snapshot=on",
           "-serial", "stdio"]
    if extras.disk:
        cmd += ["-drive", f"file={extras.disk},if=virtio,format=raw"]
    if extras.netdev:
        # romfile= : no PXE option ROM, the kernel is booted directly.
        cmd += ["-netdev", f"{extras.netdev},id=net0", "-device", f"virtio-net-pci,netdev=net0,mac={extras.mac},romfile="]
        if extras.link_interval_us:
            # QEMU's filter-buffer holds what the NIC receives and releases it at every multiple of
            # the interval on the guest's virtual clock: a link delay of up to the interval.
            cmd += ["-object", f"filter-buffer,id=link0,netdev=net0,queue=rx,interval={extras.link_interval_us}"]
    else:
        cmd += ["-nic", "none"]
    if extras.qmp:
        cmd += ["-qmp", f"unix:{extras.qmp},server=on,wait=off"]
    if extras.incoming:
        # QEMU 7.2 has no file: migration; the state is streamed in by cat.
        cmd += ["-incoming", f"exec:cat {shlex.quote(str(extras.incoming))}"]
    if icount and vcpus > 1:
        cmd += ["-plugin", f"{built(TURNS_PLUGIN)},turn={TURN_INSTRUCTIONS}"]
    for extra in extras.plugins:
        cmd += ["-plugin", extra]
    return cmd + (["-plugin", plugin] if plugin else [])


def start(image: Path, log: Path, *, append: str = "", plugin: str | None = None, memory_mb: int = 1024,
          vcpus: int = 1, icount: bool = True, expect: str = BOOT_MARKER, extras: Extras = Extras(),
          idle_sleep: bool = False) -> Running:
    """Starts a guest booting `image` at NICENESS, console to `log`; `finish` waits for it."""
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = command(image, memory_mb, vcpus, append, plugin, icount, extras, idle_sleep)
    # QEMU's messages go to a file, not a pipe: guests started together are waited for one by one.
    # nice execs QEMU: the process waited for and killed is QEMU itself.
    with open(log, "wb") as out, open(log.with_suffix(".stderr"), "wb") as err:
        proc = subprocess.Popen(["nice", "-n", str(NICENESS), *cmd], stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    return Running(proc, image, log, plugin, expect, time.monotonic())


def stop(guest: Running) -> None:
    """Kills a guest still running (its peers failed); nothing when it has ended."""
    if guest.proc.poll() is None:
        guest.proc.kill()
    guest.proc.wait()


# A wait that overshoots its slice by STALL_S or more means this process was stopped (a cgroup
# freezer, as the shared machines' quiet measurements use, or a starved host): its guests were
# stopped with it, so the time-out moves on by as much. Session 7's restored 4-node run that
# "hung" was frozen from 13:54 to 14:12 and killed at its deadline when thawed (docs/benchmarks.md).
WAIT_SLICE_S = 1.0
STALL_S = 5.0


class Deadline:
    """A time-out for a run's guests on the host's monotonic clock, not counting the time the
    waiting process was stopped (slices of its wait that overshot by STALL_S or more)."""

    def __init__(self, seconds: float, start: float):
        self.seconds, self.end, self.stalled_s = seconds, start + seconds, 0.0

    def wait(self, proc: subprocess.Popen) -> bool:
        """Waits for `proc` until the deadline, in slices; whether it ended."""
        while (remaining := self.end - time.monotonic()) > 0:
            began = time.monotonic()
            try:
                proc.wait(timeout=min(WAIT_SLICE_S, remaining))
                return True
            except subprocess.TimeoutExpired:
                overshoot = time.monotonic() - began - min(WAIT_SLICE_S, remaining)
                if overshoot >= STALL_S:
                    self.stalled_s += overshoot
                    self.end += overshoot
        return proc.poll() is not None


def finish(guest: Running, deadline: Deadline) -> Boot:
    """Waits until the guest powers off or the `deadline` passes; one-line errors for a plugin
    that does not load, a guest that never prints what it must, and a time-out."""
    proc, image, log, plugin, expect = guest.proc, guest.image, guest.log, guest.plugin, guest.expect
    if not deadline.wait(proc):
        stop(guest)
        text = log.read_text(errors="replace")
        stalled = f" (and {deadline.stalled_s:.0f} s stopped, not counted)" if deadline.stalled_s else ""
        raise CoreplaneError(f"guest {image.name} did not finish in {deadline.seconds:.0f} s{stalled}: console "
                             f"ends '{console_tail(text)}' (full log {log})")
    wall = time.monotonic() - guest.started
    text = log.read_text(errors="replace")
    message = log.with_suffix(".stderr").read_text(errors="replace").strip()
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


def boot(image: Path, log: Path, *, timeout_s: float = 900, **how) -> Boot:
    """Boots `image` until it powers off (`start`'s options), console to `log`; `finish`'s errors."""
    guest = start(image, log, **how)
    return finish(guest, Deadline(timeout_s, guest.started))
