"""The SimPy model of the arbiter: its operations add up the measured costs on their paths, the
serial parts grow linearly with the cores, and bad cost files are one-line errors."""

import json

import pytest

from conftest import run_cli
from coreplane.arbsim import costs, model

# Fixed, distinct costs (lo == hi) make every simulated time exact.
FIXED = {name: costs.Cost(v, v, "test") for name, v in {
    "syscall": 100, "wake": 10_000, "ipi_send": 5_000, "signal": 14_000, "cpuset_grow": 16_000,
    "cpuset_shrink": 30_000, "cgroup_dir": 120_000,
    "procs_write": 500_000, "move": 100_000, "page": 10_000}.items()}
S, W, I, SIG, GROW, SHRINK, MOVE = 100, 10_000, 5_000, 14_000, 16_000, 30_000, 100_000


def once(operation, cores):
    return model.simulate(operation, cores, FIXED, 1, seed=0)[0]


def test_a_warm_grant_is_two_messages_and_no_cpuset_write():
    # send, arbiter woken, recv, procinfo stores, reply, requester woken
    assert once("get_one_warm", 1) == 4 * S + 2 * W
    assert once("get_one_warm", 64) == once("get_one_warm", 1)  # one vcore costs the same on any machine
    assert once("get_one_cold", 1) == once("get_one_warm", 1) + GROW
    assert once("get_max_warm", 64) - once("get_max_warm", 32) == 32 * S


def test_preempt_is_a_cpuset_write_and_the_kernels_move():
    assert once("preempt_one", 1) == S + W + S + S + SHRINK + MOVE
    # the real arbiter rewrites the cpuset once per vcore taken: linear in the cores
    assert once("preempt_max", 32) - once("preempt_max", 16) == 16 * (S + SHRINK)


def test_batched_cpusets_make_taking_every_core_cost_one_write():
    batched = model.simulate("preempt_max", 64, FIXED, 1, seed=0, batch_cpusets=True)[0]
    assert batched == once("preempt_one", 1) + 63 * S
    cold = model.simulate("get_max_cold", 64, FIXED, 1, seed=0, batch_cpusets=True)[0]
    assert cold == once("get_max_warm", 64) + GROW


def test_warn_preempt_max_grows_by_one_warning_per_core():
    one = once("warn_preempt_one", 1)
    assert one == S + W + S + (S + I) + SIG + S + W + S + S + S + W  # warn, signal, yield served, its reply
    # one arbiter thread sends every warning and serves every yield (recv, bookkeeping, reply): with
    # many cores each further core adds exactly that much
    # (past ~50 cores here the last yield finds the arbiter still busy and saves its wake-up once)
    for n in (16, 64):
        assert once("warn_preempt_max", 2 * n) - once("warn_preempt_max", n) == n * ((S + I) + 3 * S)
    assert once("warn_preempt_max", 2) == one + 3 * S  # the second yield queues behind the first


def test_draws_stay_in_the_measured_ranges():
    table = costs.load(None)
    low = {k: costs.Cost(c.lo, c.lo, "") for k, c in table.items()}
    high = {k: costs.Cost(c.hi, c.hi, "") for k, c in table.items()}
    times = model.simulate("get_max_cold", 16, table, 50, seed=3)
    assert model.simulate("get_max_cold", 16, low, 1, 0)[0] <= min(times)
    assert max(times) <= model.simulate("get_max_cold", 16, high, 1, 0)[0]
    summary = model.summarize(times)
    assert summary["min_ns"] <= summary["p50_ns"] <= summary["p99_ns"] and summary["trials"] == 50


def test_cli_rows_are_labelled_simulated(tmp_path):
    proc = run_cli("arbsim", "--cores", "1,16", "--trials", "20", "--figure", str(tmp_path / "f.png"), "--json",
                   check=True)
    doc = json.loads(proc.stdout)
    assert doc["simulated"] and all(r["simulated"] for r in doc["rows"])
    assert len(doc["rows"]) == 2 * len(model.OPERATIONS)
    assert (tmp_path / "f.png").stat().st_size > 0


@pytest.mark.parametrize("content,message", [
    ('{"wake": [5, 1]}', "field 'wake': expected [lo_ns, hi_ns]"),
    ('{"teleport": [1, 2]}', "field 'teleport': unknown cost"),
    ("[1", "line 1: not JSON"),
])
def test_bad_cost_files_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "costs.json"
    path.write_text(content)
    proc = run_cli("arbsim", "--costs", str(path), "--trials", "1")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and str(path) in lines[0] and message in lines[0], proc.stderr


def test_check_sets_the_model_beside_the_real_benchmark(tmp_path):
    from coreplane.arbsim.check import compare
    from coreplane.core.errors import CoreplaneError

    doc = tmp_path / "bench.json"
    doc.write_text(json.dumps({"ops": {"get_one_vcore_warm": {"p50_us": 40.8}, "create_scp": {"p50_us": 900}}}))
    (row,) = compare(doc, 1, FIXED, 1, seed=0)  # only the spans both time the same way
    assert row["operation"] == "get_one_warm" and row["simulated_p50_us"] == 20.4
    assert row["simulated_over_measured"] == 0.5
    doc.write_text(json.dumps({"ops": {"create_scp": {"p50_us": 900}}}))
    with pytest.raises(CoreplaneError, match="none of"):
        compare(doc, 1, FIXED, 1, seed=0)
