"""The arbiter of many-core processes, live (issue 14): admission control, peer credentials,
grant/yield/revoke, warn-then-preempt of a cooperating and of an uncooperative vcore, a client
killed mid-revoke, the arbiter killed with nothing left behind, malformed messages, a program
that never reads its notification queue."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import cli_json, run_cli
from machine_lock import machine_lock

from coreplane.arbiter.client import Daemon, env_for
from coreplane.core.cpulist import parse_cpu_list

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or (os.cpu_count() or 1) < 2,
                                reason="needs root, a cpuset hierarchy and two CPUs")

CPUSET_ROOT = Path("/sys/fs/cgroup/cpuset")

# A program of the MCP: attaches, obeys commands read from stdin, prints one JSON line each.
PROGRAM = r"""
import json, os, sys, time, ctypes
from coreplane.arbiter.vcore import Vcores
v = Vcores()
libc = ctypes.CDLL(None)
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "request":
        out = {"granted": v.request(int(cmd[1])), "cpu": v.cpu(0)}
    elif cmd[0] == "yield":
        v.yield_vcore(int(cmd[1])); out = {}
    elif cmd[0] == "wait_warning":      # cooperating: yields at its safe point
        while v.preempt_deadline(0) is None: pass
        out = {"deadline": v.preempt_deadline(0)}
        v.yield_vcore(0)
    elif cmd[0] == "spin_on":           # uncooperative: pinned to the vcore's CPU, never yields
        cpu = v.cpu(0)
        try:
            os.sched_setaffinity(0, {cpu})
        except OSError as e:   # say why (another cpuset owner moved us?) rather than die
            print(json.dumps({"error": str(e), "cpu": cpu, "cpuset": open("/proc/self/cpuset").read()}), flush=True)
            continue
        while libc.sched_getcpu() == cpu: pass
        out = {"moved_at": time.clock_gettime_ns(time.CLOCK_MONOTONIC), "now_on": libc.sched_getcpu()}
    elif cmd[0] == "events":
        out = {"events": v.events(int(cmd[1]))}
    elif cmd[0] == "cpuset":
        out = {"cpuset": open("/proc/self/cpuset").read().strip()}
    print(json.dumps(out), flush=True)
