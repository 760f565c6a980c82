"""The study's self-contained HTML report: sentences, calibration, profiles, projections and validation."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd

from coreplane.core.output import human_ns
from coreplane.report.html import STYLE, table
from coreplane.validate.predict import ESTIMATED, FITTED, HEADLINE, MODEL_NAMES
from coreplane.validate.render import pct


def _img(path: str | Path, caption: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return (f"<figure><img alt='{html.escape(caption)}' src='data:image/png;base64,{data}' style='max-width:100%'>"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _calibration(cal: dict) -> str:
    rows = [{"forward cost F per direction": human_ns(int(f)) if int(f) else "0", "trials": fc["trials"],
             "min": human_ns(fc["min"]), "median": human_ns(fc["median"]), "mean": human_ns(fc["mean"]),
             "max": human_ns(fc["max"]), "caller CPU per call": human_ns(cal["cpu_per_call_ns"][f])}
            for f, fc in sorted(cal["forward"].items(), key=lambda kv: int(kv[0]))]
    cold = cal["cold"]
    gammas = ", ".join(f"<code>gain_synth -g {g}</code> gives γ = {v:.3f}" for g, v in cal["gammas"].items()
                       if float(g) != 1.0) or "no γ emulated"
    return (f"<h2>Calibration (micro-benchmarks, paper 002 Table 3 / Fig. 13)</h2>"
            f"<p>Round trip 2·f_c of a delegated <code>getppid</code> (<code>workloads/bin/null_call</code>, timed call "
            f"by call) minus its native time ({human_ns(cal['native_call_ns'])}), at each forward cost F the validation "
            f"uses. A call kept local under the runtime costs {human_ns(cal['local_ns'])} more than natively. A caller "
            f"polls 2·F + {human_ns(cal['spin_blocked_ns'])} for a delegated call that blocks, then sleeps; "
            f"a delegate polls {human_ns(cal['window_ns']) if cal['window_ns'] else '(no cold calls seen)'} before it "
            f"sleeps, and a call that wakes it takes {human_ns(cold['median'])} (median; mean {human_ns(cold['mean'])}, "
            f"{cold['trials']} trials). Start-up of the first process: {human_ns(cal['startup_ns'])} "
            f"({human_ns(cal['startup_delegating_ns'])} when a delegate starts), of each process it starts: "
            f"{human_ns(cal['child_ns'])} ({human_ns(cal['child_delegating_ns'])}). {gammas}.</p>"
            + table(pd.DataFrame(rows)))


def _profiles(doc: dict) -> str:
    rows = []
    for p in doc["projections"]:
        top = sorted(p["top"], key=lambda r: -r["calls"])[:5]
        rows.append({"program": p["program"], "threads": p["threads"], "wall": human_ns(p["wall_ns"]),
                     "syscalls": p["calls"], "distinct": p["distinct"], "p": f"{p['p']:.2%}",
                     "most called": ", ".join(f"{r['name']} {r['calls']}" for r in top)})
    figs = "".join(_img(f, Path(f).stem) for f in doc["figures"]["profiles"])
    return "<h2>Profiles</h2><p>One run of each program under <code>coreplane profile</code> (no delegation).</p>" + \
        table(pd.DataFrame(rows)) + figs


def _projections(doc: dict) -> str:
    rows = []
    for p in doc["projections"]:
        for r in p["rows"]:
            rows.append({"program": p["program"], "policy": r["policy"], "delegated calls": r["delegated_calls"],
                         "round trip": human_ns(r["paper_round_trip_ns"]), "naive": r["naive"], "refined": r["refined"],
                         "closed": r["closed"], "break-even round trip": human_ns(r["break_even_round_trip_ns"]),
                         f"refined on coreplane ({human_ns(r['own_round_trip_ns'])})": r["own_refined"]})
    figs = "".join(_img(f, Path(f).stem) for f in doc["figures"]["projections"])
    return ("<h2>Projections</h2><p>Speedups projected with the paper's parameters: γ = 1.04 and the preset's "
            "measured round trip (McKernel 6.28 µs, mOS 6.46 µs; McKernel's for the others); the break-even round "
            "trip is where the refined model gives 1. The last column is coreplane's own configuration (γ = 1, no "
            "added forward cost).</p>" + table(pd.DataFrame(rows)) + figs)


def _noise(v: dict) -> str:
    """The validation's measurement-noise floor as a sentence ("" for documents from before it)."""
    floor = v.get("noise_floor_pct") or {}
    if floor.get("all") is None:
        return ""
    return (f" The measurements' own noise (a bootstrap over the rounds: the MAPE even a model that knew every true "
            f"speedup would show against them) is {pct(floor['all'])} (sequential {pct(floor['sequential'])}, "
            f"multithreaded {pct(floor['multithreaded'])}).")


