"""Experiments (a), (b), (c) of the noise issue, run as sweeps of the DSE engine over
`coreplane noise trial ...`, summarised and drawn into docs/figures."""

import shlex
import sys
import time
from pathlib import Path

from coreplane.core.errors import CoreplaneError
from coreplane.core.native import REPO_ROOT
from coreplane.noise.trials import CAUSES, IO_CUTS

CLI = shlex.quote(str(Path(sys.executable).with_name("coreplane")))
GOAL_RATIO = 0.1   # time lost on a cell's compute core <= 1/10 of default placement's

EXPERIMENTS = {
    "a": {
        "title": "barrier benchmark vs threads, 1 % injected noise, default vs pinned vs cell (ROS Fig. 4)",
        "command": CLI + " noise trial barrier --threads {threads} --noise {noise} --placement {placement} --json",
        "parameters": {"threads": [1, 2], "noise": ["none", "sync", "random"],
                       "placement": ["default", "pinned", "cell"]},
        "exclude": [{"placement": "cell", "threads": 2}],
        "metrics": ["runtime_s", "slowdown", "step_p50_us", "step_p99_us", "step_max_us"],
    },
    "b": {
        "title": "noise on a compute core with a noisy neighbour, default placement vs cell (goal benchmark)",
        "command": CLI + " noise trial neighbour --neighbour {neighbour} --seconds 3 --json",
        "parameters": {"neighbour": ["hog", "injector"]},
        "metrics": ["default_lost_pct", "cell_lost_pct", "lost_ratio", "default_interruptions_per_s",
                    "cell_interruptions_per_s", "default_gap_max_us", "cell_gap_max_us"],
    },
    "io": {
        "title": "cell beside two compiler loops and an fsync writer: its lost time by cause, with its opt-in cuts",
        "command": CLI + " noise trial neighbour --neighbour io --trace --seconds 3 {cuts} --json",
        "parameters": {"cuts": list(IO_CUTS)},
        # Other sessions' cells take the one compute core for seconds at a time: a trial that
        # found it taken fails at once and is tried again later.
        "retries": {"count": 6, "backoff": 2.0, "on": ["exit"]},
        "metrics": ["default_lost_pct", "cell_lost_pct", "lost_ratio", "cell_traced_lost_pct", "cell_steal_ms",
                    *(f"cell_lost_{c}_pct" for c in CAUSES)],
    },
    "c": {
        "title": "barrier benchmark on the compute core, cache buster on the control core (ROS Fig. 5)",
        "command": CLI + " noise trial cache --buster {buster} --working-set {working_set} --json",
        "parameters": {"buster": ["off", "on"], "working_set": [0.5, 4, 16]},
        "metrics": ["step_p50_us", "step_mean_us", "ns_per_load"],
    },
    "colour": {
        "title": "page colouring inside 2 MiB huge pages: all colours vs 1/C of them",
        "command": CLI + " noise trial colour --colours {colours} --json",
        "parameters": {"colours": [8, 64]},
        "metrics": ["dram_ns"] + [f"{k}_{w}mib{s}" for w in (1, 2, 4)
                                  for k, s in (("all", "_ns"), ("few", "_ns"), ("few_over_all", ""))],
    },
}


def spec(name: str, repetitions: int):
    """The sweep spec of experiment `name`."""
    from coreplane import dse
    e = EXPERIMENTS[name]
    return dse.spec_from_dict({
        "name": f"noise-{name}", "command": e["command"], "repetitions": repetitions,
        "parameters": e["parameters"], "expand": {"exclude": e.get("exclude", [])},
        "metrics": [{"source": "json", "fields": {m: m for m in e["metrics"]}}],
        "timeout": {"seconds": 300}, "tags": {"experiment": name, "issue": "14" if name == "io" else "6"},
        **({"retries": e["retries"]} if "retries" in e else {}),
    }, source=f"<experiment {name}>")


def run(name: str, repetitions: int, out: Path | None, figures: Path | None, progress: bool) -> dict:
    """Runs experiment `name` as a sweep, then summarises it and draws its figure."""
    if name not in EXPERIMENTS:
        raise CoreplaneError(f"no experiment {name!r} (choose from {', '.join(EXPERIMENTS)})")
    from coreplane import dse
    out = out or REPO_ROOT / "target" / "experiments" / f"noise-{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    sweep = dse.run_sweep(spec(name, repetitions), out, progress=progress)
    table = dse.summary(out)
    doc = {"experiment": name, "title": EXPERIMENTS[name]["title"], "sweep": str(out), "runs": sweep,
           "summary": table.to_dict(orient="records")}
    if name in ("b", "io"):
        doc["goal"] = goal(table, "neighbour" if name == "b" else "cuts")
    if figures:
        from coreplane.noise.figures import draw
        doc["figure"] = draw(name, table, figures, EXPERIMENTS[name]["title"])
    return doc


def goal(table, by: str = "neighbour") -> dict:
    """Per neighbour (or other point parameter `by`): median lost % on the compute core, default
    vs cell, and the median of the ratios cell / default, each ratio measured within one trial
    (same run, same neighbour)."""
    out = {"target_ratio": GOAL_RATIO, "neighbours": {}}
    for kind, rows in table.groupby(by):
        med = dict(zip(rows["metric"], rows["median"]))
        out["neighbours"][kind] = {"default_lost_pct": med["default_lost_pct"], "cell_lost_pct": med["cell_lost_pct"],
                                   "ratio": med["lost_ratio"], "met": med["lost_ratio"] <= GOAL_RATIO}
    out["met"] = all(v["met"] for v in out["neighbours"].values())
    return out
