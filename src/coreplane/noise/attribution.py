"""Where a CPU's time goes while the detector spins on it: a private tracefs instance records
IRQs, IPI/timer vectors, softirqs, context switches and workqueue items on that CPU only, and
every microsecond is charged to whatever ran on top (hard IRQ over softirq over thread)."""

import os
import re
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from coreplane.core.errors import CoreplaneError
from coreplane.noise.tracefs import tracefs_dir

# Entry/exit pairs of interrupt context (irq_vectors are the x86 APIC vectors: timer, IPIs).
VECTORS = ("local_timer", "call_function", "call_function_single", "reschedule", "irq_work", "x86_platform_ipi")
EVENTS = (["irq/irq_handler_entry", "irq/irq_handler_exit", "irq/softirq_entry", "irq/softirq_exit",
           "sched/sched_switch", "workqueue/workqueue_execute_start", "workqueue/workqueue_execute_end"]
          + [f"irq_vectors/{v}_{end}" for v in VECTORS for end in ("entry", "exit")])
LINE_RE = re.compile(r"^\s*(?P<task>.*?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+(?P<ts>\d+\.\d+):\s+"
                     r"(?P<event>\w+):\s*(?P<args>.*)$")
KWORKER_RE = re.compile(r"^(kworker/\S*?):?\d+(H?)$")
INSTANCE_PREFIX = "coreplane-"   # instances/coreplane-PID-NS, PID the tracing process
# Per-CPU ring buffer of the instance: a loaded CPU writes ~100 bytes per event, ~30k events/s.
BUFFER_KB = 16384


def _source_name(event: str, args: str) -> tuple[str, str] | None:
    """(kind, source) for an entry event, or None for events that do not open a context."""
    if event == "irq_handler_entry":
        m = re.search(r"irq=(\d+) name=(\S+)", args)
        return "irq", f"IRQ {m.group(1)} {m.group(2)}" if m else args
    if event == "softirq_entry":
        m = re.search(r"action=(\w+)", args)
        return "softirq", m.group(1) if m else args
    if event.endswith("_entry") and event[:-6] in VECTORS:
        return "vector", event[:-6]
    if event == "workqueue_execute_start":
        m = re.search(r"function (\S+)", args)
        return "work", m.group(1) if m else args
    return None


def _closes(event: str) -> str | None:
    """The kind of context an exit event closes."""
    if event == "irq_handler_exit":
        return "irq"
    if event == "softirq_exit":
        return "softirq"
    if event.endswith("_exit") and event[:-5] in VECTORS:
        return "vector"
    if event == "workqueue_execute_end":
        return "work"
    return None


def thread_name(comm: str) -> str:
    """A task's name with per-CPU worker numbers folded: kworker/1:2 and kworker/1:0 are one."""
    m = KWORKER_RE.match(comm)
    return f"{m.group(1)}:N{m.group(2)}" if m else comm


def _events(text: str, cpu: int):
    """(ns, comm and pid of the task the line was recorded in, event, args) of `cpu`'s lines."""
    for line in text.splitlines():
        m = LINE_RE.match(line)
        if m and int(m["cpu"]) == cpu:
            yield int(round(float(m["ts"]) * 1e9)), m["task"], int(m["pid"]), m["event"], m["args"]


def _next_task(args: str) -> tuple[str, int] | None:
    nxt = re.search(r"next_comm=(.*?) next_pid=(\d+)", args)
    return (nxt.group(1), int(nxt.group(2))) if nxt else None


