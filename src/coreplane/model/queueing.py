"""Queueing at the delegates (paper 002 eq. 12–13): M/M/1 for one delegate, M/M/c (Erlang C) for c."""

from collections.abc import Mapping
from dataclasses import asdict, dataclass

from coreplane.model.policies import Policy
from coreplane.model.profile import Profile
from coreplane.model.refined import delegated_set, splits

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
