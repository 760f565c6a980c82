"""The study's projections: each program under the paper's multi-kernel parameters and under coreplane's own,
the break-even round trip, and one plain sentence per program."""

from __future__ import annotations

from coreplane.core.output import human_ns
from coreplane.model.naive import naive
from coreplane.model.queueing import closed
from coreplane.model.refined import delegated_set, refined, splits
from coreplane.profile.records import Profile
from coreplane.model.calibration import Calibration
from coreplane.validate.plan import policy_of

# Paper 002 §5.3: γ = 1.04 (the smallest gain Gerofi et al. report) and the measured round trips
# 2·f_c of McKernel (6.28 µs) and mOS (6.46 µs), Table 3.
PAPER_GAMMA = 1.04
PAPER_ROUND_TRIP_NS = {"mckernel": 6280.0, "mos": 6460.0}
POLICIES = ("mckernel", "mos", "all", "min-frequency@0.9")


def break_even_round_trip(profile: Profile, policy: str, gamma: float) -> float | None:
    """The round trip 2·f_c at which the refined model's speedup is 1 (eq. 9 = eq. 4, linear in
    f_c): delegating gains below it and loses above. None if nothing is delegated; 0 if it never gains."""
    parts = splits(profile, delegated_set(profile, policy_of(policy)))
    calls = sum(p.remote_calls for p in parts)
    if not calls:
        return None
    slack = sum(p.t_nd() - p.compute_ns / gamma - p.local_ns - p.remote_g_ns for p in parts)
    return max(0.0, slack / calls)


def project(name: str, profile: Profile, calibration: Calibration, compute_cores: int, control_cores: int) -> dict:
    """Every policy under the paper's parameters (γ 1.04, its preset's round trip; McKernel's for the
    others) and under coreplane's own (γ 1, the micro-benchmark's round trip without added cost)."""
    own_fc = calibration.fc_ns(0)
    counts = profile.counts()
    rows = []
    for policy in POLICIES:
        pol = policy_of(policy)
        fc = PAPER_ROUND_TRIP_NS.get(policy, PAPER_ROUND_TRIP_NS["mckernel"]) / 2
        ref = refined(profile, PAPER_GAMMA, fc, pol)
        rows.append({
            "policy": policy, "delegated": sorted(ref.delegated, key=lambda n: (-counts[n], n)),  # most called first
            "delegated_calls": ref.delegated_calls,
            "paper_round_trip_ns": 2 * fc,
            "naive": naive(profile, PAPER_GAMMA).speedup, "refined": ref.speedup,
            "closed": closed(profile, PAPER_GAMMA, fc, pol, compute_cores, control_cores).speedup,
            "own_round_trip_ns": 2 * own_fc, "own_refined": refined(profile, 1.0, own_fc, pol).speedup,
            "break_even_round_trip_ns": break_even_round_trip(profile, policy, PAPER_GAMMA),
        })
    calls = sum(c.count for c in profile.syscalls)
    return {"program": name, "calls": calls, "distinct": len(profile.syscalls), "wall_ns": profile.wall_ns,
            "threads": max(1, len(profile.threads)), "p": profile.system_share(), "rows": rows}


def _change(speedup: float) -> str:
    pct = abs(speedup - 1.0) * 100
    return f"gain {pct:.1f} %" if speedup >= 1.0 else f"cost {pct:.1f} %"


def sentence(projection: dict, validated: dict | None = None) -> str:
    """What delegating McKernel's set of calls would cost or gain this program, in one sentence;
    `validated` is the validation row of that set on coreplane (no added forward cost), if any."""
    row = next(r for r in projection["rows"] if r["policy"] == "mckernel")
    name, calls = projection["program"], projection["calls"]
    head = (f"{name} ({calls:,} syscalls in {human_ns(projection['wall_ns'])}, "
            f"{projection['threads']} thread{'s' if projection['threads'] > 1 else ''}, p = {projection['p']:.1%})")
    if not row["delegated_calls"]:
        return f"{head}: McKernel would delegate none of its calls, so it would run as on Linux, sped up by γ."
    shown = ", ".join(row["delegated"][:4]) + (", …" if len(row["delegated"]) > 4 else "")
    share = row["delegated_calls"] / calls
    even = row["break_even_round_trip_ns"]
    limit = ("it never gains, whatever the round trip" if not even else
             f"it gains as long as a round trip stays under {human_ns(even)}")
    if validated is not None:
        own = (f"; on coreplane itself, with start-up, interposition and cold delegates counted, the closed model "
               f"predicted it would {_change(validated['closed'])} and it measured {_change(validated['measured'])}")
    else:
        own = (f"; on coreplane itself (γ = 1, {human_ns(row['own_round_trip_ns'])} round trip) the refined model "
               f"says it would {_change(row['own_refined'])}")
    return (f"{head}: delegating the {len(row['delegated'])} syscalls McKernel delegates ({shown}; {share:.0%} of its "
            f"calls) at McKernel's {human_ns(row['paper_round_trip_ns'])} round trip with γ = {PAPER_GAMMA} would "
            f"{_change(row['refined'])} (closed model: {_change(row['closed'])}); {limit}{own}.")
