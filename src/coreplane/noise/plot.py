"""Figures of a noise measurement: gap timeline, gap-length histogram, FTQ spectrum."""

from pathlib import Path

import numpy as np

from coreplane.core.figures import plt


def _title(doc: dict, what: str) -> str:
    m = doc["machine"]
    return f"{what} — {m['cpu']}{' (VM)' if m['virtual'] else ''}, threshold {doc['threshold_ns'] / 1e3:g} us"


def _finish(fig, ax, doc: dict, what: str, xlabel: str, ylabel: str, path: Path) -> str:
    """Labels, title, grid and legend, then writes the PNG and returns its path."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(_title(doc, what), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, markerscale=3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)


def timeline(doc: dict, path: Path) -> str:
    """Each gap as a point: when it happened and how long it lasted (log scale)."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for c in doc["native"]["cpus"]:
        t = np.asarray(c["gap"]["timeline"]).reshape(-1, 2)
        ax.scatter(t[:, 0] / 1e9, t[:, 1] / 1e3, s=4, label=f"CPU {c['cpu']} ({c['gap']['lost_pct']:.2f} % lost)")
    ax.set_yscale("log")
    return _finish(fig, ax, doc, "Interruptions", "time since start [s]", "gap length [us]", path)


def histogram(doc: dict, path: Path) -> str:
    """Distribution of gap lengths, log-spaced bins, counts per second."""
    fig, ax = plt.subplots(figsize=(7, 4))
    lengths = [np.asarray(c["gap"]["timeline"]).reshape(-1, 2)[:, 1] / 1e3 for c in doc["native"]["cpus"]]
    top = max((x.max() for x in lengths if len(x)), default=10.0)
    bins = np.logspace(np.log10(doc["threshold_ns"] / 1e3), np.log10(max(top, doc["threshold_ns"] / 1e3) * 1.1), 40)
    for c, x in zip(doc["native"]["cpus"], lengths):
        weights = np.full(len(x), 1e9 / c["gap"]["runtime_ns"])
        ax.hist(x, bins=bins, weights=weights, histtype="step", label=f"CPU {c['cpu']}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    return _finish(fig, ax, doc, "Gap lengths", "gap length [us]", "gaps per second", path)


def spectrum(doc: dict, path: Path) -> str:
    """FTQ amplitude spectrum: periodic noise sources stand out as peaks at their frequency."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for c in doc["native"]["cpus"]:
        s = c["ftq"]["spectrum"]
        if s["freq_hz"]:
            ax.plot(s["freq_hz"][1:], s["amplitude"][1:], lw=0.6, label=f"CPU {c['cpu']}")
            for p in s["peaks"][:3]:
                ax.annotate(f"{p['freq_hz']:.1f} Hz", (p["freq_hz"], p["amplitude"]), fontsize=7)
    ax.set_xscale("log")
    return _finish(fig, ax, doc, "FTQ spectrum", "frequency [Hz]", "amplitude [iterations per quantum]", path)


def all_plots(doc: dict, outdir: Path) -> list[str]:
    """Writes noise-timeline.png, noise-histogram.png and noise-spectrum.png into `outdir`."""
    return [timeline(doc, outdir / "noise-timeline.png"), histogram(doc, outdir / "noise-histogram.png"),
            spectrum(doc, outdir / "noise-spectrum.png")]
