"""Figures of the NetworkedOS experiments (IPC pairs, mapping quality, scaling, greedy-rb's scaling, the family, proposed threads)."""

from collections import defaultdict
from pathlib import Path

import numpy as np

from coreplane.core.figures import plt


def _title(doc: dict, what: str) -> str:
    m = doc["machine"]
    return f"{what} — {m['cpu']}, {m['cpus']} CPUs{' (VM)' if m['virtual'] else ''}"


def _loglog(ax, xlabel: str, ylabel: str | None, base: int = 10) -> None:
    ax.set_xscale("log", base=base)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def ipc_figure(doc: dict, path: Path) -> None:
    """Round-trip time against message size, one panel per transport and pair count."""
    rows = doc["rows"]
    panels = sorted({(r["transport"], r["pairs"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.6), sharey=True)
    for ax, (transport, pairs) in zip(np.atleast_1d(axes), panels):
        for placement, style in (("same-core", "o-"), ("cross-core", "s-"), ("mapped", "x--")):
            sel = sorted((r for r in rows if (r["transport"], r["pairs"], r["placement"]) == (transport, pairs, placement)),
                         key=lambda r: r["size"])
            if sel:
                ax.plot([r["size"] / 1024 for r in sel], [r["round_trip_ns"] / 1e3 for r in sel], style, label=placement)
        _loglog(ax, "message size [KiB]", None, base=2)
        ax.set_title(f"{transport}, {pairs} pair{'s' if pairs > 1 else ''}", fontsize=9)
    np.atleast_1d(axes)[0].set_ylabel("round trip [µs] (median)")
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.suptitle(_title(doc, "IPC pairs (paper Fig. 3)"), fontsize=9)
    _save(fig, path)


def quality_figure(doc: dict, path: Path) -> None:
    """hop-bytes of each method divided by Scotch's, per workload (meshes) and real programs."""
    rows = doc["rows"]
    scotch = {(r["topology"], r["workload"]): r["hop_bytes"] for r in rows if r["method"] == "scotch"}
    methods = [m for m in ("greedy", "greedy-refined", "treematch", "round-robin", "random")
               if any(r["method"] == m for r in rows)]
    order = ("ring", "stencil", "alltoall", "butterfly", "masterworker")
    cases = sorted(scotch, key=lambda k: (order.index(k[1]) if k[1] in order else len(order),
                                          int(np.prod([int(x) for x in k[0].split(":")[1].split("x")])), k[1]))
    cases = [c for c in cases if scotch[c] > 0]
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(cases)), 4.2))
    width = 0.8 / len(methods)
    ratio = defaultdict(dict)
    for r in rows:
        key = (r["topology"], r["workload"])
        if key in scotch and scotch[key] > 0:
            ratio[r["method"]][key] = r["hop_bytes"] / scotch[key]
    for i, m in enumerate(methods):
        ax.bar(np.arange(len(cases)) + i * width, [ratio[m].get(c, np.nan) for c in cases], width, label=m)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(np.arange(len(cases)) + 0.4 - width / 2)
    ax.set_xticklabels([f"{w}\n{t.split(':')[1]}" for t, w in cases], fontsize=6, rotation=90)
    ax.set_ylabel("hop-bytes / Scotch's")
    ax.set_yscale("log")
    ax.legend(fontsize=7, ncol=5)
    ax.set_title(_title(doc, "Mapping quality on 2-D meshes"), fontsize=9)
    _save(fig, path)


def scaling_figure(doc: dict, path: Path) -> None:
    """Partition time against layer-0 nodes; mapping time against processes."""
    rows = doc["rows"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.6))
    part = sorted((r for r in rows if r["kind"] == "partition"), key=lambda r: r["nodes"])
    a.plot([r["nodes"] for r in part], [r["seconds"] for r in part], "o-", label="greedy T partition (total)")
    a.plot([r["nodes"] for r in part], [r["native_s"] for r in part], "x--", label="native local moving")
    a.axhline(60, color="r", lw=0.8, ls=":", label="goal: 60 s at 10^6")
    _loglog(a, "layer-0 nodes (dynamic instructions)", "seconds")
    a.legend(fontsize=7)
    for method, style in (("greedy", "o-"), ("scotch", "s-")):
        sel = sorted((r for r in rows if r["kind"] == "map" and r["method"] == method), key=lambda r: r["processes"])
        b.plot([r["processes"] for r in sel], [r["seconds"] * 1e3 for r in sel], style, label=method)
    _loglog(b, "processes (stencil on a square mesh)", "mapping time [ms]")
    b.legend(fontsize=7)
    fig.suptitle(_title(doc, "Partition and mapping time"), fontsize=9)
    _save(fig, path)


