"""Every model's projection of one profile, and the answer: the headline model, the one
`coreplane validate` scores its goal with (the closed model: eq. 11 for one thread, MVA for more)."""

from coreplane.model.naive import naive
from coreplane.model.policies import Policy
from coreplane.model.queueing import closed, phases, queueing
from coreplane.model.refined import refined
from coreplane.profile.records import Profile

HEADLINE = "closed"
MODELS = ("naive", "refined", "queueing", "closed")


def concurrency(profile: Profile) -> int:
    """The most threads (and processes) of the program alive at one time: an open queue needs at
    least two, since a thread never queues behind its own call."""
    return max((len(phase) for phase in phases(profile)[0]), default=1)


def project(profile: Profile, gamma: float, fc_ns: float, policy: Policy, delegate_threads: int = 1,
            compute_cores: int = 1, control_cores: int = 1, spin_ns: float | None = None) -> dict:
    """Each model's result as a dict (queueing: `applicable` false, with the reason, where no
    queue can form; `saturated` where one grows without bound), and `answer`: the headline's."""
    results = {"naive": naive(profile, gamma).to_dict(), "refined": refined(profile, gamma, fc_ns, policy).to_dict()}
    alive = concurrency(profile)
    if alive < 2:
        results["queueing"] = {"applicable": False, "reason": "one thread at a time: a thread never queues "
                               "behind its own delegated call (the closed model covers it)"}
    else:
        results["queueing"] = {"applicable": True, **queueing(profile, gamma, fc_ns, policy, delegate_threads).to_dict()}
    results["closed"] = closed(profile, gamma, fc_ns, policy, compute_cores=compute_cores,
                               control_cores=control_cores, spin_ns=spin_ns).to_dict()
    head = results[HEADLINE]
    results["answer"] = {"model": HEADLINE, "description": head["model"], "speedup": head["speedup"],
                         "time_ns": head["time_ns"], "concurrency": alive}
    return results
