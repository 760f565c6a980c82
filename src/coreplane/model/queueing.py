"""Queueing at the delegates: open M/M/1 and M/M/c (paper 002 eq. 12–13) and a closed model solved by MVA."""

import bisect
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from coreplane.model.policies import Policy
from coreplane.model.refined import Split, delegated_set, local_scale, split, splits
from coreplane.profile.records import WAIT_CALLS, CallStats, Profile, Segment

NS_PER_S = 1e9


def erlang_c(servers: int, offered: float) -> float:
    """Probability that a request waits in M/M/c with `offered` = λ/μ < c (Erlang C, via the Erlang B recursion)."""
    blocking = 1.0
    for k in range(1, servers + 1):
        blocking = offered * blocking / (k + offered * blocking)
    load = offered / servers
    return blocking / (1.0 - load * (1.0 - blocking))


def mean_wait_ns(arrival_per_ns: float, service_ns: float, servers: int = 1) -> float | None:
    """Mean time queued before service, W = C(c, λ/μ)/(c·μ − λ); for c = 1 this is eq. 13,
    1/(μ − λ) − 1/μ. None when the load λ/(c·μ) ≥ 1: the queue grows without bound."""
    if service_ns == 0.0 or arrival_per_ns == 0.0:
        return 0.0
    mu = 1.0 / service_ns
    if arrival_per_ns >= servers * mu:
        return None
    return erlang_c(servers, arrival_per_ns / mu) / (servers * mu - arrival_per_ns)


@dataclass
class QueueingResult:
    """The refined model plus the mean wait W at the delegates for each delegated call.
    When `saturated`, speedup, wait and time are None: there is no steady state to project."""

    model: str
    delegates: int
    gamma: float
    fc_ns: float
    arrival_per_s: float                 # λ_total
    thread_arrival_per_s: list[float]    # λ_k of each thread (or the program) with delegated calls
    service_ns: float | None             # 1/μ: mean g(s)/n(s) + 2·f_c over delegated calls
    load: float                          # λ_total / (c·μ)
    saturated: bool
    wait_ns: float | None
    speedup: float | None
    time_ns: float | None

    def to_dict(self) -> dict:
        return asdict(self)


def queueing(profile: Profile, gamma: float, fc_ns: float, policy: Policy, delegates: int = 1,
             local_ns: Mapping[str, float] | None = None) -> QueueingResult:
    """Eq. 12–13 on top of eq. 11: S_q = Σ t_nd / Σ (t_d + W·n_fwd).

    A delegate is busy for g(s) + 2·f_c per call (coreplane's delegates spend the forward cost on
    the control core). Arrival rates are offered rates, from the projected times without queueing:
    λ_k = n_fwd,k / t_d,k per thread, and λ_total = Σ n_fwd,k / D over the projected wall time D,
    which is eq. 12's Σ λ_k when the threads live through the whole run and does not count twice
    threads or processes that run one after another."""
    if delegates < 1:
        raise ValueError("delegates must be at least 1")
    parts = splits(profile, delegated_set(profile, policy), local_ns)
    t_nd = sum(p.t_nd() for p in parts)
    t_d = float(sum(p.t_d(gamma, fc_ns) for p in parts))
    calls = sum(p.remote_calls for p in parts)
    model = "M/M/1" if delegates == 1 else f"M/M/{delegates}"
    thread_rates = [p.remote_calls / float(p.t_d(gamma, fc_ns)) * NS_PER_S for p in parts if p.remote_calls]
    if calls == 0:
        s = t_nd / t_d
        return QueueingResult(model, delegates, gamma, fc_ns, 0.0, [], None, 0.0, False, 0.0, s, profile.wall_ns / s)
    service = float(sum(p.t_remote(fc_ns) for p in parts)) / calls
    wall_d = profile.wall_ns * t_d / t_nd
    arrival = calls / wall_d
    load = arrival * service / delegates
    wait = mean_wait_ns(arrival, service, delegates)
    if wait is None:
        return QueueingResult(model, delegates, gamma, fc_ns, arrival * NS_PER_S, thread_rates, service,
                              load, True, None, None, None)
    s = t_nd / (t_d + wait * calls)
    return QueueingResult(model, delegates, gamma, fc_ns, arrival * NS_PER_S, thread_rates, service,
                          load, False, wait, s, profile.wall_ns / s)


