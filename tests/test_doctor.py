"""Doctor's parsers against /proc and /sys snapshots of different machines, and live on this one."""

import os

import pytest

from coreplane.core.cpulist import format_cpu_list, parse_cpu_list
from coreplane.core.machine import cpuinfo_field
from coreplane.doctor.checks import diagnose, kernel_version, mounts
from coreplane.doctor.host import Host
from conftest import HOSTS, cli_json, run_cli


def verdicts(name: str) -> dict[str, tuple[str, str]]:
    return {f.name: (f.verdict, f.summary) for f in diagnose(Host(HOSTS / name))}


@pytest.mark.parametrize("text,cpus", [("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]), ("", []), (None, []), ("5", [5])])
def test_cpu_list_round_trip(text, cpus):
    assert parse_cpu_list(text) == cpus
    if cpus:
        assert parse_cpu_list(format_cpu_list(cpus)) == cpus


def test_format_cpu_list_merges_runs():
    assert format_cpu_list([3, 0, 1, 2, 7, 9, 8]) == "0-3,7-9"


def test_kvm_hybrid_v1_host():
    v = verdicts("kvm-epyc-v1-hybrid")
    assert v["cgroups"][0] == "ok" and v["cgroups"][1].startswith("hybrid (v1 + v2); cpuset at /sys/fs/cgroup/cpuset")
    assert v["virtual_machine"][0] == "warn"
    assert v["isolation"][0] == "info"
    assert v["syscall_user_dispatch"][0] == "ok"
    assert v["privileges"][0] == "ok"
    assert v["kvm"] == ("ok", "/dev/kvm present")
    assert v["tracefs"][0] == "info"


def test_baremetal_v2_isolated_host():
    host = Host(HOSTS / "baremetal-v2-isolated")
    findings = {f.name: f for f in diagnose(host)}
    assert findings["cpus"].summary == "8 CPUs (4 cores)"
    assert "2 thread(s) per core" in " ".join(findings["cpus"].evidence)
    assert findings["cgroups"].summary.startswith("v2; cpuset at /sys/fs/cgroup")
    assert "cpuset.cpus.partition: present" in findings["cgroups"].evidence
    iso = findings["isolation"]
    assert iso.verdict == "ok" and "2-7" in iso.summary
    assert any("rt: isolated" in e for e in iso.evidence)
    assert any("nohz_full=2-7" in e for e in iso.evidence)
    assert findings["tracefs"].verdict == "ok"
    assert findings["virtual_machine"].summary == "bare metal"
    assert findings["hugepages"].summary.startswith("500/512")
    assert findings["privileges"].verdict == "warn"


def test_old_host_has_blockers():
    v = verdicts("old-v1-nosud-1cpu")
    assert v["cpus"][0] == "fail"
    assert v["syscall_user_dispatch"][0] == "fail"
    assert v["cgroups"][1].startswith("v1; cpuset")
    assert v["hugepages"][0] == "warn"
    assert v["tracefs"][0] == "warn"


def test_mountinfo_parser_reads_fstype_after_separator():
    ms = mounts(Host(HOSTS / "baremetal-v2-isolated"))
    assert [(m.point, m.fstype) for m in ms if m.fstype in ("cgroup2", "tracefs")] == [
        ("/sys/fs/cgroup", "cgroup2"), ("/sys/kernel/tracing", "tracefs")]


def test_snapshot_never_probes_live():
    assert all("not probed" in f.summary or f.name not in ("perf_counters", "io_uring", "userfaultfd")
               for f in diagnose(Host(HOSTS / "kvm-epyc-v1-hybrid")))


def test_live_doctor_probes_sud_for_real():
    report = cli_json("doctor")
    assert report["live"] is True
    found = {f["name"]: f for f in report["findings"]}
    assert len(found) == 15
    keys = {"pku", "ospke"} <= set(cpuinfo_field(open("/proc/cpuinfo").read(), "flags").split())
    assert found["fast_path"]["summary"].startswith("relocating rewrite; page 0 unmapped")
    assert ("a NULL call enters the runtime" in found["fast_path"]["summary"]) == (keys and os.geteuid() == 0)
    if kernel_version(Host("/")) >= (5, 11):
        sud = found["syscall_user_dispatch"]
        assert sud["verdict"] == "ok", sud
        assert any("SIGSYS" in e for e in sud["evidence"])


def test_doctor_exit_status_and_blocker_lines(tmp_path):
    bad = run_cli("doctor", "--root", str(HOSTS / "old-v1-nosud-1cpu"))
    assert bad.returncode == 1
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("coreplane doctor: blocker: ") for line in lines)
    assert run_cli("doctor", "--root", str(HOSTS / "baremetal-v2-isolated")).returncode == 0


def test_capture_then_reread_gives_same_report(tmp_path):
    first = run_cli("doctor", "--json", "--root", str(HOSTS / "baremetal-v2-isolated"), "--capture", str(tmp_path))
    assert first.returncode == 0
    again = cli_json("doctor", "--root", str(tmp_path))
    import json
    assert [f["summary"] for f in again["findings"]] == [f["summary"] for f in json.loads(first.stdout)["findings"]]


@pytest.mark.parametrize("host,sled", [
    ("kvm-epyc-v1-hybrid", "execute-only: a NULL call enters the runtime"),   # pku + ospke, CAP_SYS_RAWIO
    ("baremetal-v2-isolated", "page 0 reads as sled bytes"),
    ("old-v1-nosud-1cpu", "page 0 reads as sled bytes"),
])
def test_doctor_names_the_fast_path_the_runtime_takes(host, sled):
    # Relocated sites everywhere (a machine with protection keys took the sled, under which a
    # NULL call entered the runtime); the sled's cost here is named.
    verdict, summary = verdicts(host)["fast_path"]
    assert verdict == "ok" and summary.startswith("relocating rewrite; page 0 unmapped, NULL accesses fault")
    assert f"--null-page-sled opts into the sled ({sled}" in summary
