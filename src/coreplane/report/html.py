"""The self-contained HTML report of a sweep: what ran, what failed, tables and figures."""

from __future__ import annotations

import base64
import html
import math

import pandas as pd

from coreplane.report import figures

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f2f2f2; } td.text { text-align: left; }
tr.flag td { background: #fff3cd; }
tr.failed td { background: #f8d7da; }
figure { display: inline-block; margin: 0.5em; } figcaption { font-size: 0.85em; color: #555; }
code { background: #f5f5f5; padding: 0 0.2em; }
"""


def _cell(value) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    return html.escape(str(value))


def table(df: pd.DataFrame, row_class=None) -> str:
    """An HTML table; numbers right-aligned with 4 significant digits; `row_class(row)` may mark rows."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    rows = []
    for _, row in df.iterrows():
        cls = row_class(row) if row_class else ""
        cells = "".join(f"<td class='text'>{_cell(v)}</td>" if isinstance(v, str) else f"<td>{_cell(v)}</td>"
                        for v in row)
        rows.append(f"<tr class='{cls}'>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _figure(caption: str, fig) -> str:
    data = base64.b64encode(figures.png(fig)).decode()
    return (f"<figure><img alt='{html.escape(caption)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def render(meta: dict, runs: pd.DataFrame, summary: pd.DataFrame, params: list[str], metrics: list[str]) -> tuple[str, int]:
    """The report's HTML and how many figures it holds."""
    confidence = float(meta.get("confidence") or 0.95)
    measured = runs[~runs["warmup"]]
    status = measured["status"].value_counts().rename_axis("status").reset_index(name="runs")
    parts = [f"<h1>Sweep {html.escape(meta.get('name', '?'))}</h1>"]
    machine = meta.get("machine") or {}
    tags = ", ".join(f"{k}={v}" for k, v in (meta.get("tags") or {}).items()) or "none"
    parts.append(f"<p>{measured['point_id'].nunique()} points, {len(measured)} measured runs "
                 f"({int(runs['warmup'].sum())} warm-ups). Spec <code>{html.escape(str(meta.get('source')))}</code>, "
                 f"last run {html.escape(str(meta.get('updated', '?')))} on {html.escape(str(machine.get('cpu', '?')))} "
                 f"({machine.get('cpus', '?')} CPUs, kernel {html.escape(str(machine.get('kernel', '?')))}). "
                 f"Tags: {html.escape(tags)}. Intervals are two-sided {confidence:.0%} t-intervals of the mean.</p>")
    parts.append(table(status))

    failed = measured[measured["status"] != "ok"]
    if len(failed):
        parts.append(f"<h2>Failed runs ({len(failed)})</h2><p>Run them again with "
                     f"<code>coreplane sweep SPEC --out DIR --resume</code>.</p>")
        parts.append(table(failed[["run_id", *params, "status", "attempts", "message", "log_dir"]].head(200),
                           lambda r: "failed"))

    kernel = figures.user_kernel(summary, params)
    threshold = meta.get("cv_threshold")
    for metric in metrics:
        df = summary[summary["metric"] == metric]
        if df.empty:
            continue
        parts.append(f"<h2>{html.escape(metric)}</h2>")
        figs = figures.for_metric(summary, metric, params, confidence)
        parts.extend(_figure(caption, fig) for caption, fig in figs)
        note = f" Rows with a coefficient of variation above {threshold} are marked." if threshold else ""
        parts.append(f"<p>Per point.{note}</p>")
        parts.append(table(df.drop(columns=["point_id", "metric"]), lambda r: "flag" if r["cv_flag"] else ""))
    count = sum(p.startswith("<figure>") for p in parts)
    if kernel is not None:
        parts.append("<h2>User vs kernel time</h2>" + _figure("mean CPU time per point, kernel share on top", kernel))
        count += 1
    others = sorted(set(summary["metric"]) - set(metrics))
    if others:
        wide = summary[summary["metric"].isin(others)].pivot_table(index=["point_id", *params], columns="metric",
                                                                  values="mean", sort=False).reset_index()
        parts.append("<h2>Other metrics (mean per point)</h2>" + table(wide.drop(columns=["point_id"])))
    body = "\n".join(parts)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>coreplane sweep "
            f"{html.escape(meta.get('name', ''))}</title><style>{STYLE}</style></head><body>{body}</body></html>",
            count)
