"""The simulated Tables 1–2 as a figure: p50 of each operation against the number of compute cores, log-log."""

from pathlib import Path

from coreplane.core.figures import plt, save, style


def draw(rows: list[dict], path: Path) -> Path:
    """One line per operation (p50, with min–p99 as a band) over the core counts of `rows`."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, operation in enumerate(dict.fromkeys(r["operation"] for r in rows)):
        mine = [r for r in rows if r["operation"] == operation]
        x = [r["cores"] for r in mine]
        colour = plt.cm.tab20(i % 20)
        # operations on every vcore dashed, the one-vcore ones solid
        ax.plot(x, [r["p50_ns"] / 1e3 for r in mine], marker="o", ms=3, color=colour,
                ls="--" if "max" in operation or operation == "kill_mcp" else "-", label=operation.replace("_", " "))
        ax.fill_between(x, [r["min_ns"] / 1e3 for r in mine], [r["p99_ns"] / 1e3 for r in mine], color=colour,
                        alpha=0.12)
    ax.set_yscale("log")
    style(ax, "compute cores", "µs (p50; band min–p99)",
          "SIMULATED arbiter (SimPy, costs measured on dev-kvm-epyc2): ROS Tables 1–2 operations", logx=True)
    ax.legend(fontsize=6, ncol=2)
    return save(fig, path)
