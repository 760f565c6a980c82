"""Layer 2: physical frames used by each process, sampled from /proc/PID/pagemap while the program runs."""

import os
import threading
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from coreplane.graph.model import edge_frame, node_frame

PAGE = os.sysconf("SC_PAGE_SIZE")
CLK_TCK = os.sysconf("SC_CLK_TCK")
PFN_MASK = (1 << 55) - 1
PRESENT = 1 << 63
MAX_MAPPING_PAGES = 1 << 20  # a mapping larger than 4 GiB is read only up to this many pages


def descendants(root: int) -> list[int]:
    """root and every process below it (via /proc/PID/task/TID/children)."""
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                stack.extend(int(c) for c in (task / "children").read_text().split())
            except OSError:
                continue
    return out


def writable_frames(pid: int) -> tuple[np.ndarray, np.ndarray]:
    """PFNs of the present pages of pid's writable mappings and whether each comes from a shared
    (MAP_SHARED) mapping; empty when pagemap is not readable (without CAP_SYS_ADMIN the kernel
    reports PFN 0)."""
    frames, shared = [], []
    empty = (np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=bool))
    try:
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
        fd = os.open(f"/proc/{pid}/pagemap", os.O_RDONLY)
    except OSError:
        return empty
    try:
        for line in maps:
            fields = line.split()
            if len(fields) < 2 or "w" not in fields[1] or line.endswith("[vsyscall]"):
                continue
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            pages = min((hi - lo) // PAGE, MAX_MAPPING_PAGES)
            try:
                raw = os.pread(fd, pages * 8, lo // PAGE * 8)
            except OSError:
                continue
            entries = np.frombuffer(raw, dtype=np.uint64)
            present = entries[(entries & np.uint64(PRESENT)) != 0] & np.uint64(PFN_MASK)
            present = present[present != 0]
            frames.append(present)
            shared.append(np.full(len(present), fields[1][3] == "s"))
    finally:
        os.close(fd)
    if not frames:
        return empty
    pfns, first = np.unique(np.concatenate(frames), return_index=True)
    return pfns, np.concatenate(shared)[first]


def _comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def cpu_times(pid: int) -> dict[int, float]:
    """utime+stime in ns of each thread of pid (from /proc/PID/task/TID/stat)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) * 1e9 / CLK_TCK
    return out


class FrameSampler(threading.Thread):
    """Samples, every `interval` s until stopped, the frames and CPU times of a process tree."""

    def __init__(self, root_pid: int, interval: float = 0.02):
        super().__init__(daemon=True)
        self.tracer_comm = _comm(root_pid)
        self.root_pid, self.interval = root_pid, interval
        self.samples: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))  # pid -> pfn -> samples
        self.cpu_ns: dict[int, float] = {}
        self.shared: set[int] = set()  # frames seen in a MAP_SHARED mapping
        self.rounds = 0
        self._stop_event = threading.Event()

    def sample_once(self) -> None:
        for pid in descendants(self.root_pid):
            if pid == self.root_pid or _comm(pid) == self.tracer_comm:
                continue  # the tracer and the probe children it forks before the program
            self.cpu_ns.update(cpu_times(pid))
            counts = self.samples[pid]
            pfns, shared = writable_frames(pid)
            for pfn in pfns.tolist():
                counts[pfn] += 1
            self.shared.update(pfns[shared].tolist())
        self.rounds += 1

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample_once()
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def frames_layer(samples: dict[int, dict[int, int]], shared: set[int], task_index: dict[int, int]):
    """Layer-2 nodes (one per frame; weight = samples it was seen in; `shared` = from a MAP_SHARED
    mapping) and 1->2 links from each process's main thread to the frames it mapped (weight = samples)."""
    pfns = sorted({pfn for counts in samples.values() for pfn in counts})
    index = {pfn: i for i, pfn in enumerate(pfns)}
    seen = defaultdict(int)
    src, dst, w = [], [], []
    for pid, counts in samples.items():
        if pid not in task_index:
            continue
        for pfn, n in counts.items():
            seen[pfn] += n
            src.append(task_index[pid])
            dst.append(index[pfn])
            w.append(n)
    nodes = node_frame(2, [f"pfn:{p:#x}" for p in pfns], [seen[p] for p in pfns],
                       pfn=np.array(pfns, dtype=np.uint64), shared=np.array([p in shared for p in pfns], dtype=bool))
    return nodes, edge_frame(1, src, 2, dst, w, "maps")


def wait_and_sample(proc, sampler: FrameSampler) -> int:
    """Waits for `proc` while `sampler` runs; returns the exit status."""
    sampler.start()
    try:
        while proc.poll() is None:
            time.sleep(0.01)
    finally:
        sampler.stop()
    return proc.returncode
