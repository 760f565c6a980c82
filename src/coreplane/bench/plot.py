"""Figures of the floor benchmarks: the distribution of each round trip as a CDF."""

from pathlib import Path

from coreplane.core.figures import plt


def floor_cdf(doc: dict, rows: list[tuple[str, str]], path: str) -> None:
    """One CDF per floor series (log time axis), from the percentiles the native bench reports."""
    fig, ax = plt.subplots(figsize=(7, 4))
    quantiles = [q / 100 for q in range(101)]
    for key, label in rows:
        ax.plot(doc[key]["cdf"], quantiles, label=f"{label} (p50 {doc[key]['p50']:.0f} ns)")
    ax.set_xscale("log")
    ax.set_xlabel("time [ns]")
    ax.set_ylabel("fraction of samples")
    m = doc["machine"]
    ax.set_title(f"Physical floor, cores {doc['cores'][0]},{doc['cores'][1]} — {m['cpu']}"
                 f"{' (VM)' if m['virtual'] else ''}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
