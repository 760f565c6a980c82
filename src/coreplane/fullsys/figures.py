"""Paper 001's figures from a fullsys sweep, all simulated: the kernel's share of the region of interest against nodes per Debian suite and matrix size, the kernel's parts (network stack, copies, memory management, the rest), for a sweep of the L2's size (Figs. 6-8) cycles, data-access latency and L2 miss rate against it, for a sweep of the workload dataflow frames beside the message-passing stacks, and for a sweep on the nodes' common clock the speedup across nodes and the kernel's share against the matrix size (Fig. 9)."""

from pathlib import Path

import numpy as np

from coreplane import dse
from coreplane.dse.results import load_metrics, parameter_names
from coreplane.core.errors import CoreplaneError
from coreplane.core.figures import plt, save, style
from coreplane.fullsys.paths import SUITES

# The sweep's metric names (examples/sweeps/fullsys.info) of the parts drawn, bottom to top.
PART_METRICS = (("network_share", "network stack"), ("copies_share", "data copies"),
                ("memory_mgmt_share", "memory management"))
SHARE = "kernel_share"
# The region on the nodes' common clock (examples/sweeps/fullsys-clock.info), virtual ns.
REGION = "region_ns"


def _release_order(distro: str) -> int:
    """Suites in release order (oldest first), unknown names last."""
    return SUITES.index(distro) if distro in SUITES else len(SUITES)


def medians(sweep: Path):
    """Per point (distro, nodes, size) and metric: median, min and max over the repetitions."""
    table = dse.summary(sweep, metrics=[SHARE, *(m for m, _ in PART_METRICS)])
    missing = {"distro", "nodes", "size"} - set(table.columns)
    if missing:
        raise CoreplaneError(f"{sweep}: not a fullsys sweep (no parameter {', '.join(sorted(missing))})")
    return table


def markdown(table) -> str:
    """The kernel share and the network stack's share of all instructions, median (min–max, n), as
    a Markdown table: one row per suite and node count, one column pair per size."""
    sizes = sorted(table["size"].unique())
    def cell(rows, metric):
        r = rows[rows["metric"] == metric]
        if r.empty:
            return "—"
        r = r.iloc[0]
        return f"{100 * r['median']:.2f} % ({100 * r['min']:.2f}–{100 * r['max']:.2f}, n={r['n']})"
    head = ["suite", "nodes"] + [f"{what}, {s}×{s}" for s in sizes for what in ("kernel share", "network stack")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    groups = sorted(table.groupby(["distro", "nodes"]), key=lambda g: (_release_order(g[0][0]), g[0][1]))
    for (distro, nodes), rows in groups:
        cells = [cell(rows[rows["size"] == s], m) for s in sizes for m in (SHARE, "network_share")]
        lines.append(f"| {distro} | {nodes} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def share_against_nodes(table, path: Path, note: str) -> str:
    """Kernel share of instructions against nodes, a line per suite, a panel per size; bars span
    the repetitions' minimum to maximum."""
    shares = table[table["metric"] == SHARE]
    sizes = sorted(shares["size"].unique())
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.5 * len(sizes), 3.6), sharey=True, squeeze=False)
    for ax, size in zip(axes[0], sizes):
        for distro, rows in sorted(shares[shares["size"] == size].groupby("distro"), key=lambda g: _release_order(g[0])):
            rows = rows.sort_values("nodes")
            median = 100 * rows["median"].to_numpy()
            spread = np.vstack([median - 100 * rows["min"].to_numpy(), 100 * rows["max"].to_numpy() - median])
            ax.errorbar(rows["nodes"], median, yerr=spread, marker="o", capsize=3, label=distro)
        ax.set_xticks(sorted(shares["nodes"].unique()))
        style(ax, "nodes", "kernel share of instructions [%]", f"{size}×{size} matmul — simulated, {note}")
    return str(save(fig, path))


