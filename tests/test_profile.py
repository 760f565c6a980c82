"""Profiles (coreplane-profile/1): round trip, model inputs computed by hand, one-line errors for bad files."""

import copy
import json

import pytest

from conftest import REPO, run_cli
from coreplane.profile import io as profiles
from coreplane.core.errors import CoreplaneError
from coreplane.profile.io import ProfileError

FIXTURES = REPO / "tests" / "fixtures" / "profiles"
ALL = sorted(FIXTURES.glob("*.json"))


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_round_trip_keeps_every_field(path, tmp_path):
    prof = profiles.load(path)
    out = tmp_path / "again.json"
    profiles.save(prof, out)
    assert json.loads(out.read_text()) == json.loads(path.read_text())
    assert profiles.load(out).to_dict() == prof.to_dict()


def test_unknown_fields_survive_a_round_trip(tmp_path):
    doc = json.loads((FIXTURES / "tiny.json").read_text())
    doc["host"] = {"name": "node7"}
    doc["syscalls"][0]["max_ns"] = 123
    src = tmp_path / "extra.json"
    src.write_text(json.dumps(doc))
    out = tmp_path / "out.json"
    profiles.save(profiles.load(src), out)
    assert json.loads(out.read_text()) == doc


def test_save_leaves_no_temporary_file(tmp_path):
    profiles.save(profiles.load(FIXTURES / "tiny.json"), tmp_path / "p.json")
    assert [p.name for p in tmp_path.iterdir()] == ["p.json"]


def test_sequential_inputs_by_hand():
    prof = profiles.load(FIXTURES / "tiny.json")
    # Σ g = 10 000 + 20 000 + 20 000 + 100 000 + 50 000 = 200 000 ns; C = 1 000 000 − 200 000 (eq. 4).
    [seg] = prof.segments()
    assert seg.compute_ns == 800_000
    assert seg.syscall_ns == 200_000
    assert seg.calls["read"] == (100, 100_000)
    assert prof.system_share() == pytest.approx(0.2)
    assert not prof.multithreaded


def test_multithreaded_inputs_by_hand():
    prof = profiles.load(FIXTURES / "tiny-mt.json")
    main, worker = prof.segments()
    # main: lifetime 1 000 000, Σ g = 10 000 (clone) + 490 000 (futex) + 100 000 (read) → C = 400 000;
    # futex waits are left out of the busy calls.
    assert main.compute_ns == 400_000 and set(main.calls) == {"clone", "read"}
    # worker: lifetime 990 000, Σ g = 1 000 (futex) + 200 000 (write) → C = 789 000.
    assert worker.compute_ns == 789_000 and set(worker.calls) == {"write"}
    # p = (10 000 + 100 000 + 200 000) / (310 000 + 400 000 + 789 000) = 310 000 / 1 499 000
    assert prof.system_share() == pytest.approx(310_000 / 1_499_000)


def _mutate(edit):
    doc = json.loads((FIXTURES / "tiny.json").read_text())
    edit(doc)
    return doc


BAD = [
    (lambda d: d.pop("format"), "format: expected 'coreplane-profile/1', got null"),
    (lambda d: d.update(format="coreplane-profile/2"), "format: expected 'coreplane-profile/1'"),
    (lambda d: d.pop("wall_ns"), "wall_ns: missing"),
    (lambda d: d.update(wall_ns=0), "wall_ns: must be positive"),
    (lambda d: d.update(wall_ns="1s"), "wall_ns: expected a non-negative integer, got '1s'"),
    (lambda d: d["syscalls"][1].update(count=-1), "syscalls[1].count: expected a non-negative integer, got -1"),
    (lambda d: d["syscalls"][3].update(errors=101), "syscalls[3].errors: 101 errors but only 100 calls"),
    (lambda d: d["syscalls"][2].pop("total_ns"), "syscalls[2].total_ns: missing"),
    (lambda d: d["syscalls"][4].update(name="read"), "syscalls[4].name: 'read' appears twice"),
    (lambda d: d["syscalls"][0].update(delegated=4), "syscalls[0].delegated: local 4 + delegated 4 exceeds count 4"),
    (lambda d: d["syscalls"][0].update(forward_ns={"min": "fast"}), "syscalls[0].forward_ns.min: expected a non-negative number"),
    (lambda d: d["threads"][0].update(end_ns=-5), "threads[0].end_ns: expected a non-negative integer, got -5"),
    (lambda d: d["threads"][0].update(start_ns=2_000_000), "threads[0].end_ns: 1000000 is before start_ns 2000000"),
    (lambda d: d["threads"][0]["syscalls"][1].pop("name"), "threads[0].syscalls[1].name: missing"),
    (lambda d: d.update(config={"delegates": "two"}), "config.delegates: expected a non-negative integer"),
    (lambda d: d.update(argv=["tiny", 3]), "argv[1]: expected a string, got 3"),
]


@pytest.mark.parametrize("edit,message", BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_bad_profile_names_file_and_field(edit, message, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_mutate(edit)))
    with pytest.raises(ProfileError) as err:
        profiles.load(path)
    assert str(err.value).startswith(f"{path}: {message}")
    assert "\n" not in str(err.value)


def test_not_json_names_the_line(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{\n "format": "coreplane-profile/1",\n "wall_ns": 5,,\n}')
    with pytest.raises(CoreplaneError, match=rf"^{path}: line 3: not JSON"):
        profiles.load(path)


def test_cli_bad_profile_is_one_line_and_nonzero(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_mutate(lambda d: d["syscalls"][1].update(count="many"))))
    proc = run_cli("project", str(path))
    assert proc.returncode == 2
    assert proc.stderr == f"coreplane: error: {path}: syscalls[1].count: expected a non-negative integer, got 'many'\n"


def test_cli_missing_profile(tmp_path):
    proc = run_cli("project", str(tmp_path / "nope.json"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"coreplane: error: {tmp_path / 'nope.json'}: cannot read: No such file or directory"


def test_from_dict_does_not_modify_its_input():
    doc = json.loads((FIXTURES / "tiny-mt.json").read_text())
    before = copy.deepcopy(doc)
    profiles.from_dict(doc, "mem")
    assert doc == before
