"""Figures of the noise experiments, from the DSE summary table (one row per point and metric)."""

from pathlib import Path


from coreplane.core.figures import plt
from coreplane.core.machine import describe


def _metric(table, metric: str):
    return table[table["metric"] == metric]


def _runs(table) -> str:
    lo, hi = int(table["n"].min()), int(table["n"].max())
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _save(fig, axes, title: str, path: Path, table, bars: bool = True) -> str:
    m = describe()
    fig.suptitle(f"{title}\n{m['cpu']}, {m['cpus']} CPUs{' (KVM guest)' if m['virtual'] else ''}, "
                 f"median of {_runs(table)} runs per point{', bars min-max' if bars else ''}", fontsize=9)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)


def _errorbars(ax, rows, x: str, label: str, **kw) -> None:
    rows = rows.sort_values(x)
    ax.errorbar(rows[x], rows["median"], yerr=[rows["median"] - rows["min"], rows["max"] - rows["median"]],
                capsize=3, marker="o", label=label, **kw)


def barrier_threads(table, path: Path, title: str) -> str:
    """(a) runtime and p99 step time against thread count, one line per placement and noise."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    styles = {"none": "-", "sync": "--", "random": ":"}
    colours = {"default": "tab:red", "pinned": "tab:orange", "cell": "tab:green"}
    for ax, metric, ylabel in ((axes[0], "runtime_s", "runtime [s] (ideal 1.0)"),
                               (axes[1], "step_p99_us", "p99 step time [us] (quantum 1000)")):
        rows = _metric(table, metric)
        for (placement, noise), group in rows.groupby(["placement", "noise"]):
            _errorbars(ax, group, "threads", f"{placement}, noise {noise}", ls=styles[noise], color=colours[placement])
        ax.set_xlabel("threads")
        ax.set_ylabel(ylabel)
        ax.set_xticks(sorted(rows["threads"].unique()))
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=7)
    return _save(fig, axes, title, path, table)


def neighbour_lost(table, path: Path, title: str) -> str:
    """(b) % of time lost on the compute core, default vs cell, per neighbour."""
    fig, ax = plt.subplots(figsize=(7, 4))
    kinds = sorted(table["neighbour"].unique())
    for i, (metric, label, colour) in enumerate((("default_lost_pct", "default placement", "tab:red"),
                                                 ("cell_lost_pct", "cell", "tab:green"))):
        rows = _metric(table, metric).set_index("neighbour").loc[kinds]
        xs = [k + (i - 0.5) * 0.35 for k in range(len(kinds))]
        ax.bar(xs, rows["median"], width=0.35, label=label, color=colour,
               yerr=[rows["median"] - rows["min"], rows["max"] - rows["median"]], capsize=3)
    ratios = _metric(table, "lost_ratio").set_index("neighbour").loc[kinds]["median"]
    ax.set_yscale("log")
    top = ax.get_ylim()[1] * 6
    ax.set_ylim(top=top)
    for k, kind in enumerate(kinds):
        ax.annotate(f"cell / default = {ratios[kind]:.3f}", (k, top / 3), ha="center", fontsize=8)
    ax.set_xticks(range(len(kinds)), [f"neighbour: {k}" for k in kinds])
    ax.set_ylabel("time lost on the compute core [%]")
    ax.legend(fontsize=8)
    return _save(fig, [ax], title, path, table)


def cache_buster(table, path: Path, title: str) -> str:
    """(c) time per dependent load of the barrier benchmark, with and without the buster."""
    fig, ax = plt.subplots(figsize=(7, 4))
    rows = _metric(table, "ns_per_load")
    sizes = sorted(rows["working_set"].unique())
    for i, (buster, colour) in enumerate((("off", "tab:green"), ("on", "tab:red"))):
        r = rows[rows["buster"] == buster].set_index("working_set").loc[sizes]
        xs = [k + (i - 0.5) * 0.35 for k in range(len(sizes))]
        ax.bar(xs, r["median"], width=0.35, label=f"cache buster {buster}", color=colour,
               yerr=[r["median"] - r["min"], r["max"] - r["median"]], capsize=3)
    ax.set_xticks(range(len(sizes)), [f"{s:g} MiB" for s in sizes])
    ax.set_xlabel("working set of the barrier thread (chased at random)")
    ax.set_ylabel("time per load [ns] (step p50 / loads)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    return _save(fig, [ax], title, path, table)


def colour_probe(table, path: Path, title: str) -> str:
    """Colouring: latency over all colours vs over 1/C of them, for each working set."""
    fig, ax = plt.subplots(figsize=(7, 4))
    sizes = (1, 2, 4)
    for c, group in table.groupby("colours"):
        med = dict(zip(group["metric"], group["median"]))
        ax.plot(sizes, [med[f"few_{w}mib_ns"] for w in sizes], marker="o", label=f"1/{c} of the colours")
        ax.plot(sizes, [med[f"all_{w}mib_ns"] for w in sizes], marker="s", ls="--", label=f"all colours (run with 1/{c})")
        ax.axhline(med["dram_ns"], color="grey", lw=0.8)
    ax.annotate("64 MiB (beyond the LLC)", (sizes[0], med["dram_ns"]), fontsize=7, va="bottom")
    ax.set_xlabel("working set [MiB]")
    ax.set_ylabel("random dependent load [ns]")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    return _save(fig, [ax], title, path, table, bars=False)


def io_causes(table, path: Path, title: str) -> str:
    """io: the cell's lost time by cause (stacked), for the cell as it is and with its opt-in
    cuts, with the default placement's loss and the ratio written above."""
    from coreplane.noise.trials import CAUSES, IO_CUTS
    fig, ax = plt.subplots(figsize=(8, 4.5))
    settings = [c for c in IO_CUTS if c in set(table["cuts"])]
    bottom = [0.0] * len(settings)
    for cause in CAUSES:
        rows = _metric(table, f"cell_lost_{cause}_pct").set_index("cuts")
        heights = [float(rows.loc[s, "median"]) if s in rows.index else 0.0 for s in settings]
        if any(heights):
            ax.bar(range(len(settings)), heights, bottom=bottom, label=cause, width=0.5)
            bottom = [b + h for b, h in zip(bottom, heights)]
    default = _metric(table, "default_lost_pct").set_index("cuts")["median"]
    ratio = _metric(table, "lost_ratio").set_index("cuts")["median"]
    for k, s in enumerate(settings):
        ax.annotate(f"default placement {default[s]:.1f} %\ncell / default = {ratio[s]:.3f}", (k, bottom[k]),
                    ha="center", va="bottom", fontsize=8)
    ax.set_ylim(top=max(bottom) * 1.5)
    ax.set_xticks(range(len(settings)), [IO_CUTS[s] for s in settings], fontsize=8)
    ax.set_ylabel("time lost on the cell's compute core [%] (medians)")
    ax.legend(fontsize=7, title="gap charged to", title_fontsize=7)
    return _save(fig, [ax], title, path, table, bars=False)


DRAW = {"a": barrier_threads, "b": neighbour_lost, "c": cache_buster, "colour": colour_probe, "io": io_causes}
FILES = {"a": "noise-a-barrier.png", "b": "noise-b-neighbour.png", "c": "noise-c-cache.png",
         "colour": "noise-c-colour.png", "io": "noise-io-neighbour.png"}


def draw(name: str, table, outdir: Path, title: str) -> str:
    """Draws experiment `name`'s figure into `outdir` and returns its path."""
    return DRAW[name](table, Path(outdir) / FILES[name], title)
