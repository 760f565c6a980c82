"""The per-machine calibration `coreplane project` uses (issue 13): the file round-trips, f_c
between measured forward costs follows the forward cost, bad files are one-line errors, and a
calibration of another machine, or a profile that names none, is warned about."""

import json
import shutil

import pytest

from conftest import REPO, cli_json, run_cli
from coreplane.core.errors import CoreplaneError
from coreplane.model import calibration as calibrations

FIXTURE = REPO / "tests" / "fixtures" / "calibration.json"
PROFILES = REPO / "tests" / "fixtures" / "profiles"


def test_file_round_trips(tmp_path):
    stored = calibrations.load(FIXTURE)
    again = calibrations.load(calibrations.save(stored.calibration, stored.machine, tmp_path / "c.json"))
    assert again.calibration == stored.calibration and again.machine == stored.machine


def test_fc_between_measured_forward_costs_adds_the_forward_cost():
    cal = calibrations.load(FIXTURE).calibration
    assert sorted(cal.forward) == [0, 10_000, 1_000_000]
    assert cal.fc_ns(10_000) == cal.forward[10_000].mean / 2
    assert cal.fc_ns(20_000) == pytest.approx(cal.forward[10_000].mean / 2 + 10_000)
    assert cal.fc_ns(3140) == pytest.approx(cal.forward[0].mean / 2 + 3140)


@pytest.mark.parametrize("edit,message", [
    (lambda text: text[:len(text) // 2], "not JSON"),
    (lambda text: text.replace('"coreplane-calibration/1"', '"coreplane-calibration/9"'),
     "format: expected coreplane-calibration/1, found 'coreplane-calibration/9'"),
    (lambda text: text.replace('"local_ns"', '"lokal_ns"'), "calibration.local_ns: missing"),
])
def test_bad_files_are_one_line_errors(tmp_path, edit, message):
    bad = tmp_path / "bad.json"
    bad.write_text(edit(FIXTURE.read_text()))
    with pytest.raises(CoreplaneError, match=message):
        calibrations.load(bad)
    proc = run_cli("project", str(PROFILES / "tiny.json"), "--calibration", str(bad))
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1 and str(bad) in proc.stderr


def test_project_uses_the_calibration_and_names_it(tmp_path):
    args = ("project", str(PROFILES / "bzip2.json"), "--forward-cost", "3140", "--delegate", "mckernel")
    bare = cli_json(*args, "--no-calibration")
    used = cli_json(*args, "--calibration", str(FIXTURE))
    cal = calibrations.load(FIXTURE).calibration
    assert bare["calibration"] is None
    assert used["calibration"]["file"] == str(FIXTURE) and used["calibration"]["fc_ns"] > cal.fc_ns(3140)
    # The runtime's round trip, interposition and start-up all cost something.
    assert used["answer"]["speedup"] < bare["answer"]["speedup"]
    # The profile's wall already holds the start-up of its own (non-delegating) run: a run of
    # the same policy as the profile's adds none; a delegating one the difference.
    assert used["calibration"]["profiled_startup_ns"] == cal.startup_ns
    same = cli_json("project", str(PROFILES / "bzip2.json"), "--delegate", "none", "--calibration", str(FIXTURE))
    assert same["answer"]["time_ns"] == pytest.approx(same["wall_ns"])
    # The per-user file is the default.
    default = calibrations.default_path()
    default.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURE, default)
    try:
        assert cli_json(*args)["calibration"]["file"] == str(default)
    finally:
        default.unlink()


def test_a_calibration_of_another_machine_is_warned_about(tmp_path):
    doc = json.loads((PROFILES / "tiny.json").read_text())
    doc["machine"] = {"id": "0" * 32, "hostname": "elsewhere"}
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc))
    warnings = cli_json("project", str(other), "--calibration", str(FIXTURE))["warnings"]
    assert any("belongs to another machine" in w and "elsewhere" in w for w in warnings), warnings
    unnamed = cli_json("project", str(PROFILES / "tiny.json"), "--calibration", str(FIXTURE))["warnings"]
    assert any("does not say which machine" in w for w in unnamed), unnamed
    doc["machine"]["id"] = calibrations.load(FIXTURE).machine["id"]
    doc["tlb_shootdowns"] = 3
    other.write_text(json.dumps(doc))
    assert cli_json("project", str(other), "--calibration", str(FIXTURE))["warnings"] == []


