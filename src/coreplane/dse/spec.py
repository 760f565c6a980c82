"""Sweep specifications: TOML text or a dict (infofile.py makes one of paper 001's INFOFILE) checked into one `Spec`."""

from __future__ import annotations

import difflib
import math
import re
import string
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coreplane.core.errors import CoreplaneError

# Placeholders the runner fills in itself, next to the parameters.
BUILTINS = ("rep", "run_id", "rundir", "cpus", "point_id")
# Column names of coreplane's result tables (results.py), which a parameter name would shadow.
RESERVED = BUILTINS + ("ordinal", "warmup", "status", "attempts", "exit_code", "signal", "message", "wall_s",
                       "timeout_s", "host", "executor", "log_dir", "metric", "value", "n", "mean", "sd",
                       "median", "min", "max", "ci_low", "ci_high", "cv", "cv_flag")
FAILURE_CLASSES = ("timeout", "exit", "signal", "parse")
METRIC_SOURCES = ("time", "profile", "json", "regex")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Metric:
    """One way of turning a run's output into named numbers."""
    source: str                      # time | profile | json | regex
    name: str | None = None          # regex with one unnamed group: the metric's name
    pattern: str | None = None       # regex: searched in `stream`, the last match wins
    stream: str = "stdout"           # stdout | stderr | file
    file: str | None = None          # profile/json/regex-in-file: path relative to the run dir
    fields: dict[str, str] = field(default_factory=dict)  # json: metric name -> dotted path


@dataclass(frozen=True)
class Timeout:
    """Per-run time-out: fixed seconds, or `factor` x the slowest completed run of the size class."""
    seconds: float | None = None
    adaptive: bool = False
    factor: float = 3.0
    floor: float = 1.0
    initial: float | None = None     # before any run of the size class completed (None: no limit)
    size_class: tuple[str, ...] | None = None  # parameters that set a run's size (None: all)


@dataclass(frozen=True)
class Retries:
    """How often a failed run is tried again and after how long (doubling each time)."""
    count: int = 0
    backoff: float = 1.0
    on: tuple[str, ...] = ("timeout", "signal")


@dataclass(frozen=True)
class Statistics:
    """Which metric decides the repetition top-up and where the top-up stops."""
    metric: str = "wall_s"
    cv_threshold: float | None = None
    max_repetitions: int = 20
    confidence: float = 0.95


@dataclass(frozen=True)
class SlurmOptions:
    """Options of the Slurm executor (see executors/slurm.py)."""
    partition: str | None = None
    account: str | None = None
    time: str | None = None          # --time of one array task; default: from the time-outs
    cpus_per_task: int = 1
    max_array: int | None = None     # at most this many array tasks per submission
    options: tuple[str, ...] = ()    # extra sbatch arguments


