"""Reading and writing `coreplane-profile/1` files (docs/formats.md): every field checked with a
one-line error naming the file and the field, unknown fields kept, saved atomically."""

import json
import os
from pathlib import Path
from typing import Any

from coreplane.core import documents
from coreplane.core.errors import CoreplaneError
from coreplane.profile.records import FORMAT, CallStats, Profile, Thread


class ProfileError(CoreplaneError):
    """A profile that does not follow the schema: names the file and the field."""


class _Reader:
    """Checks one JSON document against the schema; every error names the file and the field."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, where: str, what: str) -> None:
        raise ProfileError(f"{self.source}: {where}: {what}")

    def get(self, obj: dict, key: str, where: str, kind: str, required: bool = True, default: Any = None):
        path = f"{where}.{key}" if where else key
        if key not in obj:
            if required:
                self.fail(path, "missing")
            return default
        value = obj[key]
        if value is None and not required:
            return default
        ok = {
            "int": isinstance(value, int) and not isinstance(value, bool) and value >= 0,
            "number": isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0,
            "str": isinstance(value, str) and value != "",
            "list": isinstance(value, list),
            "object": isinstance(value, dict),
        }[kind]
        if not ok:
            wanted = {"int": "a non-negative integer", "number": "a non-negative number",
                      "str": "a non-empty string", "list": "a list", "object": "an object"}[kind]
            self.fail(path, f"expected {wanted}, got {_short(value)}")
        return value

    def stats_object(self, obj: dict, key: str, where: str) -> dict | None:
        value = self.get(obj, key, where, "object", required=False)
        if value is not None:
            for k in value:
                self.get(value, k, f"{where}.{key}", "number")
        return value

    def call(self, obj: Any, where: str) -> CallStats:
        if not isinstance(obj, dict):
            self.fail(where, f"expected an object, got {_short(obj)}")
        known = {"name", "nr", "count", "errors", "total_ns", "local", "delegated", "served", "forward_ns", "queued_ns",
                 "first_ns", "last_ns", "bytes"}
        c = CallStats(
            name=self.get(obj, "name", where, "str"),
            nr=self.get(obj, "nr", where, "int", required=False),
            count=self.get(obj, "count", where, "int"),
            errors=self.get(obj, "errors", where, "int", required=False, default=0),
            total_ns=self.get(obj, "total_ns", where, "number"),
            local=self.get(obj, "local", where, "int", required=False, default=0),
            delegated=self.get(obj, "delegated", where, "int", required=False, default=0),
            served=self.get(obj, "served", where, "int", required=False),
            forward_ns=self.stats_object(obj, "forward_ns", where),
            queued_ns=self.stats_object(obj, "queued_ns", where),
            first_ns=self.get(obj, "first_ns", where, "int", required=False),
            last_ns=self.get(obj, "last_ns", where, "int", required=False),
            bytes=self.get(obj, "bytes", where, "int", required=False),
            extra={k: v for k, v in obj.items() if k not in known},
        )
        if c.first_ns is not None and c.last_ns is not None and c.last_ns < c.first_ns:
            self.fail(f"{where}.last_ns", f"{c.last_ns} is before first_ns {c.first_ns}")
        if c.errors > c.count:
            self.fail(f"{where}.errors", f"{c.errors} errors but only {c.count} calls")
        if c.local + c.delegated + (c.served or 0) > c.count:
            served = f" + served {c.served}" if c.served else ""
            self.fail(f"{where}.delegated", f"local {c.local} + delegated {c.delegated}{served} exceeds count {c.count}")
        return c

    def calls(self, obj: dict, where: str) -> list[CallStats]:
        items = self.get(obj, "syscalls", where, "list")
        base = f"{where}.syscalls" if where else "syscalls"
        calls = [self.call(item, f"{base}[{i}]") for i, item in enumerate(items)]
        seen = set()
        for i, c in enumerate(calls):
            if c.name in seen:
                self.fail(f"{base}[{i}].name", f"{c.name!r} appears twice")
            seen.add(c.name)
        return calls

    def thread(self, obj: Any, where: str) -> Thread:
        if not isinstance(obj, dict):
            self.fail(where, f"expected an object, got {_short(obj)}")
        t = Thread(
            pid=self.get(obj, "pid", where, "int"),
            tid=self.get(obj, "tid", where, "int"),
            start_ns=self.get(obj, "start_ns", where, "int"),
            end_ns=self.get(obj, "end_ns", where, "int"),
            syscalls=self.calls(obj, where),
            extra={k: v for k, v in obj.items() if k not in {"pid", "tid", "start_ns", "end_ns", "syscalls"}},
        )
        if t.end_ns < t.start_ns:
            self.fail(f"{where}.end_ns", f"{t.end_ns} is before start_ns {t.start_ns}")
        return t

    def profile(self, doc: Any) -> Profile:
        if not isinstance(doc, dict):
            self.fail("(top level)", f"expected an object, got {_short(doc)}")
        fmt = doc.get("format")
        if fmt != FORMAT:
            self.fail("format", f"expected {FORMAT!r}, got {_short(fmt)}")
        known = {"format", "program", "argv", "config", "wall_ns", "user_ns", "sys_ns", "exit",
                 "overhead", "not_intercepted", "syscalls", "threads"}
        argv = self.get(doc, "argv", "", "list", required=False, default=[])
        for i, a in enumerate(argv):
            if not isinstance(a, str):
                self.fail(f"argv[{i}]", f"expected a string, got {_short(a)}")
        profile = Profile(
            program=self.get(doc, "program", "", "str"),
            argv=argv,
            config=self.get(doc, "config", "", "object", required=False),
            wall_ns=self.get(doc, "wall_ns", "", "int"),
            user_ns=self.get(doc, "user_ns", "", "int", required=False),
            sys_ns=self.get(doc, "sys_ns", "", "int", required=False),
            exit=self.get(doc, "exit", "", "object", required=False),
            overhead=self.get(doc, "overhead", "", "object", required=False),
            not_intercepted=self.get(doc, "not_intercepted", "", "list", required=False, default=[]),
            syscalls=self.calls(doc, ""),
            threads=[self.thread(t, f"threads[{i}]")
                     for i, t in enumerate(self.get(doc, "threads", "", "list", required=False, default=[]))],
            extra={k: v for k, v in doc.items() if k not in known},
            source=self.source,
        )
        if profile.wall_ns == 0:
            self.fail("wall_ns", "must be positive")
        if profile.config is not None:
            self.config(profile.config)
        return profile

    def config(self, cfg: dict) -> None:
        self.get(cfg, "policy", "config", "str", required=False)
        self.get(cfg, "forward_cost_ns", "config", "number", required=False)
        self.get(cfg, "delegates", "config", "int", required=False)
        for key in ("delegated", "compute_cores", "control_cores"):
            self.get(cfg, key, "config", "list", required=False)


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def from_dict(doc: Any, source: str = "<profile>") -> Profile:
    """Builds a Profile from a parsed JSON document, checking every field."""
    return _Reader(source).profile(doc)


def load(path: str | os.PathLike) -> Profile:
    """Reads and checks a profile file; a bad file raises ProfileError naming it and the field."""
    path = str(path)
    return from_dict(documents.read_json(path), path)


def fill_thread_ends(doc: dict) -> dict:
    """Threads still running when their process called exit_group have no end of their own in the
    runtime's profile (end_ns null): they ended with the process."""
    ends = {p.get("pid"): p.get("end_ns") for p in doc.get("processes") or []}
    for t in doc.get("threads") or []:
        if t.get("end_ns") is None:
            t["end_ns"] = ends.get(t.get("pid")) or doc.get("wall_ns")
            t["end_from"] = "process"
    return doc


def save(profile: Profile, path: str | os.PathLike) -> None:
    """Writes the profile atomically: a crash leaves the old file or the new."""
    documents.write(path, profile.to_dict())