def parts(table, path: Path, note: str) -> str:
    """The kernel's share split into parts (medians) at the largest size, a bar per suite and node
    count: what grows with distribution."""
    size = table["size"].max()
    rows = table[table["size"] == size]
    points = sorted({(d, n) for d, n in zip(rows["distro"], rows["nodes"])}, key=lambda p: (_release_order(p[0]), p[1]))
    def median(metric, distro, nodes):
        r = rows[(rows["metric"] == metric) & (rows["distro"] == distro) & (rows["nodes"] == nodes)]
        return 100 * float(r["median"].iloc[0]) if not r.empty else 0.0
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(points)), 3.8))
    x = np.arange(len(points))
    bottom = np.zeros(len(points))
    for metric, label in PART_METRICS:
        height = np.array([median(metric, d, n) for d, n in points])
        ax.bar(x, height, bottom=bottom, label=label)
        bottom += height
    rest = np.array([median(SHARE, d, n) for d, n in points]) - bottom
    ax.bar(x, np.clip(rest, 0, None), bottom=bottom, label="rest of the kernel", color="lightgrey")
    ax.set_xticks(x, [f"{d}\n{n} node{'s' if n > 1 else ''}" for d, n in points], fontsize=7)
    style(ax, "", "share of all instructions [%]", f"kernel parts, {size}×{size} matmul — simulated, {note}")
    return str(save(fig, path))


# Figs. 6-8: (metric of the whole region, its kernel and user parts, axis label, scale of the values).
L2_PANELS = (("cycles", "kernel_cycles", "user_cycles", "cycles of the region [10⁶]", 1e-6),
             ("data_access_latency", "kernel_data_access_latency", "user_data_access_latency",
              "data-access latency [cycles]", 1),
             ("l2_miss_rate", "kernel_l2_miss_rate", "user_l2_miss_rate", "L2 miss rate [%]", 100))


