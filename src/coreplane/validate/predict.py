"""Predictions of each validated configuration by every model, with estimated and with fitted γ, and their errors."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from coreplane.core.errors import CoreplaneError
from coreplane.model.calibration import Calibration, delegated_run, profiled_startup_ns, with_startup, yield_ns
from coreplane.model.estimate import ForwardCost, aggregate_gamma, leave_one_out, solve_gamma
from coreplane.model.naive import naive
from coreplane.model.projection import HEADLINE, project
from coreplane.model.queueing import closed, queueing
from coreplane.model.refined import interposed_local_ns, refined
from coreplane.profile.records import Profile
from coreplane.validate.calibrate import STATISTICS, RoundCalibration
from coreplane.validate.commands import Machine
from coreplane.validate.plan import Config, policy_of

# Models with estimated parameters (γ from the gain_synth calibration, 1 for real programs;
# f_c from the micro-benchmark): the paper's three and the closed model.
ESTIMATED = ("naive", "refined", "queueing", "closed", "project")
# With γ fitted on measured speedups (paper 002 Table 4): "median" is the paper's aggregate over
# all programs, the program itself included (in-sample); "loo" leaves the predicted program out.
FITTED = ("naive:median", "refined:median", "refined:loo", "closed:loo")
# The headline models with the round's round trip alone, without the one measured around each run
# (commands.handoff_bracket): what the probes change (the same value where a run has none: no
# delegation, or a validation made before them).
ROUND_ONLY = ("closed/round", "project/round")
MODEL_NAMES = {"project": "coreplane project, defaults (closed, from the profile as recorded)", "naive": "naive (eq. 3)", "refined": "refined (eq. 4–11)", "queueing": "open M/M/1 (eq. 12–13)",
               "closed": "closed MVA", "naive:median": "naive, γ = median fit (in-sample)",
               "refined:median": "refined, γ = median fit (in-sample)",
               "refined:loo": "refined, γ = median of the other programs", "closed:loo": "closed, γ = median of the others",
               "closed/round": "closed MVA, the round's round trip only",
               "project/round": "coreplane project, the round's round trip only"}


@dataclass
class Subject:
    """What the predictions of one program need: its profile (for a sequential program with C
    taken from the measured native time), the native median time and each round's native time."""

    name: str
    profile: Profile
    native_ns: float
    synthetic: bool
    native_by_round: dict[int, float] = dataclasses.field(default_factory=dict)
    profiled: Profile | None = None   # as recorded: what `coreplane project` sees

    @classmethod
    def of(cls, name: str, profile: Profile, native_ns: float, synthetic: bool,
           native_by_round: dict[int, float] | None = None) -> "Subject":
        # Eq. 4's C = t_nd − Σ g(s): for a sequential program t_nd is the native run, not the
        # profiled one (which paid the runtime's start-up and interposition).
        recorded = profile
        if not profile.multithreaded:
            profile = dataclasses.replace(profile, wall_ns=max(1, int(round(native_ns))))
        return cls(name, profile, native_ns, synthetic, dict(native_by_round or {}), recorded)

    def in_round(self, r: int) -> "Subject":
        """The subject as round r saw it: its native time there."""
        return Subject.of(self.name, self.profiled, self.native_by_round[r], self.synthetic)


def parameters(subject: Subject, config: Config, cal: Calibration, gamma: float,
               statistic: str = "mean") -> tuple[float, float]:
    """f_c and the time added once to one configuration's run (model/calibration.py's delegated_run)."""
    cost = delegated_run(subject.profile, policy_of(config.policy), cal, gamma, config.fc_ns, statistic)
    return cost.fc_ns, cost.added_ns


def speedups(subject: Subject, config: Config, cal: Calibration, machine: Machine, gamma: float,
             statistic: str = "mean") -> dict[str, float | None]:
    """Projected speedup of one configuration by each model at gain `gamma`; None = saturated."""
    prof, pol = subject.profile, policy_of(config.policy)
    fc, startup = parameters(subject, config, cal, gamma, statistic)
    local = interposed_local_ns(prof, cal.local_ns)
    q = queueing(prof, gamma, fc, pol, delegates=1, local_ns=local)
    return {
        "naive": naive(prof, gamma).speedup,
        "refined": with_startup(subject.native_ns, refined(prof, gamma, fc, pol, local_ns=local).speedup, startup),
        "queueing": with_startup(subject.native_ns, None if q.saturated else q.speedup, startup),
        "closed": with_startup(subject.native_ns, closed(prof, gamma, fc, pol, compute_cores=machine.compute_count,
                                                control_cores=machine.control_count, spin_ns=cal.spin_ns(config.fc_ns),
                                                local_ns=local, yield_ns=yield_ns(cal)).speedup, startup),
        "project": _as_project(subject, config, cal, machine, gamma, statistic),
    }


