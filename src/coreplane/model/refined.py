"""The refined model (paper 002 eq. 4–11): per-call times g(s), forwarding f(s) = 2·f_c·n(s), b(s) from a policy."""

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from coreplane.model.policies import Policy
from coreplane.profile.records import Profile, Segment


@dataclass(frozen=True)
class Split:
    """One segment (thread, or the sequential program) split by a policy into eq. 4–9's terms."""

    compute_ns: float    # C
    syscall_ns: float    # Σ g(s)
    remote_g_ns: float   # Σ b(s)·g(s)
    remote_calls: int    # Σ b(s)·n(s)
    local_ns: float      # t_local = Σ (1 − b(s))·g'(s), eq. 7

    def t_nd(self) -> float:
        """Eq. 4: t_nd = C + Σ g(s), the run without delegation."""
        return self.compute_ns + self.syscall_ns

    def t_remote(self, fc_ns):
        """Eq. 8 with eq. 5: t_remote = Σ b(s)·(g(s) + 2·f_c·n(s))."""
        return self.remote_g_ns + 2.0 * np.asarray(fc_ns, dtype=float) * self.remote_calls

    def t_d(self, gamma, fc_ns):
        """Eq. 9: t_d = C/γ + t_remote + t_local (numpy broadcasting over γ and f_c)."""
        return self.compute_ns / np.asarray(gamma, dtype=float) + self.t_remote(fc_ns) + self.local_ns


def split(segment: Segment, delegated: frozenset[str], local_scale: Mapping[str, float]) -> Split:
    """Eq. 6–8 for one segment; `local_scale[s]` = g'(s)/g(s) for calls served by another implementation."""
    remote_g = local = 0.0
    remote_calls = 0
    for name, (n, g) in segment.calls.items():
        if name in delegated:
            remote_g += g
            remote_calls += n
        else:
            local += g * local_scale.get(name, 1.0)
    return Split(segment.compute_ns, segment.syscall_ns, remote_g, remote_calls, local)


def delegated_set(profile: Profile, policy: Policy) -> frozenset[str]:
    """b(s) = 1 for these calls of the profile under the policy."""
    return policy.delegated(profile.counts(), frozenset(profile.not_intercepted))


def local_scale(profile: Profile, local_ns: Mapping[str, float] | None) -> dict[str, float]:
    """g'(s)/g(s) per call from `local_ns[s]` = g'(s), the total time of s served locally by
    another implementation: g' is given for the whole program, and threads keep their own g_k(s)
    in the same ratio."""
    totals = {c.name: c.total_ns for c in profile.syscalls}
    return {name: g_prime / totals[name] if totals.get(name) else 1.0 for name, g_prime in (local_ns or {}).items()}


def splits(profile: Profile, delegated: frozenset[str], local_ns: Mapping[str, float] | None = None) -> list[Split]:
    """Every segment of the profile split by the delegated set. `local_ns[s]` is g'(s), the total
    time of s served locally by another implementation (default g'(s) = g(s))."""
    scale = local_scale(profile, local_ns)
    return [split(seg, delegated, scale) for seg in profile.segments()]


def interposed_local_ns(profile: Profile, per_call_ns: float | None = None) -> dict[str, float]:
    """g'(s) of coreplane's own emulation: a call kept local still pays the runtime's interposition
    cost on top of g(s), `per_call_ns` (as a micro-benchmark measured it) or else the profile's own
    calibration (`overhead.interposed_call_ns`, not included in total_ns).
    Pass it as `local_ns` to predict a `coreplane run` rather than a real multi-kernel."""
    if per_call_ns is None:
        per_call_ns = float((profile.overhead or {}).get("interposed_call_ns") or 0.0)
    return {c.name: c.total_ns + per_call_ns * c.count for c in profile.syscalls}


def speedup(parts: list[Split], gamma, fc_ns):
    """Eq. 10–11 summed over segments: S_r = Σ t_nd / Σ t_d (arrays broadcast over γ and f_c)."""
    return sum(p.t_nd() for p in parts) / sum(p.t_d(gamma, fc_ns) for p in parts)


@dataclass
class RefinedResult:
    """S_r and the terms it came from; times in ns, `time_ns` = measured wall time ÷ S_r."""

    gamma: float
    fc_ns: float
    speedup: float
    time_ns: float
    t_nd_ns: float
    t_d_ns: float
    t_local_ns: float
    t_remote_ns: float
    forward_ns: float          # Σ f(s) over delegated calls
    delegated: list[str]
    delegated_calls: int

    def to_dict(self) -> dict:
        return asdict(self)


def refined(profile: Profile, gamma: float, fc_ns: float, policy: Policy,
            local_ns: Mapping[str, float] | None = None) -> RefinedResult:
    """Eq. 11 for a profile: γ the gain, f_c the one-way forwarding cost (ns), b(s) from `policy`."""
    delegated = delegated_set(profile, policy)
    parts = splits(profile, delegated, local_ns)
    s = float(speedup(parts, gamma, fc_ns))
    calls = sum(p.remote_calls for p in parts)
    return RefinedResult(
        gamma=gamma, fc_ns=fc_ns, speedup=s, time_ns=profile.wall_ns / s,
        t_nd_ns=sum(p.t_nd() for p in parts), t_d_ns=float(sum(p.t_d(gamma, fc_ns) for p in parts)),
        t_local_ns=sum(p.local_ns for p in parts), t_remote_ns=float(sum(p.t_remote(fc_ns) for p in parts)),
        forward_ns=2.0 * fc_ns * calls, delegated=sorted(delegated), delegated_calls=calls)
