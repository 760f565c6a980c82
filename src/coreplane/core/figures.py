"""Matplotlib set-up shared by the figures of profiles, models and validations: headless backend, axis styling, saving."""

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
    # matplotlib adds .png to a name without a suffix: the path returned (and printed) is the
    # file written (`--plot out` wrote out.png and reported out).
    path = Path(path) if Path(path).suffix else Path(path).with_suffix(".png")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
