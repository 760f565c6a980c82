"""Issue 14's experiments as sweeps of the DSE engine, one `coreplane arbiter tables|fig6|pool
--json` measurement per run: their specs, their summaries against the goals, their figures."""

import shlex
import sys
import time
from pathlib import Path

from coreplane.arbiter.bench import GOALS as TABLE_GOALS
from coreplane.arbexp.names import BORROWERS, GANG, POOL_PROGRAMS, TABLE_OPS
from coreplane.arbiter.fig6 import BORROWER_SHARE_GOAL, FRAME_RATIO_GOAL
from coreplane.core.errors import CoreplaneError
from coreplane.core.native import REPO_ROOT

CLI = shlex.quote(str(Path(sys.executable).with_name("coreplane")))

# Each experiment's sweep, full size; `short` overrides what `make bench` shortens.
EXPERIMENTS = {
    "table1": {
        "title": "ROS Tables 1-2: arbiter operations, min/p50/p99 per run, the arbiter at ordinary priority vs SCHED_FIFO",
        "command": CLI + " arbiter tables --trials {trials} --fifo {fifo} --json",
        "parameters": {"trials": [1000], "fifo": [0, 10]},
        "short": {"trials": [300]},
        "metrics": {f"{op}_{stat}": f"ops.{op}.{stat}" for op in TABLE_OPS for stat in ("min_us", "p50_us", "p99_us")},
        "timeout": 600,
    },
    "fig6": {
        "title": "ROS Fig. 6: a provisioned frame encoder beside a best-effort borrower, per warning time",
        "command": CLI + " arbiter fig6 --repetitions 1 --frames {frames} --warn-us {warn_us} --empty-cores --json",
        "parameters": {"frames": [150], "warn_us": [200, 1000]},
        "short": {"frames": [60]},
        "metrics": {"alone_frame_p50_ms": "configs.alone.frame_p50_ms", "alone_frame_max_ms": "configs.alone.frame_max_ms",
                    **{f"{b}_{m}": f"configs.{b}.{m}" for b in BORROWERS
                       for m in ("frame_p50_ms", "frame_max_ms", "frame_ratio", "borrower_share", "borrower_held_share",
                                 "get_cores_p50_ms")}},
        "timeout": 900,
    },
    "pool": {
        "title": "adaptive work-stealing pool vs fixed thread counts while the cores' owner takes them back, "
                 "with and without the gang stop",
        "command": CLI + " arbiter pool --repetitions 1 --tasks {tasks} {gang} --empty-cores --json",
        "parameters": {"tasks": [1000], "gang": list(GANG)},
        "short": {"tasks": [400]},
        "metrics": {f"{p}_{m}": f"configs.{p}.{m}" for p in POOL_PROGRAMS for m in ("wall_s_median", "share_on_control_cores")},
        "timeout": 900,
    },
}


def spec(name: str, repetitions: int, short: bool = False):
    """The sweep spec of experiment `name` (`short`: the sizes `make bench` uses)."""
    from coreplane import dse
    e = EXPERIMENTS[name]
    return dse.spec_from_dict({
        "name": f"arbiter-{name}", "command": e["command"], "repetitions": repetitions,
        "parameters": {**e["parameters"], **(e["short"] if short else {})},
        "metrics": [{"source": "json", "fields": {**e["metrics"], "load_1min": "load_average.0"}}],
        "timeout": {"seconds": e["timeout"]}, "tags": {"experiment": name, "issue": "14"},
        # Other sessions' cells take the compute core for seconds at a time (--empty-cores then
        # fails at once): such a run is tried again later.
        "retries": {"count": 4, "backoff": 5.0, "on": ["exit"]},
    }, source=f"<experiment {name}>")


def run(name: str, repetitions: int, out: Path | None, figures: Path | None, short: bool = False,
        resume: bool = False, progress: bool = True) -> dict:
    """Runs experiment `name` as a sweep into `out` (or continues it there with `resume`: runs
    stored as done are kept), then summarises it against its goals and draws its figure."""
    if name not in EXPERIMENTS:
        raise CoreplaneError(f"no experiment {name!r} (choose from {', '.join(EXPERIMENTS)})")
    from coreplane import dse
    out = out or REPO_ROOT / "target" / "experiments" / f"arbiter-{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    sweep = dse.run_sweep(spec(name, repetitions, short), out, resume=resume, progress=progress)
    table = dse.summary(out)
    if table.empty:
        raise CoreplaneError(f"{out}: no run of experiment {name} succeeded (see the runs' logs there)")
    doc = {"experiment": name, "title": EXPERIMENTS[name]["title"], "sweep": str(out), "runs": sweep,
           "summary": table.to_dict(orient="records"), "goals": GOALS[name](table)}
    if figures:
        from coreplane.arbexp.figures import draw
        doc["figure"] = draw(name, table, out, figures, EXPERIMENTS[name]["title"])
    return doc


def _medians(rows) -> dict:
    return dict(zip(rows["metric"], rows["median"]))


def table_goals(table) -> dict:
    """Per arbiter priority: each goal's statistic, the median over the sweep's runs."""
    out = {}
    for fifo, rows in table.groupby("fifo"):
        med = _medians(rows)
        out[f"fifo {fifo}"] = {op: {"statistic": stat, "goal_us": goal, "us": med[f"{op}_{stat}"],
                                    "met": bool(med[f"{op}_{stat}"] <= goal)} for op, (stat, goal) in TABLE_GOALS.items()}
    return out


def fig6_goals(table) -> dict:
    """Per warning time and borrower: the median per-frame ratio to alone and the median share
    of the idle core time the borrower ran, against the goals."""
    out = {}
    for warn_us, rows in table.groupby("warn_us"):
        med = _medians(rows)
        out[f"{warn_us} us"] = {b: {"frame_ratio": med[f"{b}_frame_ratio"], "borrower_share": med[f"{b}_borrower_share"],
                                    "met": bool(med[f"{b}_frame_ratio"] <= FRAME_RATIO_GOAL
                                                and med[f"{b}_borrower_share"] >= BORROWER_SHARE_GOAL)}
                                for b in BORROWERS}
    return {"frame_ratio_max": FRAME_RATIO_GOAL, "borrower_share_min": BORROWER_SHARE_GOAL, "points": out}


def pool_goals(table) -> dict:
    """No goal of the issue's: per gang-stop setting, each program's median wall time and share
    of tasks that ended on a control core, and the fixed program's wall time over the adaptive's."""
    out = {}
    for gang, rows in table.groupby("gang"):
        med = _medians(rows)
        out[GANG[gang]] = {p: {"wall_s": med[f"{p}_wall_s_median"], "on_control_cores": med[f"{p}_share_on_control_cores"]}
                           for p in POOL_PROGRAMS}
        out[GANG[gang]]["fixed_over_adaptive"] = round(med["fixed_wall_s_median"] / med["adaptive_wall_s_median"], 3)
    return out


GOALS = {"table1": table_goals, "fig6": fig6_goals, "pool": pool_goals}
