"""Layer 1: threads and processes, with messages (pipes, sockets, files passed on) and futex wake-ups from a syscall trace.

The trace source is pluggable: a source turns a file into SyscallEvent objects. `strace` is the
one that exists today (`strace -f -ttt -yy`); the runtime's own trace can be added to SOURCES.
"""

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from coreplane.core.errors import CoreplaneError
from coreplane.graph.model import edge_frame, node_frame

# What strace must record for this layer (and nothing else: each traced call costs ~2 context switches).
STRACE_CALLS = ("read,write,readv,writev,pread64,pwrite64,sendto,recvfrom,sendmsg,recvmsg,"
                "futex,clone,clone3,fork,vfork,execve")
FUTEX_WAKE_BYTES = 64  # a wake-up hands one cache line (the futex word) from waker to wakee
READS = {"read", "readv", "recvfrom", "recvmsg", "pread64"}
WRITES = {"write", "writev", "sendto", "sendmsg", "pwrite64"}


@dataclass
class SyscallEvent:
    """One completed system call of one thread, source-independent."""

    ts: float  # seconds (any epoch; only order and differences matter)
    tid: int
    name: str
    args: str
    ret: int | None  # None when the call never returned (exit, killed)
    start: float | None = None  # when an interrupted call started (blocking calls), else ts


_LINE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(.*)$")
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")
_CALL = re.compile(r"^(\w+)\((.*)$")


def _finish(name: str, rest: str, ts: float, tid: int, start: float | None) -> SyscallEvent:
    args, sep, ret = rest.rpartition(") = ")
    if not sep:  # "... ) = ?" for a call interrupted by exit, or a truncated line
        return SyscallEvent(ts, tid, name, rest, None, start)
    token = ret.split()[0] if ret.split() else "?"
    try:
        value = int(token, 0)
    except ValueError:
        value = None
    return SyscallEvent(ts, tid, name, args, value, start)


