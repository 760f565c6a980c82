"""Sensitivity of the projected speedup to γ, f_c and the delegated share: paper 002 Fig. 2, 4, 5, 7, 8 and 9."""

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from matplotlib.colors import TwoSlopeNorm
from matplotlib.ticker import FuncFormatter

from coreplane.core.figures import plt, save, style
from coreplane.core.output import human_ns
from coreplane.model.naive import naive_speedup
from coreplane.model.policies import BY_SHARE, Policy
from coreplane.model.refined import delegated_set, speedup, splits
from coreplane.profile.records import Profile

GAMMAS = np.linspace(1.0, 10.0, 46)
FC_NS = np.logspace(0, 10, 61)          # 1 ns … 10 s, as the paper's log f_c axes
SHARES = np.linspace(0.0, 1.0, 21)
FLOOR = 0.1                             # maps show smaller speedups as this


def sweep(profile: Profile, policy: Policy, gamma, fc_ns) -> np.ndarray:
    """S_r (eq. 11) for one policy over arrays of γ and f_c (broadcast together)."""
    return speedup(splits(profile, delegated_set(profile, policy)), gamma, fc_ns)


def sweep_share(profile: Profile, kind: str, gamma, fc_ns, seed: int = 0) -> np.ndarray:
    """S_r with the share on the first axis (SHARES) and the broadcast shape of γ, f_c after it."""
    return np.stack([sweep(profile, Policy(kind, share=float(x), seed=seed), gamma, fc_ns) for x in SHARES])


