"""Printing results: a rich rendering for people, or one JSON document for scripts."""

import json
import sys
from typing import Any, Callable

from rich.console import Console

# No emoji codes: titles carry user input such as `pattern:ring:8`, which rich printed as
# "pattern💍8"; coreplane writes none on purpose.
console = Console(emoji=False)


def emit(data: Any, as_json: bool, render: Callable[[Any], None]) -> None:
    """Prints `data` as JSON on stdout when `as_json`, else calls `render(data)`."""
    if as_json:
        json.dump(data, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        render(data)


def human_ns(ns: float | None) -> str:
    """A time in the largest unit that keeps it >= 1, to 4 significant digits ("6.28 µs"); "—" for None."""
    if ns is None:
        return "—"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.4g} {unit}"
    return f"{ns:.4g} ns"