def test_tlb_shootdowns_are_charged_once_a_process_delegates(tmp_path):
    """The TLB flushes the profiled run counted cost `shootdown_ns` more each once a process
    delegates, at most one per delegated call; nothing without delegation; a profile without a
    count is warned about."""
    doc = json.loads((PROFILES / "bzip2.json").read_text())
    cal = calibrations.load(FIXTURE).calibration
    projected = {}
    for count in (0, 250):
        doc["tlb_shootdowns"] = count
        path = tmp_path / f"bzip2-{count}.json"
        path.write_text(json.dumps(doc))
        for policy in ("none", "all"):
            out = cli_json("project", str(path), "--calibration", str(FIXTURE), "--delegate", policy)
            assert not any("TLB" in w for w in out["warnings"])
            projected[count, policy] = out
    charged = 250 * cal.shootdown_ns   # bzip2's profile delegates more than 250 calls under all
    assert projected[250, "all"]["calibration"]["shootdowns_ns"] == pytest.approx(charged)
    assert projected[250, "none"]["calibration"]["shootdowns_ns"] == 0
    added = projected[250, "all"]["answer"]["time_ns"] - projected[0, "all"]["answer"]["time_ns"]
    assert added == pytest.approx(charged, rel=1e-6)
    assert projected[250, "none"]["answer"]["time_ns"] == projected[0, "none"]["answer"]["time_ns"]
    doc["tlb_shootdowns"] = 10 ** 6   # more flushes than delegated calls: one per call is charged
    path.write_text(json.dumps(doc))
    capped = cli_json("project", str(path), "--calibration", str(FIXTURE), "--delegate", "all")
    delegated = capped["policy"]["delegated_calls"]
    assert 250 < delegated < 10 ** 6
    assert capped["calibration"]["shootdowns_ns"] == pytest.approx(delegated * cal.shootdown_ns)
    assert capped["calibration"]["shootdowns_charged"] == delegated
    unknown = cli_json("project", str(PROFILES / "bzip2.json"), "--calibration", str(FIXTURE), "--delegate", "all")
    assert unknown["calibration"]["shootdowns"] is None
    assert any("no count of TLB flushes" in w for w in unknown["warnings"]), unknown["warnings"]


def test_project_gives_the_answer_at_each_placement_calibration_saw(tmp_path):
    # Session 9: the host moved the vCPUs during calibration (round trips of 150 and 530 ns at no
    # forward cost). The answer stays the calibration's; beside it, the answer at either end.
    doc = json.loads(FIXTURE.read_text())
    args = ("project", str(PROFILES / "bzip2.json"), "--delegate", "all")
    assert "placements" not in cli_json(*args, "--calibration", str(FIXTURE))["answer"]   # an older file: none
    for placements, seen in (([150.0, 160.0, 530.0], True), ([150.0, 200.0], False)):
        path = tmp_path / "placed.json"
        path.write_text(json.dumps({**doc, "calibration": {**doc["calibration"], "placements_ns": placements}}))
        answer = cli_json(*args, "--calibration", str(path))["answer"]
        assert ("placements" in answer) == seen
        if seen:
            ends = answer["placements"]
            assert ends["round_trip_ns"] == [150.0, 530.0] and ends["speedup"][0] > ends["speedup"][1]
            assert ends["time_ns"][0] < ends["time_ns"][1]
    path.write_text(json.dumps({**doc, "calibration": {**doc["calibration"], "placements_ns": [150.0, 530.0]}}))
    assert "placements" in cli_json(*args, "--calibration", str(path))["answer"]
    none = cli_json("project", str(PROFILES / "bzip2.json"), "--delegate", "none", "--calibration", str(path))
    assert "placements" not in none["answer"]
