"""The syscall profile plots (paper 002 Fig. 6 and 12)."""

from pathlib import Path

import numpy as np

from coreplane.core.figures import plt, save, style
from coreplane.profile.records import Profile


def plot_syscall_profile(profiles: list[Profile], path: str | Path) -> Path:
    """Left, as Fig. 6: the CDF of invocation counts, the share of distinct syscalls invoked at most
    x times (log x). Then, as Fig. 12, one panel per profile with each syscall's count (log y)."""
    fig, axes = plt.subplots(1, 1 + len(profiles), figsize=(5 + 5 * len(profiles), 4), squeeze=False)
    cdf_ax = axes[0][0]
    for prof in profiles:
        counts = np.sort([c.count for c in prof.syscalls if c.count])
        cdf_ax.step(counts, np.arange(1, counts.size + 1) / counts.size, where="post", label=prof.label)
    style(cdf_ax, "invocations of a syscall", "share of distinct syscalls", "syscall invocation CDF", logx=True)
    for ax, prof in zip(axes[0][1:], profiles):
        calls = sorted((c for c in prof.syscalls if c.count), key=lambda c: -c.count)
        ax.bar(range(len(calls)), [c.count for c in calls], color="tab:blue")
        ax.set_xticks(range(len(calls)), [c.name for c in calls], rotation=90, fontsize=7)
        ax.set_yscale("log")
        style(ax, "", "invocations", f"{prof.label}: p = {prof.system_share():.3%}", legend=False)
    return save(fig, path)