def _as_project(subject: Subject, config: Config, cal: Calibration, machine: Machine, gamma: float,
                statistic: str) -> float | None:
    """What `coreplane project PROFILE --delegate P --forward-cost F` answers with this calibration:
    the closed model on the profile as recorded (C from the profiled wall, which knows nothing of
    the native run), as a speedup over the measured native time."""
    prof, pol = subject.profiled, policy_of(config.policy)
    cost = delegated_run(prof, pol, cal, gamma, config.fc_ns, statistic)
    fc, startup = cost.fc_ns, cost.added_ns - profiled_startup_ns(prof, cal)
    answer = project(prof, gamma, fc, pol, 1, machine.compute_count, machine.control_count,
                     cal.spin_ns(config.fc_ns), None, startup, yield_ns=yield_ns(cal), answer_only=True)["answer"]
    return None if answer["time_ns"] is None else subject.native_ns / answer["time_ns"]


def fitted_gamma(subject: Subject, config: Config, cal: Calibration, measured: float,
                 statistic: str = "mean") -> float | None:
    """γ for which the refined model gives the measured speedup (start-up taken out first), over
    the γ estimate: how far the estimate was off. None when no γ explains the measurement."""
    estimate = cal.gamma(config.gamma)
    fc, startup = parameters(subject, config, cal, estimate, statistic)
    runtime_ns = subject.native_ns / measured - startup
    if runtime_ns <= 0:
        return None
    try:
        g = solve_gamma(subject.profile, subject.native_ns / runtime_ns, fc, policy_of(config.policy),
                        local_ns=interposed_local_ns(subject.profile, cal.local_ns))
    except CoreplaneError:
        return None
    return g / estimate


def _median(values: list[float | None]) -> float | None:
    """The median of the rounds' values; None (saturated) when most rounds had none."""
    known = [v for v in values if v is not None]
    return float(np.median(known)) if len(known) * 2 > len(values) else None


def round_speedups(subject: Subject, config: Config, cal: Calibration, per_round: dict[int, RoundCalibration],
                   rounds: list[int], machine: Machine, gamma: float, statistic: str = "mean",
                   handoff: dict[int, ForwardCost] | None = None) -> dict[str, float | None]:
    """`speedups` round by round, each round with its own native time and micro-benchmark
    figures (the vCPU placement, and so the round trip, can change between rounds), and each run
    with the round trip measured around it where there is one (`handoff`, by round: the
    placement changes within rounds too), then the median over the rounds. Without rounds:
    once, with the medians and the calibration."""
    if not rounds:
        return speedups(subject, config, cal, machine, gamma, statistic)
    handoff = handoff or {}
    each = [speedups(subject.in_round(r), config, cal.for_round(per_round.get(r)).with_handoff(handoff.get(r)),
                     machine, gamma, statistic)
            for r in rounds]
    return {model: _median([e[model] for e in each]) for model in each[0]}


def table(subjects: dict[str, Subject], configs: list[Config], measured: dict[str, dict],
          walls: dict[str, dict[int, float]], cal: Calibration, per_round: dict[int, RoundCalibration],
          machine: Machine, statistic: str = "mean",
          handoffs: dict[str, dict[int, ForwardCost]] | None = None) -> tuple[list[dict], dict]:
    """One row per measured configuration: measured speedup (the median over rounds of the
    round's native time over its run's, with the t-interval of the run), every model's
    prediction (`round_speedups`, with each run's own round trip from `handoffs` where it was
    measured; the ROUND_ONLY columns without it) and error. Also returns the γ fits: per case,
    per program (median) and the aggregate (median of programs), Table 4 style."""
    handoffs = handoffs or {}
    rows, rounds_of = [], {}
    for c in configs:
        s = subjects[c.program]
        run = measured.get(c.case)
        if not run or not run["n"]:
            continue
        rounds_of[c.case] = [r for r in sorted(walls.get(c.case, {})) if r in s.native_by_round]
        by_round = [s.native_by_round[r] / walls[c.case][r] for r in rounds_of[c.case]]
        meas = float(np.median(by_round)) if by_round else s.native_ns / run["median"]
        gamma = cal.gamma(c.gamma)
        memo: dict[tuple, dict] = {}

        def at(g: float, st: str, probed: bool = True) -> dict:
            """`round_speedups` at γ = g and statistic st, with the runs' own round trips unless
            not `probed`; each once (the columns below ask for some twice)."""
            if (g, st, probed) not in memo:
                memo[g, st, probed] = round_speedups(s, c, cal, per_round, rounds_of[c.case], machine, g, st,
                                                     handoffs.get(c.case) if probed else None)
            return memo[g, st, probed]
        row = {"case": c.case, "program": c.program, "policy": c.policy, "fc_ns": c.fc_ns, "gamma_emulated": c.gamma,
               "gamma_estimated": gamma, "threads": max(1, len(s.profile.threads)), "delegated_calls":
               refined(s.profile, 1.0, 0.0, policy_of(c.policy)).delegated_calls, "n": run["n"],
               "native_ns": s.native_ns, "run_ns": run["median"], "run_cv": run["cv"], "measured": meas,
               "measured_low": s.native_ns / run["ci_high"] if run["ci_high"] == run["ci_high"] else math.nan,
               "measured_high": s.native_ns / run["ci_low"] if run["ci_low"] == run["ci_low"] and run["ci_low"] > 0 else math.nan}
        for model, value in at(gamma, statistic).items():
            row[model] = value
        row["handoff_ns"] = (float(np.median([h.mean for h in handoffs[c.case].values()]))
                             if handoffs.get(c.case) else None)
        plain = at(gamma, statistic, probed=False) if handoffs.get(c.case) else row
        for model in ROUND_ONLY:
            row[model] = plain[model.split("/")[0]]
        for st in STATISTICS:
            for model, value in at(gamma, st).items():
                if model in ("refined", "closed"):
                    row[f"{model}@{st}"] = value
        row["noise"] = round_noise(s.native_by_round, walls.get(c.case, {}))
        row["gamma_fit"] = fitted_gamma(s, c, cal, meas, statistic)
        rows.append(row)
    fits = _aggregate([r for r in rows if r["gamma_fit"] is not None])
    for row in rows:
        s = subjects[row["program"]]
        c = next(c for c in configs if c.case == row["case"])
        base = cal.gamma(c.gamma)
        for label, ratio in (("median", fits["median"]), ("loo", fits["loo"].get(row["program"]))):
            if ratio is None:
                continue
            preds = round_speedups(s, c, cal, per_round, rounds_of[row["case"]], machine, base * ratio, statistic,
                                   handoffs.get(row["case"]))
            for model in (m for m in FITTED if m.endswith(":" + label)):
                row[model] = preds[model.split(":")[0]]
        for model in (*ESTIMATED, *FITTED, *ROUND_ONLY, *(f"{m}@{st}" for m in ("refined", "closed") for st in STATISTICS)):
            value = row.get(model)
            row[f"err:{model}"] = (value - row["measured"]) / row["measured"] if value is not None else None
    return rows, fits


