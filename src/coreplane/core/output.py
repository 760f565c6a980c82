"""Printing results: a rich rendering for people, or one JSON document for scripts."""

import json
import sys
from typing import Any, Callable

from rich.console import Console

console = Console()


def emit(data: Any, as_json: bool, render: Callable[[Any], None]) -> None:
    """Prints `data` as JSON on stdout when `as_json`, else calls `render(data)`."""
    if as_json:
        json.dump(data, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        render(data)
