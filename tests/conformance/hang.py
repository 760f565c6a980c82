"""The hang shape of issue 12, run many times under a watchdog: a 4-thread Python program hashing
files under /usr/share/doc (tests/programs/hash_docs.py) with `--delegate all --forward-cost 20000`,
every other run also writing a profile (`--profile`, where the issue saw most hangs).

    python -m conformance.hang [--runs 200] [--watchdog 60] [--json]

A run that has not ended when the watchdog fires is a hang: its whole session is killed. Prints
the hang rate per variant; exits 1 when any run hung or printed something other than the native
run."""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .compare import CLI, REPO

PROGRAM = REPO / "tests" / "programs" / "hash_docs.py"
SHAPE = ["--delegate", "all", "--forward-cost", "20000"]
DOCS = "/usr/share/doc"
KEPT = REPO / "target" / "conformance" / "hang.json"


def one_run(profile: Path | None, watchdog: float, files: int) -> tuple[str, float, bytes]:
    """('ok' | 'hang' | 'exit N'), seconds taken, stdout."""
    argv = [CLI, "run", *SHAPE, *(["--profile", str(profile)] if profile else []), "--",
            sys.executable, str(PROGRAM), DOCS, str(files)]
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=watchdog)
        return ("ok" if proc.returncode == 0 else f"exit {proc.returncode}"), time.monotonic() - start, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "hang", time.monotonic() - start, b""


def campaign(runs: int, watchdog: float, progress=None, files: int = 3000) -> dict:
    """Runs the shape `runs` times (hashing `files` files), alternating without and with a
    profile; counts per variant."""
    native = [sys.executable, str(PROGRAM), DOCS, str(files)]
    result = {v: {"runs": 0, "hangs": 0, "wrong": 0, "seconds": []} for v in ("plain", "profile")}
    with tempfile.TemporaryDirectory(prefix="coreplane-hang-") as tmp:
        for i in range(runs):
            variant = "profile" if i % 2 else "plain"
            # The reference is made right before each run: packages installed meanwhile change the tree.
            expected = subprocess.run(native, capture_output=True, check=True).stdout
            status, took, out = one_run(Path(tmp) / "p.json" if i % 2 else None, watchdog, files)
            r = result[variant]
            r["runs"] += 1
            r["hangs"] += status == "hang"
            r["wrong"] += status not in ("ok", "hang") or (status == "ok" and out != expected)
            r["seconds"].append(round(took, 2))
            if progress:
                shown = out.decode(errors="replace").strip()[:80] if out != expected else "as natively"
                progress(f"[hang {i + 1}/{runs}] {variant}: {status} in {took:.1f} s, {shown}")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m conformance.hang", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--watchdog", type=float, default=60.0, help="seconds before a run counts as hung")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = campaign(args.runs, args.watchdog, lambda line: print(line, file=sys.stderr, flush=True))
    # Kept for docs/conformance.md (python -m conformance writes it from there).
    KEPT.write_text(json.dumps({"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "result": result}))
    if args.json:
        print(json.dumps(result))
    for variant, r in result.items():
        s = sorted(r["seconds"]) or [0]
        print(f"{variant}: {r['hangs']} hangs and {r['wrong']} wrong results in {r['runs']} runs "
              f"({100 * r['hangs'] / max(r['runs'], 1):.1f} % hang), median {s[len(s) // 2]:.1f} s, "
              f"max {s[-1]:.1f} s")
    return 1 if any(r["hangs"] or r["wrong"] for r in result.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
