"""Parsers of the kernel's osnoise and timerlat trace output (fixtures: this kernel has neither)."""

from coreplane.noise.tracefs import parse_osnoise, parse_timerlat


def test_osnoise_summary_rows_are_summed_per_cpu(hosts):
    doc = parse_osnoise((hosts.parent / "tracefs/osnoise.txt").read_text())
    cpu3 = doc["cpus"]["003"]
    assert cpu3["runtime_us"] == 2_000_000 and cpu3["noise_us"] == 2000
    assert cpu3["max_single_noise_us"] == 11
    assert (cpu3["hw"], cpu3["nmi"], cpu3["irq"], cpu3["softirq"], cpu3["thread"]) == (3, 1, 501, 3, 0)
    assert cpu3["cpu_available_pct"] == 99.9
    assert doc["cpus"]["002"]["noise_us"] == 3120


def test_osnoise_events_are_attributed_by_source(hosts):
    sources = parse_osnoise((hosts.parent / "tracefs/osnoise.txt").read_text())["sources"]
    by = {(s["cpu"], s["kind"], s["source"]): s for s in sources}
    timer = by[("002", "irq", "local_timer:236")]
    assert (timer["count"], timer["total_ns"], timer["max_ns"]) == (2, 8600, 4620)
    assert by[("002", "thread", "kworker/2:1:57")]["total_ns"] == 15340
    assert by[("003", "nmi", "")]["count"] == 1
    assert sources[0]["total_ns"] == 15340  # largest first


def test_timerlat_latencies_per_context(hosts):
    doc = parse_timerlat((hosts.parent / "tracefs/timerlat.txt").read_text())
    assert doc["cpus"]["002"]["thread"]["n"] == 2
    assert doc["cpus"]["002"]["irq"]["max_ns"] == 1210
    assert doc["cpus"]["003"]["thread"]["p50_ns"] == 17800