def l2_sweep(sweep: Path, path: Path, note: str) -> tuple[str, str]:
    """Paper 001's Figs. 6-8 in one figure: cycles, data-access latency and L2 miss rate against the
    L2's size (KiB, log scale), a line per node count for the whole region, dashed and dotted for its
    kernel and user parts; the Markdown table of the medians."""
    metrics = [m for panel in L2_PANELS for m in panel[:3]]
    table = dse.summary(sweep, metrics=metrics)
    fig, axes = plt.subplots(1, len(L2_PANELS), figsize=(4.6 * len(L2_PANELS), 3.8))
    for ax, (whole, kernel, user, label, scale) in zip(axes, L2_PANELS):
        for nodes, rows in table.groupby("nodes"):
            for metric, style_, side in ((whole, "-o", "all"), (kernel, "--", "kernel"), (user, ":", "user")):
                r = rows[rows["metric"] == metric].sort_values("l2")
                ax.plot(r["l2"], scale * r["median"].astype(float), style_, label=f"{nodes} node{'s' if nodes > 1 else ''}, {side}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(table["l2"].unique()), [str(k) for k in sorted(table["l2"].unique())], fontsize=7)
        style(ax, "L2 size [KiB]", label, f"simulated (analytic timing), {note}")
    axes[0].legend(fontsize=6)
    sizes = sorted(table["l2"].unique())
    lines = ["| nodes | metric | " + " | ".join(f"{s} KiB" for s in sizes) + " |", "|" + "---|" * (len(sizes) + 2)]
    for (nodes, metric), rows in table[table["metric"].isin([p[0] for p in L2_PANELS] + ["kernel_l2_miss_rate"])].groupby(
            ["nodes", "metric"]):
        values = rows.set_index("l2")["median"]
        lines.append(f"| {nodes} | {metric} | " + " | ".join(f"{values.get(s, float('nan')):.4g}" for s in sizes) + " |")
    return str(save(fig, path)), "\n".join(lines)


def speedups(table) -> list[dict]:
    """Per suite, size and node count of a common-clock sweep: the region's median (ms), the
    speedup over one node of the same suite and size, and the kernel's median share."""
    region = table[table["metric"] == REGION].set_index(["distro", "size", "nodes"])["median"]
    share = table[table["metric"] == SHARE].set_index(["distro", "size", "nodes"])["median"]
    rows = []
    for (distro, size, nodes), ns in sorted(region.items()):
        alone = region.get((distro, size, 1))
        rows.append({"distro": distro, "size": size, "nodes": nodes, "region_ms": ns / 1e6,
                     "speedup": alone / ns if alone is not None else None, "kernel_share": share.get((distro, size, nodes))})
    return rows


def clock_sweep(sweep: Path, path: Path, note: str) -> tuple[str, str]:
    """On the nodes' common clock: the region's speedup over one node against nodes, a line per
    suite and size, and the kernel's share against the matrix size, a line per node count (the
    paper's Fig. 9); the Markdown table of the medians."""
    rows = speedups(dse.summary(sweep, metrics=[REGION, SHARE]))
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8))
    for (distro, size) in sorted({(r["distro"], r["size"]) for r in rows}):
        line = [r for r in rows if (r["distro"], r["size"]) == (distro, size) and r["speedup"] is not None]
        left.plot([r["nodes"] for r in line], [r["speedup"] for r in line], "-o", label=f"{distro} {size}×{size}")
    nodes = sorted({r["nodes"] for r in rows})
    left.plot(nodes, nodes, ":", color="grey", label="linear")
    left.set_xticks(nodes)
    style(left, "nodes", "speedup of the region over one node", f"common clock — simulated, {note}")
    left.legend(fontsize=7)
    for (distro, count) in sorted({(r["distro"], r["nodes"]) for r in rows}):
        line = sorted((r for r in rows if (r["distro"], r["nodes"]) == (distro, count)), key=lambda r: r["size"])
        right.plot([r["size"] for r in line], [100 * r["kernel_share"] for r in line], "-o",
                   label=f"{distro}, {count} node{'s' if count > 1 else ''}")
    right.set_xscale("log", base=2)
    right.set_xticks(sorted({r["size"] for r in rows}), [str(n) for n in sorted({r["size"] for r in rows})])
    style(right, "matrix size N (N×N)", "kernel share of instructions [%]", f"Fig. 9 — simulated, {note}")
    right.legend(fontsize=7)
    lines = ["| suite | size | nodes | region (ms, common clock) | speedup over 1 node | kernel share |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        speedup = "—" if r["speedup"] is None else f"{r['speedup']:.2f}×"
        lines.append(f"| {r['distro']} | {r['size']} | {r['nodes']} | {r['region_ms']:.3f} | {speedup} | "
                     f"{100 * r['kernel_share']:.2f} % |")
    return str(save(fig, path)), "\n".join(lines)


# The messaging stack's parameter (examples/sweeps/fullsys-mpi.info) and its values' names.
STACK = "stack"
STACK_NAMES = {"--sockets": "own TCP sockets (dmm)", "--mpi": "Open MPI (mpimm)"}


STACK_METRICS = [SHARE, REGION, "network_share", "polling_share", "user_insns", "kernel_insns"]


def stack_markdown(table) -> str:
    """The stacks side by side per size and node count (medians): kernel shares, MPI's kernel and
    user instructions as ratios to the sockets', the polling and network-stack parts, the region."""
    median = table.set_index([STACK, "size", "nodes", "metric"])["median"]
    lines = ["| size | nodes | kernel share, sockets | kernel share, Open MPI | kernel instructions, MPI ÷ sockets | "
             "polling, sockets / MPI | network stack, sockets / MPI | user instructions, MPI ÷ sockets | "
             "region, sockets / MPI (ms) |", "|---|---|---|---|---|---|---|---|---|"]
    for size in sorted(table["size"].unique()):
        for n in sorted(table["nodes"].unique()):
            get = lambda stack, metric: median.get((stack, size, n, metric), np.nan)
            ratio = lambda metric: (f"{get('--mpi', metric) / get('--sockets', metric):.2f}"
                                    if get("--sockets", metric) else "—")
            shares = lambda metric: f"{100 * get('--sockets', metric):.2f} / {100 * get('--mpi', metric):.2f} %"
            lines.append(f"| {size} | {n} | {100 * get('--sockets', SHARE):.2f} % | {100 * get('--mpi', SHARE):.2f} % | "
                         f"{ratio('kernel_insns')} | {shares('polling_share')} | {shares('network_share')} | "
                         f"{ratio('user_insns')} | {get('--sockets', REGION) / 1e6:.2f} / {get('--mpi', REGION) / 1e6:.2f} |")
    return "\n".join(lines)


def against_nodes(table, key: str, names: dict, path: Path, title: str) -> str:
    """The kernel's share of instructions and the region on the common clock against nodes, a line
    per value of the parameter `key` (named by `names`) and size."""
    median = table.set_index([key, "size", "nodes", "metric"])["median"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8))
    nodes = sorted(table["nodes"].unique())
    order = lambda value: list(names).index(value) if value in names else len(names)
    for value, size in sorted({(v, size) for v, size in zip(table[key], table["size"])}, key=lambda p: (order(p[0]), p[1])):
        label = f"{names.get(value, value)}, {size}×{size}"
        left.plot(nodes, [100 * median.get((value, size, n, SHARE), np.nan) for n in nodes], "-o", label=label)
        right.plot(nodes, [median.get((value, size, n, REGION), np.nan) / 1e6 for n in nodes], "-o", label=label)
    for ax in (left, right):
        ax.set_xticks(nodes)
    style(left, "nodes", "kernel share of instructions [%]", f"{title}")
    style(right, "nodes", "region on the common clock [ms]", f"{title}")
    right.set_yscale("log")
    left.legend(fontsize=7)
    return str(save(fig, path))


