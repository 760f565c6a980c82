"""A one-line description of the machine a figure was measured on."""

import os
import platform

from coreplane.core.errors import CoreplaneError

from coreplane.doctor.checks import cpuinfo_field
from coreplane.doctor.host import Host


def describe() -> dict:
    """CPU model, count, kernel and whether it is a VM: enough to say "which machine"."""
    host = Host("/")
    flags = (cpuinfo_field(host, "flags") or "").split()
    return {
        "cpu": cpuinfo_field(host, "model name") or platform.processor(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "virtual": "hypervisor" in flags,
    }


def default_core_pair() -> str:
    """The last two CPUs this process may run on, as "A,B"."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        raise CoreplaneError(f"need two CPUs for a core pair, this process may use only {allowed}")
    return f"{allowed[-2]},{allowed[-1]}"
