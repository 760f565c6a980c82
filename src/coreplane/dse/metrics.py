"""Metric extraction from a finished run: coreplane profiles, `/usr/bin/time -v`, JSON fields, regexes."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from coreplane.dse.spec import Metric

TIME_FILE = "time.txt"

# `/usr/bin/time -v` labels -> metric names (seconds, kilobytes, counts).
TIME_FIELDS = {
    "User time (seconds)": "user_s",
    "System time (seconds)": "sys_s",
    "Percent of CPU this job got": "cpu_percent",
    "Elapsed (wall clock) time (h:mm:ss or m:ss)": "elapsed_s",
    "Maximum resident set size (kbytes)": "max_rss_kb",
    "Major (requiring I/O) page faults": "major_faults",
    "Minor (reclaiming a frame) page faults": "minor_faults",
    "Voluntary context switches": "voluntary_switches",
    "Involuntary context switches": "involuntary_switches",
    "File system inputs": "fs_inputs",
    "File system outputs": "fs_outputs",
}
_TIME_SIGNAL = re.compile(r"Command terminated by signal (\d+)")


class ParseError(Exception):
    """A run finished but a metric it should have produced is missing or malformed."""


def _clock(text: str) -> float:
    """`h:mm:ss` or `m:ss.ss` -> seconds."""
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


def parse_time(text: str) -> dict[str, float]:
    """The numbers of a GNU `time -v` report."""
    out = {}
    for line in text.splitlines():
        label, sep, value = line.strip().rpartition(": ")
        if not sep or label not in TIME_FIELDS:
            continue
        value = value.strip().rstrip("%")
        try:
            out[TIME_FIELDS[label]] = _clock(value) if ":" in value else float(value)
        except ValueError:
            raise ParseError(f"{TIME_FILE}: '{label}' has a bad value '{value}'") from None
    if "user_s" not in out:
        raise ParseError(f"{TIME_FILE}: no `time -v` report found")
    return out


def time_signal(run_dir: Path) -> int | None:
    """The signal `/usr/bin/time` says killed the command, if it says so."""
    try:
        match = _TIME_SIGNAL.search((run_dir / TIME_FILE).read_text()[:200])
    except OSError:
        return None
    return int(match.group(1)) if match else None


def parse_profile(doc: dict) -> dict[str, float]:
    """Totals and per-syscall figures of a `coreplane-profile/1` document (docs/formats.md)."""
    if doc.get("format") != "coreplane-profile/1":
        raise ParseError(f"not a coreplane-profile/1 document (format {doc.get('format')!r})")
    try:
        out = {k: float(doc[k]) for k in ("wall_ns", "user_ns", "sys_ns")}
        calls = doc.get("syscalls", [])
        out["syscalls"] = float(sum(s["count"] for s in calls))
        out["syscall_ns"] = float(sum(s["total_ns"] for s in calls))
        out["delegated"] = float(sum(s.get("delegated", 0) for s in calls))
        out["system_share"] = out["syscall_ns"] / out["wall_ns"] if out["wall_ns"] else math.nan
        for s in calls:
            out[f"syscall.{s['name']}.count"] = float(s["count"])
            out[f"syscall.{s['name']}.total_ns"] = float(s["total_ns"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ParseError(f"profile: missing or bad field {exc}") from None
    return out


def json_field(doc, dotted: str) -> float:
    """The number at `a.b.0.c` in a JSON document (booleans count as 0/1)."""
    node = doc
    for part in dotted.split("."):
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ParseError(f"json: no field '{dotted}' (stopped at '{part}')") from None
    if isinstance(node, bool):
        return float(node)
    if not isinstance(node, (int, float)):
        raise ParseError(f"json: field '{dotted}' is {node!r}, not a number")
    return float(node)


def _read(run_dir: Path, name: str, what: str) -> str:
    try:
        return (run_dir / name).read_text(errors="replace")
    except OSError as exc:
        raise ParseError(f"{what}: cannot read {name}: {exc.strerror}") from None


def _load_json(text: str, what: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"{what}: not JSON ({exc.msg} at line {exc.lineno})") from None


def regex_values(metric: Metric, text: str, where: str) -> dict[str, float]:
    """The last match of the metric's pattern: its named groups, or group 1 (or the match) as `name`."""
    matches = list(re.finditer(metric.pattern, text, re.MULTILINE))
    if not matches:
        raise ParseError(f"regex {metric.pattern!r} matched nothing in {where}")
    last = matches[-1]
    groups = last.groupdict() or {metric.name: last.group(1) if last.re.groups else last.group(0)}
    out = {}
    for name, value in groups.items():
        try:
            out[name] = float(value)
        except (TypeError, ValueError):
            raise ParseError(f"regex {metric.pattern!r}: {name} = {value!r} is not a number") from None
    return out


def extract(metrics: list[Metric], run_dir: Path, stdout_name: str = "stdout", stderr_name: str = "stderr") -> dict[str, float]:
    """All metrics of one run, read from the files in its run directory."""
    out: dict[str, float] = {}
    for m in metrics:
        if m.source == "time":
            out.update(parse_time(_read(run_dir, TIME_FILE, "time")))
        elif m.source == "profile":
            out.update(parse_profile(_load_json(_read(run_dir, m.file, "profile"), m.file)))
        elif m.source == "json":
            name = m.file or stdout_name
            doc = _load_json(_read(run_dir, name, "json"), name)
            out.update({metric: json_field(doc, path) for metric, path in m.fields.items()})
        else:
            name = m.file if m.stream == "file" else {"stdout": stdout_name, "stderr": stderr_name}[m.stream]
            out.update(regex_values(m, _read(run_dir, name, "regex"), name))
    return out
