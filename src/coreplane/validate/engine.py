"""The validation pipeline: calibrate, profile, plan, run in rounds, predict, compare (the steps `validate` and `study` share)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from coreplane.core.documents import check_output_dir
from coreplane.core.errors import CoreplaneError
from coreplane.core.machine import describe
from coreplane.core.native import workload
from coreplane.profile import io as profiles
from coreplane.profile.records import Profile
from coreplane.validate import calibrate, commands, plan, predict, rounds
from coreplane.model.calibration import Calibration
from coreplane.validate.commands import Machine
from coreplane.validate.suite import Program, Suite, missing_programs, prepare_data
from coreplane.validate.suite import load as load_suite

FORMAT = "coreplane-validation/1"
# The bundled workloads (`make workloads`) every validation runs: null_call and gain_synth in the
# calibration (calibrate.py), walltime timing every native run (commands.py).
WORKLOADS = ("null_call", "gain_synth", "walltime")


@dataclass
class Options:
    """How a validation runs. `repetitions` rounds of every case (at least 5 for the goal), then
    more, up to `max_repetitions`, while the measurements' noise floor (predict.noise_floor) is
    above `until_noise_pct` (None: no more); `statistic` is the summary of the micro-benchmark
    used as f_c; `max_run_s` skips configurations projected to run longer; `nice` is the
    autogroup nice of every run."""

    quick: bool = False
    repetitions: int = 5
    until_noise_pct: float | None = None
    max_repetitions: int = 15
    statistic: str = "mean"
    max_run_s: float = 3.0
    compute_cores: str | None = None
    control_cores: str | None = None
    nice: int | None = -20
    progress: bool = True
    resume: bool = False

    def check(self) -> None:
        if self.repetitions < 1:
            raise CoreplaneError(f"--repetitions {self.repetitions}: at least 1")
        # `not x > 0`, not `x <= 0`: NaN (--until-noise nan) is neither.
        if self.until_noise_pct is not None and not self.until_noise_pct > 0:
            raise CoreplaneError(f"--until-noise {self.until_noise_pct}: must be positive")
        if self.until_noise_pct is not None and self.max_repetitions < self.repetitions:
            raise CoreplaneError(f"--max-repetitions {self.max_repetitions}: below --repetitions {self.repetitions}")
        if self.statistic not in calibrate.STATISTICS:
            raise CoreplaneError(f"--fc-statistic {self.statistic}: use {', '.join(calibrate.STATISTICS)}")
        if self.nice is not None and not -20 <= self.nice <= 19:
            raise CoreplaneError(f"--nice {self.nice}: a nice value runs from -20 to 19")
        if not self.max_run_s > 0:
            raise CoreplaneError(f"--max-run {self.max_run_s}: must be positive")


def default_out(kind: str, name: str) -> Path:
    """A fresh directory per invocation: kind/NAME-YYYYmmdd-HHMMSS."""
    return Path(kind) / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


def default_nice() -> int | None:
    """Root raises the runs' autogroup priority to −20 (other sessions' work cannot preempt them
    much); others leave it."""
    return -20 if os.geteuid() == 0 else None


@dataclass
class Prepared:
    """The state after calibration and profiling: what projections and validation runs start from."""

    suite: Suite
    out: Path
    options: Options
    machine: Machine
    calibration: Calibration
    profiles: dict[str, Profile]
    argv: dict[str, dict[float, list[str]]]          # program -> emulated γ -> command
    timings: dict[str, float] = field(default_factory=dict)


def _timeout(options: Options) -> float:
    return 4 * options.max_run_s + 20


def _forward_costs(options: Options) -> tuple[int, ...]:
    return calibrate.QUICK_FORWARD_COSTS if options.quick else calibrate.FORWARD_COSTS


def _start(out: Path, resume: bool) -> None:
    check_output_dir(out)
    if out.exists() and any(out.iterdir()) and not resume:
        raise CoreplaneError(f"{out}: exists and is not empty; continue it with --resume or choose another --out")
    out.mkdir(parents=True, exist_ok=True)


def measure_calibration(machine: Machine, gammas: set[float], out: Path, options: Options) -> Calibration:
    """The micro-benchmarks (validate/calibrate.py) run in rounds into the sweep `out`, read back."""
    fcs = _forward_costs(options)
    rounds.run("calibrate", calibrate.plan(machine, fcs, gammas, options.repetitions), out,
               options.repetitions, 1, _timeout(options), options.progress, strict=True)
    return calibrate.analyse(out, fcs, gammas)


def prepare(suite: Suite, out: Path, options: Options) -> Prepared:
    """Calibration micro-benchmarks, then a profile of every program (real programs first: the
    synthetic ones replay their mixes)."""
    options.check()
    out = out.resolve()   # runs see it from their own working directory
    missing = missing_programs(suite)
    if missing:
        raise CoreplaneError(f"suite {suite.name}: not installed: {', '.join(missing)} (make setup installs them)")
    # The cores and the bundled workloads before --out: a bad --compute-cores or an unbuilt
    # gain_synth must not leave OUT/data behind, which a second try then takes for an interrupted
    # validation to --resume.
    machine = Machine.resolve(options.compute_cores, options.control_cores, options.nice)
    for name in WORKLOADS:
        workload(name)
    _start(out, options.resume)
    data = prepare_data(out / "data")
    timings: dict[str, float] = {}

    started = time.monotonic()
    cal = measure_calibration(machine, {g for p in suite.programs for g in p.gammas}, out / "calibrate", options)
    (out / "calibration.json").write_text(json.dumps(cal.to_dict(), indent=1) + "\n")
    timings["calibrate_s"] = time.monotonic() - started

    started = time.monotonic()
    argv: dict[str, dict[float, list[str]]] = {}
    for p in suite.programs:
        if not p.synthetic:
            argv[p.name] = {1.0: p.argv(data, out_dir(out, p))}
    profs = _profile(suite, [p for p in suite.programs if not p.synthetic], argv, machine, out, options)
    for p in suite.programs:
        if p.synthetic:
            source = profs[p.synthetic.mix_from]
            argv[p.name] = {g: plan.synthetic_argv(p, source, cal, out / "mixes", g) for g in p.gammas}
    profs.update(_profile(suite, suite.programs, argv, machine, out, options))
    timings["profile_s"] = time.monotonic() - started
    return Prepared(suite, out, options, machine, cal, profs, argv, timings)


def out_dir(out: Path, program: Program) -> Path | None:
    """Where a program writes its outputs ({out} of its command), emptied before each run; None
    for synthetic programs, which write nothing."""
    return None if program.synthetic else out / "scratch" / program.name


# Profile runs per program; the one with the median wall time is kept. A single run of a
# 10 ms program is as noisy as the machine (the second held-out suite's profiles were 0.84–2.15x
# their programs' native medians), and `project` starts from the profile's wall time.
PROFILE_RUNS = 3


def _profile(suite: Suite, programs: list[Program], argv: dict, machine: Machine, out: Path,
             options: Options) -> dict[str, Profile]:
    """PROFILE_RUNS profiles per program (after one warm-up run), through the experiment engine;
    the median one by wall time is kept as OUT/profiles/NAME.json."""
    cases = [plan.profile_case(p, argv[p.name][1.0], machine, out_dir(out, p)) for p in programs]
    rounds.run("profile", cases, out / "profile", PROFILE_RUNS, 1, _timeout(options), options.progress, strict=True)
    files = rounds.run_files(out / "profile", commands.MEASURE)
    result = {}
    (out / "profiles").mkdir(exist_ok=True)
    for p in programs:
        if not files.get(p.name):
            raise CoreplaneError(f"{p.name}: the profile run failed; see `coreplane report {out / 'profile'}`")
        runs = sorted((rounds.read_json(f) for f in files[p.name]), key=lambda doc: doc["wall_ns"])
        keep = out / "profiles" / f"{p.name}.json"
        keep.write_text(json.dumps(profiles.fill_thread_ends(runs[(len(runs) - 1) // 2]), indent=1) + "\n")
        result[p.name] = profiles.load(keep)
    return result


def measure(prep: Prepared) -> dict:
    """Plans, runs and compares: the validation result document (format coreplane-validation/1,
    docs/formats.md), also written to OUT/validation.json."""
    opts, cal, out = prep.options, prep.calibration, prep.out
    started = time.monotonic()
    configs, skipped = [], []
    cases = calibrate.round_cases(prep.machine, _forward_costs(opts))
    for p in prep.suite.programs:
        prof = prep.profiles[p.name]
        chosen, skip = plan.configs(p, prof, cal, float(prof.wall_ns), opts.quick, opts.max_run_s)
        configs += chosen
        skipped += skip
        cases += plan.validation_cases(p, prep.argv[p.name], chosen, prep.machine, out_dir(out, p))
    more = None
    if opts.until_noise_pct is not None:
        def more() -> bool:
            floor = noise_now(out / "validate", configs)
            return floor is None or floor > opts.until_noise_pct
    rounds.run("validate", cases, out / "validate", opts.repetitions, 1, _timeout(opts), opts.progress,
               more=more, max_rounds=opts.max_repetitions)
    doc = score(prep, configs, skipped)
    prep.timings["validate_s"] = time.monotonic() - started
    doc["timings_s"] = prep.timings
    (out / "validation.json").write_text(json.dumps(doc, indent=1, default=_json_default) + "\n")
    return doc


def noise_now(out: Path, configs: list[plan.Config]) -> float | None:
    """The noise floor (percent) of the runs stored so far in `out`: whether another round is worth it."""
    walls = rounds.walls_by_round(out)
    return predict.noise_floor([{"noise": predict.round_noise(walls.get(plan.native_case(c.program), {}),
                                                              walls.get(c.case, {}))} for c in configs])


def score(prep: Prepared, configs: list[plan.Config], skipped: list[dict], figures_dir: Path | None = None) -> dict:
    """Every model's predictions against the runs stored in OUT/validate (configurations without a
    stored run are left out): the result document, with its figures drawn into `figures_dir`
    (default OUT/figures)."""
    from coreplane.validate import figures

    out = prep.out
    measured = rounds.medians(out / "validate")
    walls = rounds.walls_by_round(out / "validate")
    per_round = calibrate.per_round(out / "validate", _forward_costs(prep.options))
    subjects = {}
    in_rounds = round_profiles(out / "validate", walls)
    for p in prep.suite.programs:
        native = measured.get(plan.native_case(p.name))
        if native and native["n"]:
            subjects[p.name] = predict.Subject.of(p.name, in_rounds.get(p.name, prep.profiles[p.name]), native["median"],
                                                  bool(p.synthetic), walls.get(plan.native_case(p.name)))
    configs = [c for c in configs if c.program in subjects]
    handoffs = calibrate.handoffs(out / "validate", per_round, prep.calibration.native_call_ns)
    rows, fits = predict.table(subjects, configs, measured, walls, prep.calibration, per_round, prep.machine,
                               prep.options.statistic, handoffs)
    doc = summarize(prep, rows, fits, skipped, measured)
    doc["round_calibration"] = {str(r): c.to_dict() for r, c in per_round.items()}
    doc["figures"] = [str(f) for f in figures.draw_all(doc, figures_dir or out / "figures")]
    return doc


def round_profiles(out: Path, walls: dict[str, dict[int, float]]) -> dict[str, Profile]:
    """Per program, of its profile runs in the rounds (plan.profile_round_case), the one with the
    median wall time (`walls`, rounds.walls_by_round of `out`; only that run's profile is read):
    what the predictions start from. The runs that plan the validation (`_profile`) run back to
    back before the rounds, so one busy moment weighs on all three: the ninth held-out suite's
    were 1.13–2.71x their programs' `--delegate none` runs (mtree's 161 ms, 74 ms when profiled
    again on a quiet machine), and `project` starts from a profile's wall time. A validation
    stored before the rounds had profile runs keeps its first profiles."""
    files = rounds.run_files_by_round(out, commands.MEASURE)
    chosen = {}
    for case, by_round in walls.items():
        program = plan.program_of_profile_round(case)
        if program is None or not by_round:
            continue
        ranked = sorted(by_round, key=lambda r: by_round[r])
        path = files[case][ranked[(len(ranked) - 1) // 2]]
        chosen[program] = profiles.from_dict(profiles.fill_thread_ends(rounds.read_json(path)), str(path))
    return chosen


def rescore(out: Path) -> dict:
    """`coreplane validate --rescore OUT`: a finished validation scored again by the current models
    from what it stored (calibration, profiles, runs), running nothing; how a model change moves
    the figures of a suite already measured. Written to OUT/rescored/ (document and figures); the
    original validation.json is left as it was."""
    out = out.resolve()
    try:
        old = json.loads((out / "validation.json").read_text())
        stored_cal = json.loads((out / "calibration.json").read_text())
    except OSError as exc:
        raise CoreplaneError(f"{out}: not a finished validation ({exc.filename}: {exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise CoreplaneError(f"{out}: validation.json or calibration.json is not JSON: {exc}") from None
    suite = load_suite(old["suite"] if old["source"] == "built-in" else old["source"])
    options = Options(quick=old["quick"], repetitions=old["repetitions"], statistic=old["fc_statistic"],
                      max_run_s=float("inf"), progress=False)
    machine = Machine(old["machine"]["compute_cores"], old["machine"]["control_cores"], old["machine"].get("nice"))
    cal = Calibration.from_dict(stored_cal, str(out / "calibration.json"))
    profs = {p.name: profiles.load(out / "profiles" / f"{p.name}.json") for p in suite.programs}
    prep = Prepared(suite, out, options, machine, cal, profs, {}, {})
    configs = [c for p in suite.programs for c in plan.configs(p, profs[p.name], cal, float(profs[p.name].wall_ns),
                                                                options.quick, options.max_run_s)[0]]
    dest = out / "rescored"
    doc = score(prep, configs, old.get("skipped", []), dest / "figures")
    doc["rescored_from"] = str(out / "validation.json")
    dest.mkdir(exist_ok=True)
    (dest / "validation.json").write_text(json.dumps(doc, indent=1, default=_json_default) + "\n")
    return doc


def _json_default(value):
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def summarize(prep: Prepared, rows: list[dict], fits: dict, skipped: list[dict], measured: dict) -> dict:
    """The result document: MAPE per model (all rows, sequential, multithreaded, per program), the γ
    fits, the calibration, the machine, what was skipped and what failed."""
    models = (*predict.ESTIMATED, *predict.FITTED, *predict.ROUND_ONLY)
    seq = [r for r in rows if r["threads"] == 1]
    mt = [r for r in rows if r["threads"] > 1]
    programs = sorted({r["program"] for r in rows})
    per_program = {p: {m: predict.mape([r for r in rows if r["program"] == p], m)["mape_pct"] for m in models}
                   for p in programs}
    headline = predict.mape(rows, predict.HEADLINE)
    multithreaded = sorted({r["program"] for r in mt})
    goal = {"model": predict.HEADLINE, "mape_pct": headline["mape_pct"], "target_pct": 3.0,
            "programs": len(programs), "multithreaded_programs": len(multithreaded),
            "met": bool(headline["mape_pct"] is not None and headline["mape_pct"] <= 3.0 and len(programs) >= 10
                        and len(multithreaded) >= 3)}
    natives = {p.name: measured.get(plan.native_case(p.name)) for p in prep.suite.programs}
    return {
        "format": FORMAT, "suite": prep.suite.name, "source": prep.suite.source, "out": str(prep.out),
        "quick": prep.options.quick, "repetitions": prep.options.repetitions,
        "rounds": max((r["n"] for r in rows), default=0),
        "until_noise_pct": prep.options.until_noise_pct, "fc_statistic": prep.options.statistic,
        "machine": {**describe(), **prep.machine.as_dict()},
        "calibration": prep.calibration.to_dict(),
        "mape": {m: predict.mape(rows, m) for m in models},
        "mape_sequential": {m: predict.mape(seq, m)["mape_pct"] for m in models},
        "mape_multithreaded": {m: predict.mape(mt, m)["mape_pct"] for m in models},
        "noise_floor_pct": {"all": predict.noise_floor(rows), "sequential": predict.noise_floor(seq),
                            "multithreaded": predict.noise_floor(mt)},
        "mape_by_statistic": {f"{m}@{st}": predict.mape(rows, f"{m}@{st}")["mape_pct"]
                              for m in ("refined", "closed") for st in calibrate.STATISTICS},
        "per_program": per_program,
        "gamma_fit": fits,
        "goal": goal,
        "natives": {k: v for k, v in natives.items() if v},
        "rows": rows,
        "skipped": skipped,
        "failed": rounds.failures(prep.out / "validate"),
    }


def validate(suite: Suite, out: Path, options: Options) -> dict:
    """`coreplane validate`: prepare, then measure."""
    return measure(prepare(suite, out, options))
