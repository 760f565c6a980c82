"""The study pipeline: calibrate and profile, project, validate, write the report (coreplane-study/1)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from coreplane.model.sensitivity import fig2_naive, fig9_policies_fc
from coreplane.profile.figures import plot_syscall_profile
from coreplane.profile.summary import summary
from coreplane.study import project, report
from coreplane.validate import engine, suite as suites

FORMAT = "coreplane-study/1"
PANELS = 4  # programs per syscall-profile figure


def run(out: Path, options: engine.Options) -> dict:
    """Runs the whole study into `out`; returns the document also written to OUT/study.json, with
    the report at OUT/report.html."""
    started = time.monotonic()
    chosen = suites.load("quick" if options.quick else "default")
    prep = engine.prepare(chosen, out, options)
    figures_dir = out / "figures"
    projections = []
    for p in chosen.programs:
        prof = prep.profiles[p.name]
        proj = project.project(p.name, prof, prep.calibration, prep.machine.compute_count, prep.machine.control_count)
        proj["top"] = [{"name": r["name"], "calls": r["calls"], "total_ns": r["total_ns"]} for r in summary(prof)["rows"]]
        projections.append(proj)
    real = [prep.profiles[p.name] for p in chosen.programs if not p.synthetic]
    profile_figs = [plot_syscall_profile(real[i:i + PANELS], figures_dir / f"syscall-profiles-{i // PANELS + 1}.png")
                    for i in range(0, len(real), PANELS)]
    projection_figs = [fig2_naive(real, figures_dir / "fig2-naive.png"),
                       fig9_policies_fc(real, figures_dir / "fig9-policies-fc.png", project.PAPER_GAMMA, 0.9)]
    validation = engine.measure(prep)
    validated = {r["program"]: r for r in validation["rows"]
                 if r["policy"] == "mckernel" and r["fc_ns"] == 0 and r["gamma_emulated"] == 1.0}
    sentences = {p["program"]: project.sentence(p, validated.get(p["program"])) for p in projections}
    doc = {"format": FORMAT, "out": str(out), "suite": chosen.name, "quick": options.quick,
           "sentences": sentences, "projections": projections, "validation": validation,
           "figures": {"profiles": [str(f) for f in profile_figs], "projections": [str(f) for f in projection_figs]},
           "elapsed_s": time.monotonic() - started, "report": str(out / "report.html")}
    (out / "report.html").write_text(report.render(doc))
    (out / "study.json").write_text(json.dumps(doc, indent=1, default=engine._json_default) + "\n")
    return doc
