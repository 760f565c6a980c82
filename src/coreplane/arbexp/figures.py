"""Figures of the arbiter's experiments, from the DSE summary (one row per point and metric) and,
for Figure 6's per-frame times, from the runs' own JSON."""

import json
from pathlib import Path

import numpy as np

from coreplane.arbexp.names import BORROWERS, GANG, POOL_PROGRAMS, TABLE_OPS
from coreplane.arbiter.bench import GOALS as TABLE_GOALS
from coreplane.arbiter.fig6 import BORROWER_SHARE_GOAL, FRAME_RATIO_GOAL
from coreplane.core.figures import plt, save
from coreplane.dse.results import load_runs, meta

FILES = {"table1": "arbiter-experiment-table1.png", "fig6": "arbiter-experiment-fig6.png",
         "pool": "arbiter-experiment-pool.png"}


def _rows(table, metric: str):
    return table[table["metric"] == metric]


def _ordered(table, metrics: list[str]):
    """The rows of `metrics`, in that order."""
    return table[table["metric"].isin(metrics)].set_index("metric").loc[metrics]


def _bars(ax, x, rows, **kw) -> None:
    """A bar at each x: the median over the runs, whiskers from min to max."""
    ax.bar(x, rows["median"], yerr=[rows["median"] - rows["min"], rows["max"] - rows["median"]], capsize=3, **kw)


def _title(fig, title: str, table, sweep: Path) -> None:
    """The title, with the machine the sweep recorded and the load its runs saw."""
    machine = meta(sweep).get("machine", {})
    loads = _rows(table, "load_1min")
    n = f"{table['n'].min()}" if table["n"].min() == table["n"].max() else f"{table['n'].min()}-{table['n'].max()}"
    fig.suptitle(f"{title}\n{machine.get('cpu')}, {machine.get('cpus')} CPUs{' (VM)' if machine.get('virtual') else ''}, "
                 f"under load {loads['min'].min():.1f}-{loads['max'].max():.1f} (1-min average at the runs), "
                 f"{n} runs per point, bars: median, whiskers min-max", fontsize=8)


def table1(table, sweep: Path, path: Path, title: str) -> Path:
    """p50 (bars) and p99 (markers) of each operation, per arbiter priority, log scale, goals dashed."""
    fig, ax = plt.subplots(figsize=(10, 5))
    settings = sorted(table["fifo"].unique())
    width = 0.8 / len(settings)
    ys = np.arange(len(TABLE_OPS))
    for i, fifo in enumerate(settings):
        mine = table[table["fifo"] == fifo]
        p50, p99 = (_ordered(mine, [f"{op}_{stat}" for op in TABLE_OPS]) for stat in ("p50_us", "p99_us"))
        y = ys + (i - (len(settings) - 1) / 2) * width
        label = "arbiter at ordinary priority" if fifo == 0 else f"arbiter at SCHED_FIFO {fifo}"
        ax.barh(y, p50["median"], height=width, xerr=[p50["median"] - p50["min"], p50["max"] - p50["median"]],
                capsize=2, label=f"{label}: p50")
        ax.plot(p99["median"], y, "k|", markersize=9, label="p99" if i == 0 else None)
    for op, (stat, goal) in TABLE_GOALS.items():
        k = TABLE_OPS.index(op)
        ax.plot([goal, goal], [k - 0.45, k + 0.45], "r--", lw=1, label="goal (p50; p99 for the deadline)" if k == 2 else None)
    ax.set_yticks(ys, [op.replace("_", " ") for op in TABLE_OPS], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("latency [µs]")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=7)
    _title(fig, title, table, sweep)
    return save(fig, path)


def _frames(sweep: Path) -> dict:
    """Per (warn_us, configuration): every per-frame time of every successful run, in ms."""
    runs = load_runs(sweep)
    frames: dict = {}
    for _, run in runs[(runs["status"] == "ok") & ~runs["warmup"]].iterrows():
        try:
            doc = json.loads((Path(run["log_dir"]) / "stdout").read_text())
        except (OSError, json.JSONDecodeError):
            continue
        for r in doc["runs"]:
            frames.setdefault((run["warn_us"], r["borrower"] or "alone"), []).extend(r["per_frame_ms"])
    return frames


def fig6(table, sweep: Path, path: Path, title: str) -> Path:
    """Per-frame time distributions (alone, with each borrower, per warning time); the per-frame
    time's ratio to alone and the borrower's share of the idle core time, against the goals."""
    fig, (cdf, ratio, share) = plt.subplots(1, 3, figsize=(13, 4), gridspec_kw={"width_ratios": [2, 1, 1]})
    warns = sorted(table["warn_us"].unique())
    for (warn, config), ms in sorted(_frames(sweep).items()):
        ms = np.sort(ms)
        cdf.plot(ms, np.arange(1, len(ms) + 1) / len(ms), ls="-" if warn == warns[0] else "--",
                 label=f"{config}, {warn} µs warning (p50 {np.median(ms):.1f}, max {ms[-1]:.0f} ms)")
    cdf.set_xscale("log")
    cdf.set_xlabel("per-frame time, arrival to done [ms]")
    cdf.set_ylabel("fraction of frames")
    cdf.legend(fontsize=6)
    width = 0.8 / len(BORROWERS)
    for ax, metric, goal, label in ((ratio, "frame_ratio", FRAME_RATIO_GOAL, "per-frame time ÷ alone (p50)"),
                                    (share, "borrower_share", BORROWER_SHARE_GOAL, "borrower's share of idle core time")):
        for i, b in enumerate(BORROWERS):
            rows = _rows(table, f"{b}_{metric}").set_index("warn_us").loc[warns]
            _bars(ax, np.arange(len(warns)) + (i - 0.5) * width, rows, width=width, label=f"borrower {b}")
        ax.axhline(goal, color="r", ls="--", lw=1, label="goal")
        ax.set_xticks(range(len(warns)), [f"{w} µs" for w in warns])
        ax.set_xlabel("warning before a loan is taken back")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    share.set_ylim(0, 1.05)
    _title(fig, title, table, sweep)
    return save(fig, path)


def pool(table, sweep: Path, path: Path, title: str) -> Path:
    """Wall time and share of tasks ended on a control core of each program, without and with
    the gang stop."""
    fig, (wall, control) = plt.subplots(1, 2, figsize=(10, 4))
    gangs = [g for g in GANG if g in set(table["gang"])]
    width = 0.8 / len(gangs)
    for ax, metric, label in ((wall, "wall_s_median", "wall time [s]"),
                              (control, "share_on_control_cores", "share of tasks ended on a control core")):
        for i, g in enumerate(gangs):
            rows = _ordered(table[table["gang"] == g], [f"{p}_{metric}" for p in POOL_PROGRAMS])
            _bars(ax, np.arange(len(POOL_PROGRAMS)) + (i - (len(gangs) - 1) / 2) * width, rows, width=width, label=GANG[g])
        ax.set_xticks(range(len(POOL_PROGRAMS)), ["adaptive (vcore API)", "fixed, a thread per core", "fixed, one more"],
                      fontsize=8)
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    control.set_ylim(0, 1)
    _title(fig, title, table, sweep)
    return save(fig, path)


DRAW = {"table1": table1, "fig6": fig6, "pool": pool}


def draw(name: str, table, sweep: Path, outdir: Path, title: str) -> str:
    """Draws experiment `name`'s figure into `outdir` and returns its path."""
    return str(DRAW[name](table, Path(sweep), Path(outdir) / FILES[name], title))
