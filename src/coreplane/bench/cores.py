"""The CPUs a benchmark runs on when none are given."""

import os

from coreplane.core.errors import CoreplaneError


def default_core_pair() -> str:
    """The last two CPUs this process may run on, as "A,B"."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        raise CoreplaneError(f"need two CPUs for a core pair, this process may use only {allowed}")
    return f"{allowed[-2]},{allowed[-1]}"
