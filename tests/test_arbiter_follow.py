"""The runtime follows its many-core process's cores (issue 14), live: an unmodified program that
delegates getppid, run with `coreplane run --mcp`, loses its borrowed core to a provisioned MCP
and gets it back once that one exits. Its runtime yields the warned vcore at once (not preempted
at the deadline), its worker moves to the control cores and back, and no delegated call is lost
or wrong on the way."""

import json
import os
import subprocess
import time

import pytest

from conftest import CLI, build_program
from test_arbiter import Program, private_arbiter, status, wait_for

from coreplane.core.cpulist import parse_cpu_list

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or (os.cpu_count() or 1) < 2,
                                reason="needs root, a cpuset hierarchy and two CPUs")

# Long enough that a vcore yielded by the runtime is told from one preempted at its deadline
# even on a loaded machine.
WARN_US = 5_000_000


@pytest.fixture
def arbiter():
    yield from private_arbiter(["--warn-us", str(WARN_US)])


class Follower:
    """tests/programs/arbiter_follow.c under `coreplane run --mcp --max 1 --delegate getppid`."""

    def __init__(self, exe, state_dir):
        self.proc = subprocess.Popen([*CLI, "run", "--mcp", "--max", "1", "--delegate", "getppid", "--arbiter-state-dir",
                                      str(state_dir), "--", str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)

    def ask(self) -> dict:
        self.proc.stdin.write("?\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the program ended: {self.proc.stderr.read()}"
        return json.loads(line)

    def end(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def holds(daemon, pid: int) -> list[int]:
    """The CPUs many-core process `pid` holds."""
    return [v["cpu"] for m in status(daemon)["mcps"] if m["pid"] == pid for v in m["vcores"]]


def test_delegating_program_follows_its_cores(arbiter, tmp_path_factory):
    exe = build_program(tmp_path_factory, "arbiter_follow")
    control = parse_cpu_list(status(arbiter)["control_cores"])
    follower = Follower(exe, arbiter.state_dir)
    provisioned = None
    try:
        first = follower.ask()
        launcher = follower.proc.pid
        [cpu] = holds(arbiter, launcher)
        wait_for(lambda: follower.ask()["cpu"] == cpu)
        assert parse_cpu_list(follower.ask()["allowed"]) == [cpu]

        # A provisioned MCP asks for its core: the borrowed vcore is revoked with a 5 s warning,
        # which the runtime answers at once by yielding it.
        provisioned = Program(arbiter.state_dir)
        with arbiter.client() as c:
            c.checked("provision", pid=provisioned.pid, cores=1)
        asked = time.monotonic()
        assert provisioned.ask("request 1")["granted"] == 0  # pending: on loan to the follower
        wait_for(lambda: holds(arbiter, provisioned.pid) == [cpu], seconds=WARN_US / 1e6 + 5)
        handed_over_s = time.monotonic() - asked
        counters = status(arbiter)["counters"]
        assert (counters["yielded_in_time"], counters["preempted"]) == (1, 0), (counters, handed_over_s)
        assert holds(arbiter, launcher) == []
        wait_for(lambda: parse_cpu_list(follower.ask()["allowed"]) == control)
        # The worker notes its CPU after each call: it has run on the control core once it says so.
        wait_for(lambda: follower.ask()["cpu"] in control)
        moved = follower.ask()

        # The provisioned MCP ends: its core is free, and the runtime asks for it again.
        provisioned.kill()
        provisioned = None
        wait_for(lambda: holds(arbiter, launcher) == [cpu], seconds=10)
        wait_for(lambda: parse_cpu_list(follower.ask()["allowed"]) == [cpu])
        wait_for(lambda: follower.ask()["cpu"] == cpu)
        last = follower.ask()
        assert last["wrong"] == 0 and last["calls"] > moved["calls"] > first["calls"]
        counters = status(arbiter)["counters"]
        # The runtime reads procinfo and empties its queues, so no notification was dropped.
        assert counters["preempted"] == 0 and counters["dropped_notifications"] == 0, counters
    finally:
        if provisioned:
            provisioned.kill()
        follower.end()
    assert follower.proc.returncode == 0, follower.proc.stderr.read()
    wait_for(lambda: not status(arbiter)["mcps"])


@pytest.mark.parametrize("policy", ["all", "getppid"])
def test_a_last_exit_of_a_followed_program_ends_it(arbiter, tmp_path_factory, policy):
    # The review's case: under getppid the program delegated nothing, so no delegate existed, and
    # its last thread's exit(2) left the process alive with the monitor parked (SIGTERM could not
    # end it either). It ends with the thread's status now, under either policy.
    exe = build_program(tmp_path_factory, "mcp_sysexit")
    proc = subprocess.Popen([*CLI, "run", "--mcp", "--max", "1", "--delegate", policy, "--arbiter-state-dir",
                             str(arbiter.state_dir), "--", str(exe)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    assert proc.returncode == 3 and out == "bye\n", err


def test_a_yield_of_the_runtime_carries_its_times_and_retains_the_cpu(arbiter, tmp_path_factory):
    # An admin takes the borrowed core back for nobody: the monitor yields it (its times in the
    # outcome, in order), as a cooperating program does: the CPU stays in its cpuset, retained,
    # until granted to another; the monitor asks again after its quiet time and gets it warm.
    exe = build_program(tmp_path_factory, "arbiter_follow")
    follower = Follower(exe, arbiter.state_dir)
    try:
        follower.ask()
        launcher = follower.proc.pid
        [cpu] = holds(arbiter, launcher)
        warm_before = status(arbiter)["counters"]["grants_warm"]
        with arbiter.client() as c:
            [outcome] = c.checked("revoke", pid=launcher, vcore=0, warn_us=WARN_US, wait=True)["revoked"]
        assert outcome["outcome"] == "yielded", outcome
        times = [outcome[k] for k in ("warned_ns", "yielder_woke_ns", "yielder_sent_ns", "started_ns", "released_ns")]
        assert times == sorted(times) and times[-1] < outcome["deadline_ns"], outcome
        wait_for(lambda: holds(arbiter, launcher) == [cpu], seconds=10)
        assert status(arbiter)["counters"]["grants_warm"] == warm_before + 1
        assert parse_cpu_list(follower.ask()["allowed"]) == [cpu]
        assert status(arbiter)["counters"]["preempted"] == 0
    finally:
        follower.end()
    assert follower.proc.returncode == 0, follower.proc.stderr.read()
    wait_for(lambda: not status(arbiter)["mcps"])


def test_a_followed_program_unshares_a_user_namespace(arbiter, tmp_path_factory):
    # The monitor is a thread, and the kernel allows unshare(CLONE_NEWUSER) in a single-threaded
    # process only: it failed EINVAL under --mcp. The runtime pauses the monitor for the call (as
    # it retires its delegates) and starts it again after: the vcore is still yielded when revoked.
    exe = build_program(tmp_path_factory, "mcp_unshare")
    native = subprocess.run([str(exe)], input="", capture_output=True, text=True, timeout=30)
    if native.returncode != 0:
        pytest.skip(f"user namespaces are not available here: {native.stdout.strip()}")
    proc = subprocess.Popen([*CLI, "run", "--mcp", "--max", "1", "--delegate", "getppid", "--arbiter-state-dir",
                             str(arbiter.state_dir), "--", str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "unshare: 0\n"
        launcher = proc.pid
        wait_for(lambda: holds(arbiter, launcher) != [], seconds=10)
        with arbiter.client() as c:
            [outcome] = c.checked("revoke", pid=launcher, vcore=0, warn_us=WARN_US, wait=True)["revoked"]
        assert outcome["outcome"] == "yielded" and "yielder_woke_ns" in outcome, outcome
        proc.stdin.write("?\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "uid 65534, parent same\n"
    finally:
        proc.stdin.close()
        try:
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, proc.stderr.read()
    wait_for(lambda: not status(arbiter)["mcps"])


def allowed(pid: int) -> list[int]:
    """The CPUs process `pid`'s (main) thread may run on now: its affinity within its cpuset."""
    with open(f"/proc/{pid}/status") as f:
        return parse_cpu_list(next(line.split()[1] for line in f if line.startswith("Cpus_allowed_list")))


# The program's first process (sh) starts a forked child that does not exec (a subshell) and
# one that execs (sh -c), both spinning, prints their pids, and waits for a line on stdin.
FAMILY = '(while :; do :; done) & a=$!; echo $a; sh -c "while :; do :; done" & b=$!; echo $b; read x; kill $a $b'


def test_every_process_of_a_followed_program_follows(arbiter):
    # The MCP's cores are its cpuset, which holds every process of the program: the first
    # process's monitor yields a warned vcore for all of them (each process has no monitor of its
    # own: two would yield and ask for the same vcores), and every process's threads leave the
    # core when it is granted to another and come back with it. Once the first process ends, the
    # MCP (the launcher, which waits for it) ends too: the others run on ordinary scheduling.
    control = parse_cpu_list(status(arbiter)["control_cores"])
    proc = subprocess.Popen([*CLI, "run", "--mcp", "--max", "1", "--delegate", "getppid", "--arbiter-state-dir",
                             str(arbiter.state_dir), "--", "sh", "-c", FAMILY], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    provisioned, children = None, []
    try:
        children += [int(proc.stdout.readline()) for _ in range(2)]
        launcher = proc.pid
        wait_for(lambda: len(holds(arbiter, launcher)) == 1, seconds=10)
        [cpu] = holds(arbiter, launcher)
        for child in children:
            wait_for(lambda: allowed(child) == [cpu])
        provisioned = Program(arbiter.state_dir)
        with arbiter.client() as c:
            c.checked("provision", pid=provisioned.pid, cores=1)
        assert provisioned.ask("request 1")["granted"] == 0  # pending: on loan to the program
        wait_for(lambda: holds(arbiter, provisioned.pid) == [cpu], seconds=WARN_US / 1e6 + 5)
        counters = status(arbiter)["counters"]
        assert (counters["yielded_in_time"], counters["preempted"]) == (1, 0), counters
        assert [allowed(child) for child in children] == [control, control]
        provisioned.kill()
        provisioned = None
        wait_for(lambda: holds(arbiter, launcher) == [cpu], seconds=10)
        for child in children:
            wait_for(lambda: allowed(child) == [cpu])
    finally:
        if provisioned:
            provisioned.kill()
        proc.stdin.close()
        try:
            proc.wait(30)
        finally:
            for pid in [proc.pid, *children]:  # the spinners outlive the launcher (no common group)
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass  # ended as asked
            proc.wait()
    wait_for(lambda: not status(arbiter)["mcps"])
