"""The model against the real arbiter on this machine: simulated p50 beside the p50 that `coreplane arbiter tables --json` measured, for the operations both time the same way."""

from pathlib import Path

from coreplane.arbsim.costs import Cost
from coreplane.arbsim.model import simulate, summarize
from coreplane.core.documents import read_json
from coreplane.core.errors import CoreplaneError

# The model's operation -> the real benchmark's name for the same span. Not preempt_one: the
# benchmark stops at the revoke's reply, the model when the thread has left the core.
MEASURED_AS = {
    "create_mcp": "create_mcp",
    "get_one_warm": "get_one_vcore_warm",
    "get_one_cold": "get_one_vcore_cold",
    "warn_preempt_one": "warn_preempt_one_cooperative",
    "kill_mcp": "kill_mcp_reclaimed",
}


def measured(path: Path) -> dict:
    """The benchmark's operations ({"ops": {name: {"p50_us": …}}}) from `path`."""
    doc = read_json(path)
    ops = doc.get("ops") if isinstance(doc, dict) else None
    if not isinstance(ops, dict):
        raise CoreplaneError(f"{path}: field 'ops': expected an object of operations")
    return ops


def compare(path: Path, cores: int, costs: dict[str, Cost], trials: int, seed: int) -> list[dict]:
    """Per operation the benchmark measured: measured and simulated p50 (µs) at `cores` and their ratio."""
    ops = measured(path)
    rows = []
    for operation, name in MEASURED_AS.items():
        p50 = (ops.get(name) or {}).get("p50_us")
        if not isinstance(p50, (int, float)) or p50 <= 0:
            continue
        sim = summarize(simulate(operation, cores, costs, trials, seed))["p50_ns"] / 1e3
        rows.append({"operation": operation, "measured_as": name, "cores": cores, "measured_p50_us": p50,
                     "simulated_p50_us": round(sim, 2), "simulated_over_measured": round(sim / p50, 3)})
    if not rows:
        raise CoreplaneError(f"{path}: field 'ops': none of {', '.join(MEASURED_AS.values())} has a p50_us")
    return rows
