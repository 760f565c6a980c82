"""Every model's projection of one profile, and the answer: the headline model, the one
`coreplane validate` scores its goal with (the closed model: eq. 11 for one thread, MVA for more)."""

from collections.abc import Mapping

from coreplane.model.calibration import with_startup
from coreplane.model.naive import naive
from coreplane.model.policies import Policy
from coreplane.model.queueing import closed, phases, queueing
from coreplane.model.refined import refined
from coreplane.profile.records import Profile

HEADLINE = "closed"


def concurrency(profile: Profile) -> int:
    """The most threads (and processes) of the program alive at one time: an open queue needs at
    least two, since a thread never queues behind its own call."""
    return max((len(phase) for phase in phases(profile)[0]), default=1)


def project(profile: Profile, gamma: float, fc_ns: float, policy: Policy, delegate_threads: int = 1,
            compute_cores: int = 1, control_cores: int = 1, spin_ns: float | None = None,
            local_ns: Mapping[str, float] | None = None, startup_ns: float = 0.0,
            yield_ns: float | None = None, answer_only: bool = False) -> dict:
    """Each model's result as a dict (queueing: `applicable` false, with the reason, where no
    queue can form; `saturated` where one grows without bound), and `answer`: the headline's.
    `local_ns`, `spin_ns` and `startup_ns` are what coreplane's runtime adds (from a
    calibration, model/calibration.py): the start-up is added to every projected time but the
    naive model's, which stays the paper's eq. 3. `yield_ns` (calibration.yield_ns) gives the
    closed model the control-core hand-overs between processes that delegate side by side.
    `answer_only`: the headline and the answer alone (validate asks for them once per row and
    round, and the other three models were a third of its scoring time)."""
    def timed(result: dict) -> dict:
        if startup_ns and result.get("speedup") is not None:
            result["speedup"] = with_startup(profile.wall_ns, result["speedup"], startup_ns)
            result["time_ns"] = profile.wall_ns / result["speedup"]
        return result

    alive = concurrency(profile)

    def open_queue() -> dict:
        if alive < 2:
            return {"applicable": False, "reason": "one thread at a time: a thread never queues behind its own "
                    "delegated call (the closed model covers it)"}
        return {"applicable": True, **timed(queueing(profile, gamma, fc_ns, policy, delegate_threads,
                                                     local_ns=local_ns).to_dict())}

    models = {
        "naive": lambda: naive(profile, gamma).to_dict(),
        "refined": lambda: timed(refined(profile, gamma, fc_ns, policy, local_ns=local_ns).to_dict()),
        "queueing": open_queue,
        "closed": lambda: timed(closed(profile, gamma, fc_ns, policy, compute_cores=compute_cores,
                                       control_cores=control_cores, spin_ns=spin_ns, local_ns=local_ns,
                                       yield_ns=yield_ns).to_dict()),
    }
    results = {name: make() for name, make in models.items() if not answer_only or name == HEADLINE}
    head = results[HEADLINE]
    results["answer"] = {"model": HEADLINE, "description": head["model"], "speedup": head["speedup"],
                         "time_ns": head["time_ns"], "concurrency": alive}
    return results
