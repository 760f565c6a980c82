"""`fullsys run`: boots a suite's image under TCG with the osact plugin, runs the matrix multiply and reports the OS activity of its region of interest."""

import re
import time

from coreplane.core.errors import CoreplaneError
from coreplane.fullsys import activity, guest, image
from coreplane.fullsys.paths import PLUGIN, RUNS, built

RESULT = re.compile(r"coreplane-matmul n=(\d+) threads=(\d+) checksum=(\S+)")


def run(suite: str, nodes: int, size: int, threads: int, memory_counted: bool, icount: bool, timeout_s: float) -> dict:
    """One node of `suite` running an N×N multiply with `threads` threads on as many vCPUs."""
    if nodes != 1:
        raise CoreplaneError(f"--nodes {nodes}: only one node is implemented so far (issue 16: multi-node is a "
                             "later step)")
    if size < 1 or threads < 1:
        raise CoreplaneError(f"--size {size} --threads {threads}: both must be positive")
    plugin = built(PLUGIN)
    img = image.ensure(suite)
    out = RUNS / f"{suite}-n{size}-t{threads}-{time.strftime('%Y%m%d-%H%M%S')}"
    counts = out / "osact.json"
    out.mkdir(parents=True, exist_ok=True)
    booted = guest.boot(image.image_dir(suite), out / "console.log",
                        append=f"coreplane.size={size} coreplane.threads={threads}",
                        plugin=f"{plugin},out={counts},mem={'on' if memory_counted else 'off'}",
                        vcpus=threads, icount=icount, timeout_s=timeout_s, expect=guest.WORKLOAD_MARKER)
    result = RESULT.search(booted.console)
    if result is None or "workload exit 0" not in booted.console:
        raise CoreplaneError(f"the workload failed in {suite}: console ends '{guest.console_tail(booted.console)}' "
                             f"(full log {booted.console_path})")
    return {"suite": suite, "nodes": nodes, "size": size, "threads": threads, "icount": icount, "image": img["path"],
            "kernel": img["kernel"], "debian_version": img["debian_version"], "checksum": float(result.group(3)),
            "wall_s": round(booted.wall_s, 2), "out": str(out), **activity.summarise(counts)}
