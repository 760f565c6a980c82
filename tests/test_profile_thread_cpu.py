"""The profile's per-thread CPU time (`cpu_ns`, docs/formats.md) and what the closed model takes
from it: a worker asleep in a call that never returns is not mistaken for one that computed."""

import json
import subprocess

import pytest

from conftest import REPO, build_program
from coreplane.model.queueing import cpu_scale
from coreplane.profile import io as profiles

EXEC = REPO / "target" / "release" / "coreplane-exec"


@pytest.fixture(scope="module")
def idle_worker_profile(tmp_path_factory) -> dict:
    exe = build_program(tmp_path_factory, "idle_worker")
    out = exe.parent / "profile.json"
    run = subprocess.run([str(EXEC), "--profile", str(out), "--", str(exe)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and run.stdout == "done\n", run.stderr
    return json.loads(out.read_text())


@pytest.mark.parametrize("policy", ["none", "all"])
def test_each_thread_records_its_cpu_time(tmp_path_factory, tmp_path, policy):
    exe = build_program(tmp_path_factory, "idle_worker")
    out = tmp_path / "profile.json"
    run = subprocess.run([str(EXEC), "--delegate", policy, "--profile", str(out), "--", str(exe)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    threads = sorted(json.loads(out.read_text())["threads"], key=lambda t: t["tid"])
    assert len(threads) == 3
    main, idle, busy = threads   # created in this order
    # The busy thread ended itself (exit): its clock read as it left, within its lifetime.
    assert 20e6 <= busy["cpu_ns"] <= busy["end_ns"] - busy["start_ns"] + 1e6
    # The idle one was still in futex at exit_group, read through its clock id: next to nothing,
    # though its lifetime is as long as the busy thread's.
    assert idle["cpu_ns"] < 5e6 < idle["end_ns"] - idle["start_ns"]
    assert main["cpu_ns"] < busy["cpu_ns"]


def test_the_closed_model_scales_each_thread_by_its_own_cpu_time(idle_worker_profile):
    prof = profiles.from_dict(idle_worker_profile)
    r = dict(zip((t.tid for t in prof.threads), cpu_scale(prof)))
    tids = sorted(r)
    main, idle, busy = (r[t] for t in tids)
    assert idle < 0.05 and busy > 10 * idle
    # Without per-thread times one process-wide ratio shrinks the busy thread with the idle one.
    doc = json.loads(json.dumps(idle_worker_profile))
    for t in doc["threads"]:
        t.pop("cpu_ns")
    old = dict(zip(tids, cpu_scale(profiles.from_dict(doc))))
    assert old[tids[2]] == pytest.approx(old[tids[1]]) and old[tids[2]] < 0.75 * busy