def parse_strace(path: str | Path) -> Iterator[SyscallEvent]:
    """Events from `strace -f -ttt -yy -o FILE` output, joining `<unfinished ...>`/`resumed` pairs."""
    pending: dict[int, tuple[float, str, str]] = {}
    with open(path, errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            m = _LINE.match(line.rstrip("\n"))
            if not m:
                if line.strip():
                    raise CoreplaneError(f"{path}:{lineno}: not an `strace -f -ttt` line: {line.strip()[:60]!r}")
                continue
            tid, ts, body = int(m.group(1)), float(m.group(2)), m.group(3)
            if body.startswith(("+++", "---")):
                continue
            resumed = _RESUMED.match(body)
            if resumed:
                if tid in pending:
                    start, name, head = pending.pop(tid)
                    yield _finish(name, head + resumed.group(2), ts, tid, start)
                continue
            call = _CALL.match(body)
            if not call:
                continue
            name, rest = call.group(1), call.group(2)
            if rest.endswith("<unfinished ...>"):
                pending[tid] = (ts, name, rest[: -len("<unfinished ...>")])
            else:
                yield _finish(name, rest, ts, tid, None)


SOURCES: dict[str, Callable[[str | Path], Iterable[SyscallEvent]]] = {"strace": parse_strace}

_FD_OBJECT = re.compile(r"^\s*\d+<(.+?)>(?:,|$)")  # socket names hold "->"
_ENDPOINTS = re.compile(r"^([A-Za-z0-9-]+):\[(.+)->(.+)\]$")


@dataclass
class Task:
    """A thread or process seen in the trace; `key` is its place in the clone tree ("0", "0.1", ...),
    stable across runs of a deterministic program, unlike tids."""

    tid: int
    pid: int
    key: str
    kind: str  # process | thread
    program: str
    parent: int | None = None
    children: int = 0
    syscalls: int = 0
    first_ts: float | None = None  # first and last event: when the task was alive
    last_ts: float | None = None
    bytes_read: int = 0
    bytes_written: int = 0
    extra: dict = field(default_factory=dict)


NOT_FILES = ("/dev/", "/proc/", "/sys/")


def _channel(obj: str, writing: bool) -> str | None:
    """The one-way channel an fd's data travels on: a pipe inode, socket endpoints ordered
    sender->receiver, or a regular file (a producer writes it, a consumer reads it later)."""
    if obj.startswith("pipe:"):
        return obj
    if obj.startswith("/"):
        return None if obj.startswith(NOT_FILES) else f"file:{obj}"
    m = _ENDPOINTS.match(obj)
    if not m:
        return None
    proto, here, peer = m.groups()
    return f"{proto}:{here}->{peer}" if writing else f"{proto}:{peer}->{here}"


def interactions(events: Iterable[SyscallEvent]) -> tuple[dict[int, Task], list[tuple[int, int, float, str]]]:
    """Tasks and directed interaction edges (sender tid, receiver tid, bytes, kind) from events."""
    tasks: dict[int, Task] = {}
    flows: dict[str, dict[str, dict[int, int]]] = defaultdict(lambda: {"w": defaultdict(int), "r": defaultdict(int)})
    waits: list[tuple[float, float, int, str, int]] = []  # start, end, tid, futex key, ret
    wakes: list[tuple[float, int, str, int]] = []

    def task(tid: int) -> Task:
        if tid not in tasks:  # the first task seen is the root of the clone tree
            tasks[tid] = Task(tid=tid, pid=tid, key="0" if not tasks else f"?{tid}", kind="process", program="")
        return tasks[tid]

    for ev in events:
        t = task(ev.tid)
        t.syscalls += 1
        t.first_ts = min(t.first_ts or ev.ts, ev.start or ev.ts)
        t.last_ts = max(t.last_ts or ev.ts, ev.ts)
        if ev.name in ("clone", "clone3", "fork", "vfork") and ev.ret and ev.ret > 0:
            is_thread = "CLONE_THREAD" in ev.args
            child = tasks.get(ev.ret) or Task(tid=ev.ret, pid=ev.ret, key="", kind="", program="")
            child.kind = "thread" if is_thread else "process"
            child.pid = t.pid if is_thread else ev.ret
            child.program = child.program or t.program
            child.parent = ev.tid
            child.key = f"{t.key}.{t.children}"
            t.children += 1
            tasks[ev.ret] = child
        elif ev.name == "execve" and ev.ret == 0:
            m = re.match(r'\s*"([^"]*)"', ev.args)
            if m:
                t.program = Path(m.group(1)).name
        elif ev.name in READS or ev.name in WRITES:
            m = _FD_OBJECT.match(ev.args)
            if not m or ev.ret is None or ev.ret <= 0:
                continue
            writing = ev.name in WRITES
            if writing:
                t.bytes_written += ev.ret
            else:
                t.bytes_read += ev.ret
            chan = _channel(m.group(1), writing)
            if chan:
                flows[chan]["w" if writing else "r"][ev.tid] += ev.ret
        elif ev.name == "futex":
            parts = [p.strip() for p in ev.args.split(",")]
            if len(parts) < 2 or ev.ret is None:
                continue
            key = f"{t.pid}:{parts[0]}" if "PRIVATE" in parts[1] else parts[0]
            if "WAKE" in parts[1] and ev.ret > 0:
                wakes.append((ev.ts, ev.tid, key, ev.ret))
            elif "WAIT" in parts[1] and ev.ret == 0:
                waits.append((ev.start if ev.start is not None else ev.ts, ev.ts, ev.tid, key, ev.ret))

    edges: list[tuple[int, int, float, str]] = []
    for chan, sides in flows.items():
        written = sum(sides["w"].values())
        kind = chan.split(":", 1)[0] if chan.startswith(("pipe:", "file:")) else "socket"
        for writer, wbytes in sides["w"].items():
            for reader, rbytes in sides["r"].items():
                if writer != reader and written:
                    edges.append((writer, reader, wbytes * rbytes / written, kind))
    # a wake-up returning k woke k waiters of that futex: those blocked at the time that resume first
    by_key: dict[str, list] = defaultdict(list)
    for w in sorted(waits, key=lambda w: w[1]):
        by_key[w[3]].append(w)
    woken: dict[tuple[int, int], int] = defaultdict(int)
    for ts, waker, key, count in sorted(wakes):
        queue = by_key.get(key, [])
        for i, (start, end, waiter, _k, _r) in enumerate(queue):
            if count == 0:
                break
            if start <= ts <= end and waiter != waker:
                woken[(waker, waiter)] += 1
                queue[i] = (start, -1.0, waiter, key, 0)  # consumed: end -1 never matches again
                count -= 1
    edges += [(a, b, n * FUTEX_WAKE_BYTES, "futex") for (a, b), n in woken.items()]
    for t in tasks.values():
        if t.parent is not None:
            edges.append((t.parent, t.tid, 0.0, "spawn"))
    return tasks, edges


def threads_layer(tasks: dict[int, Task], edges: list[tuple[int, int, float, str]], cpu_ns: dict[int, float] | None = None):
    """Layer-1 node and edge tables; node weight = CPU time (ns) when sampled, else syscall count."""
    order = sorted(tasks.values(), key=lambda t: [int(x) if x.isdigit() else 10**9 for x in t.key.lstrip("?").split(".")])
    index = {t.tid: i for i, t in enumerate(order)}
    cpu_ns = cpu_ns or {}
    t0 = min((t.first_ts for t in order if t.first_ts), default=0.0)
    weight = [cpu_ns.get(t.tid, float(t.syscalls)) for t in order]
    nodes = node_frame(1, [f"{t.key} {t.program}" for t in order], weight,
                       task=[t.key for t in order], tid=[t.tid for t in order], pid=[t.pid for t in order],
                       kind=[t.kind for t in order], program=[t.program for t in order],
                       syscalls=[t.syscalls for t in order], cpu_ns=[cpu_ns.get(t.tid) for t in order],
                       start_s=[t.first_ts - t0 if t.first_ts else None for t in order],
                       end_s=[t.last_ts - t0 if t.last_ts else None for t in order])
    agg: dict[tuple[int, int, str], float] = defaultdict(float)
    for a, b, w, kind in edges:
        if a in index and b in index:
            agg[(index[a], index[b], kind)] += w
    keys = list(agg)
    frame = edge_frame(1, [k[0] for k in keys], 1, [k[1] for k in keys], [agg[k] for k in keys], [k[2] for k in keys])
    return nodes, frame, index
