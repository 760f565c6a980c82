"""Expanding a spec's parameters into sweep points: product, zip groups and exclusions."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass

from coreplane.dse.spec import BUILTINS, Spec


@dataclass(frozen=True)
class Point:
    """One configuration of the sweep; its id hashes its parameters, command and environment."""
    point_id: str
    ordinal: int
    params: dict
    command: str          # parameters filled in; built-ins such as {rundir} still to fill per run
    env: dict[str, str]


class _KeepBuiltins(dict):
    """format_map mapping that leaves {rundir}, {rep}, ... for the runner to fill."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def fill(template: str, params: dict) -> str:
    """Fills parameters into a template (format specs such as {n:04d} work); built-ins stay as {name}."""
    return template.format_map(_KeepBuiltins({k: v for k, v in params.items() if k not in BUILTINS}))


def fill_builtins(command: str, values: dict[str, object]) -> str:
    """Fills the per-run built-ins into a command whose parameters are already filled.

    Plain replacement, not str.format: the braces left in a filled command (awk '{print}')
    are literal by now."""
    for name in BUILTINS:
        command = command.replace("{" + name + "}", str(values.get(name, "")))
    return command


def point_id(params: dict, command: str, env: dict[str, str]) -> str:
    """Stable id of a configuration: the same parameters and command give the same id in every store."""
    canonical = json.dumps({"params": params, "command": command, "env": env}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def combinations(spec: Spec) -> list[dict]:
    """Parameter dicts in sweep order: zip groups move together, the rest form a product, exclusions drop."""
    zipped = {name for group in spec.zip for name in group}
    axes: list[list[dict]] = []
    for name in spec.parameters:
        group = next((g for g in spec.zip if g[0] == name), None)
        if group:
            axes.append([dict(zip(group, values)) for values in zip(*(spec.parameters[n] for n in group))])
        elif name not in zipped:
            axes.append([{name: v} for v in spec.parameters[name]])
    out = []
    for parts in itertools.product(*axes):
        combo: dict = {}
        for part in parts:
            combo.update(part)
        combo = {name: combo[name] for name in spec.parameters}  # declaration order
        if not any(all(combo[k] in values for k, values in rule.items()) for rule in spec.exclude):
            out.append(combo)
    return out


def points(spec: Spec) -> list[Point]:
    """Every point of the sweep, with its command and environment filled in."""
    result = []
    for ordinal, params in enumerate(combinations(spec)):
        command = fill(spec.command, params)
        env = {k: fill(v, params) for k, v in spec.env.items()}
        result.append(Point(point_id(params, command, env), ordinal, params, command, env))
    return result
