"""Delegation policies: share policies by hand, seeded random, explicit lists, presets and their data file."""

import json

import pytest

from conftest import REPO
from coreplane.core.errors import CoreplaneError
from coreplane.model import policies
from coreplane.model.policies import Policy
from coreplane.profile import io as profiles

FIXTURES = REPO / "tests" / "fixtures" / "profiles"
TINY = profiles.load(FIXTURES / "tiny.json")
# tiny: futex 4 (always local), getppid 1000, mmap 10, read 100, write 50 → 4 candidates.


def test_presets_file_is_valid_for_the_runtime():
    doc = json.loads(policies.PRESETS_FILE.read_text())
    assert doc["format"] == "coreplane-presets/1"
    names = set(doc["always_local"])
    for preset in doc["presets"].values():
        names |= set(preset["local"])
        assert len(preset["local"]) == len(set(preset["local"]))
    assert names <= policies.known_syscalls(), names - policies.known_syscalls()


def test_share_policies_by_hand():
    counts = TINY.counts()
    # k = round(0.5 × 4) = 2: the two least (mmap 10, write 50) or most (getppid 1000, read 100) invoked.
    assert Policy("min-frequency", 0.5).delegated(counts) == {"mmap", "write"}
    assert Policy("max-frequency", 0.5).delegated(counts) == {"getppid", "read"}
    # 0.9 × 4 = 3.6 → 4; 0.1 × 4 = 0.4 → 0
    assert Policy("min-frequency", 0.9).delegated(counts) == {"getppid", "mmap", "read", "write"}
    assert Policy("max-frequency", 0.1).delegated(counts) == set()
    assert Policy("all").delegated(counts) == {"getppid", "mmap", "read", "write"}
    assert Policy("none").delegated(counts) == set()


def test_random_policy_is_seeded():
    counts = profiles.load(FIXTURES / "gcc.json").counts()
    picks = {seed: Policy("random", 0.5, seed).delegated(counts) for seed in range(5)}
    assert picks[3] == Policy("random", 0.5, 3).delegated(counts)
    assert len(set(picks.values())) > 1
    candidates = set(counts) - policies.always_local()
    assert all(len(p) == round(0.5 * len(candidates)) and p <= candidates for p in picks.values())


def test_thread_bound_calls_are_never_delegated():
    counts = profiles.load(FIXTURES / "xz-T2.json").counts()
    for kind in ("all", "max-frequency", "random", "mckernel", "mos"):
        chosen = Policy(kind, 1.0).delegated(counts)
        assert not chosen & {"futex", "clone3", "rt_sigprocmask", "set_robust_list", "rseq"}, kind


def test_not_intercepted_calls_stay_local():
    assert "getppid" not in Policy("all").delegated(TINY.counts(), frozenset({"getppid"}))


def test_presets_on_bzip2():
    counts = profiles.load(FIXTURES / "bzip2.json").counts()
    mck = Policy("mckernel").delegated(counts)
    mos = Policy("mos").delegated(counts)
    # McKernel handles memory calls itself and forwards file I/O (read forwards internally).
    assert {"read", "write", "openat", "close", "newfstatat"} <= mck
    assert not mck & {"mmap", "munmap", "mprotect", "brk"}
    # mOS keeps mmap/munmap on the LWK but migrates mprotect, brk and the file calls to Linux.
    assert {"read", "write", "mprotect", "brk"} <= mos and not mos & {"mmap", "munmap"}


def test_parse_forms(tmp_path):
    assert policies.parse("mos").kind == "mos"
    assert policies.parse("random", share=0.3, seed=7) == Policy("random", 0.3, 7)
    assert policies.parse("read, write").names == {"read", "write"}
    listing = tmp_path / "delegate.txt"
    listing.write_text("# file I/O\nread\nwrite  # and output\n\n")
    assert policies.parse(f"@{listing}") == Policy("explicit", names=frozenset({"read", "write"}))
    assert Policy("explicit", names=frozenset({"read", "execve"})).delegated(TINY.counts()) == {"read"}


@pytest.mark.parametrize("text,message", [
    ("read,wirte", "--delegate read,wirte: 'wirte' is not an x86-64 syscall name"),
    ("minfrequency", "'minfrequency' is not an x86-64 syscall name (policies: all, none, min-frequency"),
    (",", "no syscall names given"),
])
def test_parse_errors(text, message):
    with pytest.raises(CoreplaneError) as err:
        policies.parse(text)
    assert message in str(err.value)


def test_policy_file_errors_name_file_and_line(tmp_path):
    listing = tmp_path / "p.txt"
    listing.write_text("read\nopne\n")
    with pytest.raises(CoreplaneError, match=rf"^{listing}:2: 'opne' is not an x86-64 syscall name"):
        policies.parse(f"@{listing}")
    with pytest.raises(CoreplaneError, match="cannot read"):
        policies.parse(f"@{tmp_path / 'missing'}")


def test_share_out_of_range():
    with pytest.raises(CoreplaneError, match="--share 1.5: must be between 0 and 1"):
        Policy("random", 1.5)