def _aggregate(rows: list[dict]) -> dict:
    by_program: dict[str, list[float]] = {}
    for r in rows:
        by_program.setdefault(r["program"], []).append(r["gamma_fit"])
    per_program = {p: float(np.median(v)) for p, v in by_program.items()}
    median = aggregate_gamma(per_program) if per_program else None
    loo = leave_one_out(per_program) if len(per_program) > 1 else {}
    return {"per_program": per_program, "median": median, "loo": loo,
            "per_case": {r["case"]: r["gamma_fit"] for r in rows}}


def measurement_noise(natives: list[float], walls: list[float], draws: int = 2000) -> float | None:
    """How far a configuration's measured speedup (the median over rounds of native ÷ run, one
    pair per round) lies from its true value by chance alone, estimated by a bootstrap over the
    rounds (pairs kept together: a round's native and run share its vCPU placement): the mean
    |bootstrap median ÷ measured − 1|. Averaged over rows it is the MAPE a model that knew every
    true speedup would still show against these measurements. None with fewer than 2 rounds."""
    if len(natives) < 2:
        return None
    ratios = np.asarray(natives, dtype=float) / np.asarray(walls, dtype=float)
    measured = float(np.median(ratios))
    # A fixed seed: the same stored runs give the same figure when they are scored again.
    picks = np.random.default_rng(0).integers(0, len(ratios), size=(draws, len(ratios)))
    return float(np.mean(np.abs(np.median(ratios[picks], axis=1) / measured - 1.0)))


def round_noise(native_by_round: dict[int, float], run_by_round: dict[int, float]) -> float | None:
    """`measurement_noise` of one configuration from its runs and its program's native runs, by
    round (the rounds both have)."""
    both = sorted(set(native_by_round) & set(run_by_round))
    return measurement_noise([native_by_round[r] for r in both], [run_by_round[r] for r in both])


def noise_floor(rows: list[dict]) -> float | None:
    """The mean of the rows' measurement noise, in percent (see `measurement_noise`)."""
    known = [r["noise"] for r in rows if r.get("noise") is not None]
    return 100.0 * float(np.mean(known)) if known else None


def mape(rows: list[dict], model: str) -> dict:
    """Mean absolute percentage error of a model over the rows (saturated predictions count as
    missing and are reported), and its accuracy 100 − MAPE as the paper states it."""
    errors = [abs(r[f"err:{model}"]) for r in rows if r.get(f"err:{model}") is not None]
    missing = sum(1 for r in rows if r.get(f"err:{model}") is None)
    if not errors:
        return {"model": model, "n": 0, "missing": missing, "mape_pct": None, "accuracy_pct": None, "max_pct": None}
    value = 100.0 * float(np.mean(errors))
    return {"model": model, "n": len(errors), "missing": missing, "mape_pct": value, "accuracy_pct": 100.0 - value,
            "max_pct": 100.0 * max(errors)}
