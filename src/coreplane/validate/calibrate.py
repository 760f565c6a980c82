"""Model parameters from the runtime's own micro-benchmarks, never from the runs being predicted.

- 2·f_c: workloads/bin/null_call times getppid call by call (raw `syscall`, CLOCK_MONOTONIC
  through the vDSO), natively and under `coreplane run --delegate getppid --forward-cost F` for
  each forward cost F of the plan; every delegated trial minus the native median is one round
  trip (min, mean, median, max over ≥ 1000 trials: paper 002 Table 3, Fig. 13).
- the interposition cost of a call kept local (g'(s) = g(s) + n(s)·cost): the same trials under
  `--delegate none`;
- spin: how long a caller holds its core on a delegated call that blocks (the closed model's
  spin_ns: the runtime polls 2·F plus a slack, then sleeps), from null_call's thread CPU time
  per delegated 1 ms nanosleep at F = 0;
- cold calls: a delegate polls an empty queue for a while, then sleeps; a call that finds it
  asleep pays its wake-up. null_call -g GAP spins GAP between calls: the gap at which the round
  trip jumps is the delegate's polling window W, the jump at the longest gap the cold surcharge;
- TLB shootdowns: what a flush of the program's own address space costs it while a delegate polls
  on a control core in the same address space (the kernel interrupts that core and waits for it):
  null_call -c madvise -k under the runtime, delegating getppid (the delegate polls) and not (a
  local flush); the difference of the medians;
- start-up: the runtime's fixed cost per process (loader, calibration), null_call -n 1 under the
  runtime against walltime, without delegation and with one delegated call (which starts the
  delegate);
- γ of gain_synth: compute time of pure Monte Carlo phases at γ = 1 over that at each emulated γ.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from coreplane.core.errors import CoreplaneError
from coreplane.core.native import workload
from coreplane.model.calibration import Calibration
from coreplane.model.estimate import MIN_TRIALS, ForwardCost, forward_cost
from coreplane.validate import commands, rounds
from coreplane.validate.commands import Machine
from coreplane.validate.rounds import Case

FORWARD_COSTS = (0, 1000, 3140, 10_000, 100_000, 1_000_000)   # ns per direction
QUICK_FORWARD_COSTS = (0, 10_000, 1_000_000)
STATISTICS = ("min", "median", "mean", "max")
GAPS = (200_000, 500_000, 1_000_000, 2_000_000, 5_000_000)   # ns spun between calls to find W
GAP_TRIALS = 250                                              # per gap, over all rounds
BLOCKED_TRIALS = 200  # delegated 1 ms nanosleeps, over all rounds: the caller's spin on a blocked call
SHOOTDOWN_TRIALS = 1000   # flushes (madvise of a written page), over all rounds, per case
STARTUP_COPIES = 4
CHILDREN = 8          # programs a shell runs one after another, to time a child process's start-up
GAMMA_TRIALS, GAMMA_PHASES = 300_000, 100   # ≈ 100 ms of Monte Carlo at γ = 1
ROUND_BELOW_NS = 100_000   # forward costs measured again in every validation round (round_cases)
ROUND_PREFIX = "calibrate|"


def _trials_at(forward_cost: int) -> int:
    """Trials of the round trip at a forward cost: 2·MIN_TRIALS below 100 µs, MIN_TRIALS above."""
    return 2 * MIN_TRIALS if forward_cost < ROUND_BELOW_NS else MIN_TRIALS


def _null_cases(machine: Machine, forward_costs: tuple[int, ...], rounds_: int, prefix: str = "") -> list[Case]:
    """null_call natively, under the runtime without delegation and delegating getppid at each
    forward cost, with each figure's trials spread over `rounds_` runs."""
    null = str(workload("null_call"))
    n = lambda total: str(math.ceil(total / rounds_))
    cases = [Case(f"{prefix}null-native", commands.native([null, "-n", n(_trials_at(0))], machine, quiet=False)),
             Case(f"{prefix}null-local", commands.under_runtime([null, "-n", n(_trials_at(0))], machine, "none", 0,
                                                                quiet=False))]
    for f in forward_costs:
        cases.append(Case(f"{prefix}null-fc{f}", commands.under_runtime(
            [null, "-n", n(_trials_at(f))], machine, ["getppid"], f, quiet=False)))
    return cases


def round_cases(machine: Machine, forward_costs: tuple[int, ...]) -> list[Case]:
    """The round-trip micro-benchmarks again in every validation round, ahead of its runs, at the
    forward costs below 100 µs (above, the forward cost itself dwarfs the hand-off). The host
    moves the two vCPUs between placements whose cache-line ping-pong takes 70, 100 or 500 ns,
    between rounds and within them: a round trip measured once, before the runs, fits only the
    rounds that kept its placement. Each round is predicted with its own figures."""
    return _null_cases(machine, tuple(f for f in forward_costs if f < ROUND_BELOW_NS), 1, ROUND_PREFIX)