@dataclass
class Spec:
    """A whole sweep: what to vary, what to run, how often, and what to measure."""
    name: str
    source: str                      # file the spec came from (or "<dict>")
    command: str
    parameters: dict[str, list]
    zip: list[list[str]] = field(default_factory=list)
    exclude: list[dict[str, list]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    repetitions: int = 5
    warmups: int = 0
    timeout: Timeout = field(default_factory=Timeout)
    retries: Retries = field(default_factory=Retries)
    metrics: list[Metric] = field(default_factory=list)
    statistics: Statistics = field(default_factory=Statistics)
    tags: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    slurm: SlurmOptions = field(default_factory=SlurmOptions)
    text: str = ""                   # the spec's own text, kept in the store


class Where:
    """Turns a key path into `file:line: path: message` errors, locating the key in TOML text.

    tomllib keeps no positions, so the text is scanned here (the one place that does it): string
    contents and comments are blanked out, [table] and [[array]] headers found, and the path
    followed through headers, keys (bare, quoted, dotted, in inline tables) and inline-array
    elements, ("metrics", 0) being the first [[metrics]] table or the first element of
    `metrics = [...]`. The line is that of the deepest part of the path found."""

    def __init__(self, source: str, text: str):
        self.source = source
        self.text = text
        self._scanned: tuple[str, list] | None = None

    def line_of(self, path: tuple) -> int | None:
        """Line of a key path such as ("metrics", 1, "pattern"): its key or value, else its table."""
        if not self.text.strip():
            return None
        masked, headers = self._scan()
        # The deepest header the path lies under; without one, the keys before the first header.
        pos, end, rest = 0, headers[0][0] if headers else len(masked), path
        for cut in range(len(path), 0, -1):
            head, array, nth = path[:cut], False, 0
            if isinstance(head[-1], int):
                head, array, nth = head[:-1], True, head[-1]
            if not head or not all(isinstance(p, str) for p in head):
                continue
            found = [h for h in headers if h[2] == head and h[3] == array]
            if len(found) > nth:
                start = found[nth][0]
                pos, rest = start, path[cut:]
                end = next((h[0] for h in headers if h[0] > start), len(masked))
                break
        for part in rest:
            found = self._element(masked, pos, end, part) if isinstance(part, int) else self._key(masked, pos, end, part)
            if found is None:
                break
            pos, end = found
        return self.text.count("\n", 0, pos) + 1

    def _scan(self) -> tuple[str, list]:
        """The text with string contents and comments blanked (a quoted key kept), and its headers
        as (offset, end of line, key tuple, is an [[array]])."""
        if self._scanned is not None:
            return self._scanned
        text, out, i = self.text, [], 0
        while i < len(text):
            c = text[i]
            if c == "#":
                j = text.find("\n", i)
                j = len(text) if j < 0 else j
                out.append(" " * (j - i))
            elif c in "\"'":
                quote = c * 3 if text.startswith(c * 3, i) else c
                j = i + len(quote)
                while j < len(text) and not text.startswith(quote, j) and (len(quote) == 3 or text[j] != "\n"):
                    j += 2 if c == '"' and text[j] == "\\" else 1
                j = min(len(text), j + len(quote))
                if re.match(r"[ \t]*[=.]", text[j:j + 80]):
                    out.append(text[i:j])                # a quoted key
                else:
                    out.append(quote + re.sub(r"[^\n]", " ", text[i + len(quote):j - len(quote)]) + quote)
            else:
                j = i + 1
                out.append(c)
            i = j
        masked = "".join(out)
        headers, depth, offset = [], 0, 0
        for line in masked.splitlines(keepends=True):
            if depth == 0 and line.lstrip().startswith("["):
                try:
                    table = tomllib.loads(self.text[offset:offset + len(line)])
                except tomllib.TOMLDecodeError:
                    table = None
                keys, node = [], table
                while isinstance(node, dict) and len(node) == 1:
                    key = next(iter(node))
                    keys.append(key)
                    node = node[key]
                if keys:
                    headers.append((offset, offset + len(line), tuple(keys), isinstance(node, list)))
                    offset += len(line)
                    continue
            depth += sum(line.count(b) for b in "[{") - sum(line.count(b) for b in "]}")
            offset += len(line)
        self._scanned = masked, headers
        return self._scanned

    @staticmethod
    def _key(masked: str, pos: int, end: int, key: str) -> tuple[int, int] | None:
        """Where `key` is defined in masked[pos:end], and where its value ends (a dotted key's
        value may go on in later lines: the span is kept)."""
        name = re.escape(str(key))
        match = re.compile(rf"(?:^|(?<=[{{,.]))[ \t]*(?P<key>{name}|\"{name}\"|'{name}')[ \t]*(?P<after>[=.])",
                           re.MULTILINE).search(masked, pos, end)
        if match is None:
            return None
        start = match.start("key")
        if match.group("after") == ".":
            return start, end
        i = match.end()
        while i < end and masked[i] in " \t":
            i += 1
        if i < end and masked[i] in "[{":
            depth = 0
            for j in range(i, end):
                depth += (masked[j] in "[{") - (masked[j] in "]}")
                if depth == 0:
                    return start, j + 1
            return start, end
        for quote in ('"""', "'''"):
            if masked.startswith(quote, i):
                close = masked.find(quote, i + 3, end)
                return start, end if close < 0 else close + 3
        close = masked.find("\n", i, end)
        return start, end if close < 0 else close

    @staticmethod
    def _element(masked: str, pos: int, end: int, n: int) -> tuple[int, int] | None:
        """The span of element `n` of the array whose key is at `pos`."""
        i = masked.find("=", pos, end) + 1
        while 0 < i < end and masked[i] in " \t":
            i += 1
        if i <= 0 or i >= end or masked[i] != "[":
            return None
        depth, index, start = 0, 0, None
        for j in range(i + 1, end):
            c = masked[j]
            if depth == 0 and start is None and c not in " \t\r\n,]":
                start = j
            if c in "[{":
                depth += 1
            elif c in "]}" and depth > 0:
                depth -= 1
            elif c in ",]" and depth == 0:
                if start is not None:
                    if index == n:
                        return start, j
                    index, start = index + 1, None
                if c == "]":
                    break
        return None

    def fail(self, path: tuple, message: str, line: int | None = None) -> CoreplaneError:
        """The one-line error for `path`, at its line when the spec came from a file."""
        dotted = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path).replace(".[", "[")
        line = line or self.line_of(path)
        where = f"{self.source}:{line}" if line else self.source
        return CoreplaneError(f"{where}: {dotted + ': ' if dotted else ''}{message}")


