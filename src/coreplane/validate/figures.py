"""Validation figures: paper 002 Fig. 11 (synthetic, S against γ), Fig. 13 (f_c statistic), Fig. 15
(per program), predicted against measured, and the error of each program."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.ticker import FuncFormatter, NullFormatter

from coreplane.core.figures import plt, save, style
from coreplane.validate.calibrate import STATISTICS

MODEL_STYLE = {"naive": ("naive (eq. 3)", "C1", ":"), "refined": ("refined (eq. 11)", "C2", "--"),
               "queueing": ("open M/M/1 (eq. 13)", "C4", "-."), "closed": ("closed MVA", "C3", "-"),
               "refined:loo": ("refined, γ leave-one-out", "C5", "--"),
               "refined:median": ("refined, γ median (in-sample)", "C6", "--"),
               "closed:loo": ("closed, γ leave-one-out", "C7", "-"),
               "project": ("coreplane project (from the profile)", "C0", "-")}


def _fc_label(ns: float) -> str:
    return "f_c +0" if ns == 0 else f"f_c +{ns / 1000:g} µs"


def _errorbar(ax, x, rows, label="measured"):
    y = np.array([r["measured"] for r in rows])
    low = np.array([r["measured_low"] for r in rows])
    high = np.array([r["measured_high"] for r in rows])
    err = np.vstack([np.nan_to_num(y - low, nan=0.0).clip(0), np.nan_to_num(high - y, nan=0.0).clip(0)])
    ax.errorbar(x, y, yerr=err, fmt="o", color="black", capsize=3, label=label, zorder=5)


def fig11(doc: dict, out: Path) -> list[Path]:
    """Per synthetic program: measured and projected speedup against the emulated γ, one panel per
    policy and forward cost (paper 002 Fig. 11)."""
    paths = []
    synthetic = sorted({r["program"] for r in doc["rows"] if r["program"].startswith("synth")})
    for program in synthetic:
        rows = [r for r in doc["rows"] if r["program"] == program]
        panels = sorted({(r["policy"], r["fc_ns"]) for r in rows})
        fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
        for ax, (policy, fc) in zip(axes[0], panels):
            sel = sorted((r for r in rows if r["policy"] == policy and r["fc_ns"] == fc), key=lambda r: r["gamma_emulated"])
            x = [r["gamma_emulated"] for r in sel]
            for model in ("naive", "refined", "closed"):
                label, colour, ls = MODEL_STYLE[model]
                ax.plot(x, [r[model] if r[model] is not None else np.nan for r in sel], ls, color=colour, label=label)
            _errorbar(ax, x, sel)
            style(ax, "emulated gain γ", "speedup over Linux", f"{program}: {policy}, {_fc_label(fc)}")
        paths.append(save(fig, out / f"fig11-{program}.png"))
    return paths


def fig15(doc: dict, out: Path) -> Path | None:
    """Measured and projected speedups of the real programs at a free hand-off (f_c from the
    micro-benchmark only), one panel per preset (paper 002 Fig. 15)."""
    real = [r for r in doc["rows"] if not r["program"].startswith("synth") and r["fc_ns"] == 0]
    panels = [p for p in ("mckernel", "mos", "all") if any(r["policy"] == p for r in real)]
    if not panels:
        return None
    models = ("naive", "refined", "refined:median", "refined:loo", "closed")
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3.4 * len(panels)), squeeze=False)
    for ax, policy in zip(axes[:, 0], panels):
        sel = sorted((r for r in real if r["policy"] == policy), key=lambda r: r["program"])
        x = np.arange(len(sel))
        width = 0.8 / (len(models) + 1)
        ax.bar(x, [r["measured"] for r in sel], width, color="black", label="measured")
        for i, model in enumerate(models, 1):
            label, colour, _ = MODEL_STYLE.get(model, ("naive", "C1", ":"))
            ax.bar(x + i * width, [r.get(model) or np.nan for r in sel], width, color=colour, label=label)
        ax.set_xticks(x + width * len(models) / 2, [r["program"] for r in sel], rotation=30, ha="right")
        low = min([r["measured"] for r in sel] + [r.get("refined") or 1 for r in sel])
        ax.set_ylim(max(0.0, low - 0.05), None)
        style(ax, "", "speedup over Linux", f"policy {policy}, no added forward cost", legend=False)
    axes[0, 0].legend(fontsize=7, ncol=3)
    return save(fig, out / "fig15-programs.png")


def scatter(doc: dict, out: Path) -> Path:
    """Every configuration: projected against measured speedup, log-log, with the ±3 % band."""
    fig, ax = plt.subplots(figsize=(5.6, 5.2))
    values = [r["measured"] for r in doc["rows"]]
    lo, hi = min(values + [1.0]) * 0.8, max(values + [1.0]) * 1.25
    line = np.geomspace(lo, hi, 50)
    ax.plot(line, line, color="grey", lw=0.8)
    ax.fill_between(line, line * 0.97, line * 1.03, color="grey", alpha=0.2, label="±3 %")
    for model in ("naive", "refined", "queueing", "closed"):
        label, colour, _ = MODEL_STYLE[model]
        pts = [(r["measured"], r[model]) for r in doc["rows"] if r.get(model) is not None]
        if pts:
            ax.scatter(*zip(*pts), s=14, color=colour, label=label, alpha=0.8)
    ax.set_yscale("log")
    style(ax, "measured speedup", "projected speedup", "every validated configuration", logx=True)
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(NullFormatter())  # labelled minor ticks overlap on a log axis
    return save(fig, out / "predicted-vs-measured.png")


def by_program(doc: dict, out: Path) -> Path:
    """MAPE of each program per model (estimated parameters, γ leave-one-out, and what
    `coreplane project` answers from the profile as recorded)."""
    models = ("naive", "refined", "queueing", "closed", "closed:loo", "project")
    programs = sorted(doc["per_program"])
    fig, ax = plt.subplots(figsize=(max(7.0, 0.7 * len(programs) + 2), 3.8))
    x = np.arange(len(programs))
    width = 0.8 / len(models)
    for i, model in enumerate(models):
        label, colour, _ = MODEL_STYLE[model]
        ax.bar(x + i * width, [doc["per_program"][p].get(model) or np.nan for p in programs], width, color=colour,
               label=label)
    ax.axhline(3.0, color="black", lw=0.8, ls="--", label="goal 3 %")
    ax.set_xticks(x + 0.4 - width / 2, programs, rotation=30, ha="right")
    ax.set_yscale("symlog", linthresh=1)
    style(ax, "", "MAPE (%)", "prediction error per program")
    return save(fig, out / "error-by-program.png")


def fig13(doc: dict, out: Path) -> Path:
    """MAPE with f_c taken as the min, median, mean or max of the micro-benchmark (paper 002 Fig. 13)."""
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    x = np.arange(len(STATISTICS))
    for i, model in enumerate(("refined", "closed")):
        label, colour, _ = MODEL_STYLE[model]
        ax.bar(x + i * 0.4, [doc["mape_by_statistic"].get(f"{model}@{s}") or np.nan for s in STATISTICS], 0.4,
               color=colour, label=label)
    ax.set_xticks(x + 0.2, STATISTICS)
    style(ax, "statistic of the micro-benchmark used as f_c", "MAPE (%)", "sensitivity to the f_c statistic")
    return save(fig, out / "fig13-fc-statistic.png")


def draw_all(doc: dict, out: Path) -> list[Path]:
    """Every figure that the rows allow."""
    if not doc["rows"]:
        return []
    paths = fig11(doc, out) + [scatter(doc, out), by_program(doc, out), fig13(doc, out)]
    f15 = fig15(doc, out)
    return paths + ([f15] if f15 else [])
