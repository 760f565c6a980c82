"""The `strace -c`-style summary of a profile and the syscall profile figure (paper 002 Fig. 6 and 12)."""

import io

import pytest
from rich.console import Console

from conftest import REPO
from coreplane.profile import io as profiles
from coreplane.profile.figures import plot_syscall_profile
from coreplane.profile.summary import render, summary

FIXTURES = REPO / "tests" / "fixtures" / "profiles"


def test_rows_by_hand():
    doc = summary(profiles.load(FIXTURES / "tiny.json"))
    # sorted by total time like strace -c; ties (getppid and mmap, 20 µs each) by name
    assert [r["name"] for r in doc["rows"]] == ["read", "write", "getppid", "mmap", "futex"]
    read = doc["rows"][0]
    # read: 100 calls, 100 µs → 1 µs each, half of the 200 µs of syscalls, 10 % of the 1 ms run
    assert read["mean_ns"] == 1000 and read["share_of_syscall_time"] == 0.5 and read["share_of_wall"] == 0.1
    assert read["errors"] == 2
    assert doc["total"] == {"calls": 1164, "errors": 2, "total_ns": 200_000, "mean_ns": pytest.approx(200_000 / 1164),
                            "share_of_wall": 0.2}
    assert doc["p"] == pytest.approx(0.2) and doc["threads"] == 1


def test_multithreaded_p_leaves_waits_out():
    doc = summary(profiles.load(FIXTURES / "xz-T2.json"))
    # futex waits dominate the syscall time but are not OS work: p stays small
    assert doc["rows"][0]["name"] == "futex" and doc["rows"][0]["share_of_syscall_time"] > 0.9
    assert doc["p"] < 0.01 and doc["threads"] == 3


def test_render_has_strace_columns():
    buf = io.StringIO()
    render(summary(profiles.load(FIXTURES / "bzip2.json")), Console(file=buf, width=140))
    text = buf.getvalue()
    for col in ("% time", "seconds", "usecs/call", "calls", "errors", "% of wall", "syscall", "total"):
        assert col in text
    assert "system share p = 3.208%" in text and "0.034071" in text   # read: 34.071 ms


def test_syscall_profile_figure(tmp_path):
    profs = [profiles.load(FIXTURES / f"{n}.json") for n in ("bzip2", "xz-T2", "gcc")]
    path = plot_syscall_profile(profs, tmp_path / "syscalls.png")
    data = path.read_bytes()
    assert data[:4] == b"\x89PNG" and len(data) > 30_000