# ---------------------------------------------------------------------------------------------
# Closed (finite-source) model: the program's threads are the only customers.
#
# The open formulas above let a queue grow past the number of threads that could be waiting.
# With N threads there are at most N − 1 requests ahead of any one, and a thread waiting for
# its delegate does not compete for its compute core once it sleeps. The closed model is a
# closed queueing network solved by mean value analysis (MVA): each thread is a class with one
# customer that cycles through a compute station (the compute cores), a control station (the
# control cores, serving g(s) of delegated calls) and a delay (forwarding, and time blocked on
# sibling threads), once per delegated call. With one thread it is the refined model exactly.

MVA_EXACT_LIMIT = 12  # classes; exact MVA visits 2^N populations, Schweitzer's approximation above


@dataclass
class Mva:
    """Solution of a closed network: `throughput[k]` in cycles per ns, `residence[i][k]` the time
    class k spends per cycle at station i (its demand plus its wait there)."""

    throughput: list[float]
    residence: list[list[float]]
    exact: bool


def mva(demands: list[list[float]], queueing_station: list[bool]) -> Mva:
    """Mean value analysis of a closed network with one customer per class: `demands[i][k]` is
    class k's service demand per cycle at station i; a queueing station (True) has one server,
    a delay station (False) lets every customer through at once. Exact MVA over every
    sub-population up to MVA_EXACT_LIMIT classes, the Bard–Schweitzer approximation above."""
    return mva_many([demands], queueing_station)[0]


def mva_many(networks: list[list[list[float]]], queueing_station: list[bool]) -> list[Mva]:
    """`mva` of many networks with the same stations, solved together: those of one size at
    once by exact MVA, all those above MVA_EXACT_LIMIT at once by Schweitzer's approximation
    (fewer classes padded with classes of no demand, which never take a turn). The closed model
    solves every phase of a run (SVT-AV1: 205 phases of up to 103 threads) in a few numpy steps."""
    out: list[Mva | None] = [None] * len(networks)
    by_size: dict[int, list[int]] = {}
    for i, d in enumerate(networks):
        n = len(d[0]) if d else 0
        by_size.setdefault(n if n <= MVA_EXACT_LIMIT else -1, []).append(i)
    for n, members in by_size.items():
        if n == 0:
            solved = [Mva([], [[] for _ in networks[i]], True) for i in members]
        else:
            k = n if n > 0 else max(len(networks[i][0]) for i in members)
            d = np.zeros((len(members), len(queueing_station), k))            # networks x stations x classes
            for row, i in enumerate(members):
                d[row, :, :len(networks[i][0])] = networks[i]
            solve = _mva_exact if n > 0 else _mva_schweitzer
            xs, resid = solve(d, np.asarray(queueing_station, dtype=bool))
            solved = [Mva(xs[row, :len(networks[i][0])].tolist(), resid[row, :, :len(networks[i][0])].tolist(), n > 0)
                      for row, i in enumerate(members)]
        for i, sol in zip(members, solved):
            out[i] = sol
    return out


