"""Paper 001's INFOFILE (`key=v1,v2,...` lines) read into a `Spec`; the mapping is in docs/formats.md."""

from __future__ import annotations

import re
from typing import Any

from coreplane.core.errors import CoreplaneError
from coreplane.dse.spec import Spec, Where, from_dict, value_range

# INFOFILE keys that set the spec instead of naming a parameter, and the spec path each sets.
INFO_SETTINGS = {
    "name": ("name",), "command": ("command",), "workdir": ("workdir",),
    "repetitions": ("repetitions",), "warmups": ("warmups",),
    "timeout": ("timeout",), "timeout_factor": ("timeout", "factor"), "timeout_floor": ("timeout", "floor"),
    "timeout_initial": ("timeout", "initial"), "size_class": ("timeout", "size_class"),
    "retries": ("retries", "count"), "backoff": ("retries", "backoff"), "retry_on": ("retries", "on"),
    "cv_threshold": ("statistics", "cv_threshold"), "max_repetitions": ("statistics", "max_repetitions"),
    "metrics": ("metrics",), "zip": ("expand", "zip"),
}
_INFO_LISTS = ("retry_on", "size_class")
_INFO_RANGE = re.compile(r"^(-?[\d.]+)\.\.(-?[\d.]+)(?::(\*?)([\d.]+))?$")
# What can only be meant as a range (numbers around "..", maybe ":step"): a value such as `../data`
# or `1.2.3` stays a string, but `1..`, `..4` or `1..4:` is a range written wrong, not the value "1..".
_INFO_RANGE_LIKE = re.compile(r"^(?=.*\d)-?[\d.]*\.\.[-\d.:*]*$")
_RANGE_FORMS = "start..stop, start..stop:step or start..stop:*factor"


class _InfoWhere(Where):
    """Errors in an INFOFILE point at the line of the key that set the offending spec path."""

    def __init__(self, source: str):
        super().__init__(source, "")
        self.origin: dict[tuple, int] = {}

    def line_of(self, path: tuple) -> int:
        for cut in range(len(path), 0, -1):
            if path[:cut] in self.origin:
                return self.origin[path[:cut]]
        return 1


def parse_scalar(text: str) -> int | float | str:
    """"64" -> 64, "0.5" -> 0.5, anything else stays a string."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _info_values(text: str, line: int, key: str, source: str) -> list:
    """`a,b,c`, or a range `start..stop` / `start..stop:step` / `start..stop:*factor`."""
    match = _INFO_RANGE.match(text)
    if match:
        start, stop, geometric, step = (parse_scalar(g) if g else g for g in match.groups())
        if any(isinstance(v, str) and v for v in (start, stop, step)):
            raise CoreplaneError(f"{source}:{line}: {key}: not a numeric range: {text}")
        try:
            return value_range(start, stop, None if geometric else step, step if geometric else None)
        except ValueError as exc:
            raise CoreplaneError(f"{source}:{line}: {key}: {exc}") from None
    values = [v.strip() for v in text.split(",")]
    if any(v == "" for v in values):
        raise CoreplaneError(f"{source}:{line}: {key}: empty value in '{text}'")
    for v in values:
        if _INFO_RANGE_LIKE.match(v):
            problem = "a range stands alone, not in a list" if len(values) > 1 else "malformed range"
            raise CoreplaneError(f"{source}:{line}: {key}: {problem}: '{v}' (write {_RANGE_FORMS})")
    return [parse_scalar(v) for v in values]


def _info_setting(doc: dict, key: str, value: str) -> None:
    """Puts one reserved INFOFILE key into the spec dict (types are checked by `from_dict`)."""
    path = INFO_SETTINGS[key]
    if key == "timeout":
        doc["timeout"]["adaptive" if value == "adaptive" else "seconds"] = True if value == "adaptive" else parse_scalar(value)
    elif key == "metrics":
        doc["metrics"].extend({"source": v.strip()} for v in value.split(","))
    elif key == "zip":
        doc["expand"] = {"zip": [[n.strip() for n in group.split("+")] for group in value.split(",")]}
    elif len(path) == 2:
        doc.setdefault(path[0], {})[path[1]] = ([v.strip() for v in value.split(",")] if key in _INFO_LISTS
                                                else parse_scalar(value))
    else:
        doc[path[0]] = value if key in ("name", "command", "workdir") else parse_scalar(value)


def parse_infofile(text: str, source: str) -> Spec:
    """Paper 001's INFOFILE: `key=v1,v2,...` lines; see docs/formats.md for the key mapping."""
    doc: dict[str, Any] = {"parameters": {}, "env": {}, "tags": {}, "metrics": [], "timeout": {}}
    where = _InfoWhere(source)
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            raise CoreplaneError(f"{source}:{number}: expected key=value, got '{line}'")
        key, value = (s.strip() for s in line.split("=", 1))
        if not re.match(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$", key):
            raise CoreplaneError(f"{source}:{number}: bad key '{key}'")
        if key in seen:
            raise CoreplaneError(f"{source}:{number}: {key}: already set on line {seen[key]}")
        if not value:
            raise CoreplaneError(f"{source}:{number}: {key}: no value")
        seen[key] = number
        prefix, _, rest = key.partition(".")
        if prefix == "env" and rest:
            doc["env"][rest] = value
            where.origin[("env", rest)] = number
        elif prefix == "tag" and rest:
            doc["tags"][rest] = value
        elif prefix == "metric" and rest:
            where.origin[("metrics", len(doc["metrics"]))] = number
            doc["metrics"].append({"source": "regex", "name": rest, "pattern": value})
        elif prefix == "json" and rest:
            where.origin[("metrics", len(doc["metrics"]))] = number
            doc["metrics"].append({"source": "json", "fields": {rest: value}})
        elif rest:
            raise CoreplaneError(f"{source}:{number}: {key}: unknown prefix '{prefix}.' (env., tag., metric., json.)")
        elif key in INFO_SETTINGS:
            if key == "metrics":
                for i in range(len(value.split(","))):
                    where.origin[("metrics", len(doc["metrics"]) + i)] = number
            where.origin[INFO_SETTINGS[key]] = number
            _info_setting(doc, key, value)
        else:
            where.origin[("parameters", key)] = number
            doc["parameters"][key] = _info_values(value, number, key, source)
    if not doc["timeout"]:
        del doc["timeout"]
    elif set(doc["timeout"]) - {"seconds", "adaptive"} and "timeout" not in seen:
        where.origin[("timeout",)] = min(where.origin[p] for p in where.origin if p[0] == "timeout")
    return from_dict(doc, source, text, where)
