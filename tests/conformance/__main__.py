"""`python -m conformance` (from tests/): runs the corpora and writes docs/conformance.md.

    python -m conformance [--corpus programs,strace] [--only NAME,...] [--jobs N] [--out FILE]
    python -m conformance --corpus '' (rewrites the report from the verdicts kept)

Each corpus's verdicts are kept in target/conformance/verdicts-CORPUS.json; the report is written
from every corpus's kept verdicts, so the corpora can be run (and re-run) separately."""

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import real_programs, report, strace_suite
from .compare import REPO, Case, Verdict, judge
from .hang import KEPT as HANG
from .known import explain

WORK = REPO / "target" / "conformance" / "work"
LABELS = {"programs": "real programs", "strace": "strace test programs"}


def kept(name: str) -> Path:
    return WORK.parent / f"verdicts-{name}.json"


def run_all(cases: list[Case], jobs: int, label: str) -> list[Verdict]:
    """Judges every case, `jobs` at a time, with one progress line per finished case on stderr."""
    done: list[Verdict] = []
    with ThreadPoolExecutor(jobs) as pool:
        for v in pool.map(lambda c: judge(c, WORK / label), cases):
            done.append(v)
            flag = " ".join(f"{m}={o}" for m, o in v.outcome.items())
            print(f"[{label} {len(done)}/{len(cases)}] {v.case}: {flag}", file=sys.stderr, flush=True)
    return done


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m conformance", description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="programs,strace", help="programs, strace or both")
    ap.add_argument("--only", help="case names to run (comma-separated)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "conformance.md")
    args = ap.parse_args()
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
        verdicts = [v.__dict__ for v in run_all(cases, args.jobs, name)]
        if only and kept(name).exists():  # a partial run replaces only its cases' verdicts
            again = {v["case"] for v in verdicts}
            verdicts += [v for v in json.loads(kept(name).read_text())["verdicts"] if v["case"] not in again]
        kept(name).write_text(json.dumps({"notes": missing, "seconds": time.monotonic() - start,
                                          "verdicts": verdicts}, indent=1))
    corpora, notes, elapsed = {}, [], 0.0
    for name, label in LABELS.items():
        if kept(name).exists():
            data = json.loads(kept(name).read_text())
            corpora[label] = [Verdict(**v) for v in data["verdicts"]]
            notes += data["notes"]
            elapsed += data["seconds"]
    hang_result = json.loads(HANG.read_text()) if HANG.exists() else None
    report.write(args.out, corpora, notes, explain, elapsed, hang_result)
    differ = sum("differ" in v.outcome.values() for vs in corpora.values() for v in vs)
    print(f"conformance: {args.out}: {differ} programs differ", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
