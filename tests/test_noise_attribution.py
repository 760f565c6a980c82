"""Where a compute core's time goes (coreplane.noise.attribution, issue 14 item 5): charging a
trace of one CPU to what ran, and naming the detector's gaps by what interrupted it, on trace
text in the layout tracefs prints; and one live trace of this machine when tracefs allows."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from coreplane.noise import attribution
from coreplane.noise.trials import cause


def line(ts_us: int, comm: str, pid: int, event: str, args: str, cpu: int = 1) -> str:
    return f"{comm:>16}-{pid:<7} [{cpu:03d}] d.h1. {ts_us // 1_000_000}.{ts_us % 1_000_000:06d}: {event}: {args}"


def switch(ts_us: int, prev: tuple[str, int], state: str, nxt: tuple[str, int]) -> str:
    return line(ts_us, *prev, "sched_switch", f"prev_comm={prev[0]} prev_pid={prev[1]} prev_prio=120 "
                f"prev_state={state} ==> next_comm={nxt[0]} next_pid={nxt[1]} next_prio=120")


DET, CC, IDLE = ("coreplane-bench", 100), ("cc1", 200), ("swapper/1", 0)
TRACE = "\n".join([
    "# tracer: nop",
    line(999_000, "python", 50, "sched_switch", "prev_comm=python prev_pid=50 prev_prio=120 prev_state=S ==> "
         "next_comm=coreplane-bench next_pid=100 next_prio=120"),
    # A tick, then a device IRQ with its block softirq, in the detector.
    line(1_000_100, *DET, "local_timer_entry", "vector=236"),
    line(1_000_110, *DET, "local_timer_exit", "vector=236"),
    line(1_000_500, *DET, "irq_handler_entry", "irq=36 name=virtio1-req.0"),
    line(1_000_503, *DET, "irq_handler_exit", "irq=36 ret=handled"),
    line(1_000_504, *DET, "softirq_entry", "vec=4 [action=BLOCK]"),
    # A hard IRQ inside the softirq: its 2 us are not the softirq's.
    line(1_000_510, *DET, "irq_handler_entry", "irq=36 name=virtio1-req.0"),
    line(1_000_512, *DET, "irq_handler_exit", "irq=36 ret=handled"),
    line(1_000_524, *DET, "softirq_exit", "vec=4 [action=BLOCK]"),
    # Preempted by a compiler for 1 ms: noise.
    switch(1_002_000, DET, "R", CC),
    switch(1_003_000, CC, "S", DET),
    # The detector blocks (between its phases): what runs then is not its noise.
    switch(1_004_000, DET, "S", CC),
    switch(1_010_000, CC, "S", DET),
    # The switch back from a thread of init is missing (seen in Firecracker guests).
    switch(1_011_000, DET, "R", ("tokio-rt-worker", 69)),
    line(1_011_400, *DET, "local_timer_entry", "vector=236"),
    line(1_011_408, *DET, "local_timer_exit", "vector=236"),
    switch(1_020_000, DET, "X", IDLE),
    line(1_020_500, "cc1", 200, "local_timer_entry", "vector=236", cpu=0),  # another CPU: ignored
])


def test_time_is_charged_to_what_ran_exclusive_of_what_interrupted_it():
    doc = attribution.attribute(TRACE, 1, {"coreplane-bench"})
    got = {(s["kind"], s["source"]): s for s in doc["sources"]}
    assert got[("vector", "local_timer")]["total_ns"] == 18_000 and got[("vector", "local_timer")]["count"] == 2
    assert got[("irq", "IRQ 36 virtio1-req.0")]["total_ns"] == 5_000
    assert got[("softirq", "BLOCK")]["total_ns"] == 18_000 and got[("softirq", "BLOCK")]["max_ns"] == 20_000
    # Only the millisecond the detector was runnable counts for the compiler; not the 6 ms it slept.
    assert got[("thread", "cc1")]["total_ns"] == 1_000_000 and got[("thread", "cc1")]["count"] == 1
    # The thread whose switch back is missing gets the time up to its switch-in only.
    assert got[("thread", "tokio-rt-worker")]["total_ns"] == 0 and got[("unseen", "switch not traced")]["count"] == 1
    assert doc["own_spans_ns"][100] == (999_000_000, 1_020_000_000)
    labels = [label for _, label in doc["interruptions"]]
    assert labels[:4] == ["vector local_timer", "irq IRQ 36 virtio1-req.0", "softirq BLOCK", "thread cc1"]


def test_kworker_numbers_fold_and_causes_group_sources():
    assert attribution.thread_name("kworker/1:2") == attribution.thread_name("kworker/1:0") == "kworker/1:N"
    assert attribution.thread_name("kworker/1:1H") == "kworker/1:NH"
    assert attribution.thread_name("cc1") == "cc1"
    assert [cause(s) for s in ("vector local_timer", "softirq RCU", "irq IRQ 36 virtio1-req.0", "softirq BLOCK",
                               "work blk_mq_run_work_fn", "thread cc1", "vector reschedule", "work vmstat_update",
                               "nothing in the guest")] == \
        ["tick", "tick", "device_io", "device_io", "device_io", "thread", "ipi", "work", "hypervisor"]


def test_gaps_are_put_on_the_trace_clock_and_named():
    # Interruptions at irregular times over 1 s of trace time; the detector's zero is 40 us after
    # its switch-in and its clock runs 0.2 % slow (a TSC rate measured badly under load).
    begin, zero, rate = 5_000_000_000, 5_000_040_000, 0.998
    marks = [begin + 40_000 + int(t) for t in range(1_000_000, 999_000_000, 3_999_000)]
    interruptions = [(t, "vector local_timer" if i % 3 else "irq IRQ 36 virtio1-req.0") for i, t in enumerate(marks)]
    timeline = [[(t - zero) * rate - 1_000, 12_000] for t in marks]
    timeline += [[(t - zero) * rate + 1_500_000, 60_000] for t in marks[::10]]  # nothing traced there
    timeline.sort()
    doc = attribution.classify_gaps(timeline, 1e9 * rate, interruptions, [(begin - 10**8, begin + 2 * 10**9),
                                                                           (begin, begin + 10**9)])
    assert doc["aligned"], doc
    got = {c["source"]: c["gaps"] for c in doc["classes"]}
    assert got == {"vector local_timer": len(marks) - len(marks[::3]), "irq IRQ 36 virtio1-req.0": len(marks[::3]),
                   "nothing in the guest": len(marks[::10])}


def test_gaps_with_nothing_to_align_say_so():
    doc = attribution.classify_gaps([[1000, 6000]], 1e9, [], [(0, 10**9)])
    assert not doc["aligned"] and doc["reason"]


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.isdir("/sys/kernel/tracing/instances"),
                    reason="needs root and tracefs instances")
def test_a_live_trace_of_this_cpu_is_charged_and_leaves_no_instance():
    cpu = sorted(os.sched_getaffinity(0))[0]
    # The instance of a tracer that died before its clean-up (here: a pid that has exited) goes.
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = Path(f"/sys/kernel/tracing/instances/{attribution.INSTANCE_PREFIX}{dead.pid}-1")
    stale.mkdir()
    before, allowed = set(os.listdir("/sys/kernel/tracing/instances")) - {stale.name}, os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        with attribution.traced(cpu) as recording:
            time.sleep(0.001)  # not a wait for anything: it makes the trace see this task switched in
            x = 0
            for i in range(2_000_000):  # the detector: this process, on the traced CPU
                x += i
    finally:
        os.sched_setaffinity(0, allowed)
    assert set(os.listdir("/sys/kernel/tracing/instances")) == before
    comm = open("/proc/self/comm").read().strip()
    doc = recording.attribute({comm})
    assert recording.text and doc["events_lost"] == 0 and doc["steal_ns"] >= 0
    # The spin was seen running, and everything charged is exclusive (no double count).
    assert doc["own_ns"] > 0
    assert sum(s["total_ns"] for s in doc["sources"]) + doc["own_ns"] == doc["counted_ns"]