def _mva_exact(d: np.ndarray, queued_at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact MVA of networks x stations x classes `d`: (throughputs, residences) of the full population."""
    # queue[:, mask, i]: mean number at station i when the classes in `mask` are present. A
    # population depends only on those one customer smaller, so all populations of one size
    # are solved together, every class at once (2^12 populations in a few ms).
    n_classes = d.shape[2]
    d = d.transpose(0, 2, 1)[:, None]                                       # networks x 1 x classes x stations
    bits = 1 << np.arange(n_classes)
    masks = np.arange(1 << n_classes)
    sizes = (masks[:, None] & bits[None, :] != 0).sum(axis=1)
    queue = np.zeros((d.shape[0], 1 << n_classes, d.shape[3]))
    for size in range(1, n_classes + 1):
        level = masks[sizes == size]
        present = (level[:, None] & bits[None, :] != 0)[None, ..., None]   # 1 x populations x classes x 1
        found = queue[:, level[:, None] & ~bits[None, :]]                   # ... x stations, found without k
        r = np.where(queued_at, d * (1.0 + found), d) * present
        cycle = r.sum(axis=3)
        x = np.divide(1.0, cycle, out=np.zeros_like(cycle), where=cycle > 0)
        queue[:, level] = (x[..., None] * r).sum(axis=2)
    # The last size is the full population alone.
    return x[:, 0], r[:, 0].transpose(0, 2, 1)


def _mva_schweitzer(d: np.ndarray, queued_at: np.ndarray, tolerance: float = 1e-12,
                    rounds: int = 100_000) -> tuple[np.ndarray, np.ndarray]:
    """Bard–Schweitzer MVA of networks x stations x classes `d`: (throughputs, residences)."""
    # Each class finds the others' mean queue lengths and none of its own (one customer per class).
    queued_at = queued_at[None, :, None]
    per_class = np.where(d.sum(axis=1, keepdims=True) > 0, 1.0 / d.shape[1], 0.0) * np.ones_like(d)
    for _ in range(rounds):
        others = per_class.sum(axis=2, keepdims=True) - per_class
        resid = np.where(queued_at, d * (1.0 + others), d)
        cycle = resid.sum(axis=1)
        xs = np.divide(1.0, cycle, out=np.zeros_like(cycle), where=cycle > 0)
        new = xs[:, None, :] * resid
        delta = float(np.abs(new - per_class).max())
        per_class = new
        if delta < tolerance:
            break
    return xs, resid


@dataclass
class _Load:
    """One thread's cycle in the closed network: demands per cycle and how many cycles."""

    cpu: float
    control: float
    delay: float
    cycles: float


def _solve_groups(groups: list[list[_Load]], compute_cores: int,
                  control_cores: int) -> list[tuple[float, float, float, float, bool]]:
    """Per group of threads that run at the same time: (wall time, mean busy compute cores, Σ
    waits at the control cores, delegated cycles, exact). A station with m servers is Seidmann's
    approximation: one server of demand D/m plus a delay of D·(m − 1)/m (exact for m = 1).
    The wall time is the compute work over the mean number of busy compute cores."""
    # Stations: the compute cores' queue, the control cores' queue, and one delay for the rest
    # (delays only add up: their queues make no one wait).
    kinds = [True, True, False]
    networks = []
    for loads in groups:
        m, c = compute_cores, control_cores
        networks.append([[l.cpu / m for l in loads], [l.control / c for l in loads],
                         [l.cpu * (m - 1) / m + l.control * (c - 1) / c + l.delay for l in loads]])
    out = []
    for loads, rows, sol in zip(groups, networks, mva_many(networks, kinds)):
        busy = sum(x * l.cpu for x, l in zip(sol.throughput, loads))
        work = sum(l.cycles * l.cpu for l in loads)
        # Row 1 is the control cores' queueing part: residence minus demand is the wait.
        waits = sum(l.cycles * (sol.residence[1][k] - rows[1][k]) for k, l in enumerate(loads) if l.control > 0)
        calls = sum(l.cycles for l in loads if l.control > 0)
        if busy <= 0:
            # Nothing to compute: the threads only wait, side by side.
            out.append((max(l.cycles * (l.control + l.delay) for l in loads), 0.0, waits, calls, sol.exact))
        else:
            out.append((work / busy, busy, waits, calls, sol.exact))
    return out


CHILD_WAITS = frozenset({"wait4", "waitid"})


def _child_spans(profile: Profile) -> dict[int, list[tuple[int, int]]]:
    """Per process id, the lifetimes of its child processes (from `processes[]`)."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for p in profile.extra.get("processes") or []:
        if isinstance(p, dict) and p.get("start_ns") is not None and p.get("end_ns") is not None:
            spans.setdefault(p.get("ppid"), []).append((p["start_ns"], p["end_ns"]))
    return spans


@dataclass
class Share:
    """The part of one thread's load that falls in a phase: `compute` of its computation (and of
    the calls without a timeline), `calls[s]` of its calls of s (from the call timeline)."""

    thread: int
    compute: float
    calls: dict[str, float]

    def of(self, name: str) -> float:
        return self.calls.get(name, self.compute)


def _span_of(cuts: list[int], t: float) -> int:
    """Index of the span [cuts[k], cuts[k + 1]) holding time t; the last span holds its end."""
    return min(max(bisect.bisect_right(cuts, t) - 1, 0), len(cuts) - 2)


def _timeline_shares(call: CallStats, cuts: list[int], start: int, end: int) -> dict[int, float] | None:
    """Share of a thread's calls of one syscall (count and time alike) in each span between
    `cuts` (span index -> share, the spans it touches only), from the call timeline: spread
    evenly from the first call's start to the end of the last one, last_ns + g(s)/n(s) (the
    profile keeps only those two times), within the thread's life. A long blocking call so
    covers the phases it waits through. None without a timeline."""
    if call.first_ns is None or call.last_ns is None or call.count == 0:
        return None
    first = min(max(call.first_ns, start), end)
    last = min(max(call.last_ns + call.total_ns / call.count, first), end)
    if last == first:
        return {_span_of(cuts, first): 1.0}
    out = {}
    for k in range(_span_of(cuts, first), _span_of(cuts, last) + 1):
        overlap = min(cuts[k + 1], last) - max(cuts[k], first)
        if overlap > 0:
            out[k] = overlap / (last - first)
    return out


def _within(shares: dict[int, float] | None, allowed: dict[int, float]) -> dict[int, float] | None:
    """`shares` kept to the spans where `allowed` is positive, summing to 1 again; None (no
    timeline: follow `allowed`) when none of them falls there."""
    if shares is None:
        return None
    kept = {k: v for k, v in shares.items() if allowed.get(k, 0.0) > 0}
    total = sum(kept.values())
    return {k: v / total for k, v in kept.items()} if total > 0 else None


def phases(profile: Profile) -> tuple[list[list[Share]], set[int]]:
    """`_cut_phases`, once per profile."""
    return profile.memo("phases", lambda: _cut_phases(profile))


def _cut_phases(profile: Profile) -> tuple[list[list[Share]], set[int]]:
    """The profile's run cut wherever a thread starts or ends: per phase, the share of each
    thread's load that falls in it; and the threads whose time in wait4/waitid the phases
    already stand for.

    A thread's calls fall where its call timeline puts them (`_timeline_shares`: start-up calls
    at the start, so a delegated one there holds up everything, not just its own thread; a
    thread's one long futex wait over the phases it waits through), its computation is spread
    evenly over its lifetime, except for a thread that waits for child processes: it is blocked
    while they run, so its computation is spread over the phases in which none of its children is
    alive (the compiler driver works before and between cc1 and as, not beside them). So the
    driver's children, alive one after another, never compete with each other, although each
    overlaps the driver. A thread without a lifetime is a phase of its own. Each thread is
    visited over the spans of its own life only: lrzip starts 741 short threads, and a table
    of every thread by every span (1,482 of them) took seconds per projection."""
    threads = profile.threads
    if not profile.multithreaded:
        return [[Share(0, 1.0, {})]], set()
    cuts = sorted({t.start_ns for t in threads} | {t.end_ns for t in threads})
    at = {c: k for k, c in enumerate(cuts)}
    children = _child_spans(profile)
    by_span: list[list[Share]] = [[] for _ in cuts[1:]]
    parents: set[int] = set()
    for i, t in enumerate(threads):
        if t.end_ns <= t.start_ns:
            continue
        alive = {k: float(cuts[k + 1] - cuts[k]) for k in range(at[t.start_ns], at[t.end_ns])}
        if any(c.name in CHILD_WAITS and c.total_ns > 0 for c in t.syscalls):
            free = {k: w for k, w in alive.items()
                    if not any(s <= cuts[k] and cuts[k + 1] <= e for s, e in children.get(t.pid, []))}
            if sum(free.values()) > 0:
                alive = free
                parents.add(i)
        total = sum(alive.values())
        compute = {k: w / total for k, w in alive.items() if w > 0} if total > 0 else {}
        timeline = {c.name: _timeline_shares(c, cuts, t.start_ns, t.end_ns) for c in t.syscalls}
        if i in parents:
            # A parent makes no calls while it waits for its children: its timeline, which
            # spreads calls evenly between the first and the last, is kept to its free phases.
            timeline = {name: _within(shares, compute) for name, shares in timeline.items()}
        calls = {name: shares for name, shares in timeline.items() if shares is not None}
        spans = set(compute) | {k for shares in calls.values() for k, v in shares.items() if v > 0}
        for k in spans:
            by_span[k].append(Share(i, compute.get(k, 0.0), {name: v.get(k, 0.0) for name, v in calls.items()}))
    out = [sorted(here, key=lambda share: share.thread) for here in by_span if here]
    out += [[Share(i, 1.0, {})] for i, t in enumerate(threads) if t.end_ns <= t.start_ns]
    return out, parents


def cpu_scale(profile: Profile) -> list[float]:
    """Per segment, the share r of its busy time (C_k and its calls' times) that was CPU demand:
    the thread's own CPU time (`cpu_ns` of the profile's thread) over its busy time, when less,
    or, where a thread of the process has no CPU time (profiles before session 8, a killed
    process), the process's CPU time (user + sys, `processes[]`) over its threads' summed busy
    time. The rest was spent waiting: for a core, when a process's threads shared fewer cores
    than they were (lifetime-based C_k includes that), blocked in a call (a stage of a shell
    pipeline reading an empty pipe: its reads' times are mostly that), or in a call that never
    returned and so was never counted (a pool's idle worker asleep in futex at exit looks like
    a thread that computed all its life; one process-wide ratio then shrank mksquashfs's two
    busy workers to a fifth). 1 for sequential profiles and without CPU times."""
    if not profile.multithreaded:
        return [1.0]
    cpu_by_pid = {p.get("pid"): (p.get("user_ns") or 0) + (p.get("sys_ns") or 0)
                  for p in profile.extra.get("processes") or [] if isinstance(p, dict)}
    segments = profile.segments()
    busy = [s.compute_ns + s.syscall_ns for s in segments]
    busy_by_pid: dict[int, float] = {}
    per_thread_pids = {t.pid for t in profile.threads}
    for t, b in zip(profile.threads, busy):
        busy_by_pid[t.pid] = busy_by_pid.get(t.pid, 0.0) + b
        if not isinstance(t.extra.get("cpu_ns"), (int, float)):
            per_thread_pids.discard(t.pid)
    scale = []
    for t, b in zip(profile.threads, busy):
        if t.pid in per_thread_pids:
            cpu, total = float(t.extra["cpu_ns"]), b
        else:   # a process CPU time of 0 is one not recorded
            cpu, total = cpu_by_pid.get(t.pid) or None, busy_by_pid.get(t.pid, 0.0)
        scale.append(min(1.0, cpu / total) if cpu is not None and total > 0 else 1.0)
    return scale


def _blocked_ns(profile: Profile, share: Share, parents: set[int]) -> float:
    """A thread's time in a phase blocked in calls that wait for another thread (none for a
    sequential profile); for the `parents` of `phases`, the wait for children is left out: the
    phases in which their children run stand for it."""
    if not profile.multithreaded:
        return 0.0
    return float(sum(c.total_ns * share.of(c.name) for c in profile.threads[share.thread].syscalls
                     if c.name in WAIT_CALLS and not (share.thread in parents and c.name in CHILD_WAITS)))


def _phase_part(segment: Segment, share: Share, delegated: frozenset[str], scale: dict[str, float]) -> Split:
    """Eq. 6–8 for the part of a thread's segment that falls in a phase."""
    calls = {name: (n * share.of(name), g * share.of(name)) for name, (n, g) in segment.calls.items()}
    return split(Segment(segment.label, segment.compute_ns * share.compute, calls), delegated, scale)