def rb_scaling_figure(doc: dict, path: Path) -> None:
    """greedy-rb's (or the document's method's) CPU time per call against P (map.scaling), with
    c P log P fitted per kind, and each point's time over its fit: flat if the time grows as P log P."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.6))
    for (kind, f), style in zip(doc["fit_cpu"].items(), ("o", "s", "^")):
        p = np.array(f["processes"], dtype=float)
        t = [r["cpu_s"] for r in sorted((r for r in doc["rows"] if r["kind"] == kind), key=lambda r: r["processes"])]
        line, = a.plot(p, t, style, label=f"{kind} (slope {f['slope']:.2f})")
        a.plot(p, f["p_log_p"]["c"] * p * np.log2(p), "-", color=line.get_color(), lw=0.8)
        for shape, ls in (("p_log_p", "-"), ("p_log2_p", ":")):
            b.plot(p, f[shape]["t_over_fit"], style + ls, color=line.get_color(),
                   label=f"{kind}, {'P log P' if shape == 'p_log_p' else 'P log² P'}")
    _loglog(a, "processes P (2 per core)", "CPU seconds per call", base=2)
    a.legend(fontsize=7)
    b.set_xscale("log", base=2)
    b.axhline(1.0, color="grey", lw=0.8)
    b.set_xlabel("processes P")
    b.set_ylabel("time ÷ fitted c·shape")
    b.grid(True, alpha=0.3)
    b.legend(fontsize=6)
    fig.suptitle(_title(doc, f"{doc.get('method', 'greedy-rb')} time against P log P"), fontsize=9)
    _save(fig, path)


def family_figure(doc: dict, path: Path) -> None:
    """Hop-bytes ÷ those of Scotch's capacity-respecting mapping on every graph of the family,
    against process count: the paper's walks, greedy-swap, greedy-rb, greedy-ml and the portfolio; time ÷
    Scotch's time beside it. The development or the held-out family, as the document says."""
    rows = doc["rows"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    scotch_s = {r["graph"]: r["seconds"] for r in rows if r["method"] == "scotch-valid"}
    for method, style in (("greedy", "o"), ("greedy-swap", "^"), ("greedy-rb", "s"), ("greedy-ml", "D"),
                          ("portfolio", "x")):
        sel = [r for r in rows if r["method"] == method]
        jitter = np.random.default_rng(0).uniform(0.93, 1.07, len(sel))
        left.scatter([r["processes"] * j for r, j in zip(sel, jitter)], [r["vs_scotch"] for r in sel],
                     marker=style, s=14, label=method)
        right.scatter([r["processes"] * j for r, j in zip(sel, jitter)],
                      [r["seconds"] / scotch_s[r["graph"]] for r in sel], marker=style, s=14, label=method)
    for y, label in ((1.0, "Scotch"), (1.2, "1.2× goal (greedy)")):
        left.axhline(y, color="grey", ls="--" if y > 1 else "-", lw=0.8)
        left.annotate(label, (left.get_xlim()[0], y), fontsize=7, va="bottom")
    left.set_xscale("log", base=2)
    left.set_xlabel("processes")
    left.set_ylabel("hop-bytes ÷ Scotch's")
    left.legend(fontsize=8)
    left.grid(True, alpha=0.3)
    _loglog(right, "processes", "time ÷ Scotch's time", base=2)
    right.axhline(1.0, color="grey", lw=0.8)
    right.legend(fontsize=8)
    fig.suptitle(_title(doc, f"Mapping on the generated {doc.get('family', 'development').replace('heldout', 'held-out')} family"), fontsize=9)
    _save(fig, path)


def proposal_figure(doc: dict, path: Path) -> None:
    """Threads each quality T proposes (N = 16) for every traced program beside the count it was
    traced with, and the critical T's proposal against the message cost a."""
    rows = doc["rows"]
    programs = list(dict.fromkeys(r["program"] for r in rows))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))

    def pick(program, model, cost=None):
        return next(r for r in rows if r["program"] == program and r["cores"] == 16 and r["model"] == model
                    and (cost is None or r["message_cost"] == cost))

    x = np.arange(len(programs))
    default = doc.get("message_cost", 1000.0)
    for i, (label, value) in enumerate((
            ("traced with", lambda p: pick(p, "critical", default)["traced"]),
            ("eq. (1) (capped at N)", lambda p: pick(p, "eq1")["threads"]),
            (f"critical, a = {default:g}", lambda p: pick(p, "critical", default)["threads"]))):
        left.bar(x + (i - 1) * 0.27, [value(p) for p in programs], 0.27, label=label)
    left.set_xticks(x, programs, rotation=30, ha="right", fontsize=7)
    left.set_ylabel("threads (N = 16)")
    left.legend(fontsize=7)
    left.grid(True, axis="y", alpha=0.3)
    costs = sorted({r["message_cost"] for r in rows if r["model"] == "critical" and r["cores"] == 16})
    for program in programs:
        right.plot(costs, [pick(program, "critical", a)["threads"] for a in costs], "o-", ms=3, label=program)
    _loglog(right, "message cost a (units of work)", "threads proposed (critical T, N = 16)")
    right.legend(fontsize=6)
    fig.suptitle(_title(doc, "Threads proposed from layer 0"), fontsize=9)
    _save(fig, path)
