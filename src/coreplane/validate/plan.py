"""What a validation runs: profile cases, gain_synth programs built from profiles, and the configurations
(policy × forward cost × emulated γ) of each program, within a time budget."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from coreplane.model import synthetic
from coreplane.model.policies import BY_SHARE, Policy, parse
from coreplane.model.refined import delegated_set, refined
from coreplane.profile.records import Profile
from coreplane.model.calibration import Calibration
from coreplane.validate.commands import Machine, fresh_dir, handoff_bracket, native, under_runtime
from coreplane.validate.rounds import Case
from coreplane.validate.suite import Program

# (policy, forward cost per direction in ns). "none" runs the runtime without delegating: what
# interposition alone costs. min-frequency@X delegates the share X of the least used calls.
GRID = (("none", 0), ("all", 0), ("mos", 0), ("mckernel", 0), ("min-frequency@0.9", 0),
        ("all", 10_000), ("mckernel", 10_000), ("mckernel", 100_000), ("min-frequency@0.9", 100_000),
        ("min-frequency@0.5", 1_000_000))
QUICK_GRID = (("all", 0), ("mckernel", 0), ("all", 10_000), ("min-frequency@0.5", 1_000_000))
# Paper 002 Fig. 11: the synthetic benchmark with >75 % of its calls delegated (mOS-like) and with
# the 30 % least used ones (McKernel-like), at a free hand-off and at McKernel's 6.28 µs round trip.
SYNTH_GRID = (("mos", 0), ("mos", 3140), ("min-frequency@0.3", 0), ("min-frequency@0.3", 3140))
QUICK_SYNTH_GRID = (("mos", 0), ("mos", 10_000))


def policy_of(name: str) -> Policy:
    """A grid policy name: all, none, mos, mckernel, or SHARE-POLICY@SHARE (min-frequency@0.9)."""
    kind, _, share = name.partition("@")
    if kind in BY_SHARE:
        return Policy(kind, share=float(share or 0.9))
    return parse(kind)


@dataclass(frozen=True)
class Config:
    """One delegated configuration of a program."""

    program: str
    policy: str
    fc_ns: int
    gamma: float          # emulated gain (gain_synth -g); 1 for real programs
    delegated: tuple[str, ...]

    @property
    def case(self) -> str:
        return f"{self.program}|{self.policy}|fc{self.fc_ns}|g{self.gamma:g}"


def warm_up_case(program: str) -> str:
    """The case name of a program's unmeasured warm-up run in each round."""
    return f"{program}|warm-up"


def native_case(program: str) -> str:
    return f"{program}|native"


def profile_round_case(program: str) -> str:
    """The case name of a program's profile run in each round (`validation_cases`)."""
    return f"{program}|profile"


def program_of_profile_round(case: str) -> str | None:
    """The program whose round profile run `case` names, else None."""
    program, sep, kind = case.rpartition("|")
    return program if sep and kind == "profile" else None


def _prefix(out_dir: Path | None) -> str:
    return fresh_dir(out_dir) if out_dir is not None else ""


def profile_case(program: Program, argv: list[str], machine: Machine, out_dir: Path | None = None) -> Case:
    """The `coreplane profile` run of a program: the runtime without delegation, its profile kept
    with the count of TLB flushes the model charges (the timed runs do not count them);
    `out_dir`, the program's output directory, is emptied before it (commands.fresh_dir)."""
    return Case(program.name, _prefix(out_dir) + under_runtime(argv, machine, "none", 0, count_tlb_flushes=True))


def synthetic_argv(program: Program, source: Profile, calibration: Calibration, mix_dir: Path,
                   gamma: float = 1.0) -> list[str]:
    """gain_synth replaying `source`'s syscall mix, scaled to the program's calls per thread, with
    its compute per thread at γ = 1 converted to Monte Carlo trials by the calibration."""
    spec = program.synthetic
    counts, _dropped = synthetic.mix_from_profile(source, 1)
    total = sum(counts.values()) or 1
    per_phase = spec.calls / spec.phases / total
    mix = {name: max(1, round(n * per_phase)) for name, n in counts.items() if n}
    path = synthetic.write_mix(mix, mix_dir / f"{program.name}.mix",
                               f"{program.name}: {source.label}'s mix, {spec.calls} calls per thread over "
                               f"{spec.phases} phases")
    trials = max(1, round(spec.compute_ms * calibration.trials_per_ms / spec.phases))
    return synthetic.command(path, gamma=gamma, trials=trials, phases=spec.phases, threads=spec.threads)


def configs(program: Program, profile: Profile, calibration: Calibration, native_ns: float, quick: bool,
            max_run_s: float) -> tuple[list[Config], list[dict]]:
    """The program's configurations: the grid for its kind, one per distinct delegated set,
    forward cost and γ; those projected (refined model, calibrated f_c) to run longer than
    `max_run_s` are skipped and returned with the reason."""
    grid = (QUICK_SYNTH_GRID if quick else SYNTH_GRID) if program.synthetic else (QUICK_GRID if quick else GRID)
    chosen, skipped, seen = [], [], set()
    for gamma in program.gammas:
        for policy, fc in grid:
            delegated = tuple(sorted(delegated_set(profile, policy_of(policy))))
            key = (delegated, fc, gamma)
            if key in seen or (not delegated and policy != "none"):
                continue
            seen.add(key)
            projected = native_ns / refined(profile, calibration.gamma(gamma), calibration.fc_ns(fc),
                                            policy_of(policy)).speedup
            config = Config(program.name, policy, fc, gamma, delegated)
            if projected > max_run_s * 1e9:
                skipped.append({"case": config.case, "projected_s": projected / 1e9,
                                "reason": f"projected {projected / 1e9:.1f} s > {max_run_s:g} s per run"})
                continue
            chosen.append(config)
    return chosen, skipped


def validation_cases(program: Program, argv_at: dict[float, list[str]], chosen: list[Config],
                     machine: Machine, out_dir: Path | None = None) -> list[Case]:
    """A warm-up run, the native baseline (γ = 1), every configuration under the runtime and a
    profile run (`profile_case`: the predictions start from the median one, engine.round_profiles);
    `argv_at[γ]` is the program's command at each emulated γ; `out_dir` as in profile_case.
    The warm-up (the native command, never read) is there because the native run comes first
    among its program's runs in a round, after every other program's: without it cc's and
    tar's native runs took 101-122 ms where the runtime runs right after them took 81-85 ms
    and the one native run that followed the engine's own warm-up 75 ms (session 5). A run that
    delegates is bracketed by measurements of the round trip (commands.handoff_bracket)."""
    fresh = _prefix(out_dir)
    cases = [Case(warm_up_case(program.name), fresh + native(argv_at[1.0], machine) + " # warm-up"),
             Case(native_case(program.name), fresh + native(argv_at[1.0], machine))]
    for c in chosen:
        run = under_runtime(argv_at[c.gamma], machine, list(c.delegated) or "none", c.fc_ns)
        cases.append(Case(c.case, fresh + (handoff_bracket(run, machine) if c.delegated else run)))
    cases.append(Case(profile_round_case(program.name), profile_case(program, argv_at[1.0], machine, out_dir).command))
    return cases
