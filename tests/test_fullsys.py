"""Full-system inputs and the osact plugin's counts without booting anything: unknown suites, the
node count not yet implemented, kernel shares summed over vCPUs, a region of interest never
closed, the console line an error quotes."""

import json

import pytest

from conftest import run_cli
from coreplane.core.errors import CoreplaneError
from coreplane.fullsys.activity import summarise
from coreplane.fullsys.guest import console_tail


def counts(tmp_path, closed=True, memory=True):
    """An osact output file: two vCPUs, the second idle in the kernel."""
    doc = {"plugin": "osact", "format": 1, "memory_counted": memory,
           "roi": {"opened": True, "closed": closed, "opened_by_vcpu": 0, "wall_ns": 2_000_000_000,
                   "cpu_ns": 1_000_000_000},
           "run_wall_ns": 10_000_000_000, "run_cpu_ns": 5_000_000_000,
           "vcpus": [{"vcpu": 0, "run_insns": 900_000_000, "insns": {"kernel": 10, "user": 80},
                      "loads": {"kernel": 5, "user": 30}, "stores": {"kernel": 5, "user": 10}},
                     {"vcpu": 1, "run_insns": 100_000_000, "insns": {"kernel": 10, "user": 0},
                      "loads": {"kernel": 0, "user": 0}, "stores": {"kernel": 0, "user": 0}}]}
    path = tmp_path / "osact.json"
    path.write_text(json.dumps(doc))
    return path


def test_shares_and_speed_sum_over_vcpus(tmp_path):
    s = summarise(counts(tmp_path))
    assert s["roi"]["insns"] == {"kernel": 20, "user": 80}
    assert s["roi"]["kernel_share_insns"] == pytest.approx(0.2)
    assert s["roi"]["kernel_share_memory"] == pytest.approx(10 / 50)
    assert s["roi"]["mips"] == pytest.approx(100 / 2e6)
    assert s["run"]["mips"] == pytest.approx(100.0)
    assert s["run"]["mips_cpu"] == pytest.approx(200.0)


def test_memory_share_absent_when_not_counted(tmp_path):
    assert summarise(counts(tmp_path, memory=False))["roi"]["kernel_share_memory"] is None


def test_region_never_closed_is_an_error(tmp_path):
    with pytest.raises(CoreplaneError, match="region of interest was opened but not closed"):
        summarise(counts(tmp_path, closed=False))


def test_unknown_suite_is_one_line():
    proc = run_cli("fullsys", "image", "etch")
    assert proc.returncode != 0
    assert proc.stderr.strip() == "coreplane: error: unknown suite 'etch': one of bullseye, bookworm, trixie, sid"


def test_several_nodes_not_yet():
    proc = run_cli("fullsys", "run", "--image", "bookworm", "--nodes", "2")
    assert proc.returncode != 0
    assert "only one node is implemented so far" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_console_tail_prefers_the_panic_line():
    console = ("[ 1.5] VFS: Cannot open root device\n[ 1.5] Kernel panic - not syncing: VFS: Unable to mount root fs"
               " on unknown-block(0,0)\n[ 1.5] Call Trace:\n[ 1.5]  <TASK>\n[ 1.5] </TASK>\n")
    assert console_tail(console) == "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)"
    assert console_tail("a\n b  c\n") == "a b c"
    assert console_tail("") == "(empty)"