def check_keys(table: dict, allowed: tuple, path: tuple, where: Where) -> None:
    """Fails on the first key of `table` not in `allowed`, naming its place and the closest allowed key."""
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(allowed)})"
            raise where.fail(path + (key,), f"unknown key{hint}")


def _typed(value: Any, kinds: tuple, path: tuple, where: Where, what: str) -> Any:
    if isinstance(value, bool) and bool not in kinds:
        raise where.fail(path, f"expected {what}, got {value!r}")
    if not isinstance(value, kinds):
        raise where.fail(path, f"expected {what}, got {value!r}")
    return value


def _positive(value: Any, path: tuple, where: Where, integer: bool = False, zero_ok: bool = False) -> Any:
    kinds = (int,) if integer else (int, float)
    _typed(value, kinds, path, where, "an integer" if integer else "a number")
    if value < 0 or (value == 0 and not zero_ok):
        raise where.fail(path, f"must be {'>= 0' if zero_ok else '> 0'}, got {value}")
    return value


def value_range(start: float, stop: float, step: float | None = None, factor: float | None = None) -> list:
    """Inclusive arithmetic (`step`) or geometric (`factor`) range; integers stay integers."""
    if factor is not None:
        if factor <= 1 or start <= 0:
            raise ValueError("a geometric range needs start > 0 and factor > 1")
        out, v = [], start
        while v <= stop * (1 + 1e-12):
            out.append(v)
            v = v * factor
        return out
    step = 1 if step is None else step
    if step <= 0:
        raise ValueError("step must be > 0")
    count = math.floor((stop - start) / step + 1e-9) + 1
    if count <= 0:
        raise ValueError(f"empty range: start {start} > stop {stop}")
    if all(isinstance(x, int) for x in (start, stop, step)):
        return [start + i * step for i in range(count)]
    return [round(start + i * step, 12) for i in range(count)]


def _parameter_values(raw: Any, path: tuple, where: Where) -> list:
    if isinstance(raw, list):
        if not raw:
            raise where.fail(path, "empty list of values")
        for i, v in enumerate(raw):
            _typed(v, (str, int, float, bool), path, where, "strings, numbers or booleans")
        if len(set(map(repr, raw))) != len(raw):
            raise where.fail(path, "a value appears twice")
        return list(raw)
    if isinstance(raw, dict):
        check_keys(raw, ("start", "stop", "step", "factor"), path, where)
        if "start" not in raw or "stop" not in raw:
            raise where.fail(path, "a range needs start and stop (and step or factor)")
        if "step" in raw and "factor" in raw:
            raise where.fail(path, "give step or factor, not both")
        for k, v in raw.items():
            _typed(v, (int, float), path + (k,), where, "a number")
        try:
            return value_range(raw["start"], raw["stop"], raw.get("step"), raw.get("factor"))
        except ValueError as exc:
            raise where.fail(path, str(exc)) from None
    raise where.fail(path, f"expected a list of values or a range table, got {raw!r}")


