"""Layer 0: dynamic instructions and their register/memory dependencies, from the native single-stepper.

Method: `coreplane-itrace` (crates/netos) runs the program under ptrace, single-steps every thread
and child process inside windows of W instructions (full speed between windows), decodes each
instruction with iced-x86, reads the effective addresses from the registers, and links an
instruction to the last writer of every register, flag and 8-byte memory word it reads.
Cost: every recorded instruction is a ptrace stop (two context switches plus PTRACE_GETREGS).
"""

import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

from coreplane.core.errors import CoreplaneError
from coreplane.core.native import binary
from coreplane.graph.model import edge_frame, node_frame

NODE_RECORD = np.dtype([("pc", "<u8"), ("task", "<u4"), ("window", "<u4")])
EDGE_RECORD = np.dtype([("src", "<u4"), ("dst", "<u4"), ("weight", "<f4"), ("kind", "<u4")])


def trace(argv: list[str], prefix: Path, window: int, windows: int, start_ms: int, period_ms: int) -> dict:
    """Runs the program under coreplane-itrace (its output discarded); returns the summary."""
    args = [str(binary("coreplane-itrace")), "--out", str(prefix), "--window", str(window),
            "--windows", str(windows), "--start-ms", str(start_ms), "--period-ms", str(period_ms), "--", *argv]
    proc = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    summary_path = Path(f"{prefix}.json")
    if proc.returncode != 0 or not summary_path.is_file():
        last = [l for l in proc.stderr.splitlines() if l.startswith("coreplane-itrace:")]
        raise CoreplaneError(last[-1] if last else f"coreplane-itrace exited {proc.returncode}")
    return json.loads(summary_path.read_text())


def static_table(prefix: Path) -> pd.DataFrame:
    """pc, length and Intel-syntax text of every distinct instruction address traced."""
    rows = [line.split("\t", 2) for line in Path(f"{prefix}.static").read_text().splitlines() if line]
    return pd.DataFrame({"pc": np.array([int(r[0], 16) for r in rows], dtype=np.uint64),
                         "length": np.array([int(r[1]) for r in rows], dtype=np.int8),
                         "text": pd.array([r[2] for r in rows], dtype="string")})


def instruction_layer(prefix: Path, summary: dict, task_nodes: dict[str, int]):
    """Layer-0 nodes and edges, 0->1 `runs-on` links (instruction -> its thread, matched by
    clone-tree key), and layer-1 `cacheline` hand-off edges between threads."""
    recs = np.fromfile(f"{prefix}.nodes", dtype=NODE_RECORD)
    edges = np.fromfile(f"{prefix}.edges", dtype=EDGE_RECORD)
    tasks = {t["index"]: t["key"] for t in summary["tasks"]}
    task_node = np.array([task_nodes.get(tasks.get(i, ""), -1) for i in range(len(tasks))] or [-1], dtype=np.int64)
    owner = task_node[recs["task"]] if len(recs) else np.zeros(0, dtype=np.int64)
    nodes = node_frame(0, pd.array(np.char.mod("%#x", recs["pc"].astype(np.int64)), dtype="string"), None,
                       pc=recs["pc"], window=recs["window"].astype(np.int32))
    intra = edge_frame(0, edges["src"], 0, edges["dst"], edges["weight"],
                       np.where(edges["kind"] == 2, "mem", "reg"))
    placed = owner >= 0
    runs_on = edge_frame(0, np.flatnonzero(placed), 1, owner[placed], np.ones(int(placed.sum())), "runs-on")
    src, dst, w = [], [], []
    handoffs = Path(f"{prefix}.handoffs").read_text().split("\n")
    for line in handoffs:
        if line.strip():
            a, b, n = (int(x) for x in line.split("\t"))
            na, nb = task_node[a] if a < len(task_node) else -1, task_node[b] if b < len(task_node) else -1
            if na >= 0 and nb >= 0 and na != nb:
                src.append(na)
                dst.append(nb)
                w.append(64.0 * n)  # one cache line per hand-off
    cachelines = edge_frame(1, src, 1, dst, w, "cacheline")
    return nodes, pd.concat([intra, runs_on], ignore_index=True), cachelines


def check_trace(summary: dict) -> None:
    """A trace that recorded nothing is an error the user must see (e.g. ptrace not permitted)."""
    if not summary.get("instructions"):
        raise CoreplaneError("coreplane-itrace recorded no instruction (program exited before the first window?)")
