"""Reading a JSON document of a known format, with one-line errors naming the file and line, or
the format field; writing one atomically; checking an output directory before work starts."""

import json
import os
import tempfile
from pathlib import Path

from coreplane.core.errors import CoreplaneError


def read_text(path: str | Path, what: str = "") -> str:
    """The text of `path`; `what` names it in the error ("the spec")."""
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise CoreplaneError(f"{path}: cannot read{' ' + what if what else ''}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        # A binary file (a program, a database) given where a text file goes.
        raise CoreplaneError(f"{path}: not a text file (byte {exc.object[exc.start]:#04x} at offset {exc.start} "
                             "is not UTF-8)") from None


def check_output_dir(out: Path) -> None:
    """`--out DIR`, or the nearest part of its path that exists, must be a directory: checked
    before a command starts work (mkdir said only "File exists" of a regular file, after the
    work, or left a half-made output behind)."""
    for part in (out, *out.parents):
        if part.exists():
            if not part.is_dir():
                if part == out:
                    raise CoreplaneError(f"--out {out}: not a directory")
                raise CoreplaneError(f"--out {out}: cannot be made: {part} is not a directory")
            return


def read_json(path: str | Path):
    """The JSON value in `path`."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CoreplaneError(f"{path}: line {exc.lineno}: not JSON ({exc.msg})") from None


def read(path: str | Path, fmt: str) -> dict:
    """The JSON object in `path`, whose "format" field must be `fmt`."""
    doc = read_json(path)
    found = doc.get("format") if isinstance(doc, dict) else None
    if found != fmt:
        raise CoreplaneError(f"{path}: format: expected {fmt}, found {found!r}")
    return doc


def write(path: str | Path, doc, indent: int = 1, default=None) -> Path:
    """Writes `doc` as JSON to `path` atomically: a temporary file beside it, flushed to disk,
    then renamed over it, so a crash (kill -9 included) leaves the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(doc, out, indent=indent, default=default)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path
