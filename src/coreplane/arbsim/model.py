"""The arbiter as a SimPy model: one single-threaded server on a control core, programs' vcore threads on compute cores, and the ROS Table 1–2 operations timed end to end."""

import random

import simpy

from coreplane.arbsim.costs import Cost, shm_pages

# ROS Tables 1–2 (Nehalem-EX, 32 cores, µs), the shape the simulated tables are compared with.
ROS_NEHALEM_US = {
    "create_mcp": 469, "get_one_warm": 4, "get_one_cold": 15, "get_max_warm": 40, "get_max_cold": 3448,
    "preempt_one": 2, "warn_preempt_one": 3, "preempt_max": 165, "warn_preempt_max": 462,
    "preempt_and_get_max": 201, "kill_mcp": 218,
}
OPERATIONS = tuple(ROS_NEHALEM_US)


class Machine:
    """One trial's world: the clock, the arbiter's inbox and server, and a cost drawn per use."""

    def __init__(self, costs: dict[str, Cost], rng: random.Random, batch_cpusets: bool = False):
        self.env = simpy.Environment()
        self.batch_cpusets = batch_cpusets
        self.costs = costs
        self.rng = rng
        self.inbox = simpy.Store(self.env)
        self.env.process(self._serve())

    def cost(self, name: str) -> float:
        """A draw of cost `name`, ns."""
        c = self.costs[name]
        return self.rng.uniform(c.lo, c.hi)

    def delay(self, *names: str):
        """A SimPy timeout of the sum of the named costs."""
        return self.env.timeout(sum(self.cost(n) for n in names))

    def send(self, handler, reply: bool = True):
        """A message to the arbiter (a socket write, or with `reply` False the pidfd of an exited
        program); `handler` is the generator that serves it. The returned event fires when the
        sender, blocked in recv on its own core, has the reply (or when the handler is done)."""
        done = self.env.event()
        self.env.process(self._post(handler, done, reply))
        return done

    def _post(self, handler, done, reply):
        yield self.delay("syscall")
        yield self.inbox.put((handler, done, reply))

    def _serve(self):
        # The arbiter's event loop: asleep in epoll when its inbox is empty, so the first message
        # of a burst pays a wake-up and the rest queue behind the one being served.
        while True:
            idle = not self.inbox.items
            handler, done, reply = yield self.inbox.get()
            if idle:
                yield self.delay("wake")
            yield self.delay("syscall")  # recv
            result = yield self.env.process(handler())
            if reply:
                yield self.delay("syscall")  # send; the sender wakes on its core meanwhile
                self.env.process(self._deliver(done, result))
            else:
                done.succeed(result)

    def _deliver(self, done, result):
        yield self.delay("wake")
        done.succeed(result)


def _all(machine: Machine, events):
    return machine.env.all_of(list(events))


def _per_vcore(m: Machine, k: int, step, writes: tuple[str, ...] = ()):
    """One request whose handler serves `k` vcores one after another: `step` does a vcore's
    bookkeeping and returns what starts once its cpuset `writes` are done (a move, a
    signal: a function giving the event that marks the vcore done). The groups are rewritten per
    vcore, as arbiter.rs does, or once for the request when the machine batches them."""
    def handler():
        done, waiting = [], []
        for _ in range(k):
            then = yield m.env.process(step())
            if writes and m.batch_cpusets:
                waiting.append(then)
                continue
            yield m.delay(*writes)
            done.append(then())
        if waiting:
            yield m.delay(*writes)
            done += [then() for then in waiting]
        return done
    done = yield m.send(handler)
    yield _all(m, done)


def create_mcp(m: Machine, n: int):
    """Provision: the MCP's cpuset group (mkdir, mems, cpus), the process moved in, its shared pages."""
    def handler():
        yield m.delay("cgroup_dir", "cgroup_dir", "cgroup_dir", "procs_write")
        yield m.env.timeout(shm_pages(n) * m.cost("page"))
    yield m.send(handler)


def _grant(m: Machine, k: int, cold: bool):
    """The arbiter grants `k` vcores: per vcore the procinfo stores and the notification, and a cpuset
    write if cold (the CPU was not retained in the program's cpuset). Done when the requester has the
    reply, as the real arbiter's benchmark times it; the program then runs its threads there."""
    def step():
        yield m.delay("syscall")  # procinfo stores and the notification, about a syscall's worth
        return lambda: m.env.timeout(0)
    yield from _per_vcore(m, k, step, writes=("cpuset_grow",) if cold else ())


