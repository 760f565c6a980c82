"""Comparing two sweeps (or two configurations of one): matched points, ratios and Welch's t-test."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from coreplane.core.errors import CoreplaneError
from coreplane.dse.results import load_metrics, parameter_names
from coreplane.dse.infofile import parse_scalar
from coreplane.dse.stats import welch


def parse_side(text: str) -> tuple[Path, dict]:
    """`DIR` or `DIR@key=value,key=value`: a sweep, optionally restricted to some parameter values."""
    if Path(text).exists() or "@" not in text:
        return Path(text), {}
    path, _, selector = text.rpartition("@")
    where = {}
    for part in selector.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise CoreplaneError(f"{text}: expected DIR@key=value[,key=value...], got '{part}'")
        where[key.strip()] = parse_scalar(value.strip())
    return Path(path), where


def _side(text: str, metrics: list[str] | None) -> tuple[pd.DataFrame, list[str], dict]:
    path, where = parse_side(text)
    df = load_metrics(path)
    params = parameter_names(path)
    for key, value in where.items():
        if key not in params:
            raise CoreplaneError(f"{text}: '{key}' is not a parameter of {path} (has: {', '.join(params) or 'none'})")
        df = df[df[key].astype(str) == str(value)]
        if df.empty:
            raise CoreplaneError(f"{text}: no successful run has {key}={value}")
    if metrics:
        df = df[df["metric"].isin(metrics)]
    return df, [p for p in params if p not in where], where


def compare(a: str, b: str, metrics: list[str] | None = None, alpha: float = 0.05) -> pd.DataFrame:
    """Per matched point and metric: n, mean and median of each side, ratio b/a, Welch t, dof and p.

    Points match on the parameters both sides share (less those a selector fixed); `significant` is
    p < alpha."""
    da, pa, _ = _side(a, metrics)
    db, pb, _ = _side(b, metrics)
    keys = [p for p in pa if p in pb]
    common = sorted(set(da["metric"]) & set(db["metric"]))
    if not common:
        raise CoreplaneError(f"{a} and {b} share no metric"
                             + (f" among {', '.join(metrics)}" if metrics else ""))
    rows = []
    group_a = dict(list(da.groupby(keys + ["metric"], sort=False)))
    for key, gb in db.groupby(keys + ["metric"], sort=False):
        ga = group_a.get(key)
        if ga is None or key[-1] not in common:
            continue
        va, vb = ga["value"].to_numpy(), gb["value"].to_numpy()
        test = welch(va, vb)
        mean_a, mean_b = va.mean(), vb.mean()
        rows.append({**dict(zip(keys, key[:-1])), "metric": key[-1], "n_a": len(va), "mean_a": mean_a,
                     "median_a": float(pd.Series(va).median()), "n_b": len(vb), "mean_b": mean_b,
                     "median_b": float(pd.Series(vb).median()),
                     "ratio": mean_b / mean_a if mean_a else float("nan"), **test,
                     "significant": bool(test["p"] < alpha)})
    if not rows:
        raise CoreplaneError(f"{a} and {b} have no point in common (matched on: {', '.join(keys) or 'nothing'})")
    return pd.DataFrame(rows)