def attribute(text: str, cpu: int, own_comms: set[str]) -> dict:
    """Charges `cpu`'s time to what ran: `own_comms` (the detector) is useful time; every other
    context is noise when it ran while an own task was runnable (switched out preempted, state
    R) and is left out when the detector had blocked or exited (between its phases, before and
    after it), as is everything before the first switch to an own task. Each context's time is
    exclusive of what interrupted it (a softirq's excludes the hard IRQs inside it, and so on)."""
    totals: dict[tuple[str, str], list[int]] = {}  # (kind, source) -> [count, total_ns, max_ns]
    stack: list[list] = []    # [kind, source, started_ns, child_ns, counted] of open IRQ/work contexts
    task: list | None = None  # the same for the running thread, and its pid
    waiting: set[int] = set()  # own tasks runnable but not running
    interruptions: list[tuple[int, str]] = []  # (ns, source) of what interrupted a running own task
    own_since: dict[int, int] = {}  # own pid -> its first switch-in
    own_until: dict[int, int] = {}  # own pid -> its last switch-out

    def close(ctx: list, now: int, parent: list | None) -> None:
        spent = now - ctx[2]
        if parent is not None:
            parent[3] += spent
        if not ctx[4]:
            return
        t = totals.setdefault((ctx[0], ctx[1]), [0, 0, 0])
        t[0] += 1
        t[1] += spent - ctx[3]
        t[2] = max(t[2], spent)

    def running(comm: str, pid: int, now: int) -> list:
        kind = "own" if comm in own_comms else "idle" if pid == 0 else "thread"
        waiting.discard(pid)
        return [kind, comm if kind == "own" else thread_name(comm), now, 0, kind == "own" or bool(waiting), pid]

    now = last = 0
    for now, comm_now, pid_now, event, args in _events(text, cpu):
        if task is not None and pid_now != task[5]:
            # The switch to the task this line was recorded in is missing from the trace (seen
            # with the threads of init in a Firecracker guest): what ran between the last line
            # and this one is unknown and counts for nobody; the recorder's task runs from here.
            while stack:
                close(stack.pop(), last, stack[-1] if stack else task)
            close(task, last, None)
            unseen = totals.setdefault(("unseen", "switch not traced"), [0, 0, 0])
            unseen[0] += 1
            unseen[2] = max(unseen[2], now - last)
            task = running(comm_now, pid_now, now)
        last = now
        if event == "sched_switch":
            if not (nxt := _next_task(args)):
                continue
            if task is not None:
                while stack:  # work items left open across a switch belonged to the old task
                    close(stack.pop(), now, stack[-1] if stack else task)
                close(task, now, None)
                if task[0] == "own" and (prev := re.search(r"prev_pid=(\d+) \S+ prev_state=(\S+)", args)):
                    (waiting.add if prev.group(2).startswith("R") else waiting.discard)(int(prev.group(1)))
            was_own = task is not None and task[0] == "own"
            if was_own:
                own_until[task[5]] = now
            task = running(*nxt, now)
            if task[0] == "own":
                own_since.setdefault(task[5], now)
            if was_own and task[0] == "thread":
                interruptions.append((now, f"thread {task[1]}"))
        elif task is not None:
            if opened := _source_name(event, args):
                if task[0] == "own" and not stack:
                    interruptions.append((now, f"{opened[0]} {opened[1]}"))
                stack.append([*opened, now, 0, task[4]])
            elif (kind := _closes(event)) and stack and stack[-1][0] == kind:
                close(stack.pop(), now, stack[-1] if stack else task)
    while stack:
        close(stack.pop(), now, stack[-1] if stack else task)
    if task is not None:
        close(task, now, None)
    own = sum(v[1] for (k, _), v in totals.items() if k == "own")
    sources = sorted(({"kind": k, "source": s, "count": v[0], "total_ns": v[1], "max_ns": v[2]}
                      for (k, s), v in totals.items() if k != "own"), key=lambda s: -s["total_ns"])
    counted = own + sum(s["total_ns"] for s in sources)
    return {"cpu": cpu, "counted_ns": counted, "own_ns": own,
            "lost_pct": 100 * (1 - own / counted) if counted else 0.0, "sources": sources,
            "interruptions": interruptions, "own_spans_ns": {p: (t, own_until.get(p, now)) for p, t in own_since.items()}}


