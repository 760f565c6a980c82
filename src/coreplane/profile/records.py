"""What a profile holds (per thread and per call: n(s), g(s), the call timeline) and what the
models take from it: segments (C and the calls of one thread) and the system share p."""

from dataclasses import dataclass, field
from pathlib import Path

FORMAT = "coreplane-profile/1"

# Calls that wait for another thread or process of the same program. In a multithreaded
# profile their time is the other thread's work, not OS work, so the models leave it out
# (it shrinks and grows with the thread waited for).
WAIT_CALLS = frozenset({"futex", "wait4", "waitid"})


@dataclass
class CallStats:
    """One syscall's figures: n(s) = count and g(s) = total_ns in paper 002's notation."""

    name: str
    count: int
    total_ns: float
    errors: int = 0
    nr: int | None = None
    local: int = 0
    delegated: int = 0
    served: int | None = None     # answered in user space by the runtime (--memory pool), neither local nor
                                  # delegated; None in profiles made before the memory service
    forward_ns: dict | None = None
    queued_ns: dict | None = None
    first_ns: int | None = None   # the call timeline: start of the first call, since the run's start
    last_ns: int | None = None    # and of the latest timed one (within a sampling gap of the last)
    bytes: int | None = None      # data calls (read, write, ...): the bytes their successful calls moved
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        timeline = {k: v for k, v in (("first_ns", self.first_ns), ("last_ns", self.last_ns), ("bytes", self.bytes),
                                                  ("served", self.served))
                    if v is not None}
        return {"name": self.name, "nr": self.nr, "count": self.count, "errors": self.errors,
                "total_ns": self.total_ns, "local": self.local, "delegated": self.delegated,
                "forward_ns": self.forward_ns, "queued_ns": self.queued_ns, **timeline, **self.extra}


@dataclass
class Thread:
    """One thread's lifetime (offsets from the program's start) and its own syscalls."""

    pid: int
    tid: int
    start_ns: int
    end_ns: int
    syscalls: list[CallStats]
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"pid": self.pid, "tid": self.tid, "start_ns": self.start_ns, "end_ns": self.end_ns,
                "syscalls": [c.to_dict() for c in self.syscalls], **self.extra}


@dataclass
class Segment:
    """What the models need of one thread (or of a sequential program): C and, per call, n(s) and g(s)."""

    label: str
    compute_ns: float
    calls: dict[str, tuple[int, float]]  # name -> (n(s), g(s))

    @property
    def syscall_ns(self) -> float:
        return sum(g for _, g in self.calls.values())


@dataclass
class Profile:
    """A whole profile; `syscalls` is summed over all threads and processes."""

    program: str
    wall_ns: int
    syscalls: list[CallStats]
    argv: list[str] = field(default_factory=list)
    config: dict | None = None
    user_ns: int | None = None
    sys_ns: int | None = None
    exit: dict | None = None
    overhead: dict | None = None
    not_intercepted: list[str] = field(default_factory=list)
    threads: list[Thread] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    source: str = "<profile>"

    def to_dict(self) -> dict:
        return {"format": FORMAT, "program": self.program, "argv": self.argv, "config": self.config,
                "wall_ns": self.wall_ns, "user_ns": self.user_ns, "sys_ns": self.sys_ns,
                "exit": self.exit, "overhead": self.overhead, "not_intercepted": self.not_intercepted,
                "syscalls": [c.to_dict() for c in self.syscalls],
                "threads": [t.to_dict() for t in self.threads], **self.extra}

    @property
    def label(self) -> str:
        """A short name for tables and legends: the program's base name."""
        return Path(self.argv[0] if self.argv else self.program).name

    @property
    def multithreaded(self) -> bool:
        return len(self.threads) > 1

    def counts(self) -> dict[str, int]:
        """n(s) for every syscall the program made."""
        return {c.name: c.count for c in self.syscalls}

    def memo(self, key, compute):
        """`compute()` once per profile object and key, for what is derived from the profile
        alone (its segments, the closed model's phases): a profile does not change once loaded,
        and a validation projects each one thousands of times (SVT-AV1's 103 threads: 205 phases
        cut in 0.1 s, a quarter of a projection). `dataclasses.replace` makes a new object, with
        no memo; callers must not change what they get."""
        memo = self.__dict__.setdefault("_memo", {})
        if key not in memo:
            memo[key] = compute()
        return memo[key]

    def segments(self) -> list[Segment]:
        """Model inputs. Sequential: one segment, C = wall − Σ g(s) (eq. 4). Multithreaded: one
        segment per thread, C_k = lifetime − Σ g_k(s), with WAIT_CALLS left out of g."""
        return self.memo("segments", self._segments)

    def _segments(self) -> list[Segment]:
        if not self.multithreaded:
            calls = _within_lifetime(self.wall_ns, {c.name: (c.count, float(c.total_ns)) for c in self.syscalls})
            return [Segment(self.label, _compute_ns(self.wall_ns, calls), calls)]
        segs = []
        for t in self.threads:
            calls = _within_lifetime(t.end_ns - t.start_ns, {c.name: (c.count, float(c.total_ns)) for c in t.syscalls})
            compute = _compute_ns(t.end_ns - t.start_ns, calls)
            busy = {n: v for n, v in calls.items() if n not in WAIT_CALLS}
            segs.append(Segment(f"{t.pid}/{t.tid}", compute, busy))
        return segs

    def system_share(self) -> float:
        """p of eq. 1–3: syscall time over the time the program (all its threads) was busy."""
        segs = self.segments()
        syscall = sum(s.syscall_ns for s in segs)
        busy = syscall + sum(s.compute_ns for s in segs)
        return syscall / busy if busy else 0.0

    def measured_with_delegation(self) -> bool:
        """True when some calls were delegated in the run: then g(s) includes forwarding."""
        return any(c.delegated for c in self.syscalls)

    def most_processes_at_once(self) -> int:
        """The largest number of the program's processes alive at the same moment (1 without a
        process list): a shell pipeline's stages run side by side, cc's cc1 and as one after
        another beside the driver."""
        edges = sorted((t, step) for p in self.extra.get("processes") or []
                       if p.get("start_ns") is not None and p.get("end_ns") is not None
                       for t, step in ((p["start_ns"], 1), (p["end_ns"], -1)))
        alive = most = 0
        for _, step in edges:
            alive += step
            most = max(most, alive)
        return max(1, most)


def _within_lifetime(lifetime_ns: float, calls: dict[str, tuple[int, float]]) -> dict[str, tuple[int, float]]:
    """The calls' times scaled down, all in one ratio, when together they exceed the lifetime of
    their thread: with --time-every N a sampled call stands for N, and one sampled read that
    blocked for a millisecond then counts N milliseconds (a pipeline stage: 119 ms of reads in a
    46 ms life). A thread cannot have spent longer in calls than it lived."""
    total = sum(g for _, g in calls.values())
    if lifetime_ns <= 0 or total <= lifetime_ns:
        return calls
    ratio = lifetime_ns / total
    return {name: (n, g * ratio) for name, (n, g) in calls.items()}


def _compute_ns(lifetime_ns: float, calls: dict[str, tuple[int, float]]) -> float:
    # Timer skew can make Σ g a hair longer than the lifetime; C cannot be negative.
    return max(0.0, lifetime_ns - sum(g for _, g in calls.values()))