@dataclass(frozen=True)
class _Part:
    """One thread's part of a phase: its eq. 6–8 terms, CPU share (`cpu_scale`) and blocked time (`_blocked_ns`)."""

    share: Share
    split: Split
    r: float
    blocked: float


def _phase_parts(profile: Profile, delegated: frozenset[str], scale: dict[str, float]) -> list[list[_Part]]:
    """Per phase, each thread's `_Part` under one policy, once per profile."""
    def compute():
        segments, cpu = profile.segments(), cpu_scale(profile)
        cuts, parents = phases(profile)
        return [[_Part(share, _phase_part(segments[share.thread], share, delegated, scale), cpu[share.thread],
                       _blocked_ns(profile, share, parents)) for share in phase] for phase in cuts]
    return profile.memo(("parts", delegated, tuple(sorted(scale.items()))), compute)


def _native_walls(profile: Profile, compute_cores: int, control_cores: int) -> list[float]:
    """Per phase, its wall time without delegation as the closed model rebuilds it, once per profile."""
    def compute():
        groups = [[_Load((p.split.compute_ns + p.split.syscall_ns) * p.r, 0.0,
                         p.blocked + p.split.syscall_ns * (1.0 - p.r), 1.0) for p in phase]
                  for phase in _phase_parts(profile, frozenset(), {})]
        return [solved[0] for solved in _solve_groups(groups, compute_cores, control_cores)]
    return profile.memo(("native", compute_cores, control_cores), compute)


