"""The fast subset of the conformance corpus (tests/conformance/, `make conformance` runs it all):
programs of several runtimes natively and under `coreplane run --delegate none|all`, same exit
status and output; a few of strace's test programs when their build is cached; and the
comparison rule itself."""

import os
import sys

import pytest

from conftest import REPO
from conformance import real_programs, strace_suite
from conformance.compare import Case, Run, judge, mismatch

FAST = ["coreutils-sort-pipeline", "yes-head", "sigpipe-writer", "ps-pgrep-identity", "bash-job-control-traps",
        "perl-fork", "python-threads", "go-static", "go-cgo", "ripgrep-rust", "flock", "timeout-kill", "make-j2-gcc",
        "stress-ng-timer", "stress-ng-vforkmany"]
# strace programs of different kinds: plain calls, signals, pipes and fds, processes, threads.
STRACE_FAST = ["read-write", "pipe2", "dup3", "rt_sigaction", "kill", "sigaltstack", "fork-f", "vfork-f",
               "wait4", "futex", "clone_ptrace", "execve", "nanosleep", "sched_yield"]


@pytest.fixture(scope="module")
def programs():
    cases, _ = real_programs.cases()
    return {c.name: c for c in cases}


@pytest.mark.parametrize("name", FAST)
def test_real_program_behaves_as_natively(programs, name, tmp_path):
    if name not in programs:
        pytest.skip(f"{name}: toolchain missing on this machine")
    v = judge(programs[name], tmp_path)
    assert v.outcome == {"none": "pass", "all": "pass"}, v.reason


def test_strace_programs_behave_as_natively(tmp_path):
    tests = strace_suite.ROOT / "src"
    built = sorted(tests.glob("strace-*/tests/read-write"))
    if not built:
        pytest.skip("strace's test programs are not built (make conformance builds them)")
    cases = strace_suite.cases(STRACE_FAST)
    verdicts = [judge(c, tmp_path) for c in cases]
    compared = [v for v in verdicts if v.outcome["none"] != "skip"]
    assert len(compared) >= len(cases) // 2, [v.reason for v in verdicts]
    assert [(v.case, v.reason) for v in compared if set(v.outcome.values()) != {"pass"}] == []


def test_output_counts_only_where_two_native_runs_agree(tmp_path):
    pid = judge(Case("pid", ["sh", "-c", "echo $$; exit 3"]), tmp_path, confirm=False)
    assert not pid.output_compared and set(pid.outcome.values()) == {"pass"}
    assert judge(Case("same", ["sh", "-c", "echo same; exit 3"]), tmp_path, confirm=False).output_compared


def test_native_exit_77_is_a_skip_with_the_programs_reason(tmp_path):
    v = judge(Case("skipper", ["sh", "-c", "echo 'undefined: HAVE_X' >&2; exit 77"]), tmp_path)
    assert v.outcome == {"none": "skip", "all": "skip"} and "undefined: HAVE_X" in v.reason["none"]


def test_a_different_status_signal_or_output_is_a_difference():
    native = Run(-13, b"", b"")
    assert mismatch(native, Run(-13, b"", b""), True) == ""
    assert "exit 141" in mismatch(native, Run(141, b"", b"sort: write failed"), True)
    assert mismatch(Run(0, b"a", b""), Run(0, b"b", b""), True) == "stdout differs"
    assert mismatch(Run(0, b"a", b""), Run(0, b"b", b""), False) == ""
    assert "timed out" in mismatch(Run(0, b"", b""), Run(None, b"", b""), True)
