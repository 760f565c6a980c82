"""Runs for real: time-outs kill the process group, retries, failure classes, metrics, core sets, top-up."""

import json
import os
import sqlite3
import time
from pathlib import Path

from coreplane import dse
from machine_lock import machine_lock
from coreplane.core.cpulist import parse_cpu_list


def sweep(tmp_path, name="s", **spec):
    out = tmp_path / name
    summary = dse.run_sweep(dse.spec_from_dict({"repetitions": 1, **spec}), out, progress=False)
    db = sqlite3.connect(out / "store.sqlite")
    db.row_factory = sqlite3.Row
    return summary, db


def test_time_out_kills_the_whole_process_group(tmp_path):
    started = time.monotonic()
    summary, db = sweep(tmp_path, command="sleep 300 & echo $! > {rundir}/bg.pid; sleep 300", timeout=0.5)
    assert time.monotonic() - started < 10
    run = db.execute("SELECT * FROM runs").fetchone()
    assert run["status"] == "timeout" and run["timeout_s"] == 0.5 and "0.5 s time-out" in run["message"]
    assert 0.5 <= run["wall_s"] < 3
    background = int((Path(run["log_dir"]) / "bg.pid").read_text())
    assert not _alive(background), "the background child of the timed-out run survived"


def _alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (an orphan is reaped by init a moment later)."""
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        if state == "Z":
            return False
        time.sleep(0.05)
    return True


def test_failure_classes(tmp_path):
    summary, db = sweep(tmp_path, command="case {case} in exit) exit 3;; segv) kill -SEGV $$;; "
                                          "parse) echo no number;; ok) echo value 7;; esac",
                        parameters={"case": ["exit", "segv", "parse", "ok"]},
                        metrics=[{"source": "regex", "name": "value", "pattern": r"value (\d+)"}])
    rows = {json.loads(r["params"])["case"]: r for r in db.execute(
        "SELECT p.params, r.* FROM runs r JOIN points p USING(point_id)")}
    assert (rows["exit"]["status"], rows["exit"]["exit_code"]) == ("exit", 3)
    assert (rows["segv"]["status"], rows["segv"]["signal"]) == ("signal", 11)
    assert rows["parse"]["status"] == "parse" and "matched nothing in stdout" in rows["parse"]["message"]
    assert rows["ok"]["status"] == "ok"
    assert summary["failed"] == {"exit": 1, "signal": 1, "parse": 1} and summary["ok"] == 1
    metrics = dict(db.execute("SELECT name, value FROM metrics WHERE run_id = ?", (rows["ok"]["run_id"],)).fetchall())
    assert metrics["value"] == 7 and metrics["wall_s"] > 0


def test_retries_with_back_off_until_success(tmp_path):
    # Fails on the first two attempts, succeeds on the third.
    command = "n=$(cat {rundir}/count 2>/dev/null || echo 0); echo $((n+1)) > {rundir}/count; [ $n -ge 2 ]"
    started = time.monotonic()
    summary, db = sweep(tmp_path, command=command, retries={"count": 3, "backoff": 0.2, "on": ["exit"]})
    assert time.monotonic() - started >= 0.2 + 0.4      # backoff, then twice the backoff
    run = db.execute("SELECT status, attempts FROM runs").fetchone()
    assert tuple(run) == ("ok", 3)
    assert [r[0] for r in db.execute("SELECT status FROM attempts ORDER BY id")] == ["exit", "exit", "ok"]


def test_retries_run_out_and_other_failures_are_not_retried(tmp_path):
    summary, db = sweep(tmp_path, command="exit {code}", parameters={"code": [4]},
                        retries={"count": 2, "backoff": 0, "on": ["exit"]})
    assert tuple(db.execute("SELECT status, attempts FROM runs").fetchone()) == ("exit", 3)
    summary, db = sweep(tmp_path, "b", command="exit 4", retries={"count": 2, "backoff": 0})  # on: timeout, signal
    assert tuple(db.execute("SELECT status, attempts FROM runs").fetchone()) == ("exit", 1)


def test_adaptive_time_out_learns_from_the_size_class_with_a_floor(tmp_path):
    # Repetition 0 takes 0.1 s; later ones would hang but get max(floor 0.6, 3 x 0.1) = 0.6 s.
    summary, db = sweep(tmp_path, command="if [ {rep} = 0 ]; then sleep 0.1; else sleep 30; fi",
                        repetitions=2, timeout={"adaptive": True, "factor": 3, "floor": 0.6})
    first, second = db.execute("SELECT status, timeout_s FROM runs ORDER BY rep").fetchall()
    assert tuple(first) == ("ok", None)
    assert tuple(second) == ("timeout", 0.6)


def test_metrics_from_time_json_and_profile(tmp_path):
    profile = {"format": "coreplane-profile/1", "wall_ns": 1000, "user_ns": 600, "sys_ns": 300,
               "syscalls": [{"name": "read", "nr": 0, "count": 4, "errors": 0, "total_ns": 200, "delegated": 4},
                            {"name": "write", "nr": 1, "count": 2, "errors": 0, "total_ns": 50, "delegated": 0}]}
    (tmp_path / "profile.json").write_text(json.dumps(profile))
    # Literal braces are doubled in templates, as in Python's str.format.
    command = (f"cp {tmp_path}/profile.json {{rundir}}/profile.json; "
               "echo '{{\"result\": {{\"rates\": [1.5, 2.5]}}, \"ok\": true}}'; "
               "head -c 2000000 /dev/zero | gzip -1 > /dev/null")
    summary, db = sweep(tmp_path, command=command, metrics=[
        {"source": "time"}, {"source": "profile"},
        {"source": "json", "fields": {"rate": "result.rates.1", "passed": "ok"}}])
    assert summary["ok"] == 1, db.execute("SELECT message FROM runs").fetchone()[0]
    m = dict(db.execute("SELECT name, value FROM metrics").fetchall())
    assert m["rate"] == 2.5 and m["passed"] == 1.0
    assert m["wall_ns"] == 1000 and m["syscalls"] == 6 and m["syscall_ns"] == 250 and m["delegated"] == 4
    assert m["system_share"] == 0.25 and m["syscall.read.count"] == 4
    assert m["max_rss_kb"] > 0 and m["user_s"] >= 0 and m["sys_s"] >= 0 and m["elapsed_s"] >= 0


def test_parallel_runs_get_disjoint_core_sets(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    assert len(cpus) >= 2, "needs two CPUs"
    out = tmp_path / "par"
    spec = dse.spec_from_dict({"command": "grep Cpus_allowed_list /proc/self/status; echo {cpus}; sleep 0.2",
                               "parameters": {"i": list(range(6))}, "repetitions": 1})
    with machine_lock():   # a cell test moving every process to its control cores would narrow the masks
        summary = dse.run_sweep(spec, out, parallel=2, progress=False)
    assert summary["ok"] == 6 and "2 in parallel" in summary["executor"]
    db = sqlite3.connect(out / "store.sqlite")
    seen = set()
    for log_dir, label in db.execute("SELECT log_dir, cpus FROM runs"):
        allowed, echoed = (Path(log_dir) / "stdout").read_text().splitlines()
        assert parse_cpu_list(allowed.split(":")[1]) == parse_cpu_list(label) == parse_cpu_list(echoed)
        seen.add(label)
    assert len(seen) == 2 and not set(parse_cpu_list(seen.pop())) & set(parse_cpu_list(seen.pop()))


def test_noisy_points_are_topped_up_to_the_maximum(tmp_path):
    summary, db = sweep(tmp_path, command="echo v=$(( {rep} % 2 * 10 + 1 ))", repetitions=2,
                        metrics=[{"source": "regex", "name": "v", "pattern": r"v=(\d+)"}],
                        statistics={"metric": "v", "cv_threshold": 0.1, "max_repetitions": 6})
    assert summary["ok"] == 6 and summary["this_invocation"]["topped_up_points"] == 2   # 2 -> 4 -> 6
    row = dse.summary(tmp_path / "s", ["v"]).iloc[0]
    assert row["n"] == 6 and row["cv_flag"]


def test_warm_ups_run_first_and_stay_out_of_the_statistics(tmp_path):
    summary, db = sweep(tmp_path, command="echo {rep} >> " + str(tmp_path / "order"), repetitions=2, warmups=2)
    assert (tmp_path / "order").read_text().split() == ["-1", "-2", "0", "1"]
    assert summary["this_invocation"]["warmups"] == 2 and summary["runs"] == 2
    assert dse.summary(tmp_path / "s", ["wall_s"]).iloc[0]["n"] == 2