# The share of a delegated call's blocked time (beyond its CPU time, `cpu_scale`) that its
# caller's spin takes from the compute cores when other processes delegate in the same phase
# and they outnumber the compute cores: the caller spins through it (it cannot tell a blocked
# read from a slow round trip) while the stage it waits for runs on the same core, and the
# scheduler gives each of the two runnable threads half of it. Measured (session 12): a 3-stage
# pipeline of 8 KiB calls (head -c | tr | sha256sum) at F = 0 took 245 ms; spinning through
# blocked time at full weight projects 380 ms, at half 271 ms.
BLOCKED_SHARE = 0.5


def _delegating_processes(profile: Profile, phase: list[Share], parts: list[Split]) -> dict[int, float]:
    """Delegated calls of each process (by pid) in a phase: each process has its own delegates."""
    calls: dict[int, float] = {}
    for share, part in zip(phase, parts):
        if part.remote_calls:
            pid = profile.threads[share.thread].pid if profile.multithreaded else 0
            calls[pid] = calls.get(pid, 0.0) + part.remote_calls
    return calls


def _projected_load(part: Split, r: float, blocked: float, gamma: float, fc_ns: float, spin: float,
                    blocked_share: float = 1.0) -> _Load:
    """A thread's cycle with delegation: once per delegated call, its share of the computation
    and local calls on the compute cores plus the part of the round trip it spins there (at most
    `spin`), the delegate's g/n at the control cores, the rest of the round trip and its blocked
    time as delay. `r` (`cpu_scale`) is the CPU share of its computation and calls: the rest of
    a delegated call's time was blocked in the kernel, which its caller, not knowing, spins
    through like the rest of the round trip rt = g/n + 2·f_c (a stage's read of an empty pipe
    holds the one compute core the stage that would fill it needs); the rest of a local call's
    time is blocked time, a delay. `blocked_share` (BLOCKED_SHARE where processes delegate side by
    side) is how much of the spin through blocked time takes the compute core; the rest is delay."""
    work = (part.compute_ns / gamma + part.local_ns) * r
    blocked += part.local_ns * (1.0 - r)
    n = part.remote_calls
    if n == 0:
        return _Load(work, 0.0, blocked, 1.0)
    service = part.remote_g_ns * r / n
    rt = part.remote_g_ns / n + 2.0 * fc_ns
    held = min(spin, rt)
    # The part of the spin through blocked time that the compute cores give to other threads.
    shared = (1.0 - blocked_share) * max(0.0, held - (service + 2.0 * fc_ns))
    at_control = min(service, rt - held)
    return _Load(work / n + held - shared, at_control, rt - held - at_control + blocked / n + shared, float(n))


