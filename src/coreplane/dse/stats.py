"""Statistics of repeated runs (scipy): summaries with t-intervals, the CV flag, Welch's t-test."""

from __future__ import annotations

import math

import numpy as np

SUMMARY_FIELDS = ("n", "mean", "sd", "median", "min", "max", "ci_low", "ci_high", "cv")


def describe(values, confidence: float = 0.95) -> dict[str, float]:
    """n, mean, sample sd, median, min, max, two-sided t-interval of the mean, and sd/mean."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return {k: (0 if k == "n" else math.nan) for k in SUMMARY_FIELDS}
    mean = float(x.mean())
    sd = float(x.std(ddof=1)) if n > 1 else math.nan
    if n > 1 and sd > 0:
        from scipy import stats as sps   # imported on use: scipy costs 0.3 s at start-up
        low, high = sps.t.interval(confidence, n - 1, loc=mean, scale=sd / math.sqrt(n))
    elif n > 1:
        low = high = mean
    else:
        low = high = math.nan
    return {"n": n, "mean": mean, "sd": sd, "median": float(np.median(x)), "min": float(x.min()),
            "max": float(x.max()), "ci_low": float(low), "ci_high": float(high),
            "cv": sd / abs(mean) if n > 1 and mean != 0 else math.nan}


def cv_too_high(values, threshold: float | None) -> bool:
    """Whether the spread is above the threshold (needs two values; no threshold: never)."""
    if threshold is None or len(values) < 2:
        return False
    cv = describe(values)["cv"]
    return not math.isnan(cv) and cv > threshold


def welch(a, b) -> dict[str, float]:
    """Welch's unequal-variance t-test of mean(b) - mean(a): t, degrees of freedom, two-sided p."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or len(b) < 2:
        return {"t": math.nan, "dof": math.nan, "p": math.nan}
    from scipy import stats as sps
    result = sps.ttest_ind(b, a, equal_var=False)
    return {"t": float(result.statistic), "dof": float(result.df), "p": float(result.pvalue)}