def _offset(gap_starts: np.ndarray, marks: np.ndarray, low: float, high: float, bin_ns: int = 4_000) -> float | None:
    """The trace time of the detector's time zero, searched in [low, high]: the most common
    difference between a traced interruption and a gap start (a gap opens just before the
    entry of what interrupted)."""
    diffs = (marks[None, :] - gap_starts[:, None]).ravel()
    diffs = diffs[(diffs >= low) & (diffs <= high)]
    if not len(diffs):
        return None
    bins = np.floor(diffs / bin_ns).astype(np.int64)
    values, counts = np.unique(bins, return_counts=True)
    best = values[np.argmax(counts)]
    if counts.max() < 3:
        return None
    return float(np.median(diffs[np.abs(bins - best) <= 1]))


# A gap holding several traced contexts is named by the one that takes longest as a rule: a
# thread switched in (a tick that preempts the detector for another task is the thread's gap),
# then a device IRQ (its softirq follows it), a softirq, a work item, an IPI, the tick.
RANK = ("thread", "irq", "softirq", "work", "vector")


def _rank(label: str) -> int:
    kind = label.split()[0]
    return RANK.index(kind) if label != "vector local_timer" and kind in RANK else len(RANK)


def classify_gaps(timeline: list, runtime_ns: float, interruptions: list[tuple[int, str]],
                  own_spans: list[tuple[int, int]], slack_ns: int = 10_000) -> dict:
    """Each gap the detector saw (timeline: [start_ns from its own zero, length_ns] pairs, over
    `runtime_ns` by its own clock), put on the trace's clock and named by what the trace shows
    interrupting the detector inside it (see RANK), or "nothing in the guest" when the trace
    shows nothing there: the vCPU itself was stopped (the hypervisor ran something else, or
    handled an exit). `own_spans` are the own threads' first switch-in and last switch-out in
    the trace; the detector's is the one as long as its run: its loop lies within, which fixes the scale between the two clocks (the
    detector's TSC rate was measured over 100 ms, off by up to a percent on a busy machine)
    and bounds the offset."""
    gaps = np.asarray(timeline, dtype=float).reshape(-1, 2)
    marks = np.asarray([t for t, _ in interruptions], dtype=float)
    if not len(gaps) or not len(marks) or not own_spans or runtime_ns <= 0:
        return {"aligned": False, "reason": "no gaps or no traced interruptions", "classes": []}
    begin, end = min(own_spans, key=lambda span: abs(span[1] - span[0] - runtime_ns))
    scale = min(1.01, max(0.99, (end - begin) / runtime_ns))
    scaled = gaps[:, 0] * scale
    # The offset of each tenth of the gaps, each searched near the one before (the first near
    # the detector's first switch-in): what is left of the scale's error is tracked, not fitted.
    chunks = np.array_split(np.arange(len(gaps)), min(10, len(gaps)))
    starts = np.empty(len(gaps))
    offset, low, high = None, begin - 1e6, begin + 2e7
    for idx in chunks:
        found = _offset(scaled[idx], marks, low, high)
        if found is None and offset is None:
            return {"aligned": False, "reason": "no common offset between gap starts and traced interruptions",
                    "classes": []}
        offset = found if found is not None else offset
        starts[idx] = scaled[idx] + offset
        low, high = offset - 3e5, offset + 3e5
    labels = [label for _, label in interruptions]
    classes: dict[str, list[float]] = {}
    for start, length in zip(starts, gaps[:, 1]):
        lo = int(np.searchsorted(marks, start - slack_ns))
        hi = int(np.searchsorted(marks, start + length + slack_ns, side="right"))
        label = min(labels[lo:hi], key=_rank, default="nothing in the guest")
        c = classes.setdefault(label, [0, 0.0, 0.0])
        c[0] += 1
        c[1] += float(length)
        c[2] = max(c[2], float(length))
    out = [{"source": k, "gaps": v[0], "lost_ns": v[1], "max_ns": v[2]} for k, v in classes.items()]
    return {"aligned": True, "clock_ratio": float(scale), "classes": sorted(out, key=lambda c: -c["lost_ns"])}