def _handover_ns(profile: Profile, phase: list[Share], parts: list[Split], wall_ns: float, native_ns: float,
                 fc_ns: float, spin: float, yield_ns: float, control_cores: int) -> tuple[float, float]:
    """The control-core hand-overs of one phase: (their number, the time they add). Each process
    has its own delegate (a shell pipeline's stages each have one), and all of them spin on the
    control cores. A call of the process that makes most of the phase's delegated calls (the
    main one: a stage writing line by line) wakes the next stage's delegate, blocked in its read
    of the pipe; that delegate takes the core for its own round trip, 2·f_c, and, once idle,
    polls on until it yields the core (every `yield_ns`: delegate.rs's YIELD_EVERY_NS),
    while the main delegate waits with its call claimed and in flight. So each hand-over adds
    2·f_c + `yield_ns`, weighted by the share of the phase the main process has a call on the
    control core, ρ = n_main·2·f_c / wall (none when its delegate is idle anyway).

    How many: under delegation the stages read in other batches than in the profile (0.1-0.2 of
    the profile's reads at F = 0, up to 7x as many at 10 µs), and the control core changed hands
    about once per `spin` + `yield_ns` (a stage's caller polls `spin` on a blocked read before it
    sleeps and is woken across cores): 8-10 k turns a second at F = 0, 4-5 k at 10 µs. So at most
    wall / (spin + `yield_ns`), at most one per call of the main process, and at most the other
    processes' own calls as often again as the phase is slowed down. With P processes and c
    control cores, the share (P − c)/(P − 1) of them (none when each delegate can have a core)."""
    calls = _delegating_processes(profile, phase, parts)
    if len(calls) < 2 or control_cores >= len(calls) or wall_ns <= 0:
        return 0.0, 0.0
    main = max(calls.values())
    round_trip = 2.0 * fc_ns
    rho = min(1.0, main * round_trip / wall_ns)
    others = sum(calls.values()) - main
    slowed = max(1.0, wall_ns / native_ns) if native_ns > 0 else 1.0
    count = min(wall_ns / (spin + yield_ns), main, others * slowed)
    count *= (len(calls) - control_cores) / (len(calls) - 1)
    return count, count * (round_trip + yield_ns) * rho


