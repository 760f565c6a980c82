"""coreplane run beyond the corpus: many threads on one delegate, the profile's contents,
SIGKILL of the program inside a cell, and bad input."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import CLI, run_cli
from coreplane.core.machine import identity
from coreplane.core.native import workload

PROGRAMS = Path(__file__).parent / "programs"


@pytest.fixture(scope="module")
def many_threads(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("prog") / "many_threads"
    subprocess.run(["cc", "-O2", "-pthread", "-o", str(exe), str(PROGRAMS / "many_threads.c")], check=True)
    return exe


def by_name(profile: dict) -> dict:
    return {s["name"]: s for s in profile["syscalls"]}


def test_80_threads_share_one_delegate(many_threads, tmp_path):
    prof = tmp_path / "p.json"
    proc = run_cli("run", "--delegate", "pread64,getppid", "--delegate-threads", "1", "--profile", str(prof),
                   "--", str(many_threads), "80", "200")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "threads=80 rounds=200 wrong=0\n"
    doc = json.loads(prof.read_text())
    calls = by_name(doc)
    # ld.so's own preads of ELF headers come on top of the threads' 80 x 200.
    assert 80 * 200 <= calls["pread64"]["delegated"] <= 80 * 200 + 10 and calls["pread64"]["local"] == 0
    assert calls["getppid"]["delegated"] == 80 * 200
    assert calls["write"]["delegated"] == 0  # not in the policy
    assert len([t for t in doc["threads"] if t["syscalls"]]) >= 81
    fwd = calls["pread64"]["forward_ns"]
    assert 0 < fwd["min"] <= fwd["p50"] <= fwd["p99"]
    assert calls["pread64"]["queued_ns"]["total"] > 0


def test_profile_counts_match_the_program(tmp_path):
    data = tmp_path / "in.bin"
    data.write_bytes(os.urandom(512 * 300))
    prof = tmp_path / "dd.json"
    # Every call timed: a sampled call that catches a preemption on a loaded machine is scaled
    # up, and the sum of the calls' times would no longer fit in the run's wall time.
    proc = run_cli("run", "--profile", str(prof), "--time-every", "1", "--", "dd", f"if={data}", "of=/dev/null",
                   "bs=512")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(prof.read_text())
    assert doc["format"] == "coreplane-profile/1" and doc["exit"] == {"status": 0}
    assert doc["argv"][:1] == ["dd"] and doc["config"]["policy"] == "none"
    calls = by_name(doc)
    assert calls["read"]["count"] >= 301  # 300 blocks and the final empty read
    assert calls["write"]["count"] >= 300
    # Data calls carry the bytes they moved: dd's 300 blocks (and the loader's reads of libraries).
    assert calls["write"]["bytes"] >= 512 * 300 and 512 * 300 <= calls["read"]["bytes"] < 512 * 300 + 65536
    assert "bytes" not in calls["openat"]
    assert all(c["delegated"] == 0 for c in doc["syscalls"])
    assert doc["wall_ns"] > sum(c["total_ns"] for c in doc["syscalls"]) > 0
    assert doc["overhead"]["interposed_call_ns"] > 0
    assert "clock_gettime" in doc["not_intercepted"]
    assert [p["end"] for p in doc["processes"]] == ["exit"]


def test_profile_times_a_sample_of_local_calls_and_counts_all(tmp_path):
    data = tmp_path / "in.bin"
    data.write_bytes(bytes(512 * 4000))
    dd = ["dd", f"if={data}", "of=/dev/null", "bs=512"]
    sampled, every = tmp_path / "sampled.json", tmp_path / "every.json"
    assert run_cli("run", "--profile", str(sampled), "--", *dd).returncode == 0
    assert run_cli("run", "--time-every", "1", "--profile", str(every), "--", *dd).returncode == 0
    s, e = by_name(json.loads(sampled.read_text())), by_name(json.loads(every.read_text()))
    for name in ("read", "write"):
        assert s[name]["count"] == e[name]["count"] >= 4000
        assert e[name]["timed"] == e[name]["count"]
        # One in 16 on average after the first 8: about 250 of 4000 (binomial spread ≈ 15).
        assert 150 < s[name]["timed"] < 400, s[name]
        assert s[name]["total_ns"] > 0
    assert json.loads(sampled.read_text())["config"]["time_every"] == 16


def test_profile_keeps_the_call_timeline_and_times_every_wait(many_threads, tmp_path):
    # 4 threads, 2000 rounds each (long enough that the main thread waits to join the first): every
    # thread's calls lie within its life, in order, and its futex waits are timed one by one (a
    # sample would scale a few long waits up).
    prof = tmp_path / "t.json"
    assert run_cli("run", "--profile", str(prof), "--", str(many_threads), "4", "2000").returncode == 0
    doc = json.loads(prof.read_text())
    waits = 0
    for t in doc["threads"]:
        for c in t["syscalls"]:
            assert t["start_ns"] <= c["first_ns"] <= c["last_ns"] <= t["end_ns"], (t["tid"], c)
            if c["name"] == "futex":
                assert c["timed"] == c["count"]
                waits += c["count"]
    assert waits > 0
    whole = by_name(doc)["pread64"]
    assert whole["first_ns"] == min(c["first_ns"] for t in doc["threads"] for c in t["syscalls"]
                                    if c["name"] == "pread64")


def test_exec_chain_gives_one_profile_per_image(tmp_path):
    prof = tmp_path / "chain.json"
    proc = run_cli("run", "--profile", str(prof), "--", "sh", "-c", "exec sh -c 'exec echo deep'")
    assert proc.stdout == "deep\n"
    ends = [p["end"] for p in json.loads(prof.read_text())["processes"]]
    assert ends == ["execve", "execve", "exit"]


def test_profile_counts_the_tlb_flushes_of_every_process(tmp_path):
    """Each madvise(MADV_DONTNEED) of a written page is one flush of the process's own address
    space (the model charges them once a delegate polls, docs/architecture.md); a process the
    program starts counts too. `coreplane profile` counts them, `coreplane run --profile` does not
    (enabling the tracepoint costs a run ≈ 40 ms); counting needs privilege: without it the count
    is null and the profile says why."""
    null = str(workload("null_call"))
    counts = {}
    for name, argv in (("alone", [null, "-c", "madvise", "-n", "500", "-w", "0"]),
                       ("child", ["sh", "-c", f"{null} -c madvise -n 500 -w 0; true"])):
        prof = tmp_path / f"{name}.json"
        assert run_cli("profile", "--out", str(prof), "--json", "--", *argv).returncode == 0
        doc = json.loads(prof.read_text())
        counts[name] = doc["tlb_shootdowns"]
        if os.geteuid() != 0:
            assert counts[name] is None and doc["tlb_shootdowns_why"]
    if os.geteuid() == 0:
        assert all(500 <= n < 2000 for n in counts.values()), counts
    plain = tmp_path / "plain.json"
    assert run_cli("run", "--profile", str(plain), "--", null, "-c", "madvise", "-n", "10").returncode == 0
    doc = json.loads(plain.read_text())
    assert doc["tlb_shootdowns"] is None and "--count-tlb-flushes" in doc["tlb_shootdowns_why"]


def test_sigkill_of_the_program_cleans_the_cell(tmp_path):
    # A duration no other test's sleep has, so that another test's program under the runtime is
    # never taken for this one's (it was, now and then, in a full `make test`).
    duration = f"30.{os.getpid()}"
    proc = subprocess.Popen(CLI + ["run", "--json", "--compute-cores", "1", "--control-cores", "0", "--delegate",
                                   "all", "--", "sleep", duration], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    victim = None
    while victim is None and time.time() < deadline:
        for pid in os.listdir("/proc"):
            try:
                argv = open(f"/proc/{pid}/cmdline").read().split("\0")
                if pid.isdigit() and os.readlink(f"/proc/{pid}/exe").endswith("coreplane-rt") and \
                        argv[0] == "sleep" and argv[1] == duration:
                    victim = int(pid)
            except (OSError, IndexError):
                continue
        time.sleep(0.05)
    assert victim, "the program never started"
    assert open(f"/proc/{victim}/status").read().split("Cpus_allowed_list:")[1].split()[0] == "1"
    os.kill(victim, signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    summary = json.loads(err.strip().splitlines()[-1])
    assert summary["signal"] == signal.SIGKILL and summary["cell"]
    live = json.loads(run_cli("cell", "list", "--json").stdout)["cells"]
    assert summary["cell"] not in [c["name"] for c in live]
    assert not Path(f"/sys/fs/cgroup/cpuset/coreplane/cell-{summary['cell']}").exists()


@pytest.mark.parametrize("args,message", [
    (["--delegate", "read,bogus"], "--delegate: unknown syscall 'bogus'"),
    (["--local", "nope"], "--local: unknown syscall 'nope'"),
    (["--compute-cores", "1", "--control-cores", "1"], "overlap on CPU 1"),
    (["--compute-cores", "4000", "--control-cores", "0"], "is not a CPU list"),
    (["--compute-cores", "63"], "CPU 63 does not exist or is not allowed"),
    (["--forward-cost", "-5"], "invalid value '-5' for '--forward-cost"),
    (["--time-every", "0"], "invalid value '0' for '--time-every"),
    (["--delegate-threads", "0"], "invalid value '0' for '--delegate-threads"),
])
def test_bad_options_are_one_line_and_leave_nothing(args, message):
    proc = subprocess.Popen(CLI + ["run", *args, "--", "true"], stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("coreplane: error: ") and message in lines[0], err
    # A cell made for this run would be named after its owner, the CLI process.
    assert not Path(f"/sys/fs/cgroup/cpuset/coreplane/cell-pid{proc.pid}").exists()
    assert not Path(f"/run/coreplane/cells/pid{proc.pid}.json").exists()


def test_policy_file_errors_name_the_line(tmp_path):
    policy = tmp_path / "policy.txt"
    policy.write_text("read, write  # I/O\n\nopenat\nfrobnicate\n")
    proc = run_cli("run", "--delegate", f"@{policy}", "--", "true")
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"coreplane: error: {policy}:4: unknown syscall 'frobnicate'"


def _unrunnable(tmp_path: Path, kind: str) -> Path:
    """A program the runtime must refuse as a shell would (see crates/exec/src/program.rs)."""
    p = tmp_path / kind
    if kind == "missing":
        return p
    if kind == "directory":
        p.mkdir()
        return p
    body = {"not-executable": b"#!/bin/sh\n", "bad-interpreter": b"#!/nonexistent/sh\necho hi\n",
            "elf32": b"\x7fELF\x01\x01" + bytes(58)}[kind]
    p.write_bytes(body)
    p.chmod(0o644 if kind == "not-executable" else 0o755)
    return p


@pytest.mark.parametrize("kind,status,reason", [
    ("missing", 127, "No such file or directory"),
    ("directory", 126, "Is a directory"),
    ("not-executable", 126, "Permission denied"),
    ("bad-interpreter", 127, "bad interpreter /nonexistent/sh"),
    ("elf32", 126, "32-bit ELF program"),
])
def test_unrunnable_program_exits_as_a_shell_would(tmp_path, kind, status, reason):
    prog = _unrunnable(tmp_path, kind)
    proc = subprocess.Popen(CLI + ["run", "--", str(prog)], stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"coreplane: error: {prog}: {reason}"), err
    assert not Path(f"/run/coreplane/cells/pid{proc.pid}.json").exists()


@pytest.mark.parametrize("body", [b"echo \"0=$0 1=$1\"; exit 3\n", b"", b"\x01\x02garbage)\n"])
def test_a_file_of_no_known_format_is_run_by_the_shell_as_execvp_runs_it(tmp_path, body):
    # Before: refused with 126 ("Exec format error"), where env, nohup and timeout run it by /bin/sh.
    prog = tmp_path / "script"
    prog.write_bytes(body)
    prog.chmod(0o755)
    native = subprocess.run(["env", str(prog), "x"], capture_output=True, text=True, timeout=60)
    proc = run_cli("run", "--", str(prog), "x")
    assert (proc.returncode, proc.stdout, proc.stderr) == (native.returncode, native.stdout, native.stderr)


def test_map_pins_tasks_by_clone_tree_key(tmp_path):
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"format": "coreplane-map/1", "placement": [
        {"task": "0", "cpus": [0]}, {"task": "0.0", "cpus": [1]}]}))
    show = "grep Cpus_allowed_list /proc/self/status | cut -f2"
    proc = run_cli("run", "--map", str(mapping), "--", "sh", "-c", f"{show}; {show}; exec {show}")
    assert proc.returncode == 0, proc.stderr
    # the first child (0.0) is placed on 1; the second (0.1) inherits the program's 0; exec keeps "0"
    assert proc.stdout.split() == ["1", "0", "0"]


def test_map_with_a_cpu_that_does_not_exist(tmp_path):
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"format": "coreplane-map/1", "placement": [{"task": "0.1", "cpus": [77]}]}))
    proc = run_cli("run", "--map", str(mapping), "--", "true")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("coreplane: error: --placement 0.1: CPU 77 does not exist or is not allowed "
                                   f"here (allowed: {','.join(map(str, sorted(os.sched_getaffinity(0))))})")


def test_profile_keeps_stdout_the_programs_and_its_json_apart(tmp_path):
    kept = tmp_path / "p.json"
    doc = tmp_path / "summary.json"
    proc = run_cli("profile", "--json", "--json-out", str(doc), "-o", str(kept), "--",
                   "sh", "-c", "echo out; echo err >&2; exit 4")
    assert (proc.returncode, proc.stdout) == (4, "out\n")
    summary = json.loads(proc.stderr.strip().splitlines()[-1])
    assert proc.stderr.startswith("err\n") and summary == json.loads(doc.read_text())
    assert summary["run"]["exit_status"] == 4 and summary["total"]["calls"] > 0
    profile = json.loads(kept.read_text())
    assert profile["format"] == "coreplane-profile/1" and profile["machine"] == identity()


def test_the_runtimes_own_calibration_is_never_delegated(tmp_path):
    # The runtime times getppid at process start to calibrate its interposition. With getppid
    # delegated at a 1 ms forward cost, those 128 calls went to the delegate: +256 ms in every
    # process, and an "interposition cost" that was a delegated round trip.
    prof = tmp_path / "p.json"
    proc = run_cli("run", "--delegate", "getppid", "--forward-cost", "1000000", "--profile", str(prof), "--", "true")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(prof.read_text())
    assert "getppid" not in {c["name"] for c in doc["syscalls"]}
    assert doc["overhead"]["interposed_call_ns"] < 100_000 and doc["wall_ns"] < 200_000_000, doc["overhead"]


def test_sites_are_rewritten_only_while_their_code_is_file_text(tmp_path):
    # The runtime remembers which ranges are file-backed text (reading /proc/self/maps is half
    # of a site's first call); the program remapping the same address must make it look again:
    # anonymous code is left alone, the same bytes mapped from a file are relocated, and
    # anonymous code mapped there afterwards is left alone again.
    exe = tmp_path / "remapped_code"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(PROGRAMS / "remapped_code.c")], check=True)
    native = subprocess.run([str(exe), str(tmp_path / "code.bin")], capture_output=True, text=True)
    assert native.stdout == "b8 b8 b8\n"
    proc = run_cli("run", "--rewrite-at", "1", "--", str(exe), str(tmp_path / "code.bin"))
    assert (proc.returncode, proc.stdout) == (0, "b8 e9 b8\n"), proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a set-user-ID program and become nobody")
def test_a_program_whose_exec_gives_privileges_is_named_in_a_warning():
    # Started by `coreplane run`, it is loaded by the runtime, not the kernel, and gets none of
    # them: said in one line, and it runs (before: silently without them, as ping then fails).
    where = Path(tempfile.mkdtemp(prefix="setuid-", dir="/tmp"))
    try:
        where.chmod(0o755)
        exe = where / "true"
        shutil.copy("/bin/true", exe)
        exe.chmod(0o4755)
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        proc = subprocess.run(nobody + CLI + ["run", "--", str(exe)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.count("\n") == 1 and f"warning: {exe} is set-user-ID" in proc.stderr, proc.stderr
        as_root = subprocess.run(CLI + ["run", "--", str(exe)], capture_output=True, text=True, timeout=60)
        assert (as_root.returncode, as_root.stderr) == (0, "")
    finally:
        shutil.rmtree(where)


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not on this machine")
@pytest.mark.parametrize("policy", ["none", "all"])
def test_cargo_builds_a_program(tmp_path, policy):
    # cargo and rustc died of SIGSEGV in every mode (helper-67's sweep, session 21): a Rust thread's
    # 8 KiB signal stack could not hold a trap's frame, the runtime's and a signal's (cargo wakes
    # its jobserver helper thread with SIGUSR1). No crate is fetched: --offline, no dependencies.
    project = tmp_path / "hello"
    subprocess.run(["cargo", "new", "-q", "--vcs", "none", str(project)], check=True, timeout=120)
    proc = run_cli("run", "--delegate", policy, "--", "cargo", "build", "-q", "--offline",
                   "--manifest-path", str(project / "Cargo.toml"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    built = subprocess.run([str(project / "target" / "debug" / "hello")], capture_output=True, text=True)
    assert built.stdout == "Hello, world!\n"
