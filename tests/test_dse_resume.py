"""kill -9 of the runner mid-sweep, then --resume: no run lost, none duplicated, orphans killed."""

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections import Counter

from conftest import CLI, run_cli
from coreplane.dse import load_spec, run_sweep


def _count(store, sql: str) -> int:
    if not store.exists():
        return 0
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=10)
    try:
        return db.execute(sql).fetchone()[0]
    except sqlite3.OperationalError:   # tables not created yet
        return 0
    finally:
        db.close()


def _kill_runner_when(spec, out, sql: str, at_least: int, seconds: float = 60) -> None:
    """Starts `coreplane sweep` and kill -9s it as soon as `sql` counts `at_least` rows in its store."""
    proc = subprocess.Popen([*CLI, "sweep", str(spec), "--out", str(out), "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + seconds
    while _count(out / "store.sqlite", sql) < at_least:
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the sweep made no progress"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_kill_9_then_resume_loses_and_duplicates_no_run(tmp_path):
    ledger = tmp_path / "ledger"
    spec = tmp_path / "s.toml"
    spec.write_text(f"""
command = "echo {{run_id}} >> {ledger}; sleep 0.03; echo value {{a}}{{b}}"
repetitions = 3
[parameters]
a = [1, 2, 3]
b = [4, 5, 6, 7]
[[metrics]]
source = "regex"
name = "value"
pattern = 'value (\\d+)'
""")
    out = tmp_path / "out"
    store = out / "store.sqlite"
    _kill_runner_when(spec, out, "SELECT count(*) FROM runs WHERE status = 'ok'", 12)
    db = sqlite3.connect(store)
    done_before = {r for (r,) in db.execute("SELECT run_id FROM runs WHERE status = 'ok'")}
    assert 12 <= len(done_before) < 36, "kill the runner in the middle of the sweep"
    db.close()

    resumed = run_cli("sweep", str(spec), "--out", str(out), "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    doc = json.loads(resumed.stdout)
    assert doc["ok"] == doc["runs"] == 36 and doc["failed"] == {}
    assert doc["this_invocation"]["kept_from_before"] == len(done_before)
    assert doc["this_invocation"]["ran"] == 36 - len(done_before)

    db = sqlite3.connect(store)
    assert db.execute("SELECT count(*), count(DISTINCT point_id || '/' || rep) FROM runs").fetchone() == (36, 36)
    assert db.execute("SELECT count(*) FROM metrics WHERE name = 'value'").fetchone()[0] == 36
    assert db.execute("SELECT count(*) FROM attempts WHERE status = 'ok'").fetchone()[0] == 36
    executed = Counter(ledger.read_text().split())
    assert set(executed) == {r for (r,) in db.execute("SELECT run_id FROM runs")}
    assert all(executed[r] == 1 for r in done_before), "a run finished before the kill ran again"
    assert sum(executed.values()) - 36 <= 1, "more than the one interrupted run ran twice"


def test_resume_kills_the_orphan_of_a_killed_runner(tmp_path):
    spec = tmp_path / "hang.toml"
    spec.write_text('command = "sleep 300"\nrepetitions = 1\ntimeout = 1\n')
    out = tmp_path / "out"
    store = out / "store.sqlite"
    _kill_runner_when(spec, out, "SELECT count(*) FROM runs WHERE status = 'running' AND pid IS NOT NULL", 1)
    (orphan,) = sqlite3.connect(store).execute("SELECT pid FROM runs").fetchone()
    os.kill(orphan, 0)                       # still running after its runner died
    resumed = run_cli("sweep", str(spec), "--out", str(out), "--resume", "--json")
    doc = json.loads(resumed.stdout)
    assert doc["this_invocation"]["recovered"] == 1 and doc["failed"] == {"timeout": 1}
    time.sleep(0.2)
    state = open(f"/proc/{orphan}/stat").read().rsplit(")", 1)[1].split()[0] if os.path.exists(f"/proc/{orphan}") else "gone"
    assert state in ("gone", "Z")


def test_a_second_sweep_into_the_same_directory_needs_resume(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('command = "echo {x}"\nrepetitions = 1\n[parameters]\nx = [1, 2]\n')
    out = tmp_path / "out"
    run_sweep(load_spec(spec), out, progress=False)
    again = run_cli("sweep", str(spec), "--out", str(out))
    assert again.returncode == 2
    assert again.stderr == (f"coreplane: error: {out}: already holds a sweep (2 runs); continue it with --resume "
                            f"or choose another --out\n")
    # a grown spec: --resume runs only the new point
    spec.write_text('command = "echo {x}"\nrepetitions = 1\n[parameters]\nx = [1, 2, 3]\n')
    doc = run_sweep(load_spec(spec), out, resume=True, progress=False)
    assert doc["this_invocation"]["ran"] == 1 and doc["this_invocation"]["kept_from_before"] == 2