def unseen_ns(profile: Profile, native_model_ns: float) -> float:
    """The profiled run's wall time that the closed model's native network does not rebuild:
    the profile's wall less `native_model_ns`, when positive. It is time the program spent off
    its cores where the profile shows no call: a blocking call the profiler did not time (with
    --time-every, a site's calls after its first few are sampled and the others get the mean of
    those timed: fio's one 100 ms clock_nanosleep, its 9th at that site, counted as ~0.1 ms) or
    a call that never returned. That time is left in the thread's computation, whose share
    beyond its CPU time (`cpu_scale`) the network drops as waiting for a core. Delegation does
    not shorten a sleep, so it is added to both runs as it was measured, rather than scaled
    with the run by S = native ÷ delegated (which charged fio's 2 job threads 1.6× the cost of
    their delegated calls). 0 for a sequential profile, whose network is its wall exactly."""
    return max(0.0, float(profile.wall_ns) - native_model_ns) if profile.multithreaded else 0.0


@dataclass
class ClosedResult:
    """The closed model's projection. `compute_busy` is the mean number of busy compute cores in
    the projected run; `wait_ns` the mean wait per delegated call at the control cores;
    `native_model_ns` the run without delegation as the model rebuilds it from the profile (the
    speedup's numerator: near the profile's wall when the profile is read right)."""

    model: str
    threads: int
    compute_cores: int
    control_cores: int
    gamma: float
    fc_ns: float
    spin_ns: float | None
    exact: bool
    compute_busy: float
    wait_ns: float
    speedup: float
    time_ns: float
    native_model_ns: float
    handovers: float = 0.0      # control-core hand-overs between processes' delegates (`_handover_ns`)
    handover_ns: float = 0.0    # the time they add
    unseen_ns: float = 0.0      # the profiled run's time the network does not rebuild (`unseen_ns`), in both runs

    def to_dict(self) -> dict:
        return asdict(self)