def plan(machine: Machine, forward_costs: tuple[int, ...], gammas: set[float], repetitions: int) -> list[Case]:
    """The micro-benchmark cases. Trials per run are spread over the rounds so that every forward
    cost gets at least MIN_TRIALS (2·MIN_TRIALS below 100 µs) in all."""
    synth = str(workload("gain_synth"))
    null = str(workload("null_call"))
    per_run = lambda total: math.ceil(total / repetitions)
    cases = _null_cases(machine, forward_costs, repetitions)
    # Start-up runs last a few ms and vary by as much: several copies of each per round (a shell
    # comment tells the copies apart, as the engine's points need distinct commands).
    one = [null, "-n", "1", "-w", "0"]
    for k in range(STARTUP_COPIES):
        cases += [Case(f"start-native-{k}", commands.native(one, machine) + f" # copy {k}"),
                  Case(f"start-runtime-{k}", commands.under_runtime(one, machine, "none", 0) + f" # copy {k}"),
                  Case(f"start-delegating-{k}", commands.under_runtime(one, machine, ["getppid"], 0) + f" # copy {k}")]
    # A process started by another one under the runtime (cc → cc1 → as) re-enters the runtime
    # at execve but skips what the first one paid (coreplane-exec's fork, the profile directory).
    shell = ["sh", "-c", f"for i in {' '.join(['x'] * CHILDREN)}; do {shlex.join(one)}; done"]
    cases += [Case("children-native", commands.native(shell, machine)),
              Case("children-runtime", commands.under_runtime(shell, machine, "none", 0)),
              Case("children-delegating", commands.under_runtime(shell, machine, ["getppid"], 0))]
    flush = [null, "-c", "madvise", "-k", "-n", str(per_run(SHOOTDOWN_TRIALS))]
    cases += [Case("flush-local", commands.under_runtime(flush, machine, "none", 0, quiet=False)),
              Case("flush-shootdown", commands.under_runtime(flush, machine, ["getppid"], 0, quiet=False))]
    cases.append(Case("null-blocked", commands.under_runtime(
        [null, "-c", "nanosleep", "-w", "2", "-n", str(per_run(BLOCKED_TRIALS))], machine, ["nanosleep"], 0,
        quiet=False)))
    for gap in GAPS:
        cases.append(Case(f"null-gap{gap}", commands.under_runtime(
            [null, "-n", str(per_run(GAP_TRIALS)), "-g", str(gap)], machine, ["getppid"], 0, quiet=False)))
    for g in sorted(gammas | {1.0}):
        cases.append(Case(f"gamma-{g:g}", commands.native(
            [synth, "-g", repr(g), "-w", str(GAMMA_TRIALS), "-p", str(GAMMA_PHASES)], machine, quiet=False)))
    return cases


@dataclass
class RoundCalibration:
    """One validation round's micro-benchmark figures (round_cases)."""

    native_call_ns: float
    local_ns: float
    forward: dict[int, ForwardCost]

    def to_dict(self) -> dict:
        return {"native_call_ns": self.native_call_ns, "local_ns": self.local_ns,
                "forward": {str(k): v.to_dict() for k, v in self.forward.items()}}


def per_round(out: Path, forward_costs: tuple[int, ...]) -> dict[int, RoundCalibration]:
    """Each validation round's figures from its round_cases runs (rounds where one failed are
    left out: they fall back to the calibration made before the runs)."""
    files = rounds.run_files_by_round(out, "stdout")
    fcs = [f for f in forward_costs if f < ROUND_BELOW_NS]
    result = {}
    for r in sorted(files.get(f"{ROUND_PREFIX}null-native", {})):
        paths = {name: files.get(f"{ROUND_PREFIX}{name}", {}).get(r)
                 for name in ("null-native", "null-local", *(f"null-fc{f}" for f in fcs))}
        if any(p is None for p in paths.values()):
            continue
        native, _, _ = _trials([paths["null-native"]])
        local, _, _ = _trials([paths["null-local"]])
        native_median = float(np.median(native))
        result[r] = RoundCalibration(native_median, max(0.0, float(np.median(local)) - native_median),
                                     {f: forward_cost(_trials([paths[f"null-fc{f}"]])[0], native) for f in fcs})
    return result


def handoffs(out: Path, per_round_: dict[int, RoundCalibration], native_call_ns: float) -> dict[str, dict[int, ForwardCost]]:
    """Per case and round, the round trip at no forward cost measured around that run
    (commands.handoff_bracket: both probes' trials, minus the round's native call), for the runs
    that have the probes (validations made before session 9 have none). A probe that failed
    (its file empty or cut short: the run itself still counts) is left out, and a run left with
    fewer than MIN_TRIALS trials keeps the round's figures."""
    result: dict[str, dict[int, ForwardCost]] = {}
    for case, by_round in rounds.run_files_by_round(out, commands.HANDOFF_FILES[0]).items():
        for r, before in by_round.items():
            trials = []
            for path in (before, before.with_name(commands.HANDOFF_FILES[1])):
                try:
                    trials += _trials([path])[0]
                except (OSError, CoreplaneError, KeyError, TypeError):
                    continue
            if len(trials) < MIN_TRIALS:
                continue
            native = per_round_[r].native_call_ns if r in per_round_ else native_call_ns
            result.setdefault(case, {})[r] = forward_cost(trials, [native])
    return result


