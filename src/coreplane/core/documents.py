"""Reading a JSON document of a known format, with one-line errors naming the file and line, or
the format field."""

import json
from pathlib import Path

from coreplane.core.errors import CoreplaneError


def read_json(path: str | Path):
    """The JSON value in `path`."""
    try:
        return json.loads(Path(path).read_text())
    except OSError as exc:
        raise CoreplaneError(f"{path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise CoreplaneError(f"{path}: line {exc.lineno}: not JSON ({exc.msg})") from None


def read(path: str | Path, fmt: str) -> dict:
    """The JSON object in `path`, whose "format" field must be `fmt`."""
    doc = read_json(path)
    found = doc.get("format") if isinstance(doc, dict) else None
    if found != fmt:
        raise CoreplaneError(f"{path}: format: expected {fmt}, found {found!r}")
    return doc
