"""Figures derived from a native noise measurement: the FTQ spectrum (numpy FFT), FTQ and
FWQ losses, interrupt counts by source, and a per-CPU summary in the units of rtla osnoise."""

import numpy as np

from coreplane.cell.status import per_cpu_counters


def ftq_spectrum(counts: list[int], quantum_ns: int) -> dict:
    """Amplitude spectrum of the FTQ series (mean removed). A periodic noise source of
    frequency f shows as a peak at f (and its harmonics); amplitudes are in work units."""
    x = np.asarray(counts, dtype=float)
    if len(x) < 8:
        return {"freq_hz": [], "amplitude": [], "peaks": []}
    amp = np.abs(np.fft.rfft(x - x.mean())) * 2 / len(x)
    freq = np.fft.rfftfreq(len(x), d=quantum_ns / 1e9)
    # Peaks: local maxima above the spectrum's median by a wide margin, strongest first.
    inner = amp[1:-1]
    is_peak = (inner > amp[:-2]) & (inner >= amp[2:]) & (inner > 8 * np.median(amp[1:]))
    idx = np.argsort(inner[is_peak])[::-1][:8]
    peak_bins = np.nonzero(is_peak)[0][idx] + 1
    return {
        "resolution_hz": float(freq[1]),
        "nyquist_hz": float(freq[-1]),
        "peaks": [{"freq_hz": float(freq[b]), "amplitude": float(amp[b])} for b in peak_bins],
        "freq_hz": freq.tolist(),
        "amplitude": amp.tolist(),
    }


def ftq_lost_pct(counts: list[int]) -> float:
    """Share of work not done, against the best quantum: 100 * (1 - mean / max)."""
    x = np.asarray(counts, dtype=float)
    return float(100 * (1 - x.mean() / x.max())) if len(x) and x.max() > 0 else 0.0


def proc_counters() -> dict[str, dict[str, list[int]]]:
    """Per-CPU counts of every interrupt (/proc/interrupts) and softirq (/proc/softirqs)."""
    out = {}
    for kind, path in (("irq", "/proc/interrupts"), ("softirq", "/proc/softirqs")):
        out[kind] = {f"{name} {desc}" if name.isdigit() else name: counts
                     for name, (counts, desc) in per_cpu_counters(path).items()}
    return out


def counter_deltas(before: dict, after: dict, cpus: list[int], seconds: float) -> dict:
    """Events per second on each measured CPU, by source, for the sources that fired."""
    out = {}
    for kind in after:
        for name, counts in after[kind].items():
            old = before[kind].get(name, [0] * len(counts))
            per_cpu = {str(c): (counts[c] - old[c]) / seconds for c in cpus if c < len(counts)}
            if any(per_cpu.values()):
                out[f"{kind}:{name}"] = per_cpu
    return out


def summarise_cpu(cpu_doc: dict) -> dict:
    """The headline figures of one CPU, in microseconds and percent (rtla osnoise's units)."""
    gap, ftq = cpu_doc["gap"], cpu_doc["ftq"]
    d = gap["durations_ns"] or {}
    out = {
        "cpu": cpu_doc["cpu"],
        "interruptions_per_s": gap["per_s"],
        "lost_pct": gap["lost_pct"],
        "gap_p50_us": d.get("p50", 0) / 1e3,
        "gap_p99_us": d.get("p99", 0) / 1e3,
        "gap_max_us": gap["max_ns"] / 1e3,
        "ftq_lost_pct": ftq_lost_pct(ftq["counts"]),
        "ftq_peaks_hz": [round(p["freq_hz"], 2) for p in ftq["spectrum"]["peaks"][:3]],
    }
    if cpu_doc.get("fwq"):
        out["fwq_lost_pct"] = cpu_doc["fwq"]["lost_pct"]
        out["fwq_p99_over_min"] = cpu_doc["fwq"]["summary_ns"]["p99"] / cpu_doc["fwq"]["summary_ns"]["min"]
    return out