def closed(profile: Profile, gamma: float, fc_ns: float, policy: Policy, compute_cores: int = 1,
           control_cores: int = 1, spin_ns: float | None = None,
           local_ns: Mapping[str, float] | None = None, yield_ns: float | None = None) -> ClosedResult:
    """The closed (finite-source) queueing model: S = wall without delegation / wall with it,
    each the network's wall plus the profiled time it does not rebuild (`unseen_ns`).

    Each thread is one customer; it cycles once per delegated call through the compute cores
    ((C_k/γ + t_local,k)/n_k, plus the part of the round trip rt = g/n + 2·f_c it spends
    spinning on its core: min(spin_ns, rt), all of it when spin_ns is None), the control cores
    (the delegate's g/n while the caller sleeps) and a delay (the rest of the round trip, and
    its time blocked in futex/wait4/waitid spread over its cycles). C_k and the calls' times are
    scaled by `cpu_scale`: the rest of a call's time, beyond what the process's CPU time leaves
    for it, was spent blocked (a pipeline stage's read of an empty pipe) and is a delay too,
    natively and delegated. The run is solved phase by phase (`phases`): the threads alive in a phase,
    each with the share of its load that falls there; the phases' wall times add up. With one
    thread the result is eq. 11's. `yield_ns` (the delegates' yield period, from a calibration:
    model/calibration.yield_ns) adds the control-core hand-overs between processes that
    delegate side by side (`_handover_ns`); None leaves them out."""
    if compute_cores < 1 or control_cores < 1:
        raise ValueError("compute_cores and control_cores must be at least 1")
    delegated, scale = delegated_set(profile, policy), local_scale(profile, local_ns)
    spin = float("inf") if spin_ns is None else float(spin_ns)
    wall_d = busy_time = waits = calls = handovers = handover_ns = 0.0
    exact = True
    natives = _native_walls(profile, compute_cores, control_cores)
    phase_parts = _phase_parts(profile, delegated, scale)
    groups, shapes = [], []
    for here in phase_parts:
        phase, parts = [p.share for p in here], [p.split for p in here]
        processes = len(_delegating_processes(profile, phase, parts))
        shared = BLOCKED_SHARE if processes >= 2 and processes > compute_cores else 1.0
        groups.append([_projected_load(p.split, p.r, p.blocked, gamma, fc_ns, spin, shared) for p in here])
        shapes.append((phase, parts))
    for (phase, parts), nd, (wall, busy, w, c, ok) in zip(shapes, natives,
                                                           _solve_groups(groups, compute_cores, control_cores)):
        busy_time += busy * wall   # the compute cores wait through the hand-overs added below
        if yield_ns:
            n, added = _handover_ns(profile, phase, parts, wall, nd, fc_ns, spin, yield_ns, control_cores)
            handovers += n
            handover_ns += added
            wall += added
        wall_d += wall
        waits += w
        calls += c
        exact = exact and ok
    wall_nd = sum(natives)
    unseen = unseen_ns(profile, wall_nd)
    s = (wall_nd + unseen) / (wall_d + unseen) if wall_d + unseen > 0 else 1.0
    n_threads = max(1, len(profile.threads))
    return ClosedResult(
        model=f"closed MVA, {n_threads} thread(s) on {compute_cores} compute / {control_cores} control core(s)",
        threads=n_threads, compute_cores=compute_cores, control_cores=control_cores, gamma=gamma, fc_ns=fc_ns,
        spin_ns=spin_ns, exact=exact, compute_busy=busy_time / wall_d if wall_d > 0 else 0.0,
        wait_ns=waits / calls if calls else 0.0, speedup=s, time_ns=profile.wall_ns / s, native_model_ns=wall_nd,
        handovers=handovers, handover_ns=handover_ns, unseen_ns=unseen)
