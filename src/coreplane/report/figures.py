"""matplotlib figures of a sweep summary: error-bar lines, grouped and stacked bars, heat maps."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from coreplane.core.figures import plt

MAX_SERIES = 10
# (user metric, kernel metric, unit divisor to seconds) pairs a stacked share figure can use.
USER_KERNEL = [("user_s", "sys_s", 1.0), ("user_ns", "sys_ns", 1e9)]


def png(fig) -> bytes:
    """The figure as PNG bytes (and closed)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def varying(summary: pd.DataFrame, params: list[str]) -> list[str]:
    """Parameters that take more than one value in the summary: numeric ones first, most values first
    (the first is the x axis)."""
    names = [p for p in params if summary[p].nunique(dropna=False) > 1]
    return sorted(names, key=lambda p: (not is_numeric(summary[p]), -summary[p].nunique()))


def is_numeric(column: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


def _series_label(row: pd.Series, names: list[str]) -> str:
    return ", ".join(f"{n}={row[n]}" for n in names) or "all"


def _errors(df: pd.DataFrame) -> np.ndarray:
    """Asymmetric error bars from the t-interval (zero where it is undefined, n < 2)."""
    low = (df["mean"] - df["ci_low"]).fillna(0).clip(lower=0)
    high = (df["ci_high"] - df["mean"]).fillna(0).clip(lower=0)
    return np.vstack([low.to_numpy(), high.to_numpy()])


def lines(summary: pd.DataFrame, metric: str, x: str, series: list[str], confidence: float):
    """Mean of `metric` against numeric `x`, one line per combination of `series`, t-interval error bars."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    groups = list(summary.groupby(series, sort=True)) if series else [((), summary)]
    for key, df in groups[:MAX_SERIES]:
        df = df.sort_values(x)
        ax.errorbar(df[x], df["mean"], yerr=_errors(df), marker="o", capsize=3,
                    label=_series_label(df.iloc[0], series))
    ax.set_xlabel(x)
    ax.set_ylabel(f"{metric} (mean, {confidence:.0%} CI)")
    if series:
        title = f" (first {MAX_SERIES} of {len(groups)} series)" if len(groups) > MAX_SERIES else ""
        ax.legend(fontsize="small", title=", ".join(series) + title)
    if summary[x].min() > 0 and summary[x].max() / summary[x].min() >= 16:
        ax.set_xscale("log", base=2)
    ax.grid(alpha=0.3)
    ax.set_title(f"{metric} vs {x}")
    return fig


def grouped_bars(summary: pd.DataFrame, metric: str, x: str, series: list[str], confidence: float):
    """Bars of the mean for each value of a categorical `x`, grouped by `series`, with CI whiskers."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    categories = list(dict.fromkeys(summary[x]))
    groups = list(summary.groupby(series, sort=True)) if series else [((), summary)]
    groups = groups[:MAX_SERIES]
    width = 0.8 / len(groups)
    for i, (key, df) in enumerate(groups):
        df = df.set_index(x).reindex(categories)
        pos = np.arange(len(categories)) + (i - (len(groups) - 1) / 2) * width
        ax.bar(pos, df["mean"], width, yerr=_errors(df), capsize=3,
               label=_series_label(df.reset_index().iloc[0], series) if series else None)
    ax.set_xticks(np.arange(len(categories)), [str(c) for c in categories])
    ax.set_xlabel(x)
    ax.set_ylabel(f"{metric} (mean, {confidence:.0%} CI)")
    if series:
        ax.legend(fontsize="small", title=", ".join(series))
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"{metric} by {x}")
    return fig


def heatmap(summary: pd.DataFrame, metric: str, x: str, y: str):
    """Mean of `metric` over the two parameters `x` and `y`, values written in the cells."""
    grid = summary.pivot_table(index=y, columns=x, values="mean", aggfunc="mean")
    fig, ax = plt.subplots(figsize=(1.0 + 0.9 * len(grid.columns), 1.2 + 0.5 * len(grid.index)))
    image = ax.imshow(grid.to_numpy(dtype=float), aspect="auto", cmap="viridis", origin="lower")
    ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns])
    ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    finite = grid.to_numpy(dtype=float)
    mid = np.nanmean(finite) if np.isfinite(finite).any() else 0
    for (i, j), value in np.ndenumerate(finite):
        if np.isfinite(value):
            ax.text(j, i, f"{value:.3g}", ha="center", va="center", fontsize="x-small",
                    color="white" if value < mid else "black")
    fig.colorbar(image, ax=ax, label=f"{metric} (mean)")
    ax.set_title(f"{metric}: {y} x {x}")
    return fig


def user_kernel(summary: pd.DataFrame, params: list[str]):
    """Stacked bars of mean user and kernel time per point, the kernel share written on top; None without them."""
    for user, kernel, scale in USER_KERNEL:
        if {user, kernel} <= set(summary["metric"]):
            break
    else:
        return None
    wide = summary.pivot_table(index="point_id", columns="metric", values="mean", sort=False)
    labels = summary.drop_duplicates("point_id").set_index("point_id")
    names = varying(summary, params) or params
    order = [p for p in labels.index if p in wide.index]
    u, k = wide.loc[order, user] / scale, wide.loc[order, kernel] / scale
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(order) + 2), 4.2))
    pos = np.arange(len(order))
    ax.bar(pos, u, label="user")
    ax.bar(pos, k, bottom=u, label="kernel")
    for i, (uu, kk) in enumerate(zip(u, k)):
        if uu + kk > 0:
            ax.text(i, uu + kk, f"{kk / (uu + kk):.0%}", ha="center", va="bottom", fontsize="x-small")
    ax.set_xticks(pos, [_series_label(labels.loc[p], names) for p in order], rotation=45, ha="right",
                  fontsize="small")
    ax.set_ylabel("CPU time (s, mean)")
    ax.legend()
    ax.set_title("user vs kernel time (kernel share on top)")
    ax.grid(axis="y", alpha=0.3)
    return fig


def for_metric(summary: pd.DataFrame, metric: str, params: list[str], confidence: float) -> list[tuple[str, object]]:
    """The figures that fit a metric's summary: lines or bars along the first varying parameter, a heat
    map when exactly two vary. Returns (caption, figure) pairs."""
    df = summary[summary["metric"] == metric]
    names = varying(df, params)
    if not names:
        return []
    x, rest = names[0], names[1:]
    figures = []
    if is_numeric(df[x]):
        figures.append((f"{metric} against {x}", lines(df, metric, x, rest, confidence)))
    else:
        figures.append((f"{metric} by {x}", grouped_bars(df, metric, x, rest, confidence)))
    if len(names) == 2:
        figures.append((f"{metric} over {names[1]} x {x}", heatmap(df, metric, x, names[1])))
    return figures
