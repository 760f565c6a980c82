"""`coreplane noise inject`: SCHED_FIFO injectors in the foreground, in the background (for
experiments), and checked by measuring them with the gap detector and FTQ."""

import json
import signal
import subprocess
import time

import numpy as np

from coreplane.core.cpulist import format_cpu_list
from coreplane.core.errors import CoreplaneError
from coreplane.core.native import binary
from coreplane.core.output import human_ns
from coreplane.noise.measure import measure

# A measured spin or period further than this from the request fails the check.
CHECK_TOLERANCE = 0.15


def _args(cpus: list[int], period_ns: int, spin_ns: int, phase: str, priority: int, duration_ns: int) -> list[str]:
    if spin_ns >= period_ns:
        raise CoreplaneError(f"--spin {human_ns(spin_ns)} must be shorter than --period {human_ns(period_ns)}")
    return ["noise", "inject", "--cpus", format_cpu_list(cpus), "--period-ns", str(period_ns), "--spin-ns",
            str(spin_ns), "--phase", phase, "--priority", str(priority), "--duration-ns", str(duration_ns)]


def inject(cpus: list[int], period_ns: int, spin_ns: int, phase: str = "sync", priority: int = 10,
           duration_ns: int = 0) -> dict:
    """Injects in the foreground until the duration ends or Ctrl-C; returns the report."""
    with Injector(cpus, period_ns, spin_ns, phase, priority, limit_ns=duration_ns or 10**18) as injector:
        try:
            injector.proc.wait()
        except KeyboardInterrupt:
            pass  # the report of what ran so far still comes
        return injector.stop()


class Injector:
    """Injectors running in the background; always bounded by `limit_ns` so that a crashed
    caller cannot leave them spinning forever. Use as a context manager."""

    def __init__(self, cpus: list[int], period_ns: int, spin_ns: int, phase: str = "sync", priority: int = 10,
                 limit_ns: int = 600_000_000_000):
        # Its own process group: Ctrl-C reaches this process only, which then stops the injectors.
        self.proc = subprocess.Popen([str(binary("coreplane-bench")),
                                      *_args(cpus, period_ns, spin_ns, phase, priority, limit_ns)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self.report: dict | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> dict:
        """Stops the injectors (each ends within one period) and returns their report."""
        if self.report is None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            out, err = self.proc.communicate()
            if self.proc.returncode != 0:
                raise CoreplaneError(err.strip().splitlines()[-1] if err.strip() else "injector failed")
            self.report = json.loads(out)
        return self.report

    def __enter__(self) -> "Injector":
        time.sleep(0.05)
        if self.proc.poll() is not None:  # failed at once (bad CPU, no SCHED_FIFO): say why
            self.stop()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def in_phase(gaps: np.ndarray, period_ns: int, spin_ns: int) -> np.ndarray:
    """The gaps ([start, length] rows) that start at the dominant phase of the period, within
    one spin: synchronised injections all do, while similar gaps of other origin (the host
    preempting the vCPU for a millisecond or two) fall at any phase."""
    if len(gaps) == 0:
        return gaps
    phases = gaps[:, 0] % period_ns
    bins = max(1, int(period_ns // spin_ns))
    counts, edges = np.histogram(phases, bins=bins, range=(0, period_ns))
    centre = (edges[np.argmax(counts)] + edges[np.argmax(counts) + 1]) / 2
    distance = np.abs((phases - centre + period_ns / 2) % period_ns - period_ns / 2)
    return gaps[distance <= spin_ns]


def line_strength(spectrum: dict, freq_hz: float) -> float:
    """The FTQ spectrum's amplitude at `freq_hz` (its nearest bin) over the spectrum's median:
    a periodic noise shows as a line there even when stronger ones (the RT throttle parks
    SCHED_FIFO threads 50 ms of every second: a 1 Hz comb) fill the list of peaks."""
    freq, amp = np.asarray(spectrum.get("freq_hz", [])), np.asarray(spectrum.get("amplitude", []))
    if len(freq) < 3:
        return 0.0
    return float(amp[np.argmin(np.abs(freq - freq_hz))] / np.median(amp[1:]))


def check(cpus: list[int], period_ns: int, spin_ns: int, phase: str, priority: int, duration_ns: int,
          threshold_ns: int) -> dict:
    """Injects while measuring the same CPUs and compares what the gap detector saw with
    what was asked: spin length, rate of activations and (synchronised) period; with the
    synchronised phase only gaps at the injection's phase count (see in_phase). The detector
    runs as SCHED_FIFO just below the injectors, so ordinary tasks sharing the CPU (time
    slices of milliseconds on a busy machine) cannot pass for injected noise."""
    if priority < 2:
        raise CoreplaneError("--check needs --priority >= 2: the detector runs at SCHED_FIFO priority - 1")
    with Injector(cpus, period_ns, spin_ns, phase, priority, limit_ns=duration_ns + 10 * period_ns) as inj:
        doc = measure(cpus, duration_ns, threshold_ns, fwq=False, tracers=False, fifo=priority - 1)
        report = inj.stop()
    results = []
    for c in doc["native"]["cpus"]:
        t = np.asarray(c["gap"]["timeline"]).reshape(-1, 2)
        # Gaps of the injected length; longer ones are the RT throttle or the host preempting the vCPU.
        similar = t[(t[:, 1] >= spin_ns / 2) & (t[:, 1] <= 2 * spin_ns)]
        hits = in_phase(similar, period_ns, spin_ns) if phase == "sync" else similar
        seconds = c["gap"]["runtime_ns"] / 1e9
        r = {"cpu": c["cpu"], "injected_gaps": len(hits), "other_similar_gaps": len(similar) - len(hits),
             "expected_gaps": seconds * 1e9 / period_ns,
             "spin_ns": float(np.median(hits[:, 1])) if len(hits) else None,
             "rate_per_s": len(hits) / seconds, "ftq_peaks_hz": c["ftq"]["spectrum"]["peaks"],
             "ftq_line_at_period": line_strength(c["ftq"]["spectrum"], 1e9 / period_ns)}
        r["period_ns"] = float(np.median(np.diff(hits[:, 0]))) if len(hits) > 2 else None
        r["ok"] = bool(
            r["spin_ns"] is not None
            and abs(r["spin_ns"] - spin_ns) <= CHECK_TOLERANCE * spin_ns
            and abs(r["rate_per_s"] * period_ns / 1e9 - 1) <= CHECK_TOLERANCE
            and (phase != "sync" or (r["period_ns"] is not None
                                     and abs(r["period_ns"] - period_ns) <= CHECK_TOLERANCE * period_ns)))
        results.append(r)
    return {"requested": {"period_ns": period_ns, "spin_ns": spin_ns, "phase": phase, "priority": priority},
            "tolerance": CHECK_TOLERANCE, "ok": all(r["ok"] for r in results), "cpus": results,
            "injector": report, "measurement": doc["summary"]}
