"""The memory service's benchmark workloads (issue 15 item 5): each loop or server does what it
says and reports what the benchmark modules read; the modules render saved runs. No timing is
asserted (goals live in docs/benchmarks.md)."""

import json
import subprocess

import pytest

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
