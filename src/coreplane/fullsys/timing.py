"""The analytic in-order timing model over the osact plugin's cache events: cycles, data-access latency and L2 miss rate, kernel and user apart; nothing of a pipeline is simulated, the cycles are a formula."""

from dataclasses import asdict, dataclass

from coreplane.fullsys.activity import SIDES

EVENTS = ("l1i_accesses", "l1i_misses", "l2i_misses", "l1d_accesses", "l1d_misses", "l2d_misses")


@dataclass(frozen=True)
class Timing:
    """An in-order core: every instruction takes `cpi` cycles (L1 hits included), an L1 miss the L2
    serves adds `l2_latency`, an L2 miss adds `memory_latency` more; a load or store that hits the
    L1 takes `l1_latency`. No overlap of misses, no write-backs, no contention between vCPUs."""

    cpi: float = 1.0
    l1_latency: float = 4
    l2_latency: float = 12
    memory_latency: float = 200


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def estimate(insns: int, events: dict, timing: Timing) -> dict:
    """Cycles, CPI, average data-access latency (cycles per load or store) and L2 miss rate for
    `insns` instructions that caused `events` (EVENTS' counts)."""
    l1_misses = events["l1i_misses"] + events["l1d_misses"]
    l2_misses = events["l2i_misses"] + events["l2d_misses"]
    cycles = insns * timing.cpi + l1_misses * timing.l2_latency + l2_misses * timing.memory_latency
    data_cycles = (events["l1d_accesses"] * timing.l1_latency + events["l1d_misses"] * timing.l2_latency
                   + events["l2d_misses"] * timing.memory_latency)
    return {"cycles": cycles, "cpi": _ratio(cycles, insns),
            "data_access_latency": _ratio(data_cycles, events["l1d_accesses"]),
            "l1d_miss_rate": _ratio(events["l1d_misses"], events["l1d_accesses"]),
            "l2_accesses": l1_misses, "l2_misses": l2_misses, "l2_miss_rate": _ratio(l2_misses, l1_misses),
            "l2_mpki": _ratio(1000 * l2_misses, insns)}


def model(insns: dict, events: dict, caches: dict, timing: Timing) -> dict:
    """The model per side (kernel, user) and for both, from {side: instructions} and {event: {side:
    count}}; the kernel's share of the cycles; the caches' geometry and the model's parameters."""
    sides = {side: estimate(insns[side], {e: events[e][side] for e in EVENTS}, timing) for side in SIDES}
    total = estimate(sum(insns.values()), {e: sum(events[e].values()) for e in EVENTS}, timing)
    return {"analytic": "in-order: cycles = instructions x CPI + L1 misses x L2 latency + L2 misses x memory latency",
            "caches": caches, "timing": asdict(timing), "events": events, **sides, "total": total,
            "kernel_share_cycles": _ratio(sides["kernel"]["cycles"], total["cycles"])}


def add_events(documents: list[dict]) -> dict:
    """EVENTS' {side: count} summed over nodes."""
    return {e: {side: sum(d[e][side] for d in documents) for side in SIDES} for e in EVENTS}
