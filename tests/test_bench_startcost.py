"""`python -m coreplane.bench.startcost`: every workload runs natively and under each runtime, and
its table reads back from the JSON (one round here; the benchmark's figures are in
docs/benchmarks.md)."""

import json
import subprocess
import sys

from coreplane.bench import startcost


def test_every_workload_runs_under_every_runtime(monkeypatch, tmp_path):
    monkeypatch.setattr(startcost, "ROUNDS", 1)
    doc = startcost.measure()
    pairs = {(r["workload"], r["runtime"]) for r in doc["rows"]}
    assert len(pairs) == len(doc["rows"]) == 4 * 3
    assert all(r["wall_us"] > 0 and r["cpu_us"] > 0 for r in doc["rows"])
    assert all(r["ratio"] == 1.0 for r in doc["rows"] if r["runtime"] == "native")
    saved = tmp_path / "s.json"
    saved.write_text(json.dumps(doc))
    proc = subprocess.run([sys.executable, "-m", "coreplane.bench.startcost", "--from", str(saved)],
                          capture_output=True, text=True, check=True)
    assert "python3 subprocess.run x100" in proc.stdout and "--rewrite-at 1" in proc.stdout


def test_a_build_without_a_binary_is_named(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "coreplane.bench.startcost", "--json", "--build", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and f"--build {tmp_path}: no " in proc.stderr
