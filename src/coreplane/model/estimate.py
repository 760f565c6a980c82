"""Model parameters from measurements: f_c from micro-benchmark trials (Table 3, Fig. 13), γ per program (Table 4)."""

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from coreplane.core import documents
from coreplane.core.errors import CoreplaneError
from coreplane.model.policies import Policy
from coreplane.model.refined import delegated_set, splits
from coreplane.profile.records import Profile

MIN_TRIALS = 1000  # paper 002 §5.3: "the minimum measured value over 1000 trials"


@dataclass
class ForwardCost:
    """Round trip 2·f_c per delegated call over the trials (ns): min, mean, median, max."""

    trials: int
    native_ns: float | None     # the native call time subtracted from every trial (median), if given
    min: float
    mean: float
    median: float
    max: float

    def fc_ns(self, statistic: str = "min") -> float:
        """One-way f_c of eq. 5 from a summary statistic; the paper uses the minimum (Fig. 13)."""
        if statistic not in ("min", "mean", "median", "max"):
            raise CoreplaneError(f"forward-cost statistic {statistic!r}: use min, mean, median or max")
        return getattr(self, statistic) / 2.0

    def to_dict(self) -> dict:
        return asdict(self)


def forward_cost(delegated_ns: Sequence[float], native_ns: Sequence[float] | None = None) -> ForwardCost:
    """2·f_c from timed trials of a delegated call, minus the same call's native time (the median of
    `native_ns`) as in paper 002 §5.3; at least 1000 trials, as in Table 3."""
    trials = np.asarray(delegated_ns, dtype=float)
    if trials.size < MIN_TRIALS:
        raise CoreplaneError(f"forward cost: {trials.size} trials; at least {MIN_TRIALS} are needed")
    native = float(np.median(native_ns)) if native_ns is not None and len(native_ns) else None
    # A delegated call includes the call itself: what is left after subtracting it is forwarding.
    rt = np.maximum(trials - (native or 0.0), 0.0)
    return ForwardCost(int(trials.size), native, float(rt.min()), float(rt.mean()), float(np.median(rt)),
                       float(rt.max()))


def load_forward_samples(path: str | Path) -> ForwardCost:
    """Reads `{"delegated_ns": [...], "native_ns": [...]}` (docs/formats.md) and estimates 2·f_c."""
    doc = documents.read_json(path)
    series = {}
    for key in ("delegated_ns", "native_ns"):
        values = doc.get(key) if isinstance(doc, dict) else None
        if key == "native_ns" and values is None:
            continue
        if not isinstance(values, list) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in values):
            raise CoreplaneError(f"{path}: {key}: expected a list of non-negative numbers")
        series[key] = values
    try:
        return forward_cost(series["delegated_ns"], series.get("native_ns"))
    except CoreplaneError as exc:
        raise CoreplaneError(f"{path}: {exc}") from None


def solve_gamma(profile: Profile, measured_speedup: float, fc_ns: float, policy: Policy,
                local_ns: Mapping[str, float] | None = None) -> float:
    """The γ for which eq. 11 gives the measured speedup S (paper 002 §5.3). Eq. 9–10 are linear in
    1/γ: C/γ = t_nd/S − t_remote − t_local, so γ = C / (t_nd/S − t_remote − t_local)."""
    if measured_speedup <= 0:
        raise CoreplaneError(f"{profile.source}: measured speedup {measured_speedup}: must be positive")
    parts = splits(profile, delegated_set(profile, policy), local_ns)
    compute = sum(p.compute_ns for p in parts)
    t_nd = sum(p.t_nd() for p in parts)
    rest = sum(float(p.t_remote(fc_ns)) + p.local_ns for p in parts)
    budget = t_nd / measured_speedup - rest
    if compute <= 0 or budget <= 0:
        bound = t_nd / rest if rest else float("inf")
        raise CoreplaneError(f"{profile.source}: no gain γ explains a speedup of {measured_speedup:.4g}: "
                             f"with this forward cost and policy the speedup is at most {bound:.4g}")
    return compute / budget


def aggregate_gamma(gammas: Mapping[str, float]) -> float:
    """The γ of the model for a whole suite: the median of the per-program values (Table 4, Fig. 15)."""
    if not gammas:
        raise CoreplaneError("no per-program γ to aggregate")
    return float(np.median(list(gammas.values())))


def leave_one_out(gammas: Mapping[str, float]) -> dict[str, float]:
    """For each program, the median γ of the other programs: a γ not fitted on the run it predicts."""
    if len(gammas) < 2:
        raise CoreplaneError("leave-one-out γ needs at least two programs")
    return {name: float(np.median([g for other, g in gammas.items() if other != name])) for name in gammas}
