"""The `coreplane report` and `coreplane compare` commands."""

import json
import math
from pathlib import Path

import typer
from rich.table import Table

from coreplane.core.errors import CoreplaneError
from coreplane.core.output import console, emit

FORMATS = ("html", "csv", "parquet", "json")


def report(
    sweep: Path = typer.Argument(..., metavar="SWEEP", help="Sweep directory (or its store.sqlite)."),
    fmt: str = typer.Option("html", "--format", "-f", help="html (tables + figures), csv, parquet or json."),
    out: Path = typer.Option(None, "--out", "-o", help="Output file (default SWEEP/report.html or SWEEP/summary.FORMAT)."),
    metric: list[str] = typer.Option(None, "--metric", "-m", help="Metric(s) to plot and tabulate "
                                                                 "(default: the spec's statistics metric)."),
    raw: bool = typer.Option(False, "--raw", help="csv/parquet/json: every run's metrics (long format), not the summary."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout describing what was written."),
) -> None:
    """Report a sweep: HTML with tables and figures, or the statistics as CSV, Parquet or JSON."""
    from coreplane.dse import results

    if fmt not in FORMATS:
        raise CoreplaneError(f"--format {fmt}: expected one of {', '.join(FORMATS)}")
    meta = results.meta(sweep)
    base = sweep if sweep.is_dir() else sweep.parent
    out = out or base / ("report.html" if fmt == "html" else f"{'runs' if raw else 'summary'}.{fmt}")
    params = results.parameter_names(sweep)
    metrics = metric or [meta.get("metric") or "wall_s"]
    doc = {"sweep": str(sweep), "out": str(out), "format": fmt}
    if fmt == "html":
        from coreplane.report.html import render
        summary = results.summary(sweep)
        unknown = sorted(set(metrics) - set(summary["metric"]))
        if unknown and metric:   # the default metric may be missing when every run failed
            raise CoreplaneError(f"--metric {', '.join(unknown)}: not in {sweep} "
                                 f"(has: {', '.join(sorted(summary['metric'].unique())) or 'none'})")
        text, count = render(meta, results.load_runs(sweep), summary, params, metrics)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        doc.update(points=int(summary["point_id"].nunique()), metrics=metrics, figures=count)
    else:
        df = results.load_metrics(sweep) if raw else results.summary(sweep, metric)
        out.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "csv":
            df.to_csv(out, index=False)
        elif fmt == "parquet":
            df.to_parquet(out, index=False)
        else:
            df.to_json(out, orient="records", indent=1, double_precision=15)
        doc.update(rows=len(df), columns=list(df.columns))
    emit(doc, json_out, lambda d: console.print(f"wrote {d['out']}", highlight=False))


def _fmt(value: float) -> str:
    return "" if value is None or math.isnan(value) else f"{value:.4g}"


def _render_comparison(doc: dict) -> None:
    rows = doc["rows"]
    metrics = sorted({r["metric"] for r in rows})
    keys = doc["keys"] + (["metric"] if len(metrics) > 1 else [])
    title = f"A = {doc['a']}\nB = {doc['b']}\n" + (f"{metrics[0]}, " if len(metrics) == 1 else "")
    table = Table(title=title + f"Welch's t-test (n.s.: p >= {doc['alpha']})")
    for column in keys:
        table.add_column(column, min_width=len(column))
    for column in ("n A", "mean A", "n B", "mean B", "B/A", "p"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("")
    for r in rows:
        verdict = ("[green]lower[/]" if r["ratio"] < 1 else "[red]higher[/]") if r["significant"] else "[dim]n.s.[/]"
        table.add_row(*(str(r[k]) for k in keys), str(r["n_a"]), _fmt(r["mean_a"]), str(r["n_b"]),
                      _fmt(r["mean_b"]), _fmt(r["ratio"]), _fmt(r["p"]), verdict)
    console.print(table)


def compare(
    a: str = typer.Argument(..., metavar="A", help="Sweep directory, optionally DIR@param=value,... to select points."),
    b: str = typer.Argument(..., metavar="B", help="The same for the other side."),
    metric: list[str] = typer.Option(None, "--metric", "-m", help="Metric(s) to compare (default: all shared)."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level of the two-sided Welch test."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
) -> None:
    """Compare two sweeps (or two configurations of one) point by point: means, ratio B/A, Welch's t-test."""
    from coreplane.report.compare import compare as run_compare

    if not 0 < alpha < 1:
        raise CoreplaneError(f"--alpha {alpha}: must be between 0 and 1")
    df = run_compare(a, b, metric, alpha)
    keys = [c for c in df.columns if c not in ("metric", "n_a", "mean_a", "median_a", "n_b", "mean_b", "median_b",
                                               "ratio", "t", "dof", "p", "significant")]
    rows = json.loads(df.to_json(orient="records", double_precision=15))   # NaN -> null
    emit({"a": a, "b": b, "alpha": alpha, "keys": keys, "rows": rows}, json_out,
         _render_comparison)

