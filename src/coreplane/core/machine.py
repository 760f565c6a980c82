"""A one-line description of the machine a result was measured on."""

import os
import platform
from pathlib import Path


def cpuinfo_field(cpuinfo: str | None, key: str) -> str | None:
    """The value of the first `key : value` line in the text of /proc/cpuinfo ("model name", "flags")."""
    for line in (cpuinfo or "").splitlines():
        k, _, v = line.partition(":")
        if k.strip() == key:
            return v.strip()
    return None


def describe() -> dict:
    """CPU model, count, kernel and whether it is a VM: enough to say "which machine"."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        cpuinfo = None
    flags = (cpuinfo_field(cpuinfo, "flags") or "").split()
    return {
        "cpu": cpuinfo_field(cpuinfo, "model name") or platform.processor(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "virtual": "hypervisor" in flags,
    }


def identity() -> dict:
    """Which machine this is, as a profile records it (coreplane-exec writes the same two fields):
    systemd's machine id, stable across boots, and the host name."""
    machine_id = None
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            machine_id = Path(path).read_text().strip() or None
        except OSError:
            continue
        if machine_id:
            break
    return {"id": machine_id, "hostname": platform.node()}
