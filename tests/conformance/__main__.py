"""`python -m conformance` (from tests/): runs the corpora and writes docs/conformance.md.

    python -m conformance [--corpus programs,strace] [--only NAME,...] [--jobs N] [--out FILE]
                          [--modes none,all]
    python -m conformance --corpus '' (rewrites the report from the verdicts kept)

Each corpus's verdicts are kept in target/conformance/verdicts-CORPUS.json; the report is written
from every corpus's kept verdicts, so the corpora can be run (and re-run) separately. Modes other
than the default set (compare.OPTIONS: pool, vdso, fc20, mos, profile) keep their verdicts in
verdicts-CORPUS-MODE+MODE.json and their report in target/conformance/conformance-MODE+MODE.md."""

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import real_programs, report, strace_suite
from .compare import MODES, OPTIONS, REPO, Case, Verdict, judge
from .hang import KEPT as HANG
from .known import explain

WORK = REPO / "target" / "conformance" / "work"
LABELS = {"programs": "real programs", "strace": "strace test programs"}


def kept(name: str, modes: tuple[str, ...] = MODES) -> Path:
    return WORK.parent / f"verdicts-{name}{suffix(modes)}.json"


def suffix(modes: tuple[str, ...]) -> str:
    """'' for the default modes, '-pool+mos' for others: their verdicts and report are kept apart."""
    return "" if modes == MODES else "-" + "+".join(modes)


def run_all(cases: list[Case], jobs: int, label: str, modes: tuple[str, ...] = MODES) -> list[Verdict]:
    """Judges every case, `jobs` at a time, with one progress line per finished case on stderr."""
    done: list[Verdict] = []
    with ThreadPoolExecutor(jobs) as pool:
        for v in pool.map(lambda c: judge(c, WORK / label, modes), cases):
            done.append(v)
            flag = " ".join(f"{m}={o}" for m, o in v.outcome.items())
            print(f"[{label} {len(done)}/{len(cases)}] {v.case}: {flag}", file=sys.stderr, flush=True)
    return done


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m conformance", description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="programs,strace", help="programs, strace or both")
    ap.add_argument("--only", help="case names to run (comma-separated)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, help="the report (default docs/conformance.md for the default modes)")
    ap.add_argument("--modes", default=",".join(MODES), help=f"modes to compare in: {', '.join(OPTIONS)}")
    args = ap.parse_args()
    modes = tuple(filter(None, args.modes.split(",")))
    if not modes or any(m not in OPTIONS for m in modes):
        ap.error(f"--modes: {args.modes!r}: name modes among {', '.join(OPTIONS)}")
    out = args.out or (REPO / "docs" / "conformance.md" if modes == MODES else
                       WORK.parent / f"conformance{suffix(modes)}.md")
    only = set(args.only.split(",")) if args.only else None
    for name in filter(None, args.corpus.split(",")):
        if name == "programs":
            cases, missing = real_programs.cases()
        elif name == "strace":
            cases, missing = strace_suite.cases(), []
        else:
            ap.error(f"--corpus: unknown corpus {name!r} (programs, strace)")
        cases = [c for c in cases if only is None or c.name in only]
        start = time.monotonic()
        verdicts = [v.__dict__ for v in run_all(cases, args.jobs, name, modes)]
        if only and kept(name, modes).exists():  # a partial run replaces only its cases' verdicts
            again = {v["case"] for v in verdicts}
            verdicts += [v for v in json.loads(kept(name, modes).read_text())["verdicts"] if v["case"] not in again]
        kept(name, modes).write_text(json.dumps({"notes": missing, "seconds": time.monotonic() - start,
                                                 "verdicts": verdicts}, indent=1))
    corpora, notes, elapsed = {}, [], 0.0
    for name, label in LABELS.items():
        if kept(name, modes).exists():
            data = json.loads(kept(name, modes).read_text())
            corpora[label] = [Verdict(**v) for v in data["verdicts"]]
            notes += data["notes"]
            elapsed += data["seconds"]
    hang_result = json.loads(HANG.read_text()) if HANG.exists() else None
    report.write(out, corpora, notes, explain, elapsed, hang_result, modes)
    differ = sum("differ" in v.outcome.values() for vs in corpora.values() for v in vs)
    print(f"conformance: {out}: {differ} programs differ", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