def by_kind(sources: list[dict]) -> dict[str, int]:
    """Total ns per kind (irq, vector, softirq, thread, work, idle)."""
    out: dict[str, int] = {}
    for s in sources:
        out[s["kind"]] = out.get(s["kind"], 0) + s["total_ns"]
    return out


def steal_ns(cpu: int) -> int:
    """Time the hypervisor ran something else instead of this vCPU (/proc/stat, in ns)."""
    for line in Path("/proc/stat").read_text().splitlines():
        fields = line.split()
        if fields[0] == f"cpu{cpu}":
            return int(fields[8]) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    raise CoreplaneError(f"/proc/stat: no line for cpu{cpu}")


class Recording:
    """What a trace of one CPU recorded: its text, the steal time meanwhile, and lost events."""

    def __init__(self, cpu: int):
        self.cpu, self.text, self.steal_ns, self.overrun = cpu, "", 0, 0

    def attribute(self, own_comms: set[str]) -> dict:
        doc = attribute(self.text, self.cpu, own_comms)
        doc.update(steal_ns=self.steal_ns, events_lost=self.overrun, clock="mono, printed in us")
        return doc


def _remove_stale(tracefs: Path) -> None:
    """Removes the instances of traces whose process died before its own clean-up (a SIGKILL, a
    sweep's time-out): left alone, each would record its CPU for good, a cost to everyone."""
    for inst in (tracefs / "instances").glob(f"{INSTANCE_PREFIX}*"):
        pid = inst.name[len(INSTANCE_PREFIX):].split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            try:
                (inst / "tracing_on").write_text("0")
                inst.rmdir()
            except OSError:
                continue  # another process is removing it, or still reads it


@contextmanager
def traced(cpu: int):
    """Records CPU `cpu` in a tracefs instance of its own (the global trace and other tracers are
    untouched), removed on exit; yields a Recording filled in when the block ends."""
    tracefs, how = tracefs_dir()
    if tracefs is None:
        raise CoreplaneError(f"tracing CPU {cpu}: {how}")
    _remove_stale(tracefs)
    inst = tracefs / "instances" / f"{INSTANCE_PREFIX}{os.getpid()}-{time.monotonic_ns()}"
    try:
        inst.mkdir()
    except OSError as exc:
        raise CoreplaneError(f"{inst}: cannot create a trace instance: {exc.strerror}") from None
    rec = Recording(cpu)
    try:
        (inst / "tracing_on").write_text("0")
        (inst / "trace_clock").write_text("mono")
        (inst / "buffer_size_kb").write_text(str(BUFFER_KB))
        (inst / "tracing_cpumask").write_text(f"{1 << cpu:x}")
        missing = [e for e in EVENTS if not (inst / "events" / e / "enable").exists()]
        if missing:
            raise CoreplaneError(f"{tracefs}: this kernel has no trace event {', '.join(missing)}")
        for e in EVENTS:
            (inst / "events" / e / "enable").write_text("1")
        steal0 = steal_ns(cpu)
        (inst / "tracing_on").write_text("1")
        yield rec
        (inst / "tracing_on").write_text("0")
        rec.steal_ns = steal_ns(cpu) - steal0
        rec.text = (inst / "trace").read_text()
        stats = (inst / "per_cpu" / f"cpu{cpu}" / "stats").read_text()
        rec.overrun = int(re.search(r"overrun:\s*(\d+)", stats).group(1))
    finally:
        (inst / "tracing_on").write_text("0")
        for e in EVENTS:
            (inst / "events" / e / "enable").write_text("0")
        inst.rmdir()