def _panels(count: int, title: str):
    cols = min(count, 3)
    rows = -(-count // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.8 * rows), squeeze=False)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=10)
    return fig, list(axes.flat[:count])


def _map(ax, x, y, z, xlabel: str, ylabel: str, title: str, logx: bool = False):
    """A speedup map on a log2 colour scale, green above 1 (gain) and red below (loss), each side
    with its own levels; S = 1 drawn in black, speedups below FLOOR drawn as FLOOR (the paper trims them)."""
    z = np.log2(np.clip(z, FLOOR, None))
    lo, hi = min(float(z.min()), -0.01), max(float(z.max()), 0.01)
    levels = np.concatenate([np.linspace(lo, 0.0, 12, endpoint=False), np.linspace(0.0, hi, 13)])
    mesh = ax.contourf(x, y, z, levels=levels, cmap="RdYlGn", norm=TwoSlopeNorm(0.0, lo, hi))
    if lo < 0.0 < hi:
        ax.contour(x, y, z, levels=[0.0], colors="k", linewidths=0.8)
    style(ax, xlabel, ylabel, title, logx=logx, legend=False)
    ax.grid(False)
    ax.figure.colorbar(mesh, ax=ax, ticks=levels[::3], format=FuncFormatter(lambda v, _: f"{2 ** v:.3g}"),
                       label="projected speedup (black: 1)")


def _policy_lines(profiles, path, title, x, xlabel, curve: Callable, logx=False, seed=0):
    fig, axes = _panels(len(BY_SHARE), title)
    for ax, kind in zip(axes, BY_SHARE):
        for prof in profiles:
            ax.plot(x, curve(prof, kind), label=prof.label)
        style(ax, xlabel, "projected speedup S_r", kind + (f" (seed {seed})" if kind == "random" else ""), logx)
    return save(fig, path)


def fig2_naive(profiles: Sequence[Profile], path: Path, gammas=(1.04, 1.5, 2, 4, 10)) -> Path:
    """Fig. 2/3: S_n (eq. 3) against the system share p for several γ, each profile's p marked."""
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    p = np.logspace(-7, 0, 200)
    for g in gammas:
        line, = ax.plot(p, naive_speedup(p, g), label=f"γ = {g:g}")
        for prof in profiles:
            share = prof.system_share()
            ax.plot([share], [naive_speedup(share, g)], "o", color=line.get_color(), ms=4)
    for prof in profiles:
        ax.axvline(max(prof.system_share(), 1e-7), color="grey", lw=0.6, ls=":")
        ax.text(max(prof.system_share(), 1e-7), 0.5, f" {prof.label}", rotation=90, fontsize=7, va="bottom",
                ha="right", transform=ax.get_xaxis_transform())
    style(ax, "system share p", "naive speedup S_n", "Naive model (eq. 3): speedup against p, profiles marked", True)
    return save(fig, path)


def fig4_policies_gamma(profiles: Sequence[Profile], path: Path, fc_ns: float, share: float, seed: int = 0) -> Path:
    """Fig. 4a–c: S_r against γ for min-frequency, max-frequency and random delegation at one share."""
    title = f"S_r against γ, f_c = {human_ns(fc_ns)}, {share:.0%} of calls delegated"
    return _policy_lines(profiles, path, title, GAMMAS, "gain γ",
                         lambda prof, kind: sweep(prof, Policy(kind, share, seed), GAMMAS, fc_ns), seed=seed)


def fig9_policies_fc(profiles: Sequence[Profile], path: Path, gamma: float, share: float, seed: int = 0) -> Path:
    """Fig. 9: S_r against f_c (log) for the three share policies, γ and share fixed."""
    title = f"S_r against f_c, γ = {gamma:g}, {share:.0%} of calls delegated"
    return _policy_lines(profiles, path, title, FC_NS, "forwarding cost f_c [ns]",
                         lambda prof, kind: sweep(prof, Policy(kind, share, seed), gamma, FC_NS), logx=True, seed=seed)


def fig5_gamma_fc(profiles: Sequence[Profile], path: Path, share: float) -> Path:
    """Fig. 5: S_r over γ and f_c (log), min-frequency delegation at one share."""
    fig, axes = _panels(len(profiles), f"S_r over γ and f_c, min-frequency, {share:.0%} of calls delegated")
    for ax, prof in zip(axes, profiles):
        z = sweep(prof, Policy("min-frequency", share), GAMMAS[:, None], FC_NS[None, :])
        _map(ax, FC_NS, GAMMAS, z, "forwarding cost f_c [ns]", "gain γ", prof.label, logx=True)
    return save(fig, path)


def fig7_fc_share(profiles: Sequence[Profile], path: Path, gamma: float) -> Path:
    """Fig. 7: S_r over f_c (log) and the share of calls delegated (least frequent first), γ fixed."""
    fig, axes = _panels(len(profiles), f"S_r over f_c and delegated share (min-frequency), γ = {gamma:g}")
    for ax, prof in zip(axes, profiles):
        _map(ax, FC_NS, SHARES * 100, sweep_share(prof, "min-frequency", gamma, FC_NS),
             "forwarding cost f_c [ns]", "calls delegated [%]", prof.label, logx=True)
    return save(fig, path)


def fig8_gamma_share(profiles: Sequence[Profile], path: Path, fc_ns: float) -> Path:
    """Fig. 8: S_r over γ and the share of calls delegated (least frequent first), f_c fixed."""
    fig, axes = _panels(len(profiles), f"S_r over γ and delegated share (min-frequency), f_c = {human_ns(fc_ns)}")
    for ax, prof in zip(axes, profiles):
        _map(ax, GAMMAS, SHARES * 100, sweep_share(prof, "min-frequency", GAMMAS, fc_ns),
             "gain γ", "calls delegated [%]", prof.label)
    return save(fig, path)


def draw_all(profiles: Sequence[Profile], outdir: str | Path, gamma: float, fc_ns: float, share: float,
             seed: int = 0, progress: Callable[[int, int, str], None] = lambda done, total, name: None) -> list[Path]:
    """Fig. 2, 4, 5, 7, 8 and 9 into `outdir`, with γ, f_c and the share held at the given values
    where a figure holds them fixed. `progress(done, total, name)` is called after each figure."""
    outdir = Path(outdir)
    jobs = [
        ("fig2-naive.png", lambda p: fig2_naive(profiles, p)),
        ("fig4-policies-gamma.png", lambda p: fig4_policies_gamma(profiles, p, fc_ns, share, seed)),
        ("fig5-gamma-fc.png", lambda p: fig5_gamma_fc(profiles, p, share)),
        ("fig7-fc-share.png", lambda p: fig7_fc_share(profiles, p, gamma)),
        ("fig8-gamma-share.png", lambda p: fig8_gamma_share(profiles, p, fc_ns)),
        ("fig9-policies-fc.png", lambda p: fig9_policies_fc(profiles, p, gamma, share, seed)),
    ]
    done = []
    for name, draw in jobs:
        done.append(draw(outdir / name))
        progress(len(done), len(jobs), name)
    return done

