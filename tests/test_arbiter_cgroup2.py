"""The arbiter on cgroup v2, live: this machine binds the cpuset controller to its cgroup v1
hierarchy, so the check boots a guest (QEMU, TCG, 2 CPUs) of Debian's kernel with an initramfs
holding busybox, coreplane-arbiter, libcoreplane-vcore and tests/programs/arbiter_cgroup2_check.c
(src/coreplane/arbiter/guest.py builds and boots it),
cgroup2 mounted alone: a C client of the vcore library is granted a vcore, preempted at its
deadline and reclaimed; the arbiter stopped leaves no group and the controller off again; with
--gang-stop, a child holding no core is frozen through cgroup.freeze and thawed when granted one; an
arbiter killed mid-grant is cleaned up after by its watchdog. And in a guest of 4 vCPUs, the rows of
ROS Tables 1-2 that need several compute cores. Needs qemu-system-x86_64 and a kernel (`make
arbiter-cgroup2` fetches both; else skipped)."""

import pytest

from coreplane.arbiter import guest
from coreplane.core.cpulist import parse_cpu_list

REPO = guest.REPO_ROOT

pytestmark = pytest.mark.skipif(guest.missing() is not None, reason=f"{guest.missing()} (make arbiter-cgroup2)")

# The guest's /init: every line the test looks for starts with CHECK.
INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin LD_LIBRARY_PATH=/lib COREPLANE_ARBITER_SOCKET=/run/arbiter.sock
mount -t devtmpfs dev /dev; mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t cgroup2 none /sys/fs/cgroup
echo "CHECK controllers $(cat /sys/fs/cgroup/cgroup.controllers)"
start() { /bin/coreplane-arbiter --state-dir /run --warn-us 20000 "$@" 2>/arbiter.log & ARB=$!
          for i in $(seq 100); do [ -S /run/arbiter.sock ] && break; sleep 0.05; done; }
start
/bin/check
echo "CHECK check exit $?"
kill -TERM $ARB; wait $ARB
echo "CHECK after stop: group $( [ -e /sys/fs/cgroup/coreplane-arbiter ] && echo left || echo gone)," \
     "subtree_control '$(cat /sys/fs/cgroup/cgroup.subtree_control)'"
start --gang-stop
/bin/check gang
echo "CHECK gang exit $?"
kill -TERM $ARB; wait $ARB
start
/bin/check hold > /hold.log & CHECKER=$!
for i in $(seq 100); do grep -q HOLDING /hold.log && break; sleep 0.05; done
CHILD=$(sed -n 's/CHECK HOLDING //p' /hold.log)
echo "CHECK holding child $CHILD in $(cat /proc/$CHILD/cgroup)"
kill -KILL $ARB
for i in $(seq 100); do [ -e /sys/fs/cgroup/coreplane-arbiter ] || break; sleep 0.05; done
echo "CHECK after SIGKILL: group $( [ -e /sys/fs/cgroup/coreplane-arbiter ] && echo left || echo gone)," \
     "child in $(cat /proc/$CHILD/cgroup), allowed $(grep Cpus_allowed_list /proc/$CHILD/status | cut -f2)"
echo "CHECK arbiter said: $(head -1 /arbiter.log)"
poweroff -f
"""


def test_arbiter_on_cgroup2_in_a_guest(tmp_path):
    image = guest.initramfs(tmp_path, INIT, {"check": REPO / "tests/programs/arbiter_cgroup2_check.c"})
    lines = guest.boot(image, cpus=2)
    text = "\n".join(lines)
    assert "cpuset" in lines[0].split(), text
    assert "CHECK OK" in lines and "CHECK check exit 0" in lines, text
    assert any(line.startswith("CHECK preempted at the deadline") for line in lines), text
    assert "CHECK after stop: group gone, subtree_control ''" in lines, text
    assert "CHECK gang exit 0" in lines and any(line.startswith("CHECK gang: the child, preempted") for line in lines), text
    holding = next(line for line in lines if line.startswith("CHECK holding child"))
    assert holding.endswith("/coreplane-arbiter/mcp-" + holding.split()[3]), text
    after_kill = next(line for line in lines if line.startswith("CHECK after SIGKILL"))
    assert "group gone" in after_kill and "child in 0::/," in after_kill and after_kill.endswith("allowed 0-1"), text
    assert "cgroup V2" in lines[-1], text


def test_max_rows_with_three_compute_cores_in_a_guest():
    """Tables 1-2's max rows in a 4-vCPU guest: every row measured over all 3 compute cores, and
    preempt-and-get max finished (the asker held all 3, taken from a borrower with no warning)."""
    doc = guest.max_tables(cpus=4, trials=5)
    assert set(doc["ops"]) == {"get_one_cold", "preempt_one", "get_max_cold", "preempt_max", "preempt_and_get_max"}
    assert all(s["cores"] == 3 and s["n"] == 5 and 0 < s["min_us"] <= s["p50_us"] <= s["p99_us"]
               for s in doc["ops"].values()), doc
    assert "not comparable" in doc["label"] and set(doc["shape"]) and all(v > 0 for v in doc["shape"].values())


# The guest's /init for the runtime's following with 3 compute cores (a 5 s warning).
FOLLOW_INIT = guest.init_script(5_000_000, "timeout 150 /bin/check\necho \"CHECK check exit $?\"\n")


def test_runtime_follows_three_compute_cores_in_a_guest(tmp_path):
    """A delegating program launched on one core of its MCP: its runtime asks for the 2 free cores,
    gives 2 back at once to a provisioned MCP (yielded, not preempted at the 5 s deadline) and asks
    again when that one dies, with no delegated call wrong (tests/programs/arbiter_follow_guest.c).
    The guest's kernel (6.1) resets every thread's CPUs to the whole cpuset at each cpuset write
    (6.2 on keeps the requested mask), so there the worker may use the control core too."""
    programs = {"check": REPO / "tests/programs/arbiter_follow_guest.c",
                "arbiter_follow": REPO / "tests/programs/arbiter_follow.c"}
    image = guest.initramfs(tmp_path, FOLLOW_INIT, programs, extra=("coreplane-exec", "coreplane-rt"))
    lines = guest.boot(image, cpus=4, timeout=240)
    text = "\n".join(lines)
    steps = {line.split(":")[0][len("CHECK "):]: line for line in lines if ": held" in line}
    for step, held in (("grown", 3), ("shrunk", 1), ("regrown", 3)):
        assert f"held {held}," in steps.get(step, ""), text
    for step in ("grown", "regrown"):
        assert {1, 2, 3} <= set(parse_cpu_list(steps[step].split()[-1])), text
    assert "CHECK handed over: yielded 2, preempted 0" in lines, text
    calls = next(line for line in lines if line.startswith("CHECK calls")).split()
    assert int(calls[2]) > 0 and calls[4] == "0", text
    assert "CHECK check exit 0" in lines, text
