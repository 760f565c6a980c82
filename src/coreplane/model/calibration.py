"""The runtime's own costs, measured once per machine (`coreplane calibrate`, validation's first
step), kept in a per-user file, and what they add to the prediction of a delegated run."""

from __future__ import annotations

import os
import time
from bisect import bisect_right
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from coreplane.core import documents
from coreplane.core.errors import CoreplaneError
from coreplane.model.estimate import ForwardCost
from coreplane.model.policies import Policy
from coreplane.model.queueing import cpu_scale
from coreplane.model.refined import delegated_set, splits
from coreplane.profile.records import Profile

FORMAT = "coreplane-calibration/1"

# The runtime's delegates (crates/runtime/src/bin/rt/delegate.rs): an idle delegate polls for
# DELEGATE_SPIN_NS before it sleeps (the polling window W that calibration measures as
# `window_ns`) and yields its control core every YIELD_EVERY_NS of it.
DELEGATE_SPIN_NS = 1_400_000
YIELD_EVERY_NS = 28_700


@dataclass
class Calibration:
    """Everything the predictions take from micro-benchmarks. Times in ns; `forward[F]` is the
    round trip 2·f_c of a delegated null call at forward cost F (it includes the 2·F spent on
    the control core, the trap and the hand-off)."""

    trials: dict[int, int]
    native_call_ns: float
    local_ns: float
    forward: dict[int, ForwardCost]
    cpu_per_call_ns: dict[int, float]
    spin_blocked_ns: float
    window_ns: float | None
    cold: ForwardCost
    shootdown_ns: float
    startup_ns: float
    startup_delegating_ns: float
    child_ns: float
    child_delegating_ns: float
    gammas: dict[float, float]
    trials_per_ms: float
    # The round trip at F = 0 of each calibration run (its mean, as `forward` is the mean of all;
    # sorted; session 9): the host moves the vCPUs between placements whose round trips differ
    # 3-4×, so one figure is not the machine's.
    placements_ns: list[float] = field(default_factory=list)

    def fc_ns(self, forward_cost_ns: float, statistic: str = "mean") -> float:
        """f_c (one way) for a run at forward cost F: the micro-benchmark's at F, or, for an F
        not measured, at the nearest measured F0 below it (the smallest above when none is)
        plus F − F0, the forward cost itself being spent once per direction."""
        key = int(round(forward_cost_ns))
        if key in self.forward:
            return self.forward[key].fc_ns(statistic)
        measured = sorted(self.forward)
        base = measured[max(0, bisect_right(measured, key) - 1)]
        return self.forward[base].fc_ns(statistic) + (key - base)

    def spin_ns(self, forward_cost_ns: float) -> float:
        """How long a caller holds its compute core on a delegated call at forward cost F before
        it sleeps: the runtime polls for 2·F plus a slack, then sleeps. A call that blocks for
        longer (an empty pipe) costs its caller `spin_blocked_ns` at F = 0 (measured: the slack
        and the wake-up's own work) and 2·F more at F."""
        return 2.0 * forward_cost_ns + self.spin_blocked_ns

    def cold_extra_ns(self) -> float:
        """What a call that finds the delegate asleep pays on top of a warm round trip (≥ 0): the
        medians of both, whatever f_c's statistic. The cold trials' tail is the calibration's
        moment, not the wake-up: 250 trials under load held a 5.2 ms one, and their mean was
        4.6–9.3× their median (151 against 33 µs; 261 against 28 µs), which made programs that
        delegate few calls far apart 5–8 % slower in projection than in their runs. Rescored
        with the medians, session 23's three validations of suites already looked at went from
        10.2 to 5.3 %, 8.4 to 8.4 % and 7.2 to 7.3 % MAPE (`coreplane project`); the twelfth
        held-out suite, run after the change, from 6.79 to 7.02 % (its cold mean was 2.4× the
        median): no gain shown where nothing was tuned."""
        return max(0.0, self.cold.median - self.forward[min(self.forward)].median)

    def for_round(self, measured) -> Calibration:
        """This calibration with a validation round's own call and round-trip figures (validate's
        RoundCalibration; None keeps it as it is)."""
        if measured is None:
            return self
        return replace(self, native_call_ns=measured.native_call_ns, local_ns=measured.local_ns,
                       forward={**self.forward, **measured.forward})

    def with_handoff(self, measured: ForwardCost | None) -> Calibration:
        """This calibration with the round trip at no forward cost measured around one run
        (validate's hand-off probes; None keeps it as it is): every forward cost's round trip
        moves by as much, statistic by statistic, since the forward cost itself is spent on the
        control core whatever the vCPUs' placement and only the hand-off changes with it."""
        if measured is None or 0 not in self.forward:
            return self
        base = self.forward[0]
        shift = {st: getattr(measured, st) - getattr(base, st) for st in ("min", "mean", "median", "max")}
        forward = {f: replace(c, **{st: max(0.0, getattr(c, st) + d) for st, d in shift.items()})
                   for f, c in self.forward.items()}
        forward[0] = measured
        return replace(self, forward=forward)

    def placement_range(self) -> tuple[float, float] | None:
        """The fastest and slowest placement's round trip at F = 0 when calibration saw the host
        move the vCPUs (the slowest ≥ 1.5× the fastest), else None."""
        if not self.placements_ns or min(self.placements_ns) <= 0:
            return None
        low, high = min(self.placements_ns), max(self.placements_ns)
        return (low, high) if high >= 1.5 * low else None

    def at_round_trip(self, round_trip_ns: float) -> Calibration:
        """This calibration as if every call at F = 0 took `round_trip_ns` (a placement's)."""
        rt = round_trip_ns
        return self.with_handoff(ForwardCost(self.forward[0].trials, self.forward[0].native_ns, rt, rt, rt, rt))

    def gamma(self, emulated: float) -> float:
        """The gain gain_synth -g G really gives (measured compute ratio); 1 for no emulation."""
        return self.gammas.get(float(emulated), 1.0) if emulated != 1.0 else 1.0

    def to_dict(self) -> dict:
        doc = asdict(self)
        doc["forward"] = {str(k): v.to_dict() for k, v in self.forward.items()}
        doc["cold"] = self.cold.to_dict()
        doc["trials"] = {str(k): v for k, v in self.trials.items()}
        doc["cpu_per_call_ns"] = {str(k): v for k, v in self.cpu_per_call_ns.items()}
        doc["gammas"] = {str(k): v for k, v in self.gammas.items()}
        return doc

    @classmethod
    def from_dict(cls, doc: dict, source: str) -> Calibration:
        """The inverse of to_dict; a missing or malformed field is a one-line error naming it."""
        def need(key: str):
            if key not in doc:
                raise CoreplaneError(f"{source}: calibration.{key}: missing (a calibration from an older "
                                     f"coreplane? run `coreplane calibrate` again)")
            return doc[key]

        def cost(key: str, value) -> ForwardCost:
            try:
                return ForwardCost(**value)
            except TypeError:
                raise CoreplaneError(f"{source}: calibration.{key}: expected "
                                     f"{', '.join(f.name for f in fields(ForwardCost))}") from None

        try:
            return cls(
                trials={int(k): int(v) for k, v in need("trials").items()},
                native_call_ns=float(need("native_call_ns")), local_ns=float(need("local_ns")),
                forward={int(k): cost(f"forward.{k}", v) for k, v in need("forward").items()},
                cpu_per_call_ns={int(k): float(v) for k, v in need("cpu_per_call_ns").items()},
                spin_blocked_ns=float(need("spin_blocked_ns")),
                window_ns=None if need("window_ns") is None else float(doc["window_ns"]),
                cold=cost("cold", need("cold")), shootdown_ns=float(need("shootdown_ns")),
                startup_ns=float(need("startup_ns")),
                startup_delegating_ns=float(need("startup_delegating_ns")), child_ns=float(need("child_ns")),
                child_delegating_ns=float(need("child_delegating_ns")),
                gammas={float(k): float(v) for k, v in need("gammas").items()},
                placements_ns=[float(x) for x in doc.get("placements_ns", [])],
                trials_per_ms=float(need("trials_per_ms")))
        except (AttributeError, TypeError, ValueError) as exc:
            raise CoreplaneError(f"{source}: calibration: malformed ({exc})") from None


