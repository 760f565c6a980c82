"""The synthetic benchmark of paper 002 §4.1 (workloads/bin/gain_synth): real calls, mixes, work scaled by 1/γ."""

import json
import shutil
import statistics
import subprocess

import pytest

from conftest import REPO
from coreplane.model import synthetic
from coreplane.model.estimate import solve_gamma
from coreplane.model.policies import Policy
from coreplane.profile import io as profiles

FIXTURES = REPO / "tests" / "fixtures" / "profiles"


@pytest.fixture(scope="module", autouse=True)
def built():
    subprocess.run(["make", "-s", "-C", str(REPO / "workloads"), "bin/gain_synth"], check=True)


def test_replays_the_mix_per_phase_and_thread(tmp_path):
    mix = synthetic.write_mix({"read": 7, "write": 5, "getppid": 3, "openat": 2, "close": 2, "stat": 1,
                               "mmap": 2, "munmap": 2, "ioctl": 1}, tmp_path / "m.mix", comment="test mix")
    report = synthetic.run(synthetic.command(mix, trials=10_000, phases=4, threads=3))
    assert report["threads"] == 3 and report["phases"] == 4
    assert report["calls"] == {"read": 84, "write": 60, "getppid": 36, "openat": 24, "close": 24, "stat": 12,
                               "mmap": 24, "munmap": 24, "ioctl": 12}
    assert report["errors"] == {"ioctl": 12}   # TCGETS on /dev/null: ENOTTY, as isatty() on a file
    assert abs(report["pi"] - 3.14159) < 0.05


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is installed by `make setup` (APT_PACKAGES)")
def test_the_kernel_sees_exactly_the_named_calls(tmp_path):
    out = tmp_path / "strace.txt"
    argv = synthetic.command(None, trials=1000, phases=5, threads=2) + ["-s", "open=3,close=3,stat=2,lseek=4,writev=1"]
    subprocess.run(["strace", "-f", "-c", "-o", str(out)] + argv, check=True, capture_output=True)
    counts = {}
    for line in out.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[-1].isidentifier() and fields[3].isdigit():
            counts[fields[-1]] = int(fields[3])
    # 2 threads × 5 phases × count: open stays open (not openat), stat stays stat (not newfstatat)
    assert counts["open"] == 30 and counts["stat"] == 20 and counts["lseek"] == 40 and counts["writev"] == 10
    assert counts["close"] >= 30


def test_work_scales_with_one_over_gamma():
    # The γ alternate, so a burst of load from elsewhere hits each alike, and each γ's least time
    # of five counts (load only adds time): three medians in a row failed under load in make test.
    runs = {gamma: [] for gamma in (1.0, 2.0, 4.0)}
    for _ in range(5):
        for gamma, reports in runs.items():
            report = synthetic.run(synthetic.command(None, gamma, trials=1_000_000, phases=8) + ["-s", "getppid=10"])
            assert report["trials_per_phase"] == round(1_000_000 / gamma)
            reports.append(report)
    least = {gamma: {k: min(r[k] for r in reports) for k in ("wall_ns", "compute_ns")} for gamma, reports in runs.items()}
    assert least[1.0]["compute_ns"] > least[2.0]["compute_ns"] > least[4.0]["compute_ns"]
    assert least[1.0]["wall_ns"] > least[2.0]["wall_ns"] > least[4.0]["wall_ns"]


def test_refined_model_recovers_the_emulated_gain(tmp_path):
    # Profile the γ = 1 run from the benchmark's own report, then solve eq. 11 (nothing delegated,
    # f_c = 0) for the γ that explains the measured speedup of the γ = 2 run. The runs alternate
    # so that a burst of load from other processes hits both sides alike; medians of five.
    mix = synthetic.write_mix({"read": 40, "write": 40, "getppid": 20}, tmp_path / "m.mix")
    runs = {1.0: [], 2.0: []}
    for _ in range(5):
        for gamma in runs:
            runs[gamma].append(synthetic.run(synthetic.command(mix, gamma, trials=400_000, phases=20)))
    base = {k: statistics.median(r[k] for r in runs[1.0]) for k in ("wall_ns", "syscall_ns")}
    fast = statistics.median(r["wall_ns"] for r in runs[2.0])
    doc = {"format": "coreplane-profile/1", "program": "gain_synth", "wall_ns": int(base["wall_ns"]),
           "syscalls": [{"name": "read", "count": 2000, "total_ns": int(base["syscall_ns"])}]}
    gamma = solve_gamma(profiles.from_dict(doc), base["wall_ns"] / fast, 0.0, Policy("none"))
    assert 1.5 < gamma < 2.7, gamma


def test_mix_from_a_profile(tmp_path):
    prof = profiles.load(FIXTURES / "bzip2.json")
    mix, dropped = synthetic.mix_from_profile(prof, phases=100)
    # bzip2: 6600 reads and 5003 writes over 100 phases → 66 and 50 per phase; rare calls keep 1.
    assert mix["read"] == 66 and mix["write"] == 50 and mix["openat"] == 1
    assert list(mix)[:2] == ["read", "write"]
    assert {"execve", "arch_prctl", "set_tid_address"} <= set(dropped)
    path = synthetic.write_mix(mix, tmp_path / "bzip2.mix", comment="from bzip2.json\n100 phases")
    assert path.read_text().startswith("# from bzip2.json\n# 100 phases\nread 66\nwrite 50\n")
    report = synthetic.run(synthetic.command(path, trials=1000, phases=2))
    assert report["calls"]["read"] == 132 and report["calls"]["write"] == 100


@pytest.mark.parametrize("args,message", [
    (["-s", "fork=1"], "gain_synth: -s: unsupported syscall 'fork' (gain_synth -l lists the supported ones)"),
    (["-s", "read"], "gain_synth: -s: expected NAME=COUNT, got: read"),
    (["-g", "0"], "gain_synth: -g: the gain must be a positive number, got: 0"),
    (["-t", "0"], "gain_synth: -t 0: expected an integer >= 1"),
])
def test_bad_arguments_are_one_line(args, message):
    proc = subprocess.run([str(synthetic.binary())] + args, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr == message + "\n" and proc.stdout == ""


def test_bad_mix_file_names_the_line(tmp_path):
    mix = tmp_path / "bad.mix"
    mix.write_text("# comment\nread 3\nwrite lots\n")
    proc = subprocess.run([str(synthetic.binary()), "-m", str(mix)], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr == f"gain_synth: {mix}:3: expected 'NAME COUNT'\n"


def test_report_is_one_json_line():
    out = subprocess.run([str(synthetic.binary()), "-w", "100", "-p", "1"], capture_output=True, text=True,
                         check=True).stdout
    assert out.count("\n") == 1 and json.loads(out)["calls"] == {}


def test_trials_calibrated_to_a_compute_time():
    # Four times the compute time needs about four times the trials (ordering, with a wide margin).
    # Each calibration times one probe, which a busy moment can slow 3× (CI, session 16: a ratio
    # of 11.3), so each side is the median of three.
    short = statistics.median(synthetic.trials_for(10e6) for _ in range(3))
    long_ = statistics.median(synthetic.trials_for(40e6) for _ in range(3))
    assert 0 < short < long_
    assert 2 < long_ / short < 8