def stack_sweep(sweep: Path, path: Path, note: str) -> tuple[str, str]:
    """The OpenMPI baseline against the same multiply on its own sockets (against_nodes, a line per
    stack and size); the Markdown table of the medians (stack_markdown)."""
    table = dse.summary(sweep, metrics=STACK_METRICS)
    return against_nodes(table, STACK, STACK_NAMES, path, f"MPI baseline — simulated, {note}"), stack_markdown(table)


# The workload's parameter (examples/sweeps/fullsys-dataflow.info) and its values' names.
WORKLOAD = "workload"
WORKLOAD_NAMES = {"dmm": "own TCP sockets (dmm)", "dfmm": "dataflow frames (dfmm)", "mpimm": "Open MPI (mpimm)"}
WORKLOAD_METRICS = [SHARE, REGION, "network_share", "polling_share", "scheduling_share", "kernel_insns"]


def workload_markdown(table) -> str:
    """Per size and node count, a column group per workload (medians over the repetitions, their
    range): the kernel's share, its network-stack and polling parts, the region on the common clock."""
    median = table.set_index([WORKLOAD, "size", "nodes", "metric"])
    workloads = sorted(table[WORKLOAD].unique(), key=lambda w: list(WORKLOAD_NAMES).index(w) if w in WORKLOAD_NAMES else 9)
    head = ["size", "nodes"] + [f"{what}, {w}" for w in workloads
                                for what in ("kernel share", "network stack / polling", "region (ms)")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for size in sorted(table["size"].unique()):
        for n in sorted(table["nodes"].unique()):
            cells = []
            for w in workloads:
                row = lambda metric: median.loc[(w, size, n, metric)] if (w, size, n, metric) in median.index else None
                share, network, polling, region = (row(m) for m in (SHARE, "network_share", "polling_share", REGION))
                if share is None:
                    cells += ["—"] * 3
                    continue
                cells += [f"{100 * share['median']:.2f} % ({100 * share['min']:.2f}–{100 * share['max']:.2f}, n={int(share['n'])})",
                          f"{100 * network['median']:.2f} / {100 * polling['median']:.2f} %" if network is not None
                          and polling is not None else "—",
                          f"{region['median'] / 1e6:.2f}" if region is not None else "—"]
            lines.append(f"| {size} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def workload_sweep(sweep: Path, path: Path, note: str) -> tuple[str, str]:
    """Dataflow frames across nodes beside the message-passing stacks (against_nodes, a line per
    workload and size); the Markdown table (workload_markdown)."""
    table = dse.summary(sweep, metrics=WORKLOAD_METRICS)
    return (against_nodes(table, WORKLOAD, WORKLOAD_NAMES, path, f"dataflow vs message passing — simulated, {note}"),
            workload_markdown(table))


# The link interval's parameter (examples/sweeps/fullsys-link.info), µs of virtual time, and the
# fixed link latency's (examples/sweeps/fullsys-latency.info, netem), µs per frame.
LINK = "link"
LATENCY = "latency"
# What a link sweep compares, per line: (its parameter, the values' names), and per x value: (its
# parameter, its name in the table and on the axis, netem's part shown).
LINK_SWEEPS = {LINK: ((STACK, STACK_NAMES), "link interval"), LATENCY: ((WORKLOAD, WORKLOAD_NAMES), "link latency")}


def link_markdown(table, x: str = LINK) -> str:
    """Per line (stack or workload) and link interval or latency (medians): the region on the common
    clock, the kernel's share, its polling and network-stack parts (and netem's, for a latency), and
    node 0's TCP retransmissions."""
    (key, names), what = LINK_SWEEPS[x]
    netem = x == LATENCY
    median = table.set_index([key, x, "metric"])["median"]
    head = [key, f"{what} (µs)", "region (ms, common clock)", "kernel share", "polling", "network stack",
            *(["netem (the link model)"] if netem else []), "node 0's TCP retransmissions"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for value in sorted(table[key].unique(), key=lambda v: list(names).index(v) if v in names else 9):
        for link in sorted(table[x].unique()):
            get = lambda metric: median.get((value, link, metric), np.nan)
            parts = [f"{100 * get(m):.2f} %" for m in ("polling_share", "network_share", *(["netem_share"] if netem else []))]
            lines.append(f"| {names.get(value, value)} | {link} | {get(REGION) / 1e6:.2f} | {100 * get(SHARE):.2f} % | "
                         + " | ".join(parts) + f" | {get('tcp_retransmitted'):.0f} |")
    return "\n".join(lines)


def link_sweep(sweep: Path, path: Path, note: str, x: str = LINK) -> tuple[str, str]:
    """The region on the common clock and the kernel's share against the link interval or latency
    (`x`), a line per stack or workload; the Markdown table (link_markdown)."""
    (key, names), what = LINK_SWEEPS[x]
    table = dse.summary(sweep, metrics=[SHARE, REGION, "network_share", "polling_share", "tcp_retransmitted",
                                        *(["netem_share"] if x == LATENCY else [])])
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8))
    for value, rows in table.groupby(key):
        share = rows[rows["metric"] == SHARE].sort_values(x)
        region = rows[rows["metric"] == REGION].sort_values(x)
        label = names.get(value, value)
        left.plot(region[x], region["median"] / 1e6, "-o", label=label)
        right.plot(share[x], 100 * share["median"], "-o", label=label)
    for ax in (left, right):
        ax.set_xscale("symlog", linthresh=10 if x == LATENCY else 100)
    style(left, f"{what} [µs of virtual time]", "region on the common clock [ms]", f"simulated, {note}")
    style(right, f"{what} [µs of virtual time]", "kernel share of instructions [%]", f"simulated, {note}")
    left.legend(fontsize=7)
    return str(save(fig, path)), link_markdown(table, x)


def draw(sweep: Path, out: Path, note: str) -> dict:
    """The sweep's figures as PNGs in `out` and the Markdown table: Figs. 6-8 for a sweep of the L2's
    size, the link interval's or latency's effect for a sweep of either, the workloads compared for a sweep of the
    workload (dataflow frames, sockets, Open MPI), the stacks compared for a sweep of the
    messaging stack, the speedup and Fig. 9 for a
    sweep on the common clock, otherwise the kernel share against nodes and the kernel's parts."""
    for x in LINK_SWEEPS:
        if x in parameter_names(sweep):
            figure, table = link_sweep(sweep, out / f"fullsys-{x}.png", note, x)
            return {"figures": [figure], "table": table}
    if WORKLOAD in parameter_names(sweep):
        figure, table = workload_sweep(sweep, out / "fullsys-dataflow.png", note)
        return {"figures": [figure], "table": table}
    if STACK in parameter_names(sweep):
        figure, table = stack_sweep(sweep, out / "fullsys-mpi.png", note)
        return {"figures": [figure], "table": table}
    if "l2" in parameter_names(sweep):
        figure, table = l2_sweep(sweep, out / "fullsys-l2.png", note)
        return {"figures": [figure], "table": table}
    if REGION in set(load_metrics(sweep)["metric"]):
        figure, table = clock_sweep(sweep, out / "fullsys-clock.png", note)
        return {"figures": [figure], "table": table}
    table = medians(sweep)
    return {"figures": [share_against_nodes(table, out / "fullsys-nodes.png", note),
                        parts(table, out / "fullsys-parts.png", note)],
            "table": markdown(table)}