def placeholders(template: str, path: tuple, where: Where) -> set[str]:
    """Names used as {name} in a template; a malformed brace is an error at its line."""
    try:
        return {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        raise where.fail(path, f"bad template {template!r}: {exc} (write {{{{ and }}}} for literal braces)") from None


def _metric(raw: Any, path: tuple, where: Where) -> Metric:
    if not isinstance(raw, dict):
        raise where.fail(path, "expected a table")
    check_keys(raw, ("source", "name", "pattern", "stream", "file", "fields"), path, where)
    source = raw.get("source")
    if source not in METRIC_SOURCES:
        raise where.fail(path + ("source",), f"expected one of {', '.join(METRIC_SOURCES)}, got {source!r}")
    stream = raw.get("stream", "file" if raw.get("file") and source == "regex" else "stdout")
    if stream not in ("stdout", "stderr", "file"):
        raise where.fail(path + ("stream",), f"expected stdout, stderr or file, got {stream!r}")
    file = raw.get("file")
    if source == "profile":
        file = file or "profile.json"
    if file is not None:
        _typed(file, (str,), path + ("file",), where, "a path")
    fields = raw.get("fields", {})
    if not isinstance(fields, dict) or not all(isinstance(v, str) for v in fields.values()):
        raise where.fail(path + ("fields",), "expected a table of metric = \"dotted.path\"")
    name, pattern = raw.get("name"), raw.get("pattern")
    if source == "json" and not fields:
        raise where.fail(path, "a json metric needs fields = { metric = \"dotted.path\" }")
    if source == "json" and stream == "stderr":
        raise where.fail(path + ("stream",), "json is read from stdout or a file")
    if source == "regex":
        if not isinstance(pattern, str):
            raise where.fail(path, "a regex metric needs pattern = '...'")
        try:
            compiled = re.compile(pattern, re.MULTILINE)
        except re.error as exc:
            raise where.fail(path + ("pattern",), f"bad regular expression: {exc}") from None
        if not compiled.groupindex and not name:
            raise where.fail(path, "a regex without named groups needs name = '...'")
        if compiled.groups > 1 and not compiled.groupindex:
            raise where.fail(path + ("pattern",), "use named groups (?P<metric>...) for several values")
        if stream == "file" and not file:
            raise where.fail(path, "stream = 'file' needs file = '...'")
    return Metric(source=source, name=name, pattern=pattern, stream=stream, file=file, fields=dict(fields))


def _timeout(raw: Any, where: Where) -> Timeout:
    path = ("timeout",)
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return Timeout(seconds=_positive(raw, path, where))
    if not isinstance(raw, dict):
        raise where.fail(path, "expected seconds or a table {adaptive = true, factor, floor, initial, size_class}")
    check_keys(raw, ("seconds", "adaptive", "factor", "floor", "initial", "size_class"), path, where)
    adaptive = _typed(raw.get("adaptive", False), (bool,), path + ("adaptive",), where, "true or false")
    if adaptive == ("seconds" in raw):
        raise where.fail(path, "give either seconds = N or adaptive = true")
    size_class = raw.get("size_class")
    if size_class is not None:
        if not isinstance(size_class, list) or not all(isinstance(s, str) for s in size_class):
            raise where.fail(path + ("size_class",), "expected a list of parameter names")
        size_class = tuple(size_class)
    return Timeout(
        seconds=_positive(raw["seconds"], path + ("seconds",), where) if "seconds" in raw else None,
        adaptive=adaptive,
        factor=_positive(raw.get("factor", 3.0), path + ("factor",), where),
        floor=_positive(raw.get("floor", 1.0), path + ("floor",), where),
        initial=_positive(raw["initial"], path + ("initial",), where) if "initial" in raw else None,
        size_class=size_class,
    )


def _retries(raw: Any, where: Where) -> Retries:
    path = ("retries",)
    if isinstance(raw, int) and not isinstance(raw, bool):
        return Retries(count=_positive(raw, path, where, integer=True, zero_ok=True))
    if not isinstance(raw, dict):
        raise where.fail(path, "expected a count or a table {count, backoff, on}")
    check_keys(raw, ("count", "backoff", "on"), path, where)
    on = raw.get("on", list(Retries.on))
    if not isinstance(on, list) or any(o not in FAILURE_CLASSES for o in on):
        raise where.fail(path + ("on",), f"expected a list drawn from {', '.join(FAILURE_CLASSES)}")
    return Retries(count=_positive(raw.get("count", 1), path + ("count",), where, integer=True, zero_ok=True),
                   backoff=_positive(raw.get("backoff", 1.0), path + ("backoff",), where, zero_ok=True),
                   on=tuple(on))


def _statistics(raw: Any, where: Where) -> Statistics:
    path = ("statistics",)
    if not isinstance(raw, dict):
        raise where.fail(path, "expected a table")
    check_keys(raw, ("metric", "cv_threshold", "max_repetitions", "confidence"), path, where)
    confidence = _positive(raw.get("confidence", 0.95), path + ("confidence",), where)
    if confidence >= 1:
        raise where.fail(path + ("confidence",), f"must be below 1, got {confidence}")
    return Statistics(
        metric=_typed(raw.get("metric", "wall_s"), (str,), path + ("metric",), where, "a metric name"),
        cv_threshold=_positive(raw["cv_threshold"], path + ("cv_threshold",), where) if "cv_threshold" in raw else None,
        max_repetitions=_positive(raw.get("max_repetitions", 20), path + ("max_repetitions",), where, integer=True),
        confidence=confidence,
    )


def _slurm(raw: Any, where: Where) -> SlurmOptions:
    path = ("slurm",)
    if not isinstance(raw, dict):
        raise where.fail(path, "expected a table")
    check_keys(raw, ("partition", "account", "time", "cpus_per_task", "max_array", "options"), path, where)
    for key in ("partition", "account", "time"):
        if key in raw:
            _typed(raw[key], (str,), path + (key,), where, "a string")
    options = raw.get("options", [])
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise where.fail(path + ("options",), "expected a list of sbatch arguments")
    return SlurmOptions(
        partition=raw.get("partition"), account=raw.get("account"), time=raw.get("time"),
        cpus_per_task=_positive(raw.get("cpus_per_task", 1), path + ("cpus_per_task",), where, integer=True),
        max_array=_positive(raw["max_array"], path + ("max_array",), where, integer=True) if "max_array" in raw else None,
        options=tuple(options),
    )


TOP_KEYS = ("name", "command", "repetitions", "warmups", "workdir", "tags", "env", "parameters", "expand",
            "timeout", "retries", "statistics", "metrics", "slurm")


def from_dict(doc: dict, source: str = "<dict>", text: str = "", where: Where | None = None) -> Spec:
    """Validates a spec given as a dict (a parsed TOML file, or built in Python) into a `Spec`."""
    where = where or Where(source, text)
    check_keys(doc, TOP_KEYS, (), where)
    command = doc.get("command")
    if not isinstance(command, str) or not command.strip():
        raise where.fail(("command",), "a spec needs command = \"...\" (the command template)")
    raw_params = doc.get("parameters", {})
    if not isinstance(raw_params, dict):
        raise where.fail(("parameters",), "expected a table of name = [values]")
    parameters = {}
    for name, raw in raw_params.items():
        if not _IDENT.match(name):
            raise where.fail(("parameters", name), f"'{name}' cannot be a parameter name (letters, digits, _)")
        if name in RESERVED:
            raise where.fail(("parameters", name), f"'{name}' is a built-in placeholder or a result column; "
                                                   f"choose another name (e.g. '{name}_')")
        parameters[name] = _parameter_values(raw, ("parameters", name), where)

    expand = doc.get("expand", {})
    if not isinstance(expand, dict):
        raise where.fail(("expand",), "expected a table {zip, exclude}")
    check_keys(expand, ("zip", "exclude"), ("expand",), where)
    zips = expand.get("zip", [])
    if not isinstance(zips, list) or not all(isinstance(g, list) and all(isinstance(n, str) for n in g) for g in zips):
        raise where.fail(("expand", "zip"), "expected a list of lists of parameter names")
    excludes = expand.get("exclude", [])
    if not isinstance(excludes, list) or not all(isinstance(e, dict) for e in excludes):
        raise where.fail(("expand", "exclude"), "expected a list of tables {parameter = value or [values]}")
    exclude = [{k: v if isinstance(v, list) else [v] for k, v in e.items()} for e in excludes]

    env = doc.get("env", {})
    if not isinstance(env, dict):
        raise where.fail(("env",), "expected a table of NAME = \"value\"")
    env = {k: str(v) for k, v in env.items()}
    tags = doc.get("tags", {})
    if not isinstance(tags, dict):
        raise where.fail(("tags",), "expected a table of key = \"value\"")

    raw_metrics = doc.get("metrics", [])
    if not isinstance(raw_metrics, list):
        raise where.fail(("metrics",), "expected [[metrics]] tables")
    metrics = [_metric(m, ("metrics", i), where) for i, m in enumerate(raw_metrics)]

    spec = Spec(
        name=_typed(doc.get("name", Path(source).stem if source != "<dict>" else "sweep"), (str,), ("name",), where, "a string"),
        source=source,
        command=command,
        parameters=parameters,
        zip=zips,
        exclude=exclude,
        env=env,
        repetitions=_positive(doc.get("repetitions", 5), ("repetitions",), where, integer=True),
        warmups=_positive(doc.get("warmups", 0), ("warmups",), where, integer=True, zero_ok=True),
        timeout=_timeout(doc["timeout"], where) if "timeout" in doc else Timeout(),
        retries=_retries(doc["retries"], where) if "retries" in doc else Retries(),
        metrics=metrics,
        statistics=_statistics(doc.get("statistics", {}), where),
        tags={k: str(v) for k, v in tags.items()},
        workdir=_typed(doc["workdir"], (str,), ("workdir",), where, "a directory") if "workdir" in doc else None,
        slurm=_slurm(doc.get("slurm", {}), where),
        text=text,
    )
    _check_references(spec, where)
    return spec


def _check_references(spec: Spec, where: Where) -> None:
    """Every name a template, rule or size class uses must be a parameter (or a built-in)."""
    known = set(spec.parameters) | set(BUILTINS)
    for path, template in [(("command",), spec.command)] + [(("env", k), v) for k, v in spec.env.items()]:
        for name in placeholders(template, path, where):
            if name not in known:
                raise where.fail(path, f"unknown placeholder {{{name}}} (parameters: {', '.join(spec.parameters) or 'none'}; "
                                       f"built-ins: {', '.join(BUILTINS)})")
    seen = set()
    for i, group in enumerate(spec.zip):
        for name in group:
            if name not in spec.parameters:
                raise where.fail(("expand", "zip"), f"'{name}' is not a parameter")
            if name in seen:
                raise where.fail(("expand", "zip"), f"'{name}' is in two zip groups")
            seen.add(name)
        lengths = {len(spec.parameters[n]) for n in group}
        if len(lengths) > 1:
            raise where.fail(("expand", "zip"), "zipped parameters need as many values each: "
                             + ", ".join(f"{n} has {len(spec.parameters[n])}" for n in group))
    for rule in spec.exclude:
        for name in rule:
            if name not in spec.parameters:
                raise where.fail(("expand", "exclude"), f"'{name}' is not a parameter")
    for name in spec.timeout.size_class or ():
        if name not in spec.parameters:
            raise where.fail(("timeout", "size_class"), f"'{name}' is not a parameter")


def parse_toml(text: str, source: str) -> Spec:
    """A TOML spec; syntax errors keep tomllib's line number as `file:line:`."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = match.group(1) if match else "1"
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc)) if match else str(exc)
        raise CoreplaneError(f"{source}:{line}: {message}") from None
    return from_dict(doc, source, text)