def _validation(v: dict) -> str:
    goal = v["goal"]
    mape = pd.DataFrame([{"model": MODEL_NAMES[m], "MAPE": pct(v["mape"][m]["mape_pct"]),
                          "accuracy": pct(v["mape"][m]["accuracy_pct"]), "worst": pct(v["mape"][m]["max_pct"]),
                          "sequential": pct(v["mape_sequential"][m]), "multithreaded": pct(v["mape_multithreaded"][m]),
                          "saturated": v["mape"][m]["missing"]} for m in (*ESTIMATED, *FITTED)])
    fits = v["gamma_fit"]
    programs = pd.DataFrame([{"program": p, "configurations": sum(r["program"] == p for r in v["rows"]),
                              "γ fit (median)": fits["per_program"].get(p), "γ of the others": fits["loo"].get(p),
                              **{MODEL_NAMES[m]: pct(e[m]) for m in ("naive", "refined", "closed", "closed:loo")}}
                             for p, e in v["per_program"].items()])
    cols = ["case", "n", "run_cv", "noise", "measured", "naive", "refined", "queueing", "closed", "refined:loo", "closed:loo"]
    rows = pd.DataFrame(v["rows"])[cols] if v["rows"] else pd.DataFrame(columns=cols)
    figs = "".join(_img(f, Path(f).stem) for f in v["figures"])
    verdict = "met" if goal["met"] else "not met"
    text = (f"<h2>Validation</h2><p>{len(v['rows'])} configurations (policy × forward cost × emulated γ) of "
            f"{goal['programs']} programs ({goal['multithreaded_programs']} multithreaded), each run "
            f"{v.get('rounds') or v['repetitions']} times natively and under the runtime, in rounds. Speedup = median native time / median "
            f"time under the runtime. Predictions use estimated parameters: f_c from the micro-benchmark "
            f"({v['fc_statistic']}), γ from the gain_synth calibration (1 for real programs); the fitted rows solve γ on "
            f"measured speedups (paper 002 Table 4), in-sample (median of all programs) and leave-one-out. "
            f"Goal (MAPE ≤ {goal['target_pct']:g} % for the {MODEL_NAMES[HEADLINE]}): <b>{verdict}</b>, "
            f"{pct(goal['mape_pct'])}.{_noise(v)}</p>")
    extra = ""
    if v["skipped"]:
        extra += "<h3>Skipped (projected too long)</h3>" + table(pd.DataFrame(v["skipped"]))
    if v["failed"]:
        extra += "<h3>Failed runs</h3>" + table(pd.DataFrame(v["failed"]))
    return text + table(mape) + "<h3>Per program</h3>" + table(programs) + figs + \
        "<h3>Every configuration</h3>" + table(rows) + extra


def render(doc: dict) -> str:
    """The whole report as one HTML page (figures embedded)."""
    v = doc["validation"]
    m = v["machine"]
    sentences = "".join(f"<li>{html.escape(s)}</li>" for s in doc["sentences"].values())
    body = (f"<h1>coreplane study</h1><p>{html.escape(str(m.get('cpu', '?')))}, {m.get('cpus', '?')} CPUs, kernel "
            f"{html.escape(str(m.get('kernel', '?')))}; compute cores {m['compute_cores']}, control cores "
            f"{m['control_cores']}; runs at autogroup nice {m['nice']}. Took {doc['elapsed_s']:.0f} s "
            f"({', '.join(f'{k[:-2]} {t:.0f} s' for k, t in v['timings_s'].items())}).</p>"
            f"<h2>What delegation would do to each program</h2><ul>{sentences}</ul>"
            + _calibration(v["calibration"]) + _profiles(doc) + _projections(doc) + _validation(v))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>coreplane study</title><style>{STYLE}</style>"
            f"</head><body>{body}</body></html>")