def _preempt(m: Machine, k: int):
    """Revoke with no warning time: per vcore a cpuset rewrite; the kernel then moves its thread away."""
    def step():
        yield m.delay("syscall")
        return lambda: m.env.timeout(m.cost("move"))
    yield from _per_vcore(m, k, step, writes=("cpuset_shrink",))


def _warn_preempt(m: Machine, k: int):
    """Revoke with a warning: deadline and notification in the shared pages, a signal per vcore; each
    vcore's handler yields (a message); the core is free when the arbiter has served the yield."""
    def yielded():
        yield m.delay("syscall")

    def vcore():
        yield m.env.timeout(m.cost("signal"))
        yield m.send(yielded)

    def step():
        yield m.delay("syscall", "ipi_send")
        return lambda: m.env.process(vcore())
    yield from _per_vcore(m, k, step)


def preempt_and_get_max(m: Machine, n: int):
    """Another MCP asks for its whole provision, all on loan, and the lender gets no warning: per core
    the lender's cpuset shrinks and the asker's grows; done when the asker has the reply."""
    def step():
        yield m.delay("syscall")
        return lambda: m.env.timeout(0)
    yield from _per_vcore(m, n, step, writes=("cpuset_shrink", "cpuset_grow"))


def kill_mcp(m: Machine, n: int):
    """SIGKILL of an MCP holding `n` vcores: each thread is interrupted on its core and exits; the
    arbiter, woken by the pidfd, removes the group and returns the cores."""
    exits = []
    for _ in range(n):
        yield m.delay("ipi_send")
        exits.append(m.env.timeout(m.cost("wake")))
    yield _all(m, exits)

    def reclaim():
        yield m.delay("cgroup_dir")  # rmdir of the group
        yield m.env.timeout(n * m.cost("syscall"))
    yield m.send(reclaim, reply=False)


# Each operation of Tables 1–2 as a SimPy process body on a machine of n compute cores.
BODIES = {
    "create_mcp": create_mcp,
    "get_one_warm": lambda m, n: _grant(m, 1, cold=False),
    "get_one_cold": lambda m, n: _grant(m, 1, cold=True),
    "get_max_warm": lambda m, n: _grant(m, n, cold=False),
    "get_max_cold": lambda m, n: _grant(m, n, cold=True),
    "preempt_one": lambda m, n: _preempt(m, 1),
    "warn_preempt_one": lambda m, n: _warn_preempt(m, 1),
    "preempt_max": lambda m, n: _preempt(m, n),
    "warn_preempt_max": lambda m, n: _warn_preempt(m, n),
    "preempt_and_get_max": preempt_and_get_max,
    "kill_mcp": kill_mcp,
}
assert set(BODIES) == set(OPERATIONS)


def simulate(operation: str, cores: int, costs: dict[str, Cost], trials: int, seed: int,
             batch_cpusets: bool = False) -> list[float]:
    """`trials` simulated times (ns) of `operation` on a machine of `cores` compute cores."""
    body = BODIES[operation]
    rng = random.Random(f"{seed}:{operation}:{cores}")
    times = []
    for _ in range(trials):
        m = Machine(costs, rng, batch_cpusets)
        finished = m.env.process(body(m, cores))
        m.env.run(until=finished)
        times.append(m.env.now)
    return times


def summarize(times: list[float]) -> dict:
    """min, p50 and p99 (nearest rank) of simulated times, ns."""
    ordered = sorted(times)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]
    return {"min_ns": ordered[0], "p50_ns": rank(0.5), "p99_ns": rank(0.99), "trials": len(ordered)}


def table(cores: list[int], costs: dict[str, Cost], trials: int, seed: int, batch_cpusets: bool = False) -> list[dict]:
    """One row per (operation, cores): the simulated summary and, beside it, ROS's Nehalem-EX figure."""
    rows = []
    for operation in OPERATIONS:
        for n in cores:
            row = {"operation": operation, "cores": n, "simulated": True, "batch_cpusets": batch_cpusets,
                   "ros_nehalem_us": ROS_NEHALEM_US[operation]}
            row.update(summarize(simulate(operation, n, costs, trials, seed, batch_cpusets)))
            rows.append(row)
    return rows