@dataclass
class Stored:
    """A calibration as kept in a file, with the machine it was measured on."""

    calibration: Calibration
    machine: dict
    created: str
    path: Path


def default_path() -> Path:
    """The per-user calibration file: $XDG_CACHE_HOME/coreplane/calibration.json."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "coreplane" / "calibration.json"


def save(calibration: Calibration, machine: dict, path: Path) -> Path:
    """Writes the calibration atomically (a new file renamed into place)."""
    doc = {"format": FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine,
           "calibration": calibration.to_dict()}
    return documents.write(path, doc)


def load(path: Path) -> Stored:
    """Reads a calibration file; bad input is a one-line error naming the file and field."""
    doc = documents.read(path, FORMAT)
    if not isinstance(doc.get("machine"), dict) or not isinstance(doc.get("calibration"), dict):
        raise CoreplaneError(f"{path}: machine, calibration: expected objects")
    return Stored(Calibration.from_dict(doc["calibration"], str(path)), doc["machine"], str(doc.get("created", "?")),
                  path)


def cold_calls(profile: Profile, policy: Policy, gamma: float, window_ns: float | None) -> tuple[float, int]:
    """How many delegated calls may find the delegate asleep, and how many are delegated. A cold
    call needs the delegate idle for its whole polling window W before it, and the program has
    only its time outside delegated calls, Σ (C_k/γ + t_local,k), to leave it idle: at most that
    over W calls are cold (the bound is reached when calls come in bursts between long stretches
    of computation, as in bzip2 or gain_synth; calls spread thinly would all be cold, and many
    calls with short gaps, as in find, fewer). The profile's timeline bounds it too
    (`spread_calls`): calls made at start-up and exit only are few windows apart."""
    names = delegated_set(profile, policy)
    parts = splits(profile, names)
    delegated = sum(p.remote_calls for p in parts)
    if not delegated or not window_ns:
        return 0.0, delegated
    idle = sum(p.compute_ns * r / gamma + p.local_ns for p, r in zip(parts, cpu_scale(profile)))
    return min(float(delegated), idle / window_ns, spread_calls(profile, names, window_ns * gamma)), delegated


def spread_calls(profile: Profile, names: frozenset[str], window_ns: float) -> float:
    """At most how many of the calls named `names` come more than `window_ns` after the one
    before, from the timeline each thread records per call (first_ns, last_ns): the n(s) calls
    of s in one thread lie within last − first, so at most 1 + (last − first)/W of them are a
    window apart (`window_ns` is W·γ: the timeline shrinks with the compute). m4 expanding fib(25)
    delegates 210 calls over 185 ms, most at start-up and exit: the time bound allows 128 cold
    calls, this one 69, and the run made 19–30 futex calls in all (a cold call makes two). A call
    without a timeline counts every call."""
    total = 0.0
    for calls in [t.syscalls for t in profile.threads] or [profile.syscalls]:
        for c in calls:
            if c.name not in names:
                continue
            if c.first_ns is None or c.last_ns is None:
                total += c.count
            else:
                total += min(float(c.count), 1.0 + max(0, c.last_ns - c.first_ns) / window_ns)
    return total


def startup_ns(profile: Profile, policy: Policy, cal: Calibration) -> float:
    """The runtime's start-up over the program's processes: the first pays the full start-up,
    each later one (started by the program) a child's, both more when the process delegates
    (it starts its own delegate)."""
    processes = sorted(profile.extra.get("processes") or [], key=lambda p: p.get("start_ns") or 0)
    parts = splits(profile, delegated_set(profile, policy))
    if not profile.multithreaded or not processes:
        delegating = sum(p.remote_calls for p in parts) > 0
        return cal.startup_delegating_ns if delegating else cal.startup_ns
    delegating_pids = {t.pid for t, p in zip(profile.threads, parts) if p.remote_calls}
    total = 0.0
    for i, proc in enumerate(processes):
        delegating = proc.get("pid") in delegating_pids
        if i == 0:
            total += cal.startup_delegating_ns if delegating else cal.startup_ns
        else:
            total += cal.child_delegating_ns if delegating else cal.child_ns
    return total


def profiled_startup_ns(profile: Profile, cal: Calibration) -> float:
    """The start-up the profiled run itself paid, which its wall time holds: `startup_ns` under
    the delegated set it was recorded with (none, for `coreplane profile`'s default). A
    projection from the profile as recorded adds a run's start-up less this."""
    recorded = frozenset((profile.config or {}).get("delegated") or [])
    return startup_ns(profile, Policy("explicit", names=recorded), cal)


def charged_shootdowns(profile: Profile, delegated_calls: int) -> int:
    """How many of the profiled run's TLB flushes a delegated run pays for: a flush (a
    copy-on-write fault, munmap, mprotect, madvise; the runtime's own included) made while a
    delegate polls in the address space interrupts the control core and waits for it. Which
    flushes fall in a polling window is not in a profile (an untimed call has no timestamp); a
    delegate polls only after a delegated call, so at most min(flushes, delegated calls): a
    program that flushes far more than it calls (xz -T2's workers) does so where the delegate
    sleeps. 0 without delegation or without a count (see `shootdown_count`)."""
    return min(shootdown_count(profile) or 0, delegated_calls)


def shootdown_count(profile: Profile) -> int | None:
    """The profiled run's TLB flushes of its own address spaces (None when the profile could not
    count them: the count needs root, CAP_PERFMON or kernel.perf_event_paranoid <= 1)."""
    count = profile.extra.get("tlb_shootdowns")
    return int(count) if isinstance(count, (int, float)) else None


@dataclass(frozen=True)
class RunCost:
    """What a `coreplane run` of a profiled program costs beyond its calls: the one-way f_c its
    delegated calls pay, and the time it adds once (start-up and TLB shootdowns)."""

    fc_ns: float
    startup_ns: float
    shootdowns: int      # flushes charged
    shootdown_ns: float  # each

    @property
    def added_ns(self) -> float:
        return self.startup_ns + self.shootdowns * self.shootdown_ns


def delegated_run(profile: Profile, policy: Policy, cal: Calibration, gamma: float, forward_cost_ns: float,
                  statistic: str = "mean") -> RunCost:
    """The costs of a `coreplane run` at forward cost F: f_c is the micro-benchmark's warm round
    trip at F, plus the cold surcharge spread over the share of calls that can be cold; the time
    added is the start-up (`startup_ns`) and the charged TLB shootdowns (`charged_shootdowns`)."""
    n_cold, delegated = cold_calls(profile, policy, gamma, cal.window_ns)
    fc = cal.fc_ns(forward_cost_ns, statistic)
    if delegated:
        fc += n_cold / delegated * cal.cold_extra_ns() / 2.0
    return RunCost(fc, startup_ns(profile, policy, cal), charged_shootdowns(profile, delegated), cal.shootdown_ns)


def yield_ns(cal: Calibration) -> float | None:
    """How long an idle delegate keeps its control core before it yields it to another process's
    delegate: the runtime's YIELD_EVERY_NS share of its DELEGATE_SPIN_NS polling window, applied
    to the measured window W (≈ 29 µs of W's 1.41 ms here). None without a measured window."""
    return cal.window_ns * YIELD_EVERY_NS / DELEGATE_SPIN_NS if cal.window_ns else None


def with_startup(native_ns: float, speedup: float | None, startup: float) -> float | None:
    """A speedup over `native_ns` once the time the runtime adds once (delegated_run's start-up
    and shootdowns) is added to the projected time."""
    if speedup is None:
        return None
    return native_ns / (native_ns / speedup + startup)