"""


class Program:
    def __init__(self, state_dir: Path, user: list[str] = ()):
        self.proc = subprocess.Popen([*user, sys.executable, "-c", PROGRAM], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env_for(state_dir))
        self.pid = self.proc.pid

    def ask(self, command: str) -> dict:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def kill(self):
        self.proc.kill()
        self.proc.wait()


def private_arbiter(options: list[str]):
    """A private arbiter with `options`, its state directory and cpuset group named on it; the
    state directory goes with it, even when the test fails (1,892 were left in /tmp)."""
    with tempfile.TemporaryDirectory(prefix="coreplane-arbiter-") as state, machine_lock():
        state = Path(state)
        name = f"coreplane-arbiter-test-{os.getpid()}-{state.name}"
        daemon = Daemon(state, options, name).start()
        daemon.state_dir, daemon.group, daemon.name = state, CPUSET_ROOT / name, name
        try:
            yield daemon
        finally:
            daemon.stop()
    assert not daemon.group.exists(), "the arbiter left its cpuset behind"


@pytest.fixture
def arbiter():
    yield from private_arbiter(["--warn-us", "200000"])


@pytest.fixture
def gang_arbiter():
    yield from private_arbiter(["--warn-us", "1000", "--gang-stop"])


def status(daemon) -> dict:
    with daemon.client() as c:
        return c.checked("status")


def wait_for(predicate, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_admission_refuses_what_does_not_fit(arbiter):
    cores = len(parse_cpu_list(status(arbiter)["compute_cores"]))
    a = Program(arbiter.state_dir)
    with arbiter.client() as c:
        assert c.checked("provision", pid=a.pid, cores=cores)["provision"] == cores
        refused = c.call("provision", pid=os.getpid(), cores=1)
        assert not refused["ok"] and "refused" in refused["error"] and f"{cores} of the {cores}" in refused["error"]
        assert "refused" in c.call("provision", pid=os.getpid(), cores=cores + 5)["error"]
    a.kill()
    wait_for(lambda: status(arbiter)["provisioned"] == 0)


def test_grant_yield_warm_and_cpuset(arbiter):
    a = Program(arbiter.state_dir)
    with arbiter.client() as c:
        c.checked("provision", pid=a.pid, cores=1)
    assert a.ask("cpuset")["cpuset"].endswith(f"mcp-{a.pid}")
    first = a.ask("request 1")
    assert first["granted"] == 1 and first["cpu"] >= 1
    group = arbiter.group / f"mcp-{a.pid}"
    assert str(first["cpu"]) in (group / "cpuset.cpus").read_text()
    assert a.ask("events 0")["events"] == [["granted", first["cpu"]]]
    a.ask("yield 0")
    assert a.ask("request 1")["granted"] == 1
    counters = status(arbiter)["counters"]
    assert (counters["grants_cold"], counters["grants_warm"], counters["yields"]) == (1, 1, 1)
    assert a.ask("request 1")["granted"] == 0  # max reached
    a.kill()
    wait_for(lambda: not status(arbiter)["mcps"])
    assert not group.exists()


def test_mcp_threads_stay_off_the_control_cores_unless_it_delegates(arbiter):
    """A program's own threads run only on the cores its MCP holds (fixed-thread programs used to
    escape onto the control cores); the control cores while it holds none, so it stays runnable;
    and always with `delegates` (coreplane's runtime delegates there and pins the rest itself)."""
    control = parse_cpu_list(status(arbiter)["control_cores"])
    a = Program(arbiter.state_dir)
    group = arbiter.group / f"mcp-{a.pid}"
    with arbiter.client() as c:
        assert c.checked("provision", pid=a.pid, cores=1)["delegates"] is False
        assert parse_cpu_list((group / "cpuset.cpus").read_text()) == control
        cpu = a.ask("request 1")["cpu"]
        assert parse_cpu_list((group / "cpuset.cpus").read_text()) == [cpu]
        allowed = next(l for l in Path(f"/proc/{a.pid}/status").read_text().splitlines() if l.startswith("Cpus_allowed_list"))
        assert parse_cpu_list(allowed.split(":")[1].strip()) == [cpu]
        assert c.checked("provision", pid=a.pid, cores=1, delegates=True)["delegates"] is True
        assert parse_cpu_list((group / "cpuset.cpus").read_text()) == sorted(control + [cpu])
        (mcp,) = c.checked("status")["mcps"]
        assert parse_cpu_list(mcp["cpuset"]) == sorted(control + [cpu]) and mcp["delegates"]
        assert c.checked("provision", pid=a.pid, cores=1)["delegates"] is True  # kept when not given
        assert "expected true or false" in c.call("provision", pid=a.pid, cores=1, delegates=1)["error"]
    a.kill()
    wait_for(lambda: not status(arbiter)["mcps"])


def test_cooperative_yield_before_deadline(arbiter):
    a = Program(arbiter.state_dir)
    with arbiter.client() as c:
        c.checked("provision", pid=a.pid, cores=1)
        a.ask("request 1")
        a.proc.stdin.write("wait_warning\n")
        a.proc.stdin.flush()
        reply = c.checked("revoke", pid=a.pid, vcore=0, warn_us=2_000_000, wait=True)
    assert reply["revoked"][0]["outcome"] == "yielded" and reply["ns"] < 2_000_000_000
    assert json.loads(a.proc.stdout.readline())["deadline"] > 0
    counters = status(arbiter)["counters"]
    assert counters["yielded_in_time"] == 1 and counters["preempted"] == 0
    a.kill()


def test_uncooperative_vcore_is_moved_off_at_deadline(arbiter):
    a = Program(arbiter.state_dir)
    with arbiter.client() as c:
        c.checked("provision", pid=a.pid, cores=1)
        cpu = a.ask("request 1")["cpu"]
        a.proc.stdin.write("spin_on\n")
        a.proc.stdin.flush()
        time.sleep(0.1)
        reply = c.checked("revoke", pid=a.pid, vcore=0, warn_us=50_000, wait=True)
    assert reply["revoked"][0]["outcome"] == "preempted"
    moved = json.loads(a.proc.stdout.readline())
    assert moved["now_on"] != cpu
    assert cpu not in parse_cpu_list((arbiter.group / f"mcp-{a.pid}" / "cpuset.cpus").read_text())
    assert status(arbiter)["counters"]["preempted"] == 1
    assert ("preempted", cpu) in [tuple(e) for e in a.ask("events 0")["events"]]
    a.kill()


def test_provisioned_core_is_lent_then_taken_back(arbiter):
    owner, borrower = Program(arbiter.state_dir), Program(arbiter.state_dir)
    with arbiter.client() as c:
        c.checked("provision", pid=owner.pid, cores=1)
        c.checked("provision", pid=borrower.pid, cores=0)
    assert borrower.ask("request 1")["granted"] == 1  # the owner's idle core, on loan
    assert status(arbiter)["mcps"][1 if status(arbiter)["mcps"][1]["pid"] == borrower.pid else 0]["on_loan"] == 1
    assert owner.ask("request 1")["granted"] == 0     # pending: the borrower is warned
    wait_for(lambda: any(m["pid"] == owner.pid and m["held"] == 1 for m in status(arbiter)["mcps"]))
    assert ("preempt_pending" in [e[0] for e in borrower.ask("events 0")["events"]])
    owner.kill(), borrower.kill()


def test_attach_waits_for_the_provision_then_gives_up(arbiter):
    # Started before anyone provisions it, a program's attach waits for the provision ...
    late = Program(arbiter.state_dir)
    time.sleep(0.5)
    with arbiter.client() as c:
        c.checked("provision", pid=late.pid, cores=1)
    assert late.ask("request 1")["granted"] == 1
    late.kill()
    # ... and a program nobody provisions is told so once its wait is over.
    env = {**env_for(arbiter.state_dir), "COREPLANE_VCORE_ATTACH_MS": "300"}
    t = time.monotonic()
    never = subprocess.run([sys.executable, "-c", "from coreplane.arbiter.vcore import Vcores; Vcores()"],
                           env=env, capture_output=True, text=True)
    assert never.returncode != 0 and "belongs to no many-core process (waited 300 ms" in never.stderr
    assert time.monotonic() - t >= 0.3
    assert not status(arbiter)["mcps"]


def test_client_killed_mid_revoke_returns_everything(arbiter):
    a = Program(arbiter.state_dir)
    with arbiter.client() as c:
        c.checked("provision", pid=a.pid, cores=1)
        a.ask("request 1")
        c.checked("revoke", pid=a.pid, vcore=0, warn_us=5_000_000)
        assert status(arbiter)["pending_preemptions"] == 1
        a.kill()
        wait_for(lambda: not status(arbiter)["mcps"])
        after = c.checked("status")
    assert after["free"] == len(parse_cpu_list(after["compute_cores"])) and after["pending_preemptions"] == 0
    assert not (arbiter.group / f"mcp-{a.pid}").exists()


def test_arbiter_sigkill_leaves_programs_runnable_and_no_cpuset(arbiter):
    a = Program(arbiter.state_dir)
    with arbiter.client() as c:
        c.checked("provision", pid=a.pid, cores=1)
    a.ask("request 1")
    with arbiter.client() as c:
        c.checked("revoke", pid=a.pid, vcore=0, warn_us=5_000_000)
    arbiter.proc.send_signal(signal.SIGKILL)
    arbiter.proc.wait()
    wait_for(lambda: not arbiter.group.exists())
    assert Path(f"/proc/{a.pid}/cpuset").read_text().strip() == "/"
    assert os.sched_getaffinity(a.pid) == os.sched_getaffinity(0) | set(range(os.cpu_count()))
    assert not arbiter.socket.exists()
    a.kill()


def test_malformed_and_oversized_messages_get_one_line_errors(arbiter):
    with arbiter.client() as c:
        assert "not JSON" in c.send_raw(b"{oops\n")["error"]
        assert "no \"op\"" in c.send_raw(b"[1, 2]\n")["error"]
        assert "unknown op" in c.call("explode")["error"]
        assert "non-negative integer" in c.call("provision", pid="x")["error"]
        assert "belongs to no many-core process" in c.call("request", n=1)["error"]
        assert "not held" in c.call("revoke", pid=os.getpid())["error"] or "no many-core" in c.call("revoke", pid=os.getpid())["error"]
        assert "longer than" in c.send_raw(b"x" * (70 * 1024))["error"]
    assert status(arbiter)["ok"]  # still serving


def test_other_user_may_not_provision_or_act_on_others(arbiter):
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    a = Program(arbiter.state_dir)
    with arbiter.client() as c:
        c.checked("provision", pid=a.pid, cores=1)
    script = ("import json,socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f=s.makefile('rwb');"
              "out=[]\nfor d in sys.argv[2:]:\n f.write(d.encode()+b'\\n'); f.flush(); out.append(json.loads(f.readline()))\n"
              "print(json.dumps(out))")
    requests = [json.dumps({"op": "provision", "pid": a.pid, "cores": 1}), json.dumps({"op": "revoke", "pid": a.pid}),
                json.dumps({"op": "request", "n": 1}), json.dumps({"op": "status"})]
    os.chmod(arbiter.state_dir, 0o755)  # mkdtemp's 0700 would refuse before the arbiter could
    out = json.loads(subprocess.run([*nobody, "/usr/bin/python3", "-c", script, str(arbiter.socket), *requests],
                                    capture_output=True, text=True, check=True).stdout)
    assert "neither root nor trusted" in out[0]["error"] and "neither root nor trusted" in out[1]["error"]
    assert "no many-core process" in out[2]["error"] and out[3]["ok"]
    a.kill()


def test_program_that_never_reads_its_queue(arbiter):
    a = Program(arbiter.state_dir)
    with arbiter.client() as c:
        c.checked("provision", pid=a.pid, cores=1)
    for _ in range(40):  # each round posts granted + released: more than the queue holds
        a.ask("request 1")
        a.ask("yield 0")
    mcp = status(arbiter)["mcps"][0]
    assert mcp["dropped_notifications"] > 0 and status(arbiter)["counters"]["dropped_notifications"] > 0
    events = a.ask("events 0")["events"]
    assert len(events) == 64 and a.ask("request 1")["granted"] == 1
    a.kill()


def test_run_mcp_and_status_cli(arbiter):
    from conftest import run_cli
    proc = run_cli("run", "--mcp", "--provision", "1", "--arbiter-state-dir", str(arbiter.state_dir), "--json", "--",
                   "sh", "-c", "cat /proc/self/cpuset; grep Cpus_allowed_list /proc/self/status", check=True)
    group, allowed = proc.stdout.split("\n")[:2]
    summary = json.loads(proc.stderr.strip().splitlines()[-1])
    assert group.endswith(f"mcp-{summary['config']['mcp']['pid']}")
    cpu = summary["config"]["mcp"]["granted"][0]["cpu"]
    assert cpu >= 1 and parse_cpu_list(allowed.split()[-1]) == [cpu]  # not the control cores
    # Delegating under the runtime: the group keeps the control cores for the delegates, and the
    # runtime pins the program's own thread to the compute cores.
    proc = run_cli("run", "--mcp", "--provision", "1", "--delegate", "all", "--arbiter-state-dir",
                   str(arbiter.state_dir), "--json", "--", "sh", "-c",
                   "cat /sys/fs/cgroup/cpuset$(cat /proc/self/cpuset)/cpuset.cpus; grep Cpus_allowed_list /proc/self/status",
                   check=True)
    cpus, allowed = proc.stdout.split("\n")[:2]
    control = parse_cpu_list(status(arbiter)["control_cores"])
    assert parse_cpu_list(cpus) == sorted(control + [cpu]) and parse_cpu_list(allowed.split()[-1]) == [cpu], proc.stdout
    wait_for(lambda: status(arbiter)["counters"]["exits"] == 2)  # the arbiter reclaims on the exit's pidfd event
    doc = json.loads(run_cli("arbiter", "status", "--state-dir", str(arbiter.state_dir), "--json", check=True).stdout)
    assert doc["counters"]["exits"] == 2 and doc["mcps"] == [] and doc["free"] >= 1
    refused = run_cli("run", "--mcp", "--provision", "99", "--arbiter-state-dir", str(arbiter.state_dir), "--", "true")
    assert refused.returncode != 0 and "refused" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


def test_fig6_encoder_gets_its_core_back_from_the_borrower():
    from coreplane.arbiter import fig6
    with machine_lock():
        doc = fig6.measure(frames=8, fps=15.0, size=(360, 640), repetitions=1, borrowers=("spin",), warn_us=200)
    alone, beside = (next(r for r in doc["runs"] if r["borrower"] == b) for b in (None, "spin"))
    assert len(alone["per_frame_ms"]) == len(beside["per_frame_ms"]) == 8
    # The never-yielding borrower held the idle core between frames (0.27-0.9 of it in 8 frames
    # on a loaded machine) and lost it at each frame (the encoder waited for the deadline).
    assert doc["configs"]["spin"]["borrower_held_share"] > 0.1
    assert 0.2 <= beside["get_cores_ms"]["p50"] < 50


def test_adaptive_pool_runs_on_its_vcores_while_they_come_and_go():
    from coreplane.arbiter import pool
    with machine_lock():
        doc = pool.measure(tasks=60, on_ms=20, off_ms=20, repetitions=1)
    runs = {(r["mode"], r["threads"]): r for r in doc["runs"]}
    # Every task ran; the adaptive pool's on the vcores it was granted (a task cut by a
    # preemption at its deadline ends on the control core), the fixed program's anywhere.
    assert all(r["tasks"] == 60 for r in runs.values())
    assert runs[("adaptive", 0)]["share_on_control_cores"] < 0.5


def test_gang_stop_keeps_fixed_programs_off_the_control_cores():
    """Under the gang stop a fixed program is frozen while the owner holds the core, so its tasks
    end on the compute core (without it, about half end on the control core)."""
    from coreplane.arbiter import pool
    with machine_lock():
        doc = pool.measure(tasks=60, on_ms=20, off_ms=20, repetitions=1, gang_stop=True)
    assert doc["gang_stop"] and all(r["tasks"] == 60 for r in doc["runs"])
    fixed = [r for r in doc["runs"] if r["mode"] == "fixed"]
    assert fixed and all(r["share_on_control_cores"] <= 0.05 for r in fixed), fixed


def test_daemon_flag_leaves_it_running_and_it_answers(tmp_path):
    """`coreplane arbiter --daemon` (the one Daemon class, detached): it outlives the command,
    answers `arbiter status`, stops on SIGTERM and leaves no group; a second one on the same
    socket fails with one line."""
    state = tmp_path / "state"
    with machine_lock():
        doc = cli_json("arbiter", "--state-dir", str(state), "--daemon")
        try:
            assert Path(doc["socket"]) == state / "arbiter.sock"
            assert cli_json("arbiter", "status", "--state-dir", str(state))["mcps"] == []
            second = run_cli("arbiter", "--state-dir", str(state), "--daemon")
            assert second.returncode != 0 and len(second.stderr.strip().splitlines()) == 1, second.stderr
        finally:
            os.kill(doc["pid"], signal.SIGTERM)
        wait_for(lambda: not Path(f"/proc/{doc['pid']}").exists() or
                 Path(f"/proc/{doc['pid']}/stat").read_text().split()[2] == "Z")
        assert not (CPUSET_ROOT / "coreplane-arbiter").exists()


def test_empty_cores_moves_everyone_but_the_mcps(arbiter):
    """fig6/pool --empty-cores: a cell over the compute cores moves every other process to the
    control cores, while the arbiter's MCPs keep the cores they hold; all given back after."""
    from coreplane.arbiter.cores import empty_compute_cores
    a = Program(arbiter.state_dir)
    with arbiter.client() as c:
        c.checked("provision", pid=a.pid, cores=1)
    cpu = a.ask("request 1")["cpu"]
    with empty_compute_cores(status(arbiter)) as emptied:
        assert cpu in emptied["compute"] and emptied["processes_moved"] > 0
        assert a.ask("request 1")["granted"] == 0 and a.ask("cpuset")["cpuset"].endswith(f"mcp-{a.pid}")
        assert not os.sched_getaffinity(0) & set(emptied["compute"])  # this test's process was moved
        allowed = next(l for l in Path(f"/proc/{a.pid}/status").read_text().splitlines() if l.startswith("Cpus_allowed_list"))
        assert parse_cpu_list(allowed.split(":")[1].strip()) == [cpu]  # the MCP was not
    assert cpu in os.sched_getaffinity(0)
    a.kill()
    wait_for(lambda: not status(arbiter)["mcps"])


def cpu_ticks(pid: int) -> int:
    """User + system CPU time of `pid` so far, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


def mcp_entry(daemon, pid: int) -> dict:
    return next(m for m in status(daemon)["mcps"] if m["pid"] == pid)


def test_gang_stop_freezes_an_mcp_holding_no_core_until_granted(gang_arbiter):
    """--gang-stop: a fixed program (never yields) that loses its last core at the deadline is
    frozen whole instead of computing on the control core, gets the core back (thawed) once its
    owner yields it, and is thawed by the watchdog when the arbiter is SIGKILLed while it is frozen."""
    freezer_v1 = Path("/sys/fs/cgroup/freezer") / gang_arbiter.name
    owner = Program(gang_arbiter.state_dir)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        with gang_arbiter.client() as c:
            assert c.checked("provision", pid=owner.pid, cores=1, gang_stop=False)["gang_stop"] is False
            assert c.checked("provision", pid=spinner.pid, cores=0)["gang_stop"] is True   # the arbiter's default
            assert "not changed" in c.call("provision", pid=spinner.pid, cores=0, gang_stop=False)["error"]
        # Holding nothing, it was given the idle core at once rather than stopped.
        assert mcp_entry(gang_arbiter, spinner.pid)["held"] == 1 and not mcp_entry(gang_arbiter, spinner.pid)["stopped"]
        assert owner.ask("request 1")["granted"] == 0          # pending: the spinner is warned and ignores it
        wait_for(lambda: mcp_entry(gang_arbiter, owner.pid)["held"] == 1)
        frozen = mcp_entry(gang_arbiter, spinner.pid)
        assert frozen["held"] == 0 and frozen["stopped"]
        if freezer_v1.exists():
            wait_for(lambda: (freezer_v1 / f"mcp-{spinner.pid}" / "freezer.state").read_text().strip() == "FROZEN")
        else:
            wait_for(lambda: "frozen 1" in (gang_arbiter.group / f"mcp-{spinner.pid}" / "cgroup.events").read_text())
        ticks = cpu_ticks(spinner.pid)
        time.sleep(0.3)   # a window to observe, not a synchronisation: frozen, it gets no CPU time at all
        assert cpu_ticks(spinner.pid) == ticks
        owner.ask("yield 0")                                   # the core comes free: the spinner gets it
        wait_for(lambda: mcp_entry(gang_arbiter, spinner.pid)["held"] == 1 and not mcp_entry(gang_arbiter, spinner.pid)["stopped"])
        wait_for(lambda: cpu_ticks(spinner.pid) > ticks, seconds=20)
        counters = status(gang_arbiter)["counters"]
        assert (counters["gang_stops"], counters["gang_resumes"]) == (1, 1)
        # Frozen again, then the arbiter dies: its watchdog thaws the spinner and removes the groups.
        assert owner.ask("request 1")["granted"] == 0
        wait_for(lambda: mcp_entry(gang_arbiter, spinner.pid)["stopped"])
        gang_arbiter.proc.send_signal(signal.SIGKILL)
        gang_arbiter.proc.wait()
        wait_for(lambda: not gang_arbiter.group.exists() and not freezer_v1.exists())
        ticks = cpu_ticks(spinner.pid)
        wait_for(lambda: cpu_ticks(spinner.pid) > ticks, seconds=20)
    finally:
        spinner.kill()
        spinner.wait()
        owner.kill()


def test_gang_stop_is_refused_by_an_arbiter_without_it(arbiter):
    with arbiter.client() as c:
        refused = c.call("provision", pid=os.getpid(), cores=0, gang_stop=True)
    assert not refused["ok"] and "without --gang-stop" in refused["error"]
    assert not status(arbiter)["mcps"]
