"""OS activity from the osact plugin's counts: kernel and user instructions and memory accesses in the region of interest, their shares, and simulation speed."""

from pathlib import Path

from coreplane.core.documents import read_json
from coreplane.core.errors import CoreplaneError

SIDES = ("kernel", "user")
KINDS = ("insns", "loads", "stores")


def share(pair: dict) -> float | None:
    """The kernel's fraction of a {kernel, user} pair; None when both are zero."""
    total = pair["kernel"] + pair["user"]
    return pair["kernel"] / total if total else None


def speed(insns: int, wall_ns: int, cpu_ns: int) -> dict:
    """Simulated instructions per wall-clock µs and per µs of QEMU's CPU time (MIPS): on a shared
    machine the second is the comparable one."""
    return {"wall_s": wall_ns / 1e9, "cpu_s": cpu_ns / 1e9, "mips": insns * 1e3 / wall_ns if wall_ns else None,
            "mips_cpu": insns * 1e3 / cpu_ns if cpu_ns else None}


def summarise(counts_path: Path) -> dict:
    """The plugin's file summed over vCPUs: per kind the kernel/user counts and kernel share, the
    region of interest's and the whole run's speed; per vCPU the raw counts; the kernel blocks
    executed in the region (for kernelparts); with the cache model, its events summed over vCPUs
    ({event: {side: count}}) and the caches' geometry."""
    try:
        raw = read_json(counts_path)
    except CoreplaneError as e:
        raise CoreplaneError(f"no counts from the osact plugin: {e}") from None
    if not raw["roi"]["closed"]:
        state = "opened but not closed" if raw["roi"]["opened"] else "never opened"
        raise CoreplaneError(f"{counts_path}: the workload's region of interest was {state}")
    totals = {kind: {side: sum(v[kind][side] for v in raw["vcpus"]) for side in SIDES} for kind in KINDS}
    memory = {side: totals["loads"][side] + totals["stores"][side] for side in SIDES}
    roi_insns = sum(totals["insns"].values())
    run_insns = sum(v["run_insns"] for v in raw["vcpus"])
    return {
        "roi": {**totals, "memory": memory, "kernel_share_insns": share(totals["insns"]),
                "kernel_share_memory": share(memory) if raw["memory_counted"] else None,
                **speed(roi_insns, raw["roi"]["wall_ns"], raw["roi"]["cpu_ns"])},
        "run": {"insns": run_insns, **speed(run_insns, raw["run_wall_ns"], raw["run_cpu_ns"])},
        "memory_counted": raw["memory_counted"],
        "vcpus": raw["vcpus"],
        "kernel_blocks": raw.get("kernel_blocks", []),
        "cache_events": ({e: {side: sum(v["cache"][e][side] for v in raw["vcpus"]) for side in SIDES}
                          for e in raw["vcpus"][0]["cache"]} if "caches" in raw else None),
        "caches": raw.get("caches"),
    }
