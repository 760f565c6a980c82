"""The CLI as scripts see it: --help, --json, one-line errors and exit codes."""

import pytest

from conftest import cli_json, run_cli


def test_root_help_lists_commands():
    out = run_cli("--help", check=True).stdout
    for cmd in ("doctor", "bench"):
        assert cmd in out


@pytest.mark.parametrize("args", [["doctor"], ["bench"], ["bench", "floor"]])
def test_subcommand_help(args):
    out = run_cli(*args, "--help", check=True).stdout
    assert "Usage:" in out


def test_unknown_option_is_usage_error():
    proc = run_cli("doctor", "--no-such-option")
    assert proc.returncode == 2
    assert "No such option" in proc.stderr


def test_missing_root_is_one_line_error():
    proc = run_cli("doctor", "--root", "/does/not/exist")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "coreplane: error: --root /does/not/exist: not a directory"


def test_floor_percentiles_are_positive_and_ordered():
    doc = cli_json("bench", "floor", "--round-trips", "100000")
    for key in ("cacheline_pingpong_ns", "null_syscall_ns", "futex_wake_round_trip_ns"):
        s = doc[key]
        assert 0 < s["min"] <= s["p50"] <= s["p90"] <= s["p99"] <= s["max"], (key, s)
        assert s["cdf"] == sorted(s["cdf"]) and len(s["cdf"]) == 101
    assert doc["cacheline_pingpong_ns"]["n"] == 100000
    assert doc["machine"]["cpus"] >= 2


@pytest.mark.parametrize("args,message", [
    (["--cores", "0,0"], "--cores: the two cores must differ"),
    (["--cores", "0,x"], "--cores: 'x' is not a core number"),
    (["--cores", "0,4095"], "cannot pin to core 4095"),
    (["--round-trips", "10"], "at least 100000"),
])
def test_floor_bad_input(args, message):
    proc = run_cli("bench", "floor", *args)
    assert proc.returncode != 0
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr, proc.stderr


def test_floor_plot_and_reload(tmp_path):
    saved = tmp_path / "floor.json"
    saved.write_text(run_cli("bench", "floor", "--json", check=True).stdout)
    png = tmp_path / "cdf.png"
    out = run_cli("bench", "floor", "--from", str(saved), "--plot", str(png), check=True).stdout
    assert "cache-line ping-pong" in out
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"


def test_bench_paths_runs_all_three_paths():
    doc = cli_json("bench", "paths", "--calls", "2000", "--dd-repetitions", "0", "--no-cell")
    paths = doc["paths"]
    for mode in ("native", "native_dispatch_armed", "fast_path", "delegated"):
        s = paths[mode]["null_syscall_ns"]
        assert 0 < s["min"] <= s["p50"] <= s["p99"], (mode, s)
    # the trap path is slower than a rewritten site, which the profile reports having made
    overhead = paths["fast_path"]["overhead"]
    assert overhead["rewritten_sites"] > 0 and overhead["interposed_call_ns"] > overhead["fast_path_call_ns"] > 0
    # a site traps until the call that rewrites it (the dearest), then takes the fast path
    sites, r = paths["sites_runtime"], paths["ratios"]
    assert sites["sites"] == 64 and len(sites["calls_ns"]) > r["d_rewrite_at"] > 1
    assert r["d_rewrite_call_ns"] > r["d_first_call_ns"] > r["d_after_rewrite_ns"]
    # every signal reached its handler, natively and under the runtime (the runtime's trap of the
    # handler's rt_sigreturn makes each dearer)
    for case in ("tgkill_ns", "unblock_ns"):
        assert paths["signals_runtime"][case]["n"] == paths["signals_native"][case]["n"] == 20_000
    assert r["e_tgkill_over_native"] > 1 and r["e_unblock_over_native"] > 1
    # (a) in issue 12's form: the same run's ping-pong and the native null syscall in the divisor
    d, native = paths["delegated"], paths["native"]["null_syscall_ns"]["p50"]
    assert r["a_delegated_over_pingpong_plus_native"] == pytest.approx(
        d["null_syscall_ns"]["p50"] / (d["cacheline_pingpong_ns"]["p50"] + native))
    assert set(r) == {"a_delegated_over_pingpong", "a_delegated_over_pingpong_plus_native", "b_fast_path_minus_native_ns", "b_floor_dispatch_armed_ns",
                      "d_first_call_ns", "d_rewrite_at", "d_rewrite_call_ns", "d_after_rewrite_ns",
                      "e_tgkill_over_native", "e_unblock_over_native"}
