"""Reading a sweep store back as pandas DataFrames: runs, metrics (long) and per-point statistics."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from coreplane.dse.stats import describe
from coreplane.dse.store import Store, store_path

RUN_COLUMNS = ["run_id", "point_id", "rep", "warmup", "status", "attempts", "exit_code", "signal", "message",
               "wall_s", "timeout_s", "cpus", "host", "executor", "log_dir"]


def open_store(sweep: str | Path) -> Store:
    """The store of an existing sweep (directory or store file); a one-line error if there is none."""
    return Store(store_path(sweep), create=False)


def meta(sweep: str | Path) -> dict:
    """The sweep's metadata (name, spec text, tags, machine, ...), JSON values decoded."""
    store = open_store(sweep)
    try:
        raw = store.meta()
    finally:
        store.close()
    out = {}
    for k, v in raw.items():
        try:
            out[k] = json.loads(v) if k not in ("name", "source", "spec", "format", "updated", "metric") else v
        except json.JSONDecodeError:
            out[k] = v
    return out


def _params(store: Store) -> tuple[pd.DataFrame, list[str]]:
    rows = store.query("SELECT point_id, ordinal, params FROM points ORDER BY ordinal")
    params = [{"point_id": r["point_id"], "ordinal": r["ordinal"], **json.loads(r["params"])} for r in rows]
    names = list(dict.fromkeys(k for p in params for k in p if k not in ("point_id", "ordinal")))
    return pd.DataFrame(params, columns=["point_id", "ordinal", *names]), names


def parameter_names(sweep: str | Path) -> list[str]:
    store = open_store(sweep)
    try:
        return _params(store)[1]
    finally:
        store.close()


def load_runs(sweep: str | Path) -> pd.DataFrame:
    """One row per run (warm-ups and failures included), with the point's parameters as columns."""
    store = open_store(sweep)
    try:
        params, names = _params(store)
        runs = pd.DataFrame([dict(r) for r in store.query(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs")],
                            columns=RUN_COLUMNS)
    finally:
        store.close()
    runs["warmup"] = runs["warmup"].astype(bool)
    merged = runs.merge(params, on="point_id", how="left")
    return merged.sort_values(["ordinal", "warmup", "rep"], ascending=[True, False, True]).reset_index(drop=True)


def load_metrics(sweep: str | Path, include_warmups: bool = False) -> pd.DataFrame:
    """Long format: one row per (successful run, metric) with the parameters, `metric` and `value`."""
    store = open_store(sweep)
    try:
        params, names = _params(store)
        rows = store.query("SELECT r.run_id, r.point_id, r.rep, r.warmup, m.name AS metric, m.value "
                           "FROM metrics m JOIN runs r USING(run_id) WHERE r.status = 'ok'"
                           + ("" if include_warmups else " AND r.warmup = 0"))
    finally:
        store.close()
    df = pd.DataFrame([dict(r) for r in rows], columns=["run_id", "point_id", "rep", "warmup", "metric", "value"])
    df["warmup"] = df["warmup"].astype(bool)
    df = df.merge(params, on="point_id", how="left")
    return df.sort_values(["ordinal", "metric", "rep"]).reset_index(drop=True)[
        ["run_id", "point_id", *names, "rep", "warmup", "metric", "value"]]


def summary(sweep: str | Path, metrics: list[str] | None = None, confidence: float | None = None) -> pd.DataFrame:
    """Per point and metric: n, mean, sd, median, min, max, t-interval, cv, and the CV flag."""
    info = meta(sweep)
    confidence = confidence or info.get("confidence") or 0.95
    threshold = info.get("cv_threshold")
    df = load_metrics(sweep)
    names = parameter_names(sweep)
    if metrics:
        missing = sorted(set(metrics) - set(df["metric"]))
        if missing:
            from coreplane.core.errors import CoreplaneError
            raise CoreplaneError(f"{sweep}: no metric {', '.join(missing)} "
                                 f"(has: {', '.join(sorted(df['metric'].unique())) or 'none'})")
        df = df[df["metric"].isin(metrics)]
    rows = []
    for (point_id, metric), group in df.groupby(["point_id", "metric"], sort=False):
        stats = describe(group["value"].to_numpy(), confidence)
        rows.append({"point_id": point_id, **{n: group[n].iloc[0] for n in names}, "metric": metric, **stats,
                     "cv_flag": bool(threshold is not None and stats["cv"] == stats["cv"] and stats["cv"] > threshold)})
    return pd.DataFrame(rows, columns=["point_id", *names, "metric", "n", "mean", "sd", "median", "min", "max",
                                       "ci_low", "ci_high", "cv", "cv_flag"])
