"""The memory service's benchmark workloads (issue 15 item 5): each loop or server does what it
says and reports what the benchmark modules read; the modules render saved runs. No timing is
asserted (goals live in docs/benchmarks.md)."""

import hashlib
import json
import subprocess
from collections import Counter

import pytest

from coreplane.core.errors import CoreplaneError
from coreplane.core.native import workload


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("test", ["page_fault", "mmap", "brk"])
def test_memscale_counts_every_sample(test, threads):
    proc = subprocess.run([str(workload("memscale")), test, str(threads), "0.75"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["test"] == test and doc["threads"] == threads
    assert len(doc["ops_per_s"]) == 2  # three 0.25 s samples, the first dropped
    assert all(rate > 0 for rate in doc["ops_per_s"])
    assert doc["median_ops_per_s"] in doc["ops_per_s"]


@pytest.mark.parametrize("args,message", [(["walk", "1", "1"], "unknown test 'walk'"),
                                          (["mmap", "0", "1"], "THREADS must be"),
                                          (["brk", "1", "0.1"], "SECONDS")])
def test_memscale_bad_arguments(args, message):
    proc = subprocess.run([str(workload("memscale")), *args], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_memserve_answers_every_request(tmp_path):
    sock = str(tmp_path / "s.sock")
    server = subprocess.Popen([str(workload("memserve")), "server", sock, "256"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready"  # listening: the client may connect
        client = subprocess.run([str(workload("memserve")), "client", sock, "100", "0.2", "256"],
                                capture_output=True, text=True, timeout=30)
        assert client.returncode == 0, client.stderr  # the client checks every reply's sum
        doc = json.loads(client.stdout)
        assert doc["requests"] == 20 and len(doc["latency_us"]) == 20
        assert all(v > 0 for v in doc["latency_us"])
    finally:
        assert server.wait(timeout=30) == 0  # the client's close ends it


def test_memserve_client_notices_a_wrong_size(tmp_path):
    sock = str(tmp_path / "s.sock")
    server = subprocess.Popen([str(workload("memserve")), "server", sock, "256"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready"
        client = subprocess.run([str(workload("memserve")), "client", sock, "100", "0.05", "128"],
                                capture_output=True, text=True, timeout=30)
        assert client.returncode == 1 and "wrong answer" in client.stderr
    finally:
        server.wait(timeout=30)


def test_textgen_is_deterministic_and_zipf_like():
    make = lambda seed: subprocess.run([str(workload("textgen")), "2", seed], capture_output=True, timeout=30).stdout
    text = make("3")
    assert len(text) >= 2 << 20 and text.endswith(b"\n")
    assert text == make("3") and text != make("4")  # the same bytes for a seed, others for another
    counts = sorted(Counter(text.split()).values(), reverse=True)
    # Zipf, s = 1: the commonest word is about twice as frequent as the second.
    assert 1.5 < counts[0] / counts[1] < 2.7


def test_textgen_bad_arguments():
    proc = subprocess.run([str(workload("textgen")), "0", "1"], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2 and proc.stderr.startswith("usage: textgen")


def test_latency_tables_and_cdf_from_a_saved_run(tmp_path):
    from coreplane.bench import memsvc_latency
    configs = ["default+neighbour", *memsvc_latency.CELL_CONFIGS]
    latency = {c: [100.0 * (i + 1) + k for k in range(200)] for i, c in enumerate(configs)}
    doc = {"load_before": [1.0, 1, 1], "load_after": [2.0, 1, 1], "rate": 200, "seconds": 1.0, "kib": 1024,
           "repetitions": 1, "cell": {"compute": [1], "control": [0]}, "latency_us": latency,
           "configs": {c: {**memsvc_latency.summary(v), "p99_each_us": [1.0]} for c, v in latency.items()}}
    doc["p99_gain_vs_linux"] = doc["configs"]["linux+neighbour"]["p99_us"] / doc["configs"]["pool+neighbour"]["p99_us"]
    doc["p99_gain_vs_default"] = doc["configs"]["default+neighbour"]["p99_us"] / doc["configs"]["pool+neighbour"]["p99_us"]
    doc["p99_gain_fifo_vs_linux"] = 2.0
    table = memsvc_latency.render(doc)
    assert "| pool+neighbour | 200 | 600 |" in table  # p50 of 500..699
    assert "goal ≥ 3×" in table
    assert "SCHED_FIFO 1: p50 700 µs" in table and "(2.00× better than linux)" in table
    memsvc_latency.plot(doc, tmp_path / "cdf.png")
    assert (tmp_path / "cdf.png").stat().st_size > 10_000


def test_a_grep_that_matches_nothing_is_an_answer_not_an_error(tmp_path):
    # Before: every status but 0 ended the benchmark, and grep -c ends with 1 (printing 0) when no
    # line matches; statuses were then always 0 in the comparison of outputs.
    from coreplane.bench import memsvc_programs
    text = tmp_path / "text"
    text.write_text("alpha\nbeta\n")
    argv = ["grep", "-c", "gamma", str(text)]
    _wall, _cpu, (status, digest) = memsvc_programs.timed(argv, tmp_path / "out", {}, memsvc_programs.WORKED["grep"])
    assert status == 1 and digest == hashlib.sha256(b"0\n").hexdigest()
    with pytest.raises(CoreplaneError, match="exited 2"):
        memsvc_programs.timed(["grep", "-c", "x", str(tmp_path / "missing")], tmp_path / "out", {}, (0, 1))


def test_membrk_alternates_the_order_of_the_modes(monkeypatch):
    # Before: every round ran the modes in the same order, though the docstring said alternating.
    from coreplane.bench import membrk
    order = []
    monkeypatch.setattr(membrk, "pools", lambda: ["pool"])
    monkeypatch.setattr(membrk, "sbrktouch", lambda kib, mode: order.append((kib, mode)) or 1000)
    monkeypatch.setattr(membrk, "SIZES_KIB", [4])
    doc = membrk.measure()
    assert order == [(4, "native"), (4, "linux"), (4, "pool"), (4, "pool"), (4, "linux"), (4, "native"),
                     (4, "native"), (4, "linux"), (4, "pool")]
    assert doc["rows"][0]["runs"]["pool"] == [1000] * 3


def test_memcorpus_takes_the_section_command_line(tmp_path, capsys):
    # One command line for the section's benchmarks (memsvc.bench_main), memcorpus's included.
    from coreplane.bench import memcorpus
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps({"memory": "pool", "reps": 1, "load_before": [1.0], "load_after": [2.0],
                                 "layout": {"compute_cores": [1], "control_cores": [0]},
                                 "programs": [{"program": "run:true", "linux_s": 1.0, "pool_s": 1.01, "ratio": 1.01,
                                               "cpu_ratio": 1.0, "identical": True, "linux_consistent": True}]}))
    memcorpus.main(["--from", str(saved)])
    assert "| run:true | 1.000 | 1.010 | 1.010 | 1.000 | yes |" in capsys.readouterr().out


def test_fig6_leaves_out_the_fifo_configuration_where_it_is_refused():
    from coreplane.bench import memsvc_latency
    assert "pool-fifo+neighbour" in memsvc_latency.cell_configs(True)
    assert memsvc_latency.cell_configs(False) == ["linux", "pool", "linux+neighbour", "pool+neighbour"]
