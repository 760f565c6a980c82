"""`coreplane project` as users and scripts see it: JSON equal to the API, saturation, plots, one-line errors."""

import json

import pytest

from conftest import REPO, cli_json, run_cli
from coreplane.model.naive import naive
from coreplane.model.policies import Policy
from coreplane.model.projection import HEADLINE
from coreplane.model.queueing import closed
from coreplane.model.refined import refined
from coreplane.profile import io as profiles

FIXTURES = REPO / "tests" / "fixtures" / "profiles"


def test_listed_in_root_help():
    assert "project" in run_cli("--help", check=True).stdout


def test_json_matches_the_models():
    path = FIXTURES / "bzip2.json"
    doc = cli_json("project", str(path), "--gamma", "1.04", "--forward-cost", "3140", "--delegate", "mckernel")
    prof = profiles.load(path)
    pol = Policy("mckernel")
    assert doc["parameters"] == {"gamma": 1.04, "fc_ns": 3140.0, "round_trip_ns": 6280.0, "delegates": 1,
                                 "compute_cores": doc["parameters"]["compute_cores"], "control_cores": 1}
    assert doc["naive"]["speedup"] == pytest.approx(naive(prof, 1.04).speedup)
    assert doc["refined"]["speedup"] == pytest.approx(refined(prof, 1.04, 3140.0, pol).speedup)
    # One thread: no open queue can form, and the answer (the closed model) is eq. 11's.
    assert doc["queueing"]["applicable"] is False and "own delegated call" in doc["queueing"]["reason"]
    assert doc["answer"]["model"] == "closed" == HEADLINE
    assert doc["answer"]["speedup"] == pytest.approx(doc["closed"]["speedup"])
    assert doc["closed"]["speedup"] == pytest.approx(doc["refined"]["speedup"])
    assert "read" in doc["policy"]["delegated"] and "mmap" not in doc["policy"]["delegated"]
    assert doc["policy"]["calls"] == 11659 and doc["p"] == pytest.approx(prof.system_share())
    # bzip2 is syscall-bound enough that a 6.28 µs round trip on 11 626 calls eats the 4 % gain.
    assert doc["naive"]["speedup"] > 1.0 > doc["refined"]["speedup"]
    assert doc["warnings"] == [] and doc["plots"] == []


def test_hand_vector_through_the_cli():
    # tiny, γ = 2, f_c = 1 µs, min-frequency 50 %: S_r = 1e6 / 720 000 (test_model_refined)
    doc = cli_json("project", str(FIXTURES / "tiny.json"), "--gamma", "2", "--forward-cost", "1000",
                   "--delegate", "min-frequency", "--share", "0.5")
    assert doc["refined"]["speedup"] == pytest.approx(1e6 / 720_000)
    assert doc["policy"]["delegated"] == ["mmap", "write"] and doc["policy"]["delegated_calls"] == 60


def test_saturation_is_reported_not_a_number():
    args = ("project", str(FIXTURES / "tiny-mt.json"), "--gamma", "2", "--forward-cost", "1000")
    doc = cli_json(*args)
    assert doc["queueing"]["saturated"] is True and doc["queueing"]["speedup"] is None
    assert doc["queueing"]["load"] > 1
    assert any("multithreaded profile" in w for w in doc["warnings"])
    human = run_cli(*args, check=True).stdout
    assert "saturated" in human and "load 1.023 ≥ 1" in human
    two = cli_json(*args, "--delegate-threads", "2")
    assert two["queueing"]["model"] == "M/M/2" and two["queueing"]["speedup"] > 0
    # The answer stays a number: the closed model never lets a queue outgrow the threads.
    prof = profiles.load(FIXTURES / "tiny-mt.json")
    assert doc["answer"]["speedup"] == pytest.approx(
        closed(prof, 2.0, 1000.0, Policy("all"), compute_cores=doc["parameters"]["compute_cores"]).speedup)


def test_profile_measured_with_delegation_is_flagged(tmp_path):
    doc = json.loads((FIXTURES / "tiny.json").read_text())
    doc["config"]["policy"] = "all"
    doc["syscalls"][3].update(local=0, delegated=100)
    path = tmp_path / "delegated.json"
    path.write_text(json.dumps(doc))
    out = cli_json("project", str(path))
    assert any("measured with delegation (policy all)" in w for w in out["warnings"])