def _trials(files: list[Path]) -> tuple[list[float], float, int]:
    """All per-call times of null_call runs, and the summed thread CPU time and trial count."""
    ns, cpu, count = [], 0.0, 0
    for path in files:
        doc = rounds.read_json(path)
        ns += doc["ns"]
        cpu += doc["thread_cpu_ns"]
        count += doc["trials"]
    return ns, cpu, count


def _cold(trials: list[float], native_median: float) -> ForwardCost:
    """Round trips of cold calls minus the native call: fewer trials than f_c's MIN_TRIALS (a cold
    call costs a whole gap), so estimate.forward_cost's check does not apply."""
    rt = np.maximum(np.asarray(trials, dtype=float) - native_median, 0.0)
    return ForwardCost(int(rt.size), native_median, float(rt.min()), float(rt.mean()), float(np.median(rt)),
                       float(rt.max()))


def analyse(out: Path, forward_costs: tuple[int, ...], gammas: set[float]) -> Calibration:
    """Reads the micro-benchmark sweep back into a Calibration."""
    stdout = rounds.run_files(out, "stdout")
    measure = rounds.run_files(out, commands.MEASURE)

    def need(case: str, files: dict) -> list[Path]:
        if not files.get(case):
            raise CoreplaneError(f"{out}: calibration case {case} has no successful run; see "
                                 f"`coreplane report {out}`")
        return files[case]

    native, _, _ = _trials(need("null-native", stdout))
    native_median = float(np.median(native))
    local, _, _ = _trials(need("null-local", stdout))
    forward, cpu_per_call, trials = {}, {}, {}
    for f in forward_costs:
        ns, cpu, count = _trials(need(f"null-fc{f}", stdout))
        forward[f] = forward_cost(ns, native)
        cpu_per_call[f] = cpu / count
        trials[f] = len(ns)
    placements = sorted(max(0.0, float(np.mean(_trials([p])[0])) - native_median)
                        for p in stdout.get("null-fc0", []))
    # A caller whose delegated call blocks burns CPU only while it polls, then sleeps.
    _, blocked_cpu, blocked_count = _trials(need("null-blocked", stdout))
    # The polling window: the first gap whose median round trip is past half-way from warm to
    # cold (between it and the gap before it: their geometric mean).
    gap_trials = {g: _trials(need(f"null-gap{g}", stdout))[0] for g in GAPS}
    cold = _cold(gap_trials[GAPS[-1]], native_median)
    warm_median = forward[0].median if 0 in forward else float(np.median(local)) - native_median
    half = warm_median + 0.5 * (cold.median - warm_median)
    jumped = [i for i, g in enumerate(GAPS) if np.median(gap_trials[g]) - native_median > half]
    window = None
    if jumped and cold.median > 2 * warm_median:
        i = jumped[0]
        window = float(GAPS[0] if i == 0 else math.sqrt(GAPS[i - 1] * GAPS[i]))
    flush_local = float(np.median(_trials(need("flush-local", stdout))[0]))
    shootdown = max(0.0, float(np.median(_trials(need("flush-shootdown", stdout))[0])) - flush_local)
    wall = lambda case: float(np.median([rounds.read_json(p)["wall_ns"] for k in range(STARTUP_COPIES)
                                         for p in need(f"{case}-{k}", measure)]))
    startup = max(0.0, wall("start-runtime") - wall("start-native"))
    startup_delegating = max(0.0, wall("start-delegating") - wall("start-native"))
    once = lambda case: float(np.median([rounds.read_json(p)["wall_ns"] for p in need(case, measure)]))
    children = once("children-native")
    child = max(0.0, once("children-runtime") - children - startup) / CHILDREN
    child_delegating = max(0.0, once("children-delegating") - children - startup_delegating) / CHILDREN
    compute = {g: float(np.median([rounds.read_json(p)["compute_ns"] for p in need(f"gamma-{g:g}", stdout)]))
               for g in sorted(gammas | {1.0})}
    return Calibration(
        trials=trials, native_call_ns=native_median, local_ns=max(0.0, float(np.median(local)) - native_median),
        forward=forward, cpu_per_call_ns=cpu_per_call,
        spin_blocked_ns=blocked_cpu / blocked_count, window_ns=window, cold=cold, shootdown_ns=shootdown,
        startup_ns=startup, startup_delegating_ns=startup_delegating, child_ns=child,
        child_delegating_ns=child_delegating,
        gammas={g: compute[1.0] / compute[g] for g in compute},
        trials_per_ms=GAMMA_TRIALS * GAMMA_PHASES / (compute[1.0] / 1e6), placements_ns=placements)
