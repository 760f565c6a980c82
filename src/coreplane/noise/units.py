"""Durations as people type them ("100ms", "1.5us", "5s") and as the native tools take them (ns)."""

import re

from coreplane.core.errors import CoreplaneError

UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
DURATION_RE = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*(ns|us|µs|ms|s)?\s*")


def parse_duration(text: str, option: str, default_unit: str) -> int:
    """Nanoseconds in `text`; a bare number is in `default_unit`. One-line error names `option`."""
    m = DURATION_RE.fullmatch(str(text))
    if not m:
        raise CoreplaneError(f"{option} {text!r}: not a duration such as 100ms, 50us or 2s")
    ns = round(float(m.group(1)) * UNIT_NS[m.group(2) or default_unit])
    if ns <= 0:
        raise CoreplaneError(f"{option} {text!r}: must be above zero")
    return ns