def test_plot_draws_the_sensitivity_figures(tmp_path):
    doc = cli_json("project", str(FIXTURES / "xz-T2.json"), "--gamma", "2", "--forward-cost", "10000",
                   "--plot", str(tmp_path / "figs"))
    names = sorted(p.name for p in (tmp_path / "figs").iterdir())
    assert names == ["fig2-naive.png", "fig4-policies-gamma.png", "fig5-gamma-fc.png", "fig7-fc-share.png",
                     "fig8-gamma-share.png", "fig9-policies-fc.png"]
    assert sorted(doc["plots"]) == sorted(str(tmp_path / "figs" / n) for n in names)
    for name in names:
        data = (tmp_path / "figs" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_human_output_names_every_model():
    out = run_cli("project", str(FIXTURES / "gcc.json"), "--delegate", "mos", "--gamma", "1.04",
                  "--forward-cost", "3230", check=True).stdout
    for text in ("naive (eq. 3)", "refined (eq. 4–11)", "open queue M/M/1", "closed MVA ◀ answer", "answer: speedup", "policy mos", "system share p"):
        assert text in out


@pytest.mark.parametrize("args,message", [
    (["--gamma", "0"], "--gamma 0.0: must be positive"),
    (["--forward-cost", "-5"], "project: Invalid value for '--forward-cost': -5.0 is not in the range x>=0."),
    (["--share", "1.5", "--delegate", "random"], "--share 1.5: must be between 0 and 1"),
    (["--delegate", "read,wirte"], "--delegate read,wirte: 'wirte' is not an x86-64 syscall name"),
    (["--delegate-threads", "0"], "project: Invalid value for '--delegate-threads': 0 is not in the range x>=1."),
])
def test_bad_options_are_one_line(args, message):
    proc = run_cli("project", str(FIXTURES / "tiny.json"), *args)
    assert proc.returncode == 2
    assert proc.stderr == f"coreplane: error: {message}\n"


def test_a_listed_call_the_profile_never_made_is_a_warning():
    doc = cli_json("project", str(FIXTURES / "bzip2.json"), "--delegate", "read,mount", "--no-calibration")
    assert doc["warnings"] == ["--delegate: the profile never made mount: nothing of it to delegate"]
    assert doc["policy"]["delegated"] == ["read"]


def test_processes_running_side_by_side_are_warned_about(tmp_path):
    """A pipeline's stages wait on each other through delegated pipe calls, which the models do
    not see: three processes alive at once get a warning, processes one after another do not."""
    doc = json.loads((FIXTURES / "tiny.json").read_text())
    warned = {}
    for name, spans in (("pipeline", [(0, 100), (10, 90), (20, 80)]), ("sequence", [(0, 100), (10, 40), (50, 90)])):
        doc["processes"] = [{"pid": 10 + i, "start_ns": a, "end_ns": b} for i, (a, b) in enumerate(spans)]
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        assert profiles.load(path).most_processes_at_once() == (3 if name == "pipeline" else 2)
        warnings = cli_json("project", str(path), "--no-calibration", "--delegate", "all")["warnings"]
        warned[name] = any("ran at once" in w for w in warnings)
        none = cli_json("project", str(path), "--no-calibration", "--delegate", "none")["warnings"]
        assert not any("ran at once" in w for w in none)
    assert warned == {"pipeline": True, "sequence": False}


def test_the_unseen_time_is_named_in_the_answer(tmp_path):
    """The profile's time the closed model does not rebuild (a sleep the profiler did not time)
    is in the JSON and named in the human output; a profile with none shows nothing."""
    from test_model_closed import _fio_like
    for sleep, named in ((100_000_000, True), (0, False)):
        path = tmp_path / f"fio-{sleep}.json"
        profiles.save(_fio_like(sleep), path)
        args = ("project", str(path), "--no-calibration", "--delegate", "write", "--forward-cost", "20000",
                "--compute-cores", "1")
        assert (cli_json(*args)["closed"]["unseen_ns"] > 40_000_000) is named
        assert ("rebuilt" in run_cli(*args, check=True).stdout) is named
