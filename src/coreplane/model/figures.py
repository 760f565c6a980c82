"""Matplotlib set-up shared by the model's figures (headless backend, axis styling, saving) and time labels."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402,F401  (re-exported: the figure modules draw with it)


def style(ax, xlabel: str, ylabel: str, title: str, logx: bool = False, legend: bool = True) -> None:
    """Labels, a log x axis where asked, a light grid and a small legend."""
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    if legend:
        ax.legend(fontsize=7)


def save(fig, path: str | Path) -> Path:
    """Saves a figure as PNG (creating the directory) and frees it."""
    path = Path(path)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def human_ns(ns: float | None) -> str:
    """A time in the largest unit that keeps it ≥ 1, to 4 significant digits ("6.28 µs"); "—" for None."""
    if ns is None:
        return "—"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.4g} {unit}"
    return f"{ns:.4g} ns"
